//! Launch failures: Machines that failed, whose infrastructure reports the cloud out of
//! capacity ([`crate::capacity_errors`]), or that did not get a providerID in time.
//!
//! The controller feeds these into its back-off cache, which makes the resource's offering
//! unavailable for a configurable window (like Karpenter's insufficient-capacity cache), so
//! the core stops choosing a resource whose launches fail.

use serde::{Deserialize, Serialize};

use crate::capacity_errors::CapacityErrors;
use crate::resource::{Binding, MachineKey, MachineView, ResourceId};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailureReason {
    /// The Machine controller reported a terminal failure.
    Failed(String),
    /// The infrastructure provider, still retrying, reports an error naming a capacity code
    /// (`code`); `message` is what it wrote.
    OutOfCapacity { code: String, message: String },
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

impl std::fmt::Display for FailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailureReason::Failed(why) => write!(f, "failed: {why}"),
            FailureReason::OutOfCapacity { code, message } => {
                write!(f, "out of capacity ({code}): {message}")
            }
            FailureReason::NoProviderId { waited_secs } => {
                write!(f, "no providerID after {waited_secs}s")
            }
        }
    }
}

/// Failed or stuck Machines of the given resources (deleting Machines are ignored: they are
/// on their way out whatever happened). A Machine with a providerID has an instance, so its
/// infrastructure's error (a stale condition) is not read as a failed launch.
pub fn launch_failures(
    resources: &[ResourceId],
    machines: &[MachineView],
    now: i64,
    provider_id_timeout_secs: i64,
    capacity: &CapacityErrors,
) -> Vec<LaunchFailure> {
    let mut out = Vec::new();
    for m in machines.iter().filter(|m| !m.deleting) {
        let Some(resource) = resources.iter().find(|r| m.belongs_to(r)) else {
            continue;
        };
        let out_of_capacity = m
            .provisioning_error
            .as_deref()
            .filter(|_| m.provider_id.is_none())
            .and_then(|e| capacity.find(e).map(|code| (code, e)));
        let reason = if let Some(f) = &m.failure {
            FailureReason::Failed(f.clone())
        } else if let Some((code, message)) = out_of_capacity {
            FailureReason::OutOfCapacity {
                code: code.to_string(),
                message: message.to_string(),
            }
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
            provisioning_error: None,
            version: None,
            failure_domain: None,
        };
        let mut failed = m("failed", 990);
        failed.failure = Some("InsufficientCapacity".into());
        let stuck = m("stuck", 0);
        let young = m("young", 950);
        let mut ok = m("ok", 0);
        ok.provider_id = Some("aws:///i-1".into());
        let fs = launch_failures(
            std::slice::from_ref(&id),
            &[failed, stuck, young.clone(), ok.clone()],
            1000,
            600,
            &CapacityErrors::default(),
        );
        assert_eq!(fs.len(), 2);
        assert_eq!(fs[0].machine.name, "failed");
        assert!(matches!(
            fs[1].reason,
            FailureReason::NoProviderId { waited_secs: 1000 }
        ));

        // A young Machine whose provider retries an out-of-capacity error fails now; one
        // retrying anything else waits for the timeout; one with an instance is not read.
        let mut ice = young.clone();
        ice.name = "ice".into();
        ice.provisioning_error =
            Some("InstanceProvisionFailed: InsufficientInstanceCapacity: none".into());
        let mut throttled = young;
        throttled.name = "throttled".into();
        throttled.provisioning_error = Some("RequestLimitExceeded: slow down".into());
        let mut stale = ok;
        stale.name = "stale".into();
        stale.provisioning_error = ice.provisioning_error.clone();
        let machines = [ice, throttled, stale];
        let fs = launch_failures(
            std::slice::from_ref(&id),
            &machines,
            1000,
            600,
            &CapacityErrors::default(),
        );
        assert_eq!(fs.len(), 1, "{fs:?}");
        assert_eq!(fs[0].machine.name, "ice");
        assert_eq!(
            fs[0].reason.to_string(),
            "out of capacity (InsufficientInstanceCapacity): InstanceProvisionFailed: \
             InsufficientInstanceCapacity: none"
        );
        let none = launch_failures(&[id], &machines, 1000, 600, &CapacityErrors::none());
        assert!(none.is_empty(), "{none:?}");
    }
}
