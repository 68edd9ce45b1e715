//! Fixtures for end-to-end tests: a CAPI Cluster on fake infrastructure whose control plane
//! CAPI considers initialized, and MachineDeployments over fake templates.
//!
//! Why a Cluster needs more than the Cluster object:
//! - CAPI's ClusterCache only connects to a workload cluster once the Cluster's
//!   infrastructure is provisioned, so the Cluster references a FakeInfraCluster, which the
//!   provider marks provisioned.
//! - It reaches the workload cluster through the Secret `<cluster>-kubeconfig` (key `value`,
//!   label `cluster.x-k8s.io/cluster-name`); here it points back at the same API server, so one
//!   apiserver is both management and workload cluster.
//! - A Cluster without a control-plane provider (`spec.controlPlaneRef`) is "control plane
//!   initialized" only once some Machine labelled `cluster.x-k8s.io/control-plane` has a
//!   nodeRef, and CAPI's Machine controller does not even start the infrastructure of worker
//!   Machines before that (it waits for `ControlPlaneInitialized`). So the fixture creates a
//!   control-plane Machine on a FakeInfraMachine; its Node carries the control-plane
//!   NoSchedule taint, so workloads never land on it.
//! - Machines need bootstrap data before CAPI provisions them; `bootstrap.dataSecretName`
//!   names an (empty) Secret, which stands in for a bootstrap provider.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::crd::api_resource;
use crate::{CLUSTER_KIND, Error, GROUP, MACHINE_KIND, NODE_CLUSTER_LABEL, Result, TEMPLATE_KIND};

/// CAPI's API version the fixtures write.
pub const CAPI_VERSION: &str = "v1beta2";
const CAPI_GROUP: &str = "cluster.x-k8s.io";
const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
/// CAPI deletes Machines with this annotation first when a MachineSet scales down.
pub const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";

/// The dynamic-API description of a CAPI kind.
pub fn capi_resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(CAPI_GROUP, CAPI_VERSION, kind))
}

