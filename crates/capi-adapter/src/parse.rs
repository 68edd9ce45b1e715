//! Parsers for the annotation values the adapter reads (taints, labels, CSI limits, integers,
//! prices, capacity types, sizes), with the Cluster Autoscaler's (CAS) semantics.
//!
//! These strings are hand-written by users, so every parser is total: a value or a
//! [`ValueError`] saying what is wrong, never a panic (proptest-fuzzed below). List
//! annotations (`labels`, `taints`, `csi-driver`) are read entry by entry as CAS reads them:
//! a bad entry is skipped and reported ([`BadEntry`]) while the good ones are kept, so one
//! typo never hides a node group that works under CAS. The caller attaches the object and key
//! to make a [`crate::Problem`]. Values quoted in errors are clipped ([`clip`]) so a hostile
//! 18 KB value never ends up repeated in a condition or event.

use std::collections::BTreeMap;

use provisioner_core::{CapacityType, Taint, TaintEffect};
use thiserror::Error;

use crate::keys;
use crate::quantity::QuantityError;

/// What is wrong with one annotation or field value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValueError {
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    #[error("not an integer: {0:?} (expected decimal digits, e.g. \"110\")")]
    NotAnInteger(String),
    #[error("negative value {0:?}")]
    Negative(String),
    #[error("value {value:?} is outside the plausible range {min}..={max}")]
    OutOfRange { value: String, min: i64, max: i64 },
    #[error("not a decimal number: {0:?} (expected e.g. \"0.096\")")]
    NotADecimal(String),
    #[error(
        "unknown taint effect {effect:?} in {taint:?} (expected NoSchedule, PreferNoSchedule or NoExecute); kept as NoSchedule"
    )]
    UnknownTaintEffect { taint: String, effect: String },
    #[error(
        "taint {0:?} has no effect (expected key[=value]:Effect); kept as NoSchedule, CAS would ignore it"
    )]
    MissingTaintEffect(String),
    #[error(
        "malformed taint {0:?} (expected key[=value]:Effect); kept as a NoSchedule taint so no pod lands on the group by mistake"
    )]
    MalformedTaint(String),
    #[error("malformed entry {0:?} (expected key=value)")]
    MalformedPair(String),
    #[error("invalid label key {0:?}")]
    InvalidKey(String),
    #[error("invalid label value {0:?}")]
    InvalidValue(String),
    #[error("invalid zone {0:?} (a zone is a label value: at most 63 of [A-Za-z0-9._-])")]
    InvalidZone(String),
    #[error("duplicate key {0:?}: the last entry wins")]
    DuplicateKey(String),
    #[error("unknown capacity type {0:?} (expected on-demand, spot or reserved)")]
    UnknownCapacityType(String),
    #[error("unknown value {0:?} (expected {1})")]
    UnknownValue(String, &'static str),
}

/// The longest piece of a user value quoted in a message.
pub const CLIP: usize = 64;

/// `s` if short, else its first [`CLIP`] characters and how long it was: messages name the
/// offending value without repeating a hostile one in full.
pub fn clip(s: &str) -> String {
    if s.chars().count() <= CLIP {
        return s.to_string();
    }
    let head: String = s.chars().take(CLIP).collect();
    format!("{head}...({} bytes)", s.len())
}

/// One entry of a list annotation that was skipped (or, for taints, kept conservatively).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadEntry {
    /// The entry as written (clipped).
    pub entry: String,
    pub error: ValueError,
}

/// A list annotation read entry by entry: what was understood, and what was not.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entries<T> {
    pub value: T,
    pub bad: Vec<BadEntry>,
}

