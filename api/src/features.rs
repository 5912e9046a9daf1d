//! KubeRay feature gates, with KubeRay v1.7's names and defaults.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// A KubeRay feature gate that changes what raygate accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// `status.conditions` on RayClusters (beta, on).
    RayClusterStatusConditions,
    /// `deletionStrategy` on RayJobs and worker-group `suspend` (beta, on).
    RayJobDeletionPolicy,
    /// Replica and host index labels on multi-host workers (beta, on).
    RayMultiHostIndexing,
    /// RayService incremental upgrades (beta, on).
    RayServiceIncrementalUpgrade,
    /// SidecarMode submitter container restarts (alpha, off).
    SidecarSubmitterRestart,
    /// `gcsFaultToleranceOptions.backend: rocksdb` (alpha, off).
    GcsFaultToleranceEmbeddedStorage,
    /// `spec.networkPolicy` (alpha, off).
    RayClusterNetworkPolicy,
    /// `spec.tlsOptions` (alpha, off).
    RayClusterMtls,
    /// `spec.historyServerOptions` (alpha, off).
    RayClusterHistoryServer,
    /// The RayCronJob kind (alpha, off).
    RayCronJob,
    /// The Kubernetes WAS batch scheduler (alpha, off).
    KubernetesWas,
}

impl Feature {
    /// Every gate, in KubeRay's order.
    pub const ALL: [Feature; 11] = [
        Feature::RayClusterStatusConditions,
        Feature::RayJobDeletionPolicy,
        Feature::RayMultiHostIndexing,
        Feature::RayServiceIncrementalUpgrade,
        Feature::SidecarSubmitterRestart,
        Feature::GcsFaultToleranceEmbeddedStorage,
        Feature::RayClusterNetworkPolicy,
        Feature::RayClusterMtls,
        Feature::RayClusterHistoryServer,
        Feature::RayCronJob,
        Feature::KubernetesWas,
    ];

    /// KubeRay's name of the gate.
    pub fn name(self) -> &'static str {
        match self {
            Feature::RayClusterStatusConditions => "RayClusterStatusConditions",
            Feature::RayJobDeletionPolicy => "RayJobDeletionPolicy",
            Feature::RayMultiHostIndexing => "RayMultiHostIndexing",
            Feature::RayServiceIncrementalUpgrade => "RayServiceIncrementalUpgrade",
            Feature::SidecarSubmitterRestart => "SidecarSubmitterRestart",
            Feature::GcsFaultToleranceEmbeddedStorage => "GCSFaultToleranceEmbeddedStorage",
            Feature::RayClusterNetworkPolicy => "RayClusterNetworkPolicy",
            Feature::RayClusterMtls => "RayClusterMTLS",
            Feature::RayClusterHistoryServer => "RayClusterHistoryServer",
            Feature::RayCronJob => "RayCronJob",
            Feature::KubernetesWas => "KubernetesWAS",
        }
    }

    /// KubeRay v1.7's default.
    pub fn default_enabled(self) -> bool {
        matches!(
            self,
            Feature::RayClusterStatusConditions
                | Feature::RayJobDeletionPolicy
                | Feature::RayMultiHostIndexing
                | Feature::RayServiceIncrementalUpgrade
        )
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The gates in force: KubeRay's defaults, with overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates {
    overrides: BTreeMap<Feature, bool>,
}

/// A `--feature-gates` value that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// Not of the form `Name=true|false`.
    #[error("invalid feature gate {0:?}: expected Name=true|false")]
    Malformed(String),
    /// Not a KubeRay gate.
    #[error("unknown feature gate {name:?}; known gates: {known}")]
    Unknown {
        /// The name given.
        name: String,
        /// The names that exist.
        known: String,
    },
}

impl FeatureGates {
    /// Whether `feature` is on.
    pub fn enabled(&self, feature: Feature) -> bool {
        self.overrides
            .get(&feature)
            .copied()
            .unwrap_or_else(|| feature.default_enabled())
    }

    /// Turns `feature` on or off.
    pub fn set(&mut self, feature: Feature, enabled: bool) {
        self.overrides.insert(feature, enabled);
    }
}

impl FromStr for FeatureGates {
    type Err = FeatureGateError;

    /// Parses KubeRay's `--feature-gates` syntax: `Name=true,Other=false` (empty = defaults).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut gates = FeatureGates::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| FeatureGateError::Malformed(item.to_string()))?;
            let enabled = match value.trim() {
                "true" => true,
                "false" => false,
                _ => return Err(FeatureGateError::Malformed(item.to_string())),
            };
            let feature = Feature::ALL
                .into_iter()
                .find(|f| f.name() == name.trim())
                .ok_or_else(|| FeatureGateError::Unknown {
                    name: name.trim().to_string(),
                    known: Feature::ALL.map(Feature::name).join(", "),
                })?;
            gates.set(feature, enabled);
        }
        Ok(gates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_kuberay_1_7() {
        let gates = FeatureGates::default();
        assert!(gates.enabled(Feature::RayJobDeletionPolicy));
        assert!(gates.enabled(Feature::RayClusterStatusConditions));
        assert!(!gates.enabled(Feature::SidecarSubmitterRestart));
        assert!(!gates.enabled(Feature::RayClusterMtls));
    }

    #[test]
    fn parses_overrides() {
        let gates: FeatureGates = "RayJobDeletionPolicy=false, RayClusterMTLS=true"
            .parse()
            .unwrap();
        assert!(!gates.enabled(Feature::RayJobDeletionPolicy));
        assert!(gates.enabled(Feature::RayClusterMtls));
        assert!(gates.enabled(Feature::RayMultiHostIndexing));
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(
            "RayJobDeletionPolicy".parse::<FeatureGates>(),
            Err(FeatureGateError::Malformed("RayJobDeletionPolicy".into()))
        );
        assert!(matches!(
            "Nope=true".parse::<FeatureGates>(),
            Err(FeatureGateError::Unknown { .. })
        ));
        assert!("X=maybe".parse::<FeatureGates>().is_err());
    }
}
