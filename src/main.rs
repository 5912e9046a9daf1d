//! The `raygate` command: validate Ray manifests, show the PodGroups they get, print the CRDs.
//!
//! Only wiring lives here: every decision is made by `raygate_api`, the same functions the
//! webhook and the reconciler call.

mod follow;
mod logging;
mod reconcile;
mod run;

use std::fs;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

mod certs;
mod webhook;

/// JSON trees are allocation-heavy; mimalloc validates large manifests markedly faster than the
/// system allocator (see `cargo bench -p raygate-api --bench throughput`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod convert;
mod manifests;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use k8s_openapi::api::core::v1::Node;
use raygate_api::admission::rules;
use raygate_api::apply::{self, FieldValidation};
use raygate_api::check::{self, ObjectReport};
use raygate_api::feasibility::{self, NodeKinds, NodeShape};
use raygate_api::features::FeatureGates;
use raygate_api::finding::{Finding, Severity};
use raygate_api::input::{self, Document};
use raygate_api::settings::{LabelAdmins, OptInLabel};
use raygate_api::sizing;
use raygate_api::validation::{ReconcilerKind, ValidationContext};
use raygate_api::{crd, volcano::PodGroup};

/// Exit code: every object is valid.
const EXIT_VALID: u8 = 0;
/// Exit code: some object is invalid (or could not be sized).
const EXIT_INVALID: u8 = 1;
/// Exit code: some input could not be read or parsed.
const EXIT_UNREADABLE: u8 = 2;

