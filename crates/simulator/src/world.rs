//! A scenario compiled into the core's model: instance types with offerings, core NodePools,
//! daemonsets, existing nodes and the pods' arrivals, for one seed.

use std::collections::BTreeMap;

use provisioner_core as core;

use crate::catalog;
use crate::convert;
use crate::error::{Result, SimError};
use crate::generators;
use crate::importers::{self, Arrival};
use crate::pdb::{self, GroupBudget, SimPdb};
use crate::scenario::{LoadedScenario, OwnerKind, Settings};

#[derive(Debug, Clone)]
pub struct World {
    pub name: String,
    pub settings: Settings,
    pub instance_types: Vec<core::InstanceType>,
    pub nodepools: Vec<core::NodePool>,
    pub daemonsets: Vec<core::DaemonSet>,
    pub existing_nodes: Vec<core::Node>,
    /// Sorted by arrival time, then name.
    pub arrivals: Vec<Arrival>,
    /// Importer notes (objects left out and why).
    pub problems: Vec<String>,
    /// PodDisruptionBudgets: the scenario's, its pod groups' and a kubectl snapshot's.
    pub pdbs: Vec<SimPdb>,
}

impl World {
    /// Last arrival or departure.
    pub fn last_event(&self) -> i64 {
        self.arrivals
            .iter()
            .map(|a| a.leave.unwrap_or(a.at).max(a.at))
            .max()
            .unwrap_or(0)
    }

    /// When the simulation stops.
    pub fn end(&self) -> i64 {
        self.settings
            .end_seconds
            .unwrap_or_else(|| self.last_event() + 3600)
    }
}

fn ds_from_spec(ls: &LoadedScenario, i: usize) -> Result<core::DaemonSet> {
    let d = &ls.scenario.daemon_sets[i];
    let field = format!("daemonSets[{i}]");
    let req = convert::resources(&d.requests, &format!("{field}.requests"))
        .map_err(|e| relocate(ls, e))?;
    let mut pod = core::Pod {
        namespace: d.namespace.clone(),
        name: d.name.clone(),
        containers: vec![req],
        node_selector: d.node_selector.clone(),
        owner_kind: Some("DaemonSet".into()),
        ..Default::default()
    };
    convert::apply_constraints(&mut pod, &d.tolerations, None, &[], &field)
        .map_err(|e| relocate(ls, e))?;
    Ok(core::DaemonSet {
        namespace: d.namespace.clone(),
        name: d.name.clone(),
        pod,
    })
}

/// Conversion errors carry a field but no file; attach the scenario's file and line.
fn relocate(ls: &LoadedScenario, e: SimError) -> SimError {
    match e {
        SimError::Invalid { field, message, .. } => ls.invalid(&field, message),
        other => other,
    }
}

