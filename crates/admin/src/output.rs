//! Plain-text tables and colour for the CLI (the UI renders the same structs as HTML).

use crate::cas::CasStatus;
use crate::discover::Discovery;

/// ANSI styling, off unless the caller says the output is a terminal.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    pub fn red(&self, s: &str) -> String {
        self.paint("31", s)
    }
    pub fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
    pub fn yellow(&self, s: &str) -> String {
        self.paint("33", s)
    }
    pub fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
}

/// Aligns columns; widths ignore ANSI escapes.
/// `$x.xxxx/h`. Rust sums an empty `f64` iterator to `-0.0` (the identity that keeps
/// `[-0.0].sum()` exact), which would print as `$-0.0000/h` for a cluster with no nodes.
pub fn per_hour(x: f64) -> String {
    format!("${:.4}/h", x + 0.0)
}

pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    fn visible(s: &str) -> usize {
        let mut n = 0;
        let mut esc = false;
        for c in s.chars() {
            if esc {
                esc = c != 'm';
            } else if c == '\x1b' {
                esc = true;
            } else {
                n += 1;
            }
        }
        n
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(visible(c));
            }
        }
    }
    let line = |cells: Vec<String>| -> String {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            out.push_str(c);
            if i + 1 < cells.len() {
                out.push_str(&" ".repeat(widths[i] - visible(c) + 2));
            }
        }
        out.trim_end().to_string()
    };
    let mut out = line(header.iter().map(|s| s.to_string()).collect());
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.clone()));
        out.push('\n');
    }
    out
}

pub fn discovery_table(d: &Discovery, style: Style) -> String {
    let rows: Vec<Vec<String>> = d
        .resources
        .iter()
        .map(|r| {
            let cap = |name: &str| {
                r.capacity
                    .iter()
                    .find(|c| c.resource == name)
                    .and_then(|c| c.value.clone())
                    .unwrap_or_else(|| "-".into())
            };
            vec![
                format!("{}/{}", r.namespace, r.name),
                r.kind.split('.').next().unwrap_or("").to_string()
                    + if r.kind.contains("openshift") {
                        " (OpenShift)"
                    } else {
                        ""
                    },
                r.instance_type.clone().unwrap_or_else(|| "-".into()),
                cap("cpu"),
                cap("memory"),
                if r.zones.is_empty() {
                    "-".into()
                } else {
                    r.zones.join(",")
                },
                match r.price.per_hour {
                    Some(_) => r.price_text(),
                    None => style.yellow("unpriced"),
                },
                format!(
                    "{}/{}",
                    r.min.map_or("?".into(), |m| m.to_string()),
                    r.max_text()
                ),
                r.replicas.to_string(),
                if r.member {
                    style.green("yes")
                } else {
                    "no".into()
                },
                if r.cas.is_empty() {
                    "no".into()
                } else if r.cas_active {
                    style.yellow("yes")
                } else {
                    "yes (stopped)".into()
                },
                if r.problems.is_empty() {
                    style.green("ok")
                } else {
                    style.red(&r.problems.len().to_string())
                },
            ]
        })
        .collect();
    let mut out = table(
        &[
            "RESOURCE",
            "KIND",
            "INSTANCE-TYPE",
            "CPU",
            "MEMORY",
            "ZONES",
            "PRICE",
            "MIN/MAX",
            "REPLICAS",
            "MEMBER",
            "CAS",
            "PROBLEMS",
        ],
        &rows,
    );
    for r in &d.resources {
        let mut details = Vec::new();
        for c in &r.capacity {
            if c.value.is_some() || c.required_missing {
                details.push(format!(
                    "    {}: {} ({})",
                    c.resource,
                    c.value.clone().unwrap_or_else(|| "-".into()),
                    c.source
                ));
            }
        }
        for p in &r.problems {
            details.push(style.red(&format!(
                "    problem: {}: {}: {}",
                p.object, p.key, p.message
            )));
        }
        for c in &r.cas_differences {
            details.push(format!("    CAS: {c}"));
        }
        if r.max.is_none() {
            details.push("    max: unlimited (no max-size annotation)".into());
        }
        if !details.is_empty() {
            out.push_str(&format!(
                "\n{}\n{}\n",
                style.bold(&r.id),
                details.join("\n")
            ));
        }
    }
    out
}

