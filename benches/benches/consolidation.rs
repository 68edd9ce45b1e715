//! Consolidation on a 1,000-node cluster built from Karpenter's benchmark shapes, 30 pods per
//! node, half the nodes underused (see `benches/src/consolidation_cluster.rs` and README.md).
//!
//! - `consolidation-1000/ours/all-candidates`: one whole disruption decision (`disrupt`):
//!   candidates, budgets, every single candidate simulated, greedy multi-node growth, repacking
//!   with replacements. Divide by the candidate count for the time per candidate.
//! - `consolidation-1000/ours/one-candidate`: one single-candidate simulation on the shared base
//!   state (clone, remove the node, reschedule its 30 pods).
//! - `consolidation-1000/karpenter-faithful`: Karpenter's multi-node prefix binary search then
//!   single-node, on the same scheduler.
//! - `consolidation-1000/ours/all-candidates-balanced`: the whole decision with zone balancing
//!   (`--balance-zones`), which every simulation's replacements then go through: its cost
//!   against `ours/all-candidates` in the same run.
//!
//! Before measuring, it prints the saving each search finds on the cluster. Set
//! `KCAPI_CONSOLIDATION_NODES` to run on a smaller cluster.

#[path = "../src/consolidation_cluster.rs"]
mod consolidation_cluster;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use consolidation_cluster::{ClusterSpec, cluster, cluster_price};
use criterion::{Criterion, criterion_group, criterion_main};
use provisioner_core::disruption::karpenter_baseline::karpenter_consolidation;
use provisioner_core::disruption::sim::Sim;
use provisioner_core::disruption::{DisruptionOptions, Method, disrupt, find_candidates};

fn spec() -> ClusterSpec {
    let nodes = std::env::var("KCAPI_CONSOLIDATION_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    ClusterSpec {
        nodes,
        ..ClusterSpec::default()
    }
}

fn report() {
    let snap = cluster(&spec());
    let opts = DisruptionOptions::default();
    let t = Instant::now();
    let d = disrupt(&snap, &opts);
    let ours_t = t.elapsed();
    let t = Instant::now();
    let b = karpenter_consolidation(&snap, &opts);
    let base_t = t.elapsed();
    let m = d.methods.iter().find(|m| m.method == Method::Consolidation);
    let cands = m.map_or(0, |m| m.within_budget).max(1);
    let saving = |c: &Option<provisioner_core::disruption::Command>| {
        c.as_ref().map_or((0.0, 0, 0), |c| {
            (c.saving_per_hour, c.candidates.len(), c.replacements.len())
        })
    };
    let (os, on, or) = saving(&d.command);
    let (ks, kn, kr) = saving(&b.command);
    eprintln!(
        "consolidation report: {} nodes at {:.2}/h; ours {:.0} ms for {cands} candidates ({:.2} ms/candidate, {} simulations): {on} node(s) -> {or} replacement(s), {os:.2}/h; karpenter-faithful {:.0} ms ({} simulations, {}): {kn} -> {kr}, {ks:.2}/h; ratio {:.2}x",
        snap.nodes.len(),
        cluster_price(&snap),
        ours_t.as_secs_f64() * 1e3,
        ours_t.as_secs_f64() * 1e3 / cands as f64,
        m.map_or(0, |m| m.sets_evaluated),
        base_t.as_secs_f64() * 1e3,
        b.simulations,
        b.found_by,
        if ks > 0.0 { os / ks } else { f64::INFINITY }
    );
}

/// The decision with zone balancing on: its time and saving next to the default's.
fn report_balanced() {
    let snap = cluster(&spec());
    let off = DisruptionOptions::default();
    let mut on = off.clone();
    on.scheduling.balance_zones = true;
    let time = |opts: &DisruptionOptions| {
        let t = Instant::now();
        let d = disrupt(&snap, opts);
        let saving = d.command.as_ref().map_or(0.0, |c| c.saving_per_hour);
        (t.elapsed().as_secs_f64() * 1e3, saving)
    };
    let (off_ms, off_saving) = time(&off);
    let (on_ms, on_saving) = time(&on);
    eprintln!(
        "consolidation report, zone balancing: off {off_ms:.0} ms, {off_saving:.2}/h; on {on_ms:.0} ms, {on_saving:.2}/h; time ratio {:.2}x",
        on_ms / off_ms.max(1e-9)
    );
}

fn consolidation(c: &mut Criterion) {
    report();
    report_balanced();
    let snap = cluster(&spec());
    let opts = DisruptionOptions::default();
    let mut g = c.benchmark_group("consolidation-1000");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(10));
    g.bench_function("ours/all-candidates", |b| {
        b.iter(|| black_box(disrupt(&snap, &opts)))
    });
    let mut balanced = opts.clone();
    balanced.scheduling.balance_zones = true;
    g.bench_function("ours/all-candidates-balanced", |b| {
        b.iter(|| black_box(disrupt(&snap, &balanced)))
    });
    g.bench_function("karpenter-faithful", |b| {
        b.iter(|| black_box(karpenter_consolidation(&snap, &opts)))
    });
    let set = find_candidates(&snap, &opts);
    let sim = Sim::new(&snap, opts.scheduling.clone());
    g.bench_function("ours/one-candidate", |b| {
        let mut k = 0usize;
        b.iter(|| {
            k = (k + 1) % set.candidates.len().max(1);
            let Some(c) = set.candidates.get(k) else {
                return;
            };
            black_box(sim.remove(&sim.base, &[c], &BTreeMap::new()));
        })
    });
    g.finish();
}

criterion_group!(benches, consolidation);
criterion_main!(benches);