/// Polls `check` every 200 ms until it returns true, an error, or `timeout_secs` pass.
pub async fn wait_for<F, Fut>(what: &str, timeout_secs: u64, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let deadline = Instant::now() + Duration::from_secs(timeout_secs);
    loop {
        if check().await? {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout(format!("{what} (after {timeout_secs} s)")));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A Cluster on fake infrastructure, control plane initialized.
#[derive(Clone)]
pub struct ClusterFixture {
    pub client: Client,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Debug for ClusterFixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterFixture({}/{})", self.namespace, self.name)
    }
}

/// One shape of node, as a template advertises it for scale-from-zero (`status.capacity`,
/// `status.nodeInfo`).
#[derive(Debug, Clone)]
pub struct Shape {
    pub cpu: String,
    pub memory: String,
    pub pods: String,
    /// Real nodes report ephemeral storage; our catalog subtracts kubelet's reserve from it
    /// (a shape without it has negative allocatable storage and fits no pod).
    pub ephemeral_storage: String,
    pub architecture: String,
}

impl Shape {
    pub fn new(cpu: &str, memory: &str) -> Self {
        Self {
            cpu: cpu.into(),
            memory: memory.into(),
            pods: "110".into(),
            ephemeral_storage: "100Gi".into(),
            architecture: "amd64".into(),
        }
    }

    fn capacity(&self) -> Value {
        json!({ "cpu": self.cpu, "memory": self.memory, "pods": self.pods, "ephemeral-storage": self.ephemeral_storage })
    }
}

/// What a MachineDeployment fixture looks like.
#[derive(Debug, Clone)]
pub struct MachineDeploymentSpec {
    pub name: String,
    pub replicas: i32,
    pub shape: Shape,
    /// Our hourly price annotation (`karpenter.cluster.x-k8s.io/price-per-hour`).
    pub price_per_hour: Option<String>,
    /// More annotations on the MachineDeployment (CAS capacity keys, min/max size, ...).
    pub annotations: BTreeMap<String, String>,
    /// Annotations on the FakeInfraMachineTemplate (the provider's behaviour knobs,
    /// [`crate::annotations`]).
    pub template_annotations: BTreeMap<String, String>,
    /// Labels the provider puts on the Nodes (e.g. `node.kubernetes.io/instance-type`).
    pub node_labels: BTreeMap<String, String>,
    /// More labels on the MachineDeployment (an autoscaler's membership and selector labels).
    pub labels: BTreeMap<String, String>,
}

impl MachineDeploymentSpec {
    pub fn new(name: &str, shape: Shape) -> Self {
        Self {
            name: name.into(),
            replicas: 0,
            shape,
            price_per_hour: None,
            annotations: BTreeMap::new(),
            template_annotations: BTreeMap::new(),
            node_labels: BTreeMap::new(),
            labels: BTreeMap::new(),
        }
    }
}

impl ClusterFixture {
    /// Creates, in `namespace`, the kubeconfig Secret (pointing at the API server of
    /// `kubeconfig`), the bootstrap Secret, a FakeInfraCluster, the Cluster and its
    /// control-plane Machine, and waits until CAPI reports the control plane initialized.
    pub async fn create(
        client: &Client,
        kubeconfig: &Path,
        namespace: &str,
        name: &str,
    ) -> Result<Self> {
        let fixture = Self {
            client: client.clone(),
            namespace: namespace.into(),
            name: name.into(),
        };
        let workload_kubeconfig = crate::workload::inline_kubeconfig(kubeconfig)?;
        let server = kube::config::Kubeconfig::from_yaml(&workload_kubeconfig)
            .ok()
            .and_then(|k| k.clusters.first().and_then(|c| c.cluster.clone()))
            .and_then(|c| c.server)
            .unwrap_or_default();
        let port: u16 = server
            .rsplit(':')
            .next()
            .and_then(|p| p.trim_end_matches('/').parse().ok())
            .unwrap_or(443);
        let secrets = Api::<Secret>::namespaced(client.clone(), namespace);
        let labels: BTreeMap<String, String> = [(CLUSTER_NAME_LABEL.into(), name.into())].into();
        for (secret_name, key, value) in [
            (
                crate::workload::secret_name(name),
                "value",
                workload_kubeconfig.into_bytes(),
            ),
            (fixture.bootstrap_secret(), "value", Vec::new()),
        ] {
            let secret = Secret {
                metadata: kube::api::ObjectMeta {
                    name: Some(secret_name),
                    labels: Some(labels.clone()),
                    ..Default::default()
                },
                data: Some([(key.to_string(), ByteString(value))].into()),
                ..Default::default()
            };
            secrets.create(&PostParams::default(), &secret).await?;
        }

        fixture
            .create_dynamic(
                &api_resource(CLUSTER_KIND),
                json!({
                    "metadata": { "name": name },
                    "spec": { "controlPlaneEndpoint": { "host": "127.0.0.1", "port": port } },
                }),
            )
            .await?;
        fixture
            .create_dynamic(
                &capi_resource("Cluster"),
                json!({
                    "metadata": { "name": name },
                    "spec": {
                        "infrastructureRef": { "apiGroup": GROUP, "kind": CLUSTER_KIND, "name": name },
                    },
                }),
            )
            .await?;
        let cp = format!("{name}-control-plane");
        fixture
            .create_dynamic(
                &api_resource(MACHINE_KIND),
                json!({
                    "metadata": { "name": cp, "labels": labels },
                    "spec": {
                        "capacity": { "cpu": "4", "memory": "16Gi", "pods": "110" },
                        "nodeLabels": { "node-role.kubernetes.io/control-plane": "" },
                        "nodeTaints": [{ "key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule" }],
                    },
                }),
            )
            .await?;
        fixture
            .create_dynamic(
                &capi_resource("Machine"),
                json!({
                    "metadata": {
                        "name": cp,
                        "labels": { CLUSTER_NAME_LABEL: name, "cluster.x-k8s.io/control-plane": "" },
                    },
                    "spec": {
                        "clusterName": name,
                        "bootstrap": { "dataSecretName": fixture.bootstrap_secret() },
                        "infrastructureRef": { "apiGroup": GROUP, "kind": MACHINE_KIND, "name": cp },
                    },
                }),
            )
            .await?;
        fixture.wait_initialized(120).await?;
        Ok(fixture)
    }

    fn bootstrap_secret(&self) -> String {
        format!("{}-bootstrap", self.name)
    }

    async fn create_dynamic(
        &self,
        resource: &ApiResource,
        mut body: Value,
    ) -> Result<DynamicObject> {
        body["apiVersion"] = json!(resource.api_version);
        body["kind"] = json!(resource.kind);
        let obj: DynamicObject =
            serde_json::from_value(body).map_err(|e| Error::Invalid(e.to_string()))?;
        Ok(
            Api::<DynamicObject>::namespaced_with(self.client.clone(), &self.namespace, resource)
                .create(&PostParams::default(), &obj)
                .await?,
        )
    }

    /// A namespaced dynamic API for a CAPI kind.
    pub fn capi(&self, kind: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &capi_resource(kind))
    }

    /// Waits until CAPI reports the Cluster's control plane initialized.
    pub async fn wait_initialized(&self, timeout_secs: u64) -> Result<()> {
        let clusters = self.capi("Cluster");
        wait_for(
            &format!(
                "Cluster {}/{} control plane initialized",
                self.namespace, self.name
            ),
            timeout_secs,
            || async {
                let c = clusters.get(&self.name).await?;
                Ok(control_plane_initialized(&c.data))
            },
        )
        .await
    }

    /// The node selector that keeps a test's pods on this Cluster's nodes (every test shares
    /// one API server, hence one set of Nodes).
    pub fn node_selector(&self) -> (String, String) {
        (NODE_CLUSTER_LABEL.to_string(), self.namespace.clone())
    }

    /// Creates a FakeInfraMachineTemplate with `status.capacity`/`status.nodeInfo` and a
    /// MachineDeployment over it.
    pub async fn machine_deployment(
        &self,
        spec: &MachineDeploymentSpec,
    ) -> Result<MachineDeploymentFixture> {
        let template_resource = api_resource(TEMPLATE_KIND);
        self.create_dynamic(
            &template_resource,
            json!({
                "metadata": { "name": spec.name, "annotations": spec.template_annotations },
                "spec": { "template": { "spec": { "nodeLabels": spec.node_labels } } },
            }),
        )
        .await?;
        let status = json!({ "status": {
            "capacity": spec.shape.capacity(),
            "nodeInfo": { "architecture": spec.shape.architecture, "operatingSystem": "linux" },
        }});
        Api::<DynamicObject>::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &template_resource,
        )
        .patch_status(&spec.name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;

        let mut annotations = spec.annotations.clone();
        if let Some(price) = &spec.price_per_hour {
            annotations.insert(
                capi_adapter::keys::ours::PRICE_PER_HOUR.to_string(),
                price.clone(),
            );
        }
        let labels = json!({ CLUSTER_NAME_LABEL: self.name, DEPLOYMENT_NAME_LABEL: spec.name });
        let mut md_labels = spec.labels.clone();
        md_labels.insert(CLUSTER_NAME_LABEL.into(), self.name.clone());
        self.create_dynamic(
            &capi_resource("MachineDeployment"),
            json!({
                "metadata": { "name": spec.name, "annotations": annotations, "labels": md_labels },
                "spec": {
                    "clusterName": self.name,
                    "replicas": spec.replicas,
                    "selector": { "matchLabels": labels },
                    "template": {
                        "metadata": { "labels": labels },
                        "spec": {
                            "clusterName": self.name,
                            "bootstrap": { "dataSecretName": self.bootstrap_secret() },
                            "infrastructureRef": { "apiGroup": GROUP, "kind": TEMPLATE_KIND, "name": spec.name },
                        },
                    },
                },
            }),
        )
        .await?;
        Ok(MachineDeploymentFixture {
            cluster: self.clone(),
            name: spec.name.clone(),
        })
    }
}

