//! Label, annotation, taint and finalizer keys that Karpenter's API gives meaning to. Other
//! crates use these constants instead of string literals so a typo is a compile error.

/// The API group of NodePool and NodeClaim.
pub const GROUP: &str = "karpenter.sh";
/// The API group of our NodeClass.
pub const NODECLASS_GROUP: &str = "karpenter.cluster.x-k8s.io";
/// Kind of our NodeClass, as NodePools reference it.
pub const NODECLASS_KIND: &str = "ClusterAPINodeClass";

/// Label on nodes and NodeClaims: the NodePool that owns them.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
/// Label: on-demand, spot or reserved.
pub const CAPACITY_TYPE_LABEL: &str = "karpenter.sh/capacity-type";
/// Internal label: the node registered.
pub const REGISTERED_LABEL: &str = "karpenter.sh/registered";
/// Internal label: the node initialized.
pub const INITIALIZED_LABEL: &str = "karpenter.sh/initialized";
/// Label: do not sync taints from the NodeClaim to the node.
pub const DO_NOT_SYNC_TAINTS_LABEL: &str = "karpenter.sh/do-not-sync-taints";
/// Well-known Kubernetes labels the scheduler simulation understands.
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
/// Zone label.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// Region label.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// Architecture label.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// OS label.
pub const OS_LABEL: &str = "kubernetes.io/os";
/// Hostname label (restricted in NodePool templates).
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Capacity type values.
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
/// Spot capacity.
pub const CAPACITY_TYPE_SPOT: &str = "spot";
/// Reserved capacity.
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";

/// Annotation on pods or nodes: "true" or a duration; blocks voluntary disruption.
pub const DO_NOT_DISRUPT_ANNOTATION: &str = "karpenter.sh/do-not-disrupt";
/// Annotation on NodeClaims: hash of the NodePool template they came from (drift).
pub const NODEPOOL_HASH_ANNOTATION: &str = "karpenter.sh/nodepool-hash";
/// Annotation: version of the hash scheme.
pub const NODEPOOL_HASH_VERSION_ANNOTATION: &str = "karpenter.sh/nodepool-hash-version";
/// Annotation on NodeClaims: when termination must finish (terminationGracePeriod).
pub const NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION: &str =
    "karpenter.sh/nodeclaim-termination-timestamp";

/// Taint key put on nodes being disrupted (NoSchedule).
pub const DISRUPTED_TAINT_KEY: &str = "karpenter.sh/disrupted";
/// Taint key new nodes register with (NoExecute) until Karpenter has synced them.
pub const UNREGISTERED_TAINT_KEY: &str = "karpenter.sh/unregistered";
/// Finalizer on NodeClaims and Nodes.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// Label domains users may not set in NodePool templates or requirements (except the
/// keys in [`RESTRICTED_DOMAIN_EXCEPTIONS`]).
pub const RESTRICTED_LABEL_DOMAINS: &[&str] = &["karpenter.sh"];
/// Keys in a restricted domain that users may still use.
pub const RESTRICTED_DOMAIN_EXCEPTIONS: &[&str] = &[CAPACITY_TYPE_LABEL, NODEPOOL_LABEL];

/// Whether a NodePool template may carry this label key: the same rule the CRD's CEL
/// enforces, for code that builds NodePools (admin CLI) and wants to fail early.
pub fn is_restricted_template_label(key: &str) -> bool {
    if key == NODEPOOL_LABEL || key == HOSTNAME_LABEL {
        return true;
    }
    if RESTRICTED_DOMAIN_EXCEPTIONS.contains(&key) {
        return false;
    }
    let domain = key.split('/').next().unwrap_or(key);
    RESTRICTED_LABEL_DOMAINS
        .iter()
        .any(|restricted| domain.ends_with(restricted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_labels_follow_upstream_cel() {
        assert!(is_restricted_template_label("karpenter.sh/nodepool"));
        assert!(is_restricted_template_label("karpenter.sh/anything"));
        assert!(is_restricted_template_label("sub.karpenter.sh/x"));
        assert!(is_restricted_template_label("kubernetes.io/hostname"));
        assert!(!is_restricted_template_label("karpenter.sh/capacity-type"));
        assert!(!is_restricted_template_label("team"));
        assert!(!is_restricted_template_label("example.com/team"));
    }
}
