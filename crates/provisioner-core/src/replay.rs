//! Replay records: a decision's whole input and output in one serialisable value, written
//! by the controller and re-run offline (`karpenter-capi-sim replay`). Because the core is
//! deterministic, re-running the input gives the recorded output; a difference means the
//! core changed between the two versions, and [`ProvisioningRecord::rerun`] shows it.

use serde::{Deserialize, Serialize};

use crate::disruption::{DisruptionDecision, DisruptionOptions, disrupt};
use crate::model::Snapshot;
use crate::result::SchedulingResult;
use crate::scheduler::{SchedulingOptions, schedule};

/// One provisioning round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvisioningRecord {
    pub snapshot: Snapshot,
    pub options: SchedulingOptions,
    pub result: SchedulingResult,
}

/// One disruption decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DisruptionRecord {
    pub snapshot: Snapshot,
    pub options: DisruptionOptions,
    pub decision: DisruptionDecision,
}

/// Either record, as read from a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Record {
    Provisioning(Box<ProvisioningRecord>),
    Disruption(Box<DisruptionRecord>),
}

impl ProvisioningRecord {
    /// Runs the core again on the recorded input.
    pub fn rerun(&self) -> SchedulingResult {
        schedule(&self.snapshot, &self.options)
    }
}

impl DisruptionRecord {
    /// Runs the core again on the recorded input.
    pub fn rerun(&self) -> DisruptionDecision {
        disrupt(&self.snapshot, &self.options)
    }
}
