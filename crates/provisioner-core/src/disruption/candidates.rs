//! Which nodes may be disrupted at all, and for which reasons.
//!
//! A node is a candidate (Karpenter's `NewCandidate`) when:
//! it is owned by a NodePool that exists, is initialized, not in flight, not nominated for
//! pending pods, not marked for deletion; neither it nor any of its pods carries an active
//! `karpenter.sh/do-not-disrupt`; and no pod on it is selected by a PDB that allows zero
//! disruptions, or by more than one PDB (the Eviction API refuses such pods, so the node could
//! never drain). A PDB that allows one disruption lets a node with several of its pods go: the
//! drain evicts them as the Eviction API allows, each once the one before runs again
//! elsewhere (`DisruptionOptions::pdb_per_command` counts them against the allowance instead).
//! Static pods (owned by the node) die with it and are not checked.
//!
//! Every rejected node is reported with the first reason that rejected it, so a person can
//! see why a node is never consolidated. Per-method gates come on top of this:
//! consolidation (empty or underutilized) needs `consolidateAfter` to have elapsed since the
//! node's last pod event and a policy that allows it; drift needs the provider's drift mark;
//! expiration needs `expireAfter` to have passed. Budgets are applied by the methods.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::DisruptionOptions;
use super::budgets::Budgets;
use super::cost::node_disruption_cost;
use super::protect::{PdbIndex, Protection};
use crate::model::{CapacityType, ConsolidationPolicy, NodePool, Pod, Snapshot, labels};

/// Why a node is not a candidate, or not for a given method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Ineligible {
    /// No `karpenter.sh/nodepool`: not ours to disrupt.
    NotManaged,
    UnknownNodePool(String),
    InFlight,
    NotInitialized,
    Nominated,
    MarkedForDeletion,
    NodeDoNotDisrupt(Protection),
    PodDoNotDisrupt {
        pod: String,
        protection: Protection,
    },
    /// A PDB selecting this pod allows no disruption now.
    PdbBlocks {
        pod: String,
        pdb: String,
    },
    /// More than one PDB selects this pod; the Eviction API refuses to evict it.
    MultiplePdbs {
        pod: String,
    },
    /// A pod with no controller would be lost, not rescheduled.
    UncontrolledPod {
        pod: String,
    },
    /// `consolidateAfter: Never`.
    ConsolidateNever,
    /// `consolidateAfter` has not elapsed since the last pod event.
    ConsolidateAfter {
        remaining_secs: i64,
    },
    /// `consolidationPolicy: WhenEmpty` and the node is not empty.
    PolicyWhenEmpty,
}

impl std::fmt::Display for Ineligible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ineligible::NotManaged => write!(f, "not owned by a NodePool"),
            Ineligible::UnknownNodePool(p) => write!(f, "NodePool {p} does not exist"),
            Ineligible::InFlight => write!(f, "still launching"),
            Ineligible::NotInitialized => write!(f, "not initialized"),
            Ineligible::Nominated => write!(f, "nominated for pending pods"),
            Ineligible::MarkedForDeletion => write!(f, "already marked for deletion"),
            Ineligible::NodeDoNotDisrupt(p) => {
                write!(f, "node has karpenter.sh/do-not-disrupt ({p:?})")
            }
            Ineligible::PodDoNotDisrupt { pod, protection } => {
                write!(
                    f,
                    "pod {pod} has karpenter.sh/do-not-disrupt ({protection:?})"
                )
            }
            Ineligible::PdbBlocks { pod, pdb } => {
                write!(f, "PDB {pdb} allows no disruption of pod {pod}")
            }
            Ineligible::MultiplePdbs { pod } => {
                write!(f, "pod {pod} is selected by more than one PDB")
            }
            Ineligible::UncontrolledPod { pod } => {
                write!(f, "pod {pod} has no controller and would not come back")
            }
            Ineligible::ConsolidateNever => write!(f, "consolidateAfter is Never"),
            Ineligible::ConsolidateAfter { remaining_secs } => {
                write!(f, "consolidateAfter not elapsed ({remaining_secs}s to go)")
            }
            Ineligible::PolicyWhenEmpty => {
                write!(f, "consolidationPolicy WhenEmpty and the node has pods")
            }
        }
    }
}

/// A node that is not a candidate, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejection {
    pub node: String,
    pub reason: Ineligible,
}

