//! Exact Kubernetes resource quantities: parsing, addition, multiplication, canonical form.
//!
//! Gang sizing adds up requests such as `500m` CPU and `1.5Gi` memory; floating point would
//! make `minResources` differ from what Volcano computes. Values are held as integers in
//! nano-units (10⁻⁹), which covers every quantity Kubernetes can represent (at most 2⁶³−1 in
//! magnitude, at most nine decimal places after Kubernetes' own rounding). Written by hand
//! rather than taken from `kube_quantity`, which has no decimal-exponent forms (`1e3`) and does
//! not print Kubernetes' canonical form.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;
use std::ops::{Add, AddAssign};
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

const NANO: i128 = 1_000_000_000;
/// Largest magnitude Kubernetes accepts, in nano-units: (2⁶³ − 1) × 10⁹.
const MAX_NANOS: i128 = (i64::MAX as i128) * NANO;

/// How a quantity is written; sums keep the notation of their first term, as Kubernetes does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Notation {
    /// `Ki`, `Mi`, … (powers of 1024).
    BinarySi,
    /// `m`, `k`, `M`, … or no suffix (powers of 1000).
    DecimalSi,
    /// `1e3`, `5E-3` (powers of ten).
    DecimalExponent,
}

/// An exact resource quantity.
#[derive(Clone, Copy, Debug)]
pub struct ResourceQuantity {
    nanos: i128,
    notation: Notation,
}

/// A quantity string that is not a valid Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)]
pub struct ParseQuantityError;

impl ResourceQuantity {
    /// Zero, in decimal notation.
    pub const ZERO: ResourceQuantity = ResourceQuantity {
        nanos: 0,
        notation: Notation::DecimalSi,
    };

    /// The value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The notation the value is printed in.
    pub fn notation(&self) -> Notation {
        self.notation
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// This quantity times `factor`, saturating at Kubernetes' maximum.
    pub fn times(self, factor: i64) -> ResourceQuantity {
        ResourceQuantity {
            nanos: clamp(self.nanos.saturating_mul(i128::from(factor))),
            notation: self.notation,
        }
    }

    /// The value as a k8s-openapi [`Quantity`] in canonical form.
    pub fn to_quantity(self) -> Quantity {
        Quantity(self.to_string())
    }
}

fn clamp(nanos: i128) -> i128 {
    nanos.clamp(-MAX_NANOS, MAX_NANOS)
}

impl PartialEq for ResourceQuantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for ResourceQuantity {}

impl PartialOrd for ResourceQuantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ResourceQuantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Add for ResourceQuantity {
    type Output = ResourceQuantity;

    /// Adds exactly; the result keeps the notation of `self` unless `self` is zero.
    fn add(self, rhs: ResourceQuantity) -> ResourceQuantity {
        let notation = if self.nanos == 0 {
            rhs.notation
        } else {
            self.notation
        };
        ResourceQuantity {
            nanos: clamp(self.nanos.saturating_add(rhs.nanos)),
            notation,
        }
    }
}

impl AddAssign for ResourceQuantity {
    fn add_assign(&mut self, rhs: ResourceQuantity) {
        *self = *self + rhs;
    }
}

impl TryFrom<&Quantity> for ResourceQuantity {
    type Error = ParseQuantityError;

    fn try_from(q: &Quantity) -> Result<Self, Self::Error> {
        q.0.parse()
    }
}

impl FromStr for ResourceQuantity {
    type Err = ParseQuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (negative, rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let number_len = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let (number, suffix) = rest.split_at(number_len);
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
            return Err(ParseQuantityError);
        }
        let (notation, scale) = parse_suffix(suffix)?;
        let nanos = scale_to_nanos(int_part, frac_part, scale)?;
        Ok(ResourceQuantity {
            nanos: if negative { -nanos } else { nanos },
            notation,
        })
    }
}

/// A suffix's multiplier: a power of 1024 or a power of ten.
#[derive(Clone, Copy)]
enum Scale {
    Binary(u32),
    Decimal(i32),
}

fn parse_suffix(suffix: &str) -> Result<(Notation, Scale), ParseQuantityError> {
    let binary = |p| Ok((Notation::BinarySi, Scale::Binary(p)));
    let decimal = |e| Ok((Notation::DecimalSi, Scale::Decimal(e)));
    match suffix {
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "" => decimal(0),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E']).ok_or(ParseQuantityError)?;
            let digits = exponent.trim_start_matches(['+', '-']);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ParseQuantityError);
            }
            let value: i32 = exponent.parse().map_err(|_| ParseQuantityError)?;
            Ok((Notation::DecimalExponent, Scale::Decimal(value)))
        }
    }
}

