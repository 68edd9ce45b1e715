//! Turning the simulation's new NodeClaims into replacements, with the price rule.
//!
//! A NodeClaim lets the provider launch any of its instance-type options in any zone and
//! capacity type its requirements allow, so the price we can rely on is the **worst case**:
//! the most expensive compatible, available offering of any option. Karpenter filters options
//! by their cheapest offering and then pins spot when both capacity types remain; we keep only
//! options whose worst case still leaves the command saving money, so whatever launches, the
//! command saves at least the threshold:
//!
//! `sum over replacements of worst-case price < candidates' price - threshold`.
//!
//! With several replacements the slack above each replacement's cheapest possible worst case
//! is shared equally, which keeps the rule strict and the choice deterministic.
//!
//! Spot: when every candidate is spot, a replacement that could land on-demand would trade a
//! cheap interruptible node for an expensive one, so replacements are pinned to spot, and only
//! allowed at all with [`super::DisruptionOptions::spot_to_spot`] (Karpenter's
//! `SpotToSpotConsolidation` feature gate).

use std::collections::BTreeMap;

use super::candidates::Candidate;
use super::command::Replacement;
use crate::model::{CapacityType, InstanceType, Snapshot, labels};
use crate::requirements::{Requirements, ValueSet};
use crate::result::{InstanceTypeOption, Launch, NewNodeClaim, OfferingChoice};

/// Which price rule applies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PriceRule {
    /// Consolidation: the replacements' worst case must stay below
    /// `candidates_price - min_saving`.
    Cheaper {
        candidates_price: f64,
        min_saving: f64,
        /// [`super::payback::Payback::flexibility_premium`]: options dearer than the
        /// cheapest worst case by more than this fraction are dropped.
        max_premium: Option<f64>,
    },
    /// Drift and expiration replace whatever the price.
    Any,
}

pub(crate) struct Priced {
    pub option: InstanceTypeOption,
    pub worst: f64,
}

/// Compatible, available offerings of an option under a claim's requirements.
pub(crate) fn priced_option(
    it: &InstanceType,
    opt: &InstanceTypeOption,
    reqs: &Requirements,
    spot_only: bool,
) -> Option<Priced> {
    let zones = reqs.get(labels::ZONE);
    let cts = reqs.get(labels::CAPACITY_TYPE);
    let mut cheapest: Option<(f64, &str, CapacityType)> = None;
    let mut worst: Option<f64> = None;
    for o in &it.offerings {
        if !o.available
            || zones.is_some_and(|z| !z.has(&o.zone))
            || cts.is_some_and(|c| !c.has(o.capacity_type.as_label()))
        {
            continue;
        }
        if spot_only && o.capacity_type != CapacityType::Spot {
            continue;
        }
        if cheapest.is_none_or(|(p, z, _)| o.price < p || (o.price == p && o.zone.as_str() < z)) {
            cheapest = Some((o.price, o.zone.as_str(), o.capacity_type));
        }
        worst = Some(worst.map_or(o.price, |w: f64| w.max(o.price)));
    }
    let (price, zone, capacity_type) = cheapest?;
    Some(Priced {
        option: InstanceTypeOption {
            instance_type: opt.instance_type.clone(),
            cheapest: OfferingChoice {
                zone: zone.to_string(),
                capacity_type,
                price,
            },
            allocatable_for_pods: opt.allocatable_for_pods.clone(),
        },
        worst: worst?,
    })
}

/// What the claims cost at least: each claim's cheapest option at its cheapest offering.
pub(crate) fn cheapest_price(claims: &[NewNodeClaim]) -> f64 {
    claims
        .iter()
        .map(|c| {
            c.instance_type_options
                .iter()
                .map(|o| o.cheapest.price)
                .fold(f64::INFINITY, f64::min)
        })
        .sum()
}

