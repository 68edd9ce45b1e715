//! Parsers for the annotation values the adapter reads (taints, labels, CSI limits, prices,
//! capacity types, sizes).
//!
//! These strings are hand-written by users, so every parser is total: a value or a
//! [`ValueError`] saying what is wrong, never a panic (proptest-fuzzed below). The caller
//! attaches the object and key to make a [`crate::Problem`].

use std::collections::BTreeMap;

use provisioner_core::{CapacityType, Taint, TaintEffect};
use thiserror::Error;

use crate::quantity::{self, QuantityError};

/// What is wrong with one annotation or field value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValueError {
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    #[error("not a non-negative integer: {0:?}")]
    NotAnInteger(String),
    #[error("negative value {0:?}")]
    Negative(String),
    #[error("not a decimal number: {0:?} (expected e.g. \"0.096\")")]
    NotADecimal(String),
    #[error(
        "unknown taint effect {effect:?} in {taint:?} (expected NoSchedule, PreferNoSchedule or NoExecute)"
    )]
    UnknownTaintEffect { taint: String, effect: String },
    #[error("malformed taint {0:?} (expected key[=value]:Effect)")]
    MalformedTaint(String),
    #[error("malformed entry {0:?} (expected key=value)")]
    MalformedPair(String),
    #[error("invalid label key {0:?}")]
    InvalidKey(String),
    #[error("invalid label value {0:?}")]
    InvalidValue(String),
    #[error("duplicate key {0:?}")]
    DuplicateKey(String),
    #[error("unknown capacity type {0:?} (expected on-demand, spot or reserved)")]
    UnknownCapacityType(String),
    #[error("unknown value {0:?} (expected {1})")]
    UnknownValue(String, &'static str),
}

/// A taint effect as Kubernetes spells it.
pub fn parse_taint_effect(s: &str) -> Option<TaintEffect> {
    match s {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

/// CAS' `/taints` format: `key=value:Effect,key2:Effect` (value optional, spaces around
/// entries ignored, empty input = no taints).
pub fn parse_taints(s: &str) -> Result<Vec<Taint>, ValueError> {
    let mut out = Vec::new();
    for entry in split_list(s) {
        let (kv, effect) = entry
            .rsplit_once(':')
            .ok_or_else(|| ValueError::MalformedTaint(entry.to_string()))?;
        let effect_trimmed = effect.trim();
        let effect =
            parse_taint_effect(effect_trimmed).ok_or_else(|| ValueError::UnknownTaintEffect {
                taint: entry.to_string(),
                effect: effect_trimmed.to_string(),
            })?;
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (kv.trim(), None),
        };
        validate_key(key)?;
        if let Some(v) = value {
            validate_value(v)?;
        }
        out.push(Taint {
            key: key.to_string(),
            value: value.filter(|v| !v.is_empty()).map(str::to_string),
            effect,
        });
    }
    Ok(out)
}

/// CAS' `/labels` format: `k=v,k2=v2`.
pub fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, ValueError> {
    let mut out = BTreeMap::new();
    for entry in split_list(s) {
        let (k, v) = entry
            .split_once('=')
            .ok_or_else(|| ValueError::MalformedPair(entry.to_string()))?;
        let (k, v) = (k.trim(), v.trim());
        validate_key(k)?;
        validate_value(v)?;
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(ValueError::DuplicateKey(k.to_string()));
        }
    }
    Ok(out)
}

/// CAS' `/csi-driver` format: `driver=limit,driver2=limit` (attachable volumes per node).
pub fn parse_csi_limits(s: &str) -> Result<BTreeMap<String, i64>, ValueError> {
    let mut out = BTreeMap::new();
    for entry in split_list(s) {
        let (k, v) = entry
            .split_once('=')
            .ok_or_else(|| ValueError::MalformedPair(entry.to_string()))?;
        let k = k.trim();
        // CSI driver names are DNS-1123 subdomains; a label key without prefix fits them.
        if k.is_empty() || k.len() > 253 || !is_dns_subdomain(k) {
            return Err(ValueError::InvalidKey(k.to_string()));
        }
        let limit = parse_count(v)?;
        if out.insert(k.to_string(), limit).is_some() {
            return Err(ValueError::DuplicateKey(k.to_string()));
        }
    }
    Ok(out)
}

