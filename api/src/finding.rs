//! What validation reports: one [`Finding`] per broken rule.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How bad a finding is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The object is rejected.
    Error,
    /// The object is accepted; the user is told.
    Warning,
}

/// Who enforces a rule.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Compat {
    /// KubeRay v1.7 enforces the same rule (in its CRD, controller or webhook).
    Kuberay,
    /// raygate's own rule, where KubeRay lets a broken object through.
    Raygate,
}

/// One broken rule, with where and why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Stable rule name, e.g. `rayjob-suspend-requires-shutdown`.
    pub rule: String,
    /// Error or warning.
    pub severity: Severity,
    /// Field path, e.g. `spec.rayClusterSpec.workerGroupSpecs[1].minReplicas`.
    pub field: String,
    /// The message; KubeRay's text where KubeRay has the rule.
    pub message: String,
    /// Whether KubeRay enforces the rule too.
    pub compat: Compat,
}

impl Finding {
    /// An error finding.
    pub fn error(
        rule: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
        compat: Compat,
    ) -> Self {
        Self {
            rule: rule.into(),
            severity: Severity::Error,
            field: field.into(),
            message: message.into(),
            compat,
        }
    }

    /// A warning finding.
    pub fn warning(
        rule: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
        compat: Compat,
    ) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(rule, field, message, compat)
        }
    }

    /// Whether this finding rejects the object.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// The errors among `findings`, each as `<field>: <message>` (kubectl's way of naming a bad
/// field), in order.
pub fn error_messages(findings: &[Finding]) -> Vec<String> {
    findings
        .iter()
        .filter(|f| f.is_error())
        .map(|f| format!("{}: {}", f.field, f.message))
        .collect()
}

impl fmt::Display for Finding {
    /// kubectl-style: `spec.backoffLimit: <message>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}
