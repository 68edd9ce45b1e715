//! Drift: a Machine made from an older version of its resource's template.
//!
//! Sources, strongest first:
//! - MachineDeployment: the Machine's MachineSet is not the newest by CAPI's revision
//!   annotation (`machinedeployment.clusters.x-k8s.io/revision`): CAPI itself considers it
//!   outdated.
//! - Our template digest recorded on the Machine at binding time
//!   (`karpenter.cluster.x-k8s.io/template-hash`) differs from the resource's current one.
//! - The Machine's Kubernetes version or failure domain differs from the template's.
//!
//! With the NodeClass drift policy `CAPIRollout` nothing is reported (upstream issue #61):
//! CAPI's own rollouts replace the Machines.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::keys;
use crate::nodeclass::DriftPolicy;
use crate::objects::capi;
use crate::resource::{MachineView, ResourceKind, ScalableResource};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DriftReason {
    /// The Machine's MachineSet has an older rollout revision than the newest one.
    OldRevision {
        machine_set: String,
        revision: i64,
        newest: i64,
    },
    TemplateChanged {
        recorded: String,
        current: String,
    },
    VersionChanged {
        machine: String,
        template: String,
    },
    FailureDomainChanged {
        machine: String,
        template: String,
    },
}

/// Rollout revisions of a MachineDeployment's MachineSets (name -> revision).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Revisions(pub BTreeMap<String, i64>);

impl Revisions {
    /// Reads the revision annotation of the MachineSets owned by `deployment` (by CAPI's
    /// deployment-name label); sets without a parsable revision are ignored.
    pub fn of(deployment: &str, namespace: &str, sets: &[capi::MachineSet]) -> Self {
        Revisions(
            sets.iter()
                .filter(|s| s.metadata.namespace.as_deref() == Some(namespace))
                .filter(|s| {
                    s.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(keys::capi::DEPLOYMENT_NAME))
                        .map(String::as_str)
                        == Some(deployment)
                })
                .filter_map(|s| {
                    let rev = s
                        .metadata
                        .annotations
                        .as_ref()?
                        .get(keys::capi::REVISION)?
                        .parse::<i64>()
                        .ok()?;
                    Some((s.metadata.name.clone()?, rev))
                })
                .collect(),
        )
    }
}

/// Whether a Machine has drifted from its resource's current template.
pub fn drift(
    machine: &MachineView,
    resource: &ScalableResource,
    policy: DriftPolicy,
    revisions: Option<&Revisions>,
) -> Option<DriftReason> {
    if policy == DriftPolicy::CAPIRollout || machine.deleting {
        return None;
    }
    if resource.id.kind == ResourceKind::MachineDeployment
        && let Some(revs) = revisions
        && let Some(newest) = revs.0.values().max().copied()
        && let Some(set) = machine.labels.get(keys::capi::SET_NAME)
        && let Some(rev) = revs.0.get(set).copied()
        && rev < newest
    {
        return Some(DriftReason::OldRevision {
            machine_set: set.clone(),
            revision: rev,
            newest,
        });
    }
    if let Some(recorded) = machine.annotations.get(keys::ours::TEMPLATE_HASH) {
        let current = resource.template_hash();
        if *recorded != current {
            return Some(DriftReason::TemplateChanged {
                recorded: recorded.clone(),
                current,
            });
        }
    }
    if let (Some(m), Some(t)) = (&machine.version, &resource.template.version)
        && m != t
    {
        return Some(DriftReason::VersionChanged {
            machine: m.clone(),
            template: t.clone(),
        });
    }
    if let (Some(m), Some(t)) = (&machine.failure_domain, &resource.template.failure_domain)
        && m != t
    {
        return Some(DriftReason::FailureDomainChanged {
            machine: m.clone(),
            template: t.clone(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::capi::{MachineDeployment, MachineSet};
    use crate::resource::MachineApi;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn md(version: &str) -> ScalableResource {
        let mut md = MachineDeployment::default();
        md.metadata.name = Some("md".into());
        md.metadata.namespace = Some("ns".into());
        md.spec.template.spec.version = Some(version.into());
        md.spec.template.spec.infrastructure_ref.name = "tmpl".into();
        ScalableResource::from(&md)
    }

    fn machine(set: &str) -> MachineView {
        MachineView {
            api: MachineApi::Capi,
            namespace: "ns".into(),
            name: "m".into(),
            uid: None,
            resource_version: None,
            labels: [(keys::capi::SET_NAME.to_string(), set.to_string())].into(),
            annotations: BTreeMap::new(),
            created_at: 0,
            deleting: false,
            provider_id: None,
            node_name: None,
            failure: None,
            provisioning_error: None,
            version: Some("v1.35.0".into()),
            failure_domain: None,
        }
    }

    #[test]
    fn template_hash_detects_changes() {
        let old = md("v1.35.0");
        let mut m = machine("s1");
        m.annotations
            .insert(keys::ours::TEMPLATE_HASH.into(), old.template_hash());
        assert_eq!(drift(&m, &old, DriftPolicy::Karpenter, None), None);
        let new = md("v1.35.1");
        assert!(matches!(
            drift(&m, &new, DriftPolicy::Karpenter, None),
            Some(DriftReason::TemplateChanged { .. })
        ));
        assert_eq!(drift(&m, &new, DriftPolicy::CAPIRollout, None), None);
        // Without our digest the version still tells.
        m.annotations.clear();
        assert!(matches!(
            drift(&m, &new, DriftPolicy::Karpenter, None),
            Some(DriftReason::VersionChanged { .. })
        ));
    }

    #[test]
    fn old_revisions_drift() {
        let set = |name: &str, rev: &str| MachineSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: Some([(keys::capi::DEPLOYMENT_NAME.to_string(), "md".to_string())].into()),
                annotations: Some([(keys::capi::REVISION.to_string(), rev.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let revs = Revisions::of("md", "ns", &[set("s1", "1"), set("s2", "2")]);
        let r = md("v1.35.0");
        assert!(matches!(
            drift(&machine("s1"), &r, DriftPolicy::Karpenter, Some(&revs)),
            Some(DriftReason::OldRevision { newest: 2, .. })
        ));
        assert_eq!(
            drift(&machine("s2"), &r, DriftPolicy::Karpenter, Some(&revs)),
            None
        );
    }
}
