//! Status of ClusterAPINodeClasses and NodePools, refreshed every [`INTERVAL`]:
//!
//! - NodeClass: Ready with reasons (no matching resources, malformed annotations naming the
//!   object and key, unpriced resources), the matched resources, and a Warning event on each
//!   offending scalable resource in the management cluster.
//! - NodePool: `status.nodes`, `status.resources` (summed NodeClaim capacity), conditions
//!   ValidationSucceeded, NodeClassReady and Ready, and the usage/limit metrics.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_api::nodeclass::ClusterAPINodeClass;
use karpenter_api::{NodePool, wellknown};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::catalogs::Catalogs;
use crate::cloudprovider::nodeclass_status;
use crate::context::{Context, MANAGER};
use crate::metrics::UsageLabels;
use crate::nodeclaims::{condition, set_condition};

pub const INTERVAL: Duration = Duration::from_secs(15);

/// Runs until the process stops; `management` receives the events on scalable resources.
pub async fn run(ctx: Arc<Context>, management: Client) {
    let recorder = Recorder::new(
        management,
        Reporter {
            controller: MANAGER.into(),
            instance: Some(ctx.options.identity.clone()),
        },
    );
    let mut reported: BTreeSet<String> = BTreeSet::new();
    loop {
        if ctx.is_leader() && ctx.state.synced() {
            ctx.catalogs.invalidate().await;
            let catalogs = ctx.catalogs().await;
            if let Err(e) = nodeclasses(&ctx, &catalogs, &recorder, &mut reported).await {
                tracing::warn!(error = %e, "could not update nodeclass status");
            }
            if let Err(e) = nodepools(&ctx, &catalogs).await {
                tracing::warn!(error = %e, "could not update nodepool status");
            }
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

async fn nodeclasses(
    ctx: &Context,
    catalogs: &Catalogs,
    recorder: &Recorder,
    reported: &mut BTreeSet<String>,
) -> crate::error::Result<()> {
    let api: Api<ClusterAPINodeClass> = Api::all(ctx.workload.clone());
    for nc in ctx.nodeclasses() {
        let name = nc.name_any();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let status = match catalogs.by_nodeclass.get(&name) {
            Some(cat) => {
                for p in &cat.problems {
                    let Some(id) = &p.resource else { continue };
                    let key = format!("{id}|{}|{}", p.key, p.error);
                    if !reported.insert(key) {
                        continue;
                    }
                    let (api_version, kind) = match id.kind.machine_api() {
                        capi_adapter::MachineApi::Capi => {
                            ("cluster.x-k8s.io/v1beta2", id.kind.to_string())
                        }
                        capi_adapter::MachineApi::OpenShift => {
                            ("machine.openshift.io/v1beta1", "MachineSet".to_string())
                        }
                    };
                    let reference = ObjectReference {
                        api_version: Some(api_version.into()),
                        kind: Some(kind.split('.').next().unwrap_or_default().to_string()),
                        name: Some(id.name.clone()),
                        namespace: Some(id.namespace.clone()),
                        ..Default::default()
                    };
                    let ev = Event {
                        type_: EventType::Warning,
                        reason: "InvalidScalableResource".into(),
                        note: Some(
                            format!(
                                "left out of ClusterAPINodeClass {name}: {}: {}",
                                p.key, p.error
                            )
                            .chars()
                            .take(1000)
                            .collect(),
                        ),
                        action: "Discover".into(),
                        secondary: None,
                    };
                    if let Err(e) = recorder.publish(&ev, &reference).await {
                        tracing::debug!(error = %e, "could not publish event");
                    }
                }
                nodeclass_status(cat, nc.meta().generation, nc.status.as_ref(), now)
            }
            None => {
                let why = catalogs
                    .errors
                    .get(&name)
                    .cloned()
                    .unwrap_or_else(|| "not read yet".into());
                let mut s = nc.status.clone().unwrap_or_default();
                let mut conds = s.conditions.clone().unwrap_or_default();
                set_condition(
                    &mut conds,
                    condition(
                        s.conditions.as_ref(),
                        "Ready",
                        false,
                        "ManagementClusterUnreachable",
                        &why,
                        nc.meta().generation,
                    ),
                );
                s.conditions = Some(conds);
                s
            }
        };
        if nc.status.as_ref() == Some(&status) {
            continue;
        }
        api.patch_status(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(json!({
                "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1",
                "kind": "ClusterAPINodeClass",
                "status": status,
            })),
        )
        .await?;
    }
    Ok(())
}

fn resource_sum(
    into: &mut BTreeMap<String, f64>,
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) {
    for (k, v) in list.into_iter().flatten() {
        let x = if k == "cpu" {
            capi_adapter::quantity::parse_milli(&v.0).map(|m| m as f64 / 1000.0)
        } else {
            capi_adapter::quantity::parse_units(&v.0).map(|u| u as f64)
        };
        if let Ok(x) = x {
            *into.entry(k.clone()).or_default() += x;
        }
    }
}

fn quantity_text(k: &str, v: f64) -> String {
    if k == "cpu" {
        let m = (v * 1000.0).round() as i64;
        if m % 1000 == 0 {
            (m / 1000).to_string()
        } else {
            format!("{m}m")
        }
    } else {
        (v.round() as i64).to_string()
    }
}

async fn nodepools(ctx: &Context, catalogs: &Catalogs) -> crate::error::Result<()> {
    let api: Api<NodePool> = Api::all(ctx.workload.clone());
    let claims = ctx.nodeclaims();
    let nodeclasses: BTreeMap<String, Arc<ClusterAPINodeClass>> = ctx
        .state
        .nodeclasses
        .state()
        .into_iter()
        .map(|nc| (nc.name_any(), nc))
        .collect();
    for np in ctx.nodepools() {
        let name = np.name_any();
        let mine: Vec<_> = claims
            .iter()
            .filter(|c| c.labels().get(wellknown::NODEPOOL_LABEL) == Some(&name))
            .filter(|c| c.meta().deletion_timestamp.is_none())
            .collect();
        let mut usage = BTreeMap::new();
        for c in &mine {
            resource_sum(
                &mut usage,
                c.status.as_ref().and_then(|s| s.capacity.as_ref()),
            );
        }
        usage.insert("nodes".into(), mine.len() as f64);
        for (k, v) in &usage {
            ctx.metrics
                .nodepools_usage
                .get_or_create(&UsageLabels {
                    nodepool: name.clone(),
                    resource_type: k.clone(),
                })
                .set(*v);
        }
        let mut limits = BTreeMap::new();
        resource_sum(&mut limits, np.spec.limits.as_ref());
        for (k, v) in &limits {
            ctx.metrics
                .nodepools_limit
                .get_or_create(&UsageLabels {
                    nodepool: name.clone(),
                    resource_type: k.clone(),
                })
                .set(*v);
        }
        let valid = kcapi_snapshot::nodepool::nodepool(&np, "spec");
        let nc_name = Catalogs::nodeclass_of(&np);
        let nc_ready = match nc_name.as_ref().and_then(|n| nodeclasses.get(n)) {
            Some(nc) => {
                let ready = nc
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                if ready
                    || catalogs
                        .by_nodeclass
                        .get(&nc.name_any())
                        .is_some_and(|c| !c.instance_types.is_empty())
                {
                    Ok(())
                } else {
                    Err(format!(
                        "ClusterAPINodeClass {} is not Ready",
                        nc.name_any()
                    ))
                }
            }
            None => Err(match nc_name {
                Some(n) => format!("ClusterAPINodeClass {n} not found"),
                None => format!(
                    "nodeClassRef kind {} is not {}",
                    np.spec.template.spec.node_class_ref.kind,
                    wellknown::NODECLASS_KIND
                ),
            }),
        };
        let prev = np.status.as_ref().and_then(|s| s.conditions.as_ref());
        let generation = np.meta().generation;
        let mut conds = prev.cloned().unwrap_or_default();
        let (v_ok, v_msg) = match &valid {
            Ok(_) => (true, String::new()),
            Err(e) => (false, e.to_string()),
        };
        set_condition(
            &mut conds,
            condition(
                prev,
                "ValidationSucceeded",
                v_ok,
                if v_ok {
                    "ValidationSucceeded"
                } else {
                    "ValidationFailed"
                },
                &v_msg,
                generation,
            ),
        );
        let (n_ok, n_msg) = match &nc_ready {
            Ok(()) => (true, String::new()),
            Err(m) => (false, m.clone()),
        };
        set_condition(
            &mut conds,
            condition(
                prev,
                "NodeClassReady",
                n_ok,
                if n_ok {
                    "NodeClassReady"
                } else {
                    "NodeClassNotReady"
                },
                &n_msg,
                generation,
            ),
        );
        let ready = v_ok && n_ok;
        let msg = [v_msg, n_msg]
            .into_iter()
            .filter(|m| !m.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        set_condition(
            &mut conds,
            condition(
                prev,
                "Ready",
                ready,
                if ready { "Ready" } else { "NotReady" },
                &msg,
                generation,
            ),
        );
        let resources: BTreeMap<String, String> = usage
            .iter()
            .filter(|(k, _)| *k != "nodes")
            .map(|(k, v)| (k.clone(), quantity_text(k, *v)))
            .collect();
        let status = json!({
            "conditions": conds,
            "nodes": mine.len(),
            "resources": resources,
        });
        let current = serde_json::to_value(&np.status).unwrap_or_default();
        if current.get("nodes") == status.get("nodes")
            && current.get("resources") == status.get("resources")
            && current.get("conditions") == status.get("conditions")
        {
            continue;
        }
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await?;
    }
    Ok(())
}
