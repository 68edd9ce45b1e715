//! Karpenter's disruption loop, over whatever provisioning function the strategy uses.
//!
//! Methods in Karpenter's order, the first that yields a command wins: emptiness (every
//! empty candidate whose `consolidateAfter` has passed, within budgets), multi-node
//! consolidation (candidates sorted by disruption cost, up to 100, binary search over
//! prefixes), single-node consolidation. A consolidation is valid when a re-simulation with
//! the candidates removed places all their pods with no new node (delete) or exactly one new
//! node strictly cheaper than the candidates (replace). Drift and expiry are not simulated.
//!
//! This is simulator code standing in for the core's consolidation (issue 6); the cost-aware
//! strategy uses the same loop with its own planner until the core's lands.

use std::collections::BTreeMap;

use provisioner_core as core;

use super::{Command, Provision};

pub const BACKING: &str = "simulator's Karpenter-style disruption loop (emptiness, multi-node prefix search, single-node) over the strategy's provisioning; core consolidation (issue 6) not landed yet";

/// Multi-node consolidation looks at no more than this many candidates (Karpenter: 100).
const MAX_CANDIDATES: usize = 100;

#[derive(Debug, Default)]
pub struct Disruption {
    /// Cluster fingerprint at the last evaluation that found nothing: Karpenter skips the
    /// loop while the cluster is unchanged, and so do we (it also keeps long runs fast).
    last_idle: Option<u64>,
}

fn is_daemon(p: &core::Pod) -> bool {
    p.owner_kind.as_deref() == Some("DaemonSet")
}

fn do_not_disrupt(ann: &BTreeMap<String, String>) -> bool {
    ann.get("karpenter.sh/do-not-disrupt").is_some_and(|v| v == "true")
}

/// Nodes a pool may still disrupt now for `reason`: the most restrictive active budget
/// (percentages round up) minus nodes already disrupting or not ready.
pub fn allowed(snap: &core::Snapshot, pool: &core::NodePool, reason: core::DisruptionReason) -> i64 {
    let nodes: Vec<&core::Node> = snap
        .nodes
        .iter()
        .filter(|n| n.nodepool.as_deref() == Some(pool.name.as_str()) && !n.in_flight)
        .collect();
    let total = nodes.len() as i64;
    let disrupting = nodes.iter().filter(|n| n.marked_for_deletion || !n.ready).count() as i64;
    let mut min = i64::MAX;
    for b in &pool.disruption.budgets {
        if !b.reasons.is_empty() && !b.reasons.contains(&reason) {
            continue;
        }
        // Scheduled budgets are treated as always active: stricter, never looser.
        let n = match b.nodes.strip_suffix('%') {
            Some(p) => {
                let pct: i64 = p.parse().unwrap_or(0);
                (total * pct + 99) / 100
            }
            None => b.nodes.parse().unwrap_or(0),
        };
        min = min.min(n);
    }
    if min == i64::MAX {
        return total;
    }
    (min - disrupting).max(0)
}

/// A candidate node with what moving it costs.
#[derive(Debug, Clone)]
struct Candidate {
    node: usize,
    pool: usize,
    pods: Vec<usize>,
    price: f64,
    cost: f64,
}

fn fingerprint(snap: &core::Snapshot) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for n in &snap.nodes {
        n.name.hash(&mut h);
        n.marked_for_deletion.hash(&mut h);
        n.ready.hash(&mut h);
    }
    for p in &snap.pods {
        p.name.hash(&mut h);
        p.node_name.hash(&mut h);
    }
    h.finish()
}

impl Disruption {
    /// Find one command, or none. `provision` is the strategy's scheduling simulation.
    pub fn find(&mut self, snap: &core::Snapshot, provision: &dyn Fn(&core::Snapshot) -> Provision) -> Option<Command> {
        let fp = fingerprint(snap);
        let cands = candidates(snap);
        // consolidateAfter gates are time-based: only skip when no gate is still closed.
        if self.last_idle == Some(fp) && !gates_pending(snap) {
            return None;
        }
        let cmd = self.empty(snap, &cands).or_else(|| self.multi(snap, &cands, provision)).or_else(|| self.single(snap, &cands, provision));
        if cmd.is_none() {
            self.last_idle = Some(fp);
        } else {
            self.last_idle = None;
        }
        cmd
    }

    fn empty(&self, snap: &core::Snapshot, cands: &[Candidate]) -> Option<Command> {
        let mut per_pool: BTreeMap<usize, i64> = BTreeMap::new();
        let mut chosen = Vec::new();
        let mut savings = 0.0;
        for c in cands.iter().filter(|c| c.pods.is_empty()) {
            let pool = &snap.nodepools[c.pool];
            let left = per_pool.entry(c.pool).or_insert_with(|| allowed(snap, pool, core::DisruptionReason::Empty));
            if *left <= 0 {
                continue;
            }
            *left -= 1;
            chosen.push(snap.nodes[c.node].name.clone());
            savings += c.price;
        }
        if chosen.is_empty() {
            return None;
        }
        Some(Command {
            reason: "Empty".into(),
            candidates: chosen,
            replacements: Vec::new(),
            placements: Vec::new(),
            savings,
        })
    }

    fn multi(&self, snap: &core::Snapshot, cands: &[Candidate], provision: &dyn Fn(&core::Snapshot) -> Provision) -> Option<Command> {
        let under: Vec<Candidate> = within_budget(snap, cands.iter().filter(|c| !c.pods.is_empty() && underutilized_policy(snap, c)).cloned().collect());
        let under: Vec<Candidate> = under.into_iter().take(MAX_CANDIDATES).collect();
        if under.len() < 2 {
            return None;
        }
        // Binary search for the longest prefix that consolidates.
        let (mut lo, mut hi) = (2usize, under.len());
        let mut best = None;
        while lo <= hi {
            let mid = (lo + hi) / 2;
            match simulate(snap, &under[..mid], provision) {
                Some(cmd) => {
                    best = Some(cmd);
                    lo = mid + 1;
                }
                None => hi = mid - 1,
            }
        }
        best
    }