pub fn cas_table(s: &CasStatus, style: Style) -> String {
    let mut out = String::new();
    if s.deployments.is_empty() && !s.cluster_autoscaler {
        out.push_str("No Cluster Autoscaler found.\n");
    }
    for d in &s.deployments {
        out.push_str(&format!(
            "{} ({} cluster): replicas {}{}{}\n",
            d.label(),
            d.cluster.as_str(),
            d.replicas,
            if d.openshift_operated {
                ", run by the OpenShift operator"
            } else {
                ""
            },
            if d.auto_discovery.is_empty() {
                ""
            } else {
                ", auto-discovery flags"
            }
        ));
    }
    if s.cluster_autoscaler {
        out.push_str("OpenShift ClusterAutoscaler default: present\n");
    }
    for m in &s.machine_autoscalers {
        out.push_str(&format!("MachineAutoscaler {m}\n"));
    }
    if let Some(p) = &s.handoff_phase {
        out.push_str(&format!("Hand-off record: phase {p}\n"));
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = s
        .resources
        .iter()
        .map(|r| {
            vec![
                r.resource.clone(),
                if r.member { "yes".into() } else { "no".into() },
                if r.cas.is_empty() {
                    "-".into()
                } else {
                    r.cas.join(", ")
                },
                if r.cas_active {
                    "yes".into()
                } else {
                    "no".into()
                },
                if r.overlap {
                    style.red("OVERLAP")
                } else if r.taken_from_cas {
                    "taken from CAS".into()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    out.push_str(&table(
        &["RESOURCE", "MEMBER", "CAS", "CAS-RUNNING", "NOTE"],
        &rows,
    ));
    for a in &s.ambiguities {
        out.push_str(&style.yellow(&format!("ambiguous: {a}\n")));
    }
    out
}

fn map_text(m: &std::collections::BTreeMap<String, String>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `karpenter-capi status` as text.
pub fn status_text(s: &crate::status::Status, style: Style) -> String {
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    let mut out = style.bold("NodePools") + "\n";
    out.push_str(&table(
        &[
            "NAME",
            "NODECLASS",
            "WEIGHT",
            "NODES",
            "LIMITS",
            "USAGE",
            "READY",
        ],
        &s.nodepools
            .iter()
            .map(|p| {
                vec![
                    p.name.clone(),
                    p.nodeclass.clone(),
                    p.weight.to_string(),
                    p.nodes.to_string(),
                    map_text(&p.limits),
                    map_text(&p.usage),
                    if p.ready {
                        style.green("yes")
                    } else {
                        style.yellow("no")
                    },
                ]
            })
            .collect::<Vec<_>>(),
    ));
    out.push_str(&format!("\n{}\n", style.bold("NodeClaims")));
    out.push_str(&table(
        &[
            "NAME", "NODEPOOL", "PHASE", "NODE", "TYPE", "ZONE", "CAPACITY", "$/H",
        ],
        &s.nodeclaims
            .iter()
            .map(|c| {
                vec![
                    c.name.clone(),
                    c.nodepool.clone(),
                    c.phase.clone(),
                    opt(&c.node),
                    opt(&c.instance_type),
                    opt(&c.zone),
                    opt(&c.capacity_type),
                    format!("{:.4}", c.price_per_hour),
                ]
            })
            .collect::<Vec<_>>(),
    ));
    out.push_str(&format!(
        "\n{} (total {})\n",
        style.bold("Nodes"),
        per_hour(s.cost_per_hour)
    ));
    out.push_str(&table(
        &["NAME", "NODEPOOL", "TYPE", "ZONE", "READY", "PODS", "$/H"],
        &s.nodes
            .iter()
            .map(|n| {
                vec![
                    n.name.clone(),
                    opt(&n.nodepool),
                    opt(&n.instance_type),
                    opt(&n.zone),
                    if n.ready {
                        "yes".into()
                    } else {
                        style.yellow("no")
                    },
                    n.pods.to_string(),
                    format!("{:.4}", n.price_per_hour),
                ]
            })
            .collect::<Vec<_>>(),
    ));
    out.push_str(&format!("\n{}\n", style.bold("Pending pods")));
    out.push_str(&table(
        &["POD", "WHAT THE AUTOSCALER WOULD DO"],
        &s.pending
            .iter()
            .map(|p| {
                vec![
                    p.pod.clone(),
                    if p.schedulable {
                        p.outcome.clone()
                    } else {
                        style.red(&p.outcome)
                    },
                ]
            })
            .collect::<Vec<_>>(),
    ));
    let g = &s.gap;
    out.push_str(&format!(
        "\nNext decision: {} pending -> {} new nodes, {}; lower bound {}; gap {}\n",
        g.pending,
        g.new_nodes,
        per_hour(g.cost_per_hour),
        g.lower_bound_per_hour.map_or("unknown".into(), per_hour),
        g.gap_percent
            .map_or("unknown".into(), |p| format!("{p:.1}%")),
    ));
    out.push_str(&format!(
        "\n{}\n",
        style.bold("Last decisions (our events)")
    ));
    out.push_str(&table(
        &["TIME", "OBJECT", "REASON", "NOTE"],
        &s.events
            .iter()
            .map(|e| {
                vec![
                    e.time.clone(),
                    e.object.clone(),
                    if e.warning {
                        style.yellow(&e.reason)
                    } else {
                        e.reason.clone()
                    },
                    e.note.clone(),
                ]
            })
            .collect::<Vec<_>>(),
    ));
    for n in &s.notes {
        out.push_str(&style.yellow(&format!("note: {n}\n")));
    }
    out
}

/// `karpenter-capi explain` as text.
pub fn explain_text(e: &crate::explain::Explanation, style: Style) -> String {
    use crate::explain::Decision;
    let mut out = format!(
        "{} {} (phase {})\nrequests: {}\n",
        style.bold("Pod"),
        e.pod,
        if e.phase.is_empty() { "?" } else { &e.phase },
        map_text(&e.requests)
    );
    if let Some(m) = &e.scheduler_message {
        out.push_str(&format!("kube-scheduler: {m}\n"));
    }
    out.push_str(&format!("\n{}\n", style.bold("Existing nodes")));
    if e.nodes.is_empty() {
        out.push_str("(none)\n");
    }
    for n in &e.nodes {
        if n.fits {
            out.push_str(&format!("{}  {}\n", n.node, style.green("fits")));
        } else {
            out.push_str(&format!(
                "{}  {}\n",
                n.node,
                style.red(&n.reasons.join("; "))
            ));
        }
    }
    out.push_str(&format!(
        "\n{}\n",
        style.bold("Instance types (the pod alone)")
    ));
    if e.shapes.is_empty() {
        out.push_str("(none: no NodeClass offers any; run `karpenter-capi discover`)\n");
    }
    for s in &e.shapes {
        let price = s.price.map_or("-".into(), per_hour);
        match &s.reason {
            None => out.push_str(&format!(
                "{}  {}  {}\n",
                s.instance_type,
                style.green("fits"),
                price
            )),
            Some(r) => out.push_str(&format!("{}  {}\n", s.instance_type, style.red(r))),
        }
    }
    out.push_str(&format!("\n{}\n", style.bold("Decision")));
    out.push_str(&match &e.decision {
        Decision::Bound { node } => format!("bound to {node}: nothing to do\n"),
        Decision::Existing { node } => {
            format!("fits on {node} (existing or in flight): no launch\n")
        }
        Decision::Launch {
            nodepool,
            instance_type,
            zone,
            capacity_type,
            price,
            options,
            with_pods,
        } => format!(
            "launch {instance_type} in {zone} ({capacity_type}, ${price:.4}/h) via NodePool {nodepool}, together with {with_pods} other pod(s)\noptions: {}\n",
            options
                .iter()
                .map(|(t, p)| format!("{t} ${p:.4}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Decision::Unschedulable { reason } => style.red(&format!("nothing can be launched for it: {reason}\n")),
        Decision::NotConsidered { reason } => format!("not considered: {reason}\n"),
    });
    if !e.relaxed.is_empty() {
        out.push_str(&format!("relaxed preferences: {}\n", e.relaxed.join(", ")));
    }
    for n in &e.notes {
        out.push_str(&style.yellow(&format!("note: {n}\n")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::per_hour;

    #[test]
    fn empty_total_prints_as_zero_not_negative_zero() {
        let empty: f64 = std::iter::empty::<f64>().sum();
        assert_eq!(per_hour(empty), "$0.0000/h");
        assert_eq!(per_hour(0.12345), "$0.1235/h");
    }
}
