//! `raygate run`: the webhook and the reconciler co-deployed in one process (the command of
//! the install manifests' Deployment).
//!
//! Every replica serves the webhook; the reconciler's controllers run only on the replica
//! holding the Lease; a replica that loses the Lease stands by again in the same process. Either
//! part can be switched off. A fatal error of either part ends the process, so that its
//! supervisor restarts it; the reconciler's first takes the webhook out of the Service (see
//! `webhook::serve_args`).

use anyhow::{Result, bail};
use raygate_api::validation::ReconcilerKind;

use std::sync::Arc;

use raygate_webhook::MetricsSource;

use crate::flags::{LabelAdminsArgs, MetricsArgs};
use crate::logging::LogArgs;
use crate::{EXIT_VALID, reconcile, webhook};

/// Run the webhook and the reconciler in one process, as the install manifests'
/// Deployment does: every replica serves the webhook, the Lease holder reconciles.
///
/// Exit codes: 0 after SIGTERM/SIGINT, 2 on a start-up error or a fatal error of either
/// part. A leader that loses its Lease stops its controllers and stands by; it does not
/// exit.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    args: Box<RunArgs>,
    #[command(flatten)]
    metrics: MetricsArgs,
    #[command(flatten)]
    log: LogArgs,
}

/// Flags of `raygate run`: those of `raygate webhook` and `raygate reconcile`, plus which
/// parts run.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Serve the admission and conversion webhook.
    #[arg(long, env = "RAYGATE_ENABLE_WEBHOOK", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    enable_webhook: bool,
    /// Run the reconciler (RayJob, RayCluster and QueuePolicy controllers). With `false`,
    /// RayJobs and RayClusters are left to KubeRay and validated for KubeRay.
    #[arg(long, env = "RAYGATE_ENABLE_RECONCILER", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    enable_reconciler: bool,
    #[command(flatten)]
    webhook: Box<webhook::WebhookArgs>,
    #[command(flatten)]
    reconciler: Box<reconcile::ReconcilerArgs>,
    #[command(flatten)]
    label_admins: LabelAdminsArgs,
}

/// Runs `raygate run` until SIGTERM/SIGINT or the first fatal error.
pub fn run(args: Args) -> Result<u8> {
    run_parts(*args.args, args.metrics, args.log)?;
    Ok(EXIT_VALID)
}