/// A node that may be disrupted, with everything the methods need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Index in [`Snapshot::nodes`].
    pub node: usize,
    pub name: String,
    pub nodepool: String,
    pub instance_type: Option<String>,
    pub capacity_type: CapacityType,
    pub price: f64,
    /// Indices in [`Snapshot::pods`] of the pods that must be rescheduled elsewhere (not
    /// daemonset or static pods).
    pub pods: Vec<usize>,
    /// Karpenter's disruption cost of the node.
    pub disruption_cost: f64,
    /// Evictions this node's drain takes from each PDB (index in [`Snapshot::pdbs`]).
    pub pdb_evictions: Vec<(usize, u32)>,
    pub empty: bool,
    pub drifted: bool,
    pub expired: bool,
    /// `None` when emptiness/consolidation may take the node; otherwise why not.
    pub not_consolidatable: Option<Ineligible>,
    /// Whether the pool's policy allows underutilized consolidation (WhenEmptyOrUnderutilized).
    pub underutilized_allowed: bool,
}

impl Candidate {
    /// Eligible for the emptiness method.
    pub fn for_emptiness(&self) -> bool {
        self.empty && self.not_consolidatable.is_none()
    }

    /// Eligible for underutilized consolidation.
    pub fn for_consolidation(&self) -> bool {
        self.not_consolidatable.is_none() && self.underutilized_allowed
    }

    /// Empty, and the emptiness method will delete it (now, or once `consolidateAfter` has
    /// elapsed) unless pods land on it first.
    pub fn awaits_emptiness(&self) -> bool {
        self.empty
            && matches!(
                self.not_consolidatable,
                None | Some(Ineligible::ConsolidateAfter { .. })
            )
    }
}

/// Nodes no consolidation command should move pods onto: empty nodes that the
/// emptiness method will delete ([`Candidate::awaits_emptiness`]) in a NodePool whose Empty
/// budget allows it now.
///
/// Why: a move onto such a node is counted as free room, but the node would otherwise be
/// gone within `consolidateAfter`, so the move keeps it running in place of the candidates.
/// On the openb trace a 1 TiB node launched for one large pod lost that pod before it was
/// ready; within the 30 s of its `consolidateAfter`, a command deleted smaller nodes by moving
/// their pods onto it, which kept it for 30 hours at more than those nodes cost
/// (`docs/simulator.md`, round 34). Karpenter does the same; the command it makes looks like
/// a saving and is a dearer swap.
pub fn awaiting_emptiness<'c>(candidates: &'c [Candidate], budgets: &Budgets) -> Vec<&'c str> {
    candidates
        .iter()
        .filter(|c| {
            c.awaits_emptiness()
                && budgets.allowed(&c.nodepool, crate::model::DisruptionReason::Empty) > 0
        })
        .map(|c| c.name.as_str())
        .collect()
}

/// Candidates and rejections of one snapshot, in node-name order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CandidateSet {
    pub candidates: Vec<Candidate>,
    pub rejected: Vec<Rejection>,
}

impl CandidateSet {
    pub fn by_name(&self, name: &str) -> Option<&Candidate> {
        self.candidates.iter().find(|c| c.name == name)
    }
}

/// Pods grouped by the node they are bound to.
pub fn pods_by_node(snapshot: &Snapshot) -> BTreeMap<&str, Vec<usize>> {
    let mut m: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in snapshot.pods.iter().enumerate() {
        if let Some(n) = p.node_name.as_deref() {
            m.entry(n).or_default().push(i);
        }
    }
    m
}

/// A daemonset pod is recreated on every node; it does not move.
pub fn is_daemon(pod: &Pod) -> bool {
    pod.owner_kind.as_deref() == Some("DaemonSet")
}

/// A static (mirror) pod belongs to its node and dies with it.
pub fn is_static(pod: &Pod) -> bool {
    pod.owner_kind.as_deref() == Some("Node")
}

/// A pod that must find a new home when its node goes away.
pub fn is_reschedulable(pod: &Pod) -> bool {
    !is_daemon(pod) && !is_static(pod)
}

fn pod_name(p: &Pod) -> String {
    format!("{}/{}", p.namespace, p.name)
}

