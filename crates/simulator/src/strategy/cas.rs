//! A Cluster-Autoscaler-like baseline, written in the simulator from CAS's documented
//! behaviour (clusterapi provider, default flags):
//! - **Scale-up**, every scan: pending pods that fit no existing or upcoming node are packed
//!   first-fit-decreasing onto new nodes of each node group (one group = instance type x zone
//!   x capacity type, as one MachineDeployment would be); the **least-waste** expander picks
//!   the group leaving the least idle CPU (then memory) fraction; **one group per scan**.
//! - **Scale-down**: a node whose requested CPU and memory are both under the threshold (50%)
//!   and whose pods all fit on other nodes is unneeded; after 10 min unneeded (and 10 min
//!   after the last scale-up) it is removed: empty nodes in bulk (up to 10), others one at a
//!   time. No replacement nodes, no price awareness.
//!
//! Scheduling checks use the core's kube-scheduler filter ([`provisioner_core::filter`]), the
//! same one the engine binds with; the node groups' zones count as (empty) spread domains.

use std::collections::BTreeMap;

use provisioner_core as core;
use provisioner_core::resources::pod_requests;

use super::cluster::{shapes, views};
use super::{Autoscaler, Command, LaunchRequest, Provision, Trigger};
use crate::predicates::{self, Context, NodeView, PodFilter, PodMark};
use crate::scenario::{CasSettings, Settings};

pub const BACKING: &str = "simulator's Cluster-Autoscaler-like model (least-waste expander, one node group per scan, 50%/10 min scale-down); not core code by design";

#[derive(Debug)]
pub struct ClusterAutoscaler {
    cfg: CasSettings,
    unneeded_since: BTreeMap<String, i64>,
    last_scale_up: Option<i64>,
}

impl ClusterAutoscaler {
    pub fn new(cfg: CasSettings) -> Self {
        ClusterAutoscaler {
            cfg,
            unneeded_since: BTreeMap::new(),
            last_scale_up: None,
        }
    }
}

fn pref(p: &core::Pod) -> core::PodRef {
    core::PodRef {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
    }
}

/// The filter for `p` over `nodes`: counted only when something can involve other pods.
fn filter<'a>(
    p: &'a core::Pod,
    req: &'a core::Resources,
    nodes: &[NodeView],
    ctx: &Context<'_>,
    any_owners: bool,
) -> PodFilter<'a> {
    if any_owners || predicates::has_inter_pod_constraints(p) {
        PodFilter::new(p, req, nodes, ctx)
    } else {
        PodFilter::local(p, req)
    }
}

impl Autoscaler for ClusterAutoscaler {
    fn trigger(&self) -> Trigger {
        Trigger::Periodic(self.cfg.scan_interval_seconds)
    }

    fn validation_delay(&self, _settings: &Settings) -> i64 {
        0
    }

    fn disruption_period(&self, _settings: &Settings) -> i64 {
        self.cfg.scan_interval_seconds
    }

    fn wake_at(&self) -> Option<i64> {
        // The earliest unneeded node to ripen; the scale-up delay only postpones that.
        let ripe = self
            .unneeded_since
            .values()
            .map(|s| s + self.cfg.scale_down_unneeded_seconds)
            .min()?;
        let after_add = self.last_scale_up.map_or(i64::MIN, |t| {
            t + self.cfg.scale_down_delay_after_add_seconds
        });
        Some(ripe.max(after_add))
    }

