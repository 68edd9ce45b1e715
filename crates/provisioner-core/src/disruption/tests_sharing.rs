//! The shared, incremental simulation path decides exactly as the straightforward one.
//!
//! The straightforward path ([`super::sim::UNSHARED`]) starts every simulation from a copy of
//! its starting state that shares nothing: its own snapshot, no memoised classes or eligible
//! domains, plain per-domain counts and freshly copied nodes, i.e. what each simulation
//! computed for itself before sharing was added. Whole decisions must come out equal.

use proptest::prelude::*;

use super::karpenter_baseline::karpenter_consolidation;
use super::sim::UNSHARED;
use super::tests::random_cluster;
use super::{DisruptionOptions, disrupt, disrupt_shared};
use crate::model::{
    LabelSelector, PodAffinityTerm, Snapshot, TopologySpreadConstraint, WhenUnsatisfiable, labels,
};

/// The random cluster with topology terms added to some pods (zone spread, zone affinity,
/// hostname spread, soft zone anti-affinity), so that every kind of shared group and the
/// affinity groups' per-simulation domains are exercised.
pub(super) fn with_topology(mut s: Snapshot, seed: u64) -> Snapshot {
    let sel = |k: &str, v: &str| LabelSelector::from_labels([(k, v)]);
    for (i, p) in s.pods.iter_mut().map(std::sync::Arc::make_mut).enumerate() {
        let v = ((seed as usize).wrapping_add(i) % 3).to_string();
        match (i + seed as usize) % 6 {
            1 => {
                p.labels.insert("spread".into(), v.clone());
                p.topology_spread.push(TopologySpreadConstraint {
                    max_skew: 1 + (i % 2) as i32,
                    topology_key: labels::ZONE.into(),
                    when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                    label_selector: sel("spread", &v),
                    min_domains: None,
                    node_affinity_policy: None,
                    node_taints_policy: None,
                    match_label_keys: Vec::new(),
                });
            }
            2 => {
                p.labels.insert("together".into(), v.clone());
                p.pod_affinity.required.push(PodAffinityTerm {
                    label_selector: sel("together", &v),
                    namespaces: Vec::new(),
                    namespace_selector: None,
                    topology_key: labels::ZONE.into(),
                    match_label_keys: Vec::new(),
                });
            }
            3 => {
                p.labels.insert("host".into(), v.clone());
                p.topology_spread.push(TopologySpreadConstraint {
                    max_skew: 2,
                    topology_key: labels::HOSTNAME.into(),
                    when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
                    label_selector: sel("host", &v),
                    min_domains: None,
                    node_affinity_policy: None,
                    node_taints_policy: None,
                    match_label_keys: Vec::new(),
                });
            }
            _ => {}
        }
    }
    s
}

fn straightforward<T>(f: impl FnOnce() -> T) -> T {
    UNSHARED.with(|u| u.set(true));
    let out = f();
    UNSHARED.with(|u| u.set(false));
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn sharing_decides_the_same(seed in any::<u64>()) {
        let s = random_cluster(seed);
        let s = if seed % 2 == 0 { with_topology(s, seed) } else { s };
        for opts in [
            DisruptionOptions::default(),
            DisruptionOptions { parallel: false, spot_to_spot: true, ..DisruptionOptions::default() },
        ] {
            let reference = straightforward(|| disrupt(&s, &opts));
            let fast = disrupt(&s, &opts);
            prop_assert_eq!(&fast, &reference, "seed {}", seed);
            let shared = disrupt_shared(&std::sync::Arc::new(s.clone()), &opts);
            prop_assert_eq!(&shared, &reference, "seed {}", seed);
        }
        let opts = DisruptionOptions::default();
        let reference = straightforward(|| karpenter_consolidation(&s, &opts));
        prop_assert_eq!(&karpenter_consolidation(&s, &opts), &reference, "seed {}", seed);
    }
}
