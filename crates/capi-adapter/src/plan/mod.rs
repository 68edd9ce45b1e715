//! Launch and delete plans as data, computed only from objects as seen in the API.
//!
//! # Why plans are recomputed from the API, every time
//!
//! The controller may crash between any two writes. Upstream's provider raised replicas
//! twice for one NodeClaim after such crashes (issues #70, #87: replica runaway). Here no
//! step depends on memory of what was done before; every step re-reads the objects and
//! recomputes:
//!
//! 1. The NodeClaim gets its target resource recorded (annotation
//!    `karpenter.cluster.x-k8s.io/scalable-resource`) **before** replicas are raised.
//! 2. For a resource, [`plan_launch`] counts the claims that target it and have no Machine
//!    (*pending*), the live unbound Machines (*supply*), and the replicas CAPI has yet to
//!    turn into Machine objects (*materializing* = `spec.replicas` - non-deleting Machines).
//!    Replicas are raised by the shortfall only: `pending - supply - materializing`.
//! 3. After a write of `replicas + shortfall`, the same inputs give a shortfall of 0 (the
//!    raise now counts as materializing); once CAPI creates the Machines they count as
//!    supply instead; once bound, the claims are no longer pending. So re-running at any
//!    point never raises twice for one claim.
//! 4. Binding is deterministic (oldest pending claim to the best unbound Machine) and the
//!    Machine label is written first: a Machine labelled for a claim whose annotation is
//!    missing is *completed*, never re-bound.
//!
//! Raising replicas while CAPI is removing Machines (more non-deleting Machines than
//! replicas: a scale-down or a rollout surge in progress, or one of our delete requests
//! pending) would cancel that removal rather than add a Machine, and the arithmetic above
//! would no longer be idempotent; the plan then defers the raise ([`Deferred`]) and binds
//! what it can.
//!
//! Deletes ([`plan_delete`]) annotate the Machine (`cluster.x-k8s.io/delete-machine` plus
//! our `karpenter.cluster.x-k8s.io/delete-requested` marker) and lower replicas until the
//! Machines CAPI will remove (non-deleting Machines - replicas) cover every Machine we
//! annotated. That rule is idempotent too: after a crash between the annotation and the
//! scale write, the re-run lowers; after the scale write, it does nothing.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use provisioner_core::{CapacityType, Operator, Requirement, labels as wk};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::instance_types::{Catalog, ResourceOffer, SizeLimits};
use crate::keys;
use crate::resource::{Binding, MachineKey, MachineView, ResourceId, ResourceKind};

/// A NodeClaim as plans see it, read from its metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimView {
    pub name: String,
    /// Creation time, seconds since the epoch.
    pub created_at: i64,
    pub deleting: bool,
    /// The scalable resource recorded for it (`karpenter.cluster.x-k8s.io/scalable-resource`).
    pub target: Option<ResourceId>,
    /// The Machine it is bound to (`cluster.x-k8s.io/machine`).
    pub machine: Option<MachineKey>,
}

impl ClaimView {
    /// Reads a NodeClaim's metadata. Unparsable annotations count as absent (a garbled
    /// target means "not launched yet"; the launch records a fresh one).
    pub fn from_meta(meta: &ObjectMeta) -> Self {
        let ann = meta.annotations.as_ref();
        let get = |k: &str| ann.and_then(|a| a.get(k));
        ClaimView {
            name: meta.name.clone().unwrap_or_default(),
            created_at: meta
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second())
                .unwrap_or(0),
            deleting: meta.deletion_timestamp.is_some(),
            target: get(keys::ours::LAUNCH_TARGET).and_then(|v| v.parse().ok()),
            machine: get(keys::capi::MACHINE_ANNOTATION).and_then(|v| v.parse().ok()),
        }
    }
}

/// Bind a Machine to a NodeClaim: label the Machine (with the resourceVersion read, so a
/// concurrent change fails instead of being overwritten), then annotate the NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindAction {
    pub claim: String,
    pub machine: MachineKey,
    pub machine_resource_version: Option<String>,
}

/// Why a raise waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Deferred {
    /// More non-deleting Machines than replicas: CAPI is removing Machines (a scale-down, a
    /// rollout surge, or one of our delete requests). Raising now would cancel the removal.
    RemovalInProgress { excess: i64 },
    /// Machines we asked to delete are not gone yet.
    OurDeletesPending { machines: Vec<MachineKey> },
}

