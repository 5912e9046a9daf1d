//! The Kubernetes quantity grammar, i.e. controller-gen's [`super::QUANTITY_PATTERN`], without a
//! regex engine.

/// Splits an unsigned decimal (`12`, `12.`, `12.5`, `.5`) off the front of `s`; returns the rest.
fn strip_decimal(s: &str) -> Option<&str> {
    let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
    let rest = &s[int_len..];
    match rest.strip_prefix('.') {
        Some(after_dot) => {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            if int_len == 0 && frac_len == 0 {
                None
            } else {
                Some(&after_dot[frac_len..])
            }
        }
        None if int_len > 0 => Some(rest),
        None => None,
    }
}

fn strip_sign(s: &str) -> &str {
    s.strip_prefix(['+', '-']).unwrap_or(s)
}

/// Whether `s` matches
/// `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`,
/// the pattern the API server checks on every string quantity of KubeRay's CRDs.
pub fn is_quantity(s: &str) -> bool {
    let Some(suffix) = strip_decimal(strip_sign(s)) else {
        return false;
    };
    match suffix {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => true,
        "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => true,
        _ => suffix
            .strip_prefix(['e', 'E'])
            .and_then(|exp| strip_decimal(strip_sign(exp)))
            .is_some_and(str::is_empty),
    }
}

#[cfg(test)]
mod tests {
    use super::is_quantity;

    #[test]
    fn accepts_kubernetes_quantities() {
        for ok in [
            "1", "0", "+1", "-1", "1.", "1.5", ".5", "500m", "2Gi", "1Ki", "1Ei", "1E", "1e3",
            "1E3", "1e-3", "1e+3", "1.5e3", "1e.5", "0.1", "100n", "3u", "7k", "4T", "5P",
        ] {
            assert!(is_quantity(ok), "{ok} should be a quantity");
        }
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            "", "+", ".", "-.", "abc", "1 core", " 1", "1 ", "1Gb", "1gi", "1K", "1ki", "1e",
            "1e+", "1.2.3", "1mi", "1x", "Gi", "1Gi ", "1e3Gi", "١",
        ] {
            assert!(!is_quantity(bad), "{bad:?} should not be a quantity");
        }
    }
}
