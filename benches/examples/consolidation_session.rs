//! Consolidation across loops (issue 18): a `ConsolidationSession` kept between disruption
//! loops on the consolidation benchmark cluster. Loop 1 simulates every candidate; loop 2
//! sees the same cluster (reuses everything); loop 3 sees 1% of the nodes changed (a label
//! on one pod of each), so only those and the candidates whose outcome depended on them are
//! simulated again. With a budget, loops defer what is over it.
//!
//! `cargo run --release -p kcapi-benches --example consolidation_session -- [nodes] [max-simulations-per-loop]`

#[path = "../src/consolidation_cluster.rs"]
mod consolidation_cluster;

use std::sync::Arc;
use std::time::Instant;

use consolidation_cluster::{ClusterSpec, cluster, cluster_price};
use provisioner_core::Snapshot;
use provisioner_core::disruption::{
    ConsolidationSession, DisruptionOptions, WorkBudget, disrupt_in_session, disrupt_shared,
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let budget: Option<usize> = args.get(2).and_then(|s| s.parse().ok());
    let spec = ClusterSpec {
        nodes,
        ..ClusterSpec::default()
    };
    let snap = Arc::new(cluster(&spec));
    let opts = DisruptionOptions::default();
    println!(
        "cluster: {} nodes, {} pods, {:.2}/h; budget per loop: {budget:?}",
        snap.nodes.len(),
        snap.pods.len(),
        cluster_price(&snap)
    );
    let t = Instant::now();
    let fresh = disrupt_shared(&snap, &opts);
    println!("no session: {:.0} ms", t.elapsed().as_secs_f64() * 1e3);

    let mut session = ConsolidationSession::new(WorkBudget {
        max_single_simulations: budget,
    });
    // 1% of the nodes change between loops 2 and 3 (not the first nodes: first fit makes
    // them everybody's destination, so a change there invalidates most outcomes).
    let mut changed: Snapshot = (*snap).clone();
    let step = 100;
    let mut marked = 0;
    for (i, n) in snap
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| i % step == step / 2)
    {
        if let Some(p) = changed
            .pods
            .iter_mut()
            .find(|p| p.node_name.as_deref() == Some(n.name.as_str()))
        {
            std::sync::Arc::make_mut(p)
                .labels
                .insert("loop".into(), i.to_string());
            marked += 1;
        }
    }
    let changed = Arc::new(changed);
    for (round, s) in [(1, &snap), (2, &snap), (3, &changed)] {
        let t = Instant::now();
        let (d, r) = disrupt_in_session(s, &opts, &mut session);
        let dt = t.elapsed();
        let same = if round < 3 {
            if d == fresh {
                ", same decision as without a session"
            } else {
                ", DIFFERENT decision"
            }
        } else {
            ""
        };
        println!(
            "loop {round}{}: {:.0} ms, simulated {}, reused {}, deferred {}; command: {}{same}",
            if round == 3 {
                format!(" ({marked} nodes changed)")
            } else {
                String::new()
            },
            dt.as_secs_f64() * 1e3,
            r.simulated,
            r.reused,
            r.deferred.len(),
            d.command.as_ref().map_or("none".to_string(), |c| format!(
                "{} node(s) -> {} replacement(s), saving {:.2}/h",
                c.candidates.len(),
                c.replacements.len(),
                c.saving_per_hour
            )),
        );
    }
}
