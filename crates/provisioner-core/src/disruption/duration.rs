//! Go `time.Duration` strings, as Kubernetes users write them in annotations.
//!
//! `karpenter.sh/do-not-disrupt` may hold a duration (Karpenter #2874: the pod is protected for
//! that long after it started), and Karpenter parses it with Go's `time.ParseDuration`. We
//! accept exactly that grammar so a value that works upstream works here and a value upstream
//! rejects is rejected here too: an optional sign, then one or more `<decimal><unit>` pairs
//! with units `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`; `"0"` alone is allowed.

use thiserror::Error;

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("invalid duration {0:?}: expected e.g. \"90s\", \"5m\", \"2h30m\"")]
    Invalid(String),
    #[error("unknown unit {unit:?} in duration {value:?}")]
    UnknownUnit { value: String, unit: String },
}

/// Parses a Go duration into seconds (fractional seconds are kept).
pub fn parse_go_duration(s: &str) -> Result<f64, DurationError> {
    let orig = s;
    let mut s = s.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let mut sign = 1.0;
    if let Some(rest) = s.strip_prefix('-') {
        sign = -1.0;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(0.0);
    }
    if s.is_empty() {
        return Err(DurationError::Invalid(orig.to_string()));
    }
    let mut total = 0.0f64;
    while !s.is_empty() {
        // The number: digits, optionally a '.' and more digits; at least one digit overall.
        let num_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let num = &s[..num_end];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(DurationError::Invalid(orig.to_string()));
        }
        let value: f64 = num
            .parse()
            .map_err(|_| DurationError::Invalid(orig.to_string()))?;
        s = &s[num_end..];
        let unit_end = s
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(s.len());
        let unit = &s[..unit_end];
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(DurationError::Invalid(orig.to_string())),
            _ => {
                return Err(DurationError::UnknownUnit {
                    value: orig.to_string(),
                    unit: unit.to_string(),
                });
            }
        };
        total += value * scale;
        s = &s[unit_end..];
    }
    Ok(sign * total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_go_duration("5m"), Ok(300.0));
        assert_eq!(parse_go_duration("2h30m"), Ok(9000.0));
        assert_eq!(parse_go_duration("1h30m45s"), Ok(5445.0));
        assert_eq!(parse_go_duration("1.5h"), Ok(5400.0));
        assert_eq!(parse_go_duration("300ms"), Ok(0.3));
        assert_eq!(parse_go_duration("0"), Ok(0.0));
        assert_eq!(parse_go_duration("-1m"), Ok(-60.0));
    }

    #[test]
    fn rejects_what_go_rejects() {
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("true").is_err());
        assert!(parse_go_duration("5").is_err());
        assert!(parse_go_duration("5d").is_err());
        assert!(parse_go_duration("h").is_err());
        assert!(parse_go_duration("1..5h").is_err());
        assert!(parse_go_duration("-").is_err());
    }
}
