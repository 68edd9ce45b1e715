//! Replays a decision the controller recorded (`--replay-dir`): the same core on the same
//! input. The core is deterministic, so the decision comes out the same unless the core
//! changed; the outcome says which, and what the decision was, so "why did it do that" can
//! be asked offline.

use std::path::Path;

use provisioner_core::replay::Record;

use crate::error::{Result, SimError};

/// What a replay found.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayOutcome {
    /// `provisioning` or `disruption`.
    pub kind: &'static str,
    /// The re-run gave exactly the recorded decision.
    pub same: bool,
    /// One line a person reads: what was decided.
    pub summary: String,
    /// The re-run decision, pretty JSON.
    pub rerun_json: String,
}

/// Reads and re-runs one record file.
pub fn replay(path: &Path) -> Result<ReplayOutcome> {
    let text = std::fs::read_to_string(path).map_err(|e| SimError::io(path, e))?;
    let record: Record = serde_json::from_str(&text).map_err(|e| {
        SimError::invalid(
            &path.display().to_string(),
            "",
            format!("not a provisioning or disruption record: {e}"),
        )
    })?;
    Ok(match record {
        Record::Provisioning(r) => {
            let rerun = r.rerun();
            ReplayOutcome {
                kind: "provisioning",
                same: rerun == r.result,
                summary: format!(
                    "{} pending pods: {} on existing or in-flight nodes, {} new nodes ({:.4}/h), {} unschedulable",
                    r.snapshot
                        .pods
                        .iter()
                        .filter(|p| p.node_name.is_none())
                        .count(),
                    rerun.existing_placements.len(),
                    rerun.new_node_claims.len(),
                    rerun.new_node_cost_per_hour,
                    rerun.unschedulable.len()
                ),
                rerun_json: pretty(&rerun),
            }
        }
        Record::Disruption(r) => {
            let rerun = r.rerun();
            let summary = match &rerun.command {
                Some(c) => c.rationale.summary.clone(),
                None => format!("no command ({} candidates)", rerun.candidates),
            };
            ReplayOutcome {
                kind: "disruption",
                same: rerun == r.decision,
                summary,
                rerun_json: pretty(&rerun),
            }
        }
    })
}

/// Pretty JSON of a decision.
fn pretty<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use provisioner_core::replay::ProvisioningRecord;

    #[test]
    fn a_recorded_round_replays_to_the_same_decision() -> Result<()> {
        let mut snapshot = provisioner_core::Snapshot::default();
        snapshot
            .instance_types
            .push(provisioner_core::InstanceType {
                name: "small".into(),
                capacity: provisioner_core::Resources {
                    cpu_milli: 2000,
                    memory: 4 << 30,
                    pods: 110,
                    ephemeral_storage: 10 << 30,
                    ..Default::default()
                },
                overhead: Default::default(),
                labels: Default::default(),
                taints: vec![],
                offerings: vec![provisioner_core::Offering {
                    zone: "a".into(),
                    capacity_type: Default::default(),
                    price: 0.1,
                    priced: true,
                    available: true,
                }],
                csi_limits: Default::default(),
            });
        snapshot.nodepools.push(provisioner_core::NodePool {
            name: "default".into(),
            ..Default::default()
        });
        snapshot.pods.push(
            provisioner_core::Pod {
                namespace: "n".into(),
                name: "p".into(),
                containers: vec![provisioner_core::Resources {
                    cpu_milli: 500,
                    ..Default::default()
                }],
                ..Default::default()
            }
            .into(),
        );
        let options = provisioner_core::SchedulingOptions::default();
        let result = provisioner_core::schedule(&snapshot, &options);
        assert_eq!(result.new_node_claims.len(), 1);
        let rec = ProvisioningRecord {
            snapshot,
            options,
            result,
        };
        let dir = std::env::temp_dir().join(format!("kcapi-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| SimError::io(&dir, e))?;
        let path = dir.join("provisioning.json");
        std::fs::write(&path, serde_json::to_string(&rec).unwrap_or_default())
            .map_err(|e| SimError::io(&path, e))?;
        let out = replay(&path)?;
        assert!(out.same, "{out:?}");
        assert_eq!(out.kind, "provisioning");
        assert!(out.summary.contains("1 new nodes"), "{}", out.summary);
        // A changed record no longer matches.
        let mut changed = rec.clone();
        changed.result.new_node_cost_per_hour = 9.0;
        std::fs::write(&path, serde_json::to_string(&changed).unwrap_or_default())
            .map_err(|e| SimError::io(&path, e))?;
        assert!(!replay(&path)?.same);
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}
