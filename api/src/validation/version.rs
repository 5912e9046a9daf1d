//! Ray version parsing, as lenient as KubeRay's two Go parsers.
//!
//! KubeRay parses `rayClusterSpec.rayVersion` in two different ways:
//!
//! * the token-auth and worker-priority checks use apimachinery's `version.ParseGeneric`:
//!   optional leading whitespace and `v`, at least two dot-separated numbers, anything after the
//!   numbers ignored (`2.52.0rc1` is 2.52.0), missing components count as 0;
//! * the `metadata` check used when building the submit command uses Masterminds'
//!   `semver.NewVersion` with the constraint `>= 2.6.0`: optional `v`, one to three numbers, an
//!   optional `-prerelease` and `+build`; pre-releases never satisfy the constraint.
//!
//! Both are reproduced here, error texts included, and compared with the `semver` crate.

use semver::{BuildMetadata, Prerelease, Version, VersionReq};

/// A version parsed like apimachinery's `ParseGeneric`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenericVersion {
    components: Vec<u64>,
}

impl GenericVersion {
    /// Parses `text` like `version.ParseGeneric`, with the same error texts.
    pub fn parse(text: &str) -> Result<Self, String> {
        let quoted = super::k8s::go_quote(text);
        let rest = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0c']);
        let rest = rest.strip_prefix('v').unwrap_or(rest);
        // Longest prefix of the form [0-9]+(\.[0-9]+)*.
        let bytes = rest.as_bytes();
        let mut end = 0;
        let mut i = 0;
        loop {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i == start {
                break;
            }
            end = i;
            if i < bytes.len() && bytes[i] == b'.' {
                i += 1;
            } else {
                break;
            }
        }
        let (numbers, extra) = rest.split_at(end);
        // Go's `.` does not match a newline, so the whole expression fails on one.
        if numbers.is_empty() || extra.contains('\n') {
            return Err(format!("could not parse {quoted} as version"));
        }
        let parts: Vec<&str> = numbers.split('.').collect();
        if parts.len() < 2 {
            return Err(format!("illegal version string {quoted}"));
        }
        let mut components = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            let part_quoted = super::k8s::go_quote(part);
            if i == 0 && part.starts_with('0') && *part != "0" {
                return Err(format!(
                    "illegal zero-prefixed version component {part_quoted} in {quoted}"
                ));
            }
            let n = part.parse::<u64>().map_err(|_| {
                format!(
                    "illegal non-numeric version component {part_quoted} in {quoted}: strconv.ParseUint: parsing {part_quoted}: value out of range"
                )
            })?;
            components.push(n);
        }
        Ok(Self { components })
    }

    /// Whether this version is below `major.minor.patch` (missing components count as 0).
    pub fn less_than(&self, major: u64, minor: u64, patch: u64) -> bool {
        let get = |i: usize| self.components.get(i).copied().unwrap_or(0);
        let own = Version::new(get(0), get(1), get(2));
        let min = Version::new(major, minor, patch);
        // Components beyond the third can only make the version larger, never smaller.
        own < min
    }
}

/// Why a `metadata` Ray version check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataVersionError {
    /// The version does not parse (KubeRay: "failed to parse Ray version: …").
    Unparsable,
    /// The version is below 2.6.0, or a pre-release.
    TooOld,
}

/// Checks `rayVersion` like KubeRay's metadata check: Masterminds `NewVersion` + `>= 2.6.0`.
pub fn check_metadata_version(text: &str) -> Result<(), MetadataVersionError> {
    let version = parse_masterminds(text).ok_or(MetadataVersionError::Unparsable)?;
    let req = VersionReq::parse(">=2.6.0").map_err(|_| MetadataVersionError::Unparsable)?;
    if req.matches(&version) {
        Ok(())
    } else {
        Err(MetadataVersionError::TooOld)
    }
}

/// Masterminds `semver.NewVersion`: `v?N(.N)?(.N)?(-pre)?(+build)?`.
fn parse_masterminds(text: &str) -> Option<Version> {
    let rest = text.strip_prefix('v').unwrap_or(text);
    let (rest, build) = match rest.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (rest, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    let mut numbers = [0u64; 3];
    for (slot, part) in numbers.iter_mut().zip(&parts) {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *slot = part.parse().ok()?;
    }
    let mut version = Version::new(numbers[0], numbers[1], numbers[2]);
    if let Some(pre) = pre {
        version.pre = Prerelease::new(pre).ok()?;
        if version.pre.is_empty() {
            return None;
        }
    }
    if let Some(build) = build {
        version.build = BuildMetadata::new(build).ok()?;
        if version.build.is_empty() {
            return None;
        }
    }
    Some(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_parse_is_lenient() {
        assert!(!GenericVersion::parse("2.52.0").unwrap().less_than(2, 52, 0));
        assert!(
            !GenericVersion::parse("v2.52.0")
                .unwrap()
                .less_than(2, 52, 0)
        );
        assert!(!GenericVersion::parse("  2.52").unwrap().less_than(2, 52, 0));
        assert!(
            !GenericVersion::parse("2.52.0rc1")
                .unwrap()
                .less_than(2, 52, 0)
        );
        assert!(GenericVersion::parse("2.51.9").unwrap().less_than(2, 52, 0));
        assert!(!GenericVersion::parse("3.0").unwrap().less_than(2, 56, 0));
        assert!(
            !GenericVersion::parse("2.56.0.1")
                .unwrap()
                .less_than(2, 56, 0)
        );
    }

    #[test]
    fn generic_parse_errors_match_apimachinery() {
        assert_eq!(
            GenericVersion::parse("latest"),
            Err("could not parse \"latest\" as version".into())
        );
        assert_eq!(
            GenericVersion::parse("2"),
            Err("illegal version string \"2\"".into())
        );
        assert_eq!(
            GenericVersion::parse("02.1"),
            Err("illegal zero-prefixed version component \"02\" in \"02.1\"".into())
        );
        assert!(
            GenericVersion::parse("2.99999999999999999999")
                .unwrap_err()
                .starts_with("illegal non-numeric version component")
        );
    }

    #[test]
    fn metadata_version() {
        assert_eq!(check_metadata_version("2.6.0"), Ok(()));
        assert_eq!(check_metadata_version("v2.9"), Ok(()));
        assert_eq!(check_metadata_version("3"), Ok(()));
        assert_eq!(
            check_metadata_version("2.5.1"),
            Err(MetadataVersionError::TooOld)
        );
        assert_eq!(
            check_metadata_version("2.7.0-rc1"),
            Err(MetadataVersionError::TooOld)
        );
        assert_eq!(
            check_metadata_version("nightly"),
            Err(MetadataVersionError::Unparsable)
        );
        assert_eq!(
            check_metadata_version("2.6.0.1"),
            Err(MetadataVersionError::Unparsable)
        );
    }
}