#[derive(Parser)]
#[command(
    name = "raygate",
    version,
    about = "Runs KubeRay RayJobs and RayClusters on the Volcano batch scheduler",
    long_about = "raygate validates Ray workloads the way KubeRay v1.7 does (and more) and sizes \
                  the Volcano PodGroups that gang-schedule them."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate RayJobs and RayClusters as `kubectl apply` through raygate's webhook would.
    ///
    /// Exit codes: 0 every object is valid, 1 some object is invalid, 2 some input could not
    /// be read or parsed (the documents before a syntax error are still checked, as kubectl
    /// applies them). Other kinds are skipped with a note on standard error.
    Validate {
        #[command(flatten)]
        files: Files,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = ValidateOutput::Text)]
        output: ValidateOutput,
        /// Also check that each object's Pods could be scheduled on these nodes (a file of v1
        /// Node objects: `kubectl get nodes -o yaml`, a List or several documents), as the
        /// webhook does; what could never be scheduled is reported as warnings.
        #[arg(long, value_name = "FILE", conflicts_with = "cluster")]
        nodes: Option<String>,
        /// As `--nodes`, with the Nodes of the cluster kubectl's current context points at
        /// (`KUBECONFIG`, else `~/.kube/config`): the check the webhook makes there at apply.
        #[arg(long)]
        cluster: bool,
        #[command(flatten)]
        rules: RuleOptions,
        #[command(flatten)]
        fields: FieldValidationArgs,
    },
    /// Print the Volcano PodGroup each RayJob and standalone RayCluster would get.
    ///
    /// Exit codes: 0 all sized, 1 some object is invalid (as `validate` with the same
    /// `--reconciler`, `--feature-gates` and `--validate` says) or cannot be sized, 2
    /// unreadable input.
    Podgroup {
        #[command(flatten)]
        files: Files,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = ObjectOutput::Yaml)]
        output: ObjectOutput,
        #[command(flatten)]
        rules: RuleOptions,
        #[command(flatten)]
        fields: FieldValidationArgs,
    },
    /// Print the ray.io CustomResourceDefinitions raygate serves.
    Crds {
        /// Generate the CRDs from raygate's types and write one file per CRD into this
        /// directory (how `manifests/chart/files/crds/` is refreshed), instead of printing them.
        #[arg(long, value_name = "DIR")]
        write: Option<PathBuf>,
    },
    /// Convert ray.io RayJobs and RayClusters between v1alpha1 and v1, offline.
    ///
    /// Prints every document as YAML; other kinds pass through untouched. Fields only v1 has
    /// are kept in the `raygate.io/v1-fields` annotation in v1alpha1 and restored in v1.
    /// Exit codes: 0 converted, 1 some object cannot be converted, 2 unreadable input.
    Convert {
        #[command(flatten)]
        files: Files,
        /// The version to convert to.
        #[arg(long, value_enum)]
        to: convert::Target,
    },
    /// Print everything needed to install raygate (CRDs, RBAC, Deployment, Service, webhooks).
    Manifests {
        #[command(flatten)]
        install: Box<manifests::InstallArgs>,
        #[command(flatten)]
        webhooks: manifests::WebhookConfigurationArgs,
    },
    /// Run the admission webhook server (TLS): Pod onboarding into Volcano gangs for
    /// namespaces labelled `raygate.io/scheduler=volcano`, RayJob/RayCluster validation.
    ///
    /// Runs until SIGTERM or SIGINT, then drains in-flight reviews.
    Webhook {
        #[command(flatten)]
        server: Box<webhook::WebhookArgs>,
        #[command(flatten)]
        opt_in: OptInArgs,
        #[command(flatten)]
        metrics: MetricsArgs,
        #[command(flatten)]
        rules: RuleOptions,
        #[command(flatten)]
        log: logging::LogArgs,
    },
    /// Run raygate's reconciler: turns RayClusters into a head Service and Pods (with their
    /// Volcano PodGroup in opted-in namespaces), with leader election, health and metrics.
    ///
    /// Exit codes: 0 after SIGTERM/SIGINT, 2 on a start-up error or a fatal API error. A
    /// leader that loses its Lease stops its controllers and stands by; it does not exit.
    Reconcile {
        #[command(flatten)]
        args: Box<reconcile::Args>,
        #[command(flatten)]
        metrics: MetricsArgs,
        #[command(flatten)]
        log: logging::LogArgs,
    },
    /// Run the webhook and the reconciler in one process, as the install manifests'
    /// Deployment does: every replica serves the webhook, the Lease holder reconciles.
    ///
    /// Exit codes: 0 after SIGTERM/SIGINT, 2 on a start-up error or a fatal error of either
    /// part. A leader that loses its Lease stops its controllers and stands by; it does not
    /// exit.
    Run {
        #[command(flatten)]
        args: Box<run::RunArgs>,
        #[command(flatten)]
        metrics: MetricsArgs,
        #[command(flatten)]
        log: logging::LogArgs,
    },
    /// Follow a RayJob to its end: print each state transition, its Volcano PodGroup and,
    /// once it is over, the Ray job's output.
    ///
    /// Exit codes: 0 Complete with jobStatus SUCCEEDED, 1 any other end, 2 on an error or
    /// timeout.
    Follow {
        #[command(flatten)]
        args: follow::Args,
    },
    /// Print raygate's version and the upstream versions it is compatible with.
    Version,
}

#[derive(clap::Args)]
struct Files {
    /// Manifest file (YAML or JSON, several documents allowed); `-` reads standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    files: Vec<String>,
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
struct FieldValidationArgs {
    /// Unknown fields, as kubectl's `--validate`: `strict` (or `true`) errors, `warn`
    /// warnings, `ignore` (or `false`) nothing.
    #[arg(
        long = "validate",
        value_name = "MODE",
        default_value = "strict",
        num_args = 0..=1,
        default_missing_value = "strict"
    )]
    validate: FieldValidation,
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

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ValidateOutput {
    /// kubectl-style lines.
    Text,
    /// One JSON array of reports.
    Json,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ObjectOutput {
    /// YAML documents.
    Yaml,
    /// JSON (a `List` when there are several objects).
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        // The reader went away (`raygate podgroup -f x.yaml | head`): nothing is wrong.
        Err(e) if is_broken_pipe(&e) => ExitCode::from(EXIT_VALID),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_UNREADABLE)
        }
    }
}

