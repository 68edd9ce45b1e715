//! Built-in workload generators. Each returns a complete, self-contained scenario (catalog,
//! NodePool, workload), so `karpenter-capi-sim generate <kind>` writes a file that runs as is,
//! and a scenario's `workload.generate` reuses the same code with a per-run seed.
//!
//! Karpenter's benchmark shapes (the five "diverse" groups, their request sets, the seeded
//! RNG) come from `kcapi-workloads`, shared with the benches; this module only writes them as
//! a scenario (Kubernetes-shaped pod groups, a NodePool, the built-in catalog).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, PodAffinityTerm, PodAntiAffinity, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use karpenter_api::wellknown::{NODECLASS_GROUP, NODECLASS_KIND};
use karpenter_api::{NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassReference, NodePoolSpec};
use kcapi_workloads::Rng;
use kcapi_workloads::karpenter::{DiverseGroup, diverse_deployments};

use crate::convert::NodePoolV1;
use crate::error::{Result, SimError};
use crate::scenario::{
    BuiltinCatalog, CatalogSpec, DaemonSetSpec, PodGroup, Scenario, Settings, Workload,
};

mod lifecycles;

pub use lifecycles::{batch, diurnal, rollout};

/// Generator names, for help texts and errors.
pub const KINDS: &[&str] = &[
    "karpenter-benchmark",
    "mixed",
    "constrained",
    "diurnal",
    "batch",
    "rollout",
];

pub fn generate(kind: &str, seed: u64, pods: Option<usize>) -> Result<Scenario> {
    match kind {
        "karpenter-benchmark" => Ok(karpenter_benchmark(seed, pods.unwrap_or(1000))),
        "mixed" => Ok(mixed(seed, pods.unwrap_or(600))),
        "constrained" => Ok(constrained(seed, pods.unwrap_or(2000))),
        "diurnal" => Ok(diurnal(seed, pods.unwrap_or(300))),
        "batch" => Ok(batch(seed, pods.unwrap_or(1200))),
        "rollout" => Ok(rollout(seed, pods.unwrap_or(500))),
        other => Err(SimError::UnknownGenerator(
            other.to_string(),
            KINDS.join(", "),
        )),
    }
}

/// The generators' RNG for `seed`. They have always mixed the seed into SplitMix64's state
/// this way; kept so `generate --seed N` writes the scenarios it wrote before.
fn seeded_rng(seed: u64) -> Rng {
    Rng::new(seed ^ 0x9E37_79B9_7F4A_7C15)
}

/// An element of a constant, non-empty list (the default is never reached).
fn pick(rng: &mut Rng, xs: &[i64]) -> i64 {
    rng.pick(xs).copied().unwrap_or_default()
}

/// One NodePool `default` that may use every type, as a user would write it: upstream's
/// required `nodeClassRef` points at our ClusterAPINodeClass (the simulator does not read it).
fn default_nodepool() -> NodePoolV1 {
    NodePoolV1::new(
        "default",
        NodePoolSpec {
            template: NodeClaimTemplate {
                metadata: None,
                spec: NodeClaimTemplateSpec {
                    expire_after: None,
                    node_class_ref: NodeClassReference {
                        group: NODECLASS_GROUP.into(),
                        kind: NODECLASS_KIND.into(),
                        name: "default".into(),
                    },
                    requirements: Vec::new(),
                    startup_taints: None,
                    taints: None,
                    termination_grace_period: None,
                },
            },
            disruption: None,
            limits: None,
            replicas: None,
            weight: None,
        },
    )
}

fn q(cpu_milli: i64, mem_mib: i64) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("cpu".to_string(), format!("{cpu_milli}m")),
        ("memory".to_string(), format!("{mem_mib}Mi")),
    ])
}

fn selector(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
        match_expressions: None,
    }
}

