//! Our `karpenter` baseline's plan against upstream Karpenter's on identical pods (driven by
//! `benches/upstream/compare.sh`, which runs upstream's scheduler through
//! `benches/upstream/kcapi_plan_test.go`).
//!
//! - `export SEED PODS FILE`: Karpenter's "diverse" benchmark pods ([`diverse_pods`]) as JSON
//!   for the Go harness.
//! - `compare PODS.json UPSTREAM.json`: plans the same pods with the core's
//!   `KarpenterBaseline` on Karpenter's benchmark catalog, twice: as our workloads model it
//!   (no kube-reserved) and as upstream's fake provider does (100m CPU and 10Mi reserved per
//!   node), and prints node counts, cost and the instance types each plan used.

use std::collections::BTreeMap;

use kcapi_workloads::karpenter::{INSTANCE_TYPES, diverse_pods, instance_types, snapshot};
use provisioner_core::{Pod, Resources, SchedulingOptions, Strategy, schedule};
use serde_json::{Value, json};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The group of a diverse pod, from the name prefix `diverse_pods` gives it.
fn group(p: &Pod) -> &'static str {
    let prefix = p.name.split('-').next().unwrap_or("");
    match prefix {
        "z" => "zone-spread",
        "h" => "host-spread",
        "za" => "zone-affinity",
        "ha" => "host-anti-affinity",
        _ => "generic",
    }
}

fn export(seed: u64, n: usize, path: &str) -> Res<()> {
    let pods = diverse_pods(seed, n);
    let rows: Vec<Value> = pods
        .iter()
        .map(|p| {
            let r = provisioner_core::resources::pod_requests(p);
            let label = p
                .labels
                .get("my-label")
                .or_else(|| p.labels.get("my-affininity"))
                .cloned()
                .unwrap_or_default();
            let selector = p
                .topology_spread
                .first()
                .and_then(|t| t.label_selector.match_labels.get("my-label"))
                .cloned()
                .unwrap_or_default();
            json!({
                "name": p.name,
                "cpu_milli": r.cpu_milli,
                "memory_mib": r.memory >> 20,
                "group": group(p),
                "label": label,
                "selector": selector,
            })
        })
        .collect();
    std::fs::write(path, serde_json::to_string(&rows)?)?;
    Ok(())
}

/// Node count, cost and nodes per instance type of a plan.
struct Summary {
    nodes: usize,
    cost: f64,
    types: BTreeMap<String, usize>,
    unschedulable: usize,
}

fn ours(pods: Vec<Pod>, reserved: bool) -> Summary {
    let mut snap = snapshot(pods);
    if reserved {
        for it in &mut snap.instance_types {
            it.overhead = Resources::with_pods(100, 10 << 20, 0);
        }
    }
    let r = schedule(
        &snap,
        &SchedulingOptions {
            strategy: Strategy::KarpenterBaseline,
            ..SchedulingOptions::default()
        },
    );
    let mut types = BTreeMap::new();
    for c in &r.new_node_claims {
        *types.entry(c.launch.instance_type.clone()).or_insert(0) += 1;
    }
    Summary {
        nodes: r.new_node_claims.len(),
        cost: r.new_node_cost_per_hour,
        types,
        unschedulable: r.unschedulable.len(),
    }
}

fn upstream(path: &str) -> Res<Summary> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
    let mut types = BTreeMap::new();
    let mut cost = 0.0;
    for n in &nodes {
        cost += n["price"].as_f64().unwrap_or(f64::NAN);
        let t = n["instance_type"].as_str().unwrap_or("?").to_string();
        *types.entry(t).or_insert(0) += 1;
    }
    Ok(Summary {
        nodes: nodes.len(),
        cost,
        types,
        unschedulable: v["pod_errors"].as_u64().unwrap_or(0) as usize,
    })
}

/// `fake-it-12` -> 13 vCPU: sorts types by size.
fn vcpu(t: &str) -> i64 {
    t.rsplit('-')
        .next()
        .and_then(|x| x.parse::<i64>().ok())
        .map_or(-1, |i| i + 1)
}

fn compare(pods_path: &str, upstream_path: &str) -> Res<()> {
    let rows: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(pods_path)?)?;
    let n = rows.len();
    // The export is a pure function of (seed, count): regenerate the core pods from the seed
    // in the file name (compare.sh names it) and check they are the exported ones.
    let seed: u64 = std::path::Path::new(pods_path)
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.split('-').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("pods file must be named pods-SEED-COUNT.json (as compare.sh names it)")?;
    let pods = diverse_pods(seed, n);
    let names: Vec<&str> = rows.iter().filter_map(|r| r["name"].as_str()).collect();
    if names != pods.iter().map(|p| p.name.as_str()).collect::<Vec<_>>() {
        return Err("pods file does not match diverse_pods(seed, count)".into());
    }
    let up = upstream(upstream_path)?;
    let plain = ours(pods.clone(), false);
    let reserved = ours(pods, true);
    println!(
        "{n} diverse pods (seed {seed}), {INSTANCE_TYPES} types ({} built):",
        instance_types(INSTANCE_TYPES).len()
    );
    let line = |name: &str, s: &Summary| {
        println!(
            "  {name:<34} {:>5} nodes  {:>9.3} $/h  ({:+.2}% vs upstream)  unschedulable {}",
            s.nodes,
            s.cost,
            (s.cost / up.cost - 1.0) * 100.0,
            s.unschedulable
        );
    };
    line("upstream Karpenter", &up);
    line("ours, no kube-reserved", &plain);
    line("ours, 100m/10Mi kube-reserved", &reserved);
    let mut all: Vec<&String> = up
        .types
        .keys()
        .chain(plain.types.keys())
        .chain(reserved.types.keys())
        .collect();
    all.sort_by_key(|t| (vcpu(t), (*t).clone()));
    all.dedup();
    println!("  nodes per type (upstream / ours / ours+reserved):");
    for t in all {
        let g = |s: &Summary| s.types.get(t).copied().unwrap_or(0);
        println!(
            "    {t:<12} {:>5} {:>5} {:>5}",
            g(&up),
            g(&plain),
            g(&reserved)
        );
    }
    Ok(())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["export", seed, n, path] => export(seed.parse()?, n.parse()?, path),
        ["compare", pods, up] => compare(pods, up),
        _ => Err(
            "usage: upstream_plan export SEED PODS FILE | compare PODS.json UPSTREAM.json".into(),
        ),
    }
}
