//! Kubernetes resource quantities (`"100m"`, `"4Gi"`, `"1.5"`, `"2e3"`) to integers.
//!
//! Annotations and infrastructure templates carry capacity as quantity strings written by
//! people and by other controllers, so this parser is total: every input gives a value or a
//! typed error, never a panic (proptest-fuzzed below). Values are computed exactly in 128-bit
//! integers and rounded *up* to the base unit, as the API server does, so `"0.5m"` CPU is 1
//! millicore, never 0.
//!
//! One parser for the whole workspace (the CAPI adapter's annotations, the snapshot
//! conversion, the simulator's scenarios): an `f64` parser used to stand beside it and could
//! disagree on values such as `0.1` or very large byte counts.

use thiserror::Error;

/// Why a quantity string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    #[error("empty quantity")]
    Empty,
    #[error("not a quantity: {0:?} (expected e.g. \"2\", \"500m\", \"4Gi\", \"1.5e3\")")]
    Invalid(String),
    #[error("negative quantity {0:?}")]
    Negative(String),
    #[error("quantity {0:?} is too large")]
    Overflow(String),
}

/// Parses a quantity into whole base units (bytes, pods, GPUs...), rounding up.
pub fn parse_units(s: &str) -> Result<i64, QuantityError> {
    parse_scaled(s, 0)
}

/// Parses a quantity into thousandths of the base unit (CPU millicores), rounding up.
pub fn parse_milli(s: &str) -> Result<i64, QuantityError> {
    parse_scaled(s, 3)
}