fn group(name: &str, count: u32, requests: BTreeMap<String, String>) -> PodGroup {
    PodGroup {
        name: name.to_string(),
        namespace: "default".into(),
        count,
        requests,
        arrive_at: 0,
        arrive_every_seconds: 0,
        duration_seconds: None,
        owner_kind: None,
        labels: BTreeMap::from([("app".to_string(), name.to_string())]),
        annotations: BTreeMap::new(),
        node_selector: BTreeMap::new(),
        tolerations: Vec::new(),
        affinity: None,
        topology_spread_constraints: Vec::new(),
        priority: 0,
        disruption_budget: None,
    }
}

/// Karpenter's scheduling benchmark: the 400-type catalog and "diverse" pods in five equal
/// groups (generic, zone spread, hostname spread, zone self-affinity, hostname
/// anti-affinity) as deployments of up to ten, requests drawn from Karpenter's small sets.
/// All pods arrive at 0; the odd-numbered batches of each group leave after an hour so
/// consolidation has work.
pub fn karpenter_benchmark(seed: u64, pods: usize) -> Scenario {
    let mut rng = seeded_rng(seed);
    let mut groups = Vec::new();
    for d in diverse_deployments(&mut rng, pods) {
        let kind = d.group.name();
        let name = format!("{kind}-{}", d.index);
        let mut g = group(
            &name,
            d.replicas as u32,
            q(d.requests.cpu_milli, d.requests.memory_mib),
        );
        // Spread constraints and affinity select the whole kind, as in Karpenter's test.
        g.labels = BTreeMap::from([("app".to_string(), kind.to_string())]);
        let key = d.group.topology_key().unwrap_or_default().to_string();
        match d.group {
            DiverseGroup::ZoneSpread | DiverseGroup::HostnameSpread => {
                g.topology_spread_constraints
                    .push(TopologySpreadConstraint {
                        max_skew: 1,
                        topology_key: key,
                        when_unsatisfiable: "DoNotSchedule".into(),
                        label_selector: Some(selector(kind)),
                        ..Default::default()
                    });
            }
            DiverseGroup::ZoneAffinity => {
                g.affinity = Some(Affinity {
                    pod_affinity: Some(k8s_openapi::api::core::v1::PodAffinity {
                        required_during_scheduling_ignored_during_execution: Some(vec![
                            PodAffinityTerm {
                                label_selector: Some(selector(kind)),
                                topology_key: key,
                                ..Default::default()
                            },
                        ]),
                        preferred_during_scheduling_ignored_during_execution: None,
                    }),
                    ..Default::default()
                });
            }
            DiverseGroup::HostnameAntiAffinity => {
                // Each batch avoids itself only, so the group needs one node per pod of a
                // batch rather than one node per pod overall.
                g.labels.insert("batch".into(), name.clone());
                g.affinity = Some(Affinity {
                    pod_anti_affinity: Some(PodAntiAffinity {
                        required_during_scheduling_ignored_during_execution: Some(vec![
                            PodAffinityTerm {
                                label_selector: Some(LabelSelector {
                                    match_labels: Some(BTreeMap::from([(
                                        "batch".to_string(),
                                        name.clone(),
                                    )])),
                                    match_expressions: None,
                                }),
                                topology_key: key,
                                ..Default::default()
                            },
                        ]),
                        preferred_during_scheduling_ignored_during_execution: None,
                    }),
                    ..Default::default()
                });
            }
            DiverseGroup::Generic => {}
        }
        if d.index % 2 == 1 {
            g.duration_seconds = Some(3600);
        }
        groups.push(g);
    }
    Scenario {
        name: Some(format!("karpenter-benchmark-{pods}-seed{seed}")),
        description: Some(
            "Karpenter's scheduling benchmark shapes: 400 instance types (i+1 vCPU, 2(i+1) GiB) and the five diverse pod groups; half the batches leave after 1 h."
                .into(),
        ),
        settings: Settings {
            end_seconds: Some(2 * 3600),
            ..Default::default()
        },
        catalog: CatalogSpec {
            builtin: Some(BuiltinCatalog::KarpenterBenchmark),
            ..Default::default()
        },
        zones: vec!["zone-a".into(), "zone-b".into(), "zone-c".into()],
        capacity_types: vec![crate::scenario::CapacityTypeName::OnDemand],
        node_pools: vec![default_nodepool()],
        daemon_sets: Vec::new(),
        existing_nodes: Vec::new(),
        pod_disruption_budgets: Vec::new(),
        workload: Workload {
            pods: groups,
            ..Default::default()
        },
        strategies: Vec::new(),
    }
}