/// Expand pod groups into arrivals, and their budgets (each group's own, else
/// `default_budget`) into `pdbs`.
pub fn pod_group_arrivals(
    ls: &LoadedScenario,
    groups: &[crate::scenario::PodGroup],
    field_prefix: &str,
    default_budget: Option<&GroupBudget>,
    pdbs: &mut Vec<SimPdb>,
) -> Result<Vec<Arrival>> {
    let mut out = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let field = format!("{field_prefix}[{gi}]");
        let budget = g.disruption_budget.as_ref().or(default_budget);
        let req = convert::resources(&g.requests, &format!("{field}.requests"))
            .map_err(|e| relocate(ls, e))?;
        if req.cpu_milli == 0 && req.memory == 0 && req.extended.is_empty() {
            return Err(ls.invalid(
                &format!("{field}.requests"),
                "a pod group needs at least one request (cpu, memory, ...)",
            ));
        }
        if g.duration_seconds.is_some_and(|d| d < 0)
            || g.arrive_at < 0
            || g.arrive_every_seconds < 0
        {
            return Err(ls.invalid(&field, "times must not be negative"));
        }
        let mut labels = g.labels.clone();
        labels.entry("app".into()).or_insert_with(|| g.name.clone());
        if let Some(b) = budget {
            let field = if g.disruption_budget.is_some() {
                format!("{field}.disruptionBudget")
            } else {
                "workload.disruptionBudget".into()
            };
            pdbs.push(
                SimPdb::for_group(&g.name, &g.namespace, b).map_err(|e| ls.invalid(&field, e))?,
            );
            labels.insert(pdb::GROUP_LABEL.into(), g.name.clone());
        }
        let mut template = core::Pod {
            namespace: g.namespace.clone(),
            labels: labels.into_iter().collect(),
            annotations: g.annotations.clone(),
            containers: vec![req],
            node_selector: g.node_selector.clone(),
            owner_kind: Some(
                g.owner_kind
                    .unwrap_or(OwnerKind::ReplicaSet)
                    .as_str()
                    .into(),
            ),
            priority: g.priority,
            ..Default::default()
        };
        convert::apply_constraints(
            &mut template,
            &g.tolerations,
            g.affinity.as_ref(),
            &g.topology_spread_constraints,
            &field,
        )
        .map_err(|e| relocate(ls, e))?;
        for i in 0..g.count {
            let at = g.arrive_at + g.arrive_every_seconds * i as i64;
            let mut pod = template.clone();
            pod.name = format!("{}-{i}", g.name);
            pod.created_at = at;
            out.push(Arrival {
                pod,
                at,
                leave: g.duration_seconds.map(|d| at + d),
                work_seconds: g
                    .duration_seconds
                    .filter(|_| g.owner_kind == Some(OwnerKind::Job)),
                bound_to: None,
            });
        }
    }
    Ok(out)
}