impl<T> Entries<T> {
    fn bad(&mut self, entry: &str, error: ValueError) {
        self.bad.push(BadEntry {
            entry: clip(entry),
            error,
        });
    }
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

/// The taint we keep for an entry whose key cannot be read: only pods that tolerate every
/// taint land on such a group (see [`parse_taints`]).
pub fn unparsed_taint() -> Taint {
    Taint {
        key: keys::ours::UNPARSED_TAINT.to_string(),
        value: None,
        effect: TaintEffect::NoSchedule,
    }
}

/// CAS' `/taints` format: `key=value:Effect,key2:Effect` (comma-separated; spaces around
/// entries and parts ignored; empty entries skipped).
///
/// The annotation describes taints the group's nodes really carry (the bootstrap config puts
/// them there), so an entry we cannot read must not become a node *without* that taint: pods
/// would be placed on a new node that then refuses them, and it would launch again. CAS skips
/// such entries (or keeps them with an effect the scheduler ignores); we keep them as
/// conservatively as we can and report them:
/// - unknown or missing effect: the taint with effect `NoSchedule`;
/// - invalid value: the taint without value, `NoSchedule` unless the effect was good;
/// - unreadable key or shape: [`unparsed_taint`], which only tolerate-everything pods pass.
pub fn parse_taints(s: &str) -> Entries<Vec<Taint>> {
    let mut out = Entries::<Vec<Taint>>::default();
    for entry in split_list(s) {
        let parts: Vec<&str> = entry.split(':').collect();
        let (kv, effect) = match parts.as_slice() {
            [kv] => (*kv, None),
            [kv, effect] => (*kv, Some(effect.trim())),
            _ => {
                out.bad(entry, ValueError::MalformedTaint(clip(entry)));
                push_taint(&mut out.value, unparsed_taint());
                continue;
            }
        };
        let kvs: Vec<&str> = kv.split('=').map(str::trim).collect();
        let (key, value) = match kvs.as_slice() {
            [k] => (*k, None),
            [k, v] => (*k, Some(*v)),
            _ => {
                out.bad(entry, ValueError::MalformedTaint(clip(entry)));
                push_taint(&mut out.value, unparsed_taint());
                continue;
            }
        };
        if validate_key(key).is_err() {
            out.bad(entry, ValueError::InvalidKey(clip(key)));
            push_taint(&mut out.value, unparsed_taint());
            continue;
        }
        let mut effect_ok = true;
        let effect = match effect {
            None => {
                effect_ok = false;
                out.bad(entry, ValueError::MissingTaintEffect(clip(entry)));
                TaintEffect::NoSchedule
            }
            Some(e) => parse_taint_effect(e).unwrap_or_else(|| {
                effect_ok = false;
                out.bad(
                    entry,
                    ValueError::UnknownTaintEffect {
                        taint: clip(entry),
                        effect: clip(e),
                    },
                );
                TaintEffect::NoSchedule
            }),
        };
        let value = match value {
            Some(v) if validate_value(v).is_err() => {
                out.bad(entry, ValueError::InvalidValue(clip(v)));
                let effect = if effect_ok {
                    effect
                } else {
                    TaintEffect::NoSchedule
                };
                push_taint(
                    &mut out.value,
                    Taint {
                        key: key.to_string(),
                        value: None,
                        effect,
                    },
                );
                continue;
            }
            v => v.filter(|v| !v.is_empty()).map(str::to_string),
        };
        push_taint(
            &mut out.value,
            Taint {
                key: key.to_string(),
                value,
                effect,
            },
        );
    }
    out
}

/// Adds a taint; one with the same key and effect is replaced (the last entry wins, as a
/// Node cannot carry two).
fn push_taint(taints: &mut Vec<Taint>, t: Taint) {
    taints.retain(|x| !(x.key == t.key && x.effect == t.effect));
    taints.push(t);
}

/// CAS' `/labels` format: `k=v,k2=v2`. Entries without `=` or with an invalid key or value
/// are skipped and reported (CAS skips the former silently and keeps the latter, which no
/// Node could carry); a repeated key keeps the last value, as CAS does.
pub fn parse_labels(s: &str) -> Entries<BTreeMap<String, String>> {
    let mut out = Entries::<BTreeMap<String, String>>::default();
    for entry in split_list(s) {
        let Some((k, v)) = entry.split_once('=') else {
            out.bad(entry, ValueError::MalformedPair(clip(entry)));
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if let Err(e) = validate_key(k).and_then(|()| validate_value(v)) {
            out.bad(entry, e);
            continue;
        }
        if out.value.insert(k.to_string(), v.to_string()).is_some() {
            out.bad(entry, ValueError::DuplicateKey(clip(k)));
        }
    }
    out
}

/// The largest CSI attach limit: CAS parses limits as 32-bit integers.
pub const MAX_CSI_LIMIT: i64 = i32::MAX as i64;

/// CAS' `/csi-driver` format: `driver=limit,driver2=limit` (attachable volumes per node).
/// A limit of `0` means the driver is installed without a limit (`None`), as in CAS; entries
/// with no `=`, an empty or invalid driver name, or a limit that is not an integer in
/// `0..=2147483647` are skipped and reported.
pub fn parse_csi_limits(s: &str) -> Entries<BTreeMap<String, Option<i64>>> {
    let mut out = Entries::<BTreeMap<String, Option<i64>>>::default();
    for entry in split_list(s) {
        let Some((k, v)) = entry.split_once('=') else {
            out.bad(entry, ValueError::MalformedPair(clip(entry)));
            continue;
        };
        let k = k.trim();
        if !is_csi_driver_name(k) {
            out.bad(entry, ValueError::InvalidKey(clip(k)));
            continue;
        }
        let limit = match parse_int(v).and_then(|n| in_range(v, n, 0, MAX_CSI_LIMIT)) {
            Ok(n) => n,
            Err(e) => {
                out.bad(entry, e);
                continue;
            }
        };
        if out
            .value
            .insert(k.to_string(), (limit > 0).then_some(limit))
            .is_some()
        {
            out.bad(entry, ValueError::DuplicateKey(clip(k)));
        }
    }
    out
}

/// A CSI driver name as the API server validates it: at most 63 characters, a DNS-1123
/// subdomain once lower-cased.
fn is_csi_driver_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 63 && is_dns_subdomain(&s.to_ascii_lowercase())
}

/// A base-10 integer as Go's `strconv.ParseInt(s, 10, 64)` reads it (optional sign, digits
/// only: no unit, no fraction, no exponent), with surrounding spaces ignored. CAS reads
/// `maxPods`, `gpu-count` and OpenShift's `memoryMb`, `GPU` and `maxPods` this way, so
/// `"8Gi"`, `"1.5"` and `"1k"` are errors, never 8 PiB or 1000.
pub fn parse_int(s: &str) -> Result<i64, ValueError> {
    let t = s.trim();
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ValueError::NotAnInteger(clip(s)));
    }
    t.parse::<i64>()
        .map_err(|_| ValueError::NotAnInteger(clip(s)))
}