/// The numbers behind a launch plan, for logs and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchCounts {
    /// Claims targeting the resource with no Machine before this plan's bindings.
    pub pending: i64,
    /// Live unbound Machines usable for binding.
    pub bindable: i64,
    /// Live unbound Machines that failed (counted as supply so a failing resource never
    /// grows without bound; the launch-failure back-off takes it out of the catalog).
    pub failed_unbound: i64,
    /// Replicas without a Machine object yet.
    pub materializing: i64,
    /// Raise needed before max-size and deferral.
    pub shortfall: i64,
}

/// What to do for one resource's pending NodeClaims.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchPlan {
    pub replicas: i32,
    /// Write this through the scale subresource, with the resourceVersion it was read at.
    pub scale_to: Option<i32>,
    /// New bindings.
    pub bind: Vec<BindAction>,
    /// Machines already labelled for a claim whose annotation is missing or stale.
    pub complete: Vec<BindAction>,
    /// Claims whose binding is complete.
    pub bound: BTreeMap<String, MachineKey>,
    /// Claims whose recorded Machine no longer exists (garbage collection's business; never
    /// launched again from here).
    pub lost: BTreeMap<String, MachineKey>,
    /// Claims waiting for Machines CAPI has yet to create.
    pub waiting: Vec<String>,
    /// Claims that get no Machine because the resource is at its max size.
    pub at_max: Vec<String>,
    pub deferred: Option<Deferred>,
    pub counts: LaunchCounts,
}

impl LaunchPlan {
    /// The Machine a claim is or will be bound to after this plan.
    pub fn machine_for(&self, claim: &str) -> Option<&MachineKey> {
        self.bound.get(claim).or_else(|| {
            self.bind
                .iter()
                .chain(&self.complete)
                .find(|b| b.claim == claim)
                .map(|b| &b.machine)
        })
    }
}

/// The inputs of [`plan_launch`], all as just read from the API.
#[derive(Debug, Clone, Copy)]
pub struct LaunchInput<'a> {
    pub resource: &'a ResourceId,
    /// `spec.replicas` from the scale subresource.
    pub replicas: i32,
    pub limits: SizeLimits,
    /// Machines (any; those of other resources are ignored).
    pub machines: &'a [MachineView],
    /// NodeClaims (any; those targeting other resources are ignored).
    pub claims: &'a [ClaimView],
}

/// Machines of one resource, by state.
struct Classified<'a> {
    live: Vec<&'a MachineView>,
    annotated: Vec<&'a MachineView>,
}

fn classify<'a>(resource: &ResourceId, machines: &'a [MachineView]) -> Classified<'a> {
    let mut c = Classified {
        live: Vec::new(),
        annotated: Vec::new(),
    };
    for m in machines.iter().filter(|m| m.belongs_to(resource)) {
        if m.deleting {
            continue;
        }
        if m.delete_annotated() {
            c.annotated.push(m);
        } else {
            c.live.push(m);
        }
    }
    c
}

