//! Kubernetes resource quantities (`500m`, `2`, `1.5Gi`, `128974848`, `1e3`) parsed into the
//! integer units the core counts in (millicores for CPU, bytes for memory, plain counts for
//! everything else), so scenario files can use the same spelling as pod specs. The parsing is
//! `kcapi-quantity`'s (exact, rounding up as the API server does); this module maps its
//! errors to the simulator's and formats quantities back.

use crate::error::SimError;

fn err(s: &str) -> impl Fn(kcapi_quantity::QuantityError) -> SimError + '_ {
    move |_| SimError::Quantity(s.to_string())
}

/// CPU in millicores.
pub fn cpu_milli(s: &str) -> Result<i64, SimError> {
    kcapi_quantity::parse_milli(s).map_err(err(s))
}

/// A byte count or plain count.
pub fn count(s: &str) -> Result<i64, SimError> {
    kcapi_quantity::parse_units(s).map_err(err(s))
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
    fn exact_where_floating_point_was_not() -> Result<(), SimError> {
        // 2^53 + 1 bytes: an f64 parser rounded it to 2^53.
        assert_eq!(count("9007199254740993")?, 9_007_199_254_740_993);
        assert_eq!(cpu_milli("0.0005")?, 1, "rounded up to a millicore");
        assert_eq!(count("1.5Gi")?, 3 << 29);
        Ok(())
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_cpu(2000), "2");
        assert_eq!(fmt_cpu(250), "250m");
        assert_eq!(fmt_bytes(3 << 30), "3Gi");
        assert_eq!(fmt_bytes(100 << 20), "100Mi");
    }
}
