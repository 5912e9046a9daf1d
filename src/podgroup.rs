//! `raygate podgroup`: print the Volcano PodGroup each RayJob and standalone RayCluster would
//! get.

use std::io::{self, Write};

use anyhow::Result;
use clap::ValueEnum;
use raygate_api::apply::{self, FieldValidation};
use raygate_api::finding::Finding;
use raygate_api::input;
use raygate_api::sizing;
use raygate_api::validation::ValidationContext;
use raygate_api::volcano::PodGroup;

use crate::flags::{FieldValidationArgs, Files, RuleOptions};
use crate::input::{read_inputs, skip_note};
use crate::validate::write_text_report;
use crate::{EXIT_INVALID, EXIT_VALID};

/// Print the Volcano PodGroup each RayJob and standalone RayCluster would get.
///
/// Exit codes: 0 all sized, 1 some object is invalid (as `validate` with the same
/// `--reconciler`, `--feature-gates` and `--validate` says) or cannot be sized, 2
/// unreadable input.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    files: Files,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = ObjectOutput::Yaml)]
    output: ObjectOutput,
    #[command(flatten)]
    rules: RuleOptions,
    #[command(flatten)]
    fields: FieldValidationArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ObjectOutput {
    /// YAML documents.
    Yaml,
    /// JSON (a `List` when there are several objects).
    Json,
}

/// Sizes the PodGroup of every RayJob and standalone RayCluster of the inputs.
pub fn run(args: Args) -> Result<u8> {
    let Args {
        files,
        output,
        rules,
        fields,
    } = args;
    podgroups(&files.files, output, &rules.context(), fields.validate)
}

/// Prints the PodGroups as `output`; an object that is invalid or cannot be sized gets none and
/// is reported on standard error.
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
