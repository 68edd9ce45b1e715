//! Every annotation and label key the adapter reads or writes, in one place.
//!
//! `docs/annotations.md` documents each one (format, example, precedence); keep the two in
//! step. Keys in the `karpenter.cluster.x-k8s.io` domain are ours; the others belong to
//! Cluster API, the Cluster Autoscaler (CAS), OpenShift's Machine API or Karpenter and are
//! read (or written) with their owners' meaning.

/// Our own keys (`karpenter.cluster.x-k8s.io` domain).
pub mod ours {
    /// On a scalable resource: hourly price of one node, decimal USD/hour (`"0.096"`).
    pub const PRICE_PER_HOUR: &str = "karpenter.cluster.x-k8s.io/price-per-hour";
    /// On a scalable resource: `on-demand` | `spot` | `reserved` (default `on-demand`).
    pub const CAPACITY_TYPE: &str = "karpenter.cluster.x-k8s.io/capacity-type";
    /// On a NodeClaim: the scalable resource chosen for it, written *before* replicas are
    /// raised, so the shortfall can be recomputed from the API after a restart
    /// (`MachineDeployment.cluster.x-k8s.io/<namespace>/<name>`).
    pub const LAUNCH_TARGET: &str = "karpenter.cluster.x-k8s.io/scalable-resource";
    /// On a Machine: the NodeClaim it is bound to (label, so unbound Machines can be listed
    /// with `!karpenter.cluster.x-k8s.io/nodeclaim`). Value: the NodeClaim name when it is a
    /// valid label value, else a stable digest of it (the annotation below has the name).
    pub const NODECLAIM_LABEL: &str = "karpenter.cluster.x-k8s.io/nodeclaim";
    /// On a Machine: the full NodeClaim name it is bound to.
    pub const NODECLAIM_ANNOTATION: &str = "karpenter.cluster.x-k8s.io/nodeclaim";
    /// On a Machine: digest of its scalable resource's machine template at binding time; a
    /// later mismatch means drift.
    pub const TEMPLATE_HASH: &str = "karpenter.cluster.x-k8s.io/template-hash";
    /// On a Machine: we asked for its deletion (set together with the delete-machine
    /// annotation; value: the NodeClaim name). Marks annotations that are ours to complete or
    /// roll back, as opposed to ones a user or CAS wrote.
    pub const DELETE_REQUESTED: &str = "karpenter.cluster.x-k8s.io/delete-requested";
    /// Taint key we put on an instance type for a CAS `taints` entry whose key cannot be
    /// read (never written to a Node): only pods tolerating every taint pass it, so an
    /// unreadable taint never turns into a node without that taint.
    pub const UNPARSED_TAINT: &str = "karpenter.cluster.x-k8s.io/unparsed-taint";
}

/// Cluster API keys.
pub mod capi {
    pub const GROUP: &str = "cluster.x-k8s.io";
    /// Upstream's membership label on a scalable resource (value ignored).
    pub const KARPENTER_MEMBER: &str = "node.cluster.x-k8s.io/karpenter-member";
    /// On a NodeClaim (and on Nodes, by CAPI): `<namespace>/<machine name>`.
    pub const MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/machine";
    /// On a Machine: delete this one first when the MachineSet scales down.
    pub const DELETE_MACHINE: &str = "cluster.x-k8s.io/delete-machine";
    /// On Machines and MachineSets: the owning MachineDeployment's name.
    pub const DEPLOYMENT_NAME: &str = "cluster.x-k8s.io/deployment-name";
    /// On Machines: the owning MachineSet's name.
    pub const SET_NAME: &str = "cluster.x-k8s.io/set-name";
    /// On MachineSets owned by a MachineDeployment: the rollout revision.
    pub const REVISION: &str = "machinedeployment.clusters.x-k8s.io/revision";
    /// Paused objects are not reconciled by CAPI; we do not launch on them either.
    pub const PAUSED: &str = "cluster.x-k8s.io/paused";
    pub const MIN_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
    pub const MAX_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";
    /// Machine label prefix CAPI propagates to the Node: exactly this domain, not its
    /// subdomains (`GetManagedLabels` in sigs.k8s.io/cluster-api `util/labels`).
    pub const NODE_ROLE_DOMAIN: &str = "node-role.kubernetes.io";
    /// Machine label domains CAPI propagates to the Node together with their subdomains.
    pub const NODE_PROPAGATED_DOMAINS: [&str; 2] =
        ["node-restriction.kubernetes.io", "node.cluster.x-k8s.io"];
}

/// Cluster Autoscaler scale-from-zero keys (read on every kind).
pub mod cas {
    pub const CPU: &str = "capacity.cluster-autoscaler.kubernetes.io/cpu";
    pub const MEMORY: &str = "capacity.cluster-autoscaler.kubernetes.io/memory";
    pub const EPHEMERAL_DISK: &str = "capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk";
    pub const MAX_PODS: &str = "capacity.cluster-autoscaler.kubernetes.io/maxPods";
    pub const GPU_TYPE: &str = "capacity.cluster-autoscaler.kubernetes.io/gpu-type";
    pub const GPU_COUNT: &str = "capacity.cluster-autoscaler.kubernetes.io/gpu-count";
    pub const LABELS: &str = "capacity.cluster-autoscaler.kubernetes.io/labels";
    pub const TAINTS: &str = "capacity.cluster-autoscaler.kubernetes.io/taints";
    pub const CSI_DRIVER: &str = "capacity.cluster-autoscaler.kubernetes.io/csi-driver";
    /// CAS' DRA driver for `gpu-count` devices: read only to explain why `gpu-count` without
    /// `gpu-type` adds no extended resource (the devices come as DRA ResourceSlices).
    pub const DRA_DRIVER: &str = "capacity.cluster-autoscaler.kubernetes.io/dra-driver";
    /// CAS' default pod capacity on Cluster API.
    pub const DEFAULT_MAX_PODS: i64 = 110;
}

/// OpenShift Machine API keys.
pub mod openshift {
    pub const GROUP: &str = "machine.openshift.io";
    pub const VCPU: &str = "machine.openshift.io/vCPU";
    pub const MEMORY_MB: &str = "machine.openshift.io/memoryMb";
    pub const GPU: &str = "machine.openshift.io/GPU";
    pub const MAX_PODS: &str = "machine.openshift.io/maxPods";
    /// OpenShift's kubelet default pod capacity (OpenShift's CAS fork assumes 110; see
    /// docs/annotations.md, intended differences).
    pub const DEFAULT_MAX_PODS: i64 = 250;
    /// The extended resource OpenShift's CAS fork reports GPU counts under (it ignores
    /// `gpu-type`; we honour `gpu-type` when set).
    pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
    pub const DELETE_MACHINE: &str = "machine.openshift.io/delete-machine";
    pub const MIN_SIZE: &str = "machine.openshift.io/cluster-api-autoscaler-node-group-min-size";
    pub const MAX_SIZE: &str = "machine.openshift.io/cluster-api-autoscaler-node-group-max-size";
    /// On Machines: the owning MachineSet's name.
    pub const MACHINESET_LABEL: &str = "machine.openshift.io/cluster-api-machineset";
    /// On MachineSets and Machines: the instance type, set by the AWS/Azure/GCP actuators.
    pub const INSTANCE_TYPE_LABEL: &str = "machine.openshift.io/instance-type";
}

/// Node labels read from a running Node of a group (CAS' `extractNodeLabels`, plus the
/// stable zone label CAS leaves out).
pub mod node {
    pub const INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
    pub const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
    pub const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
    pub const HOSTNAME: &str = "kubernetes.io/hostname";
}