    fn provision(&mut self, snap: &core::Snapshot) -> Provision {
        let (mut nodes, _) = views(snap);
        let mut pending: Vec<usize> = (0..snap.pods.len())
            .filter(|&i| snap.pods[i].node_name.is_none())
            .collect();
        pending.sort_by(|&a, &b| {
            let (ra, rb) = (pod_requests(&snap.pods[a]), pod_requests(&snap.pods[b]));
            rb.cpu_milli
                .cmp(&ra.cpu_milli)
                .then(rb.memory.cmp(&ra.memory))
                .then(a.cmp(&b))
        });
        let mut out = Provision::default();
        // Node groups: every shape (pool x type x offering). Their zones count as topology
        // domains with no pods yet, so zone spread opens nodes in empty zones.
        let (shape_infos, pools) = shapes(snap);
        let potential: Vec<(BTreeMap<String, String>, Vec<core::Taint>)> = shape_infos
            .iter()
            .map(|s| (s.labels.clone(), s.taints.clone()))
            .collect();
        let ctx = Context {
            namespaces: &snap.namespaces,
            potential: &potential,
        };
        let mut any_owners = nodes.iter().any(|n| n.anti_affinity_owners > 0);
        // Pods that fit existing or upcoming nodes wait for them (CAS counts upcoming nodes).
        let mut rest = Vec::new();
        for &pi in &pending {
            let p = &snap.pods[pi];
            let req = pod_requests(p);
            let f = filter(p, &req, &nodes, &ctx, any_owners);
            match (0..nodes.len()).find(|&ni| f.allows(&nodes[ni])) {
                Some(ni) => {
                    any_owners |= !p.pod_anti_affinity.required.is_empty();
                    nodes[ni].add_pod(PodMark::of(pi, p), &req);
                    out.placements.push(core::Placement {
                        pod: pref(p),
                        node: nodes[ni].name.clone(),
                    });
                }
                None => rest.push(pi),
            }
        }
        if rest.is_empty() {
            return out;
        }
        // Each node group simulated with FFD.
        let mut best: Option<(f64, f64, usize, Vec<Vec<usize>>)> = None;
        for (si, s) in shape_infos.iter().enumerate() {
            // Pool node limits: CAS's max size.
            let max_nodes = pools
                .get(s.shape.pool as usize)
                .and_then(|p| p.remaining.as_ref())
                .and_then(|r| r.extended.get("nodes").copied())
                .unwrap_or(i64::MAX)
                .max(0) as usize;
            let template = NodeView::new(
                "",
                s.labels.clone(),
                s.taints.clone(),
                s.shape.allocatable.clone(),
            );
            let mut sim = nodes.clone();
            let mut owners = any_owners;
            let base = sim.len();
            let mut bins: Vec<Vec<usize>> = Vec::new();
            for &pi in &rest {
                let p = &snap.pods[pi];
                let req = pod_requests(p);
                if !predicates::fits_node(p, &req, &template) {
                    continue;
                }
                let f = filter(p, &req, &sim, &ctx, owners);
                let hit = (base..sim.len()).find(|&ni| f.allows(&sim[ni]));
                let ni = match hit {
                    Some(ni) => ni,
                    None => {
                        if bins.len() >= max_nodes {
                            continue;
                        }
                        let mut v = template.clone();
                        v.name = format!("cas-sim-{}", bins.len());
                        v.labels
                            .insert(core::labels::HOSTNAME.into(), v.name.clone());
                        if !f.allows(&v) {
                            continue;
                        }
                        sim.push(v);
                        bins.push(Vec::new());
                        sim.len() - 1
                    }
                };
                owners |= !p.pod_anti_affinity.required.is_empty();
                sim[ni].add_pod(PodMark::of(pi, p), &req);
                bins[ni - base].push(pi);
            }
            if bins.is_empty() {
                continue;
            }
            // Least waste: idle CPU fraction, ties by idle memory fraction (then name).
            let total_cpu = (s.shape.allocatable.cpu_milli * bins.len() as i64) as f64;
            let total_mem = (s.shape.allocatable.memory * bins.len() as i64) as f64;
            let used_cpu: f64 = sim[base..].iter().map(|n| n.used.cpu_milli as f64).sum();
            let used_mem: f64 = sim[base..].iter().map(|n| n.used.memory as f64).sum();
            let waste_cpu = (total_cpu - used_cpu) / total_cpu.max(1.0);
            let waste_mem = (total_mem - used_mem) / total_mem.max(1.0);
            let better = match &best {
                None => true,
                Some((bc, bm, bsi, _)) => {
                    (
                        waste_cpu,
                        waste_mem,
                        &s.shape.instance_type_name,
                        &s.shape.zone,
                    )
                        .partial_cmp(&(
                            *bc,
                            *bm,
                            &shape_infos[*bsi].shape.instance_type_name,
                            &shape_infos[*bsi].shape.zone,
                        ))
                        == Some(std::cmp::Ordering::Less)
                }
            };
            if better {
                best = Some((waste_cpu, waste_mem, si, bins));
            }
        }
        let Some((_, _, si, bins)) = best else {
            for pi in rest {
                out.unschedulable.push(core::Unschedulable {
                    pod: pref(&snap.pods[pi]),
                    reason: "no node group can hold this pod".into(),
                });
            }
            return out;
        };
        let s = &shape_infos[si].shape;
        for bin in bins {
            out.launches.push(LaunchRequest {
                nodepool: pools.get(s.pool as usize).map(|p| p.name.clone()),
                instance_type: s.instance_type_name.clone(),
                zone: s.zone.clone(),
                capacity_type: s.capacity_type,
                price: s.price,
                pods: bin.iter().map(|&pi| pref(&snap.pods[pi])).collect(),
            });
        }
        self.last_scale_up = Some(snap.now);
        out
    }

