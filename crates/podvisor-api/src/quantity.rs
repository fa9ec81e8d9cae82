//! Resource quantities (`k8s.io/apimachinery/pkg/api/resource`): parsing,
//! comparison and the canonical text Kubernetes prints in messages.

use std::cmp::Ordering;

/// The message the API server gives for an unparseable quantity.
pub const QUANTITY_SYNTAX_MSG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A parsed quantity, held exactly as nano-units (10^-9), saturating at
/// the `i128` range (Kubernetes itself caps at 2^63-1 units).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Quantity {
    nanos: i128,
    binary: bool,
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

const NANO: i128 = 1_000_000_000;

impl Quantity {
    /// A quantity of `n` whole units.
    #[must_use]
    pub fn from_units(n: i64) -> Quantity {
        Quantity {
            nanos: i128::from(n) * NANO,
            binary: false,
        }
    }

    /// A quantity of `n` thousandths.
    #[must_use]
    pub fn from_millis(n: i64) -> Quantity {
        Quantity {
            nanos: i128::from(n) * 1_000_000,
            binary: false,
        }
    }

    /// Whether the quantity is zero.
    #[must_use]
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Kubernetes' `Value()`: whole units, rounded up away from zero, saturating at `i64`.
    #[must_use]
    pub fn value(&self) -> i64 {
        scaled(self.nanos, NANO)
    }

    /// Kubernetes' `MilliValue()`: thousandths, rounded up away from zero, saturating.
    #[must_use]
    pub fn milli_value(&self) -> i64 {
        scaled(self.nanos, 1_000_000)
    }

    /// The sum of two quantities (saturating).
    #[must_use]
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
            binary: self.binary && other.binary,
        }
    }

    /// Parses `<signedNumber><suffix>`; `None` when malformed.
    #[must_use]
    pub fn parse(s: &str) -> Option<Quantity> {
        let s = s.trim();
        let (negative, rest) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(num_end);
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
            return None;
        }
        // (multiplier numerator, 10-exponent) applied to the mantissa.
        let (mul, exp10, binary): (i128, i32, bool) = match suffix {
            "" => (1, 0, false),
            "n" => (1, -9, false),
            "u" => (1, -6, false),
            "m" => (1, -3, false),
            "k" => (1, 3, false),
            "M" => (1, 6, false),
            "G" => (1, 9, false),
            "T" => (1, 12, false),
            "P" => (1, 15, false),
            "E" => (1, 18, false),
            "Ki" => (1 << 10, 0, true),
            "Mi" => (1 << 20, 0, true),
            "Gi" => (1 << 30, 0, true),
            "Ti" => (1 << 40, 0, true),
            "Pi" => (1 << 50, 0, true),
            "Ei" => (1 << 60, 0, true),
            s if s.starts_with(['e', 'E']) => {
                let e: i32 = s[1..].parse().ok()?;
                (1, e, false)
            }
            _ => return None,
        };
        let digits: String = format!("{int_part}{frac_part}");
        let mut mantissa: i128 = 0;
        for d in digits.bytes() {
            mantissa = mantissa
                .saturating_mul(10)
                .saturating_add(i128::from(d - b'0'));
        }
        let frac_len = i32::try_from(frac_part.len()).ok()?;
        // value = mantissa * mul * 10^(exp10 - frac_len); in nanos add 9.
        let shift = exp10 - frac_len + 9;
        let mut nanos = mantissa.saturating_mul(mul);
        if shift >= 0 {
            for _ in 0..shift.min(60) {
                nanos = nanos.saturating_mul(10);
            }
        } else {
            // Round up like Kubernetes does for sub-nano precision.
            let div = 10i128
                .checked_pow(u32::try_from(-shift).ok()?)
                .unwrap_or(i128::MAX);
            let q = nanos / div;
            nanos = if nanos % div == 0 { q } else { q + 1 };
        }
        if negative {
            nanos = -nanos;
        }
        Some(Quantity { nanos, binary })
    }

    /// Whether the value is below zero.
    #[must_use]
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// Whether the value is a whole number of units.
    #[must_use]
    pub fn is_integer(&self) -> bool {
        self.nanos % NANO == 0
    }

    /// The canonical text Kubernetes' `Quantity.String()` would print for a
    /// value in the same format family (binary or decimal SI).
    #[must_use]
    pub fn canonical(&self) -> String {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.unsigned_abs();
        let nano = NANO.unsigned_abs();
        if self.binary && abs.is_multiple_of(nano) && abs / nano >= 1024 {
            let mut units = abs / nano;
            let mut suffix = 0;
            while units.is_multiple_of(1024) && suffix < 6 {
                units /= 1024;
                suffix += 1;
            }
            let names = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
            return format!("{sign}{units}{}", names[suffix]);
        }
        if abs == 0 {
            return "0".to_owned();
        }
        // Decimal SI: the largest power-of-1000 suffix leaving an integer.
        let suffixes = [
            (-9, "n"),
            (-6, "u"),
            (-3, "m"),
            (0, ""),
            (3, "k"),
            (6, "M"),
            (9, "G"),
            (12, "T"),
            (15, "P"),
            (18, "E"),
        ];
        let mut best = (abs, "n");
        for (exp, name) in suffixes {
            let div = 10u128.pow(u32::try_from(exp + 9).unwrap_or(0));
            if abs.is_multiple_of(div) {
                best = (abs / div, name);
            } else {
                break;
            }
        }
        format!("{sign}{}{}", best.0, best.1)
    }
}

fn scaled(nanos: i128, unit: i128) -> i64 {
    let q = nanos / unit;
    let r = nanos % unit;
    let v = if r > 0 {
        q + 1
    } else if r < 0 {
        q - 1
    } else {
        q
    };
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_compares() {
        let q = |s| Quantity::parse(s).unwrap();
        assert_eq!(q("1"), q("1000m"));
        assert!(q("500m") < q("1"));
        assert_eq!(q("1Gi"), q("1024Mi"));
        assert!(q("1G") < q("1Gi"));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("0.5"), q("500m"));
        assert!(q("-1").is_negative());
        assert!(Quantity::parse("abc").is_none());
        assert!(Quantity::parse("1.2.3").is_none());
        assert!(Quantity::parse("1Zi").is_none());
    }

    #[test]
    fn canonical_text() {
        let c = |s| Quantity::parse(s).unwrap().canonical();
        assert_eq!(c("0.5"), "500m");
        assert_eq!(c("2000m"), "2");
        assert_eq!(c("1.5Gi"), "1536Mi");
        assert_eq!(c("128Mi"), "128Mi");
        assert_eq!(c("1000"), "1k");
        assert_eq!(c("0"), "0");
    }
}
