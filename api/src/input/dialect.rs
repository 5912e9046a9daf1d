//! kubectl's YAML 1.1 scalars: what a plain scalar means, how a non-string key becomes a JSON
//! key, and which numbers JSON can carry. The rules, and the upstream code they come from, are
//! described in `docs/yaml.md`; the table in this module's tests pins them.

use serde_json::{Number, Value};

/// What a scalar means once kubectl has read it.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// `~`, `null`, `Null`, `NULL` or nothing at all.
    Null,
    /// `true`, `yes`, `on`, `y` and their other spellings (and the `false` ones).
    Bool(bool),
    /// An integer that fits in 64 signed bits (decimal, `0x`, `0o`, `0b`, or octal `0…`).
    Int(i64),
    /// An integer too large for `i64` that fits in 64 unsigned bits.
    Uint(u64),
    /// An unsigned integer too large for 64 bits (hexadecimal, binary or `0o` octal), kept as
    /// the nearest `f64`: kubectl's JSON carries all its digits, the API server reads a float.
    BigInt(f64),
    /// A floating-point number, possibly non-finite (`.inf`, `.nan`).
    Float(f64),
    /// The text itself.
    Str,
}

/// The tag a scalar resolves to, in kubectl's error messages (`!!int`, …).
fn short_tag(scalar: &Scalar) -> &'static str {
    match scalar {
        Scalar::Null => "!!null",
        Scalar::Bool(_) => "!!bool",
        Scalar::Int(_) | Scalar::Uint(_) | Scalar::BigInt(_) => "!!int",
        Scalar::Float(_) => "!!float",
        Scalar::Str => "!!str",
    }
}

/// Why Go's integer parsing refused a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntError {
    Syntax,
    Range,
}

/// Go's `strconv.ParseUint(s, base, 64)`; `base == 0` reads the prefix (`0x`, `0o`, `0b`, and a
/// bare leading `0` for octal). No sign is accepted.
fn parse_uint(s: &str, base: u32) -> Result<u64, IntError> {
    if s.is_empty() {
        return Err(IntError::Syntax);
    }
    let (base, digits) = if base == 0 {
        let bytes = s.as_bytes();
        if bytes[0] == b'0' {
            match bytes.get(1).map(u8::to_ascii_lowercase) {
                Some(b'x') if s.len() >= 3 => (16, &s[2..]),
                Some(b'o') if s.len() >= 3 => (8, &s[2..]),
                Some(b'b') if s.len() >= 3 => (2, &s[2..]),
                _ => (8, &s[1..]),
            }
        } else {
            (10, s)
        }
    } else {
        (base, s)
    };
    let mut value: u64 = 0;
    let mut overflow = false;
    for c in digits.chars() {
        let digit = c.to_digit(base).ok_or(IntError::Syntax)?;
        match value
            .checked_mul(u64::from(base))
            .and_then(|v| v.checked_add(u64::from(digit)))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
    }
    if overflow {
        Err(IntError::Range)
    } else {
        Ok(value)
    }
}

/// Go's `strconv.ParseInt(s, base, 64)`: an optional sign, then [`parse_uint`].
fn parse_int(s: &str, base: u32) -> Result<i64, IntError> {
    let (negative, unsigned) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let magnitude = parse_uint(unsigned, base)?;
    if negative {
        0i64.checked_sub_unsigned(magnitude).ok_or(IntError::Range)
    } else {
        i64::try_from(magnitude).map_err(|_| IntError::Range)
    }
}