/// Runs the enabled parts until SIGTERM/SIGINT or the first fatal error, with one health and
/// metrics listener: the webhook's, which also serves the reconciler's metrics, or the
/// reconciler's own when the webhook is off.
fn run_parts(args: RunArgs, metrics: MetricsArgs, log: LogArgs) -> Result<()> {
    if !args.enable_webhook && !args.enable_reconciler {
        bail!("--enable-webhook=false and --enable-reconciler=false leave nothing to run");
    }
    crate::logging::init(log);
    let config = args.reconciler.config()?;
    // The webhook validates for whichever controller runs the objects.
    let mut validation = config.validation.clone();
    // One opt-in label for both parts: the reconciler's PodGroups are for exactly the Pods the
    // webhook onboards.
    let opt_in = args.label_admins.of(config.opt_in_label.clone());
    validation.reconciler =
        if args.enable_reconciler && config.default_reconciler == ReconcilerKind::Raygate {
            ReconcilerKind::Raygate
        } else {
            ReconcilerKind::Kuberay
        };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let reconciler_metrics = Arc::new(raygate_reconciler::Metrics::new());
    let shared = webhook::Shared {
        validation,
        opt_in,
        metrics_address: metrics.metrics_address,
        more_metrics: args.enable_reconciler.then(|| {
            let reconciler_metrics = reconciler_metrics.clone();
            Arc::new(move || reconciler_metrics.encode()) as MetricsSource
        }),
    };
    runtime.block_on(async move {
        let (reconciler_failed, failed) = tokio::sync::oneshot::channel::<()>();
        let webhook = async {
            if args.enable_webhook {
                let failed = async {
                    // A dropped sender is a reconciler that ended without failing.
                    if failed.await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                webhook::serve_args(*args.webhook, shared, failed).await
            } else {
                Ok(())
            }
        };
        let reconciler = async {
            let result = match (args.enable_reconciler, args.enable_webhook) {
                (true, true) => raygate_reconciler::run(config, reconciler_metrics).await,
                (true, false) => {
                    raygate_reconciler::run_serving_metrics(config, metrics.metrics_address).await
                }
                (false, _) => Ok(()),
            };
            if result.is_err() {
                let _ = reconciler_failed.send(());
            }
            result
        };
        tokio::pin!(webhook, reconciler);
        // The webhook's failure ends the process at once (it serves nothing then); the
        // reconciler's first takes the webhook out of service gracefully (`serve_args`).
        tokio::select! {
            served = &mut webhook => {
                served?;
                Ok(reconciler.await?)
            }
            reconciled = &mut reconciler => {
                let served = webhook.await;
                reconciled?;
                served
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RunArgs,
        #[command(flatten)]
        metrics: MetricsArgs,
    }

    #[test]
    fn webhook_and_reconciler_flags_do_not_clash() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_server_subcommand_has_one_health_and_metrics_address() {
        let command = crate::Cli::command();
        for name in ["run", "webhook", "reconcile"] {
            let subcommand = command
                .find_subcommand(name)
                .unwrap_or_else(|| panic!("raygate {name}"));
            let metrics: Vec<_> = subcommand
                .get_arguments()
                .filter_map(|arg| arg.get_long())
                .filter(|long| long.starts_with("metrics"))
                .collect();
            assert_eq!(metrics, ["metrics-address"], "raygate {name}");
        }
    }

    #[test]
    fn only_the_subcommands_with_a_webhook_take_the_label_admins() {
        let command = crate::Cli::command();
        for (name, expected) in [
            ("run", &["namespace-label", "namespace-label-admins"][..]),
            (
                "webhook",
                &["namespace-label", "namespace-label-admins"][..],
            ),
            (
                "manifests",
                &["namespace-label", "namespace-label-admins"][..],
            ),
            ("reconcile", &["namespace-label"][..]),
        ] {
            let subcommand = command
                .find_subcommand(name)
                .unwrap_or_else(|| panic!("raygate {name}"));
            let label_flags: Vec<_> = subcommand
                .get_arguments()
                .filter_map(|arg| arg.get_long())
                .filter(|long| long.starts_with("namespace-label"))
                .collect();
            assert_eq!(label_flags, expected, "raygate {name}");
        }
    }

    #[test]
    fn the_label_admins_of_run_reach_the_webhook_label() {
        let cli = Cli::try_parse_from([
            "run",
            "--namespace-label",
            "team.example/gang=yes",
            "--namespace-label-admins",
            "user:gitops",
        ])
        .expect("parses");
        let config = cli.args.reconciler.config().expect("valid flags");
        let label = cli.args.label_admins.of(config.opt_in_label);
        assert_eq!(label.to_string(), "team.example/gang=yes");
        assert_eq!(label.admins.to_string(), "user:gitops");
    }

    #[test]
    fn both_parts_run_by_default_and_each_can_be_switched_off() {
        let cli = Cli::try_parse_from(["run"]).expect("defaults parse");
        assert!(cli.args.enable_webhook && cli.args.enable_reconciler);
        let cli = Cli::try_parse_from(["run", "--enable-reconciler", "false"]).expect("parses");
        assert!(cli.args.enable_webhook && !cli.args.enable_reconciler);
    }

    #[test]
    fn switching_both_parts_off_is_refused() {
        let cli =
            Cli::try_parse_from(["run", "--enable-webhook=false", "--enable-reconciler=false"])
                .expect("parses");
        let error = run_parts(
            cli.args,
            cli.metrics,
            LogArgs {
                log_format: crate::logging::LogFormat::Text,
            },
        )
        .expect_err("nothing to run");
        assert!(error.to_string().contains("nothing to run"), "{error}");
    }
}