/// A non-negative integer such as a min/max size (`"3"`).
pub fn parse_count(s: &str) -> Result<i64, ValueError> {
    let t = s.trim();
    if let Some(rest) = t.strip_prefix('-')
        && !rest.is_empty()
        && rest.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(ValueError::Negative(s.to_string()));
    }
    let digits = t.strip_prefix('+').unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ValueError::NotAnInteger(s.to_string()));
    }
    digits
        .parse::<i64>()
        .map_err(|_| ValueError::NotAnInteger(s.to_string()))
}

/// A count written as a quantity (CAS parses `maxPods` and `gpu-count` that way).
pub fn parse_count_quantity(s: &str) -> Result<i64, ValueError> {
    Ok(quantity::parse_units(s)?)
}

/// An hourly price: a plain non-negative decimal (`"0.096"`, `"12"`); no exponent, no
/// currency sign, no `inf`/`NaN`.
pub fn parse_price(s: &str) -> Result<f64, ValueError> {
    let t = s.trim();
    if let Some(rest) = t.strip_prefix('-')
        && is_plain_decimal(rest)
    {
        return Err(ValueError::Negative(s.to_string()));
    }
    let body = t.strip_prefix('+').unwrap_or(t);
    if !is_plain_decimal(body) {
        return Err(ValueError::NotADecimal(s.to_string()));
    }
    let v: f64 = body
        .parse()
        .map_err(|_| ValueError::NotADecimal(s.to_string()))?;
    if !v.is_finite() {
        return Err(ValueError::NotADecimal(s.to_string()));
    }
    Ok(v)
}

fn is_plain_decimal(s: &str) -> bool {
    let mut digits = 0;
    let mut points = 0;
    for b in s.bytes() {
        match b {
            b'0'..=b'9' => digits += 1,
            b'.' => points += 1,
            _ => return false,
        }
    }
    digits > 0 && points <= 1 && s.len() <= 64
}

/// `on-demand` | `spot` | `reserved`, Karpenter's spelling.
pub fn parse_capacity_type(s: &str) -> Result<CapacityType, ValueError> {
    match s.trim() {
        "on-demand" => Ok(CapacityType::OnDemand),
        "spot" => Ok(CapacityType::Spot),
        "reserved" => Ok(CapacityType::Reserved),
        _ => Err(ValueError::UnknownCapacityType(s.to_string())),
    }
}

