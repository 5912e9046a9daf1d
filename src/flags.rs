//! Flag groups that several subcommands take, each defined once so that its name, environment
//! variable and default agree wherever it appears, and the tests holding every subcommand's
//! flags to that.

use clap::ValueEnum;
use raygate_api::apply::FieldValidation;
use raygate_api::features::FeatureGates;
use raygate_api::settings::{LabelAdmins, OptInLabel};
use raygate_api::validation::{ReconcilerKind, ValidationContext};

/// `-f`/`--filename`, for `validate`, `podgroup` and `convert`.
#[derive(clap::Args)]
pub(crate) struct Files {
    /// Manifest file (YAML or JSON, several documents allowed); `-` reads standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    pub(crate) files: Vec<String>,
}

/// `--feature-gates` and `--reconciler`, one definition for `validate`, `podgroup`, `webhook`,
/// `reconcile` and `run`, so that the CLI, the webhook and the reconciler default to the same controller
/// (the one the install manifests run).
#[derive(clap::Args, Debug)]
pub(crate) struct RuleOptions {
    /// KubeRay feature gates, e.g. `RayJobDeletionPolicy=false,RayClusterMTLS=true`.
    #[arg(
        long,
        value_name = "GATES",
        default_value = "",
        env = "RAYGATE_FEATURE_GATES"
    )]
    pub(crate) feature_gates: FeatureGates,
    /// Which controller runs the RayJobs and RayClusters of namespaces without the
    /// `raygate.io/reconciler` label: `raygate` (raygate's own controllers, which refuse the
    /// features they do not implement: autoscaler, GCS fault tolerance, …) or `kuberay` (a
    /// KubeRay operator without a batch scheduler runs them; raygate keeps their PodGroups in
    /// namespaces opted into Volcano). Validation applies that controller's rules.
    #[arg(
        long,
        value_enum,
        default_value_t = Reconciler::Raygate,
        env = "RAYGATE_RECONCILER",
        value_name = "RECONCILER"
    )]
    pub(crate) reconciler: Reconciler,
}

/// `--validate`, kubectl's flag, for `validate` and `podgroup`.
#[derive(clap::Args, Debug)]
pub(crate) struct FieldValidationArgs {
    /// Unknown fields, as kubectl's `--validate`: `strict` (or `true`) errors, `warn`
    /// warnings, `ignore` (or `false`) nothing.
    #[arg(
        long = "validate",
        value_name = "MODE",
        default_value = "strict",
        num_args = 0..=1,
        default_missing_value = "strict"
    )]
    pub(crate) validate: FieldValidation,
}

/// `--namespace-label`, one definition for every subcommand that needs it (`webhook`,
/// `reconcile`, `run`, `manifests`), so that its name, environment variable and default agree.
#[derive(clap::Args, Debug)]
pub(crate) struct NamespaceLabelArgs {
    /// The namespace label that opts a namespace into Volcano gang scheduling: Pod
    /// onboarding, PodGroups and QueuePolicies act only in namespaces labelled with it.
    #[arg(
        long,
        env = "RAYGATE_NAMESPACE_LABEL",
        value_name = "KEY=VALUE",
        default_value_t = OptInLabel::default()
    )]
    pub(crate) namespace_label: OptInLabel,
}

/// `--namespace-label-admins`, one definition for the subcommands that enforce or install it
/// (`webhook`, `run`, `manifests`); `reconcile` has no webhook and does not take it.
#[derive(clap::Args, Debug)]
pub(crate) struct LabelAdminsArgs {
    /// Who may add, change or remove the opt-in label on a Namespace: comma-separated
    /// `group:NAME` and `user:NAME` entries (anyone else is refused by the webhook, so a
    /// namespace owner cannot step out of the QueuePolicies). Empty: nobody.
    #[arg(
        long,
        env = "RAYGATE_NAMESPACE_LABEL_ADMINS",
        value_name = "group:NAME,user:NAME",
        default_value_t = LabelAdmins::default()
    )]
    pub(crate) namespace_label_admins: LabelAdmins,
}

impl LabelAdminsArgs {
    /// `label` with these admins.
    pub(crate) fn of(self, label: OptInLabel) -> OptInLabel {
        OptInLabel {
            admins: self.namespace_label_admins,
            ..label
        }
    }
}

