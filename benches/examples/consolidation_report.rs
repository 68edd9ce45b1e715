//! Consolidation on a 1,000-node cluster (Karpenter's benchmark shapes, half the nodes
//! underused): time per candidate, total time, and the saving found against a
//! Karpenter-faithful search (single-node + prefix multi-node) on the same cluster.
//!
//! `cargo run --release -p kcapi-benches --example consolidation_report -- [nodes] [budget] [rounds] [both|ours|karpenter]`
//!
//! The last argument runs one search only (for its peak memory, `/usr/bin/time -v`).
//!
//! `rounds` > 1 applies each command (deletes the candidates, binds moved pods, adds the
//! replacements as nodes) and decides again, for both searches, to compare where they get to.

#[path = "../src/consolidation_cluster.rs"]
mod consolidation_cluster;

use std::sync::Arc;
use std::time::Instant;

use consolidation_cluster::{ClusterSpec, cluster, cluster_price};
use provisioner_core::disruption::karpenter_baseline::{
    BaselineResult, karpenter_consolidation_on,
};
use provisioner_core::disruption::sim::Sim;
use provisioner_core::disruption::{Budgets, find_candidates};
use provisioner_core::disruption::{Command, Destination, DisruptionOptions, disrupt_shared};
use provisioner_core::{Node, Resources, Snapshot, labels};

/// The cluster after a command: candidates gone, replacements present, pods moved.
fn apply(s: &Snapshot, cmd: &Command) -> Snapshot {
    let mut out = s.clone();
    let gone: Vec<&str> = cmd.candidates.iter().map(|c| c.name.as_str()).collect();
    out.nodes.retain(|n| !gone.contains(&n.name.as_str()));
    let round = s.nodes.len();
    for r in &cmd.replacements {
        let Some(it) = s
            .instance_types
            .iter()
            .find(|t| t.name == r.launch.instance_type)
        else {
            continue;
        };
        let name = format!("{}-r{round}", r.name);
        let a = it.allocatable();
        let mut n = Node::new(
            &name,
            &r.launch.zone,
            Resources::with_pods(a.cpu_milli, a.memory, a.pods),
        );
        n.nodepool = Some(r.nodepool.clone());
        n.instance_type = Some(it.name.clone());
        n.labels.insert(labels::NODEPOOL.into(), r.nodepool.clone());
        n.labels
            .insert(labels::INSTANCE_TYPE.into(), it.name.clone());
        n.labels.insert(
            labels::CAPACITY_TYPE.into(),
            r.launch.capacity_type.as_label().into(),
        );
        for (k, v) in &it.labels {
            n.labels.insert(k.clone(), v.clone());
        }
        n.price = r.launch.price;
        n.created_at = s.now;
        n.last_pod_event_at = s.now - 86_400;
        out.nodes.push(n);
    }
    // By name through an index: a scan per move was quadratic at 150,000 pods.
    let index: std::collections::HashMap<(String, String), usize> = out
        .pods
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.namespace.clone(), p.name.clone()), i))
        .collect();
    for m in &cmd.moves {
        let to = match &m.to {
            Destination::Existing(n) => n.clone(),
            Destination::Replacement(r) => format!("{r}-r{round}"),
        };
        if let Some(p) = index
            .get(&(m.pod.namespace.clone(), m.pod.name.clone()))
            .and_then(|i| out.pods.get_mut(*i))
        {
            std::sync::Arc::make_mut(p).node_name = Some(to);
        }
    }
    out.pods
        .retain(|p| p.node_name.as_deref().is_none_or(|n| !gone.contains(&n)));
    out
}

/// `karpenter_consolidation` on a shared snapshot (its `Sim` refers to it instead of copying).
fn karpenter_shared(snapshot: &Arc<Snapshot>, opts: &DisruptionOptions) -> BaselineResult {
    let set = find_candidates(snapshot, opts);
    let budgets = Budgets::compute(snapshot);
    let sim = Sim::shared(snapshot, opts.scheduling.clone());
    karpenter_consolidation_on(&sim, &set.candidates, &budgets, opts)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let budget = args.get(2).cloned().unwrap_or_else(|| "10%".into());
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let which = args.get(4).cloned().unwrap_or_else(|| "both".into());
    let (run_ours, run_theirs) = (which != "karpenter", which != "ours");
    let spec = ClusterSpec {
        nodes,
        budget,
        ..ClusterSpec::default()
    };
    let snap = Arc::new(cluster(&spec));
    let opts = DisruptionOptions::default();
    println!(
        "cluster: {} nodes, {} pods, {:.2}/h, budget {}",
        snap.nodes.len(),
        snap.pods.len(),
        cluster_price(&snap),
        spec.budget
    );

    // Shared, not copied: the searches' states refer to the snapshot.
    let mut ours = Arc::clone(&snap);
    let mut theirs = Arc::clone(&snap);
    drop(snap);
    for round in 1..=rounds {
        let t = Instant::now();
        let d = run_ours.then(|| disrupt_shared(&ours, &opts));
        let dt = t.elapsed();
        let t = Instant::now();
        let b = run_theirs.then(|| karpenter_shared(&theirs, &opts));
        let bt = t.elapsed();
        if let Some(d) = &d {
            let report = d
                .methods
                .iter()
                .find(|m| m.method == provisioner_core::disruption::Method::Consolidation);
            let cands = report.map_or(0, |r| r.within_budget).max(1);
            let sets = report.map_or(0, |r| r.sets_evaluated);
            let (os, oc, orep) = d.command.as_ref().map_or((0.0, 0, 0), |c| {
                (c.saving_per_hour, c.candidates.len(), c.replacements.len())
            });
            println!(
                "round {round}: ours {:.0} ms total, {} candidates, {:.3} ms/candidate, {sets} simulations ({:.3} ms each): {oc} node(s) -> {orep} replacement(s), saving {os:.2}/h",
                dt.as_secs_f64() * 1e3,
                cands,
                dt.as_secs_f64() * 1e3 / cands as f64,
                dt.as_secs_f64() * 1e3 / sets.max(1) as f64
            );
            if let Some(c) = &d.command {
                println!("         ours: {}", c.rationale.summary);
                // The last round's cluster is not needed (a copy would be the peak memory).
                if round < rounds {
                    ours = Arc::new(apply(&ours, c));
                }
            }
        }
        if let Some(b) = &b {
            let (ks, kc, krep) = b.command.as_ref().map_or((0.0, 0, 0), |c| {
                (c.saving_per_hour, c.candidates.len(), c.replacements.len())
            });
            println!(
                "round {round}: karpenter-faithful {:.0} ms, {} candidates, {} simulations ({}): {kc} node(s) -> {krep} replacement(s), saving {ks:.2}/h",
                bt.as_secs_f64() * 1e3,
                b.candidates,
                b.simulations,
                b.found_by
            );
            if let Some(c) = &b.command
                && round < rounds
            {
                theirs = Arc::new(apply(&theirs, c));
            }
        }
        if round < rounds {
            println!(
                "         cluster price after: ours {:.2}/h ({} nodes), karpenter-faithful {:.2}/h ({} nodes)",
                cluster_price(&ours),
                ours.nodes.len(),
                cluster_price(&theirs),
                theirs.nodes.len()
            );
        }
    }
}
