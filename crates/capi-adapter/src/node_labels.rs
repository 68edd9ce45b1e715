//! The labels and taints a scalable resource's nodes will carry, as CAS builds them for its
//! node template.
//!
//! Labels, later wins: `kubernetes.io/arch` / `kubernetes.io/os` (the infrastructure
//! template's `status.nodeInfo`, else `amd64` / `linux`, CAS' defaults); the machine
//! template's labels that reach the Node (CAPI: `GetManagedLabels` of
//! `spec.template.metadata.labels`; OpenShift: `spec.template.spec.metadata.labels`); the
//! region of an OpenShift providerSpec; the CAS `labels` annotation; a running node's
//! architecture, OS, instance type, region and zone labels (CAS puts these last too).
//!
//! Taints: the machine template's `spec.template.spec.taints`, then the `taints` annotation
//! (same key and effect: the annotation wins, as in CAS). Every label and taint is validated
//! as Kubernetes validates a Node's; bad ones are reported and skipped, except taints, which
//! are kept conservatively ([`crate::parse::parse_taints`]).

use std::collections::BTreeMap;

use provisioner_core::{Taint, TaintEffect, labels as wk};

use crate::keys;
use crate::node::NodeSample;
use crate::parse::{self, BadEntry, ValueError};
use crate::problem::Problem;
use crate::resource::{ObjectRef, ScalableResource};

/// The labels declared for the group's nodes, before a running node's are applied (the zone
/// is resolved from these and the node separately).
pub fn declared_labels(
    r: &ScalableResource,
    node_info: impl Fn(&str) -> Option<String>,
    provider_region: Option<&str>,
    problems: &mut Vec<Problem>,
) -> BTreeMap<String, String> {
    let obj = ObjectRef::from(&r.id);
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    labels.insert(
        wk::ARCH.into(),
        node_info("architecture").unwrap_or_else(|| "amd64".into()),
    );
    labels.insert(
        wk::OS.into(),
        node_info("operatingSystem").unwrap_or_else(|| "linux".into()),
    );
    let template_key = match r.id.kind.machine_api() {
        crate::MachineApi::Capi => "spec.template.metadata.labels",
        crate::MachineApi::OpenShift => "spec.template.spec.metadata.labels",
    };
    for (k, v) in &r.template.node_labels {
        match parse::validate_key(k).and_then(|()| parse::validate_value(v)) {
            Ok(()) => {
                labels.insert(k.clone(), v.clone());
            }
            Err(e) => problems.push(Problem::entry(
                obj.clone(),
                template_key,
                BadEntry {
                    entry: parse::clip(&format!("{k}={v}")),
                    error: e,
                },
            )),
        }
    }
    if let Some(region) = provider_region {
        labels.insert(wk::REGION.into(), region.to_string());
    }
    if let Some(v) = r.annotations.get(keys::cas::LABELS) {
        let parsed = parse::parse_labels(v);
        labels.extend(parsed.value);
        problems.extend(
            parsed
                .bad
                .into_iter()
                .map(|b| Problem::entry(obj.clone(), keys::cas::LABELS, b)),
        );
    }
    labels
}

/// A running node's labels over the declared ones (CAS' order), validated.
pub fn apply_node(labels: &mut BTreeMap<String, String>, node: Option<&NodeSample>) {
    if let Some(n) = node {
        for (k, v) in n.template_labels() {
            if parse::is_label_value(&v) {
                labels.insert(k, v);
            }
        }
    }
}

/// Karpenter's registration taint. The guides put it in the template (on OpenShift,
/// `spec.template.spec.taints`) so that new nodes join with it; the controller removes it at
/// registration, so it is no taint of the node shape: a pod need not tolerate it.
const REGISTRATION_TAINT: &str = "karpenter.sh/unregistered";

/// The group's taints: the template's, then the annotation's (without the registration
/// taint).
pub fn taints(r: &ScalableResource, problems: &mut Vec<Problem>) -> Vec<Taint> {
    let obj = ObjectRef::from(&r.id);
    let mut taints: Vec<Taint> = Vec::new();
    let mut put = |t: Taint| {
        if t.key == REGISTRATION_TAINT {
            return;
        }
        taints.retain(|x| !(x.key == t.key && x.effect == t.effect));
        taints.push(t);
    };
    for t in &r.template.taints {
        let entry = || match &t.value {
            Some(v) => format!("{}={}:{}", t.key, v, t.effect),
            None => format!("{}:{}", t.key, t.effect),
        };
        if parse::validate_key(&t.key).is_err() {
            problems.push(Problem::entry(
                obj.clone(),
                "spec.template.spec.taints",
                BadEntry {
                    entry: parse::clip(&entry()),
                    error: ValueError::InvalidKey(parse::clip(&t.key)),
                },
            ));
            put(parse::unparsed_taint());
            continue;
        }
        let effect = parse::parse_taint_effect(&t.effect).unwrap_or_else(|| {
            problems.push(Problem::entry(
                obj.clone(),
                "spec.template.spec.taints",
                BadEntry {
                    entry: parse::clip(&entry()),
                    error: ValueError::UnknownTaintEffect {
                        taint: parse::clip(&entry()),
                        effect: parse::clip(&t.effect),
                    },
                },
            ));
            TaintEffect::NoSchedule
        });
        let value = match &t.value {
            Some(v) if !parse::is_label_value(v) => {
                problems.push(Problem::entry(
                    obj.clone(),
                    "spec.template.spec.taints",
                    BadEntry {
                        entry: parse::clip(&entry()),
                        error: ValueError::InvalidValue(parse::clip(v)),
                    },
                ));
                None
            }
            v => v.clone(),
        };
        put(Taint {
            key: t.key.clone(),
            value,
            effect,
        });
    }
    if let Some(v) = r.annotations.get(keys::cas::TAINTS) {
        let parsed = parse::parse_taints(v);
        for t in parsed.value {
            put(t);
        }
        problems.extend(
            parsed
                .bad
                .into_iter()
                .map(|b| Problem::entry(obj.clone(), keys::cas::TAINTS, b)),
        );
    }
    taints.sort();
    taints
}
