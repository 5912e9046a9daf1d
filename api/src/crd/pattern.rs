//! The `pattern`s the generated CRDs declare, each matched by hand (no regex engine), keyed by
//! the exact pattern text.

use super::quantity::is_quantity;

/// The pattern KubeRay's CRDs (like every controller-gen CRD) put on `resource.Quantity` fields.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// The pattern of `metav1.Condition.reason`.
pub const CONDITION_REASON_PATTERN: &str = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$";

/// The pattern of `metav1.Condition.type`.
pub const CONDITION_TYPE_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";

/// A pattern raygate knows how to match, recognised once when the schema is compiled (the
/// pattern text is long, and every quantity of every checked object is matched).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KnownPattern {
    /// [`QUANTITY_PATTERN`].
    Quantity,
    /// [`CONDITION_REASON_PATTERN`].
    ConditionReason,
    /// [`CONDITION_TYPE_PATTERN`].
    ConditionType,
}

impl KnownPattern {
    /// The known pattern written as `pattern`, if any.
    pub(crate) fn of(pattern: &str) -> Option<Self> {
        match pattern {
            QUANTITY_PATTERN => Some(Self::Quantity),
            CONDITION_REASON_PATTERN => Some(Self::ConditionReason),
            CONDITION_TYPE_PATTERN => Some(Self::ConditionType),
            _ => None,
        }
    }

    /// Whether `text` matches the pattern.
    pub(crate) fn matches(self, text: &str) -> bool {
        match self {
            Self::Quantity => is_quantity(text),
            Self::ConditionReason => is_condition_reason(text),
            Self::ConditionType => is_condition_type(text),
        }
    }
}

/// Whether `text` matches `pattern`, for the patterns raygate knows; `None` for any other.
#[cfg(test)]
pub(crate) fn matches(pattern: &str, text: &str) -> Option<bool> {
    KnownPattern::of(pattern).map(|known| known.matches(text))
}

/// `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`
fn is_condition_reason(text: &str) -> bool {
    let bytes = text.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first.is_ascii_alphabetic()
        && (bytes.len() == 1 || last.is_ascii_alphanumeric() || *last == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':'))
}

/// One DNS label as the type pattern's prefix allows: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_prefix_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            edge(first) && edge(last) && bytes.iter().all(|b| edge(b) || *b == b'-')
        }
        _ => false,
    }
}

/// The name part: `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_condition_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `^(<dns-subdomain>/)?<name>$` as in [`CONDITION_TYPE_PATTERN`].
fn is_condition_type(text: &str) -> bool {
    match text.split_once('/') {
        Some((prefix, name)) => prefix.split('.').all(is_prefix_label) && is_condition_name(name),
        None => is_condition_name(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_reasons() {
        for ok in ["A", "HeadPodReady", "a_b", "Not,Ready:Yet_", "X1"] {
            assert_eq!(matches(CONDITION_REASON_PATTERN, ok), Some(true), "{ok}");
        }
        for bad in ["", "1A", "_A", "A:", "A,", "A-B", "A B", "Ä"] {
            assert_eq!(matches(CONDITION_REASON_PATTERN, bad), Some(false), "{bad}");
        }
    }

    #[test]
    fn condition_types() {
        for ok in [
            "Ready",
            "HeadPodReady",
            "a",
            "ray.io/Provisioned",
            "example.com/foo-bar_baz.1",
            "a-b.c/X",
        ] {
            assert_eq!(matches(CONDITION_TYPE_PATTERN, ok), Some(true), "{ok}");
        }
        for bad in [
            "",
            "-Ready",
            "Ready-",
            "/Ready",
            "Ray.io/Ready",
            "a..b/X",
            "a/b/c",
            "a/",
            "-a.b/X",
            "a-.b/X",
            "Re ady",
        ] {
            assert_eq!(matches(CONDITION_TYPE_PATTERN, bad), Some(false), "{bad}");
        }
    }

    #[test]
    fn other_patterns_are_unknown() {
        assert_eq!(matches("^[a-z]+$", "abc"), None);
        assert_eq!(matches(QUANTITY_PATTERN, "1Gi"), Some(true));
    }
}
