use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::resource::{MachineApi, binding_label_value};

fn md() -> ResourceId {
    ResourceId::new(ResourceKind::MachineDeployment, "ns", "md")
}

fn machine(name: &str, created: i64) -> MachineView {
    MachineView {
        api: MachineApi::Capi,
        namespace: "ns".into(),
        name: name.into(),
        uid: None,
        resource_version: Some("1".into()),
        labels: [
            (keys::capi::DEPLOYMENT_NAME.to_string(), "md".to_string()),
            (keys::capi::SET_NAME.to_string(), "md-abc".to_string()),
        ]
        .into(),
        annotations: BTreeMap::new(),
        created_at: created,
        deleting: false,
        provider_id: None,
        node_name: None,
        failure: None,
        provisioning_error: None,
        version: None,
        failure_domain: None,
    }
}

fn bind(m: &mut MachineView, claim: &str) {
    m.labels.insert(
        keys::ours::NODECLAIM_LABEL.into(),
        binding_label_value(claim),
    );
    m.annotations
        .insert(keys::ours::NODECLAIM_ANNOTATION.into(), claim.into());
}

fn claim(name: &str, created: i64) -> ClaimView {
    ClaimView {
        name: name.into(),
        created_at: created,
        deleting: false,
        target: Some(md()),
        machine: None,
    }
}

fn no_limits() -> SizeLimits {
    SizeLimits { min: 0, max: None }
}

fn launch(replicas: i32, machines: &[MachineView], claims: &[ClaimView]) -> LaunchPlan {
    plan_launch(LaunchInput {
        resource: &md(),
        replicas,
        limits: no_limits(),
        machines,
        claims,
    })
}

/// Applies a launch plan's writes to the in-memory world, as the controller would.
fn apply_launch(
    plan: &LaunchPlan,
    replicas: &mut i32,
    machines: &mut [MachineView],
    claims: &mut [ClaimView],
) {
    if let Some(to) = plan.scale_to {
        *replicas = to;
    }
    for b in plan.bind.iter().chain(&plan.complete) {
        let m = machines.iter_mut().find(|m| m.key() == b.machine).unwrap();
        bind(m, &b.claim);
        let c = claims.iter_mut().find(|c| c.name == b.claim).unwrap();
        c.machine = Some(b.machine.clone());
    }
}

/// CAPI's MachineSet controller: create or delete (annotated first) until machines == replicas.
fn capi_reconcile(replicas: i32, machines: &mut Vec<MachineView>, next: &mut i64) {
    let live: Vec<usize> = (0..machines.len())
        .filter(|i| !machines[*i].deleting)
        .collect();
    let n = live.len() as i64;
    let want = i64::from(replicas);
    if n < want {
        for _ in 0..(want - n) {
            *next += 1;
            machines.push(machine(&format!("new-{next}"), 1000 + *next));
        }
    } else if n > want {
        let mut order = live.clone();
        order.sort_by_key(|i| (!machines[*i].delete_annotated(), machines[*i].name.clone()));
        for i in order.into_iter().take((n - want) as usize) {
            machines[i].deleting = true;
        }
    }
}

#[test]
fn raises_by_the_shortfall_only() {
    let claims: Vec<ClaimView> = (0..10).map(|i| claim(&format!("c{i}"), i)).collect();
    let p = launch(
        3,
        &[machine("a", 0), machine("b", 0), machine("c", 0)],
        &claims,
    );
    // 3 unbound Machines exist: 3 bind now, 7 are missing.
    assert_eq!(p.bind.len(), 3);
    assert_eq!(p.scale_to, Some(10));
    assert_eq!(p.waiting.len(), 7);
    // Oldest claims get the Machines.
    assert_eq!(p.bind[0].claim, "c0");
}

/// Machines that back Nodes and predate the claim (base nodes kept by min-size, nodes
/// running pods) are never bound as spare capacity: replicas are raised instead, and the
/// Machine created for the claim is the one bound.
#[test]
fn busy_machines_older_than_the_claim_are_not_spare_capacity() {
    let mut base = machine("base", 0);
    base.node_name = Some("node-base".into());
    let mut fresh_with_node = machine("fresh", 20);
    fresh_with_node.node_name = Some("node-fresh".into());
    let claims = vec![claim("c0", 10)];
    let p = launch(1, std::slice::from_ref(&base), &claims);
    assert!(p.bind.is_empty(), "{:?}", p.bind);
    assert_eq!(p.scale_to, Some(2));
    // A Machine created after the claim may bind even once its Node exists (the binding
    // was delayed, e.g. by a restart).
    let p = launch(2, &[base, fresh_with_node], &claims);
    assert_eq!(p.bind.len(), 1);
    assert_eq!(p.bind[0].machine.name, "fresh");
    assert_eq!(p.scale_to, None);
}