/// Computes bindings and the replica raise for one resource (see the module docs).
pub fn plan_launch(input: LaunchInput<'_>) -> LaunchPlan {
    let resource = input.resource;
    let c = classify(resource, input.machines);
    let replicas = i64::from(input.replicas.max(0));
    let mut plan = LaunchPlan {
        replicas: input.replicas,
        ..LaunchPlan::default()
    };

    // Every non-deleting Machine of the resource bound to a claim, by claim name.
    let mut by_claim: BTreeMap<&str, &MachineView> = BTreeMap::new();
    for m in c.live.iter().chain(&c.annotated) {
        if let Binding::Claim(claim) = m.binding() {
            // Two Machines labelled for one claim cannot come from us (the label write is
            // guarded by resourceVersion and the lock); keep the oldest, deterministically.
            by_claim
                .entry(claim)
                .and_modify(|cur| {
                    if (m.created_at, &m.name) < (cur.created_at, &cur.name) {
                        *cur = m;
                    }
                })
                .or_insert(m);
        }
    }
    let existing: BTreeMap<MachineKey, &MachineView> = input
        .machines
        .iter()
        .filter(|m| m.belongs_to(resource))
        .map(|m| (m.key(), m))
        .collect();

    let mut claims: Vec<&ClaimView> = input
        .claims
        .iter()
        .filter(|cl| cl.target.as_ref() == Some(resource))
        .collect();
    claims.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));

    let mut pending: Vec<&ClaimView> = Vec::new();
    for cl in claims {
        let labelled = by_claim.get(cl.name.as_str()).copied();
        match (&cl.machine, labelled) {
            (Some(mk), Some(m)) if *mk == m.key() => {
                plan.bound.insert(cl.name.clone(), mk.clone());
            }
            (_, Some(m)) => plan.complete.push(BindAction {
                claim: cl.name.clone(),
                machine: m.key(),
                machine_resource_version: m.resource_version.clone(),
            }),
            (Some(mk), None) => match existing.get(mk) {
                // Bound by annotation but the Machine lost its label (a human edit): the
                // annotation is the claim's word, so keep it and restore the label.
                Some(m) if !m.deleting && matches!(m.binding(), Binding::Unbound) => {
                    plan.complete.push(BindAction {
                        claim: cl.name.clone(),
                        machine: mk.clone(),
                        machine_resource_version: m.resource_version.clone(),
                    })
                }
                Some(_) => {
                    plan.bound.insert(cl.name.clone(), mk.clone());
                }
                None => {
                    plan.lost.insert(cl.name.clone(), mk.clone());
                }
            },
            (None, None) if cl.deleting => {}
            (None, None) => pending.push(cl),
        }
    }
    let completing: BTreeSet<&MachineKey> = plan.complete.iter().map(|b| &b.machine).collect();

    // Unbound Machines may serve pending claims, with one exception checked per claim below:
    // a Machine that already backs a Node and predates the claim was not made for it (a base
    // node kept by min-size, a node running pods); binding it would make Karpenter believe
    // a busy node is its own empty one. Such Machines are never bound; replicas are raised.
    let mut bindable: Vec<&MachineView> = c
        .live
        .iter()
        .copied()
        .filter(|m| matches!(m.binding(), Binding::Unbound) && !completing.contains(&m.key()))
        .collect();
    let failed_unbound = bindable.iter().filter(|m| m.failure.is_some()).count() as i64;
    bindable.retain(|m| m.failure.is_none());
    bindable.sort_by(|a, b| {
        (a.provider_id.is_none(), a.created_at, &a.name).cmp(&(
            b.provider_id.is_none(),
            b.created_at,
            &b.name,
        ))
    });

    plan.counts.pending = pending.len() as i64;
    plan.counts.bindable = bindable.len() as i64;
    plan.counts.failed_unbound = failed_unbound;
    // Oldest claims first, each to the first unused Machine that could have been made for
    // it: no Node yet, or created no earlier than the claim.
    let mut used = vec![false; bindable.len()];
    let mut remaining: Vec<&ClaimView> = Vec::new();
    for cl in &pending {
        let found = bindable
            .iter()
            .enumerate()
            .find(|(i, m)| !used[*i] && (m.node_name.is_none() || m.created_at >= cl.created_at));
        match found {
            Some((i, m)) => {
                used[i] = true;
                plan.bind.push(BindAction {
                    claim: cl.name.clone(),
                    machine: m.key(),
                    machine_resource_version: m.resource_version.clone(),
                });
            }
            None => remaining.push(cl),
        }
    }

    let non_deleting = (c.live.len() + c.annotated.len()) as i64;
    let excess = non_deleting - replicas;
    let materializing = (-excess).max(0);
    plan.counts.materializing = materializing;
    let shortfall = (remaining.len() as i64 - materializing - failed_unbound).max(0);
    plan.counts.shortfall = shortfall;

    let ours_pending: Vec<MachineKey> = c
        .annotated
        .iter()
        .filter(|m| m.delete_requested_by_us())
        .map(|m| m.key())
        .collect();
    let mut raise = shortfall;
    if raise > 0 {
        if !ours_pending.is_empty() {
            plan.deferred = Some(Deferred::OurDeletesPending {
                machines: ours_pending,
            });
            raise = 0;
        } else if excess > 0 {
            plan.deferred = Some(Deferred::RemovalInProgress { excess });
            raise = 0;
        }
    }
    let mut over_max = 0;
    if let Some(max) = input.limits.max {
        let allowed = (max - replicas).max(0);
        if raise > allowed {
            over_max = raise - allowed;
            raise = allowed;
        }
    }
    if raise > 0 {
        let to = (replicas + raise).min(i64::from(i32::MAX));
        plan.scale_to = Some(to as i32);
    }
    let n_at_max = over_max as usize;
    let split = remaining.len().saturating_sub(n_at_max);
    plan.waiting = remaining[..split].iter().map(|c| c.name.clone()).collect();
    plan.at_max = remaining[split..].iter().map(|c| c.name.clone()).collect();
    plan
}