/// `int.frac × scale` in nano-units, rounded up (away from zero) past nine decimals and
/// saturated at Kubernetes' maximum, as Kubernetes does.
fn scale_to_nanos(
    int_part: &str,
    frac_part: &str,
    scale: Scale,
) -> Result<i128, ParseQuantityError> {
    // Work on a digit string with an implied decimal exponent: value = digits × 10^exp10.
    // Most quantities have no fraction: their digits are borrowed, not copied.
    let digits: Cow<'_, str> = if frac_part.is_empty() {
        Cow::Borrowed(int_part)
    } else {
        Cow::Owned(format!("{int_part}{frac_part}"))
    };
    let digits = digits.trim_start_matches('0');
    let frac_len = i32::try_from(frac_part.len()).map_err(|_| ParseQuantityError)?;
    if digits.is_empty() {
        return Ok(0);
    }
    let (mut exp10, multiplier): (i32, i128) = match scale {
        Scale::Decimal(e) => (e.saturating_sub(frac_len), 1),
        Scale::Binary(p) => (-frac_len, 1024_i128.pow(p)),
    };
    exp10 = exp10.saturating_add(9); // to nano-units
    // Too many digits can only mean a value beyond the maximum (or far below one nano-unit).
    let significant = i32::try_from(digits.len()).map_err(|_| ParseQuantityError)?;
    if significant.saturating_add(exp10) > 40 {
        return Ok(MAX_NANOS);
    }
    if exp10 >= 0 {
        let mantissa: i128 = digits.parse().map_err(|_| ParseQuantityError)?;
        let value = mantissa
            .saturating_mul(10_i128.saturating_pow(exp10.unsigned_abs()))
            .saturating_mul(multiplier);
        return Ok(clamp(value));
    }
    // Negative exponent: keep at most 38 digits, divide and round up.
    let drop = exp10.unsigned_abs();
    if drop as usize >= digits.len() + 20 {
        return Ok(1);
    }
    let kept = &digits[..digits.len().min(38)];
    let lost_digits = digits.len() - kept.len();
    let mantissa: i128 = kept.parse().map_err(|_| ParseQuantityError)?;
    let truncated = lost_digits > 0 && digits[kept.len()..].bytes().any(|b| b != b'0');
    let numerator = mantissa.saturating_mul(multiplier);
    let shift = drop.saturating_sub(u32::try_from(lost_digits).map_err(|_| ParseQuantityError)?);
    let denominator = 10_i128.checked_pow(shift).unwrap_or(i128::MAX);
    let mut value = numerator / denominator;
    if numerator % denominator != 0 || truncated {
        value += 1;
    }
    Ok(clamp(value))
}

impl fmt::Display for ResourceQuantity {
    /// Kubernetes' canonical form: the largest suffix that keeps the mantissa an integer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.nanos;
        if nanos == 0 {
            return f.write_str("0");
        }
        let sign = if nanos < 0 { "-" } else { "" };
        let magnitude = nanos.unsigned_abs();
        let whole = magnitude.is_multiple_of(NANO as u128);
        if self.notation == Notation::BinarySi && whole && magnitude >= 1024 * NANO as u128 {
            let mut value = magnitude / NANO as u128;
            let mut power = 0;
            while power < 6 && value.is_multiple_of(1024) {
                value /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return write!(f, "{sign}{value}{suffix}");
        }
        // Decimal: nano-units are 10^-9; move up in steps of 10^3 while exact.
        let mut value = magnitude;
        let mut exponent: i32 = -9;
        while exponent < 18 && value.is_multiple_of(1000) {
            value /= 1000;
            exponent += 3;
        }
        if self.notation == Notation::DecimalExponent {
            return if exponent == 0 {
                write!(f, "{sign}{value}")
            } else {
                write!(f, "{sign}{value}e{exponent}")
            };
        }
        let suffix = match exponent {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            _ => "E",
        };
        write!(f, "{sign}{value}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> ResourceQuantity {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_every_notation() {
        for (input, nanos) in [
            ("1", NANO),
            ("500m", NANO / 2),
            ("1.5", 3 * NANO / 2),
            ("0.1", NANO / 10),
            ("1Ki", 1024 * NANO),
            ("1.5Gi", 3 * 512 * 1024 * 1024 * NANO),
            ("200Mi", 200 * 1024 * 1024 * NANO),
            ("1e3", 1000 * NANO),
            ("5E-3", 5 * NANO / 1000),
            ("1k", 1000 * NANO),
            ("-2", -2 * NANO),
            ("+3", 3 * NANO),
            ("10n", 10),
            (".5", NANO / 2),
            ("1.", NANO),
        ] {
            assert_eq!(q(input).nanos(), nanos, "{input}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for input in [
            "", "abc", "1x", "1.2.3", "Gi", "1e", "1e+", "--1", "1Gi2", ".",
        ] {
            assert!(input.parse::<ResourceQuantity>().is_err(), "{input}");
        }
    }

    #[test]
    fn rounds_sub_nano_values_up_and_saturates_huge_ones() {
        assert_eq!(q("0.0000000001").nanos(), 1);
        assert_eq!(q("1e100").nanos(), MAX_NANOS);
        assert_eq!(
            q("99999999999999999999999999999999999999999999").nanos(),
            MAX_NANOS
        );
    }

    #[test]
    fn prints_canonical_form() {
        for (input, canonical) in [
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("512", "512"),
            ("1024", "1024"),
            ("1e3", "1e3"),
            ("1000k", "1M"),
            ("0", "0"),
            ("-1Ki", "-1Ki"),
        ] {
            assert_eq!(q(input).to_string(), canonical, "{input}");
        }
    }

    #[test]
    fn binary_values_that_are_not_whole_fall_back_to_decimal() {
        assert_eq!((q("1Ki") + q("500m")).to_string(), "1024500m");
        assert_eq!(q("0.5Ki").to_string(), "512");
    }

    #[test]
    fn sums_keep_the_first_terms_notation() {
        assert_eq!((q("200Mi") + q("1Gi")).to_string(), "1224Mi");
        assert_eq!((q("500m") + q("1")).to_string(), "1500m");
        assert_eq!((ResourceQuantity::ZERO + q("1Gi")).to_string(), "1Gi");
        assert_eq!((q("1Gi") + q("1000000000")).to_string(), "2073741824");
    }

    #[test]
    fn multiplies_and_compares() {
        assert_eq!(q("500m").times(3).to_string(), "1500m");
        assert_eq!(q("4Gi").times(0), ResourceQuantity::ZERO);
        assert!(q("1") > q("999m"));
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("1e18").times(1_000_000_000_000).nanos(), MAX_NANOS);
    }
}