    fn single(&self, snap: &core::Snapshot, cands: &[Candidate], provision: &dyn Fn(&core::Snapshot) -> Provision) -> Option<Command> {
        let under = within_budget(snap, cands.iter().filter(|c| !c.pods.is_empty() && underutilized_policy(snap, c)).cloned().collect());
        under.iter().find_map(|c| simulate(snap, std::slice::from_ref(c), provision))
    }
}

fn underutilized_policy(snap: &core::Snapshot, c: &Candidate) -> bool {
    snap.nodepools[c.pool].disruption.consolidation_policy == core::ConsolidationPolicy::WhenEmptyOrUnderutilized
}

fn within_budget(snap: &core::Snapshot, cands: Vec<Candidate>) -> Vec<Candidate> {
    let mut per_pool: BTreeMap<usize, i64> = BTreeMap::new();
    cands
        .into_iter()
        .filter(|c| {
            let left = per_pool
                .entry(c.pool)
                .or_insert_with(|| allowed(snap, &snap.nodepools[c.pool], core::DisruptionReason::Underutilized));
            if *left > 0 {
                *left -= 1;
                true
            } else {
                false
            }
        })
        .collect()
}

fn gates_pending(snap: &core::Snapshot) -> bool {
    snap.nodes.iter().any(|n| {
        let Some(pool) = n.nodepool.as_ref().and_then(|p| snap.nodepools.iter().find(|x| &x.name == p)) else {
            return false;
        };
        match pool.disruption.consolidate_after_secs {
            Some(after) => n.ready && !n.marked_for_deletion && snap.now < n.last_pod_event_at + after,
            None => false,
        }
    })
}

/// Disruptable nodes, sorted by disruption cost (cheapest to disrupt first).
fn candidates(snap: &core::Snapshot) -> Vec<Candidate> {
    let mut pods_on: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in snap.pods.iter().enumerate() {
        if let Some(n) = &p.node_name {
            pods_on.entry(n.as_str()).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    'nodes: for (ni, n) in snap.nodes.iter().enumerate() {
        if n.in_flight || !n.ready || !n.initialized || n.marked_for_deletion || n.nominated || do_not_disrupt(&n.annotations) {
            continue;
        }
        let Some(pool) = n.nodepool.as_ref().and_then(|p| snap.nodepools.iter().position(|x| &x.name == p)) else {
            continue;
        };
        let Some(after) = snap.nodepools[pool].disruption.consolidate_after_secs else {
            continue;
        };
        if snap.now < n.last_pod_event_at + after {
            continue;
        }
        let mut pods = Vec::new();
        let mut cost = 0.0;
        for &pi in pods_on.get(n.name.as_str()).map(Vec::as_slice).unwrap_or(&[]) {
            let p = &snap.pods[pi];
            if is_daemon(p) {
                continue;
            }
            if do_not_disrupt(&p.annotations) || p.owner_kind.is_none() {
                continue 'nodes;
            }
            // Karpenter: clamp(1 + deletionCost/2^27 + priority/2^25, -10, 10).
            cost += (1.0 + p.deletion_cost as f64 / 134_217_728.0 + p.priority as f64 / 33_554_432.0).clamp(-10.0, 10.0);
            pods.push(pi);
        }
        out.push(Candidate {
            node: ni,
            pool,
            pods,
            price: n.price,
            cost,
        });
    }
    out.sort_by(|a, b| {
        a.cost
            .total_cmp(&b.cost)
            .then(b.price.total_cmp(&a.price))
            .then(snap.nodes[a.node].name.cmp(&snap.nodes[b.node].name))
    });
    out
}

/// Re-simulate without `cands`: all their pods must fit on the rest plus at most one new node
/// that is strictly cheaper than the candidates together.
fn simulate(snap: &core::Snapshot, cands: &[Candidate], provision: &dyn Fn(&core::Snapshot) -> Provision) -> Option<Command> {
    let removed: Vec<&str> = cands.iter().map(|c| snap.nodes[c.node].name.as_str()).collect();
    let mut s = snap.clone();
    s.nodes.retain(|n| !removed.contains(&n.name.as_str()));
    // Only the candidates' pods are scheduled: other pending pods are the provisioner's.
    let moved: Vec<usize> = cands.iter().flat_map(|c| c.pods.iter().copied()).collect();
    s.pods = snap
        .pods
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            if moved.contains(&i) {
                Some(core::Pod { node_name: None, ..p.clone() })
            } else if p.node_name.as_deref().is_some_and(|n| removed.contains(&n)) || p.node_name.is_none() {
                None
            } else {
                Some(p.clone())
            }
        })
        .collect();
    let result = provision(&s);
    if !result.unschedulable.is_empty() || result.launches.len() > 1 {
        return None;
    }
    let price: f64 = cands.iter().map(|c| c.price).sum();
    let new_price: f64 = result.launches.iter().map(|l| l.price).sum();
    if !result.launches.is_empty() && new_price >= price {
        return None;
    }
    // Sanity: every moved pod must be accounted for.
    let placed = result.placements.len() + result.launches.iter().map(|l| l.pods.len()).sum::<usize>();
    if placed != moved.len() {
        return None;
    }
    Some(Command {
        reason: if result.launches.is_empty() { "Underutilized (delete)" } else { "Underutilized (replace)" }.into(),
        candidates: removed.iter().map(|s| s.to_string()).collect(),
        replacements: result.launches,
        placements: result.placements,
        savings: price - new_price,
    })
}