/// The float syntax a plain scalar starting with a digit or a sign must have:
/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `strconv.ParseFloat(s, 64)` on text [`is_yaml_float`] accepted, or on text starting
/// with `.`: `None` when out of range (Go reports an error there, and the scalar stays a string).
fn parse_float(s: &str) -> Option<f64> {
    if !is_yaml_float(s) {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Words with a fixed meaning (go-yaml v2's table; case forms other than these are strings).
fn word(text: &str) -> Option<Scalar> {
    Some(match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Scalar::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Scalar::Bool(false)
        }
        "" | "~" | "null" | "Null" | "NULL" => Scalar::Null,
        ".nan" | ".NaN" | ".NAN" => Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Scalar::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Scalar::Float(f64::NEG_INFINITY),
        _ => return None,
    })
}

/// What an untagged plain scalar means to kubectl (YAML 1.1 as go-yaml v2 resolves it).
pub fn resolve_plain(text: &str) -> Scalar {
    let Some(&first) = text.as_bytes().first() else {
        return Scalar::Null;
    };
    let hinted = first.is_ascii_digit()
        || matches!(
            first,
            b'+' | b'-'
                | b'.'
                | b'y'
                | b'Y'
                | b'n'
                | b'N'
                | b't'
                | b'T'
                | b'f'
                | b'F'
                | b'o'
                | b'O'
                | b'~'
        );
    if !hinted {
        return Scalar::Str;
    }
    if let Some(scalar) = word(text) {
        return scalar;
    }
    match first {
        b'.' => parse_float(text).map_or(Scalar::Str, Scalar::Float),
        b'0'..=b'9' | b'+' | b'-' => resolve_number(text),
        _ => Scalar::Str,
    }
}

/// The integer, then float, readings of a plain scalar starting with a digit or a sign.
fn resolve_number(text: &str) -> Scalar {
    let plain = text.replace('_', "");
    if let Ok(i) = parse_int(&plain, 0) {
        return Scalar::Int(i);
    }
    let unsigned = parse_uint(&plain, 0);
    if let Ok(u) = unsigned {
        return Scalar::Uint(u);
    }
    if is_yaml_float(&plain)
        && let Some(f) = parse_float(&plain)
    {
        return Scalar::Float(f);
    }
    if let Some(rest) = plain.strip_prefix("0b") {
        if let Ok(i) = parse_int(rest, 2) {
            return Scalar::Int(i);
        }
        if let Ok(u) = parse_uint(rest, 2) {
            return Scalar::Uint(u);
        }
    } else if let Some(rest) = plain.strip_prefix("-0b")
        && let Ok(i) = parse_int(&format!("-{rest}"), 2)
    {
        return Scalar::Int(i);
    }
    if unsigned == Err(IntError::Range) {
        return big_int(&plain).map_or(Scalar::Str, Scalar::BigInt);
    }
    Scalar::Str
}

/// An unsigned integer of any size with Go's base prefixes, as the nearest `f64`.
fn big_int(plain: &str) -> Option<f64> {
    let (base, digits) = match plain.as_bytes() {
        [b'0', b'x' | b'X', ..] => (16, &plain[2..]),
        [b'0', b'o' | b'O', ..] => (8, &plain[2..]),
        [b'0', b'b' | b'B', ..] => (2, &plain[2..]),
        [b'0', ..] => (8, &plain[1..]),
        _ => (10, plain),
    };
    let mut value = 0f64;
    for c in digits.chars() {
        value = value * f64::from(base) + f64::from(c.to_digit(base)?);
    }
    Some(value)
}

/// A tagged scalar's meaning, or kubectl's reason for refusing it. `tag` is the full tag
/// (`tag:yaml.org,2002:int`, or a local tag such as `!foo`); quoted text is resolved too.
pub fn resolve_tagged(tag: &str, text: &str) -> Result<Scalar, String> {
    let Some(name) = tag.strip_prefix("tag:yaml.org,2002:") else {
        return Ok(Scalar::Str);
    };
    let wanted = match name {
        "str" | "timestamp" | "binary" => return Ok(Scalar::Str),
        "bool" | "int" | "float" | "null" => name,
        _ => return Ok(Scalar::Str),
    };
    let resolved = resolve_plain(text);
    let matches = match (&resolved, wanted) {
        (Scalar::Null, "null") | (Scalar::Bool(_), "bool") | (Scalar::Float(_), "float") => true,
        (Scalar::Int(_) | Scalar::Uint(_) | Scalar::BigInt(_), "int") => true,
        (Scalar::Int(i), "float") => return Ok(Scalar::Float(*i as f64)),
        _ => false,
    };
    if matches {
        Ok(resolved)
    } else {
        Err(format!(
            "cannot decode {} `{text}` as a !!{wanted}",
            short_tag(&resolved)
        ))
    }
}

/// The JSON value kubectl sends for a scalar; `Err` for the non-finite floats JSON cannot
/// carry (Go's JSON encoder refuses them, and kubectl with it).
pub fn to_json(scalar: Scalar, text: &str) -> Result<Value, String> {
    Ok(match scalar {
        Scalar::Null => Value::Null,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(i) => Value::from(i),
        Scalar::Uint(u) => float_value(u as f64),
        Scalar::BigInt(f) => float_value(f),
        Scalar::Float(f) if f.is_finite() => float_value(f),
        Scalar::Float(f) => {
            let go = if f.is_nan() {
                "NaN"
            } else if f > 0.0 {
                "+Inf"
            } else {
                "-Inf"
            };
            return Err(format!(
                "`{text}` is the number {go}, which JSON cannot carry (kubectl fails with \
                 \"json: unsupported value: {go}\"); quote it ('{text}') if a string is meant"
            ));
        }
        Scalar::Str => Value::String(text.to_string()),
    })
}

/// A finite float as the API server reads kubectl's JSON for it: Go writes an integral float
/// below 1e21 without a fraction or exponent, and such text reads back as an integer when it
/// fits in `i64`. Integers above `i64` are read as floats.
pub fn float_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.223_372_036_854_775e18 {
        return Value::from(f as i64);
    }
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// The JSON key kubectl makes of a non-string mapping key, or why it refuses the key.
pub fn key_string(scalar: &Scalar, text: &str) -> Result<String, String> {
    match scalar {
        Scalar::Str => Ok(text.to_string()),
        Scalar::Int(i) => Ok(i.to_string()),
        Scalar::Bool(b) => Ok(b.to_string()),
        Scalar::Float(f) => Ok(go_float32_g(*f)),
        Scalar::Null => Err(format!(
            "the mapping key `{text}` is null, which kubectl cannot turn into a JSON key; quote it \
             ('{text}') if a string is meant"
        )),
        Scalar::Uint(_) | Scalar::BigInt(_) => Err(format!(
            "the mapping key `{text}` is an integer too large for int64, which kubectl cannot \
             turn into a JSON key; quote it ('{text}')"
        )),
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)` (how kubectl spells a float key), with YAML's
/// names for the non-finite values.
fn go_float32_g(f: f64) -> String {
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    let single = f as f32;
    if single.is_infinite() {
        return if single > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if single == 0.0 {
        return if single.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let scientific = format!("{single:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exponent) {
        let (head, tail) = digits.split_at(1);
        let dot = if tail.is_empty() { "" } else { "." };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!("{sign}{head}{dot}{tail}e{exp_sign}{:02}", exponent.abs())
    } else if exponent < 0 {
        let zeros = "0".repeat((-exponent - 1) as usize);
        format!("{sign}0.{zeros}{digits}")
    } else {
        let point = exponent as usize + 1;
        if digits.len() <= point {
            format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{sign}{}.{}", &digits[..point], &digits[point..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubectl's reading of plain scalars, including where YAML 1.1 and 1.2 disagree.
    #[test]
    fn plain_scalars_resolve_as_kubectl_reads_them() {
        use Scalar::*;
        let table: &[(&str, Scalar)] = &[
            // Booleans: every spelling go-yaml v2 lists, and near misses that stay strings.
            ("y", Bool(true)),
            ("Y", Bool(true)),
            ("yes", Bool(true)),
            ("Yes", Bool(true)),
            ("YES", Bool(true)),
            ("true", Bool(true)),
            ("True", Bool(true)),
            ("TRUE", Bool(true)),
            ("on", Bool(true)),
            ("On", Bool(true)),
            ("ON", Bool(true)),
            ("n", Bool(false)),
            ("N", Bool(false)),
            ("no", Bool(false)),
            ("No", Bool(false)),
            ("NO", Bool(false)),
            ("false", Bool(false)),
            ("False", Bool(false)),
            ("FALSE", Bool(false)),
            ("off", Bool(false)),
            ("Off", Bool(false)),
            ("OFF", Bool(false)),
            ("yEs", Str),
            ("tRUE", Str),
            ("oN", Str),
            ("nO", Str),
            // Nulls.
            ("", Null),
            ("~", Null),
            ("null", Null),
            ("Null", Null),
            ("NULL", Null),
            ("nULL", Str),
            // Integers: Go's ParseInt with base 0 after removing underscores.
            ("0", Int(0)),
            ("-0", Int(0)),
            ("+1", Int(1)),
            ("0777", Int(511)),
            ("0644", Int(420)),
            ("02472256", Int(685_230)),
            ("0o17", Int(15)),
            ("0O17", Int(15)),
            ("0x1F", Int(31)),
            ("0X1f", Int(31)),
            ("0x_1", Int(1)),
            ("0x_0A_74_AE", Int(685_230)),
            ("0b101", Int(5)),
            ("0b1010_0111_0100_1010_1110", Int(685_230)),
            ("-0b101010", Int(-42)),
            ("0b-101", Int(-5)),
            ("1_000", Int(1000)),
            ("+685_230", Int(685_230)),
            ("-9223372036854775808", Int(i64::MIN)),
            ("9223372036854775807", Int(i64::MAX)),
            ("9223372036854775808", Uint(9_223_372_036_854_775_808)),
            ("18446744073709551615", Uint(u64::MAX)),
            (
                "0xFFFFFFFFFFFFFFFFFF",
                BigInt(4_722_366_482_869_645_213_696.0),
            ),
            // Not octal after all: a float (the float syntax accepts leading zeros).
            ("08", Float(8.0)),
            ("0999", Float(999.0)),
            // Floats.
            (".5", Float(0.5)),
            ("-.1", Float(-0.1)),
            ("+.5", Float(0.5)),
            ("1.", Float(1.0)),
            ("1e3", Float(1000.0)),
            ("1E3", Float(1000.0)),
            ("6.8523e+5", Float(685_230.0)),
            ("685.230_15e+03", Float(685_230.15)),
            ("685_230.15", Float(685_230.15)),
            ("123456e1", Float(1_234_560.0)),
            ("-1e-3", Float(-0.001)),
            ("99999999999999999999", Float(1e20)),
            (".inf", Float(f64::INFINITY)),
            (".Inf", Float(f64::INFINITY)),
            (".INF", Float(f64::INFINITY)),
            ("+.inf", Float(f64::INFINITY)),
            ("+.Inf", Float(f64::INFINITY)),
            ("+.INF", Float(f64::INFINITY)),
            ("-.inf", Float(f64::NEG_INFINITY)),
            ("-.Inf", Float(f64::NEG_INFINITY)),
            ("-.INF", Float(f64::NEG_INFINITY)),
            (".iNF", Str),
            // Strings: everything else.
            ("1e400", Str),
            (".5e999", Str),
            ("0x", Str),
            ("0o", Str),
            ("0b", Str),
            ("0o8", Str),
            ("1:1", Str),
            ("190:20:30", Str),
            ("2015-01-01", Str),
            ("2015-02-24T18:19:39Z", Str),
            ("-b_c", Str),
            ("+b_c", Str),
            ("50cent_of_dollar", Str),
            ("inf", Str),
            ("nan", Str),
            ("Infinity", Str),
            (".", Str),
            ("-", Str),
            ("+", Str),
            ("1.2.3", Str),
            ("v1", Str),
            ("<<", Str),
            ("=", Str),
            ("4Gi", Str),
            ("500m", Str),
            ("+0xFFFFFFFFFFFFFFFFFF", Str),
        ];
        for (text, expected) in table {
            let got = resolve_plain(text);
            let same = match (&got, expected) {
                (Float(a), Float(b)) => a == b || (a.is_nan() && b.is_nan()),
                (a, b) => a == b,
            };
            assert!(same, "{text:?}: got {got:?}, expected {expected:?}");
        }
        assert!(matches!(resolve_plain(".nan"), Float(f) if f.is_nan()));
        assert!(matches!(resolve_plain(".NaN"), Float(f) if f.is_nan()));
        assert!(matches!(resolve_plain(".NAN"), Float(f) if f.is_nan()));
    }

    #[test]
    fn explicit_tags_are_honoured_or_refused_as_kubectl_does() {
        let core = |name: &str| format!("tag:yaml.org,2002:{name}");
        assert_eq!(resolve_tagged(&core("str"), "0777"), Ok(Scalar::Str));
        assert_eq!(resolve_tagged(&core("int"), "0777"), Ok(Scalar::Int(511)));
        assert_eq!(resolve_tagged(&core("bool"), "yes"), Ok(Scalar::Bool(true)));
        assert_eq!(resolve_tagged(&core("float"), "1"), Ok(Scalar::Float(1.0)));
        assert_eq!(
            resolve_tagged(&core("float"), "1.1"),
            Ok(Scalar::Float(1.1))
        );
        assert_eq!(resolve_tagged(&core("null"), ""), Ok(Scalar::Null));
        assert_eq!(resolve_tagged("!", "0777"), Ok(Scalar::Str));
        assert_eq!(resolve_tagged("!custom", "yes"), Ok(Scalar::Str));
        assert_eq!(
            resolve_tagged(&core("float"), "error"),
            Err("cannot decode !!str `error` as a !!float".into())
        );
        assert_eq!(
            resolve_tagged(&core("bool"), "1"),
            Err("cannot decode !!int `1` as a !!bool".into())
        );
        assert_eq!(
            resolve_tagged(&core("int"), "1.5"),
            Err("cannot decode !!float `1.5` as a !!int".into())
        );
    }

    #[test]
    fn numbers_become_the_json_the_api_server_reads() {
        assert_eq!(to_json(Scalar::Float(1000.0), "1e3"), Ok(Value::from(1000)));
        assert_eq!(to_json(Scalar::Float(-0.0), "-0.0"), Ok(Value::from(0)));
        assert_eq!(to_json(Scalar::Float(0.5), ".5"), Ok(Value::from(0.5)));
        assert_eq!(to_json(Scalar::Float(1e21), "1e21"), Ok(Value::from(1e21)));
        assert_eq!(
            to_json(Scalar::Uint(u64::MAX), "18446744073709551615"),
            Ok(Value::from(u64::MAX as f64))
        );
        for text in [".inf", "-.inf", ".nan"] {
            let err = to_json(resolve_plain(text), text).unwrap_err();
            assert!(err.contains("json: unsupported value"), "{err}");
            assert!(err.contains(&format!("'{text}'")), "{err}");
        }
    }

    #[test]
    fn non_string_keys_are_spelled_as_kubectl_spells_them() {
        let key = |text: &str| key_string(&resolve_plain(text), text);
        assert_eq!(key("0777"), Ok("511".into()));
        assert_eq!(key("yes"), Ok("true".into()));
        assert_eq!(key("off"), Ok("false".into()));
        assert_eq!(key("1e3"), Ok("1000".into()));
        assert_eq!(key("1.5"), Ok("1.5".into()));
        assert_eq!(key("0.1"), Ok("0.1".into()));
        assert_eq!(key("1e6"), Ok("1e+06".into()));
        assert_eq!(key("123456.7"), Ok("123456.7".into()));
        assert_eq!(key("0.00001"), Ok("1e-05".into()));
        assert_eq!(key("0.0001"), Ok("0.0001".into()));
        assert_eq!(key(".inf"), Ok(".inf".into()));
        assert_eq!(key("name"), Ok("name".into()));
        assert!(key("~").unwrap_err().contains("null"));
        assert!(key("18446744073709551615").is_err());
    }
}
