//! Capacity outages: windows in which the cloud cannot launch some offerings (AWS's
//! `InsufficientInstanceCapacity` for a type in a zone), so a Machine asked for there fails.
//!
//! Every autoscaler learns only from its own failed launches and then skips the offering for
//! its back-off window, as the real ones do: our controller's launch-failure back-off and the
//! Cluster Autoscaler's node-group back-off (5 minutes), Karpenter's unavailable-offerings
//! cache (3 minutes). None of them knows an outage in advance.

use std::collections::BTreeMap;

use provisioner_core as core;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scenario::CapacityTypeName;

/// A window in which launches of the matching offerings fail. Absent fields match every
/// instance type, zone or capacity type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapacityOutage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<CapacityTypeName>,
    /// Launches requested from this second on fail (default 0).
    #[serde(default)]
    pub from_seconds: i64,
    /// ... until this second (absent: to the end of the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_seconds: Option<i64>,
}

impl CapacityOutage {
    /// Whether a launch of `instance_type` in `zone` as `capacity_type`, requested at `at`,
    /// fails.
    pub fn covers(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: core::CapacityType,
        at: i64,
    ) -> bool {
        self.instance_type
            .as_deref()
            .is_none_or(|t| t == instance_type)
            && self.zone.as_deref().is_none_or(|z| z == zone)
            && self
                .capacity_type
                .is_none_or(|c| core::CapacityType::from(c) == capacity_type)
            && at >= self.from_seconds
            && self.until_seconds.is_none_or(|u| at < u)
    }

    /// Why the outage cannot apply to `types` (`(subfield, message)`): a window that ends
    /// before it begins, or a type or zone no offering has (a typo would silently test
    /// nothing).
    pub fn check(&self, types: &[core::InstanceType]) -> Result<(), (&'static str, String)> {
        if self.until_seconds.is_some_and(|u| u <= self.from_seconds) {
            return Err((
                "untilSeconds",
                format!("must be after fromSeconds ({})", self.from_seconds),
            ));
        }
        if let Some(t) = &self.instance_type
            && !types.iter().any(|x| &x.name == t)
        {
            return Err(("instanceType", format!("`{t}` is not in the catalog")));
        }
        if let Some(z) = &self.zone
            && !types
                .iter()
                .flat_map(|t| &t.offerings)
                .any(|o| &o.zone == z)
        {
            return Err(("zone", format!("no instance type is offered in `{z}`")));
        }
        Ok(())
    }
}

/// The offerings one autoscaler saw fail, and until when it skips them.
#[derive(Debug, Default)]
pub struct Backoff {
    /// Keyed by instance type, zone and capacity type's label (`on-demand`, `spot`, ...).
    until: BTreeMap<(String, String, String), i64>,
}

impl Backoff {
    pub fn record(&mut self, instance_type: &str, zone: &str, capacity_type: &str, until: i64) {
        let e = self
            .until
            .entry((
                instance_type.to_string(),
                zone.to_string(),
                capacity_type.to_string(),
            ))
            .or_insert(until);
        *e = (*e).max(until);
    }

    /// Marks the offerings still backed off at `now` unavailable in `types` (the core skips
    /// unavailable offerings when it launches and when it plans replacements).
    pub fn apply(&self, now: i64, types: &mut [core::InstanceType]) {
        if !self.until.values().any(|&u| u > now) {
            return;
        }
        for t in types.iter_mut() {
            for o in &mut t.offerings {
                let key = (
                    t.name.clone(),
                    o.zone.clone(),
                    o.capacity_type.as_label().to_string(),
                );
                if self.until.get(&key).is_some_and(|&u| u > now) {
                    o.available = false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outage(yaml: &str) -> CapacityOutage {
        serde_saphyr::from_str(yaml).expect("valid outage")
    }

    /// Type `big`, on demand in `zones`.
    fn big(zones: &[&str]) -> core::InstanceType {
        core::InstanceType {
            name: "big".into(),
            capacity: core::Resources::default(),
            overhead: core::Resources::default(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            offerings: zones
                .iter()
                .map(|z| core::Offering {
                    zone: (*z).into(),
                    capacity_type: core::CapacityType::OnDemand,
                    price: 1.0,
                    priced: true,
                    available: true,
                })
                .collect(),
            csi_limits: BTreeMap::new(),
        }
    }

    #[test]
    fn an_outage_covers_its_offerings_in_its_window_only() {
        let o = outage("{instanceType: big, zone: a, fromSeconds: 100, untilSeconds: 200}");
        let od = core::CapacityType::OnDemand;
        assert!(o.covers("big", "a", od, 100));
        assert!(o.covers("big", "a", core::CapacityType::Spot, 199));
        assert!(!o.covers("big", "a", od, 99));
        assert!(!o.covers("big", "a", od, 200));
        assert!(!o.covers("big", "b", od, 150));
        assert!(!o.covers("small", "a", od, 150));
        let spot = outage("{capacityType: spot}");
        assert!(spot.covers("any", "zone", core::CapacityType::Spot, 1_000_000));
        assert!(!spot.covers("any", "zone", od, 0));
    }

    #[test]
    fn a_backoff_marks_its_offering_until_it_ends() {
        let types = vec![big(&["a", "b"])];
        let mut b = Backoff::default();
        b.record("big", "a", "on-demand", 300);
        let mut at_100 = types.clone();
        b.apply(100, &mut at_100);
        let available: Vec<bool> = at_100[0].offerings.iter().map(|o| o.available).collect();
        assert_eq!(available, [false, true]);
        let mut at_300 = types.clone();
        b.apply(300, &mut at_300);
        assert!(at_300[0].offerings.iter().all(|o| o.available));
    }

    #[test]
    fn a_typo_in_an_outage_is_an_error() {
        let types = vec![big(&["a"])];
        assert!(outage("{instanceType: big, zone: a}").check(&types).is_ok());
        assert_eq!(
            outage("{instanceType: bgi}")
                .check(&types)
                .expect_err("invalid")
                .0,
            "instanceType"
        );
        assert_eq!(
            outage("{zone: c}").check(&types).expect_err("invalid").0,
            "zone"
        );
        assert_eq!(
            outage("{fromSeconds: 10, untilSeconds: 10}")
                .check(&types)
                .expect_err("invalid")
                .0,
            "untilSeconds"
        );
    }
}
