//! Durations as Karpenter writes them: Go `time.Duration` strings ("720h", "1h30m", "30s"),
//! optionally the word "Never".
//!
//! The types keep the text exactly as written so that a manifest read and written back is
//! unchanged (Go's own formatting would turn "720h" into "720h0m0s"); parsing is explicit and
//! returns an error value instead of panicking, because these strings come from users.

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a duration string could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {why}")]
pub struct DurationError {
    /// The text that failed to parse.
    pub text: String,
    /// What was wrong with it.
    pub why: &'static str,
}

/// Parses a Go duration string (`time.ParseDuration`): a sequence of decimal numbers with
/// optional fractions and units ns, us (µs), ms, s, m, h; "0" alone is zero. Negative
/// durations are rejected: no Karpenter field accepts them.
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let err = |why| DurationError {
        text: text.to_string(),
        why,
    };
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.starts_with('-') {
        return Err(err("negative durations are not allowed"));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(err("empty"));
    }
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(err("expected a number"));
        }
        let (number, after) = rest.split_at(number_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "" => return Err(err("missing unit")),
            _ => return Err(err("unknown unit")),
        };
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && frac.is_empty() {
            return Err(err("expected a number"));
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| err("number out of range"))?
        };
        let mut nanos = whole
            .checked_mul(unit_nanos)
            .ok_or_else(|| err("number out of range"))?;
        let mut scale = unit_nanos;
        for digit in frac.chars() {
            scale /= 10;
            nanos += u128::from(digit.to_digit(10).ok_or_else(|| err("bad fraction"))?) * scale;
        }
        total_nanos = total_nanos
            .checked_add(nanos)
            .ok_or_else(|| err("number out of range"))?;
        rest = after;
    }
    if total_nanos > i64::MAX as u128 {
        return Err(err("number out of range"));
    }
    let secs = (total_nanos / 1_000_000_000) as u64;
    let sub = (total_nanos % 1_000_000_000) as u32;
    Ok(Duration::new(secs, sub))
}

/// A duration that may be "Never" (Karpenter's `NillableDuration`), as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct NillableDuration(pub String);

impl NillableDuration {
    /// The spelling of "no duration": the event never happens.
    pub const NEVER: &'static str = "Never";

    /// `Ok(None)` for "Never", `Ok(Some(d))` for a duration.
    pub fn parse(&self) -> Result<Option<Duration>, DurationError> {
        if self.0 == Self::NEVER {
            Ok(None)
        } else {
            parse_go_duration(&self.0).map(Some)
        }
    }

    /// "Never".
    pub fn never() -> Self {
        Self(Self::NEVER.to_string())
    }
}

impl From<&str> for NillableDuration {
    fn from(text: &str) -> Self {
        Self(text.to_string())
    }
}

impl fmt::Display for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let cases = [
            ("720h", 720 * 3600),
            ("1h30m", 5400),
            ("30s", 30),
            ("0s", 0),
            ("0", 0),
            ("720h0m0s", 720 * 3600),
        ];
        for (text, secs) in cases {
            assert_eq!(
                parse_go_duration(text),
                Ok(Duration::from_secs(secs)),
                "{text}"
            );
        }
        assert_eq!(parse_go_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "h", "5", "5x", "-1s", "1h-5m", ".s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn never_is_none() {
        assert_eq!(NillableDuration::never().parse(), Ok(None));
        assert_eq!(
            NillableDuration::from("10m").parse(),
            Ok(Some(Duration::from_secs(600)))
        );
    }
}
