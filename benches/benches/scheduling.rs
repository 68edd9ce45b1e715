//! Scheduling benchmarks on Karpenter's own shapes (see `README.md`).
//!
//! - `diverse/<strategy>/<pods>`: 400 instance types, diverse pods, 1 to 20,000 pods.
//! - `existing/<strategy>/20000`: 20,000 generic pods onto 1,000 existing 32-vCPU nodes.
//! - `consolidation/one-candidate`: what consolidation does per candidate on a 1,000-node
//!   cluster with 30 pods per node: clone the state, remove one node, reschedule its pods.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kcapi_workloads::Rng;
use kcapi_workloads::karpenter::{diverse_pods, existing_nodes, generic_pods, snapshot};
use provisioner_core::{ClusterState, SchedulingOptions, Strategy, schedule, schedule_on};

fn opts(strategy: Strategy) -> SchedulingOptions {
    SchedulingOptions {
        strategy,
        ..SchedulingOptions::default()
    }
}

fn diverse(c: &mut Criterion) {
    let mut g = c.benchmark_group("diverse");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (name, strategy) in [
        ("cost-aware", Strategy::CostAware),
        ("karpenter", Strategy::KarpenterBaseline),
    ] {
        for n in [1usize, 100, 1_000, 5_000, 20_000] {
            let snap = snapshot(diverse_pods(42, n));
            g.throughput(Throughput::Elements(n as u64));
            g.bench_with_input(BenchmarkId::new(name, n), &snap, |b, s| {
                b.iter(|| black_box(schedule(s, &opts(strategy))))
            });
        }
    }
    g.finish();
}

fn existing(c: &mut Criterion) {
    let mut g = c.benchmark_group("existing");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let mut snap = snapshot(generic_pods(&mut Rng::new(7), 20_000, "g"));
    snap.nodes = existing_nodes(1_000, 31);
    g.throughput(Throughput::Elements(20_000));
    for (name, strategy) in [
        ("cost-aware", Strategy::CostAware),
        ("karpenter", Strategy::KarpenterBaseline),
    ] {
        g.bench_with_input(BenchmarkId::new(name, 20_000), &snap, |b, s| {
            b.iter(|| black_box(schedule(s, &opts(strategy))))
        });
    }
    g.finish();
}

fn consolidation(c: &mut Criterion) {
    // 1,000 nodes with 30 bound pods each.
    let mut snap = snapshot(Vec::new());
    snap.nodes = existing_nodes(1_000, 31);
    let mut rng = Rng::new(11);
    for (i, node) in snap.nodes.iter().enumerate() {
        for mut p in generic_pods(&mut rng, 30, &format!("n{i}")) {
            p.node_name = Some(node.name.clone());
            snap.pods.push(std::sync::Arc::new(p));
        }
    }
    let base = ClusterState::new(&snap);
    let mut g = c.benchmark_group("consolidation");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.bench_function("one-candidate", |b| {
        let mut k = 0usize;
        b.iter(|| {
            k = (k + 1) % 1_000;
            let name = format!("node-{k:05}");
            let mut trial = base.clone();
            let pods = trial.remove_nodes(&[name.as_str()]);
            black_box(schedule_on(
                &mut trial,
                &pods,
                &SchedulingOptions::default(),
            ))
        })
    });
    g.finish();
}

criterion_group!(benches, diverse, existing, consolidation);
criterion_main!(benches);
