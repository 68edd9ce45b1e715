//! A [`super::ConsolidationSession`] decides as a fresh decision when nothing changed, reuses
//! what did not change, re-simulates what did, and defers work over its budget.

use std::sync::Arc;

use proptest::prelude::*;

use super::tests::random_cluster;
use super::tests_sharing::with_topology;
use super::{
    ConsolidationSession, DisruptionOptions, WorkBudget, disrupt_in_session, disrupt_shared,
};

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Loop 1 simulates everything and decides as `disrupt_shared`; loop 2 on the same
    /// snapshot reuses every single-node simulation and decides the same again (half the
    /// cases with zone spread, zone affinity and hostname spread).
    #[test]
    fn unchanged_cluster_reuses_and_decides_the_same(seed in any::<u64>()) {
        let s = random_cluster(seed);
        let s = Arc::new(if seed % 2 == 0 { with_topology(s, seed) } else { s });
        let o = DisruptionOptions::default();
        let fresh = disrupt_shared(&s, &o);
        let mut session = ConsolidationSession::default();
        let (first, r1) = disrupt_in_session(&s, &o, &mut session);
        prop_assert_eq!(&first, &fresh);
        prop_assert_eq!(r1.reused, 0);
        prop_assert!(r1.deferred.is_empty());
        let (second, r2) = disrupt_in_session(&s, &o, &mut session);
        prop_assert_eq!(&second, &fresh);
        prop_assert_eq!(r2.simulated, 0);
        prop_assert_eq!(r2.reused, r1.simulated);
    }

    /// After a pod on every node changes, no single-node simulation is reused, and the
    /// decision is the same as a fresh one on the new snapshot.
    #[test]
    fn changed_cluster_resimulates_and_decides_afresh(seed in any::<u64>()) {
        let s = random_cluster(seed);
        let s = if seed % 2 == 0 { with_topology(s, seed) } else { s };
        let o = DisruptionOptions::default();
        let mut session = ConsolidationSession::default();
        let (_, r1) = disrupt_in_session(&Arc::new(s.clone()), &o, &mut session);
        let mut s2 = s;
        let mut seen = std::collections::BTreeSet::new();
        for p in s2.pods.iter_mut().map(std::sync::Arc::make_mut) {
            if let Some(n) = p.node_name.clone()
                && seen.insert(n)
            {
                p.labels.insert("changed".into(), "yes".into());
            }
        }
        let s2 = Arc::new(s2);
        let (d, r2) = disrupt_in_session(&s2, &o, &mut session);
        prop_assert_eq!(r2.reused, 0);
        prop_assert_eq!(r2.simulated, r1.simulated);
        prop_assert_eq!(d, disrupt_shared(&s2, &o));
    }
}

/// A budget of 2 simulations per loop covers all candidates over several loops, oldest first,
/// and says which were left each time.
#[test]
fn budget_defers_and_catches_up() {
    let o = DisruptionOptions::default();
    let budget = WorkBudget {
        max_single_simulations: Some(2),
    };
    // The first random cluster with more than two candidates to simulate.
    let (s, mut session, r) = (0..200)
        .find_map(|seed| {
            let s = Arc::new(random_cluster(seed));
            let mut session = ConsolidationSession::new(budget);
            let (_, r) = disrupt_in_session(&s, &o, &mut session);
            (r.deferred.len() >= 2).then_some((s, session, r))
        })
        .expect("a random cluster with more than 3 candidates");
    let total = r.simulated + r.deferred.len();
    assert_eq!(r.simulated, 2);
    let mut loops = 1;
    let mut last = r;
    while !last.deferred.is_empty() {
        let (_, r) = disrupt_in_session(&s, &o, &mut session);
        assert!(r.simulated <= 2);
        assert_eq!(r.reused + r.simulated + r.deferred.len(), total);
        assert!(r.deferred.len() < last.deferred.len());
        last = r;
        loops += 1;
        assert!(loops <= total, "never caught up");
    }
    let fresh = disrupt_shared(&s, &o);
    let (done, r) = disrupt_in_session(&s, &o, &mut session);
    assert_eq!(r.reused, total);
    assert_eq!(done, fresh);
}
