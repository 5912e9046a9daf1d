//! The committed `manifests/install.yaml` must be exactly what `raygate manifests` renders with
//! its defaults.

use std::path::PathBuf;

use raygate_api::manifests::{InstallOptions, render_yaml};

#[test]
fn committed_install_yaml_matches_the_default_rendering() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests/install.yaml");
    let rendered = render_yaml(&InstallOptions::default());
    if std::env::var_os("RAYGATE_WRITE_MANIFESTS").is_some() {
        std::fs::write(&path, &rendered).expect("write install.yaml");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == rendered,
        "manifests/install.yaml is out of date.\nRegenerate it with `cargo run -- manifests > manifests/install.yaml` \
         (or RAYGATE_WRITE_MANIFESTS=1 cargo test -p raygate-api --test manifests)."
    );
}