#[test]
fn a_restart_after_the_scale_write_does_not_raise_again() {
    let claims = vec![claim("c0", 0)];
    let p = launch(0, &[], &claims);
    assert_eq!(p.scale_to, Some(1));
    // The task died after the write: same claims, replicas 1, no Machine yet.
    let p2 = launch(1, &[], &claims);
    assert_eq!(p2.scale_to, None);
    assert_eq!(p2.waiting, vec!["c0".to_string()]);
    // CAPI created the Machine: it binds, still no raise.
    let p3 = launch(1, &[machine("m", 5)], &claims);
    assert_eq!(p3.scale_to, None);
    assert_eq!(p3.bind.len(), 1);
}

#[test]
fn a_machine_labelled_before_the_crash_is_completed_not_rebound() {
    let mut m = machine("m", 0);
    bind(&mut m, "c0");
    let claims = vec![claim("c0", 0), claim("c1", 1)];
    let p = launch(1, &[m, machine("n", 1)], &claims);
    assert_eq!(p.complete.len(), 1);
    assert_eq!(p.complete[0].claim, "c0");
    assert_eq!(p.bind.len(), 1);
    assert_eq!(p.bind[0].claim, "c1");
    assert_eq!(p.bind[0].machine.name, "n");
    // 2 Machines, replicas 1: CAPI is removing one; nothing to raise anyway.
    assert_eq!(p.scale_to, None);
}

#[test]
fn lost_machines_and_deleting_claims_are_not_relaunched() {
    let mut gone = claim("gone", 0);
    gone.machine = Some(MachineKey {
        namespace: "ns".into(),
        name: "vanished".into(),
    });
    let mut deleting = claim("del", 1);
    deleting.deleting = true;
    let p = launch(0, &[], &[gone, deleting]);
    assert_eq!(p.scale_to, None);
    assert!(p.lost.contains_key("gone"));
}

#[test]
fn max_size_caps_the_raise() {
    let claims: Vec<ClaimView> = (0..5).map(|i| claim(&format!("c{i}"), i)).collect();
    let p = plan_launch(LaunchInput {
        resource: &md(),
        replicas: 2,
        limits: SizeLimits {
            min: 0,
            max: Some(4),
        },
        machines: &[],
        claims: &claims,
    });
    // Two replicas exist without Machines yet (materializing), 3 more needed, 2 allowed.
    assert_eq!(p.counts.materializing, 2);
    assert_eq!(p.scale_to, Some(4));
    assert_eq!(p.at_max, vec!["c4".to_string()]);
}

#[test]
fn raise_waits_while_capi_removes_machines() {
    let mut ours = machine("old", 0);
    ours.annotations
        .insert(keys::capi::DELETE_MACHINE.into(), "true".into());
    ours.annotations
        .insert(keys::ours::DELETE_REQUESTED.into(), "x".into());
    let p = launch(0, &[ours], &[claim("c0", 0)]);
    assert!(matches!(
        p.deferred,
        Some(Deferred::OurDeletesPending { .. })
    ));
    assert_eq!(p.scale_to, None);
    let p = launch(1, &[machine("a", 0), machine("b", 0)], &[]);
    assert_eq!(p.scale_to, None);
    let mut a = machine("a", 0);
    bind(&mut a, "x");
    let mut b = machine("b", 0);
    bind(&mut b, "y");
    let p = launch(1, &[a, b], &[claim("c0", 0)]);
    assert!(matches!(
        p.deferred,
        Some(Deferred::RemovalInProgress { excess: 1 })
    ));
}

#[test]
fn failed_machines_are_not_bound_and_do_not_cause_runaway() {
    let mut f = machine("f", 0);
    f.failure = Some("CreateError".into());
    let p = launch(1, &[f], &[claim("c0", 0)]);
    assert!(p.bind.is_empty());
    assert_eq!(p.scale_to, None);
}

#[test]
fn foreign_claimed_machines_are_left_alone() {
    let mut m = machine("m", 0);
    m.labels
        .insert(keys::capi::KARPENTER_MEMBER.into(), String::new());
    let p = launch(1, &[m], &[claim("c0", 0)]);
    assert!(p.bind.is_empty());
    assert_eq!(p.scale_to, Some(2));
}

