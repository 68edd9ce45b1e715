//! Generators shaped by how workloads live, not by what they request: services that grow by
//! day and shrink by night (`diurnal`), waves of batch jobs (`batch`) and long-lived
//! deployments replaced by rolling updates (`rollout`).
//!
//! `mixed` and `constrained` draw each deployment's arrival and life independently; these
//! three add the patterns clusters show that those do not: a cluster that doubles and halves
//! on a schedule, bursts of pods that all end within minutes of each other, and replicas
//! replaced one by one while the deployment itself stays. They were written after the
//! project's rules were measured on the other generators, to test them on shapes they were
//! not tuned on (`docs/simulator.md`, round 23). Same catalog, NodePool and daemonset as
//! `mixed`; the pod count is a target the last group may overshoot by a few pods.

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::api::core::v1::{Affinity, PodAffinityTerm, PodAntiAffinity};

use super::{group, q, sample_cluster, seeded_rng, selector};
use crate::scenario::{OwnerKind, PodGroup, Scenario};
use kcapi_workloads::Rng;

/// Service shapes (mCPU, MiB): small web and API pods to large memory-heavy ones.
const SERVICE_SHAPES: [(i64, i64); 11] = [
    (250, 512),
    (500, 1024),
    (500, 2048),
    (1000, 2048),
    (1000, 4096),
    (2000, 4096),
    (2000, 8192),
    (4000, 8192),
    (4000, 16384),
    (1000, 8192),
    (3000, 6144),
];

/// Batch job shapes (mCPU, MiB).
const JOB_SHAPES: [(i64, i64); 6] = [
    (500, 1024),
    (1000, 2048),
    (2000, 4096),
    (2000, 8192),
    (4000, 8192),
    (8000, 16384),
];

fn uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + rng.f64() * (hi - lo)
}

fn shape(rng: &mut Rng, shapes: &[(i64, i64)]) -> (i64, i64) {
    shapes
        .get(rng.below(shapes.len()))
        .copied()
        .unwrap_or((1000, 2048))
}

/// A group of `count` pods of `app`, the first arriving at `at`, one every `every` seconds,
/// each living `life` seconds (`None`: to the end).
fn pods_of(
    name: String,
    app: &str,
    count: usize,
    (cpu, mem): (i64, i64),
    at: f64,
    every: f64,
    life: Option<f64>,
) -> PodGroup {
    let mut g = group(&name, count as u32, q(cpu, mem));
    g.labels.insert("app".into(), app.to_string());
    g.arrive_at = at.max(0.0) as i64;
    g.arrive_every_seconds = every.max(0.0) as i64;
    g.duration_seconds = life.map(|l| l.max(60.0) as i64);
    g
}

fn zone_spread(app: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: 1,
        topology_key: "topology.kubernetes.io/zone".into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: Some(selector(app)),
        ..Default::default()
    }
}

fn one_per_node(app: &str) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(selector(app)),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            }]),
            preferred_during_scheduling_ignored_during_execution: None,
        }),
        ..Default::default()
    }
}

/// The groups, sorted by arrival, on `mixed`'s cluster, named `<kind>-<pods>-seed<seed>`.
fn scenario(
    kind: &str,
    seed: u64,
    description: &str,
    horizon: i64,
    mut groups: Vec<PodGroup>,
) -> Scenario {
    let total: usize = groups.iter().map(|g| g.count as usize).sum();
    groups.sort_by(|a, b| a.arrive_at.cmp(&b.arrive_at).then(a.name.cmp(&b.name)));
    sample_cluster(
        format!("{kind}-{total}-seed{seed}"),
        description,
        horizon + 3600,
        groups,
    )
}

/// Services with a base that always runs and a daytime bump: over a 12 h "day", each adds
/// 4-30 replicas over 1-3 h starting between 1.5 and 3.5 h and removes them over 1-2.5 h
/// starting between 7.5 and 9.5 h, in the order they came. 30% of services spread over zones.
pub fn diurnal(seed: u64, pods: usize) -> Scenario {
    let mut rng = seeded_rng(seed ^ 0xD1A5_0000);
    let horizon = 12 * 3600;
    let mut groups = Vec::new();
    let mut made = 0usize;
    let mut s = 0;
    while made < pods {
        let size = shape(&mut rng, &SERVICE_SHAPES);
        let app = format!("svc-{s}");
        let spread = rng.f64() < 0.3;
        let base = (1 + rng.below(6)).min(pods - made);
        let mut mine = vec![pods_of(
            format!("{app}-base"),
            &app,
            base,
            size,
            rng.below(300) as f64,
            5.0,
            None,
        )];
        made += base;
        let peak = (4 + rng.below(27)).min(pods - made);
        let up = uniform(&mut rng, 1.5, 3.5) * 3600.0;
        let every = uniform(&mut rng, 1.0, 3.0) * 3600.0 / peak.max(1) as f64;
        let down = uniform(&mut rng, 7.5, 9.5) * 3600.0;
        let leave_every = uniform(&mut rng, 1.0, 2.5) * 3600.0 / peak.max(1) as f64;
        let mut i = 0;
        while i < peak {
            let k = (1 + rng.below(4)).min(peak - i);
            let at = up + i as f64 * every;
            let gone = down + i as f64 * leave_every;
            mine.push(pods_of(
                format!("{app}-day-{i}"),
                &app,
                k,
                size,
                at,
                every,
                Some(gone - at),
            ));
            i += k;
        }
        made += peak;
        if spread {
            for g in &mut mine {
                g.topology_spread_constraints.push(zone_spread(&app));
            }
        }
        groups.extend(mine);
        s += 1;
    }
    scenario(
        "diurnal",
        seed,
        "Services with a base and a daytime bump: the cluster grows from hour 1.5 and shrinks from hour 7.5 of a 12 h day; 30% of services spread over zones; the built-in EC2-like catalog.",
        horizon,
        groups,
    )
}

