//! `raygate validate`: check RayJobs and RayClusters as `kubectl apply` through raygate's webhook
//! would, optionally against a cluster's Nodes; also the kubectl-style text report `podgroup`
//! prints for an invalid object.

use std::io::{self, Write};

use anyhow::{Context, Result};
use clap::ValueEnum;
use k8s_openapi::api::core::v1::Node;
use raygate_api::admission::rules;
use raygate_api::apply::{self, FieldValidation};
use raygate_api::check::ObjectReport;
use raygate_api::feasibility::{self, NodeKinds, NodeShape};
use raygate_api::finding::{Finding, Severity};
use raygate_api::validation::ValidationContext;

use crate::flags::{FieldValidationArgs, Files, RuleOptions};
use crate::input::{for_each_input_document, skip_note};
use crate::{EXIT_INVALID, EXIT_UNREADABLE, EXIT_VALID};

/// Validate RayJobs and RayClusters as `kubectl apply` through raygate's webhook would.
///
/// Exit codes: 0 every object is valid, 1 some object is invalid, 2 some input could not
/// be read or parsed (the documents before a syntax error are still checked, as kubectl
/// applies them). Other kinds are skipped with a note on standard error.
#[derive(clap::Args)]
pub struct Args {
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
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ValidateOutput {
    /// kubectl-style lines.
    Text,
    /// One JSON array of reports.
    Json,
}

/// Reads the Nodes to check against, if any, then validates every input.
pub fn run(args: Args) -> Result<u8> {
    let Args {
        files,
        output,
        nodes,
        cluster,
        rules,
        fields,
    } = args;
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
pub(crate) fn write_text_report(out: &mut impl Write, report: &ObjectReport) -> io::Result<()> {
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

/// The `[rule, compat: …]` tag after each finding.
fn rule_tag(finding: &Finding) -> String {
    let compat = serde_json::to_value(finding.compat)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!("[{}, compat: {compat}]", finding.rule)
}
