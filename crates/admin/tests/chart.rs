//! The Helm chart: rendered by the real `helm` (built by `cargo xtask helm`), applied to the
//! real test API server, and its RBAC checked by the API server's own authorizer.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_capi_admin::install::{self, InstallOptions};
use kube::Api;
use kube::api::PostParams;

fn helm() -> PathBuf {
    let path = std::env::var_os("KCAPI_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| testenv::cache_dir().join("bin").join("helm"));
    assert!(
        path.is_file(),
        "helm not built: run `cargo xtask helm` (or `cargo xtask test`), looked at {}",
        path.display()
    );
    path
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn chart_crds_are_the_generated_ones() {
    for entry in std::fs::read_dir(repo().join("config/crd")).unwrap() {
        let path = entry.unwrap().path();
        let chart = repo()
            .join("charts/karpenter-capi/crds")
            .join(path.file_name().unwrap());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            std::fs::read_to_string(&chart).unwrap_or_default(),
            "{} differs from config/crd: run `cargo xtask crdgen`",
            chart.display()
        );
    }
    // Every chart file is embedded in the binary (install works without the source tree).
    let mut on_disk = Vec::new();
    for dir in ["", "templates", "crds"] {
        for e in std::fs::read_dir(repo().join("charts/karpenter-capi").join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                let rel = p
                    .strip_prefix(repo().join("charts/karpenter-capi"))
                    .unwrap();
                on_disk.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    on_disk.sort();
    let mut embedded: Vec<String> = install::CHART_FILES
        .iter()
        .map(|(p, _)| p.to_string())
        .collect();
    embedded.sort();
    assert_eq!(embedded, on_disk);
}

async fn allowed(
    client: &kube::Client,
    sa: &str,
    verb: &str,
    group: &str,
    resource: &str,
    sub: Option<&str>,
    ns: &str,
) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(sa.to_string()),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource: sub.map(str::to_string),
                namespace: Some(ns.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let r = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    r.status.unwrap().allowed
}

#[tokio::test]
async fn chart_renders_applies_and_grants_least_privilege() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "chart").await;
    let release = testenv::unique_name("kc");
    let opts = InstallOptions {
        release: release.clone(),
        namespace: ns.clone(),
        helm: Some(helm()),
        ..Default::default()
    };
    let yaml = install::render(&opts).unwrap();
    let objects = install::documents(&yaml).unwrap();
    let kinds: Vec<&str> = objects
        .iter()
        .map(|o| o.types.as_ref().unwrap().kind.as_str())
        .collect();
    for k in [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "Role",
        "Deployment",
        "PodDisruptionBudget",
    ] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    // CRDs are shared by every test: server-side dry-run; everything else for real.
    let (crds, rest): (Vec<_>, Vec<_>) = objects
        .into_iter()
        .partition(|o| o.types.as_ref().unwrap().kind == "CustomResourceDefinition");
    install::apply(&client, &crds, &ns, true).await.unwrap();
    install::apply(&client, &rest, &ns, false).await.unwrap();

    let fullname = format!("{release}-karpenter-capi");
    let d = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get(&fullname)
        .await
        .unwrap();
    let spec = d.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    let c = &pod.containers[0];
    assert_eq!(
        c.liveness_probe
            .as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap()
            .path
            .as_deref(),
        Some("/healthz")
    );
    assert_eq!(
        c.readiness_probe
            .as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap()
            .path
            .as_deref(),
        Some("/readyz")
    );
    let args = c.args.clone().unwrap();
    for a in [
        "--health-probe-bind-address=0.0.0.0:8081",
        "--metrics-bind-address=0.0.0.0:8080",
        "--leader-elect=true",
        "--strategy=cost-aware",
    ] {
        assert!(args.iter().any(|x| x == a), "{a} not in {args:?}");
    }
    assert!(c.resources.as_ref().unwrap().requests.is_some());
    let env: Vec<String> = c.env.iter().flatten().map(|e| e.name.clone()).collect();
    assert!(
        env.contains(&"POD_NAME".to_string()) && env.contains(&"POD_NAMESPACE".to_string()),
        "{env:?}"
    );
    assert_eq!(
        pod.security_context.as_ref().unwrap().run_as_user,
        Some(65532)
    );
    assert!(
        Api::<PodDisruptionBudget>::namespaced(client.clone(), &ns)
            .get(&fullname)
            .await
            .is_ok()
    );

    // RBAC, as the API server's authorizer sees it.
    let sa = format!("system:serviceaccount:{ns}:{fullname}");
    let other = testenv::namespace(&client, "chart-other").await;
    for (verb, group, resource, sub) in [
        (
            "update",
            "cluster.x-k8s.io",
            "machinedeployments",
            Some("scale"),
        ),
        ("patch", "machine.openshift.io", "machines", None),
        ("list", "cluster.x-k8s.io", "machines", None),
        ("create", "", "pods", Some("eviction")),
        ("patch", "karpenter.sh", "nodeclaims", Some("status")),
        ("delete", "", "nodes", None),
        // Past a NodeClaim's terminationGracePeriod a PDB no longer holds a pod.
        ("delete", "", "pods", None),
        ("list", "", "namespaces", None),
        ("list", "storage.k8s.io", "csinodes", None),
        ("list", "storage.k8s.io", "volumeattachments", None),
        ("list", "policy", "poddisruptionbudgets", None),
    ] {
        assert!(
            allowed(&client, &sa, verb, group, resource, sub, &other).await,
            "{verb} {group}/{resource}/{sub:?} must be allowed"
        );
    }
    assert!(
        allowed(
            &client,
            &sa,
            "update",
            "coordination.k8s.io",
            "leases",
            None,
            &ns
        )
        .await
    );
    for (verb, group, resource, sub, ns_) in [
        ("get", "", "secrets", None, other.as_str()),
        (
            "delete",
            "cluster.x-k8s.io",
            "machinedeployments",
            None,
            other.as_str(),
        ),
        (
            "update",
            "cluster.x-k8s.io",
            "machinedeployments",
            None,
            other.as_str(),
        ),
        (
            "delete",
            "cluster.x-k8s.io",
            "machines",
            None,
            other.as_str(),
        ),
        (
            "update",
            "coordination.k8s.io",
            "leases",
            None,
            other.as_str(),
        ),
        ("create", "apps", "deployments", None, other.as_str()),
    ] {
        assert!(
            !allowed(&client, &sa, verb, group, resource, sub, ns_).await,
            "{verb} {group}/{resource} must be denied"
        );
    }
}

#[test]
fn openshift_and_two_cluster_values_render() {
    let base = InstallOptions {
        release: "kc".into(),
        namespace: "karpenter-capi".into(),
        helm: Some(helm()),
        ..Default::default()
    };
    let os = install::render(&InstallOptions {
        openshift: true,
        ..base.clone()
    })
    .unwrap();
    assert!(
        !os.contains("runAsUser"),
        "OpenShift: no fixed UID (SCC restricted-v2 assigns one)"
    );
    assert!(os.contains("runAsNonRoot: true"));
    assert!(
        os.contains("namespace: openshift-machine-api"),
        "management Role in the Machine API namespace"
    );

    let workload = install::render(&InstallOptions {
        management_kubeconfig_secret: Some("mgmt-kubeconfig".into()),
        set: vec!["components=workload".into()],
        ..base.clone()
    })
    .unwrap();
    assert!(workload.contains("CLUSTER_API_KUBECONFIG"));
    assert!(workload.contains("secretName: mgmt-kubeconfig"));
    assert!(
        !workload.contains("-management"),
        "no management RBAC in the workload cluster"
    );

    let management = install::render(&InstallOptions {
        set: vec!["components=management".into()],
        ..base
    })
    .unwrap();
    let objs = install::documents(&management).unwrap();
    let kinds: Vec<&str> = objs
        .iter()
        .map(|o| o.types.as_ref().unwrap().kind.as_str())
        .collect();
    assert!(!kinds.contains(&"Deployment"), "{kinds:?}");
    assert!(
        kinds.contains(&"ClusterRole") && kinds.contains(&"ServiceAccount"),
        "{kinds:?}"
    );
}
