//! The user guides' commands, run as written. Each block of a guide in `docs/` that is
//! preceded by the line `<!-- test -->` is run by bash (`-euo pipefail`), in order, with the
//! variables the guide asks the reader to set pointing at a cluster this test builds in the
//! end-to-end environment, and `karpenter-capi`, `kubectl` (built at the server's version)
//! and `helm` on the PATH. A block that exits non-zero fails the test with its output and
//! the guide's line. `<!-- test: controller -->` additionally starts the controller before the
//! block, as the Helm-installed Deployment would run (the environment cannot pull its image).
//!
//! Only what the harness cannot do as a reader would is done here: the cluster and its raw
//! MachineDeployments (a reader has them already), a cluster-autoscaler Deployment to hand
//! over from, and a label on the guide's NodePool that scopes the in-process controller to
//! it, so it never acts on other scenarios' objects in the shared API server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use capi_adapter::keys;
use e2e_tests::{SCOPE, scoped_options, start_controller};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kcapi_fake_infra::fixtures::{ClusterFixture, MachineDeploymentSpec, Shape};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

/// One tested block of a guide.
#[derive(Debug, PartialEq)]
struct Block {
    /// What follows `test` in the marker (`controller`, or empty).
    marker: String,
    /// 1-based line of the opening fence.
    line: usize,
    code: String,
}

/// The tested blocks of a guide, in order. A marker not followed by a `sh` fence is an
/// error: a guide edit must not silently drop a block from the test.
fn tested_blocks(markdown: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        if let Some(rest) = l
            .strip_prefix("<!-- test")
            .and_then(|r| r.strip_suffix("-->"))
        {
            let marker = rest.trim().trim_start_matches(':').trim().to_string();
            let fence = lines.get(i + 1).map(|s| s.trim()).unwrap_or("");
            if fence != "```sh" {
                return Err(format!(
                    "line {}: a test marker must be followed by a ```sh block",
                    i + 1
                ));
            }
            let start = i + 2;
            let end = (start..lines.len())
                .find(|&j| lines[j].trim() == "```")
                .ok_or_else(|| format!("line {}: unclosed block", i + 2))?;
            blocks.push(Block {
                marker,
                line: i + 2,
                code: lines[start..end].join("\n"),
            });
            i = end;
        }
        i += 1;
    }
    Ok(blocks)
}

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

/// `karpenter-capi`, built by `cargo xtask e2e` (a test cannot run cargo itself).
fn cli() -> PathBuf {
    let path = std::env::var_os("KCAPI_CLI").map(PathBuf::from).expect(
        "KCAPI_CLI is not set: run the guides through `cargo xtask e2e`, which builds karpenter-capi",
    );
    assert!(path.is_file(), "KCAPI_CLI={} is not a file", path.display());
    path
}