/// Waves of batch jobs over 8 h: every 15-45 minutes one to three jobs of 10-80 pods each
/// arrive within two minutes and run 5-45 minutes (each job's pods alike, ±30%), beside a
/// steady service of 2-8 replicas (spread over zones half the time). The jobs' pods are a
/// `Job`'s: their minutes of work count from when they run, and an eviction loses them.
pub fn batch(seed: u64, pods: usize) -> Scenario {
    let mut rng = seeded_rng(seed ^ 0xBA7C_0000);
    let horizon = 8 * 3600;
    let mut groups = Vec::new();
    let steady = 2 + rng.below(7);
    let mut service = pods_of(
        "steady".into(),
        "steady",
        steady.min(pods),
        shape(&mut rng, &SERVICE_SHAPES),
        0.0,
        10.0,
        None,
    );
    if rng.f64() < 0.5 {
        service
            .topology_spread_constraints
            .push(zone_spread("steady"));
    }
    let mut made = service.count as usize;
    groups.push(service);
    let mut t = uniform(&mut rng, 300.0, 1200.0);
    let mut wave = 0;
    while made < pods {
        if t >= (horizon - 3600) as f64 {
            // More pods than 7 h of waves hold: later waves overlay the earlier hours.
            t -= (horizon - 4200) as f64;
        }
        for j in 0..1 + rng.below(3) {
            if made >= pods {
                break;
            }
            let size = shape(&mut rng, &JOB_SHAPES);
            let n = (10 + rng.below(71)).min(pods - made);
            let minutes = [5.0, 10.0, 15.0, 20.0, 30.0, 45.0];
            let life = minutes
                .get(rng.below(minutes.len()))
                .copied()
                .unwrap_or(10.0)
                * 60.0
                * uniform(&mut rng, 0.7, 1.3);
            let every = [0.0, 1.0, 2.0, 5.0]
                .get(rng.below(4))
                .copied()
                .unwrap_or(0.0);
            let app = format!("job-{wave}-{j}");
            let mut job = pods_of(
                app.clone(),
                &app,
                n,
                size,
                t + uniform(&mut rng, 0.0, 120.0),
                every,
                Some(life),
            );
            job.owner_kind = Some(OwnerKind::Job);
            groups.push(job);
            made += n;
        }
        wave += 1;
        t += uniform(&mut rng, 15.0, 45.0) * 60.0;
    }
    scenario(
        "batch",
        seed,
        "Waves of batch Jobs (10-80 pods each, running 5-45 minutes) every 15-45 minutes beside a steady service, over 8 h on the built-in EC2-like catalog.",
        horizon,
        groups,
    )
}

/// Long-lived deployments of 3-25 replicas replaced by rolling updates (one surge pod at a
/// time, a replica every 15-60 s) every 1.5-4 hours over 10 h; 30% spread over zones, and
/// some of the small ones keep one replica per node (required hostname anti-affinity, which
/// also holds between the old and the new version, as in a real Deployment).
pub fn rollout(seed: u64, pods: usize) -> Scenario {
    let mut rng = seeded_rng(seed ^ 0x2011_0000);
    let horizon = 10 * 3600;
    let mut groups = Vec::new();
    let mut made = 0usize;
    let mut d = 0;
    while made < pods {
        let size = shape(&mut rng, &SERVICE_SHAPES);
        let n = 3 + rng.below(23);
        let spread = rng.f64() < 0.3;
        let anti = !spread && n <= 12 && rng.f64() < 0.15;
        let app = format!("deploy-{d}");
        let step = uniform(&mut rng, 15.0, 60.0);
        let mut starts = vec![uniform(&mut rng, 0.0, 600.0)];
        while let Some(&last) = starts.last() {
            let next = last + uniform(&mut rng, 1.5, 4.0) * 3600.0;
            if next >= horizon as f64 {
                break;
            }
            starts.push(next);
        }
        for (v, start) in starts.iter().enumerate() {
            if made >= pods {
                break;
            }
            let n = n.min(pods - made);
            // Replica i of this version leaves once replica i of the next is up: a surge of one.
            let life = starts.get(v + 1).map(|next| next - start + step);
            let mut g = pods_of(format!("{app}-v{v}"), &app, n, size, *start, step, life);
            if spread {
                g.topology_spread_constraints.push(zone_spread(&app));
            }
            if anti {
                g.affinity = Some(one_per_node(&app));
            }
            groups.push(g);
            made += n;
        }
        d += 1;
    }
    scenario(
        "rollout",
        seed,
        "Long-lived deployments replaced by rolling updates every 1.5-4 h over 10 h; 30% spread over zones, a few one replica per node; the built-in EC2-like catalog.",
        horizon,
        groups,
    )
}
