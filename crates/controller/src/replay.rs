//! With `--replay-dir`, every provisioning round and disruption decision is written as one
//! JSON file holding the core's whole input and output (`provisioner_core::replay`), so
//! `karpenter-capi-sim replay <file>` re-runs the same core and shows the same decision:
//! "why did it do that" answered offline.
//!
//! Only the newest `--replay-keep` records are kept (each holds a whole snapshot, and the
//! loops write several a minute), and they are served on the metrics address at `/replay`
//! (a list, newest first) and `/replay/<file>`: the controller image has no shell or `tar`,
//! so `kubectl cp` cannot fetch them; `kubectl port-forward` and `curl` can.

use std::path::Path;

use provisioner_core::replay::{DisruptionRecord, ProvisioningRecord};
use provisioner_core::{SchedulingOptions, SchedulingResult, Snapshot};

use crate::options::Options;

fn write(dir: &Path, kind: &str, now: i64, json: serde_json::Result<String>) {
    let json = match json {
        Ok(j) => j,
        Err(e) => {
            tracing::warn!(error = %e, "could not serialise a replay record");
            return;
        }
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let path = dir.join(format!("{kind}-{now}-{nanos:09}.json"));
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, json)) {
        tracing::warn!(path = %path.display(), error = %e, "could not write a replay record");
    }
}

/// When a record was written, from its name (`<kind>-<secs>-<nanos>.json`), for ordering.
fn written_at(name: &str) -> Option<(i64, u32)> {
    let stem = name.strip_suffix(".json")?;
    let mut parts = stem.rsplitn(3, '-');
    let nanos = parts.next()?.parse().ok()?;
    let secs = parts.next()?.parse().ok()?;
    parts.next()?;
    Some((secs, nanos))
}

/// The records in `dir`, newest first.
pub fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<(i64, u32, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let (s, n) = written_at(&name)?;
            Some((s, n, name))
        })
        .collect();
    names.sort_by(|a, b| b.cmp(a));
    names.into_iter().map(|(_, _, n)| n).collect()
}

/// Deletes all but the newest `keep` records.
fn prune(dir: &Path, keep: usize) {
    for old in list(dir).into_iter().skip(keep) {
        let _ = std::fs::remove_file(dir.join(old));
    }
}

/// A record's bytes, if `name` is one of ours (no path tricks: a plain record name).
pub fn read(dir: &Path, name: &str) -> Option<Vec<u8>> {
    if name.contains('/') || name.contains("..") || written_at(name).is_none() {
        return None;
    }
    std::fs::read(dir.join(name)).ok()
}

pub fn write_provisioning(
    options: &Options,
    snapshot: &Snapshot,
    scheduling: &SchedulingOptions,
    result: &SchedulingResult,
) {
    let Some(dir) = &options.replay_dir else {
        return;
    };
    let rec = ProvisioningRecord {
        snapshot: snapshot.clone(),
        options: scheduling.clone(),
        result: result.clone(),
    };
    write(
        dir,
        "provisioning",
        snapshot.now,
        serde_json::to_string(&rec),
    );
    prune(dir, options.replay_keep);
}

pub fn write_disruption(options: &Options, rec: &DisruptionRecord) {
    let Some(dir) = &options.replay_dir else {
        return;
    };
    write(
        dir,
        "disruption",
        rec.snapshot.now,
        serde_json::to_string(rec),
    );
    prune(dir, options.replay_keep);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_and_serves_only_record_names() {
        let dir = std::env::temp_dir().join(format!("kcapi-replay-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        for (kind, secs) in [
            ("provisioning", 30),
            ("disruption", 10),
            ("provisioning", 20),
        ] {
            std::fs::write(dir.join(format!("{kind}-{secs}-000000001.json")), "{}").expect("w");
        }
        std::fs::write(dir.join("notes.txt"), "x").expect("w");
        assert_eq!(
            list(&dir),
            [
                "provisioning-30-000000001.json",
                "provisioning-20-000000001.json",
                "disruption-10-000000001.json"
            ]
        );
        prune(&dir, 2);
        assert_eq!(list(&dir).len(), 2);
        assert!(!dir.join("disruption-10-000000001.json").exists());
        assert!(dir.join("notes.txt").exists(), "only records are pruned");
        assert!(read(&dir, "provisioning-30-000000001.json").is_some());
        assert!(read(&dir, "notes.txt").is_none());
        assert!(read(&dir, "../provisioning-30-000000001.json").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
