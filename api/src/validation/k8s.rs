//! The name and label checks of `k8s.io/apimachinery/pkg/util/validation`, with the same error
//! texts, so that the messages KubeRay embeds in its own errors come out identical.
//!
//! Each function returns the list of problems (empty = valid), as apimachinery does. Label keys
//! and values have two wordings ([`Texts`]): KubeRay's vendored apimachinery's and the API
//! server's own.

/// Maximum length of a DNS-1035 or DNS-1123 label.
const DNS_LABEL_MAX_LENGTH: usize = 63;
/// Maximum length of a DNS-1123 subdomain.
const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Maximum length of the name part of a qualified name.
const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
/// Maximum length of a label value.
const LABEL_VALUE_MAX_LENGTH: usize = 63;

const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// Which apimachinery words a label key's or value's problems.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Texts {
    /// KubeRay v1.7's vendored apimachinery: lengths in characters, a malformed key "a qualified
    /// name".
    Kuberay,
    /// The API server's (Kubernetes 1.37, the environment's): lengths in bytes, a malformed key
    /// "a valid label key".
    ApiServer,
}

impl Texts {
    /// apimachinery's `MaxLenError` for label keys and values.
    fn max_len_error(self, length: usize) -> String {
        match self {
            Texts::Kuberay => max_len_error(length),
            Texts::ApiServer => format!("must be no more than {length} bytes"),
        }
    }

    /// What a key with more than one `/` is called.
    fn key_noun(self) -> &'static str {
        match self {
            Texts::Kuberay => "a qualified name",
            Texts::ApiServer => "a valid label key",
        }
    }
}

/// apimachinery's `MaxLenError`.
fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// apimachinery's `EmptyError`.
fn empty_error() -> String {
    "must be non-empty".to_string()
}

/// apimachinery's `RegexError`, including its doubled space before "or".
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(example);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

/// `[a-z]([-a-z0-9]*[a-z0-9])?` when `first_alpha`, else `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn matches_dns_label(value: &str, first_alpha: bool) -> bool {
    let bytes = value.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    let first_ok = if first_alpha {
        first.is_ascii_lowercase()
    } else {
        first.is_ascii_lowercase() || first.is_ascii_digit()
    };
    first_ok
        && (last.is_ascii_lowercase() || last.is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn matches_qualified_name(value: &str) -> bool {
    let bytes = value.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `IsDNS1035Label`.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    dns_label_errors(
        value,
        true,
        DNS1035_LABEL_ERR_MSG,
        DNS1035_LABEL_FMT,
        &["my-name", "abc-123"],
    )
}

/// `IsDNS1123Label`.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    dns_label_errors(
        value,
        false,
        DNS1123_LABEL_ERR_MSG,
        DNS1123_LABEL_FMT,
        &["my-name", "123-abc"],
    )
}

/// The two DNS label checks differ only in whether the first character must be a letter and
/// in their messages.
fn dns_label_errors(
    value: &str,
    alpha_first: bool,
    message: &str,
    format: &str,
    examples: &[&str],
) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS_LABEL_MAX_LENGTH));
    }
    if !matches_dns_label(value, alpha_first) {
        errs.push(regex_error(message, format, examples));
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !value.split('.').all(|part| matches_dns_label(part, false)) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsQualifiedName` (label keys), in KubeRay's wording.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    is_label_key(value, Texts::Kuberay)
}

/// A label key's problems (`IsQualifiedName`), in `texts`' wording.
pub fn is_label_key(value: &str, texts: Texts) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "{} {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                texts.key_noun(),
                regex_error(
                    QUALIFIED_NAME_ERR_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(format!(
            "name part {}",
            texts.max_len_error(QUALIFIED_NAME_MAX_LENGTH)
        ));
    }
    if !matches_qualified_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`, in KubeRay's wording.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    is_label_value(value, Texts::Kuberay)
}

/// A label value's problems (`IsValidLabelValue`), in `texts`' wording.
pub fn is_label_value(value: &str, texts: Texts) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(texts.max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !matches_qualified_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Go's `%v` rendering of a `[]string`: `[a b c]`.
pub fn go_string_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

/// Go's `%q` rendering of a string (close enough for the ASCII names validated here).
pub fn go_quote(value: &str) -> String {
    format!("{value:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1035_matches_apimachinery() {
        assert!(is_dns1035_label("my-name").is_empty());
        assert!(is_dns1035_label("a").is_empty());
        assert_eq!(
            is_dns1035_label("1abc"),
            vec!["a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string()]
        );
        assert_eq!(is_dns1035_label("").len(), 1);
        assert_eq!(is_dns1035_label("Abc").len(), 1);
        assert_eq!(is_dns1035_label("abc-").len(), 1);
        let long = "a".repeat(64);
        assert_eq!(
            is_dns1035_label(&long),
            vec!["must be no more than 63 characters".to_string()]
        );
    }

    #[test]
    fn dns1123_label() {
        assert!(is_dns1123_label("123-abc").is_empty());
        assert!(is_dns1123_label("Group").len() == 1);
        assert!(is_dns1123_label("a_b")[0].starts_with("a lowercase RFC 1123 label"));
    }

    #[test]
    fn qualified_names() {
        assert!(is_qualified_name("ray.io/accelerator").is_empty());
        assert!(is_qualified_name("MyName").is_empty());
        assert_eq!(
            is_qualified_name("bad key"),
            vec!["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string()]
        );
        assert_eq!(
            is_qualified_name("/x"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert!(
            is_qualified_name("Example.com/x")[0]
                .starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        assert!(is_qualified_name("a/b/c")[0].starts_with("a qualified name must consist"));
        assert_eq!(is_qualified_name("x/").len(), 2);
    }

    #[test]
    fn the_api_server_words_label_keys_and_values_its_own_way() {
        let server = Texts::ApiServer;
        assert!(is_label_key("a/b/c", server)[0].starts_with("a valid label key must consist"));
        let long = "a".repeat(64);
        assert_eq!(
            is_label_key(&long, server),
            vec!["name part must be no more than 63 bytes".to_string()]
        );
        assert_eq!(
            is_qualified_name(&long),
            vec!["name part must be no more than 63 characters".to_string()]
        );
        assert_eq!(
            is_label_value(&long, server),
            vec!["must be no more than 63 bytes".to_string()]
        );
        assert_eq!(
            is_label_key("bad key", server),
            is_qualified_name("bad key")
        );
    }

    #[test]
    fn label_values() {
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("my_value").is_empty());
        assert_eq!(is_valid_label_value("-x").len(), 1);
        assert_eq!(is_valid_label_value(&"a".repeat(64)).len(), 1);
        assert!(
            is_valid_label_value("a b")[0].starts_with("a valid label must be an empty string")
        );
    }

    #[test]
    fn go_formatting() {
        assert_eq!(go_string_list(&["a".into(), "b".into()]), "[a b]");
        assert_eq!(go_quote("DenyAll"), "\"DenyAll\"");
    }
}
