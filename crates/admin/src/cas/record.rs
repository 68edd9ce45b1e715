//! The hand-off record: everything `cas disable` changed, so `cas enable` can put it back
//! exactly. A ConfigMap named [`RECORD_NAME`] in our namespace (workload cluster):
//!
//! ```yaml
//! data:
//!   format: karpenter-capi/cas-handoff/v1
//!   phase: disabling | disabled | enabling
//!   record.json: |
//!     {"deployments": [{"cluster": "workload", "namespace": "kube-system",
//!                       "name": "cluster-autoscaler", "replicas": 1}],
//!      "clusterAutoscaler": { ...the object as the API returned it... } | null,
//!      "machineAutoscalers": [ { ...each object as returned... } ],
//!      "annotations": [{"resource": "MachineSet.machine.openshift.io/ns/name",
//!                       "removed": {"machine.openshift.io/cluster-api-autoscaler-node-group-max-size": "5"}}]}
//! ```
//!
//! It is written *before* each change (phase `disabling`), and entries already recorded are
//! never overwritten, so a rerun after a crash keeps the original values even though the
//! cluster then shows the half-changed state. `enable` deletes it when done.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

use crate::Error;

pub const RECORD_NAME: &str = "karpenter-capi-cas-handoff";
pub const FORMAT: &str = "karpenter-capi/cas-handoff/v1";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffRecord {
    #[serde(default)]
    pub deployments: Vec<DeploymentRecord>,
    #[serde(default)]
    pub cluster_autoscaler: Option<serde_json::Value>,
    #[serde(default)]
    pub machine_autoscalers: Vec<serde_json::Value>,
    #[serde(default)]
    pub annotations: Vec<AnnotationRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentRecord {
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnnotationRecord {
    pub resource: String,
    pub removed: BTreeMap<String, String>,
}

fn ns_name(v: &serde_json::Value) -> (String, String) {
    let s = |p: &str| {
        v.pointer(p)
            .and_then(|x| x.as_str())
            .unwrap_or("")
            .to_string()
    };
    (s("/metadata/namespace"), s("/metadata/name"))
}

impl HandoffRecord {
    /// Adds what `other` has and `self` lacks; never overwrites a recorded value.
    pub fn merge_new(&mut self, other: HandoffRecord) {
        for d in other.deployments {
            if !self
                .deployments
                .iter()
                .any(|x| x.cluster == d.cluster && x.namespace == d.namespace && x.name == d.name)
            {
                self.deployments.push(d);
            }
        }
        if self.cluster_autoscaler.is_none() {
            self.cluster_autoscaler = other.cluster_autoscaler;
        }
        for m in other.machine_autoscalers {
            if !self
                .machine_autoscalers
                .iter()
                .any(|x| ns_name(x) == ns_name(&m))
            {
                self.machine_autoscalers.push(m);
            }
        }
        for a in other.annotations {
            match self
                .annotations
                .iter_mut()
                .find(|x| x.resource == a.resource)
            {
                Some(existing) => {
                    for (k, v) in a.removed {
                        existing.removed.entry(k).or_insert(v);
                    }
                }
                None => self.annotations.push(a),
            }
        }
    }

    pub fn has_deployment(&self, cluster: &str, ns: &str, name: &str) -> bool {
        self.deployments
            .iter()
            .any(|d| d.cluster == cluster && d.namespace == ns && d.name == name)
    }

    pub fn has_machine_autoscaler(&self, ns: &str, name: &str) -> bool {
        self.machine_autoscalers
            .iter()
            .any(|m| ns_name(m) == (ns.to_string(), name.to_string()))
    }

    pub fn annotations_of(&self, resource: &str) -> Option<&BTreeMap<String, String>> {
        self.annotations
            .iter()
            .find(|a| a.resource == resource)
            .map(|a| &a.removed)
    }
}

/// A stored record and its phase.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub phase: String,
    pub record: HandoffRecord,
}

pub async fn read(client: &Client, namespace: &str) -> Result<Option<Stored>, Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Some(cm) = api.get_opt(RECORD_NAME).await? else {
        return Ok(None);
    };
    let where_ = format!("ConfigMap {namespace}/{RECORD_NAME}");
    let data = cm.data.unwrap_or_default();
    if data.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(Error::BadRecord(where_, format!("format is not {FORMAT}")));
    }
    let record: HandoffRecord = serde_json::from_str(data.get("record.json").map_or("", |s| s))
        .map_err(|e| Error::BadRecord(where_.clone(), e.to_string()))?;
    Ok(Some(Stored {
        phase: data.get("phase").cloned().unwrap_or_default(),
        record,
    }))
}

/// Creates or replaces the record (creating the namespace if needed).
pub async fn write(
    client: &Client,
    namespace: &str,
    phase: &str,
    record: &HandoffRecord,
) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(namespace).await?.is_none() {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => return Err(e.into()),
        }
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(RECORD_NAME.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_string(),
                    "karpenter-capi".to_string(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        data: Some(
            [
                ("format".to_string(), FORMAT.to_string()),
                ("phase".to_string(), phase.to_string()),
                (
                    "record.json".to_string(),
                    serde_json::to_string_pretty(record)?,
                ),
            ]
            .into(),
        ),
        ..ConfigMap::default()
    };
    match api.get_opt(RECORD_NAME).await? {
        None => {
            api.create(&PostParams::default(), &cm).await?;
        }
        Some(existing) => {
            let mut cm = cm;
            cm.metadata.resource_version = existing.metadata.resource_version;
            api.replace(RECORD_NAME, &PostParams::default(), &cm)
                .await?;
        }
    }
    Ok(())
}

pub async fn delete(client: &Client, namespace: &str) -> Result<(), Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    match api.delete(RECORD_NAME, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_never_overwrites_recorded_values() {
        let mut a = HandoffRecord {
            deployments: vec![DeploymentRecord {
                cluster: "workload".into(),
                namespace: "kube-system".into(),
                name: "ca".into(),
                replicas: 2,
            }],
            annotations: vec![AnnotationRecord {
                resource: "r".into(),
                removed: [("max".to_string(), "5".to_string())].into(),
            }],
            ..Default::default()
        };
        let b = HandoffRecord {
            deployments: vec![DeploymentRecord {
                cluster: "workload".into(),
                namespace: "kube-system".into(),
                name: "ca".into(),
                replicas: 0,
            }],
            annotations: vec![AnnotationRecord {
                resource: "r".into(),
                removed: [
                    ("max".to_string(), "9".to_string()),
                    ("min".to_string(), "1".to_string()),
                ]
                .into(),
            }],
            cluster_autoscaler: Some(serde_json::json!({"metadata": {"name": "default"}})),
            ..Default::default()
        };
        a.merge_new(b);
        assert_eq!(a.deployments.len(), 1);
        assert_eq!(a.deployments[0].replicas, 2);
        let r = a.annotations_of("r").unwrap();
        assert_eq!(r["max"], "5");
        assert_eq!(r["min"], "1");
        assert!(a.cluster_autoscaler.is_some());
    }
}
