//! The simulated kube-scheduler's filter: can this pod run on this node now?
//!
//! The engine binds pods itself (as the kube-scheduler would) and the Cluster-Autoscaler-like
//! baseline simulates scheduling with the same filter. Label, selector, requirement and taint
//! matching and request arithmetic are the core's (`provisioner_core`), so these checks agree
//! with the scheduling simulation; what is here is the per-node bookkeeping: resources in use,
//! host-level pod anti-affinity, and topology spread / pod affinity counted over the live
//! cluster.

use std::collections::BTreeMap;

use provisioner_core as core;
use provisioner_core::requirements::terms_match;
use provisioner_core::taints::tolerates_all;

/// What the filter needs to know about a node.
#[derive(Debug, Clone)]
pub struct NodeView {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<core::Taint>,
    pub allocatable: core::Resources,
    /// Requests of everything bound (daemonset pods included) plus pods nominated to it.
    pub used: core::Resources,
    /// Labels and namespaces of the pods bound or nominated to it (for affinity and spread).
    pub pods: Vec<PodMark>,
    /// Takes new pods (ready and not being disrupted).
    pub schedulable: bool,
    /// Exists at all (counts as a topology domain).
    pub live: bool,
}

/// A pod as seen by another pod's affinity or spread.
#[derive(Debug, Clone)]
pub struct PodMark {
    pub id: usize,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub daemon: bool,
}

/// Whether a pod has constraints that involve other pods.
pub fn has_inter_pod_constraints(pod: &core::Pod) -> bool {
    !pod.topology_spread.is_empty()
        || !pod.pod_affinity.required.is_empty()
        || !pod.pod_anti_affinity.required.is_empty()
}

/// Node-local checks: selector, required node affinity, taints, resources.
pub fn fits_node(pod: &core::Pod, req: &core::Resources, n: &NodeView) -> bool {
    if !n.schedulable {
        return false;
    }
    if !pod
        .node_selector
        .iter()
        .all(|(k, v)| n.labels.get(k) == Some(v))
    {
        return false;
    }
    if !pod.required_node_affinity.is_empty()
        && !terms_match(&pod.required_node_affinity, &n.labels)
    {
        return false;
    }
    if !tolerates_all(&n.taints, &pod.tolerations, false) {
        return false;
    }
    req.fits_with(&n.used, &n.allocatable)
}

fn term_selects(term: &core::PodAffinityTerm, owner: &core::Pod, other: &PodMark) -> bool {
    if other.daemon {
        return false;
    }
    let ns_ok = if term.namespace_selector.is_some() {
        true
    } else if term.namespaces.is_empty() {
        other.namespace == owner.namespace
    } else {
        term.namespaces.contains(&other.namespace)
    };
    ns_ok
        && term
            .label_selector
            .with_match_label_keys(&term.match_label_keys, &owner.labels)
            .matches(&other.labels)
}

/// Full check including inter-pod constraints against the whole cluster.
pub fn fits(pod: &core::Pod, req: &core::Resources, n: &NodeView, all: &[NodeView]) -> bool {
    if !fits_node(pod, req, n) {
        return false;
    }
    if !has_inter_pod_constraints(pod) {
        return true;
    }
    // Required anti-affinity: no selected pod in the candidate's domain.
    for term in &pod.pod_anti_affinity.required {
        let Some(dom) = n.labels.get(&term.topology_key) else {
            continue;
        };
        let clash = all
            .iter()
            .filter(|o| o.live && o.labels.get(&term.topology_key) == Some(dom))
            .any(|o| o.pods.iter().any(|p| term_selects(term, pod, p)));
        if clash {
            return false;
        }
    }
    // Required affinity: a selected pod in the domain, or none anywhere and the pod selects
    // itself (the first pod of a self-affine group may go anywhere).
    for term in &pod.pod_affinity.required {
        let Some(dom) = n.labels.get(&term.topology_key) else {
            return false;
        };
        let mut anywhere = false;
        let mut here = false;
        for o in all.iter().filter(|o| o.live) {
            if o.pods.iter().any(|p| term_selects(term, pod, p)) {
                anywhere = true;
                if o.labels.get(&term.topology_key) == Some(dom) {
                    here = true;
                    break;
                }
            }
        }
        let self_match = term
            .label_selector
            .with_match_label_keys(&term.match_label_keys, &pod.labels)
            .matches(&pod.labels);
        if !(here || (!anywhere && self_match)) {
            return false;
        }
    }
    // Topology spread (DoNotSchedule): skew against the least-loaded eligible domain.
    for c in &pod.topology_spread {
        if c.when_unsatisfiable != core::WhenUnsatisfiable::DoNotSchedule {
            continue;
        }
        let Some(dom) = n.labels.get(&c.topology_key) else {
            return false;
        };
        let sel = c
            .label_selector
            .with_match_label_keys(&c.match_label_keys, &pod.labels);
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for o in all.iter().filter(|o| o.live) {
            let Some(d) = o.labels.get(&c.topology_key) else {
                continue;
            };
            // nodeAffinityPolicy Honor (default): only nodes the pod could select count.
            let eligible = pod
                .node_selector
                .iter()
                .all(|(k, v)| o.labels.get(k) == Some(v))
                && (pod.required_node_affinity.is_empty()
                    || terms_match(&pod.required_node_affinity, &o.labels));
            if !eligible {
                continue;
            }
            let k = o
                .pods
                .iter()
                .filter(|p| !p.daemon && p.namespace == pod.namespace && sel.matches(&p.labels))
                .count() as i64;
            *counts.entry(d.as_str()).or_insert(0) += k;
        }
        let here = counts.get(dom.as_str()).copied().unwrap_or(0);
        let min = counts.values().copied().min().unwrap_or(0);
        let min_domains = c.min_domains.unwrap_or(1).max(1) as usize;
        let min = if counts.len() < min_domains { 0 } else { min };
        if here + 1 - min > c.max_skew as i64 {
            return false;
        }
    }
    true
}

