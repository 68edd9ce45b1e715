//! Prometheus metrics. Karpenter's names where the meaning is the same, so existing
//! dashboards and alerts keep working; ours under `karpenter_capi_`. `docs/metrics.md` lists
//! every one.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodePoolReason {
    pub nodepool: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub decision: String,
    pub reason: String,
    pub consolidation_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UsageLabels {
    pub nodepool: String,
    pub resource_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Every metric, registered once.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Arc<Registry>,
    pub nodeclaims_created: Family<NodePoolReason, Counter>,
    pub nodeclaims_terminated: Family<NodePoolReason, Counter>,
    pub scheduling_duration: Histogram,
    pub disruption_decisions: Family<DecisionLabels, Counter>,
    pub cluster_state_synced: Gauge,
    pub nodepools_usage: Family<UsageLabels, FloatGauge>,
    pub nodepools_limit: Family<UsageLabels, FloatGauge>,
    pub pods_pending: Gauge,
    pub reconcile_errors: Family<ControllerLabels, Counter>,
    pub managed_cost_per_hour: FloatGauge,
    pub provisioning_gap_percent: FloatGauge,
    pub is_leader: Gauge,
    pub pod_lifetimes_observed: Gauge,
    pub payback_horizon_cap_hours: FloatGauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut root = Registry::with_prefix("karpenter");
        let m = Metrics {
            registry: Arc::new(Registry::default()),
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            scheduling_duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            disruption_decisions: Family::default(),
            cluster_state_synced: Gauge::default(),
            nodepools_usage: Family::default(),
            nodepools_limit: Family::default(),
            pods_pending: Gauge::default(),
            reconcile_errors: Family::default(),
            managed_cost_per_hour: FloatGauge::default(),
            provisioning_gap_percent: FloatGauge::default(),
            is_leader: Gauge::default(),
            pod_lifetimes_observed: Gauge::default(),
            payback_horizon_cap_hours: FloatGauge::default(),
        };
        root.register(
            "nodeclaims_created",
            "NodeClaims created, by NodePool and reason (provisioning, disruption).",
            m.nodeclaims_created.clone(),
        );
        root.register(
            "nodeclaims_terminated",
            "NodeClaims terminated, by NodePool and reason.",
            m.nodeclaims_terminated.clone(),
        );
        root.register(
            "scheduler_scheduling_duration_seconds",
            "Duration of one provisioning scheduling simulation.",
            m.scheduling_duration.clone(),
        );
        root.register(
            "voluntary_disruption_decisions",
            "Disruption commands carried out, by decision (delete, replace), reason and consolidation type.",
            m.disruption_decisions.clone(),
        );
        root.register(
            "cluster_state_synced",
            "1 when every reflector has listed its kind (decisions wait for it).",
            m.cluster_state_synced.clone(),
        );
        root.register(
            "nodepools_usage",
            "Resources provisioned by each NodePool.",
            m.nodepools_usage.clone(),
        );
        root.register(
            "nodepools_limit",
            "Limits of each NodePool.",
            m.nodepools_limit.clone(),
        );
        root.register(
            "pods_pending",
            "Pods the kube-scheduler marked unschedulable at the last provisioning round.",
            m.pods_pending.clone(),
        );
        let ours = root.sub_registry_with_prefix("capi");
        ours.register(
            "reconcile_errors",
            "Reconcile errors, by controller.",
            m.reconcile_errors.clone(),
        );
        ours.register(
            "managed_nodes_cost_per_hour",
            "Summed hourly price of the nodes our NodeClaims stand for.",
            m.managed_cost_per_hour.clone(),
        );
        ours.register(
            "provisioning_cost_gap_percent",
            "Last provisioning round's cost above the core's lower bound, in percent.",
            m.provisioning_gap_percent.clone(),
        );
        ours.register(
            "pod_lifetimes_observed",
            "Lifetimes of ended pods the payback rule learns its horizon from (below its minEndedLifetimes: the running pods' ages, Lindy beyond the oldest).",
            m.pod_lifetimes_observed.clone(),
        );
        ours.register(
            "payback_horizon_cap_hours",
            "The payback rule's horizon cap at the last disruption loop: 4 h, or the cluster's turnover once a day of pods has been watched (at most a week).",
            m.payback_horizon_cap_hours.clone(),
        );
        ours.register(
            "leader",
            "1 while this instance holds the leader Lease.",
            m.is_leader.clone(),
        );
        Metrics {
            registry: Arc::new(root),
            ..m
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "could not encode metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_karpenters_names() {
        let m = Metrics::new();
        m.nodeclaims_created
            .get_or_create(&NodePoolReason {
                nodepool: "default".into(),
                reason: "provisioning".into(),
            })
            .inc();
        m.scheduling_duration.observe(0.01);
        m.pod_lifetimes_observed.set(42);
        m.payback_horizon_cap_hours.set(72.0);
        let text = m.encode();
        for name in [
            "karpenter_nodeclaims_created_total{nodepool=\"default\",reason=\"provisioning\"} 1",
            "karpenter_scheduler_scheduling_duration_seconds_count 1",
            "karpenter_cluster_state_synced 0",
            "karpenter_capi_managed_nodes_cost_per_hour",
            "karpenter_capi_pod_lifetimes_observed 42",
            "karpenter_capi_payback_horizon_cap_hours 72",
        ] {
            assert!(text.contains(name), "{name} missing in:\n{text}");
        }
    }
}