/// Builds the replacements, or says why the claims cannot be replacements.
pub fn replacements(
    snapshot: &Snapshot,
    claims: &[NewNodeClaim],
    candidates: &[&Candidate],
    rule: PriceRule,
    spot_to_spot: bool,
) -> Result<Vec<Replacement>, String> {
    if claims.is_empty() {
        return Ok(Vec::new());
    }
    let all_spot = !candidates.is_empty()
        && candidates
            .iter()
            .all(|c| c.capacity_type == CapacityType::Spot);
    let spot_only = matches!(rule, PriceRule::Cheaper { .. }) && all_spot;
    if spot_only && !spot_to_spot {
        return Err("every candidate is spot and spot-to-spot consolidation is off".into());
    }
    if let PriceRule::Cheaper {
        candidates_price,
        min_saving,
        ..
    } = rule
    {
        // Each replacement costs at least its cheapest option's cheapest offering (the
        // worst case below is never less), so most rejections need no pricing work at all.
        let least = cheapest_price(claims);
        if least >= candidates_price - min_saving.max(0.0) {
            return Err(format!(
                "replacements cost at least {least:.4}/h, not below the candidates' {candidates_price:.4}/h minus the threshold {:.4}/h",
                min_saving.max(0.0)
            ));
        }
    }
    let types: BTreeMap<&str, &InstanceType> = snapshot
        .instance_types
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    let mut per_claim: Vec<(Requirements, Vec<Priced>)> = Vec::with_capacity(claims.len());
    for c in claims {
        let reqs = Requirements::from_wire(c.requirements.iter());
        let mut priced: Vec<Priced> = c
            .instance_type_options
            .iter()
            .filter_map(|o| {
                types
                    .get(o.instance_type.as_str())
                    .and_then(|it| priced_option(it, o, &reqs, spot_only))
            })
            .collect();
        if priced.is_empty() {
            return Err(format!(
                "replacement {}: no compatible available offering{}",
                c.name,
                if spot_only { " on spot" } else { "" }
            ));
        }
        priced.sort_by(|a, b| {
            a.worst
                .total_cmp(&b.worst)
                .then(a.option.instance_type.cmp(&b.option.instance_type))
        });
        per_claim.push((reqs, priced));
    }
    if let PriceRule::Cheaper {
        candidates_price,
        min_saving,
        max_premium,
    } = rule
    {
        let budget = candidates_price - min_saving.max(0.0);
        let floor: f64 = per_claim
            .iter()
            .map(|(_, p)| p.first().map_or(0.0, |x| x.worst))
            .sum();
        if floor >= budget {
            return Err(format!(
                "replacements cost at least {floor:.4}/h in the worst case, not below the candidates' {candidates_price:.4}/h minus the threshold {:.4}/h",
                min_saving.max(0.0)
            ));
        }
        let share = (budget - floor) / per_claim.len() as f64;
        for (_, priced) in &mut per_claim {
            let min = priced.first().map_or(0.0, |x| x.worst);
            let ceiling = max_premium.map_or(f64::INFINITY, |f| min * (1.0 + f.max(0.0)));
            priced.retain(|p| p.worst == min || (p.worst < min + share && p.worst <= ceiling));
        }
    }
    let mut out = Vec::with_capacity(claims.len());
    for (c, (mut reqs, mut priced)) in claims.iter().zip(per_claim) {
        let worst = priced.iter().map(|p| p.worst).fold(0.0, f64::max);
        priced.sort_by(|a, b| {
            a.option
                .cheapest
                .price
                .total_cmp(&b.option.cheapest.price)
                .then(a.option.instance_type.cmp(&b.option.instance_type))
        });
        let options: Vec<InstanceTypeOption> = priced.into_iter().map(|p| p.option).collect();
        let Some(first) = options.first() else {
            return Err(format!("replacement {}: no option left", c.name));
        };
        let launch = Launch {
            instance_type: first.instance_type.clone(),
            zone: first.cheapest.zone.clone(),
            capacity_type: first.cheapest.capacity_type,
            price: first.cheapest.price,
        };
        reqs.0.insert(
            labels::INSTANCE_TYPE.to_string(),
            ValueSet::of(options.iter().map(|o| o.instance_type.clone())),
        );
        if spot_only {
            reqs.add(
                labels::CAPACITY_TYPE,
                ValueSet::of([CapacityType::Spot.as_label()]),
            );
        }
        out.push(Replacement {
            name: c.name.clone(),
            nodepool: c.nodepool.clone(),
            requirements: reqs.to_wire(),
            instance_type_options: options,
            launch,
            worst_case_price: worst,
        });
    }
    Ok(out)
}