/// Allocation ratio of the binding resource after adding `req`, for scoring.
pub fn utilisation_after(req: &core::Resources, n: &NodeView) -> f64 {
    let cpu = (n.used.cpu_milli + req.cpu_milli) as f64 / n.allocatable.cpu_milli.max(1) as f64;
    let mem = (n.used.memory + req.memory) as f64 / n.allocatable.memory.max(1) as f64;
    (cpu + mem) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, zone: &str, cpu: i64) -> NodeView {
        NodeView {
            name: name.into(),
            labels: BTreeMap::from([
                (core::labels::ZONE.to_string(), zone.to_string()),
                (core::labels::HOSTNAME.to_string(), name.to_string()),
            ]),
            taints: vec![],
            allocatable: core::Resources::with_pods(cpu, 8 << 30, 110),
            used: core::Resources::default(),
            pods: vec![],
            schedulable: true,
            live: true,
        }
    }

    fn pod(cpu: i64) -> core::Pod {
        core::Pod::new("default", "p", cpu, 1 << 30).label("app", "a")
    }

    #[test]
    fn resources_and_taints() {
        let mut n = node("n1", "a", 2000);
        let p = pod(1500);
        let req = core::resources::pod_requests(&p);
        assert!(fits_node(&p, &req, &n));
        n.used.cpu_milli = 1000;
        assert!(!fits_node(&p, &req, &n));
        n.used.cpu_milli = 0;
        n.taints
            .push(core::Taint::new("x", None, core::TaintEffect::NoSchedule));
        assert!(!fits_node(&p, &req, &n));
    }

    #[test]
    fn hostname_anti_affinity_and_zone_spread() {
        let mut a = node("n1", "a", 4000);
        let b = node("n2", "b", 4000);
        a.pods.push(PodMark {
            id: 0,
            namespace: "default".into(),
            labels: BTreeMap::from([("app".to_string(), "a".to_string())]),
            daemon: false,
        });
        let mut p = pod(100);
        p.pod_anti_affinity.required.push(core::PodAffinityTerm {
            label_selector: core::LabelSelector::from_labels([("app", "a")]),
            namespaces: vec![],
            namespace_selector: None,
            topology_key: core::labels::HOSTNAME.into(),
            match_label_keys: vec![],
        });
        let req = core::resources::pod_requests(&p);
        let all = vec![a.clone(), b.clone()];
        assert!(!fits(&p, &req, &all[0], &all));
        assert!(fits(&p, &req, &all[1], &all));

        let mut s = pod(100);
        s.topology_spread.push(core::TopologySpreadConstraint {
            max_skew: 1,
            topology_key: core::labels::ZONE.into(),
            when_unsatisfiable: core::WhenUnsatisfiable::DoNotSchedule,
            label_selector: core::LabelSelector::from_labels([("app", "a")]),
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: vec![],
        });
        // Zone a has one, zone b none: another in a would make skew 2.
        assert!(!fits(&s, &req, &all[0], &all));
        assert!(fits(&s, &req, &all[1], &all));
    }
}
