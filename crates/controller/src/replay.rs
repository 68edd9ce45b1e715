//! With `--replay-dir`, every provisioning round and disruption decision is written as one
//! JSON file holding the core's whole input and output (`provisioner_core::replay`), so
//! `karpenter-capi-sim replay <file>` re-runs the same core and shows the same decision:
//! "why did it do that" answered offline.

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
}