/// Why a delete does not happen now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Error)]
pub enum DeleteRefusal {
    #[error("the resource is at its min size {min}")]
    BelowMinSize { min: i64 },
    #[error("the resource is mid-rollout; CAPI's rollout decides which Machines go")]
    MidRollout,
    #[error("replicas are above the Machines that exist; wait until CAPI has created them")]
    ScaleUpInProgress,
    #[error("the Machine does not belong to this resource")]
    NotInResource,
}

impl DeleteRefusal {
    /// Whether retrying later can succeed without anyone changing the configuration.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            DeleteRefusal::MidRollout | DeleteRefusal::ScaleUpInProgress
        )
    }
}

/// Per target Machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeleteOutcome {
    /// Annotated and covered by replicas (after this plan's writes): CAPI will delete it.
    Requested,
    /// Already being deleted.
    Deleting,
    /// No such Machine.
    Gone,
    Refused(DeleteRefusal),
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletePlan {
    pub replicas: i32,
    /// Add the delete-machine annotation and our marker to these.
    pub annotate: Vec<MachineKey>,
    /// Write this through the scale subresource (resourceVersion precondition).
    pub scale_to: Option<i32>,
    /// Remove our delete annotations from these (min size rose since they were annotated).
    pub rollback: Vec<MachineKey>,
    pub outcomes: BTreeMap<MachineKey, DeleteOutcome>,
}

#[derive(Debug, Clone, Copy)]
pub struct DeleteInput<'a> {
    pub resource: &'a ResourceId,
    pub replicas: i32,
    pub limits: SizeLimits,
    /// From the resource's status ([`crate::ScalableResource::rolling_out_by_status`]).
    pub rolling_out: bool,
    pub machines: &'a [MachineView],
    pub targets: &'a [MachineKey],
}

/// Which Machines to annotate and how far to lower replicas (see the module docs).
///
/// Also called with no targets to complete or roll back earlier requests after a restart.
pub fn plan_delete(input: DeleteInput<'_>) -> DeletePlan {
    let resource = input.resource;
    let mut plan = DeletePlan {
        replicas: input.replicas,
        ..DeletePlan::default()
    };
    let replicas = i64::from(input.replicas.max(0));
    let c = classify(resource, input.machines);

    let mut new_targets: Vec<&MachineView> = Vec::new();
    let mut seen = BTreeSet::new();
    for t in input.targets {
        if !seen.insert(t) {
            continue;
        }
        let found = input
            .machines
            .iter()
            .find(|m| m.namespace == t.namespace && m.name == t.name);
        let outcome = match found {
            None => DeleteOutcome::Gone,
            Some(m) if !m.belongs_to(resource) => {
                DeleteOutcome::Refused(DeleteRefusal::NotInResource)
            }
            Some(m) if m.deleting => DeleteOutcome::Deleting,
            Some(m) if m.delete_requested_by_us() => DeleteOutcome::Requested,
            Some(m) => {
                new_targets.push(m);
                DeleteOutcome::Requested
            }
        };
        plan.outcomes.insert(t.clone(), outcome);
    }
    new_targets.sort_by(|a, b| a.name.cmp(&b.name));

    let mut sets: BTreeSet<&str> = BTreeSet::new();
    if resource.kind == ResourceKind::MachineDeployment {
        for m in c.live.iter().chain(&c.annotated) {
            if let Some(s) = m.labels.get(keys::capi::SET_NAME) {
                sets.insert(s);
            }
        }
    }
    let refuse_all = |plan: &mut DeletePlan, why: DeleteRefusal| {
        for outcome in plan.outcomes.values_mut() {
            if *outcome == DeleteOutcome::Requested {
                *outcome = DeleteOutcome::Refused(why.clone());
            }
        }
    };
    if input.rolling_out || sets.len() > 1 {
        refuse_all(&mut plan, DeleteRefusal::MidRollout);
        return plan;
    }
    let non_deleting = (c.live.len() + c.annotated.len()) as i64;
    let excess = non_deleting - replicas;
    if excess < 0 {
        refuse_all(&mut plan, DeleteRefusal::ScaleUpInProgress);
        return plan;
    }
    let mut ours: Vec<&MachineView> = c
        .annotated
        .iter()
        .copied()
        .filter(|m| m.delete_requested_by_us())
        .collect();
    ours.sort_by(|a, b| a.name.cmp(&b.name));
    let dec = |n: i64| (n - excess).max(0);
    let min = input.limits.min;
    let floor_ok = |n: i64| replicas - dec(n) >= min;

    // Earlier requests first; if the min size rose since, roll back the newest names.
    let mut kept = ours.len() as i64;
    while kept > 0 && !floor_ok(kept) {
        kept -= 1;
    }
    for m in &ours[kept as usize..] {
        plan.rollback.push(m.key());
        if let Some(o) = plan.outcomes.get_mut(&m.key()) {
            *o = DeleteOutcome::Refused(DeleteRefusal::BelowMinSize { min });
        }
    }
    let mut n = kept;
    for m in new_targets {
        if floor_ok(n + 1) {
            n += 1;
            plan.annotate.push(m.key());
        } else if let Some(o) = plan.outcomes.get_mut(&m.key()) {
            *o = DeleteOutcome::Refused(DeleteRefusal::BelowMinSize { min });
        }
    }
    let d = dec(n);
    if d > 0 {
        plan.scale_to = Some((replicas - d) as i32);
    }
    plan
}

