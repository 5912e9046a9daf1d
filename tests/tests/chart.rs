//! The Helm chart (`manifests/chart`) with the environment's real `helm` (built from
//! `helm.sh/helm/v3` by `tests/env/build`): it lints, refuses bad values with a message naming
//! the value, and renders exactly the objects `raygate manifests` renders for the same settings
//! (the chart and the CLI cannot drift apart).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use raygate_e2e::Env;
use serde_json::{Value, json};

/// The chart's directory.
fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/chart")
}

/// Runs `helm ARGS...`; returns (success, stdout, stderr).
fn helm(env: &Env, args: &[&str]) -> (bool, String, String) {
    let helm = env.var("RAYGATE_HELM");
    let output = Command::new(helm)
        .args(args)
        // Helm's caches and config stay out of the home directory.
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("raygate-e2e-helm/cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("raygate-e2e-helm/config"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("raygate-e2e-helm/data"),
        )
        .output()
        .unwrap_or_else(|e| panic!("running {helm}: {e}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `helm template raygate manifests/chart -n NS -f VALUES`, as parsed objects.
fn helm_template(env: &Env, namespace: &str, values: &Value) -> Vec<Value> {
    let file = std::env::temp_dir().join(format!(
        "raygate-e2e-chart-values-{}-{namespace}.yaml",
        std::process::id()
    ));
    std::fs::write(&file, serde_json::to_string(values).expect("values")).expect("values file");
    let chart = chart();
    let (ok, stdout, stderr) = helm(
        env,
        &[
            "template",
            "raygate",
            chart.to_str().expect("utf-8 path"),
            "--namespace",
            namespace,
            "--values",
            file.to_str().expect("utf-8 path"),
        ],
    );
    std::fs::remove_file(&file).ok();
    assert!(ok, "helm template failed:\n{stderr}");
    documents(&stdout)
}

/// `raygate manifests ARGS...`, as parsed objects.
fn raygate_manifests(args: &[&str]) -> Vec<Value> {
    let output = Command::new(raygate_e2e::raygate::binary())
        .arg("manifests")
        .args(args)
        .output()
        .expect("raygate manifests");
    assert!(
        output.status.success(),
        "raygate manifests {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    documents(&String::from_utf8_lossy(&output.stdout))
}

fn documents(stream: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(stream)
        .expect("a YAML stream")
        .into_iter()
        .filter(|document| !document.is_null())
        .collect()
}

/// Metadata only Helm adds: its release labels and the CRDs' keep policy.
const HELM_LABELS: &[&str] = &[
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
];
const HELM_ANNOTATIONS: &[&str] = &["helm.sh/resource-policy"];

fn strip_helm_metadata(metadata: &mut Value) {
    for (field, keys) in [("labels", HELM_LABELS), ("annotations", HELM_ANNOTATIONS)] {
        if let Some(map) = metadata.get_mut(field).and_then(Value::as_object_mut) {
            for key in keys {
                map.remove(*key);
            }
            if map.is_empty()
                && let Some(metadata) = metadata.as_object_mut()
            {
                metadata.remove(field);
            }
        }
    }
}

/// Numbers as f64 (Helm's YAML round trip of the CRDs turns integers into floats where the
/// schema allows either), recursively.
fn normalize_numbers(value: &mut Value) {
    match value {
        Value::Number(n) => *value = json!(n.as_f64().unwrap_or_default()),
        Value::Array(items) => items.iter_mut().for_each(normalize_numbers),
        Value::Object(map) => map.values_mut().for_each(normalize_numbers),
        _ => {}
    }
}

/// Objects by `kind/namespace/name`, without Helm's own metadata. The Namespace is left out:
/// Helm does not own the release namespace (`--create-namespace` makes it).
fn by_key(objects: Vec<Value>) -> BTreeMap<String, Value> {
    objects
        .into_iter()
        .filter(|o| o["kind"] != "Namespace")
        .map(|mut object| {
            strip_helm_metadata(&mut object["metadata"]);
            if let Some(template) = object.pointer_mut("/spec/template/metadata") {
                strip_helm_metadata(template);
            }
            normalize_numbers(&mut object);
            let key = format!(
                "{}/{}/{}",
                object["kind"].as_str().unwrap_or_default(),
                object["metadata"]["namespace"].as_str().unwrap_or_default(),
                object["metadata"]["name"].as_str().unwrap_or_default(),
            );
            (key, object)
        })
        .collect()
}

/// The first difference between two renderings, as a readable message.
fn first_difference(chart: &BTreeMap<String, Value>, cli: &BTreeMap<String, Value>) -> String {
    let only = |a: &BTreeMap<String, Value>, b: &BTreeMap<String, Value>| {
        a.keys()
            .filter(|k| !b.contains_key(*k))
            .cloned()
            .collect::<Vec<_>>()
    };
    let (chart_only, cli_only) = (only(chart, cli), only(cli, chart));
    if !chart_only.is_empty() || !cli_only.is_empty() {
        return format!(
            "only in the chart: {chart_only:?}; only in raygate manifests: {cli_only:?}"
        );
    }
    for (key, ours) in chart {
        let theirs = &cli[key];
        if ours != theirs {
            return format!(
                "{key} differs:\n--- chart\n{}\n--- raygate manifests\n{}",
                serde_saphyr::to_string(ours).unwrap_or_default(),
                serde_saphyr::to_string(theirs).unwrap_or_default()
            );
        }
    }
    String::new()
}

const TEST_CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";

/// Settings as chart values and as `raygate manifests` flags, each pair meaning the same.
fn settings() -> Vec<(&'static str, &'static str, Value, Vec<String>)> {
    let ca_file =
        std::env::temp_dir().join(format!("raygate-e2e-chart-ca-{}.pem", std::process::id()));
    std::fs::write(&ca_file, TEST_CA).expect("CA file");
    let ca_file = ca_file.to_string_lossy().into_owned();
    let strings = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    vec![
        ("defaults", "raygate-system", json!({}), vec![]),
        (
            "everything changed",
            "ops",
            json!({
                "image": {"repository": "registry.local/raygate", "tag": "dev", "pullPolicy": "Always"},
                "replicas": 3,
                "namespaceLabel": {"key": "team.example.com/gang", "value": "on"},
                "failurePolicy": "Ignore",
                "reconciler": {"default": "kuberay", "namespaceSelector": "team=ml,!legacy"},
                "featureGates": "RayJobDeletionPolicy=true,RayMultiHostIndexing=true",
                "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "512Mi"}},
                "logFormat": "json",
                "nodeSelector": {"kubernetes.io/os": "linux", "pool": "infra"},
                "tolerations": [
                    {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"},
                    {"key": "raygate.io/real-node", "operator": "Exists", "effect": "NoSchedule"},
                ],
            }),
            strings(&[
                "--namespace=ops",
                "--image=registry.local/raygate:dev",
                "--image-pull-policy=Always",
                "--replicas=3",
                "--namespace-label=team.example.com/gang=on",
                "--failure-policy=ignore",
                "--reconciler=kuberay",
                "--namespace-selector=team=ml,!legacy",
                "--feature-gates=RayJobDeletionPolicy=true,RayMultiHostIndexing=true",
                "--requests=cpu=250m,memory=128Mi",
                "--limits=cpu=2,memory=512Mi",
                "--log-format=json",
                "--node-selector=kubernetes.io/os=linux,pool=infra",
                "--toleration=dedicated=infra:NoSchedule",
                "--toleration=raygate.io/real-node:NoSchedule",
            ]),
        ),
        (
            "one replica, no budget",
            "raygate-system",
            json!({"replicas": 1}),
            strings(&["--replicas=1"]),
        ),
        (
            "cert-manager, own issuer",
            "raygate-system",
            json!({"certificates": {"mode": "cert-manager"}}),
            strings(&["--cert-mode=cert-manager"]),
        ),
        (
            "cert-manager, a ClusterIssuer",
            "raygate-system",
            json!({"certificates": {"mode": "cert-manager", "certManager": {"issuer": {"kind": "ClusterIssuer", "name": "corp-ca"}}}}),
            strings(&[
                "--cert-mode=cert-manager",
                "--cert-manager-issuer=ClusterIssuer/corp-ca",
            ]),
        ),
        (
            "files",
            "raygate-system",
            json!({"certificates": {"mode": "files", "files": {"secretName": "my-tls", "caBundle": TEST_CA}}}),
            vec![
                "--cert-mode=files".into(),
                "--tls-secret=my-tls".into(),
                format!("--ca-bundle-file={ca_file}"),
            ],
        ),
        (
            "reconciler only",
            "raygate-system",
            json!({"webhook": {"enabled": false}}),
            strings(&["--enable-webhook=false"]),
        ),
        (
            "webhook only",
            "raygate-system",
            json!({"reconciler": {"enabled": false}}),
            strings(&["--enable-reconciler=false"]),
        ),
    ]
}

#[test]
fn helm_template_renders_what_raygate_manifests_renders_for_the_same_settings() {
    let env = Env::load();
    for (case, namespace, values, mut flags) in settings() {
        if !flags.iter().any(|f| f.starts_with("--namespace=")) {
            flags.push(format!("--namespace={namespace}"));
        }
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let chart = by_key(helm_template(&env, namespace, &values));
        let cli = by_key(raygate_manifests(&flags));
        assert!(
            chart == cli,
            "{case}: the chart and `raygate manifests {}` differ: {}",
            flags.join(" "),
            first_difference(&chart, &cli)
        );
    }
}

#[test]
fn helm_lint_passes_in_every_certificate_mode() {
    let env = Env::load();
    let chart = chart();
    let chart = chart.to_str().expect("utf-8 path");
    for set in [
        "certificates.mode=self-managed",
        "certificates.mode=cert-manager",
        "certificates.mode=files,certificates.files.secretName=my-tls",
    ] {
        let (ok, stdout, stderr) = helm(&env, &["lint", "--strict", chart, "--set", set]);
        assert!(ok, "helm lint --strict --set {set}:\n{stdout}{stderr}");
    }
}

#[test]
fn bad_values_are_refused_naming_the_value_and_what_to_write() {
    let env = Env::load();
    let chart = chart();
    let chart = chart.to_str().expect("utf-8 path");
    for (set, expected) in [
        (
            "certificates.mode=vault",
            r#"certificates.mode "vault": expected self-managed, cert-manager or files"#,
        ),
        (
            "failurePolicy=Sometimes",
            r#"failurePolicy "Sometimes": expected Fail or Ignore"#,
        ),
        (
            "webhook.enabled=false,reconciler.enabled=false",
            "leave nothing to run",
        ),
        (
            "certificates.mode=files",
            "certificates.files.secretName is required with certificates.mode=files",
        ),
    ] {
        let (ok, _, stderr) = helm(&env, &["template", "raygate", chart, "--set", set]);
        assert!(!ok, "helm template --set {set} was accepted");
        assert!(stderr.contains(expected), "--set {set}: {stderr}");
    }
}

#[test]
fn the_chart_version_is_the_workspace_version() {
    let chart: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(chart().join("Chart.yaml")).expect("Chart.yaml"),
    )
    .expect("Chart.yaml parses");
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(chart["version"], version);
    assert_eq!(chart["appVersion"], version);
}
