//! A running Node of a group, as one more source of capacity, labels and zone.
//!
//! CAS builds a group's node template from one of its running nodes, and only from
//! annotations and the infrastructure template when it has none. The adapter does no IO, so
//! the caller fetches, for the resources [`wants_node`] names, the Node of one of their
//! Machines and passes it as a [`NodeSample`]. We use it below what is declared (annotation,
//! template): a declaration describes every future node; one node only itself. Its zone,
//! region, instance type, architecture and OS labels win, as in CAS: they are what new nodes
//! will be labelled.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use provisioner_core::labels as wk;
use serde::{Deserialize, Serialize};

use crate::instance_types::{TemplateLookup, Templates};
use crate::keys;
use crate::resource::{MachineView, ResourceId, ScalableResource};

/// What we read from a Node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSample {
    pub name: String,
    /// `status.capacity`, as quantity strings.
    pub capacity: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
}

/// A running Node per scalable resource.
pub type NodeSamples = BTreeMap<ResourceId, NodeSample>;

/// The node labels taken from a running node: CAS' `extractNodeLabels` (architecture, OS,
/// instance type, region, zone in their stable and beta forms); CAS leaves out the stable
/// zone label, we read it (it is the one nodes carry today).
pub const NODE_LABELS: [&str; 8] = [
    wk::ARCH,
    wk::OS,
    wk::INSTANCE_TYPE,
    keys::node::INSTANCE_TYPE_BETA,
    wk::REGION,
    keys::node::REGION_BETA,
    wk::ZONE,
    keys::node::ZONE_BETA,
];

impl NodeSample {
    pub fn from_node(node: &Node) -> NodeSample {
        NodeSample {
            name: node.metadata.name.clone().unwrap_or_default(),
            capacity: node
                .status
                .as_ref()
                .and_then(|s| s.capacity.as_ref())
                .map(|c| c.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
                .unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
        }
    }

    /// The labels CAS copies from a running node (non-empty values only).
    pub fn template_labels(&self) -> BTreeMap<String, String> {
        NODE_LABELS
            .iter()
            .filter_map(|k| {
                self.labels
                    .get(*k)
                    .filter(|v| !v.is_empty())
                    .map(|v| (k.to_string(), v.clone()))
            })
            .collect()
    }
}

/// The Machine whose Node to sample: a live one with a node, oldest first (stable choice).
pub fn sample_machine(machines: &[MachineView]) -> Option<&MachineView> {
    machines
        .iter()
        .filter(|m| !m.deleting && m.node_name.is_some())
        .min_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)))
}

/// Whether a running node would tell us something the declarations do not: the group has
/// replicas and CPU or memory is declared nowhere, or its zone cannot be known from the
/// declarations (see [`crate::zone`]). Callers fetch a node only for these, to keep the API
/// traffic of a catalog small.
pub fn wants_node(r: &ScalableResource, templates: &Templates) -> bool {
    if r.replicas <= 0 {
        return false;
    }
    let status: BTreeMap<String, String> = r
        .template
        .infrastructure_ref
        .as_ref()
        .and_then(|i| match templates.get(i) {
            Some(TemplateLookup::Found(t)) => Some(crate::instance_types::status_capacity(t)),
            _ => None,
        })
        .unwrap_or_default();
    let read = crate::capacity::read(&crate::capacity::Inputs {
        resource: r,
        template: &status,
        template_obj: None,
        node: None,
    });
    !read.missing.is_empty() || crate::zone::needs_node(r, templates)
}