/// Whether writing the output failed because its reader closed the pipe.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Validate {
            files,
            output,
            nodes,
            cluster,
            rules,
            fields,
        } => {
            let nodes = if cluster {
                match cluster_nodes() {
                    Ok(nodes) => Some(nodes),
                    Err(e) => {
                        eprintln!("error: {e:#}");
                        return Ok(EXIT_UNREADABLE);
                    }
                }
            } else {
                match nodes.as_deref().map(read_nodes).transpose() {
                    Ok(nodes) => nodes,
                    Err(code) => return Ok(code),
                }
            };
            validate(
                &files.files,
                output,
                nodes.map(NodeKinds::from_shapes).as_ref(),
                &rules.context(),
                fields.validate,
            )
        }
        Command::Podgroup {
            files,
            output,
            rules,
            fields,
        } => podgroups(&files.files, output, &rules.context(), fields.validate),
        Command::Crds { write } => crds(write),
        Command::Convert { files, to } => convert::run(&files.files, to),
        Command::Manifests { install, webhooks } => manifests::run(*install, webhooks),
        Command::Webhook {
            server,
            opt_in,
            metrics,
            rules,
            log,
        } => {
            let shared = webhook::Shared {
                validation: rules.context(),
                opt_in: opt_in.label(),
                metrics_address: metrics.metrics_address,
                more_metrics: None,
            };
            webhook::run(*server, shared, log)?;
            Ok(EXIT_VALID)
        }
        Command::Reconcile { args, metrics, log } => {
            reconcile::run(*args, metrics, log)?;
            Ok(EXIT_VALID)
        }
        Command::Run { args, metrics, log } => {
            run::run(*args, metrics, log)?;
            Ok(EXIT_VALID)
        }
        Command::Follow { args } => follow::run(args),
        Command::Version => {
            writeln!(
                io::stdout().lock(),
                "raygate {} (ray.io/v1 compatible with KubeRay v1.7, Volcano scheduling.volcano.sh/v1beta1)",
                env!("CARGO_PKG_VERSION")
            )?;
            Ok(EXIT_VALID)
        }
    }
}

impl RuleOptions {
    fn context(&self) -> ValidationContext {
        ValidationContext {
            gates: self.feature_gates.clone(),
            reconciler: self.reconciler.into(),
        }
    }
}

/// Hands every object of every input to `visit`, with its input's name, as soon as it is
/// parsed (one object in memory at a time); `Err` with the code for unreadable input after
/// reporting why, once every input has been tried. `visit` has then seen the objects before the
/// syntax error: `validate` reports them (kubectl applies them), `podgroup` discards them.
fn for_each_input_document(
    files: &[String],
    mut visit: impl FnMut(&str, Document),
) -> Result<(), u8> {
    let mut unreadable = false;
    for name in files {
        let text = match read_text(name) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("error: {e:#}");
                unreadable = true;
                continue;
            }
        };
        if let Err(e) = input::for_each_document(name, &text, |doc| visit(name, doc)) {
            eprintln!("error: {e}");
            unreadable = true;
        }
    }
    if unreadable {
        Err(EXIT_UNREADABLE)
    } else {
        Ok(())
    }
}

/// Every object of every input, or the code for unreadable input after reporting why.
fn read_inputs(files: &[String]) -> Result<Vec<(String, Document)>, u8> {
    let mut documents = Vec::new();
    for_each_input_document(files, |source, doc| {
        documents.push((source.to_string(), doc))
    })?;
    Ok(documents)
}

fn read_text(name: &str) -> Result<String> {
    if name == "-" {
        let mut text = String::new();
        io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
        Ok(text)
    } else {
        fs::read_to_string(name).with_context(|| format!("reading {name}"))
    }
}