/// Classifies every node of the snapshot.
pub fn find_candidates(snapshot: &Snapshot, options: &DisruptionOptions) -> CandidateSet {
    let pools: BTreeMap<&str, &NodePool> = snapshot
        .nodepools
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    let by_node = pods_by_node(snapshot);
    let pdbs = PdbIndex::new(&snapshot.pdbs);
    let now = snapshot.now;
    let mut out = CandidateSet::default();
    let mut order: Vec<usize> = (0..snapshot.nodes.len()).collect();
    order.sort_by(|&a, &b| snapshot.nodes[a].name.cmp(&snapshot.nodes[b].name));
    let empty: Vec<usize> = Vec::new();
    for idx in order {
        let node = &snapshot.nodes[idx];
        let reject = |reason| Rejection {
            node: node.name.clone(),
            reason,
        };
        let Some(pool_name) = node.nodepool.as_deref() else {
            out.rejected.push(reject(Ineligible::NotManaged));
            continue;
        };
        let Some(pool) = pools.get(pool_name).copied() else {
            out.rejected
                .push(reject(Ineligible::UnknownNodePool(pool_name.to_string())));
            continue;
        };
        let gate = if node.in_flight {
            Some(Ineligible::InFlight)
        } else if !node.initialized {
            Some(Ineligible::NotInitialized)
        } else if node.nominated {
            Some(Ineligible::Nominated)
        } else if node.marked_for_deletion {
            Some(Ineligible::MarkedForDeletion)
        } else {
            let p = Protection::of(&node.annotations, node.created_at, now);
            p.blocks().then_some(Ineligible::NodeDoNotDisrupt(p))
        };
        if let Some(r) = gate {
            out.rejected.push(reject(r));
            continue;
        }
        let pod_ids = by_node.get(node.name.as_str()).unwrap_or(&empty);
        let mut pdb_evictions: BTreeMap<usize, u32> = BTreeMap::new();
        let mut blocked = None;
        for &pi in pod_ids {
            let pod = &snapshot.pods[pi];
            if is_static(pod) {
                continue;
            }
            let p = Protection::of(&pod.annotations, pod.created_at, now);
            if p.blocks() {
                blocked = Some(Ineligible::PodDoNotDisrupt {
                    pod: pod_name(pod),
                    protection: p,
                });
                break;
            }
            if !options.evict_uncontrolled_pods && pod.owner_kind.is_none() {
                blocked = Some(Ineligible::UncontrolledPod { pod: pod_name(pod) });
                break;
            }
            let matching = pdbs.matching(pod);
            if matching.len() > 1 {
                blocked = Some(Ineligible::MultiplePdbs { pod: pod_name(pod) });
                break;
            }
            if let Some(&m) = matching.first() {
                let pdb = &snapshot.pdbs[m];
                if pdb.disruptions_allowed <= 0 {
                    blocked = Some(Ineligible::PdbBlocks {
                        pod: pod_name(pod),
                        pdb: format!("{}/{}", pdb.namespace, pdb.name),
                    });
                    break;
                }
                *pdb_evictions.entry(m).or_default() += 1;
            }
        }
        if let Some(r) = blocked {
            out.rejected.push(reject(r));
            continue;
        }
        let pods: Vec<usize> = pod_ids
            .iter()
            .copied()
            .filter(|&i| is_reschedulable(&snapshot.pods[i]))
            .collect();
        let empty_node = pods.is_empty();
        let not_consolidatable = match pool.disruption.consolidate_after_secs {
            None => Some(Ineligible::ConsolidateNever),
            Some(after) => {
                let last = if node.last_pod_event_at > 0 {
                    node.last_pod_event_at
                } else {
                    node.created_at
                };
                let remaining = last.saturating_add(after) - now;
                (remaining > 0).then_some(Ineligible::ConsolidateAfter {
                    remaining_secs: remaining,
                })
            }
        };
        let expired = pool
            .expire_after_secs
            .is_some_and(|e| now - node.created_at >= e);
        let disruption_cost = node_disruption_cost(
            node,
            Some(pool),
            pods.iter().map(|&i| &*snapshot.pods[i]),
            now,
        );
        out.candidates.push(Candidate {
            node: idx,
            name: node.name.clone(),
            nodepool: pool_name.to_string(),
            instance_type: node
                .instance_type
                .clone()
                .or_else(|| node.labels.get(labels::INSTANCE_TYPE).cloned()),
            capacity_type: capacity_type_of(node),
            price: node.price,
            pods,
            disruption_cost,
            pdb_evictions: pdb_evictions.into_iter().collect(),
            empty: empty_node,
            drifted: node.drifted,
            expired,
            not_consolidatable,
            underutilized_allowed: pool.disruption.consolidation_policy
                == ConsolidationPolicy::WhenEmptyOrUnderutilized,
        });
    }
    out
}

