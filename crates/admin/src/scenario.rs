//! `karpenter-capi snapshot`: the cluster's state as a simulator scenario, so "what would
//! the autoscaler do with my cluster" can be replayed offline with `karpenter-capi-sim run`.
//!
//! Two files, each in a format the simulator already reads, so nothing here converts pods
//! or nodes a second time:
//! - the cluster file: the Pods and Nodes as `kubectl get -o yaml` prints them (a `List`);
//!   the simulator's kubectl importer turns them into core objects through the shared
//!   conversion (`kcapi_snapshot`), exactly as the controller does;
//! - the scenario: the instance types the controller's catalog code finds (every capacity
//!   source, the adapter's prices and zones, not only the annotations the importer reads
//!   from MachineDeployments), the NodePools, and `workload.kubectl` pointing at the
//!   cluster file.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_api::NodePool;
use karpenter_capi_simulator::scenario::{
    CapacityTypeName, CatalogSpec, InstanceTypeSpec, KubectlSpec, OverheadSpec, Scenario, Workload,
};
use provisioner_core as core;
use serde::Serialize;
use serde_json::{Value, json};

use crate::live::Live;
use crate::{Clusters, Error};

/// The two files and what the user should know about them.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotFiles {
    /// The scenario YAML (refers to the cluster file by `cluster_file`).
    pub scenario: String,
    /// `kubectl get pods,nodes -o yaml`-like List.
    pub cluster: String,
    pub cluster_file: String,
    /// What the snapshot leaves out or approximates.
    pub notes: Vec<String>,
    pub pods: usize,
    pub nodes: usize,
    pub instance_types: usize,
}

/// Reads the cluster and writes the scenario; `cluster_file` is the cluster file's path
/// relative to the scenario file.
pub async fn snapshot(clusters: &Clusters, cluster_file: &str) -> Result<SnapshotFiles, Error> {
    let live = crate::live::read(clusters).await?;
    render(&live, cluster_file)
}

fn clean_meta(meta: &ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        labels: meta.labels.clone(),
        annotations: meta.annotations.as_ref().map(|a| {
            a.iter()
                .filter(|(k, _)| k.as_str() != "kubectl.kubernetes.io/last-applied-configuration")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }),
        owner_references: meta.owner_references.clone(),
        creation_timestamp: meta.creation_timestamp.clone(),
        ..ObjectMeta::default()
    }
}

/// Pure part: the files from one read.
pub fn render(live: &Live, cluster_file: &str) -> Result<SnapshotFiles, Error> {
    let mut notes = live.notes.clone();
    let mut items: Vec<Value> = Vec::new();
    let mut pods = 0;
    for p in &live.pods {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let mut p = p.clone();
        p.metadata = clean_meta(&p.metadata);
        let mut v = serde_json::to_value(&p)?;
        v["apiVersion"] = json!("v1");
        v["kind"] = json!("Pod");
        items.push(v);
        pods += 1;
    }
    for n in &live.nodes {
        let mut n = n.clone();
        n.metadata = clean_meta(&n.metadata);
        if let Some(st) = n.status.as_mut() {
            st.images = None;
        }
        let mut v = serde_json::to_value(&n)?;
        v["apiVersion"] = json!("v1");
        v["kind"] = json!("Node");
        items.push(v);
    }
    // Budgets shape what consolidation may do; the simulator recomputes their status.
    for b in &live.pdbs {
        let mut b = b.clone();
        b.metadata = clean_meta(&b.metadata);
        b.status = None;
        let mut v = serde_json::to_value(&b)?;
        v["apiVersion"] = json!("policy/v1");
        v["kind"] = json!("PodDisruptionBudget");
        items.push(v);
    }
    let cluster =
        serde_saphyr::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
            .map_err(|e| Error::Invalid(format!("cannot write the cluster file: {e}")))?;

    let types = live.catalogs.instance_types();
    let (overhead, overhead_note) = overhead(&types);
    notes.extend(overhead_note);
    let mut zones = BTreeSet::new();
    let mut capacity_types = BTreeSet::new();
    let mut specs = Vec::new();
    for it in &types {
        match type_spec(it) {
            Some(s) => {
                zones.extend(s.zones.iter().flatten().cloned());
                for o in &it.offerings {
                    capacity_types.insert(o.capacity_type);
                }
                specs.push(s);
            }
            None => notes.push(format!(
                "instance type {}: no on-demand offering, left out (the simulator prices spot as a share of on-demand)",
                it.name
            )),
        }
    }
    if live.catalogs.by_nodeclass.len() > 1 {
        notes.push(format!(
            "{} NodeClasses: the scenario offers every instance type to every NodePool (the simulator has no NodeClass)",
            live.catalogs.by_nodeclass.len()
        ));
    }
    let nodepools: Vec<NodePool> = live
        .nodepools
        .iter()
        .map(|np| NodePool {
            metadata: ObjectMeta {
                name: np.metadata.name.clone(),
                ..ObjectMeta::default()
            },
            spec: np.spec.clone(),
            status: None,
        })
        .collect();
    let mut scenario = Scenario {
        name: Some("cluster-snapshot".into()),
        description: Some(format!(
            "Written by `karpenter-capi snapshot` at {} (seconds since the epoch): {pods} pods, {} nodes, {} instance types.",
            live.now,
            live.nodes.len(),
            specs.len()
        )),
        catalog: CatalogSpec {
            types: specs,
            overhead,
            ..CatalogSpec::default()
        },
        node_pools: nodepools,
        workload: Workload {
            kubectl: Some(KubectlSpec {
                paths: vec![cluster_file.to_string()],
            }),
            ..Workload::default()
        },
        ..Scenario::default()
    };
    if zones.is_empty() {
        // No zoned offering: the existing nodes' zones, else one placeholder zone.
        zones.extend(live.nodes.iter().filter_map(|n| {
            n.metadata
                .labels
                .as_ref()?
                .get(core::labels::ZONE)
                .filter(|z| !z.is_empty())
                .cloned()
        }));
    }
    if zones.is_empty() {
        zones.insert("zone-a".to_string());
    }
    scenario.zones = zones.into_iter().collect();
    // Set explicitly: `Scenario::default()` has none (serde's default, on-demand, applies
    // only when parsing).
    scenario.capacity_types = vec![CapacityTypeName::OnDemand];
    if capacity_types.contains(&core::CapacityType::Spot) {
        scenario.capacity_types.push(CapacityTypeName::Spot);
    }
    let instance_types = scenario.catalog.types.len();
    let text = serde_saphyr::to_string(&scenario)
        .map_err(|e| Error::Invalid(format!("cannot write the scenario: {e}")))?;
    let mut header = String::from(
        "# A live cluster's state, written by `karpenter-capi snapshot`.\n# Replay: karpenter-capi-sim run <this file>\n",
    );
    for n in &notes {
        header.push_str(&format!("# note: {n}\n"));
    }
    Ok(SnapshotFiles {
        scenario: header + &text,
        cluster,
        cluster_file: cluster_file.to_string(),
        notes,
        pods,
        nodes: live.nodes.len(),
        instance_types,
    })
}

