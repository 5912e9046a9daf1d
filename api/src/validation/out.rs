//! Where findings go: field-path prefixing and KubeRay's RayJob message wrapper.

use crate::finding::{Compat, Finding};

/// Collects findings for one object part (a RayCluster spec, standalone or embedded).
pub(crate) struct Out<'a> {
    findings: &'a mut Vec<Finding>,
    /// Prepended to relative field paths: `spec.` or `spec.rayClusterSpec.`.
    prefix: &'static str,
    /// KubeRay's wrapper for errors of this part (`The RayJob spec is invalid: `), if any.
    wrapper: &'static str,
}

impl<'a> Out<'a> {
    /// A sink writing into `findings`.
    pub(crate) fn new(
        findings: &'a mut Vec<Finding>,
        prefix: &'static str,
        wrapper: &'static str,
    ) -> Self {
        Self {
            findings,
            prefix,
            wrapper,
        }
    }

    /// The full path of `field`: paths under `metadata.` or `status.` are absolute, others are
    /// relative to the prefix.
    pub(crate) fn path(&self, field: &str) -> String {
        if field.starts_with("metadata.") || field.starts_with("status.") {
            field.to_string()
        } else {
            format!("{}{field}", self.prefix)
        }
    }

    /// A KubeRay error, wrapped like KubeRay wraps it for this part.
    pub(crate) fn kuberay(&mut self, rule: &str, field: &str, message: impl AsRef<str>) {
        let message = format!("{}{}", self.wrapper, message.as_ref());
        let field = self.path(field);
        self.findings
            .push(Finding::error(rule, field, message, Compat::Kuberay));
    }

    /// A KubeRay warning (never wrapped: KubeRay only emits it as an event).
    pub(crate) fn kuberay_warning(&mut self, rule: &str, field: &str, message: impl Into<String>) {
        let field = self.path(field);
        self.findings
            .push(Finding::warning(rule, field, message, Compat::Kuberay));
    }

    /// A raygate error.
    pub(crate) fn raygate(&mut self, rule: &str, field: &str, message: impl Into<String>) {
        let field = self.path(field);
        self.findings
            .push(Finding::error(rule, field, message, Compat::Raygate));
    }

    /// A raygate warning.
    pub(crate) fn raygate_warning(&mut self, rule: &str, field: &str, message: impl Into<String>) {
        let field = self.path(field);
        self.findings
            .push(Finding::warning(rule, field, message, Compat::Raygate));
    }
}
