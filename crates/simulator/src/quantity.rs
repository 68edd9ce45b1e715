//! Kubernetes resource quantities (`500m`, `2`, `1.5Gi`, `128974848`, `1e3`) parsed into the
//! integer units the core counts in (millicores for CPU, bytes for memory, plain counts for
//! everything else), so scenario files can use the same spelling as pod specs.

use crate::error::SimError;

/// Parse a quantity into its value scaled by `scale` (1000 for millicores, 1 for bytes),
/// rounded up as the kube-scheduler does for requests.
pub fn parse_scaled(s: &str, scale: f64) -> Result<i64, SimError> {
    let t = s.trim();
    let bad = || SimError::Quantity(s.to_string());
    if t.is_empty() {
        return Err(bad());
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let mult: f64 = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "u" => 1e-6,
        "n" => 1e-9,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0_f64.powi(4),
        "Pi" => 1024.0_f64.powi(5),
        "Ei" => 1024.0_f64.powi(6),
        e if e.starts_with('e') || e.starts_with('E') => {
            let exp: i32 = e[1..].parse().map_err(|_| bad())?;
            10f64.powi(exp)
        }
        _ => return Err(bad()),
    };
    let n: f64 = num.parse().map_err(|_| bad())?;
    if !n.is_finite() || n < 0.0 {
        return Err(bad());
    }
    let v = n * mult * scale;
    // Round to the nearest integer first so `0.1` CPU is exactly 100m, then up for fractions.
    let r = v.round();
    let out = if (v - r).abs() < 1e-6 { r } else { v.ceil() };
    if out > i64::MAX as f64 {
        return Err(bad());
    }
    Ok(out as i64)
}

/// CPU in millicores.
pub fn cpu_milli(s: &str) -> Result<i64, SimError> {
    parse_scaled(s, 1000.0)
}

/// A byte count or plain count.
pub fn count(s: &str) -> Result<i64, SimError> {
    parse_scaled(s, 1.0)
}

/// Format millicores the short way users write them.
pub fn fmt_cpu(milli: i64) -> String {
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else {
        format!("{milli}m")
    }
}

/// Format bytes in the largest binary unit that divides them.
pub fn fmt_bytes(b: i64) -> String {
    const GI: i64 = 1 << 30;
    const MI: i64 = 1 << 20;
    const KI: i64 = 1 << 10;
    if b != 0 && b % GI == 0 {
        format!("{}Gi", b / GI)
    } else if b != 0 && b % MI == 0 {
        format!("{}Mi", b / MI)
    } else if b != 0 && b % KI == 0 {
        format!("{}Ki", b / KI)
    } else {
        format!("{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_forms() -> Result<(), SimError> {
        assert_eq!(cpu_milli("500m")?, 500);
        assert_eq!(cpu_milli("2")?, 2000);
        assert_eq!(cpu_milli("0.1")?, 100);
        assert_eq!(cpu_milli("1.5")?, 1500);
        assert_eq!(count("1Gi")?, 1 << 30);
        assert_eq!(count("128974848")?, 128_974_848);
        assert_eq!(count("1e3")?, 1000);
        assert_eq!(count("1k")?, 1000);
        assert_eq!(count("512Mi")?, 512 << 20);
        Ok(())
    }

    #[test]
    fn rejects_garbage() {
        assert!(cpu_milli("").is_err());
        assert!(cpu_milli("abc").is_err());
        assert!(cpu_milli("1Zi").is_err());
        assert!(cpu_milli("-1").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_cpu(2000), "2");
        assert_eq!(fmt_cpu(250), "250m");
        assert_eq!(fmt_bytes(3 << 30), "3Gi");
        assert_eq!(fmt_bytes(100 << 20), "100Mi");
    }
}