/// What to say if a document turns out not to be a Ray object.
fn skip_note(source: &str, doc: &Document) -> String {
    let what = check::type_meta(&doc.value)
        .map(|(api_version, kind)| format!("{kind} ({api_version})"))
        .unwrap_or_else(|| "an object without apiVersion/kind".to_string());
    format!(
        "note: {source}: document {} is {what}; only ray.io RayJob and RayCluster are checked, skipping",
        doc.index + 1
    )
}

/// The shapes of the Nodes in `file`, or the code for unreadable input after reporting why.
fn read_nodes(file: &str) -> Result<Vec<NodeShape>, u8> {
    let mut shapes = Vec::new();
    let mut broken = false;
    for_each_input_document(&[file.to_string()], |source, doc| {
        match feasibility::node_shape_of_document(doc) {
            Ok(shape) => shapes.push(shape),
            Err(e) => {
                eprintln!("error: {source}: {e}");
                broken = true;
            }
        }
    })?;
    if broken {
        Err(EXIT_UNREADABLE)
    } else {
        Ok(shapes)
    }
}

/// The shapes of the Nodes of the cluster kubectl's current context points at, listed in pages
/// as the webhook's watch lists them.
fn cluster_nodes() -> Result<Vec<NodeShape>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let client = kube::Client::try_default()
            .await
            .context("no Kubernetes client (KUBECONFIG, ~/.kube/config or in-cluster config)")?;
        let nodes: kube::Api<Node> = kube::Api::all(client);
        let mut shapes = Vec::new();
        let mut params = kube::api::ListParams::default().limit(NODE_LIST_PAGE);
        loop {
            let page = nodes
                .list(&params)
                .await
                .context("listing the cluster's Nodes")?;
            shapes.extend(page.items.iter().map(NodeShape::of));
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(shapes),
            }
        }
    })
}

/// Nodes per page of `validate --cluster`'s list (kube-runtime's watcher default).
const NODE_LIST_PAGE: u32 = 500;

/// As `kubectl apply`: every document read before a syntax error gets its verdict, then the
/// code for unreadable input.
fn validate(
    files: &[String],
    output: ValidateOutput,
    nodes: Option<&NodeKinds>,
    ctx: &ValidationContext,
    fields: FieldValidation,
) -> Result<u8> {
    let mut reports = Vec::new();
    let mut notes = Vec::new();
    let read = for_each_input_document(files, |source, doc| {
        if !apply::judges(&doc.value) {
            notes.push(skip_note(source, &doc));
        } else if let Some(checked) = apply::check_manifest(doc.value, ctx, fields) {
            let mut report = checked.report;
            if let (Some(nodes), Some(typed), Some(Ok(gang))) =
                (nodes, &checked.typed, &checked.gang)
            {
                report
                    .findings
                    .extend(rules::feasibility_findings(typed, gang, nodes, None));
            }
            reports.push(report);
        }
    });
    for note in notes {
        eprintln!("{note}");
    }
    let mut out = io::stdout().lock();
    match output {
        ValidateOutput::Json => {
            serde_json::to_writer_pretty(&mut out, &reports)?;
            writeln!(out)?;
        }
        ValidateOutput::Text => {
            for report in &reports {
                write_text_report(&mut out, report)?;
            }
        }
    }
    Ok(match read {
        Err(code) => code,
        Ok(()) if reports.iter().all(|r| r.valid) => EXIT_VALID,
        Ok(()) => EXIT_INVALID,
    })
}

