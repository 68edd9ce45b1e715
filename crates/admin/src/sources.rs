//! Where each capacity value of a scalable resource comes from.
//!
//! The adapter applies a fixed precedence (DESIGN.md section 4: CAS annotations, then
//! OpenShift's, then the infrastructure template's `status.capacity`) but only returns the
//! result. An admin needs the *source* to know what to fix, so this module names the winning
//! source of each value by the same precedence; a unit test feeds every source to the adapter
//! and checks both agree, so the two cannot drift apart silently.

use capi_adapter::instance_types::TemplateLookup;
use capi_adapter::{MachineApi, ScalableResource, Templates, keys};
use serde::Serialize;

/// One capacity value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourcedValue {
    /// `cpu`, `memory`, `ephemeral-storage`, `pods`, `gpu`.
    pub resource: String,
    /// The raw value as written at the source (`"4"`, `"16384"` MiB, `"8Gi"`); `None` when
    /// nothing provides it.
    pub value: Option<String>,
    /// Human description: `annotation <key>`, `template <Kind ns/name> status.capacity.cpu`,
    /// `default (CAS: 110)`, or `missing`.
    pub source: String,
    /// The value is missing and the resource cannot be used without it.
    pub required_missing: bool,
}

enum Src {
    Annotation(&'static str),
    Template(&'static str),
}

/// The precedence order of each capacity value, as the adapter reads it.
fn precedence(resource: &str) -> &'static [Src] {
    match resource {
        "cpu" => &[
            Src::Annotation(keys::cas::CPU),
            Src::Annotation(keys::openshift::VCPU),
            Src::Template("cpu"),
        ],
        "memory" => &[
            Src::Annotation(keys::cas::MEMORY),
            Src::Annotation(keys::openshift::MEMORY_MB),
            Src::Template("memory"),
        ],
        "ephemeral-storage" => &[
            Src::Annotation(keys::cas::EPHEMERAL_DISK),
            Src::Template("ephemeral-storage"),
        ],
        "pods" => &[
            Src::Annotation(keys::cas::MAX_PODS),
            Src::Annotation(keys::openshift::MAX_PODS),
            Src::Template("pods"),
        ],
        "gpu" => &[
            Src::Annotation(keys::cas::GPU_COUNT),
            Src::Annotation(keys::openshift::GPU),
        ],
        _ => &[],
    }
}

pub const RESOURCES: [&str; 5] = ["cpu", "memory", "ephemeral-storage", "pods", "gpu"];

/// The template's `status.capacity[name]` as a string, if the template was found and has it.
pub fn template_capacity(
    r: &ScalableResource,
    templates: &Templates,
    name: &str,
) -> Option<(String, String)> {
    let iref = r.template.infrastructure_ref.as_ref()?;
    let TemplateLookup::Found(t) = templates.get(iref)? else {
        return None;
    };
    let v = t.data.pointer(&format!("/status/capacity/{name}"))?;
    let s = match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some((iref.object_ref().to_string(), s))
}

/// The winning source of every capacity value of `r`.
pub fn capacity_sources(r: &ScalableResource, templates: &Templates) -> Vec<SourcedValue> {
    RESOURCES
        .iter()
        .map(|res| {
            for src in precedence(res) {
                match src {
                    Src::Annotation(key) => {
                        if let Some(v) = r.annotations.get(*key) {
                            return SourcedValue {
                                resource: res.to_string(),
                                value: Some(v.clone()),
                                source: format!("annotation {key}"),
                                required_missing: false,
                            };
                        }
                    }
                    Src::Template(name) => {
                        if let Some((obj, v)) = template_capacity(r, templates, name) {
                            return SourcedValue {
                                resource: res.to_string(),
                                value: Some(v),
                                source: format!("template {obj} status.capacity.{name}"),
                                required_missing: false,
                            };
                        }
                    }
                }
            }
            let (source, required) = match *res {
                "pods" => match r.id.kind.machine_api() {
                    MachineApi::Capi => (
                        format!("default ({} as CAS)", keys::cas::DEFAULT_MAX_PODS),
                        false,
                    ),
                    MachineApi::OpenShift => (
                        format!(
                            "default ({} as OpenShift)",
                            keys::openshift::DEFAULT_MAX_PODS
                        ),
                        false,
                    ),
                },
                "ephemeral-storage" => {
                    ("missing (0: pods requesting it will not fit)".into(), false)
                }
                "gpu" => ("none".into(), false),
                _ => ("missing".into(), true),
            };
            SourcedValue {
                resource: res.to_string(),
                value: None,
                source,
                required_missing: required,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use capi_adapter::objects::openshift;
    use capi_adapter::{NodeClassSettings, instance_types};
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

    use super::*;

    fn os_resource(annotations: &[(&str, &str)]) -> ScalableResource {
        let mut ms = openshift::MachineSet::default();
        ms.metadata.name = Some("ms".into());
        ms.metadata.namespace = Some("ns".into());
        ms.metadata.labels =
            Some([(keys::capi::KARPENTER_MEMBER.to_string(), String::new())].into());
        ms.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        ScalableResource::from(&ms)
    }

    fn adapter_capacity(
        r: &ScalableResource,
        templates: &Templates,
    ) -> provisioner_core::Resources {
        let cat = instance_types(
            std::slice::from_ref(r),
            templates,
            &NodeClassSettings::default(),
            0,
            &BTreeMap::new(),
        );
        assert!(cat.problems.is_empty(), "{:?}", cat.problems);
        cat.instance_types[0].capacity.clone()
    }

    #[test]
    fn cas_annotation_wins_over_openshift_like_the_adapter() {
        let r = os_resource(&[
            (keys::cas::CPU, "8"),
            (keys::openshift::VCPU, "4"),
            (keys::openshift::MEMORY_MB, "16384"),
        ]);
        let s = capacity_sources(&r, &Templates::new());
        assert_eq!(s[0].source, format!("annotation {}", keys::cas::CPU));
        assert_eq!(
            s[1].source,
            format!("annotation {}", keys::openshift::MEMORY_MB)
        );
        let cap = adapter_capacity(&r, &Templates::new());
        assert_eq!(cap.cpu_milli, 8000);
        assert_eq!(cap.memory, 16384 << 20);
        assert_eq!(s[3].source, "default (250 as OpenShift)");
        assert_eq!(cap.pods, 250);
    }

    #[test]
    fn template_capacity_is_named_when_no_annotation() {
        use capi_adapter::objects::capi;
        let md = capi::MachineDeployment {
            metadata: kube::api::ObjectMeta {
                name: Some("md".into()),
                namespace: Some("ns".into()),
                labels: Some([(keys::capi::KARPENTER_MEMBER.to_string(), String::new())].into()),
                annotations: Some([(keys::cas::MEMORY.to_string(), "8Gi".to_string())].into()),
                ..Default::default()
            },
            spec: capi::MachineDeploymentSpec {
                template: capi::MachineTemplateSpec {
                    spec: capi::MachineSpec {
                        infrastructure_ref: capi::ContractReference {
                            api_group: Some("infrastructure.cluster.x-k8s.io".into()),
                            kind: "DockerMachineTemplate".into(),
                            name: "t".into(),
                            ..Default::default()
                        },
                        ..Default::default()
                    },
                    ..Default::default()
                },
                ..Default::default()
            },
            types: None,
            status: None,
        };
        let r = ScalableResource::from(&md);
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "DockerMachineTemplate",
        ));
        let mut obj = DynamicObject::new("t", &ar).within("ns");
        obj.data = serde_json::json!({"status": {"capacity": {"cpu": "6", "memory": "4Gi"}}});
        let mut templates = Templates::new();
        templates.insert(
            r.template.infrastructure_ref.clone().unwrap(),
            TemplateLookup::Found(Box::new(obj)),
        );
        let s = capacity_sources(&r, &templates);
        assert_eq!(
            s[0].source,
            "template DockerMachineTemplate.infrastructure.cluster.x-k8s.io ns/t status.capacity.cpu"
        );
        assert_eq!(s[0].value.as_deref(), Some("6"));
        assert_eq!(s[1].source, format!("annotation {}", keys::cas::MEMORY));
        let cap = adapter_capacity(&r, &templates);
        assert_eq!(cap.cpu_milli, 6000);
        assert_eq!(cap.memory, 8 << 30);
        assert_eq!(cap.pods, 110);
    }

    #[test]
    fn missing_cpu_is_required() {
        let r = os_resource(&[(keys::openshift::MEMORY_MB, "1024")]);
        let s = capacity_sources(&r, &Templates::new());
        assert!(s[0].required_missing);
        assert_eq!(s[0].source, "missing");
        assert!(!s[1].required_missing);
    }
}