fn del(replicas: i32, min: i64, machines: &[MachineView], targets: &[MachineKey]) -> DeletePlan {
    plan_delete(DeleteInput {
        resource: &md(),
        replicas,
        limits: SizeLimits { min, max: None },
        rolling_out: false,
        machines,
        targets,
    })
}

fn key(name: &str) -> MachineKey {
    MachineKey {
        namespace: "ns".into(),
        name: name.into(),
    }
}

fn annotate(m: &mut MachineView) {
    m.annotations
        .insert(keys::capi::DELETE_MACHINE.into(), "true".into());
    m.annotations
        .insert(keys::ours::DELETE_REQUESTED.into(), "claim".into());
}

#[test]
fn delete_annotates_the_chosen_machine_and_lowers_replicas() {
    let ms = vec![machine("a", 0), machine("b", 0), machine("c", 0)];
    let p = del(3, 0, &ms, &[key("b")]);
    assert_eq!(p.annotate, vec![key("b")]);
    assert_eq!(p.scale_to, Some(2));
    assert_eq!(p.outcomes[&key("b")], DeleteOutcome::Requested);

    // Crash after the annotation, before the scale write: the re-run lowers.
    let mut ms2 = ms.clone();
    annotate(&mut ms2[1]);
    let p = del(3, 0, &ms2, &[key("b")]);
    assert!(p.annotate.is_empty());
    assert_eq!(p.scale_to, Some(2));
    // After the scale write: nothing more.
    let p = del(2, 0, &ms2, &[key("b")]);
    assert!(p.annotate.is_empty());
    assert_eq!(p.scale_to, None);
    assert_eq!(p.outcomes[&key("b")], DeleteOutcome::Requested);
}

#[test]
fn delete_respects_min_size() {
    let ms = vec![machine("a", 0), machine("b", 0)];
    let p = del(2, 2, &ms, &[key("a")]);
    assert!(p.annotate.is_empty());
    assert_eq!(p.scale_to, None);
    assert_eq!(
        p.outcomes[&key("a")],
        DeleteOutcome::Refused(DeleteRefusal::BelowMinSize { min: 2 })
    );
    let p = del(2, 1, &ms, &[key("a"), key("b")]);
    assert_eq!(p.annotate, vec![key("a")]);
    assert_eq!(p.scale_to, Some(1));
    assert!(matches!(p.outcomes[&key("b")], DeleteOutcome::Refused(_)));
    // Min rose after our annotation was written but before the scale write: roll back.
    let mut ms2 = ms.clone();
    annotate(&mut ms2[0]);
    let p = del(2, 2, &ms2, &[]);
    assert_eq!(p.rollback, vec![key("a")]);
    assert_eq!(p.scale_to, None);
}

#[test]
fn delete_skips_rollouts_and_pending_scale_ups() {
    let mut ms = vec![machine("a", 0), machine("b", 0)];
    ms[1]
        .labels
        .insert(keys::capi::SET_NAME.into(), "md-new".into());
    let p = del(2, 0, &ms, &[key("a")]);
    assert_eq!(
        p.outcomes[&key("a")],
        DeleteOutcome::Refused(DeleteRefusal::MidRollout)
    );
    let ms = vec![machine("a", 0)];
    let p = del(2, 0, &ms, &[key("a")]);
    assert_eq!(
        p.outcomes[&key("a")],
        DeleteOutcome::Refused(DeleteRefusal::ScaleUpInProgress)
    );
    let p = del(1, 0, &ms, &[key("zzz")]);
    assert_eq!(p.outcomes[&key("zzz")], DeleteOutcome::Gone);
}

// ---- property tests: idempotency over random worlds ----

#[derive(Debug, Clone)]
struct World {
    replicas: i32,
    machines: Vec<MachineView>,
    claims: Vec<ClaimView>,
}