/// kubectl's wording: `The RayJob "demo" is invalid:` followed by `* field: message` lines.
fn write_text_report(out: &mut impl Write, report: &ObjectReport) -> io::Result<()> {
    let name = report.display_name();
    let resource = format!("{}.ray.io/{name}", report.kind.to_lowercase());
    let namespace = report
        .namespace
        .as_deref()
        .filter(|ns| !ns.is_empty())
        .map(|ns| format!(" -n {ns}"))
        .unwrap_or_default();
    if report.valid {
        writeln!(out, "{resource}{namespace} valid")?;
    } else {
        writeln!(out, "The {} {name:?}{namespace} is invalid:", report.kind)?;
        for finding in report.findings.iter().filter(|f| f.is_error()) {
            writeln!(out, "* {finding} {}", rule_tag(finding))?;
        }
    }
    for finding in report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
    {
        writeln!(out, "Warning: {resource}: {finding} {}", rule_tag(finding))?;
    }
    Ok(())
}

fn rule_tag(finding: &Finding) -> String {
    let compat = serde_json::to_value(finding.compat)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!("[{}, compat: {compat}]", finding.rule)
}

fn podgroups(
    files: &[String],
    output: ObjectOutput,
    ctx: &ValidationContext,
    fields: FieldValidation,
) -> Result<u8> {
    let documents = match read_inputs(files) {
        Ok(documents) => documents,
        Err(code) => return Ok(code),
    };
    let mut groups: Vec<PodGroup> = Vec::new();
    let mut failed = false;
    for (source, doc) in documents {
        let note = skip_note(&source, &doc);
        let Some(checked) = apply::check_manifest(doc.value, ctx, fields) else {
            eprintln!("{note}");
            continue;
        };
        let report = &checked.report;
        let key = format!("{}/{}", report.kind, report.display_name());
        let Some(result) = checked.pod_group() else {
            let reasons: Vec<String> = report
                .findings
                .iter()
                .filter(|f| f.is_error())
                .map(Finding::to_string)
                .collect();
            eprintln!(
                "error: {source}: {key} cannot be read: {}",
                reasons.join("; ")
            );
            failed = true;
            continue;
        };
        match result {
            Ok(_) if !report.valid => {
                write_text_report(&mut io::stderr().lock(), report)?;
                eprintln!(
                    "error: {source}: {key} is invalid, so it gets no PodGroup; fix what \
                     raygate validate reports above"
                );
                failed = true;
            }
            Ok(group) => {
                if let Some(prefix) = &report.generate_name {
                    eprintln!(
                        "note: {source}: {key} has generateName {prefix:?} and no name: the API \
                         server appends 5 random characters, shown as {}, and the PodGroup is \
                         named after the result",
                        raygate_api::keys::GENERATED_SUFFIX
                    );
                }
                groups.push(group);
            }
            Err(sizing::SizingError::OwnedByRayJob { .. }) => {
                eprintln!(
                    "note: {source}: {key} was created by a RayJob; its Pods join the RayJob's PodGroup"
                );
            }
            Err(e) => {
                eprintln!("error: {source}: {key}: {e}");
                failed = true;
            }
        }
    }
    let mut out = io::stdout().lock();
    match output {
        ObjectOutput::Json => {
            let value = match groups.as_slice() {
                [one] => serde_json::to_value(one)?,
                many => serde_json::json!({"apiVersion": "v1", "kind": "List", "items": many}),
            };
            serde_json::to_writer_pretty(&mut out, &value)?;
            writeln!(out)?;
        }
        ObjectOutput::Yaml => {
            let values = groups
                .iter()
                .map(serde_json::to_value)
                .collect::<Result<Vec<_>, _>>()?;
            out.write_all(input::documents_to_yaml(&values).as_bytes())?;
        }
    }
    Ok(if failed { EXIT_INVALID } else { EXIT_VALID })
}

fn crds(write: Option<PathBuf>) -> Result<u8> {
    match write {
        None => io::stdout()
            .lock()
            .write_all(crd::render_crds_yaml().as_bytes())?,
        Some(dir) => {
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for (file, yaml) in crd::generate_crd_files() {
                let path = dir.join(file);
                fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
        }
    }
    Ok(EXIT_VALID)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use clap::CommandFactory;

    use super::*;

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