/// Splits a comma-separated list, trimming entries and dropping empty ones (a trailing comma
/// is common in hand-written annotations and harmless).
fn split_list(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// A label (or taint) key: optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters of `[A-Za-z0-9._-]` starting and ending alphanumerically.
pub fn validate_key(key: &str) -> Result<(), ValueError> {
    let bad = || ValueError::InvalidKey(key.to_string());
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && (p.is_empty() || p.len() > 253 || !is_dns_subdomain(p))
    {
        return Err(bad());
    }
    if !is_label_name(name) || name.is_empty() {
        return Err(bad());
    }
    Ok(())
}

/// A label value: empty, or at most 63 characters of `[A-Za-z0-9._-]` starting and ending
/// alphanumerically.
pub fn validate_value(v: &str) -> Result<(), ValueError> {
    if v.is_empty() || is_label_name(v) {
        Ok(())
    } else {
        Err(ValueError::InvalidValue(v.to_string()))
    }
}

/// Whether `s` is a valid label value (see [`validate_value`]).
pub fn is_label_value(s: &str) -> bool {
    validate_value(s).is_ok()
}

fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns_subdomain(s: &str) -> bool {
    s.split('.').all(|part| {
        let b = part.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn taints() {
        assert_eq!(
            parse_taints("gpu=true:NoSchedule, dedicated:NoExecute,").unwrap(),
            vec![
                Taint {
                    key: "gpu".into(),
                    value: Some("true".into()),
                    effect: TaintEffect::NoSchedule
                },
                Taint {
                    key: "dedicated".into(),
                    value: None,
                    effect: TaintEffect::NoExecute
                },
            ]
        );
        assert_eq!(parse_taints("").unwrap(), vec![]);
        assert!(matches!(
            parse_taints("a=b:NoSchedulez"),
            Err(ValueError::UnknownTaintEffect { .. })
        ));
        assert!(matches!(
            parse_taints("a=b"),
            Err(ValueError::MalformedTaint(_))
        ));
        assert!(matches!(
            parse_taints("=b:NoSchedule"),
            Err(ValueError::InvalidKey(_))
        ));
        assert!(matches!(
            parse_taints("a=b c:NoSchedule"),
            Err(ValueError::InvalidValue(_))
        ));
        assert_eq!(
            parse_taints("example.com/x=y:PreferNoSchedule").unwrap()[0].key,
            "example.com/x"
        );
    }

    #[test]
    fn labels_and_csi() {
        let l = parse_labels("kubernetes.io/arch=arm64, tier=gpu").unwrap();
        assert_eq!(l["kubernetes.io/arch"], "arm64");
        assert_eq!(l["tier"], "gpu");
        assert!(matches!(
            parse_labels("tier"),
            Err(ValueError::MalformedPair(_))
        ));
        assert!(matches!(
            parse_labels("a=1,a=2"),
            Err(ValueError::DuplicateKey(_))
        ));
        assert!(matches!(
            parse_labels("a/b/c=1"),
            Err(ValueError::InvalidKey(_))
        ));
        let c = parse_csi_limits("ebs.csi.aws.com=25").unwrap();
        assert_eq!(c["ebs.csi.aws.com"], 25);
        assert!(matches!(
            parse_csi_limits("ebs.csi.aws.com=-1"),
            Err(ValueError::Negative(_))
        ));
        assert!(matches!(
            parse_csi_limits("ebs=x"),
            Err(ValueError::NotAnInteger(_))
        ));
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_count("3"), Ok(3));
        assert_eq!(parse_count(" 0 "), Ok(0));
        assert!(matches!(parse_count("-1"), Err(ValueError::Negative(_))));
        assert!(matches!(
            parse_count("1.5"),
            Err(ValueError::NotAnInteger(_))
        ));
        assert!(matches!(
            parse_count("99999999999999999999"),
            Err(ValueError::NotAnInteger(_))
        ));
        assert_eq!(parse_price("0.096"), Ok(0.096));
        assert_eq!(parse_price("12"), Ok(12.0));
        assert!(matches!(parse_price("-0.1"), Err(ValueError::Negative(_))));
        assert!(matches!(
            parse_price("NaN"),
            Err(ValueError::NotADecimal(_))
        ));
        assert!(matches!(
            parse_price("inf"),
            Err(ValueError::NotADecimal(_))
        ));
        assert!(matches!(
            parse_price("1e3"),
            Err(ValueError::NotADecimal(_))
        ));
        assert!(matches!(parse_price("$1"), Err(ValueError::NotADecimal(_))));
        assert_eq!(parse_capacity_type("spot"), Ok(CapacityType::Spot));
        assert!(parse_capacity_type("preemptible").is_err());
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,80}") {
            let _ = parse_taints(&s);
            let _ = parse_labels(&s);
            let _ = parse_csi_limits(&s);
            let _ = parse_count(&s);
            let _ = parse_count_quantity(&s);
            let _ = parse_price(&s);
            let _ = parse_capacity_type(&s);
        }

        #[test]
        fn taint_shaped_noise_never_panics(s in "([a-z./=:, -]|NoSchedule|NoExecute|PreferNoSchedule){0,30}") {
            let _ = parse_taints(&s);
            let _ = parse_labels(&s);
        }

        #[test]
        fn valid_taints_round_trip(
            key in "[a-z][a-z0-9]{0,10}",
            value in proptest::option::of("[a-z0-9]{1,10}"),
            effect in 0usize..3,
        ) {
            let effect_s = ["NoSchedule", "PreferNoSchedule", "NoExecute"][effect];
            let text = match &value {
                Some(v) => format!("{key}={v}:{effect_s}"),
                None => format!("{key}:{effect_s}"),
            };
            let parsed = parse_taints(&text).unwrap();
            prop_assert_eq!(parsed.len(), 1);
            prop_assert_eq!(&parsed[0].key, &key);
            prop_assert_eq!(&parsed[0].value, &value);
        }

        #[test]
        fn prices_are_finite_and_non_negative(s in "[-+]?[0-9]{0,30}(\\.[0-9]{0,30})?") {
            if let Ok(p) = parse_price(&s) {
                prop_assert!(p.is_finite() && p >= 0.0);
            }
        }
    }
}