/// A MachineDeployment made by [`ClusterFixture::machine_deployment`].
#[derive(Debug, Clone)]
pub struct MachineDeploymentFixture {
    pub cluster: ClusterFixture,
    pub name: String,
}

impl MachineDeploymentFixture {
    /// Sets replicas through the scale subresource (as an autoscaler does).
    pub async fn scale(&self, replicas: i32) -> Result<()> {
        self.cluster
            .capi("MachineDeployment")
            .patch_scale(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "spec": { "replicas": replicas } })),
            )
            .await?;
        Ok(())
    }

    /// The Machines of this MachineDeployment (including ones being deleted).
    pub async fn machines(&self) -> Result<Vec<DynamicObject>> {
        let params =
            ListParams::default().labels(&format!("{DEPLOYMENT_NAME_LABEL}={}", self.name));
        Ok(self.cluster.capi("Machine").list(&params).await?.items)
    }

    /// Names of the Machines that have a Node (`status.nodeRef`) and are not being deleted.
    pub async fn machines_with_nodes(&self) -> Result<Vec<(String, String)>> {
        Ok(self
            .machines()
            .await?
            .into_iter()
            .filter(|m| m.metadata.deletion_timestamp.is_none())
            .filter_map(|m| {
                let node = m
                    .data
                    .pointer("/status/nodeRef/name")?
                    .as_str()?
                    .to_string();
                Some((m.metadata.name?, node))
            })
            .collect())
    }

    /// Marks one Machine for deletion first (`cluster.x-k8s.io/delete-machine`).
    pub async fn mark_for_deletion(&self, machine: &str) -> Result<()> {
        self.cluster
            .capi("Machine")
            .patch(
                machine,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "metadata": { "annotations": { DELETE_MACHINE_ANNOTATION: "true" } } })),
            )
            .await?;
        Ok(())
    }

    /// Deletes the MachineDeployment (CAPI deletes its MachineSets, Machines and Nodes).
    pub async fn delete(&self) -> Result<()> {
        self.cluster
            .capi("MachineDeployment")
            .delete(&self.name, &DeleteParams::default())
            .await?;
        Ok(())
    }
}

/// Whether CAPI considers a Cluster's control plane initialized: its v1beta2
/// `ControlPlaneInitialized` condition is True. (`status.initialization.controlPlaneInitialized`
/// is only set for Clusters with a control-plane provider; without one, CAPI sets just the
/// condition, once a control-plane Machine has a nodeRef.)
pub fn control_plane_initialized(cluster: &Value) -> bool {
    let by_condition = cluster
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "ControlPlaneInitialized" && c["status"] == "True")
        });
    by_condition
        || cluster
            .pointer("/status/initialization/controlPlaneInitialized")
            .and_then(Value::as_bool)
            .unwrap_or(false)
}

/// Whether a Node is Ready (kwok sets the condition).
pub fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
