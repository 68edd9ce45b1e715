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