/// The node's capacity type from its `karpenter.sh/capacity-type` label (on-demand if absent).
pub fn capacity_type_of(node: &crate::model::Node) -> CapacityType {
    match node.labels.get(labels::CAPACITY_TYPE).map(String::as_str) {
        Some("spot") => CapacityType::Spot,
        Some("reserved") => CapacityType::Reserved,
        _ => CapacityType::OnDemand,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disruption::protect::DO_NOT_DISRUPT;
    use crate::model::{Disruption, LabelSelector, Node, PodDisruptionBudget};

    fn node(name: &str) -> Node {
        Node {
            name: name.into(),
            nodepool: Some("pool".into()),
            initialized: true,
            ready: true,
            price: 1.0,
            created_at: 0,
            last_pod_event_at: 0,
            ..Node::default()
        }
    }

    fn pod(name: &str, node: &str) -> Pod {
        Pod {
            namespace: "ns".into(),
            name: name.into(),
            node_name: Some(node.into()),
            owner_kind: Some("ReplicaSet".into()),
            labels: [("app".to_string(), name.to_string())]
                .into_iter()
                .collect(),
            ..Pod::default()
        }
    }

    fn snap(nodes: Vec<Node>, pods: Vec<Pod>) -> Snapshot {
        Snapshot {
            now: 10_000,
            nodes,
            pods: Snapshot::shared_pods(pods),
            nodepools: vec![NodePool {
                name: "pool".into(),
                ..NodePool::default()
            }],
            ..Snapshot::default()
        }
    }

    fn reason_of(set: &CandidateSet, node: &str) -> Option<Ineligible> {
        set.rejected
            .iter()
            .find(|r| r.node == node)
            .map(|r| r.reason.clone())
    }

    #[test]
    fn node_state_gates() {
        let nodes = vec![
            Node {
                nodepool: None,
                ..node("a-unmanaged")
            },
            Node {
                nodepool: Some("gone".into()),
                ..node("b-unknown")
            },
            Node {
                initialized: false,
                ..node("c-uninit")
            },
            Node {
                nominated: true,
                ..node("d-nominated")
            },
            Node {
                marked_for_deletion: true,
                ..node("e-deleting")
            },
            Node {
                in_flight: true,
                ..node("f-flight")
            },
            node("g-ok"),
        ];
        let set = find_candidates(&snap(nodes, vec![]), &DisruptionOptions::default());
        assert_eq!(reason_of(&set, "a-unmanaged"), Some(Ineligible::NotManaged));
        assert_eq!(
            reason_of(&set, "b-unknown"),
            Some(Ineligible::UnknownNodePool("gone".into()))
        );
        assert_eq!(
            reason_of(&set, "c-uninit"),
            Some(Ineligible::NotInitialized)
        );
        assert_eq!(reason_of(&set, "d-nominated"), Some(Ineligible::Nominated));
        assert_eq!(
            reason_of(&set, "e-deleting"),
            Some(Ineligible::MarkedForDeletion)
        );
        assert_eq!(reason_of(&set, "f-flight"), Some(Ineligible::InFlight));
        assert_eq!(set.candidates.len(), 1);
        assert!(set.candidates[0].empty && set.candidates[0].for_emptiness());
    }

    #[test]
    fn do_not_disrupt_on_node_and_pod_with_durations() {
        let mut n1 = node("n1");
        n1.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
        let mut n2 = node("n2");
        n2.annotations.insert(DO_NOT_DISRUPT.into(), "1h".into()); // created at 0, now 10000 > 3600
        let mut p3 = pod("p3", "n3");
        p3.created_at = 9_000;
        p3.annotations.insert(DO_NOT_DISRUPT.into(), "30m".into()); // until 10800 > now
        let mut p4 = pod("p4", "n4");
        p4.created_at = 5_000;
        p4.annotations.insert(DO_NOT_DISRUPT.into(), "30m".into()); // until 6800 < now
        let set = find_candidates(
            &snap(vec![n1, n2, node("n3"), node("n4")], vec![p3, p4]),
            &DisruptionOptions::default(),
        );
        assert!(matches!(
            reason_of(&set, "n1"),
            Some(Ineligible::NodeDoNotDisrupt(Protection::Forever))
        ));
        assert!(
            set.by_name("n2").is_some(),
            "elapsed duration no longer protects"
        );
        assert!(matches!(
            reason_of(&set, "n3"),
            Some(Ineligible::PodDoNotDisrupt {
                protection: Protection::Until(10_800),
                ..
            })
        ));
        assert!(set.by_name("n4").is_some());
    }

    #[test]
    fn pdbs_that_allow_nothing_or_overlap_block() {
        let pdb = |name: &str, app: &str, allowed: i32| PodDisruptionBudget {
            namespace: "ns".into(),
            name: name.into(),
            selector: LabelSelector::from_labels([("app", app)]),
            disruptions_allowed: allowed,
        };
        let pods = vec![pod("zero", "n1"), pod("two", "n2"), pod("one", "n3")];
        let mut s = snap(vec![node("n1"), node("n2"), node("n3")], pods);
        s.pdbs = vec![
            pdb("zero", "zero", 0),
            pdb("two-a", "two", 1),
            pdb("two-b", "two", 1),
            pdb("one", "one", 1),
        ];
        let set = find_candidates(&s, &DisruptionOptions::default());
        assert!(matches!(
            reason_of(&set, "n1"),
            Some(Ineligible::PdbBlocks { .. })
        ));
        assert!(matches!(
            reason_of(&set, "n2"),
            Some(Ineligible::MultiplePdbs { .. })
        ));
        let c = set.by_name("n3").expect("candidate");
        assert_eq!(c.pdb_evictions, vec![(3, 1)]);
    }

    #[test]
    fn daemonset_pods_do_not_make_a_node_non_empty() {
        let mut ds = pod("ds", "n1");
        ds.owner_kind = Some("DaemonSet".into());
        let mut st = pod("static", "n1");
        st.owner_kind = Some("Node".into());
        let set = find_candidates(
            &snap(vec![node("n1")], vec![ds, st]),
            &DisruptionOptions::default(),
        );
        assert!(set.candidates[0].empty);
    }

    #[test]
    fn uncontrolled_pods_block_unless_allowed() {
        let mut bare = pod("bare", "n1");
        bare.owner_kind = None;
        let s = snap(vec![node("n1")], vec![bare]);
        let set = find_candidates(&s, &DisruptionOptions::default());
        assert!(matches!(
            reason_of(&set, "n1"),
            Some(Ineligible::UncontrolledPod { .. })
        ));
        let opts = DisruptionOptions {
            evict_uncontrolled_pods: true,
            ..DisruptionOptions::default()
        };
        assert_eq!(find_candidates(&s, &opts).candidates.len(), 1);
    }

    #[test]
    fn consolidate_after_and_policy() {
        let mut s = snap(
            vec![
                Node {
                    last_pod_event_at: 9_900,
                    ..node("n1")
                },
                node("n2"),
            ],
            vec![pod("p", "n2")],
        );
        s.nodepools[0].disruption = Disruption {
            consolidate_after_secs: Some(300),
            ..Disruption::default()
        };
        let set = find_candidates(&s, &DisruptionOptions::default());
        assert_eq!(
            set.by_name("n1").and_then(|c| c.not_consolidatable.clone()),
            Some(Ineligible::ConsolidateAfter {
                remaining_secs: 200
            })
        );
        assert!(set.by_name("n2").is_some_and(|c| c.for_consolidation()));
        s.nodepools[0].disruption.consolidation_policy = ConsolidationPolicy::WhenEmpty;
        let set = find_candidates(&s, &DisruptionOptions::default());
        assert!(set.by_name("n2").is_some_and(|c| !c.for_consolidation()));
        s.nodepools[0].disruption.consolidate_after_secs = None;
        let set = find_candidates(&s, &DisruptionOptions::default());
        assert_eq!(
            set.by_name("n2").and_then(|c| c.not_consolidatable.clone()),
            Some(Ineligible::ConsolidateNever)
        );
    }

    #[test]
    fn expiry_and_drift_flags() {
        let mut s = snap(
            vec![
                Node {
                    drifted: true,
                    ..node("n1")
                },
                Node {
                    created_at: 9_000,
                    ..node("n2")
                },
            ],
            vec![],
        );
        s.nodepools[0].expire_after_secs = Some(5_000);
        let set = find_candidates(&s, &DisruptionOptions::default());
        let n1 = set.by_name("n1").expect("n1");
        assert!(n1.drifted && n1.expired);
        let n2 = set.by_name("n2").expect("n2");
        assert!(!n2.drifted && !n2.expired);
    }
}