/// The opt-in label and its admins, for the subcommands that take both.
#[derive(clap::Args, Debug)]
pub(crate) struct OptInArgs {
    #[command(flatten)]
    pub(crate) label: NamespaceLabelArgs,
    #[command(flatten)]
    pub(crate) admins: LabelAdminsArgs,
}

impl OptInArgs {
    /// The opt-in label with its admins.
    pub(crate) fn label(self) -> OptInLabel {
        self.admins.of(self.label.namespace_label)
    }
}

/// `--metrics-address`, one definition for `webhook`, `reconcile` and `run`: a process has one
/// plain-HTTP health and metrics listener, whichever parts it runs.
#[derive(clap::Args, Debug)]
pub(crate) struct MetricsArgs {
    /// Address of the plain-HTTP listener for probes and scraping (`/healthz`, `/readyz`,
    /// `/metrics`), one per process.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "0.0.0.0:9090",
        env = "RAYGATE_METRICS_ADDRESS"
    )]
    pub(crate) metrics_address: std::net::SocketAddr,
}

/// The controllers `--reconciler` chooses between.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Reconciler {
    /// raygate's lightweight reconciler.
    Raygate,
    /// The KubeRay operator.
    Kuberay,
}

impl From<Reconciler> for ReconcilerKind {
    fn from(reconciler: Reconciler) -> Self {
        match reconciler {
            Reconciler::Raygate => ReconcilerKind::Raygate,
            Reconciler::Kuberay => ReconcilerKind::Kuberay,
        }
    }
}

impl RuleOptions {
    /// The validation context these options select.
    pub(crate) fn context(&self) -> ValidationContext {
        ValidationContext {
            gates: self.feature_gates.clone(),
            reconciler: self.reconciler.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use clap::CommandFactory;

    use crate::Cli;

    /// Every flag of every subcommand that takes a span of time: `--…-timeout`, `-duration`,
    /// `-grace`, `-interval`, `-lifetime`, `-delay`, `-overlap`.
    fn duration_flags(command: &clap::Command) -> Vec<(String, clap::Arg)> {
        let mut flags = Vec::new();
        for subcommand in command.get_subcommands() {
            for arg in subcommand.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                let spans = [
                    "timeout", "duration", "grace", "interval", "lifetime", "delay", "overlap",
                ];
                if spans.iter().any(|span| long.ends_with(span)) {
                    flags.push((format!("{} --{long}", subcommand.get_name()), arg.clone()));
                }
            }
        }
        flags
    }

    #[test]
    fn a_flag_has_one_environment_variable_on_every_subcommand() {
        let mut envs: BTreeMap<String, BTreeMap<Option<String>, Vec<String>>> = BTreeMap::new();
        for subcommand in Cli::command().get_subcommands() {
            for arg in subcommand.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
                envs.entry(long.to_string())
                    .or_default()
                    .entry(env)
                    .or_default()
                    .push(subcommand.get_name().to_string());
            }
        }
        let split: Vec<_> = envs.iter().filter(|(_, by_env)| by_env.len() > 1).collect();
        assert!(split.is_empty(), "{split:#?}");
        assert!(
            envs["namespace-label"].contains_key(&Some("RAYGATE_NAMESPACE_LABEL".to_string())),
            "{envs:?}"
        );
    }

    #[test]
    fn every_duration_flag_takes_the_one_duration_syntax() {
        let command = Cli::command();
        let flags = duration_flags(&command);
        assert!(
            flags.len() >= 12,
            "{:?}",
            flags.iter().map(|(n, _)| n).collect::<Vec<_>>()
        );
        for (name, arg) in flags {
            let names: Vec<_> = arg.get_value_names().unwrap_or_default().to_vec();
            assert_eq!(names, ["DURATION"], "{name}");
            // Parsed as the user types it; a missing required argument of the subcommand
            // (e.g. `follow NAME`) is reported only after every value is parsed.
            let (subcommand, flag) = name.split_once(' ').expect("subcommand --flag");
            let parse = |value: &str| {
                Cli::command().try_get_matches_from(["raygate", subcommand, flag, value])
            };
            let refused = |value: &str| {
                parse(value).is_err_and(|e| e.kind() == clap::error::ErrorKind::ValueValidation)
            };
            for good in ["90s", "2m", "1h", "500ms"] {
                assert!(!refused(good), "{name} {good}");
            }
            for bad in ["10", "1.5s", "10w"] {
                assert!(refused(bad), "{name} {bad}");
            }
        }
    }
}
