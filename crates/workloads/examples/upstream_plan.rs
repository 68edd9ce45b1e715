//! Our `karpenter` baseline's plan against upstream Karpenter's on identical pods (driven by
//! `benches/upstream/compare.sh`, which runs upstream's scheduler through
//! `benches/upstream/kcapi_plan_test.go`).
//!
//! - `export SEED PODS FILE`: Karpenter's "diverse" benchmark pods ([`diverse_pods`]) as JSON
//!   for the Go harness.
//! - `compare PODS.json UPSTREAM.json`: plans the same pods with the core's
//!   `KarpenterBaseline` on Karpenter's benchmark catalog, twice: as our workloads model it
//!   (no kube-reserved) and as upstream's fake provider does (100m CPU and 10Mi reserved per
//!   node), and prints node counts, cost and the instance types each plan used, and the
//!   first pod (in queue order) that upstream's plan and ours (with the reservation) put on
//!   different NodeClaims: with `KCAPI_DETERMINISTIC=1 compare.sh` there is none.

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

/// Node count, cost and nodes per instance type of a plan, and each node's pods in the
/// order they joined it, with its launch.
struct Summary {
    nodes: usize,
    cost: f64,
    types: BTreeMap<String, usize>,
    unschedulable: usize,
    claims: Vec<Claim>,
}

struct Claim {
    pods: Vec<String>,
    instance_type: String,
    zone: String,
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
    let claims = r
        .new_node_claims
        .iter()
        .map(|c| Claim {
            pods: c.pods.iter().map(|p| p.name.clone()).collect(),
            instance_type: c.launch.instance_type.clone(),
            zone: c.launch.zone.clone(),
        })
        .collect();
    Summary {
        nodes: r.new_node_claims.len(),
        cost: r.new_node_cost_per_hour,
        types,
        unschedulable: r.unschedulable.len(),
        claims,
    }
}

fn upstream(path: &str) -> Res<Summary> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
    let mut types = BTreeMap::new();
    let mut cost = 0.0;
    let mut claims = Vec::new();
    for n in &nodes {
        cost += n["price"].as_f64().unwrap_or(f64::NAN);
        let t = n["instance_type"].as_str().unwrap_or("?").to_string();
        *types.entry(t.clone()).or_insert(0) += 1;
        claims.push(Claim {
            pods: n["pods"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            instance_type: t,
            zone: n["zone"].as_str().unwrap_or("?").to_string(),
        });
    }
    Ok(Summary {
        nodes: nodes.len(),
        cost,
        types,
        unschedulable: v["pod_errors"].as_u64().unwrap_or(0) as usize,
        claims,
    })
}

/// `fake-it-12` -> 13 vCPU: sorts types by size.
fn vcpu(t: &str) -> i64 {
    t.rsplit('-')
        .next()
        .and_then(|x| x.parse::<i64>().ok())
        .map_or(-1, |i| i + 1)
}

/// The first pod, in queue order, that the two plans put on different NodeClaims (a
/// NodeClaim named by the first pod it took), with both NodeClaims' pods up to that point:
/// where to start reading when the plans differ.
fn first_divergence(pods: &[Pod], up: &Summary, ours: &Summary) {
    let owner = |s: &Summary| -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for (ci, c) in s.claims.iter().enumerate() {
            for p in &c.pods {
                m.insert(p.clone(), ci);
            }
        }
        m
    };
    let (ou, oo) = (owner(up), owner(ours));
    let order = provisioner_core::scheduler::pod_order(pods);
    let opener = |s: &Summary, ci: usize| s.claims.get(ci).and_then(|c| c.pods.first()).cloned();
    for (rank, i) in order.iter().enumerate() {
        let Some(p) = pods.get(*i) else { continue };
        let (cu, co) = (ou.get(&p.name).copied(), oo.get(&p.name).copied());
        let (Some(cu), Some(co)) = (cu, co) else {
            println!(
                "  first divergence: pod {} (queue position {rank}) is unplaced in one plan",
                p.name
            );
            return;
        };
        if opener(up, cu) == opener(ours, co) {
            continue;
        }
        let show = |who: &str, s: &Summary, ci: usize| {
            if let Some(c) = s.claims.get(ci) {
                let upto: Vec<&String> = c.pods.iter().take_while(|x| **x != p.name).collect();
                println!(
                    "    {who}: claim opened by {} ({} pods before it, launched {} in {}): {:?}",
                    c.pods.first().map_or("?", String::as_str),
                    upto.len(),
                    c.instance_type,
                    c.zone,
                    upto
                );
            }
        };
        println!(
            "  first divergence: pod {} (queue position {rank}, {}m/{}Mi)",
            p.name,
            provisioner_core::resources::pod_requests(p).cpu_milli,
            provisioner_core::resources::pod_requests(p).memory >> 20
        );
        show("upstream", up, cu);
        show("ours    ", ours, co);
        return;
    }
    println!("  no divergence: every pod is on the same NodeClaim in both plans");
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
    let reserved = ours(pods.clone(), true);
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
    first_divergence(&pods, &up, &reserved);
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