/// Runs a guide's blocks with `vars`; `controller` is called before the first block marked
/// `controller`.
async fn run_guide<F, Fut>(guide: &str, vars: &BTreeMap<&str, String>, controller: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let path = docs().join(guide);
    let text = std::fs::read_to_string(&path).expect("read guide");
    let blocks = tested_blocks(&text).unwrap_or_else(|e| panic!("{guide}: {e}"));
    assert!(!blocks.is_empty(), "{guide} has no tested blocks");
    let bin = testenv::cache_dir().join("bin");
    let cli_dir = cli().parent().expect("cli dir").to_path_buf();
    let path_var = format!(
        "{}:{}:{}",
        cli_dir.display(),
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Files a guide writes (a catalog, say) go to a directory of their own.
    let workdir = std::env::temp_dir().join(testenv::unique_name("guide"));
    std::fs::create_dir_all(&workdir).expect("guide workdir");
    let mut controller = Some(controller);
    for b in &blocks {
        if b.marker == "controller"
            && let Some(start) = controller.take()
        {
            start().await;
        }
        eprintln!("guides: {guide}:{} running:\n{}", b.line, b.code);
        let out = tokio::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", &b.code])
            .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
            .env("PATH", &path_var)
            .env("HELM", bin.join("helm"))
            .current_dir(&workdir)
            .output()
            .await
            .expect("run bash");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!(
            "guides: {guide}:{} -> {}\n{stdout}{stderr}",
            b.line, out.status
        );
        assert!(
            out.status.success(),
            "{guide}:{}: the block failed ({}):\n{}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            b.line,
            out.status,
            b.code
        );
    }
    let _ = std::fs::remove_dir_all(&workdir);
}

/// The guides hand CAS over cluster-wide (every cluster-autoscaler Deployment, OpenShift's
/// singleton ClusterAutoscaler): one guide at a time.
static HANDOFF: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[test]
fn markers_select_sh_blocks_and_a_stray_marker_is_an_error() {
    let md = "text\n<!-- test -->\n```sh\na\nb\n```\n```sh\nnot tested\n```\n<!-- test: controller -->\n```sh\nc\n```\n";
    assert_eq!(
        tested_blocks(md).expect("parse"),
        vec![
            Block {
                marker: String::new(),
                line: 3,
                code: "a\nb".into()
            },
            Block {
                marker: "controller".into(),
                line: 11,
                code: "c".into()
            },
        ]
    );
    assert!(tested_blocks("<!-- test -->\ntext\n").is_err());
    assert!(tested_blocks("<!-- test -->\n```sh\nopen\n").is_err());
}

#[test]
fn every_guide_with_markers_parses() {
    for entry in std::fs::read_dir(docs()).expect("docs") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            let text = std::fs::read_to_string(&path).expect("read");
            tested_blocks(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

/// `docs/install-capi.md` on a CAPI cluster with three unpriced MachineDeployments (capacity
/// from their infrastructure templates' `status.capacity`) that a cluster-autoscaler
/// manages.
#[tokio::test]
#[ignore = "needs the e2e environment: cargo xtask e2e"]
async fn install_capi_guide() {
    let _one_at_a_time = HANDOFF.lock().await;
    e2e_tests::init_tracing();
    let env = testenv::e2e_env();
    let client = testenv::e2e_client().await;
    let ns = testenv::namespace(&client, "guide-capi").await;
    // Unique: the guide selects the cluster's MachineDeployments by its name.
    let cluster_name = format!("guide-{}", &ns[ns.len() - 6..]);
    let cluster = ClusterFixture::create(&client, &env.kubeconfig, &ns, &cluster_name)
        .await
        .expect("cluster fixture");
    for (name, cpu, memory) in [
        ("small", "2", "8Gi"),
        ("medium", "4", "16Gi"),
        ("large", "8", "32Gi"),
    ] {
        let mut spec =
            MachineDeploymentSpec::new(&format!("{cluster_name}-{name}"), Shape::new(cpu, memory));
        spec.annotations = BTreeMap::from([
            (keys::capi::MIN_SIZE.to_string(), "0".to_string()),
            (keys::capi::MAX_SIZE.to_string(), "10".to_string()),
        ]);
        spec.node_labels = BTreeMap::from([(
            "node.kubernetes.io/instance-type".to_string(),
            name.to_string(),
        )]);
        cluster
            .machine_deployment(&spec)
            .await
            .expect("machine deployment");
    }
    cluster_autoscaler(&client, &ns).await;
    // Self-hosted: the guide's CLUSTER_API_KUBECONFIG stays unset.
    let vars = BTreeMap::from([
        ("KUBECONFIG", env.kubeconfig.display().to_string()),
        ("CLUSTER_NAMESPACE", ns.clone()),
        ("CLUSTER_NAME", cluster_name.clone()),
    ]);
    let scope = ns.clone();
    let np_name = cluster_name.clone();
    let client2 = client.clone();
    let outcome = tokio::spawn(async move {
        let mut running = None;
        let slot = &mut running;
        run_guide("install-capi.md", &vars, move || async move {
            Api::<karpenter_api::NodePool>::all(client2.clone())
                .patch(
                    &np_name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {SCOPE: scope}}})),
                )
                .await
                .expect("scope the guide's NodePool");
            *slot = Some(start_controller(scoped_options(&scope)).await);
        })
        .await;
        running.expect("the guide started the controller").stop();
    })
    .await;
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
    let restored = deployments
        .get_opt("cluster-autoscaler")
        .await
        .expect("get cluster-autoscaler")
        .and_then(|d| d.spec?.replicas);
    // Leave no cluster-autoscaler behind for the other guides' hand-offs, pass or fail.
    let _ = deployments
        .delete("cluster-autoscaler", &Default::default())
        .await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
    // The guide's last steps restored CAS: its Deployment is back at one replica.
    assert_eq!(restored, Some(1));
}