/// A mixed CPU- and memory-heavy workload over eight hours: deployments of 1-8 replicas
/// arrive with a day-like rate (quiet, busy, quiet) and live an exponential time (mean 90
/// min), so the cluster grows, changes shape and shrinks. The catalog is the built-in EC2-like
/// sample, so cost-aware choices between general, compute and memory families matter.
pub fn mixed(seed: u64, pods: usize) -> Scenario {
    let mut rng = seeded_rng(seed);
    let horizon = 8 * 3600;
    let mut groups = Vec::new();
    let mut made = 0usize;
    let mut i = 0;
    while made < pods {
        // Arrival time with a bump in the middle of the run: rejection-sample a rate curve.
        let at = loop {
            let t = rng.f64() * horizon as f64 * 0.85;
            let x = t / horizon as f64;
            let rate = 0.25 + (std::f64::consts::PI * x / 0.85).sin().powi(2);
            if rng.f64() * 1.25 < rate {
                break t as i64;
            }
        };
        let replicas = (1 + rng.below(8)).min(pods - made);
        let (kind, cpu, mem) = match rng.below(3) {
            0 => {
                let c = pick(&mut rng, &[500, 1000, 2000, 3000, 4000]);
                (
                    "cpu",
                    c,
                    c * pick(&mut rng, &[1, 2]) / 2 * 1024 / 1000 + 256,
                )
            }
            1 => {
                let c = pick(&mut rng, &[250, 500, 1000]);
                ("mem", c, pick(&mut rng, &[4096, 6144, 8192, 12288, 16384]))
            }
            _ => {
                let c = pick(&mut rng, &[250, 500, 1000, 2000]);
                ("web", c, c * 4 * 1024 / 1000)
            }
        };
        let mut g = group(&format!("{kind}-{i}"), replicas as u32, q(cpu, mem));
        g.arrive_at = at;
        g.arrive_every_seconds = rng.below(20) as i64;
        let life = (rng.exp(5400.0) as i64).clamp(300, horizon);
        g.duration_seconds = if at + life < horizon {
            Some(life)
        } else {
            None
        };
        groups.push(g);
        made += replicas;
        i += 1;
    }
    groups.sort_by(|a, b| a.arrive_at.cmp(&b.arrive_at).then(a.name.cmp(&b.name)));
    sample_cluster(
        format!("mixed-{pods}-seed{seed}"),
        "Mixed CPU-heavy, memory-heavy and balanced deployments arriving over 8 h on the built-in EC2-like catalog, 3 zones, on-demand.",
        horizon + 1800,
        groups,
    )
}

/// `groups` on the cluster `mixed` and the lifecycle generators share: the built-in EC2-like
/// catalog in three zones, on-demand, one NodePool that may use every type, a node agent
/// daemonset; the run ends at `end_seconds`.
fn sample_cluster(
    name: String,
    description: &str,
    end_seconds: i64,
    groups: Vec<PodGroup>,
) -> Scenario {
    Scenario {
        name: Some(name),
        description: Some(description.into()),
        settings: Settings {
            end_seconds: Some(end_seconds),
            ..Default::default()
        },
        catalog: CatalogSpec {
            builtin: Some(BuiltinCatalog::Ec2Sample),
            ..Default::default()
        },
        zones: vec!["zone-a".into(), "zone-b".into(), "zone-c".into()],
        capacity_types: vec![crate::scenario::CapacityTypeName::OnDemand],
        node_pools: vec![default_nodepool()],
        daemon_sets: vec![DaemonSetSpec {
            name: "node-agent".into(),
            namespace: "kube-system".into(),
            requests: q(100, 128),
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
        }],
        existing_nodes: Vec::new(),
        pod_disruption_budgets: Vec::new(),
        workload: Workload {
            pods: groups,
            ..Default::default()
        },
        strategies: Vec::new(),
    }
}

