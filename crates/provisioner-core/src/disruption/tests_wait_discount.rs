//! A NodePool's `consolidateAfter` lowers the payback rule's eviction price
//! ([`super::payback::Payback::wait_halving_seconds`]).

use super::DisruptionOptions;
use super::payback::Payback;
use super::tests::{consolidates, pricey_evictions, two_large_nodes};
use crate::model::Snapshot;

/// `n2` (0.4/h) runs one pod that fits on `n1`: deleting `n2` saves 0.4/h for the 4 h cap,
/// 1.6 in all. The pod's price is the average pod's share (0.08125/h), so at 24 h per
/// eviction the move costs 1.95 and does not pay; at half that it does.
fn cluster(consolidate_after_secs: i64) -> Snapshot {
    let mut s = two_large_nodes();
    s.nodepools[0].disruption.consolidate_after_secs = Some(consolidate_after_secs);
    s
}

fn options(wait_halving_seconds: Option<f64>) -> DisruptionOptions {
    pricey_evictions(Payback {
        wait_halving_seconds,
        ..Payback::default()
    })
}

#[test]
fn a_wait_as_long_as_the_halving_time_halves_the_eviction_price() {
    let waited = cluster(300);
    assert_eq!(
        consolidates(&waited, &options(Some(300.0))),
        Some(vec!["n2".to_string()])
    );
    // The full price whatever the wait: the same move does not pay.
    assert_eq!(consolidates(&waited, &options(None)), None);
    // No wait, no discount.
    assert_eq!(consolidates(&cluster(0), &options(Some(300.0))), None);
}

#[test]
fn the_scale_follows_the_wait() {
    let k = Payback {
        wait_halving_seconds: Some(300.0),
        ..Payback::default()
    };
    assert_eq!(k.wait_scale(Some(0)), 1.0);
    assert_eq!(k.wait_scale(None), 1.0);
    assert!((k.wait_scale(Some(300)) - 0.5).abs() < 1e-12);
    assert!((k.wait_scale(Some(60)) - 300.0 / 360.0).abs() < 1e-12);
    assert!(k.wait_scale(Some(1800)) < k.wait_scale(Some(300)));
    let off = Payback {
        wait_halving_seconds: None,
        ..Payback::default()
    };
    assert_eq!(off.wait_scale(Some(1800)), 1.0);
}