/// One core instance type as the scenario writes it; `None` without an on-demand price.
fn type_spec(it: &core::InstanceType) -> Option<InstanceTypeSpec> {
    let cheapest = |ct: core::CapacityType| {
        it.offerings
            .iter()
            .filter(|o| o.capacity_type == ct)
            .map(|o| o.price)
            .fold(None, |b: Option<f64>, p| Some(b.map_or(p, |b| b.min(p))))
    };
    let price = cheapest(core::CapacityType::OnDemand)?;
    // The unknown zone (empty) is not a scenario zone: such a type is offered in every one.
    let zones: BTreeSet<String> = it
        .offerings
        .iter()
        .map(|o| o.zone.clone())
        .filter(|z| !z.is_empty())
        .collect();
    let mut labels = it.labels.clone();
    let arch = labels
        .remove(core::labels::ARCH)
        .unwrap_or_else(|| "amd64".into());
    Some(InstanceTypeSpec {
        name: it.name.clone(),
        vcpu: it.capacity.cpu_milli as f64 / 1000.0,
        memory_mib: it.capacity.memory >> 20,
        gpu: it.capacity.get("nvidia.com/gpu"),
        arch,
        price,
        spot_price: cheapest(core::CapacityType::Spot),
        zones: (!zones.is_empty()).then(|| zones.into_iter().collect()),
        labels,
    })
}

/// The scenario has one overhead for every type: the types' own when they agree, else
/// the most common one, said in a note.
fn overhead(types: &[core::InstanceType]) -> (OverheadSpec, Option<String>) {
    let mut counts: BTreeMap<(i64, i64), usize> = BTreeMap::new();
    for t in types {
        *counts
            .entry((t.overhead.cpu_milli, t.overhead.memory))
            .or_insert(0) += 1;
    }
    let Some((&(cpu, mem), _)) = counts.iter().max_by_key(|(_, n)| **n) else {
        return (OverheadSpec::None, None);
    };
    let spec = if cpu == 0 && mem == 0 {
        OverheadSpec::None
    } else {
        OverheadSpec::Fixed {
            cpu: format!("{cpu}m"),
            memory: mem.to_string(),
        }
    };
    let note = (counts.len() > 1).then(|| {
        format!("instance types have {} different overheads; the scenario uses the most common one ({cpu}m CPU, {} MiB)", counts.len(), mem >> 20)
    });
    (spec, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn it(name: &str, cpu: i64, overhead_cpu: i64) -> core::InstanceType {
        core::InstanceType {
            name: name.into(),
            capacity: core::Resources::with_pods(cpu, 8 << 30, 110),
            overhead: core::Resources::new(overhead_cpu, 256 << 20),
            labels: BTreeMap::from([(core::labels::ARCH.to_string(), "arm64".to_string())]),
            taints: Vec::new(),
            offerings: vec![
                core::Offering::new("z1", core::CapacityType::OnDemand, 0.2),
                core::Offering::new("z2", core::CapacityType::OnDemand, 0.1),
                core::Offering::new("z2", core::CapacityType::Spot, 0.05),
            ],
            csi_limits: BTreeMap::new(),
        }
    }

    #[test]
    fn type_spec_takes_cheapest_prices_zones_and_arch() {
        let s = type_spec(&it("a", 2000, 100)).unwrap();
        assert_eq!(s.vcpu, 2.0);
        assert_eq!(s.memory_mib, 8192);
        assert_eq!(s.price, 0.1);
        assert_eq!(s.spot_price, Some(0.05));
        assert_eq!(s.arch, "arm64");
        assert_eq!(s.zones, Some(vec!["z1".to_string(), "z2".to_string()]));
        assert!(s.labels.is_empty());
        let mut spot_only = it("b", 2000, 100);
        spot_only
            .offerings
            .retain(|o| o.capacity_type == core::CapacityType::Spot);
        assert!(type_spec(&spot_only).is_none());
    }

    #[test]
    fn overhead_is_the_most_common_and_says_so() {
        let (o, note) = overhead(&[it("a", 2000, 100), it("b", 4000, 100), it("c", 4000, 80)]);
        assert_eq!(
            o,
            OverheadSpec::Fixed {
                cpu: "100m".into(),
                memory: (256i64 << 20).to_string()
            }
        );
        assert!(note.unwrap().contains("2 different overheads"));
        assert_eq!(overhead(&[]), (OverheadSpec::None, None));
    }
}