fn world() -> impl Strategy<Value = World> {
    (
        0i32..8,
        proptest::collection::vec((0u8..6, any::<bool>()), 0..10),
        proptest::collection::vec(0u8..3, 0..12),
    )
        .prop_map(|(extra, ms, cs)| {
            let mut machines = Vec::new();
            let mut claims = Vec::new();
            for (i, (state, has_pid)) in ms.into_iter().enumerate() {
                let mut m = machine(&format!("m{i}"), i as i64);
                if has_pid {
                    m.provider_id = Some(format!("test:///m{i}"));
                }
                match state {
                    0 => {}
                    1 => {
                        // bound to a claim that exists
                        let name = format!("b{i}");
                        bind(&mut m, &name);
                        let mut c = claim(&name, i as i64);
                        c.machine = Some(m.key());
                        claims.push(c);
                    }
                    2 => m.failure = Some("boom".into()),
                    3 => m.deleting = true,
                    4 => {
                        m.annotations
                            .insert(keys::capi::DELETE_MACHINE.into(), "yes".into());
                    }
                    _ => {
                        // labelled, claim annotation missing (crash mid-binding)
                        let name = format!("h{i}");
                        bind(&mut m, &name);
                        claims.push(claim(&name, i as i64));
                    }
                }
                machines.push(m);
            }
            for (i, state) in cs.into_iter().enumerate() {
                let mut c = claim(&format!("p{i}"), 100 + i as i64);
                if state == 2 {
                    c.deleting = true;
                }
                if state == 1 {
                    c.target = Some(ResourceId::new(
                        ResourceKind::MachineDeployment,
                        "ns",
                        "other",
                    ));
                }
                claims.push(c);
            }
            let non_deleting = machines.iter().filter(|m| !m.deleting).count() as i32;
            World {
                replicas: non_deleting + extra - 3,
                machines,
                claims,
            }
        })
}

proptest! {
    /// Re-running the plan after its writes never raises again, and across a whole run
    /// (plan, write, crash, CAPI creates Machines, plan again...) the total raise never
    /// exceeds the number of claims that needed a Machine.
    #[test]
    fn launch_never_raises_twice(mut w in world()) {
        w.replicas = w.replicas.max(0);
        let start = w.replicas;
        let needing = {
            let p = launch(w.replicas, &w.machines, &w.claims);
            p.counts.pending
        };
        let mut next = 0;
        for round in 0..4 {
            let p = launch(w.replicas, &w.machines, &w.claims);
            let before = w.replicas;
            apply_launch(&p, &mut w.replicas, &mut w.machines, &mut w.claims);
            // Immediately re-planning on the written state: no further raise.
            let again = launch(w.replicas, &w.machines, &w.claims);
            prop_assert_eq!(again.scale_to, None, "round {} raised twice: {:?}", round, again.counts);
            prop_assert!(again.bind.is_empty() || p.scale_to.is_none() || before == w.replicas);
            capi_reconcile(w.replicas, &mut w.machines, &mut next);
        }
        prop_assert!(i64::from(w.replicas - start) <= needing,
            "raised {} for {} pending claims", w.replicas - start, needing);
    }

    /// The delete plan is idempotent, never goes below min, and CAPI then deletes exactly
    /// the requested Machines.
    #[test]
    fn delete_is_idempotent_and_exact(
        n in 1usize..8,
        min in 0i64..5,
        picks in proptest::collection::vec(0usize..8, 0..4),
        crash_before_scale in any::<bool>(),
    ) {
        let mut machines: Vec<MachineView> = (0..n).map(|i| machine(&format!("m{i}"), i as i64)).collect();
        let mut replicas = n as i32;
        let targets: Vec<MachineKey> = picks.iter().filter(|p| **p < n).map(|p| key(&format!("m{p}"))).collect();
        let p = del(replicas, min, &machines, &targets);
        for k in &p.annotate {
            annotate(machines.iter_mut().find(|m| m.key() == *k).unwrap());
        }
        if !crash_before_scale && let Some(to) = p.scale_to {
            replicas = to;
        }
        // Re-run (after a crash, or just again).
        let p2 = del(replicas, min, &machines, &targets);
        prop_assert!(p2.annotate.is_empty());
        if let Some(to) = p2.scale_to {
            replicas = to;
        }
        prop_assert!(i64::from(replicas) >= min.min(n as i64));
        let p3 = del(replicas, min, &machines, &targets);
        prop_assert_eq!(p3.scale_to, None);
        let mut next = 0;
        capi_reconcile(replicas, &mut machines, &mut next);
        for (k, outcome) in &p3.outcomes {
            let m = machines.iter().find(|m| m.key() == *k).unwrap();
            prop_assert_eq!(m.deleting, *outcome == DeleteOutcome::Requested, "{}", k);
        }
        // Nothing else was deleted.
        let deleted = machines.iter().filter(|m| m.deleting).count();
        let requested = p3.outcomes.values().filter(|o| **o == DeleteOutcome::Requested).count();
        prop_assert_eq!(deleted, requested);
    }
}
