//! Fetching the infrastructure machine templates (`DockerMachineTemplate`,
//! `AWSMachineTemplate`, ...) the scalable resources point to, as dynamic objects: their
//! kinds differ per provider, and the adapter only reads `status.capacity` and
//! `status.nodeInfo` (CAPI's "autoscaling from zero" contract).

use std::collections::{BTreeMap, BTreeSet};

use capi_adapter::{
    InfraRef, NodeSample, NodeSamples, ScalableResource, TemplateLookup, Templates, sample_machine,
    wants_node,
};
use k8s_openapi::api::core::v1::Node;
use kube::api::{ApiResource, DynamicObject};
use kube::discovery;
use kube::{Api, Client};

use super::apis::{Apis, is_not_found};

/// One lookup per distinct reference; the group's preferred version is found by discovery.
pub(crate) async fn fetch(client: &Client, resources: &[ScalableResource]) -> Templates {
    let refs: BTreeSet<&InfraRef> = resources
        .iter()
        .filter_map(|r| r.template.infrastructure_ref.as_ref())
        .collect();
    let mut kinds: BTreeMap<(String, String), Result<ApiResource, String>> = BTreeMap::new();
    let mut out = Templates::new();
    for r in refs {
        let ar = match kinds.get(&(r.group.clone(), r.kind.clone())) {
            Some(found) => found.clone(),
            None => {
                let found = match discovery::group(client, &r.group).await {
                    Ok(g) => g
                        .recommended_kind(&r.kind)
                        .map(|(ar, _)| ar)
                        .ok_or_else(|| {
                            format!("kind {} is not served in group {}", r.kind, r.group)
                        }),
                    Err(e) => Err(format!("API group {} is not served: {e}", r.group)),
                };
                kinds.insert((r.group.clone(), r.kind.clone()), found.clone());
                found
            }
        };
        let lookup = match ar {
            Err(e) => TemplateLookup::Error(e),
            Ok(ar) => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), &r.namespace, &ar);
                match api.get(&r.name).await {
                    Ok(obj) => TemplateLookup::Found(Box::new(obj)),
                    Err(e) if is_not_found(&e) => TemplateLookup::NotFound,
                    Err(e) => TemplateLookup::Error(e.to_string()),
                }
            }
        };
        out.insert(r.clone(), lookup);
    }
    out
}

/// A running Node (in the workload cluster) for each resource whose nodes the declarations
/// do not fully describe ([`wants_node`]: CAS builds such a group's template from a running
/// node). Errors leave the resource without a sample; the adapter then reports what is
/// missing.
pub(crate) async fn running_nodes(
    apis: &Apis,
    workload: &Client,
    resources: &[ScalableResource],
    templates: &Templates,
) -> NodeSamples {
    let nodes: Api<Node> = Api::all(workload.clone());
    let mut out = NodeSamples::new();
    for r in resources.iter().filter(|r| wants_node(r, templates)) {
        let Ok(machines) = apis.list_machines(&r.id).await else {
            continue;
        };
        let Some(name) = sample_machine(&machines).and_then(|m| m.node_name.clone()) else {
            continue;
        };
        if let Ok(Some(node)) = nodes.get_opt(&name).await {
            out.insert(r.id.clone(), NodeSample::from_node(&node));
        }
    }
    out
}
