//! Empty nodes waiting out `consolidateAfter` are not destinations for consolidation
//! ([`super::candidates::awaiting_emptiness`]).

use super::tests::{od, pod, snapshot};
use super::{Destination, DisruptionOptions, disrupt, protect, validate};
use crate::model::Snapshot;

/// `big` (32 vCPU, 1.6/h) lost its pods 10 s ago and waits out a 30 s `consolidateAfter`;
/// `n1` (8 vCPU, 0.4/h) runs one 1-vCPU pod. Moving that pod onto `big` looks like deleting
/// `n1` for free, and keeps `big` running instead of it.
fn cluster() -> Snapshot {
    let mut s = snapshot(
        vec![od("big", "xxlarge"), od("n1", "large")],
        vec![pod("a", 1000, "n1")],
    );
    s.nodepools[0].disruption.consolidate_after_secs = Some(30);
    s.nodes[0].last_pod_event_at = s.now - 10;
    s
}

/// Plain rules, so that only the destinations differ.
fn options(move_onto_empty_nodes: bool) -> DisruptionOptions {
    DisruptionOptions {
        payback: None,
        headroom: None,
        move_onto_empty_nodes,
        ..DisruptionOptions::default()
    }
}

fn onto(cmd: &super::Command, node: &str) -> bool {
    cmd.moves
        .iter()
        .any(|m| m.to == Destination::Existing(node.into()))
}

#[test]
fn pods_do_not_move_onto_a_node_about_to_be_deleted() {
    let s = cluster();
    let karpenter_like = disrupt(&s, &options(true));
    let cmd = karpenter_like.command.expect("Karpenter's way: n1 goes");
    assert!(onto(&cmd, "big"), "{cmd:?}");
    assert!(cmd.is_delete());

    let opts = options(false);
    let cmd = disrupt(&s, &opts).command.expect("n1 is still replaced");
    assert!(!onto(&cmd, "big"), "{cmd:?}");
    assert_eq!(cmd.candidate_names(), vec!["n1"]);
    assert_eq!(cmd.replacements.len(), 1, "{cmd:?}");
    assert!(cmd.replacements_worst_case_price < 0.4);
    assert!(validate(&cmd, &s, &opts).valid);
}

#[test]
fn an_empty_node_that_stays_is_still_a_destination() {
    // Kept by do-not-disrupt, or by a pool that never consolidates it: its room is free.
    let mut kept = cluster();
    kept.nodes[0]
        .annotations
        .insert(protect::DO_NOT_DISRUPT.into(), "true".into());
    let cmd = disrupt(&kept, &options(false)).command.expect("n1 goes");
    assert!(onto(&cmd, "big") && cmd.is_delete(), "{cmd:?}");

    // Once its window is over, emptiness deletes it first.
    let mut over = cluster();
    over.nodes[0].last_pod_event_at = over.now - 60;
    let cmd = disrupt(&over, &options(false)).command.expect("big goes");
    assert_eq!(cmd.method, super::Method::Emptiness);
    assert_eq!(cmd.candidate_names(), vec!["big"]);
}

#[test]
fn a_drifted_node_may_move_its_pods_onto_an_empty_node_about_to_go() {
    // Drift replaces n1 whatever the price; the empty node saves a launch.
    let mut s = cluster();
    s.nodes[1].drifted = true;
    let cmd = disrupt(&s, &options(false)).command.expect("n1 is drifted");
    assert_eq!(cmd.method, super::Method::Drift);
    assert!(onto(&cmd, "big") && cmd.replacements.is_empty(), "{cmd:?}");
    assert!(validate(&cmd, &s, &options(false)).valid);
}