/// Parses `s` and returns `ceil(value * 10^scale)` as a non-negative `i64`.
fn parse_scaled(raw: &str, scale: i32) -> Result<i64, QuantityError> {
    let s = raw.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty);
    }
    let invalid = || QuantityError::Invalid(raw.to_string());
    let overflow = || QuantityError::Overflow(raw.to_string());

    let bytes = s.as_bytes();
    let mut i = 0;
    let mut negative = false;
    if bytes[0] == b'+' || bytes[0] == b'-' {
        negative = bytes[0] == b'-';
        i = 1;
    }
    // Mantissa digits, with the position of the decimal point.
    let mut mantissa: u128 = 0;
    let mut digits = 0usize;
    let mut frac_digits: i64 = 0;
    let mut seen_point = false;
    let mut significant = 0usize;
    // Zeros after the first non-zero digit are held back until another non-zero digit
    // follows, so `1.000...0` (any length) stays exact instead of overflowing.
    let mut pending_zeros: i64 = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'0'..=b'9' => {
                let d = u128::from(bytes[i] - b'0');
                digits += 1;
                if seen_point {
                    frac_digits = frac_digits.saturating_add(1);
                }
                if d == 0 {
                    if mantissa != 0 {
                        pending_zeros = pending_zeros.saturating_add(1);
                    }
                } else {
                    while pending_zeros > 0 {
                        significant += 1;
                        // 38 significant digits always fit in u128 (< 3.4e38).
                        if significant > 38 {
                            return Err(overflow());
                        }
                        mantissa *= 10;
                        pending_zeros -= 1;
                    }
                    significant += 1;
                    if significant > 38 {
                        return Err(overflow());
                    }
                    mantissa = mantissa * 10 + d;
                }
            }
            b'.' if !seen_point => seen_point = true,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return Err(invalid());
    }
    // Suffix.
    let suffix = &s[i..];
    let (mut exp10, exp2): (i64, u32) = match suffix {
        "" => (0, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other if other.starts_with('e') || other.starts_with('E') => {
            let exp = &other[1..];
            let unsigned = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            // Anything beyond a few hundred is overflow or zero anyway.
            let value: i64 = if unsigned.len() > 6 {
                if exp.starts_with('-') {
                    -1_000_000
                } else {
                    1_000_000
                }
            } else {
                exp.parse().map_err(|_| invalid())?
            };
            (value, 0)
        }
        _ => return Err(invalid()),
    };
    if negative && mantissa != 0 {
        return Err(QuantityError::Negative(raw.to_string()));
    }
    if mantissa == 0 {
        return Ok(0);
    }
    exp10 = exp10
        .saturating_add(i64::from(scale))
        .saturating_add(pending_zeros)
        .saturating_sub(frac_digits);

    let mut value = mantissa.checked_shl(exp2).ok_or_else(overflow)?;
    if exp2 > 0 && value >> exp2 != mantissa {
        return Err(overflow());
    }
    if exp10 >= 0 {
        for _ in 0..exp10 {
            value = value.checked_mul(10).ok_or_else(overflow)?;
            if value > i64::MAX as u128 {
                return Err(overflow());
            }
        }
    } else {
        let mut rounded_up = false;
        for _ in 0..(-exp10) {
            if value == 0 {
                break;
            }
            if value % 10 != 0 {
                rounded_up = true;
            }
            value /= 10;
        }
        if rounded_up {
            value += 1;
        }
    }
    i64::try_from(value).map_err(|_| overflow())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_usual_forms() {
        assert_eq!(parse_milli("2"), Ok(2000));
        assert_eq!(parse_milli("500m"), Ok(500));
        assert_eq!(parse_milli("1.5"), Ok(1500));
        assert_eq!(parse_milli("0.5m"), Ok(1));
        assert_eq!(parse_milli(".25"), Ok(250));
        assert_eq!(parse_milli("2."), Ok(2000));
        assert_eq!(parse_units("4Gi"), Ok(4 << 30));
        assert_eq!(parse_units("1.5Gi"), Ok(3 << 29));
        assert_eq!(parse_units("128974848"), Ok(128_974_848));
        assert_eq!(parse_units("129e6"), Ok(129_000_000));
        assert_eq!(parse_units("129M"), Ok(129_000_000));
        assert_eq!(parse_units("1k"), Ok(1000));
        assert_eq!(parse_units("1E3"), Ok(1000));
        assert_eq!(parse_units("1e-3"), Ok(1));
        assert_eq!(parse_units("+3"), Ok(3));
        assert_eq!(parse_units(" 8Gi "), Ok(8 << 30));
        assert_eq!(parse_units("0"), Ok(0));
        assert_eq!(parse_units("-0"), Ok(0));
        assert!(matches!(
            parse_units("8Ei"),
            Err(QuantityError::Overflow(_))
        ));
        assert_eq!(
            parse_units("1.000000000000000000000000000000000000000000000"),
            Ok(1)
        );
        assert_eq!(
            parse_units("10000000000000000000000000000000000000000000e-40"),
            Ok(1000)
        );
        assert_eq!(parse_units("7Ei"), Ok(7 << 60));
    }

    #[test]
    fn rejects_bad_input_with_a_reason() {
        assert_eq!(parse_units(""), Err(QuantityError::Empty));
        assert!(matches!(parse_units("abc"), Err(QuantityError::Invalid(_))));
        assert!(matches!(parse_units("4GB"), Err(QuantityError::Invalid(_))));
        assert!(matches!(
            parse_units("1.2.3"),
            Err(QuantityError::Invalid(_))
        ));
        assert!(matches!(parse_units("."), Err(QuantityError::Invalid(_))));
        assert!(matches!(parse_units("1e"), Err(QuantityError::Invalid(_))));
        assert!(matches!(
            parse_units("-4Gi"),
            Err(QuantityError::Negative(_))
        ));
        assert!(matches!(
            parse_units("1e400"),
            Err(QuantityError::Overflow(_))
        ));
        assert!(matches!(
            parse_units("99999999999999999999"),
            Err(QuantityError::Overflow(_))
        ));
        assert_eq!(parse_units("1e-999999999"), Ok(1));
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,40}") {
            let _ = parse_units(&s);
            let _ = parse_milli(&s);
        }

        #[test]
        fn never_panics_on_quantity_shaped_noise(s in "[-+]?[0-9.]{0,45}(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][-+]?[0-9]{0,12})?") {
            let _ = parse_units(&s);
            let _ = parse_milli(&s);
        }

        #[test]
        fn integers_round_trip(n in 0i64..=i64::MAX / 1000) {
            prop_assert_eq!(parse_units(&n.to_string()), Ok(n));
            prop_assert_eq!(parse_milli(&n.to_string()), Ok(n * 1000));
            prop_assert_eq!(parse_milli(&format!("{n}m")), Ok(n));
        }

        #[test]
        fn binary_suffixes_multiply(n in 0i64..1024, shift in 0usize..5) {
            let suffix = ["Ki", "Mi", "Gi", "Ti", "Pi"][shift];
            prop_assert_eq!(parse_units(&format!("{n}{suffix}")), Ok(n << (10 * (shift + 1))));
        }
    }
}
