//! Launch failures: Machines that failed, or that did not get a providerID in time.
//!
//! The controller feeds these into its back-off cache, which makes the resource's offering
//! unavailable for a configurable window (like Karpenter's insufficient-capacity cache), so
//! the core stops choosing a resource whose launches fail.

use serde::{Deserialize, Serialize};

use crate::resource::{Binding, MachineKey, MachineView, ResourceId};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailureReason {
    /// The Machine controller reported a terminal failure.
    Failed(String),
    /// No providerID this many seconds after the Machine was created.
    NoProviderId { waited_secs: i64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchFailure {
    pub resource: ResourceId,
    pub machine: MachineKey,
    /// The NodeClaim it was bound to, if any.
    pub claim: Option<String>,
    pub reason: FailureReason,
}

/// Failed or stuck Machines of the given resources (deleting Machines are ignored: they are
/// on their way out whatever happened).
pub fn launch_failures(
    resources: &[ResourceId],
    machines: &[MachineView],
    now: i64,
    provider_id_timeout_secs: i64,
) -> Vec<LaunchFailure> {
    let mut out = Vec::new();
    for m in machines.iter().filter(|m| !m.deleting) {
        let Some(resource) = resources.iter().find(|r| m.belongs_to(r)) else {
            continue;
        };
        let reason = if let Some(f) = &m.failure {
            FailureReason::Failed(f.clone())
        } else if m.provider_id.is_none() && now - m.created_at > provider_id_timeout_secs {
            FailureReason::NoProviderId {
                waited_secs: now - m.created_at,
            }
        } else {
            continue;
        };
        out.push(LaunchFailure {
            resource: resource.clone(),
            machine: m.key(),
            claim: match m.binding() {
                Binding::Claim(c) => Some(c.to_string()),
                _ => None,
            },
            reason,
        });
    }
    out.sort_by(|a, b| (&a.resource, &a.machine).cmp(&(&b.resource, &b.machine)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys;
    use crate::resource::{MachineApi, ResourceKind};
    use std::collections::BTreeMap;

    #[test]
    fn failed_and_stuck_machines() {
        let id = ResourceId::new(ResourceKind::OpenShiftMachineSet, "ns", "ms");
        let m = |name: &str, created: i64| MachineView {
            api: MachineApi::OpenShift,
            namespace: "ns".into(),
            name: name.into(),
            uid: None,
            resource_version: None,
            labels: [(
                keys::openshift::MACHINESET_LABEL.to_string(),
                "ms".to_string(),
            )]
            .into(),
            annotations: BTreeMap::new(),
            created_at: created,
            deleting: false,
            provider_id: None,
            node_name: None,
            failure: None,
            version: None,
            failure_domain: None,
        };
        let mut failed = m("failed", 990);
        failed.failure = Some("InsufficientCapacity".into());
        let stuck = m("stuck", 0);
        let young = m("young", 950);
        let mut ok = m("ok", 0);
        ok.provider_id = Some("aws:///i-1".into());
        let fs = launch_failures(&[id], &[failed, stuck, young, ok], 1000, 600);
        assert_eq!(fs.len(), 2);
        assert_eq!(fs[0].machine.name, "failed");
        assert!(matches!(
            fs[1].reason,
            FailureReason::NoProviderId { waited_secs: 1000 }
        ));
    }
}