/// `n` if within `min..=max`, else an error quoting `raw`.
pub fn in_range(raw: &str, n: i64, min: i64, max: i64) -> Result<i64, ValueError> {
    if n < 0 && min >= 0 {
        return Err(ValueError::Negative(clip(raw)));
    }
    if n < min || n > max {
        return Err(ValueError::OutOfRange {
            value: clip(raw),
            min,
            max,
        });
    }
    Ok(n)
}

/// A non-negative integer such as a min/max size (`"3"`), as CAS' `strconv.Atoi` plus its
/// negative check.
pub fn parse_count(s: &str) -> Result<i64, ValueError> {
    let n = parse_int(s)?;
    if n < 0 {
        return Err(ValueError::Negative(clip(s)));
    }
    Ok(n)
}

/// An hourly price: a plain non-negative decimal (`"0.096"`, `"12"`); no exponent, no
/// currency sign, no `inf`/`NaN`.
pub fn parse_price(s: &str) -> Result<f64, ValueError> {
    let t = s.trim();
    if let Some(rest) = t.strip_prefix('-')
        && is_plain_decimal(rest)
    {
        return Err(ValueError::Negative(clip(s)));
    }
    let body = t.strip_prefix('+').unwrap_or(t);
    if !is_plain_decimal(body) {
        return Err(ValueError::NotADecimal(clip(s)));
    }
    let v: f64 = body.parse().map_err(|_| ValueError::NotADecimal(clip(s)))?;
    if !v.is_finite() {
        return Err(ValueError::NotADecimal(clip(s)));
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
        _ => Err(ValueError::UnknownCapacityType(clip(s))),
    }
}

/// Splits a comma-separated list, trimming entries and dropping empty ones (a trailing comma
/// is common in hand-written annotations and harmless).
fn split_list(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// A label (or taint, or resource) key as Kubernetes' `IsQualifiedName` checks it: an
/// optional DNS-1123 subdomain prefix (lower case, at most 253 characters) and `/`, then a
/// name of at most 63 characters of `[A-Za-z0-9._-]` starting and ending alphanumerically.
pub fn validate_key(key: &str) -> Result<(), ValueError> {
    let bad = || ValueError::InvalidKey(clip(key));
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && (p.is_empty() || p.len() > 253 || !is_dns_subdomain(p))
    {
        return Err(bad());
    }
    if !is_label_name(name) {
        return Err(bad());
    }
    Ok(())
}

/// A label value as Kubernetes' `IsValidLabelValue` checks it: empty, or at most 63
/// characters of `[A-Za-z0-9._-]` starting and ending alphanumerically.
pub fn validate_value(v: &str) -> Result<(), ValueError> {
    if v.is_empty() || is_label_name(v) {
        Ok(())
    } else {
        Err(ValueError::InvalidValue(clip(v)))
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

/// A DNS-1123 subdomain: dot-separated labels of lower-case alphanumerics and `-`, each
/// starting and ending alphanumerically.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && is_lower_alnum(b[0])
                && is_lower_alnum(b[b.len() - 1])
                && b.iter().all(|c| is_lower_alnum(*c) || *c == b'-')
        })
}

fn is_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
