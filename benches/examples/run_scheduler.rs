//! Runs one scheduling simulation on Karpenter's benchmark shapes and prints timing, cost and
//! counts; used for peak-memory measurements (`/usr/bin/time -v`).
//!
//! `cargo run --release -p kcapi-benches --example run_scheduler -- <pods> [cost-aware|karpenter] [existing-nodes]`

use std::time::Instant;

use kcapi_workloads::Rng;
use kcapi_workloads::karpenter::{diverse_pods, existing_nodes, generic_pods, snapshot};
use std::sync::Arc;

use provisioner_core::{SchedulingOptions, Strategy, schedule_shared};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let strategy = match args.get(2).map(String::as_str) {
        Some("karpenter") => Strategy::KarpenterBaseline,
        _ => Strategy::CostAware,
    };
    let existing: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(0);
    let snap = if existing > 0 {
        let mut s = snapshot(generic_pods(&mut Rng::new(7), n, "g"));
        s.nodes = existing_nodes(existing, 31);
        s
    } else {
        snapshot(diverse_pods(42, n))
    };
    let opts = SchedulingOptions {
        strategy,
        ..SchedulingOptions::default()
    };
    // Shared, not copied: the state refers to the caller's snapshot (as the controller can).
    let snap = Arc::new(snap);
    let t = Instant::now();
    let r = schedule_shared(&snap, &opts);
    let dt = t.elapsed();
    println!(
        "pods={n} strategy={:?} existing={existing} time={:.3}s pods/s={:.0} placed_existing={} new_nodes={} unschedulable={} cost/h={:.2}",
        strategy,
        dt.as_secs_f64(),
        n as f64 / dt.as_secs_f64(),
        r.existing_placements.len(),
        r.new_node_claims.len(),
        r.unschedulable.len(),
        r.new_node_cost_per_hour
    );
    if !r.planner_notes.is_empty() || r.cost_lower_bound.is_some() {
        println!(
            "planner={} notes={:?} lower_bound={:?}",
            r.strategy, r.planner_notes, r.cost_lower_bound
        );
    }
    if let Some(u) = r.unschedulable.first() {
        println!("first unschedulable: {} {}", u.pod, u.reason);
    }
}
