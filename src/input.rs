//! Reading the manifests named on the command line (`-f`), shared by `validate`, `podgroup` and
//! `convert`.

use std::fs;
use std::io::{self, Read};

use anyhow::{Context, Result};
use raygate_api::check;
use raygate_api::input::{self, Document};

use crate::EXIT_UNREADABLE;

/// Hands every object of every input to `visit`, with its input's name, as soon as it is
/// parsed (one object in memory at a time); `Err` with the code for unreadable input after
/// reporting why, once every input has been tried. `visit` has then seen the objects before the
/// syntax error: `validate` reports them (kubectl applies them), `podgroup` discards them.
pub(crate) fn for_each_input_document(
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
pub(crate) fn read_inputs(files: &[String]) -> Result<Vec<(String, Document)>, u8> {
    let mut documents = Vec::new();
    for_each_input_document(files, |source, doc| {
        documents.push((source.to_string(), doc))
    })?;
    Ok(documents)
}

/// The text of the file `name`, or of standard input for `-`.
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
pub(crate) fn skip_note(source: &str, doc: &Document) -> String {
    let what = check::type_meta(&doc.value)
        .map(|(api_version, kind)| format!("{kind} ({api_version})"))
        .unwrap_or_else(|| "an object without apiVersion/kind".to_string());
    format!(
        "note: {source}: document {} is {what}; only ray.io RayJob and RayCluster are checked, skipping",
        doc.index + 1
    )
}