/// Compile a scenario for one seed (the seed only changes generated workloads).
pub fn compile(ls: &LoadedScenario, seed: u64) -> Result<World> {
    let s = &ls.scenario;
    let mut problems = Vec::new();
    let mut ls_eff = ls.clone();
    // A kubectl snapshot brings MachineDeployment types and NodePools along.
    let snapshot = match &s.workload.kubectl {
        Some(k) => {
            let paths: Vec<_> = k.paths.iter().map(|p| ls.resolve(p)).collect();
            let snap = importers::kubectl::load(&paths)?;
            ls_eff
                .scenario
                .catalog
                .types
                .extend(snap.instance_types.iter().cloned());
            ls_eff
                .scenario
                .node_pools
                .extend(snap.nodepools.iter().cloned());
            problems.extend(snap.problems.iter().cloned());
            Some(snap)
        }
        None => None,
    };
    let instance_types = catalog::build(&ls_eff)?;
    let mut nodepools = Vec::new();
    for (i, np) in ls_eff.scenario.node_pools.iter().enumerate() {
        nodepools
            .push(convert::nodepool(np, &format!("nodePools[{i}]")).map_err(|e| relocate(ls, e))?);
    }
    if nodepools.is_empty() {
        nodepools.push(core::NodePool {
            name: "default".into(),
            ..Default::default()
        });
    }
    let mut names = BTreeMap::new();
    for (i, np) in nodepools.iter().enumerate() {
        if names.insert(np.name.clone(), i).is_some() {
            return Err(ls.invalid(
                &format!("nodePools[{i}].metadata.name"),
                format!("NodePool `{}` is defined twice", np.name),
            ));
        }
    }
    let mut daemonsets = Vec::new();
    for i in 0..s.daemon_sets.len() {
        daemonsets.push(ds_from_spec(ls, i)?);
    }
    let mut existing_nodes = Vec::new();
    for (i, e) in s.existing_nodes.iter().enumerate() {
        let field = format!("existingNodes[{i}]");
        let it = instance_types
            .iter()
            .find(|t| t.name == e.instance_type)
            .ok_or_else(|| {
                ls.invalid(
                    &format!("{field}.instanceType"),
                    format!("`{}` is not in the catalog", e.instance_type),
                )
            })?;
        if let Some(p) = &e.node_pool
            && !names.contains_key(p)
        {
            return Err(ls.invalid(
                &format!("{field}.nodePool"),
                format!("no NodePool named `{p}`"),
            ));
        }
        let zone = e
            .zone
            .clone()
            .unwrap_or_else(|| s.zones.first().cloned().unwrap_or_default());
        let ct: core::CapacityType = e.capacity_type.map(Into::into).unwrap_or_default();
        let price = it
            .offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == ct)
            .map(|o| o.price)
            .ok_or_else(|| {
                ls.invalid(
                    &format!("{field}.zone"),
                    format!(
                        "`{}` has no {} offering in zone `{zone}`",
                        it.name,
                        ct.as_label()
                    ),
                )
            })?;
        for k in 0..e.count {
            let name = format!("{}-{k}", e.name);
            let mut labels = it.labels.clone();
            labels.extend(e.labels.clone());
            labels.insert(core::labels::INSTANCE_TYPE.into(), it.name.clone());
            labels.insert(core::labels::ZONE.into(), zone.clone());
            labels.insert(core::labels::CAPACITY_TYPE.into(), ct.as_label().into());
            labels.insert(core::labels::HOSTNAME.into(), name.clone());
            if let Some(p) = &e.node_pool {
                labels.insert(core::labels::NODEPOOL.into(), p.clone());
            }
            let mut taints = Vec::new();
            for (ti, t) in e.taints.iter().enumerate() {
                taints.push(
                    convert::taint(t, &format!("{field}.taints[{ti}]"))
                        .map_err(|e| relocate(ls, e))?,
                );
            }
            existing_nodes.push(core::Node {
                name,
                labels,
                taints,
                allocatable: catalog::allocatable(it),
                capacity: it.capacity.clone(),
                nodepool: e.node_pool.clone(),
                instance_type: Some(it.name.clone()),
                price,
                ready: true,
                initialized: true,
                ..Default::default()
            });
        }
    }
    let mut pdbs = Vec::new();
    for (i, k) in s.pod_disruption_budgets.iter().enumerate() {
        pdbs.push(
            SimPdb::from_k8s(k)
                .map_err(|e| ls.invalid(&format!("podDisruptionBudgets[{i}]"), e))?,
        );
    }
    let default_budget = s.workload.disruption_budget.as_ref();
    let mut arrivals = pod_group_arrivals(
        ls,
        &s.workload.pods,
        "workload.pods",
        default_budget,
        &mut pdbs,
    )?;
    if let Some(g) = &s.workload.generate {
        let generated = generators::generate(&g.kind, g.seed.wrapping_add(seed), g.pods)
            .map_err(|e| ls.invalid("workload.generate.kind", e.to_string()))?;
        arrivals.extend(pod_group_arrivals(
            ls,
            &generated.workload.pods,
            "workload.generate",
            default_budget,
            &mut pdbs,
        )?);
    }
    if let Some(o) = &s.workload.openb {
        arrivals.extend(importers::openb::load(&ls.resolve(&o.path), o)?);
    }
    if let Some(snap) = snapshot {
        daemonsets.extend(snap.daemonsets.iter().cloned());
        for mut n in snap.nodes {
            let it = n
                .instance_type
                .as_ref()
                .and_then(|t| instance_types.iter().find(|x| &x.name == t));
            match it {
                Some(it) => {
                    let zone = n
                        .labels
                        .get(core::labels::ZONE)
                        .cloned()
                        .unwrap_or_default();
                    n.price = it
                        .offerings
                        .iter()
                        .find(|o| o.zone == zone)
                        .or(it.offerings.first())
                        .map(|o| o.price)
                        .unwrap_or(0.0);
                }
                None => problems.push(format!(
                    "node {}: instance type unknown to the catalog; priced at 0",
                    n.name
                )),
            }
            if n.capacity.cpu_milli == 0 {
                n.capacity = n.allocatable.clone();
            }
            n.labels
                .entry(core::labels::HOSTNAME.into())
                .or_insert_with(|| n.name.clone());
            existing_nodes.push(n);
        }
        arrivals.extend(snap.arrivals);
        pdbs.extend(snap.pdbs);
    }
    // Unique pod names: the engine and the core address pods by namespace/name.
    let mut seen = BTreeMap::new();
    for a in &arrivals {
        if seen
            .insert((a.pod.namespace.clone(), a.pod.name.clone()), ())
            .is_some()
        {
            return Err(ls.invalid(
                "workload",
                format!(
                    "pod {}/{} is defined twice (pod group names must be unique)",
                    a.pod.namespace, a.pod.name
                ),
            ));
        }
    }
    arrivals.sort_by(|a, b| {
        a.at.cmp(&b.at)
            .then_with(|| a.pod.namespace.cmp(&b.pod.namespace))
            .then_with(|| a.pod.name.cmp(&b.pod.name))
    });
    if arrivals.is_empty() {
        return Err(ls.invalid(
            "workload",
            "the workload is empty: add `pods`, `openb`, `generate` or `kubectl`",
        ));
    }
    for (i, o) in s.settings.capacity_outages.iter().enumerate() {
        o.check(&instance_types).map_err(|(field, message)| {
            ls.invalid(&format!("settings.capacityOutages[{i}].{field}"), message)
        })?;
    }
    if s.settings.launch_failure_seconds.is_some_and(|f| f < 0) {
        return Err(ls.invalid("settings.launchFailureSeconds", "must not be negative"));
    }
    if s.settings.cas.max_node_provision_seconds < 0 {
        return Err(ls.invalid(
            "settings.cas.maxNodeProvisionSeconds",
            "must not be negative",
        ));
    }
    if s.settings.interruption_notice_seconds < 0 {
        return Err(ls.invalid("settings.interruptionNoticeSeconds", "must not be negative"));
    }
    if s.settings.launch_backoff_seconds.is_some_and(|b| b < 0) {
        return Err(ls.invalid("settings.launchBackoffSeconds", "must not be negative"));
    }
    problems.extend(unoffered_resources(
        &arrivals,
        &instance_types,
        &existing_nodes,
    ));
    Ok(World {
        name: s.name.clone().unwrap_or_else(|| ls.file.clone()),
        settings: s.settings.clone(),
        instance_types,
        nodepools,
        daemonsets,
        existing_nodes,
        arrivals,
        problems,
        pdbs,
    })
}

/// Requests for resources that no instance type or existing node has (a typo such as
/// `memry: 4Gi` becomes such an extended resource): those pods can never run, so say so up
/// front, once per name, with an example pod.
fn unoffered_resources(
    arrivals: &[Arrival],
    types: &[core::InstanceType],
    nodes: &[core::Node],
) -> Vec<String> {
    let offered: std::collections::BTreeSet<&str> = types
        .iter()
        .flat_map(|t| t.capacity.extended.keys())
        .chain(nodes.iter().flat_map(|n| n.allocatable.extended.keys()))
        .map(String::as_str)
        .collect();
    let mut missing: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for a in arrivals {
        let req = core::resources::pod_requests(&a.pod);
        for (name, v) in &req.extended {
            if *v > 0 && !offered.contains(name.as_str()) {
                let e = missing
                    .entry(name.clone())
                    .or_insert_with(|| (0, format!("{}/{}", a.pod.namespace, a.pod.name)));
                e.0 += 1;
            }
        }
    }
    missing
        .into_iter()
        .map(|(name, (n, example))| {
            format!(
                "{n} pod(s) request `{name}` (e.g. {example}), which no instance type or node offers: they can never run (a misspelt resource name?)"
            )
        })
        .collect()
}
