//! Disruption cost, exactly as Karpenter defines it.
//!
//! Karpenter orders consolidation candidates by how much it hurts to evict their pods, so it
//! prefers to move few, cheap, low-priority pods from nodes that expire soon anyway. Keeping the
//! same formula makes our choices explainable to Karpenter users and lets the baseline
//! comparison be faithful:
//!
//! - per pod: `clamp(1 + deletionCost / 2^27 + priority / 2^25, -10, 10)`
//!   (the pod-deletion-cost range maps to about -15..+17 pods, priorities to about -64..+30);
//! - per node: the sum over its reschedulable pods, times the fraction of the node's lifetime
//!   left (`1` without `expireAfter`; `0` once expired), so a node about to expire costs
//!   nothing to disrupt now.

use crate::model::{Node, NodePool, Pod};

/// 2^27: scales `controller.kubernetes.io/pod-deletion-cost`.
const DELETION_COST_SCALE: f64 = 134_217_728.0;
/// 2^25: scales the pod's priority.
const PRIORITY_SCALE: f64 = 33_554_432.0;

/// The cost of evicting one pod (Karpenter's `EvictionCost`).
pub fn eviction_cost(pod: &Pod) -> f64 {
    let cost = 1.0
        + f64::from(pod.deletion_cost) / DELETION_COST_SCALE
        + f64::from(pod.priority) / PRIORITY_SCALE;
    cost.clamp(-10.0, 10.0)
}

/// The fraction of the node's lifetime left, in `[0, 1]` (Karpenter's `LifetimeRemaining`):
/// `1` when the NodePool has no `expireAfter`.
pub fn lifetime_remaining(node: &Node, nodepool: Option<&NodePool>, now: i64) -> f64 {
    match nodepool.and_then(|p| p.expire_after_secs) {
        Some(total) if total > 0 => {
            let age = (now - node.created_at) as f64;
            let total = total as f64;
            ((total - age) / total).clamp(0.0, 1.0)
        }
        // An expireAfter of zero expires the node at once: nothing is left of its lifetime.
        Some(_) => 0.0,
        None => 1.0,
    }
}

/// A node's disruption cost: the eviction costs of the pods that must move, weighted by the
/// node's remaining lifetime.
pub fn node_disruption_cost<'a>(
    node: &Node,
    nodepool: Option<&NodePool>,
    pods: impl IntoIterator<Item = &'a Pod>,
    now: i64,
) -> f64 {
    let rescheduling: f64 = pods.into_iter().map(eviction_cost).sum();
    rescheduling * lifetime_remaining(node, nodepool, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(priority: i32, deletion_cost: i32) -> Pod {
        Pod {
            priority,
            deletion_cost,
            ..Pod::default()
        }
    }

    #[test]
    fn default_pod_costs_one() {
        assert_eq!(eviction_cost(&pod(0, 0)), 1.0);
    }

    #[test]
    fn priority_and_deletion_cost_scale_and_clamp() {
        assert!((eviction_cost(&pod(1 << 25, 0)) - 2.0).abs() < 1e-12);
        assert!((eviction_cost(&pod(0, 1 << 27)) - 2.0).abs() < 1e-12);
        // system-node-critical (2000001000) saturates at the upper clamp.
        assert_eq!(eviction_cost(&pod(2_000_001_000, 0)), 10.0);
        assert_eq!(eviction_cost(&pod(i32::MIN, i32::MIN)), -10.0);
    }

    #[test]
    fn lifetime_weights_the_node_cost() {
        let node = Node {
            created_at: 0,
            ..Node::default()
        };
        let pool = NodePool {
            expire_after_secs: Some(1000),
            ..NodePool::default()
        };
        let pods = [pod(0, 0), pod(0, 0)];
        assert!((node_disruption_cost(&node, Some(&pool), &pods, 250) - 1.5).abs() < 1e-12);
        assert_eq!(node_disruption_cost(&node, Some(&pool), &pods, 5000), 0.0);
        let never = NodePool {
            expire_after_secs: None,
            ..NodePool::default()
        };
        assert_eq!(node_disruption_cost(&node, Some(&never), &pods, 5000), 2.0);
    }
}