/// `mixed` with the constraints real clusters add, so decisions are measured where packing is
/// not free: a quarter of the deployments spread over zones (`maxSkew 1`, `DoNotSchedule`),
/// a sixth keep their replicas on distinct nodes (required hostname anti-affinity), a tenth
/// need one GPU (the catalog gains three GPU sizes in every zone), over 12 h instead of 8.
/// The draws use their own stream, so the same seed gives `mixed`'s arrivals and shapes.
pub fn constrained(seed: u64, pods: usize) -> Scenario {
    let mut s = mixed(seed, pods);
    let horizon = 12 * 3600;
    let mut rng = Rng::new(seed ^ 0xC0FF_EE00_D15E_A5E5);
    for g in &mut s.workload.pods {
        // Stretch mixed's 8 h arrivals and lives over 12 h.
        g.arrive_at = g.arrive_at * 3 / 2;
        g.duration_seconds = g.duration_seconds.map(|d| d * 3 / 2);
        let app = g.name.clone();
        let draw = rng.f64();
        if draw < 0.25 {
            g.topology_spread_constraints
                .push(TopologySpreadConstraint {
                    max_skew: 1,
                    topology_key: "topology.kubernetes.io/zone".into(),
                    when_unsatisfiable: "DoNotSchedule".into(),
                    label_selector: Some(selector(&app)),
                    ..Default::default()
                });
        } else if draw < 0.42 {
            g.affinity = Some(Affinity {
                pod_anti_affinity: Some(PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            label_selector: Some(selector(&app)),
                            topology_key: "kubernetes.io/hostname".into(),
                            ..Default::default()
                        },
                    ]),
                    preferred_during_scheduling_ignored_during_execution: None,
                }),
                ..Default::default()
            });
        } else if draw < 0.52 {
            g.requests.insert("nvidia.com/gpu".into(), "1".into());
        }
    }
    s.catalog.types = [(1, 8, 0.75), (4, 32, 2.9), (8, 64, 5.6)]
        .iter()
        .map(|&(gpu, vcpu, price)| crate::scenario::InstanceTypeSpec {
            name: format!("gpu1.{gpu}x"),
            vcpu: vcpu as f64,
            memory_mib: vcpu * 4 * 1024,
            gpu,
            arch: "amd64".into(),
            price,
            spot_price: None,
            zones: None,
            labels: BTreeMap::new(),
        })
        .collect();
    s.settings.end_seconds = Some(horizon + 1800);
    s.name = Some(format!("constrained-{pods}-seed{seed}"));
    s.description = Some(
        "mixed over 12 h with zone spread (25% of deployments), hostname anti-affinity (17%) and one-GPU pods (10%); three GPU sizes added to the built-in EC2-like catalog."
            .into(),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(s: &Scenario) -> usize {
        s.workload.pods.iter().map(|g| g.count as usize).sum()
    }

    #[test]
    fn sizes_and_determinism() -> Result<()> {
        let a = generate("mixed", 3, Some(200))?;
        let b = generate("mixed", 3, Some(200))?;
        assert_eq!(a, b);
        assert_eq!(total(&a), 200);
        let c = generate("mixed", 4, Some(200))?;
        assert_ne!(a, c);
        let k = generate("karpenter-benchmark", 1, Some(500))?;
        assert_eq!(total(&k), 500);
        assert!(generate("nope", 1, None).is_err());
        let c1 = generate("constrained", 2, Some(400))?;
        assert_eq!(c1, generate("constrained", 2, Some(400))?);
        assert_eq!(total(&c1), 400);
        let groups = &c1.workload.pods;
        assert!(
            groups
                .iter()
                .any(|g| !g.topology_spread_constraints.is_empty())
        );
        assert!(groups.iter().any(|g| g.affinity.is_some()));
        assert!(
            groups
                .iter()
                .any(|g| g.requests.contains_key("nvidia.com/gpu"))
        );
        assert!(c1.catalog.types.iter().any(|t| t.gpu > 0));
        Ok(())
    }

    /// The lifecycle generators: deterministic, the pod target reached (the last group may
    /// overshoot only by what it was cut to), and each with the pattern it is named for.
    #[test]
    fn lifecycle_generators_make_their_patterns() -> Result<()> {
        for kind in ["diurnal", "batch", "rollout"] {
            let a = generate(kind, 5, Some(400))?;
            assert_eq!(
                a,
                generate(kind, 5, Some(400))?,
                "{kind} is not deterministic"
            );
            assert_ne!(a, generate(kind, 6, Some(400))?, "{kind} ignores its seed");
            assert_eq!(total(&a), 400, "{kind}");
            let name = a.name.clone().unwrap_or_default();
            assert!(name.starts_with(&format!("{kind}-400-seed5")), "{name}");
        }
        // Diurnal: a base that never leaves, and a bump that arrives after 1.5 h and leaves
        // after 7.5 h.
        let d = generate("diurnal", 1, Some(300))?;
        let groups = &d.workload.pods;
        assert!(
            groups
                .iter()
                .any(|g| g.duration_seconds.is_none() && g.arrive_at < 300)
        );
        assert!(
            groups
                .iter()
                .filter(|g| g.duration_seconds.is_some())
                .all(|g| {
                    let gone = g.arrive_at + g.duration_seconds.unwrap_or(0);
                    g.arrive_at >= 5400 && gone >= 27_000
                })
        );
        // Over a few seeds the constraints they are named for appear: zone spread in
        // `diurnal` and `rollout`, one replica per node in `rollout`.
        let many = |kind: &str| -> Result<Vec<PodGroup>> {
            let mut all = Vec::new();
            for seed in 1..=6 {
                all.extend(generate(kind, seed, None)?.workload.pods);
            }
            Ok(all)
        };
        let rolled = many("rollout")?;
        assert!(
            many("diurnal")?
                .iter()
                .any(|g| !g.topology_spread_constraints.is_empty())
        );
        assert!(
            rolled
                .iter()
                .any(|g| !g.topology_spread_constraints.is_empty())
        );
        assert!(rolled.iter().any(|g| g.affinity.is_some()));
        // Batch: jobs end within an hour of arriving.
        let b = generate("batch", 1, Some(600))?;
        assert!(
            b.workload
                .pods
                .iter()
                .filter(|g| g.name.starts_with("job-"))
                .all(|g| g.duration_seconds.is_some_and(|d| (60..=3600).contains(&d)))
        );
        // Rollout: every version but the last of a deployment leaves as the next arrives,
        // and its replicas share the deployment's label across versions.
        let r = generate("rollout", 1, Some(500))?;
        let v1: Vec<&PodGroup> = r
            .workload
            .pods
            .iter()
            .filter(|g| g.name.ends_with("-v1"))
            .collect();
        assert!(!v1.is_empty());
        for g in v1 {
            let app = g.labels.get("app").cloned().unwrap_or_default();
            let v0 = r
                .workload
                .pods
                .iter()
                .find(|x| x.name == format!("{app}-v0"))
                .expect("version 0 of a rolled deployment");
            assert_eq!(v0.labels.get("app"), Some(&app));
            let gone = v0.arrive_at + v0.duration_seconds.unwrap_or(i64::MAX / 2);
            assert!(
                gone >= g.arrive_at && gone <= g.arrive_at + 61,
                "{} leaves at {gone}",
                v0.name
            );
        }
        Ok(())
    }
}
