//! The one place where the versions of everything the test control plane is built from are
//! pinned. xtask builds and installs from these, the compatibility tests read upstream's CRDs
//! at these versions, and a test checks that every Cargo.toml enables the matching
//! k8s-openapi feature.

/// Kubernetes: kube-apiserver is built from `k8s.io/kubernetes` at this version.
pub const KUBERNETES: &str = "v1.35.4";
/// The k8s-openapi feature matching [`KUBERNETES`] (binaries and test crates enable it).
pub const K8S_OPENAPI_FEATURE: &str = "v1_35";
/// The staging modules (`k8s.io/api`, `k8s.io/apiserver`, ...) at the same release.
pub const KUBERNETES_STAGING: &str = "v0.35.4";
/// etcd, at the version Kubernetes pins (`build/dependencies.yaml` of the release).
pub const ETCD: &str = "v3.6.5";

/// Go module of kube-apiserver.
pub const KUBERNETES_MODULE: &str = "k8s.io/kubernetes";
/// Go module of the etcd server (its root package is the `etcd` binary).
pub const ETCD_MODULE: &str = "go.etcd.io/etcd/server/v3";

/// Upstream Karpenter: its `pkg/apis/crds/` are the reference for our NodePool and NodeClaim
/// schemas. (v1.14.1 is the newest release this machine's Go can download; v1.14.3 and
/// v1.15.0 require a newer Go toolchain.)
pub const KARPENTER: (&str, &str) = ("sigs.k8s.io/karpenter", "v1.14.1");
/// Cluster API: the release whose `config/crd/bases/` serve v1beta2 and whose k8s.io
/// dependencies are at our Kubernetes release (v1.14 moved its CRDs to `core/config/`).
pub const CLUSTER_API: (&str, &str) = ("sigs.k8s.io/cluster-api", "v1.13.6");
/// kwok ("Kubernetes WithOut Kubelet"): plays the kubelets of the end-to-end environment's
/// nodes. v0.8.0 is the newest release the Go proxy serves; it needs Go >= 1.26.0.
pub const KWOK: (&str, &str) = ("sigs.k8s.io/kwok", "v0.8.0");
/// Where kwok's Stage objects are inside its module (the e2e environment loads these five:
/// nodes become Ready and keep a lease, pods become Ready, complete, and go when deleted).
pub const KWOK_STAGES: &[&str] = &[
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
];
/// OpenShift API: `machine.openshift.io/v1beta1` MachineSet and Machine CRDs. The module has
/// no semver releases that Go resolves, so it is pinned to a commit.
pub const OPENSHIFT_API: (&str, &str) = (
    "github.com/openshift/api",
    "v0.0.0-20260420151639-34e60874783e",
);
/// OpenShift's cluster-autoscaler-operator: `autoscaling.openshift.io` ClusterAutoscaler and
/// MachineAutoscaler CRDs (in its `install/` directory).
pub const OPENSHIFT_CLUSTER_AUTOSCALER_OPERATOR: (&str, &str) = (
    "github.com/openshift/cluster-autoscaler-operator",
    "v0.0.1-0.20260608074635-5c8643284941",
);

/// Where, inside each module, the third-party CRDs we install are (module, directory or
/// file paths relative to the module root).
pub const THIRD_PARTY_CRDS: &[((&str, &str), &[&str])] = &[
    (
        CLUSTER_API,
        &["config/crd/bases", "bootstrap/kubeadm/config/crd/bases"],
    ),
    (
        OPENSHIFT_API,
        &[
            "machine/v1beta1/zz_generated.crd-manifests/0000_10_machine-api_01_machines-Default.crd.yaml",
            "machine/v1beta1/zz_generated.crd-manifests/0000_10_machine-api_01_machinesets-Default.crd.yaml",
        ],
    ),
    (
        OPENSHIFT_CLUSTER_AUTOSCALER_OPERATOR,
        &[
            "install/01_clusterautoscaler.crd.yaml",
            "install/02_machineautoscaler.crd.yaml",
        ],
    ),
];

/// Helm: built from its Go module (`<module>/cmd/helm`) by `cargo xtask helm`; the newest v4
/// release the Go module proxy served when pinned. The chart tests render with it.
pub const HELM: (&str, &str) = ("helm.sh/helm/v4", "v4.3.2");