/// No offering of the catalog satisfies a NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("no available scalable resource satisfies the NodeClaim's requirements")]
pub struct NoOffering;

/// The resource to scale for a new NodeClaim: among available offerings whose labels
/// (instance type, zone, capacity type and the type's labels) meet the requirements, the
/// cheapest, then the one with most room below max size, then by name. Requirement keys an
/// offering does not define are not checked (the NodePool's own labels, for instance).
pub fn choose_resource<'c>(
    catalog: &'c Catalog,
    requirements: &[Requirement],
) -> Result<&'c ResourceOffer, NoOffering> {
    let types: BTreeMap<&str, &provisioner_core::InstanceType> = catalog
        .instance_types
        .iter()
        .map(|it| (it.name.as_str(), it))
        .collect();
    let mut best: Option<&ResourceOffer> = None;
    for offer in catalog.resources.values().filter(|o| o.available()) {
        let Some(it) = types.get(offer.instance_type.as_str()) else {
            continue;
        };
        let label = |key: &str| -> Option<String> {
            match key {
                wk::INSTANCE_TYPE => Some(offer.instance_type.clone()),
                wk::ZONE => Some(offer.zone.clone()),
                wk::CAPACITY_TYPE => Some(offer.capacity_type.as_label().to_string()),
                _ => it.labels.get(key).cloned(),
            }
        };
        let defined = |key: &str| {
            matches!(key, wk::INSTANCE_TYPE | wk::ZONE | wk::CAPACITY_TYPE)
                || it.labels.contains_key(key)
        };
        let ok = requirements.iter().all(|r| {
            if !defined(&r.key) {
                return true;
            }
            requirement_holds(r, label(&r.key).as_deref())
        });
        if !ok {
            continue;
        }
        let headroom =
            |o: &ResourceOffer| o.limits.max.map_or(i64::MAX, |m| m - i64::from(o.replicas));
        best = match best {
            None => Some(offer),
            Some(b) => {
                let ord = offer
                    .price
                    .total_cmp(&b.price)
                    .then(headroom(b).cmp(&headroom(offer)))
                    .then(offer.resource.cmp(&b.resource));
                Some(if ord.is_lt() { offer } else { b })
            }
        };
    }
    best.ok_or(NoOffering)
}

fn requirement_holds(r: &Requirement, value: Option<&str>) -> bool {
    let num = |s: &str| s.parse::<i64>().ok();
    match r.operator {
        Operator::In => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
        Operator::NotIn => value.is_none_or(|v| !r.values.iter().any(|x| x == v)),
        Operator::Exists => value.is_some(),
        Operator::DoesNotExist => value.is_none(),
        Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
            let (Some(v), Some(bound)) =
                (value.and_then(num), r.values.first().and_then(|s| num(s)))
            else {
                return false;
            };
            match r.operator {
                Operator::Gt => v > bound,
                Operator::Lt => v < bound,
                Operator::Gte => v >= bound,
                _ => v <= bound,
            }
        }
    }
}

/// The capacity-type label value of an offering (re-exported for callers building NodeClaim
/// labels).
pub fn capacity_type_label(ct: CapacityType) -> &'static str {
    ct.as_label()
}

#[cfg(test)]
mod tests;
