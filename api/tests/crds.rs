//! The committed CRDs in `manifests/chart/files/crds/` must be exactly what the types generate.

use std::path::PathBuf;

fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests/chart/files/crds")
}

#[test]
fn committed_crds_match_generated() {
    if std::env::var_os("RAYGATE_WRITE_CRDS").is_some() {
        for (name, yaml) in raygate_api::crd::generate_crd_files() {
            std::fs::write(crds_dir().join(name), yaml).expect("write CRD");
        }
    }
    let mut stale = Vec::new();
    let generated = raygate_api::crd::generate_crd_files();
    assert_eq!(
        generated.iter().map(|(name, _)| name).collect::<Vec<_>>(),
        raygate_api::crd::crd_files()
            .iter()
            .map(|(name, _)| name)
            .collect::<Vec<_>>(),
        "the embedded CRD files must be the generated ones"
    );
    for (name, yaml) in generated {
        let path = crds_dir().join(&name);
        match std::fs::read_to_string(&path) {
            Ok(committed) if committed == yaml => {}
            Ok(_) => stale.push(format!("{name} differs from the generated CRD")),
            Err(e) => stale.push(format!("{name} cannot be read ({e})")),
        }
    }
    assert!(
        stale.is_empty(),
        "manifests/chart/files/crds/ is out of date: {}.\nRegenerate it with `cargo run -- crds --write manifests/chart/files/crds`.",
        stale.join("; ")
    );
}

#[test]
fn render_crds_yaml_is_the_concatenation_of_the_files() {
    let files: String = raygate_api::crd::crd_files()
        .into_iter()
        .map(|(_, yaml)| yaml)
        .collect();
    assert_eq!(raygate_api::crd::render_crds_yaml(), files);
}
