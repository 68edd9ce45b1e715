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
    /// At `fromSeconds` the cloud also takes back the running nodes the outage covers: a spot
    /// pool reclaimed, every instance in it interrupted at once (AWS interrupts by capacity
    /// pool, and relaunching there fails while it lasts). Their pods are evicted, whatever
    /// their budgets, and the nodes end `settings.interruptionNoticeSeconds` later; launches
    /// still in flight there fail. Needs `capacityType: spot`: on-demand capacity is not
    /// taken back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reclaim_running: bool,
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
        self.matches(instance_type, zone, capacity_type.as_label())
            && at >= self.from_seconds
            && self.until_seconds.is_none_or(|u| at < u)
    }

    /// Whether the outage is about this offering (its capacity type as the node's label
    /// writes it), whenever it is.
    pub fn matches(&self, instance_type: &str, zone: &str, capacity_type: &str) -> bool {
        self.instance_type
            .as_deref()
            .is_none_or(|t| t == instance_type)
            && self.zone.as_deref().is_none_or(|z| z == zone)
            && self
                .capacity_type
                .is_none_or(|c| core::CapacityType::from(c).as_label() == capacity_type)
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
        if self.reclaim_running && self.capacity_type != Some(CapacityTypeName::Spot) {
            return Err((
                "reclaimRunning",
                "needs `capacityType: spot`: only spot capacity is taken back from running nodes"
                    .to_string(),
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
    /// unavailable offerings when it launches and when it plans replacements). With
    /// `zone_after`, every offering of a zone (and capacity type) where that many instance
    /// types are backed off too, as the controller's adapter does
    /// (`capi_adapter::instance_types::ZONE_BACKOFF_TYPES`).
    pub fn apply(&self, now: i64, types: &mut [core::InstanceType], zone_after: Option<usize>) {
        let live: Vec<&(String, String, String)> = self
            .until
            .iter()
            .filter(|(_, u)| **u > now)
            .map(|(k, _)| k)
            .collect();
        if live.is_empty() {
            return;
        }
        let mut per_zone: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for (_, zone, ct) in &live {
            *per_zone.entry((zone.as_str(), ct.as_str())).or_insert(0) += 1;
        }
        let zone_out = |zone: &str, ct: &str| {
            zone_after.is_some_and(|k| per_zone.get(&(zone, ct)).is_some_and(|&n| n >= k))
        };
        for t in types.iter_mut() {
            for o in &mut t.offerings {
                let ct = o.capacity_type.as_label();
                let key = (t.name.clone(), o.zone.clone(), ct.to_string());
                if self.until.get(&key).is_some_and(|&u| u > now) || zone_out(&o.zone, ct) {
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
        b.apply(100, &mut at_100, None);
        let available: Vec<bool> = at_100[0].offerings.iter().map(|o| o.available).collect();
        assert_eq!(available, [false, true]);
        let mut at_300 = types.clone();
        b.apply(300, &mut at_300, None);
        assert!(at_300[0].offerings.iter().all(|o| o.available));
    }

    #[test]
    fn two_types_backed_off_in_a_zone_take_the_zone_out() {
        let mut types = vec![big(&["a", "b"]), big(&["a", "b"]), big(&["a", "b"])];
        for (t, name) in types.iter_mut().zip(["small", "large", "xl"]) {
            t.name = name.into();
        }
        let mut b = Backoff::default();
        b.record("small", "a", "on-demand", 300);
        b.record("large", "a", "on-demand", 200);
        let available = |zone_after: Option<usize>, now: i64| {
            let mut ts = types.clone();
            b.apply(now, &mut ts, zone_after);
            ts.iter()
                .map(|t| {
                    t.offerings
                        .iter()
                        .map(|o| o.available)
                        .collect::<Vec<bool>>()
                })
                .collect::<Vec<_>>()
        };
        // Offering by offering: xl in zone a is still tried.
        assert_eq!(
            available(None, 100),
            [[false, true], [false, true], [true, true]]
        );
        // Two types out in zone a: the whole zone, zone b untouched.
        assert_eq!(
            available(Some(2), 100),
            [[false, true], [false, true], [false, true]]
        );
        // Once `large`'s window ends, one type is left: zone a is back.
        assert_eq!(
            available(Some(2), 250),
            [[false, true], [true, true], [true, true]]
        );
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