/// A cluster-autoscaler Deployment on the clusterapi provider discovering this namespace's
/// MachineDeployments. Its pod never runs (it selects no node), as in the admin tests: what
/// the hand-off reads and changes is the Deployment and the resources' annotations.
async fn cluster_autoscaler(client: &kube::Client, ns: &str) {
    let dep: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "cluster-autoscaler", "labels": {"app": "cluster-autoscaler"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "cluster-autoscaler"}},
            "template": {
                "metadata": {"labels": {"app": "cluster-autoscaler"}},
                "spec": {
                    "nodeSelector": {"karpenter-capi.e2e/never": "true"},
                    "containers": [{
                        "name": "cluster-autoscaler",
                        "image": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.0",
                        "command": ["/cluster-autoscaler"],
                        "args": [
                            "--cloud-provider=clusterapi",
                            format!("--node-group-auto-discovery=clusterapi:namespace={ns}"),
                        ]
                    }]
                }
            }
        }
    }))
    .expect("deployment json");
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &dep)
        .await
        .expect("create cluster-autoscaler");
}

const OPENSHIFT_NS: &str = "openshift-machine-api";

fn dynamic(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// `docs/openshift-aws.md` on what an OpenShift 4 IPI install on AWS leaves: two worker
/// MachineSets (zones a and b, m6i.xlarge, the machine-api-operator's shape annotations and
/// the cluster-autoscaler-operator's min/max), their MachineAutoscalers and the
/// ClusterAutoscaler `default`; and a control-plane-role MachineSet the guide must not touch.
#[tokio::test]
#[ignore = "needs the e2e environment: cargo xtask e2e"]
async fn openshift_aws_guide() {
    let _one_at_a_time = HANDOFF.lock().await;
    e2e_tests::init_tracing();
    let env = testenv::e2e_env();
    let client = testenv::e2e_client().await;
    let infra_id = testenv::unique_name("ocp");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(OPENSHIFT_NS)
        .await
        .expect("get ns")
        .is_none()
    {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": OPENSHIFT_NS}})).expect("ns");
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("create ns");
    }
    let machinesets = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        OPENSHIFT_NS,
        &dynamic(
            "machine.openshift.io",
            "v1beta1",
            "MachineSet",
            "machinesets",
        ),
    );
    let autoscalers = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        OPENSHIFT_NS,
        &dynamic(
            "autoscaling.openshift.io",
            "v1beta1",
            "MachineAutoscaler",
            "machineautoscalers",
        ),
    );
    let cluster_autoscalers = Api::<DynamicObject>::all_with(
        client.clone(),
        &dynamic(
            "autoscaling.openshift.io",
            "v1",
            "ClusterAutoscaler",
            "clusterautoscalers",
        ),
    );
    let _ = cluster_autoscalers
        .delete("default", &Default::default())
        .await;
    let mut names = Vec::new();
    for (role, zone) in [
        ("worker", "us-east-1a"),
        ("worker", "us-east-1b"),
        ("infra", "us-east-1a"),
    ] {
        let name = format!("{infra_id}-{role}-{zone}");
        let ms: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": "MachineSet",
            "metadata": {
                "name": name,
                "labels": {
                    "machine.openshift.io/cluster-api-cluster": infra_id,
                    "machine.openshift.io/cluster-api-machine-role": role,
                    "machine.openshift.io/cluster-api-machine-type": role
                },
                "annotations": {
                    "machine.openshift.io/vCPU": "4",
                    "machine.openshift.io/memoryMb": "16384",
                    "machine.openshift.io/GPU": "0",
                    "capacity.cluster-autoscaler.kubernetes.io/labels": "kubernetes.io/arch=amd64",
                    "machine.openshift.io/cluster-api-autoscaler-node-group-min-size": "1",
                    "machine.openshift.io/cluster-api-autoscaler-node-group-max-size": "6"
                }
            },
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {
                    "machine.openshift.io/cluster-api-cluster": infra_id,
                    "machine.openshift.io/cluster-api-machineset": name
                }},
                "template": {
                    "metadata": {"labels": {
                        "machine.openshift.io/cluster-api-cluster": infra_id,
                        "machine.openshift.io/cluster-api-machine-role": role,
                        "machine.openshift.io/cluster-api-machine-type": role,
                        "machine.openshift.io/cluster-api-machineset": name
                    }},
                    "spec": {"providerSpec": {"value": {
                        "apiVersion": "machine.openshift.io/v1beta1",
                        "kind": "AWSMachineProviderConfig",
                        "instanceType": "m6i.xlarge",
                        "placement": {"availabilityZone": zone, "region": "us-east-1"}
                    }}}
                }
            }
        }))
        .expect("machineset json");
        machinesets
            .create(&PostParams::default(), &ms)
            .await
            .expect("create machineset");
        let ma: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "autoscaling.openshift.io/v1beta1",
            "kind": "MachineAutoscaler",
            "metadata": {"name": name},
            "spec": {"minReplicas": 1, "maxReplicas": 6,
                     "scaleTargetRef": {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": name}}
        }))
        .expect("machineautoscaler json");
        autoscalers
            .create(&PostParams::default(), &ma)
            .await
            .expect("create machineautoscaler");
        names.push((role, name));
    }
    let ca: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "autoscaling.openshift.io/v1",
        "kind": "ClusterAutoscaler",
        "metadata": {"name": "default"},
        "spec": {"podPriorityThreshold": -10, "resourceLimits": {"maxNodesTotal": 24},
                 "scaleDown": {"enabled": true, "delayAfterAdd": "10m", "unneededTime": "5m"}}
    }))
    .expect("clusterautoscaler json");
    cluster_autoscalers
        .create(&PostParams::default(), &ca)
        .await
        .expect("create clusterautoscaler");
    let infra_before = machinesets
        .get(&names[2].1)
        .await
        .expect("infra machineset")
        .metadata
        .annotations;

    let vars = BTreeMap::from([
        ("KUBECONFIG", env.kubeconfig.display().to_string()),
        ("INFRA_ID", infra_id.clone()),
    ]);
    let outcome = tokio::spawn(async move {
        run_guide("openshift-aws.md", &vars, || async {}).await;
    })
    .await;

    // What the guide left, checked before cleaning up: workers priced from the catalog
    // (m6i.xlarge 0.192), the infra MachineSet untouched, CAS restored.
    let mut problems = Vec::new();
    if outcome.is_ok() {
        for (role, name) in &names {
            let ms = machinesets.get(name).await.expect("machineset");
            let a = ms.metadata.annotations.clone().unwrap_or_default();
            let price = a.get(keys::ours::PRICE_PER_HOUR).cloned();
            if *role == "worker" && price.as_deref() != Some("0.192") {
                problems.push(format!("{name}: price {price:?}"));
            }
            if *role == "infra" && ms.metadata.annotations != infra_before {
                problems.push(format!("{name} was changed: {a:?}"));
            }
            if autoscalers.get_opt(name).await.expect("get ma").is_none() {
                problems.push(format!("MachineAutoscaler {name} was not restored"));
            }
        }
        if cluster_autoscalers
            .get_opt("default")
            .await
            .expect("get ca")
            .is_none()
        {
            problems.push("ClusterAutoscaler default was not restored".into());
        }
    }
    // Leave no OpenShift autoscaler behind for the other guides' hand-offs.
    let _ = cluster_autoscalers
        .delete("default", &Default::default())
        .await;
    for (_, name) in &names {
        let _ = autoscalers.delete(name, &Default::default()).await;
        let _ = machinesets.delete(name, &Default::default()).await;
    }
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
