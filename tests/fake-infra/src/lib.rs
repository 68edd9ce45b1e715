//! TEST-ONLY fake Cluster API infrastructure provider, for the end-to-end environment
//! (`cargo xtask e2e-env up`, `cargo xtask e2e`). Never deploy it anywhere.
//!
//! Cluster API's core controllers (MachineDeployment -> MachineSet -> Machine) need an
//! infrastructure provider to turn a Machine into a node. CAPI's own in-memory provider is not
//! usable here (its fake API server has no pod binding, so kube-scheduler cannot place pods on
//! its nodes), so this crate plays the cloud:
//!
//! - [`crd`]: `FakeInfraCluster`, `FakeInfraMachine`, `FakeInfraMachineTemplate` in
//!   [`GROUP`]/[`VERSION`], labelled with the CAPI contract they follow.
//! - [`provider`]: marks InfraClusters provisioned; after a configurable delay marks each
//!   InfraMachine provisioned, sets `spec.providerID` and creates its Node in the workload
//!   cluster (capacity and node info from the template's `status`, the Karpenter
//!   `karpenter.sh/unregistered:NoExecute` taint and kwok's annotation, so kwok plays its
//!   kubelet). Annotations make a launch fail with a capacity error or never register.
//! - [`fixtures`]: a Cluster whose control plane CAPI considers initialized, its workload
//!   kubeconfig Secret, and MachineDeployments over fake templates with capacity and price.

pub mod crd;
pub mod fixtures;
pub mod openshift;
pub mod provider;
pub mod workload;

/// API group of the fake infrastructure kinds.
pub const GROUP: &str = "infrastructure.test.karpenter-capi.dev";
/// Their only version.
pub const VERSION: &str = "v1alpha1";
/// Kind names.
pub const CLUSTER_KIND: &str = "FakeInfraCluster";
pub const MACHINE_KIND: &str = "FakeInfraMachine";
pub const TEMPLATE_KIND: &str = "FakeInfraMachineTemplate";

/// CAPI finds the version of a provider's kinds that implements its contract from this label
/// on the CRD (`cluster.x-k8s.io/<contract>: <versions>`); without it CAPI refuses the
/// reference ("cannot find any versions matching contract").
pub const CONTRACT_LABEL: (&str, &str) = ("cluster.x-k8s.io/v1beta2", VERSION);

/// The annotation kwok selects the nodes it manages by (`--manage-nodes-with-annotation-selector
/// kwok.x-k8s.io/node=fake`); xtask passes the same key and value.
pub const KWOK_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// Karpenter's taint on a node that its controller has not registered yet (the controller
/// removes it once the NodeClaim is registered). Nodes made here carry it like a real
/// Karpenter-launched node, so tests without the controller must tolerate it.
pub const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";

/// Label the provider puts on every Node it creates: the namespace of the Cluster it belongs
/// to. Tests share one API server, so a workload selects its own test's nodes with it.
pub const NODE_CLUSTER_LABEL: &str = "fake-infra.test.karpenter-capi.dev/cluster-namespace";

/// Behaviour annotations, read from the FakeInfraMachine first and then from the
/// FakeInfraMachineTemplate it was cloned from (so a test can change the behaviour of a
/// MachineDeployment at run time by annotating its template).
pub mod annotations {
    /// How long after the InfraMachine's creation it becomes provisioned: `500ms`, `2s`, or a
    /// plain number of milliseconds. Default: the provider's configured delay.
    pub const PROVISION_DELAY: &str = "fake-infra.test.karpenter-capi.dev/provision-delay";
    /// The launch fails: the InfraMachine never gets a providerID, its `Ready` condition is
    /// False with reason `InsufficientCapacity` and this annotation's value as the message
    /// (and the v1beta1 `status.failureReason`/`failureMessage`). CAPI shows it on the
    /// Machine as `InfrastructureReady=False` with the same reason and message, and in
    /// `status.deprecated.v1beta1.failureReason`/`failureMessage`; the Machine stays
    /// `Pending` without a providerID.
    pub const FAIL_LAUNCH: &str = "fake-infra.test.karpenter-capi.dev/fail-launch";
    /// The launch fails the way the AWS provider (CAPA) fails one the cloud has no capacity
    /// for: it keeps retrying, so the InfraMachine only gets a `Ready=False` condition with
    /// reason [`crate::RETRYING_FAILURE_REASON`] and this annotation's value as the message:
    /// no failure fields, no providerID. CAPI mirrors the condition into the Machine's
    /// `InfrastructureReady`; nothing marks the Machine failed.
    pub const FAIL_LAUNCH_RETRYING: &str =
        "fake-infra.test.karpenter-capi.dev/fail-launch-retrying";
    /// `"true"`: the InfraMachine is provisioned and gets a providerID, but no Node is ever
    /// created (a node that never registers).
    pub const NEVER_REGISTER: &str = "fake-infra.test.karpenter-capi.dev/never-register";
}

/// The reason the provider gives a failed launch.
pub const CAPACITY_FAILURE_REASON: &str = "InsufficientCapacity";

/// The reason the provider gives a launch it keeps retrying (CAPA's).
pub const RETRYING_FAILURE_REASON: &str = "InstanceProvisionFailed";

/// The providerID the provider gives an InfraMachine (and its Node).
pub fn provider_id(namespace: &str, name: &str) -> String {
    format!("fake://{namespace}/{name}")
}

/// Errors of the provider and the fixtures.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("{0}")]
    Invalid(String),
    #[error("timed out: {0}")]
    Timeout(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