    fn disrupt(&mut self, snap: &core::Snapshot) -> Option<Command> {
        let (nodes, _) = views(snap);
        let now = snap.now;
        let mut unneeded_now = BTreeMap::new();
        let mut pods_on: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, p) in snap.pods.iter().enumerate() {
            if let Some(n) = &p.node_name
                && p.owner_kind.as_deref() != Some("DaemonSet")
            {
                pods_on.entry(n.as_str()).or_default().push(i);
            }
        }
        let draining = snap.nodes.iter().any(|n| n.marked_for_deletion);
        for (ni, n) in snap.nodes.iter().enumerate() {
            if n.in_flight || !n.ready || n.marked_for_deletion || n.nodepool.is_none() {
                continue;
            }
            let v = &nodes[ni];
            let cpu = v.used.cpu_milli as f64 / v.allocatable.cpu_milli.max(1) as f64;
            let mem = v.used.memory as f64 / v.allocatable.memory.max(1) as f64;
            // CAS counts daemonset pods out of utilisation by default.
            let ds: core::Resources = snap
                .pods
                .iter()
                .filter(|p| {
                    p.node_name.as_deref() == Some(n.name.as_str())
                        && p.owner_kind.as_deref() == Some("DaemonSet")
                })
                .map(pod_requests)
                .fold(core::Resources::default(), |a, b| a.add(&b));
            let cpu = cpu - ds.cpu_milli as f64 / v.allocatable.cpu_milli.max(1) as f64;
            let mem = mem - ds.memory as f64 / v.allocatable.memory.max(1) as f64;
            if cpu.max(mem) >= self.cfg.scale_down_utilization_threshold {
                continue;
            }
            let pods = pods_on.get(n.name.as_str()).cloned().unwrap_or_default();
            if pods.iter().any(|&pi| snap.pods[pi].owner_kind.is_none()) {
                continue;
            }
            // Can every pod move to another ready node?
            // The node's pods leave it (they are what moves).
            let mut sim: Vec<NodeView> = nodes.clone();
            sim[ni].schedulable = false;
            for &pi in &pods {
                let req = pod_requests(&snap.pods[pi]);
                sim[ni].remove_pod(pi, &req);
            }
            let mut owners = sim.iter().any(|n| n.anti_affinity_owners > 0);
            let ctx = Context {
                namespaces: &snap.namespaces,
                potential: &[],
            };
            let mut ok = true;
            for &pi in &pods {
                let p = &snap.pods[pi];
                let req = pod_requests(p);
                let f = filter(p, &req, &sim, &ctx, owners);
                let hit = (0..sim.len())
                    .find(|&j| j != ni && !snap.nodes[j].in_flight && f.allows(&sim[j]));
                match hit {
                    Some(j) => {
                        owners |= !p.pod_anti_affinity.required.is_empty();
                        sim[j].add_pod(PodMark::of(pi, p), &req);
                    }
                    None => {
                        ok = false;
                        break;
                    }
                }
            }
            if ok {
                let since = self.unneeded_since.get(&n.name).copied().unwrap_or(now);
                unneeded_now.insert(n.name.clone(), (since, pods.is_empty(), n.price));
            }
        }
        self.unneeded_since = unneeded_now.iter().map(|(k, v)| (k.clone(), v.0)).collect();
        if self
            .last_scale_up
            .is_some_and(|t| now < t + self.cfg.scale_down_delay_after_add_seconds)
        {
            return None;
        }
        let ripe: Vec<(&String, &(i64, bool, f64))> = unneeded_now
            .iter()
            .filter(|(_, (since, _, _))| now - since >= self.cfg.scale_down_unneeded_seconds)
            .collect();
        let empty: Vec<&String> = ripe
            .iter()
            .filter(|(_, (_, e, _))| *e)
            .map(|(n, _)| *n)
            .take(self.cfg.max_empty_bulk_delete)
            .collect();
        if !empty.is_empty() {
            let savings = ripe
                .iter()
                .filter(|(n, _)| empty.contains(n))
                .map(|(_, (_, _, p))| p)
                .sum();
            for n in &empty {
                self.unneeded_since.remove(*n);
            }
            return Some(Command {
                reason: "Empty".into(),
                candidates: empty.into_iter().cloned().collect(),
                replacements: Vec::new(),
                placements: Vec::new(),
                savings,
                core: None,
            });
        }
        if draining {
            return None;
        }
        let (name, (_, _, price)) = ripe.first()?;
        self.unneeded_since.remove(*name);
        Some(Command {
            reason: "Underutilized (delete)".into(),
            candidates: vec![(*name).clone()],
            replacements: Vec::new(),
            placements: Vec::new(),
            savings: *price,
            core: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> core::Snapshot {
        let it = |name: &str, cpu: i64, mem_gi: i64, price: f64| {
            core::InstanceType::new(
                name,
                cpu,
                mem_gi << 30,
                110,
                vec![core::Offering::new(
                    "zone-a",
                    core::CapacityType::OnDemand,
                    price,
                )],
            )
        };
        core::Snapshot {
            instance_types: vec![it("a-small", 4000, 8, 0.20), it("b-big", 8000, 16, 0.30)],
            nodepools: vec![core::NodePool::new("default", 0)],
            pods: (0..3)
                .map(|i| {
                    let mut p = core::Pod::new("default", &format!("p{i}"), 1000, 1 << 30);
                    p.owner_kind = Some("ReplicaSet".into());
                    p
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn least_waste_picks_one_group() {
        let mut cas = ClusterAutoscaler::new(CasSettings::default());
        let p = cas.provision(&snapshot());
        // 3 x 1 CPU: a-small leaves 1/4 idle, b-big 5/8; least waste is a-small, whatever
        // the price.
        assert_eq!(p.launches.len(), 1);
        assert_eq!(p.launches[0].instance_type, "a-small");
        assert_eq!(p.launches[0].pods.len(), 3);
    }

    #[test]
    fn scale_down_waits_for_unneeded_time() {
        let mut cas = ClusterAutoscaler::new(CasSettings::default());
        let mut s = snapshot();
        let node = |name: &str| {
            let mut n = core::Node::new(
                name,
                "zone-a",
                core::Resources::with_pods(4000, 8 << 30, 110),
            );
            n.nodepool = Some("default".into());
            n.ready = true;
            n.initialized = true;
            n.price = 0.2;
            n
        };
        s.nodes = vec![node("n1"), node("n2")];
        // One small pod on n1: n1 is under 50% and its pod fits on n2.
        s.pods.truncate(1);
        s.pods[0].node_name = Some("n1".into());
        s.now = 1000;
        assert!(cas.disrupt(&s).is_none(), "not unneeded long enough yet");
        s.now = 1000 + 600;
        let cmd = cas.disrupt(&s);
        let names: Vec<String> = cmd.map(|c| c.candidates).unwrap_or_default();
        // n2 is empty: removed first, in bulk.
        assert_eq!(names, vec!["n2".to_string()]);
    }
}
