//! The chart's monitoring kit (`metrics.*` in manifests/chart/values.yaml): every metric the
//! PrometheusRule's alerts and the Grafana dashboard query is a series the environment's running
//! raygate really exports on `/metrics` (the webhook's plain-HTTP listener and the
//! reconciler's), so renaming a metric in Rust or in the YAML fails here; the kit lints, follows
//! the enabled parts and renders nothing by default.
//!
//! Names are compared with the sample names of the scraped text (`…_total` of a counter,
//! `…_bucket` / `…_sum` / `…_count` of a histogram), which is what PromQL sees. prometheus-client
//! 0.26 leaves a family without samples out of the text entirely, `# HELP` and `# TYPE`
//! included, so the test first makes raygate admit and reconcile a RayCluster, then waits for
//! every name to appear.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kube::api::PostParams;
use raygate_api::keys::{NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE};
use raygate_api::ray::v1::RayCluster;
use raygate_e2e::ray::Dashboard;
use raygate_e2e::{Env, TestNamespace};
use serde_json::{Value, json};

/// The release namespace of the renderings; the alerts must select it.
const NAMESPACE: &str = "raygate-monitoring";

/// `--set` of the whole kit.
const KIT: &str = "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,\
                   metrics.dashboard.enabled=true";

/// The job label the ServiceMonitor gives raygate's series (the metrics Service's name).
const JOB: &str = "raygate-metrics";

/// Series Prometheus makes for every target itself; raygate cannot export them.
const PROMETHEUS_SERIES: &[&str] = &["up"];

/// How long raygate gets to admit and reconcile the test's RayCluster and count it.
const SETTLE: Duration = Duration::from_secs(90);

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/chart")
}

/// Runs `helm ARGS...` as tests/tests/chart.rs does; returns (success, stdout, stderr).
fn helm(env: &Env, args: &[&str]) -> (bool, String, String) {
    let helm = env.var("RAYGATE_HELM");
    let home = std::env::temp_dir().join("raygate-e2e-helm");
    let output = Command::new(helm)
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .unwrap_or_else(|e| panic!("running {helm}: {e}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `helm template raygate manifests/chart -n NAMESPACE [--set SET]`, as parsed objects.
fn render(env: &Env, set: Option<&str>) -> Vec<Value> {
    let chart = chart();
    let mut args = vec![
        "template",
        "raygate",
        chart.to_str().expect("utf-8 path"),
        "--namespace",
        NAMESPACE,
    ];
    if let Some(set) = set {
        args.extend(["--set", set]);
    }
    let (ok, stdout, stderr) = helm(env, &args);
    assert!(ok, "helm template --set {set:?} failed:\n{stderr}");
    serde_saphyr::from_multiple::<Value>(&stdout)
        .expect("a YAML stream")
        .into_iter()
        .filter(|document| !document.is_null())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

/// The Grafana dashboard inside the rendered ConfigMap.
fn rendered_dashboard(objects: &[Value]) -> Value {
    let config_map = find(objects, "ConfigMap", "raygate-dashboard").expect("the dashboard");
    let text = config_map["data"]["raygate.json"]
        .as_str()
        .expect("data raygate.json");
    serde_json::from_str(text).expect("the dashboard is JSON")
}

/// Every PromQL expression of the rendering: (where it is, expression).
fn expressions(objects: &[Value]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let prometheus_rule = find(objects, "PrometheusRule", "raygate").expect("the PrometheusRule");
    for rule in rules(prometheus_rule) {
        let alert = rule["alert"].as_str().unwrap_or_default();
        let expr = rule["expr"].as_str().expect("expr");
        found.push((format!("alert {alert}"), expr.to_string()));
    }
    found.extend(dashboard_expressions(&rendered_dashboard(objects)));
    found
}

fn rules(prometheus_rule: &Value) -> impl Iterator<Item = &Value> {
    prometheus_rule["spec"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["rules"].as_array().into_iter().flatten())
}

/// The panels of a dashboard, those inside collapsed rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        all.push(panel);
        all.extend(panel["panels"].as_array().into_iter().flatten());
    }
    all
}

/// (panel title, expression) of every panel target.
fn dashboard_expressions(dashboard: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or_default();
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a target's expr");
            found.push((format!("panel {title:?}"), expr.to_string()));
        }
    }
    found
}

/// PromQL words that are not metric names although no `(` follows them: aggregation
/// operators (`sum by (x) (…)`), set and comparison modifiers, number literals.
const PROMQL_KEYWORDS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
    "and",
    "or",
    "unless",
    "atan2",
    "bool",
    "offset",
    "inf",
    "nan",
];

/// Modifiers followed by a list of label names in parentheses.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Index just past the string literal opening at `start` (`"…"`, `'…'` with escapes, `` `…` ``).
fn skip_string(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote != b'`' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Index just past the `close` matching the bracket at `start`, over string literals.
fn skip_past(bytes: &[u8], start: usize, close: u8) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' | b'\'' | b'`' => i = skip_string(bytes, i),
            b if b == close => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

fn word_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b':')) {
        i += 1;
    }
    i
}

fn next_non_space(bytes: &[u8], start: usize) -> Option<(usize, u8)> {
    (start..bytes.len())
        .map(|i| (i, bytes[i]))
        .find(|(_, b)| !b.is_ascii_whitespace())
}

/// The metric selectors of a PromQL expression, each as (metric name, label matchers between
/// its braces or ""). A metric name is an identifier outside strings, `{…}` matchers, `[…]`
/// ranges and label lists (`by (…)`, `on (…)`, …) that is neither followed by `(` (a function
/// call) nor a PromQL keyword. Grafana's `$variables` are skipped. A selector naming its metric
/// only by `{__name__="…"}` is not seen.
fn selectors(expr: &str) -> Vec<(String, String)> {
    let bytes = expr.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i = match b {
            b'"' | b'\'' | b'`' => skip_string(bytes, i),
            b'{' => skip_past(bytes, i, b'}'),
            b'[' => skip_past(bytes, i, b']'),
            b'#' => expr[i..].find('\n').map_or(bytes.len(), |n| i + n),
            b'$' if bytes.get(i + 1) == Some(&b'{') => skip_past(bytes, i + 1, b'}'),
            b'$' => word_end(bytes, i + 1),
            b'0'..=b'9' | b'.' => {
                // A number or duration: 0.99, 86400, 1e3, 5m, 1h30m.
                let mut j = i + 1;
                while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'.') {
                    j += 1;
                }
                j
            }
            b if b.is_ascii_alphabetic() || b == b'_' || b == b':' => {
                let end = word_end(bytes, i);
                let word = &expr[i..end];
                let next = next_non_space(bytes, end);
                if LABEL_LISTS.contains(&word) {
                    match next {
                        Some((open, b'(')) => skip_past(bytes, open, b')'),
                        _ => end,
                    }
                } else if matches!(next, Some((_, b'(')))
                    || PROMQL_KEYWORDS.contains(&word.to_ascii_lowercase().as_str())
                {
                    end
                } else {
                    // Matchers follow the name directly (`name{…}`), spaces allowed.
                    let matchers = match next {
                        Some((open, b'{')) => {
                            let inside = &expr[open + 1..skip_past(bytes, open, b'}')];
                            inside.strip_suffix('}').unwrap_or(inside).to_string()
                        }
                        _ => String::new(),
                    };
                    found.push((word.to_string(), matchers));
                    end
                }
            }
            _ => i + 1,
        };
    }
    found
}

/// The metric names of a PromQL expression (see [`selectors`]).
fn metric_names(expr: &str) -> BTreeSet<String> {
    selectors(expr).into_iter().map(|(name, _)| name).collect()
}

/// The sample names of a Prometheus / OpenMetrics text exposition (what PromQL selects).
fn exported_series(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(str::trim_start)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// Every metric name used by the rendering, with where it is used.
fn metric_uses(objects: &[Value]) -> BTreeMap<String, BTreeSet<String>> {
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (place, expr) in expressions(objects) {
        for name in metric_names(&expr) {
            uses.entry(name).or_default().insert(place.clone());
        }
    }
    uses
}

/// A RayCluster with a head and no workers, as small as raygate admits and reconciles.
fn ray_cluster() -> RayCluster {
    let container = |role: &str| {
        json!({"name": format!("ray-{role}"), "image": "rayproject/ray:2.60.0",
               "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "metrics"},
        "spec": {
            "rayVersion": "2.60.0",
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("head")]}}
            },
            "workerGroupSpecs": [{
                "groupName": "small",
                "replicas": 0,
                "minReplicas": 0,
                "maxReplicas": 1,
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("worker")]}}
            }]
        }
    }))
    .expect("a valid RayCluster")
}

/// The sample names of every `/metrics` in `endpoints` (env variable, base URL), and the
/// scrapes that failed.
async fn scrape(endpoints: &[(&str, &str)]) -> (BTreeSet<String>, Vec<String>) {
    let mut series = BTreeSet::new();
    let mut failures = Vec::new();
    for (name, base) in endpoints {
        match Dashboard::new(base).get("/metrics").await {
            Ok(response) if response.status == 200 => {
                series.extend(exported_series(&response.body))
            }
            Ok(response) => {
                failures.push(format!("{name} {base}/metrics: HTTP {}", response.status))
            }
            Err(e) => failures.push(format!("{name} {base}/metrics: {e:#}")),
        }
    }
    (series, failures)
}

#[tokio::test]
async fn every_metric_the_alerts_and_the_dashboard_use_is_one_raygate_exports() {
    let env = Env::load();
    let uses = metric_uses(&render(&env, Some(KIT)));
    // Each variable holds one base URL per replica, comma-separated: only the leader's
    // reconciler has reconcile series, so every replica is scraped and the names pooled.
    let endpoints: Vec<(&str, &str)> = ["RAYGATE_WEBHOOK_METRICS", "RAYGATE_RECONCILER_METRICS"]
        .into_iter()
        .flat_map(|key| env.var(key).split(',').map(move |base| (key, base)))
        .collect();
    // An admitted RayCluster and its head Pod fill the webhook's families (requests, latency,
    // in flight, admissions, patch sizes); the leading reconciler reconciling it fills the
    // reconcile families.
    let ns = TestNamespace::with_labels(
        &env,
        "chart-monitoring",
        &[(NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE)],
    )
    .await;
    let cluster = ns
        .api::<RayCluster>()
        .create(&PostParams::default(), &ray_cluster())
        .await
        .expect("create the RayCluster");
    // raygate's own reconciler builds its Pods already onboarded, so the webhook has nothing to
    // patch in them: a worker Pod as KubeRay writes it (no scheduler, no gang) gets a patch,
    // which the patch-size histogram records. Dry run: nothing is left to schedule.
    let worker: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "generateName": "metrics-small-worker-",
            "labels": {"ray.io/cluster": "metrics", "ray.io/node-type": "worker", "ray.io/group": "small"},
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "metrics",
                                 "uid": cluster.metadata.uid.clone().expect("uid"),
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]},
    }))
    .expect("a Pod");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let started = Instant::now();
    let (exported, failures, missing) = loop {
        // Once the webhook's caches know the RayCluster, the Pod is patched.
        ns.api::<k8s_openapi::api::core::v1::Pod>()
            .create(&dry_run, &worker)
            .await
            .expect("the dry-run worker Pod is admitted");
        let (exported, failures) = scrape(&endpoints).await;
        let missing: Vec<&String> = uses
            .keys()
            .filter(|name| !exported.contains(*name) && !PROMETHEUS_SERIES.contains(&name.as_str()))
            .collect();
        if missing.is_empty() || started.elapsed() >= SETTLE {
            break (exported, failures, missing);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let missing: Vec<String> = missing
        .iter()
        .map(|name| format!("  {name}, used by {:?}", uses[*name]))
        .collect();
    assert!(
        missing.is_empty(),
        "{} s after creating a RayCluster in {}, raygate does not export\n{}\nscrape failures: \
         {failures:?}\nraygate exports: {exported:#?}\n{}",
        SETTLE.as_secs(),
        ns.name(),
        missing.join("\n"),
        ns.dump().await
    );
}

#[test]
fn the_alerts_and_the_dashboard_select_raygates_job_and_namespace() {
    let env = Env::load();
    let objects = render(&env, Some(KIT));
    let rule = find(&objects, "PrometheusRule", "raygate").expect("the PrometheusRule");
    let rule_exprs = rules(rule).map(|r| r["expr"].as_str().unwrap_or_default().to_string());
    let dashboard = dashboard_expressions(&rendered_dashboard(&objects))
        .into_iter()
        .map(|(_, expr)| expr);
    for (exprs, namespace) in [
        (
            rule_exprs.collect::<Vec<_>>(),
            format!(r#"namespace="{NAMESPACE}""#),
        ),
        (dashboard.collect(), r#"namespace="$namespace""#.to_string()),
    ] {
        assert!(!exprs.is_empty());
        for expr in exprs {
            for (name, matchers) in selectors(&expr) {
                assert!(
                    matchers.contains(&format!(r#"job="{JOB}""#)) && matchers.contains(&namespace),
                    "{name}{{{matchers}}} in {expr:?} does not select job {JOB} and {namespace}"
                );
            }
        }
    }
}

#[test]
fn every_alert_has_a_severity_a_summary_a_description_and_a_runbook() {
    let env = Env::load();
    let objects = render(&env, Some(KIT));
    let rule = find(&objects, "PrometheusRule", "raygate").expect("the PrometheusRule");
    let alerts: Vec<&Value> = rules(rule).collect();
    assert!(alerts.len() >= 6, "{alerts:?}");
    for alert in alerts {
        let name = alert["alert"].as_str().expect("only alerting rules");
        assert!(
            matches!(
                alert["labels"]["severity"].as_str(),
                Some("warning" | "critical")
            ),
            "{name}: severity {}",
            alert["labels"]["severity"]
        );
        for annotation in ["summary", "description", "runbook"] {
            let text = alert["annotations"][annotation]
                .as_str()
                .unwrap_or_default();
            assert!(!text.trim().is_empty(), "{name} has no {annotation}");
        }
        assert!(alert["for"].is_string(), "{name} fires on one evaluation");
        let expr = alert["expr"].as_str().unwrap_or_default();
        assert!(
            !metric_names(expr).is_empty(),
            "{name}: no metric in {expr:?}"
        );
    }
}

#[test]
fn helm_lint_passes_with_the_monitoring_kit_and_by_default_none_of_it_renders() {
    let env = Env::load();
    let chart = chart();
    let chart = chart.to_str().expect("utf-8 path");
    for set in [
        KIT,
        "metrics.serviceMonitor.enabled=true",
        "metrics.prometheusRule.enabled=true",
        "metrics.dashboard.enabled=true",
        &format!("{KIT},webhook.enabled=false"),
        &format!("{KIT},reconciler.enabled=false"),
    ] {
        let (ok, stdout, stderr) = helm(&env, &["lint", "--strict", chart, "--set", set]);
        assert!(ok, "helm lint --strict --set {set}:\n{stdout}{stderr}");
    }
    let defaults = render(&env, None);
    for (kind, name) in [
        ("Service", "raygate-metrics"),
        ("ServiceMonitor", "raygate"),
        ("PrometheusRule", "raygate"),
        ("ConfigMap", "raygate-dashboard"),
    ] {
        assert!(
            find(&defaults, kind, name).is_none(),
            "{kind} {name} renders by default"
        );
    }
    let everything = render(&env, Some(KIT));
    let dashboard = find(&everything, "ConfigMap", "raygate-dashboard").expect("the dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let labelled = render(
        &env,
        Some(&format!(
            "{KIT},metrics.serviceMonitor.labels.release=prometheus,\
             metrics.prometheusRule.labels.release=prometheus"
        )),
    );
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        let object = find(&labelled, kind, "raygate").expect(kind);
        assert_eq!(
            object["metadata"]["labels"]["release"], "prometheus",
            "{kind}"
        );
    }
}

#[test]
fn the_metrics_service_and_service_monitor_carry_the_one_metrics_port_whichever_parts_run() {
    let env = Env::load();
    for (parts, expected_ports, expected_groups) in [
        (
            "",
            vec!["health"],
            vec![
                "raygate-webhook",
                "raygate-certificate",
                "raygate-reconciler",
            ],
        ),
        (
            ",reconciler.enabled=false",
            vec!["health"],
            vec!["raygate-webhook", "raygate-certificate"],
        ),
        (
            ",webhook.enabled=false",
            vec!["health"],
            vec!["raygate-reconciler"],
        ),
    ] {
        let objects = render(&env, Some(&format!("{KIT}{parts}")));
        let deployment = find(&objects, "Deployment", "raygate").expect("the Deployment");
        let container_ports: BTreeMap<&str, &Value> =
            deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
                .as_array()
                .expect("container ports")
                .iter()
                .map(|p| (p["name"].as_str().unwrap_or_default(), &p["containerPort"]))
                .collect();
        let service = find(&objects, "Service", "raygate-metrics").expect("the metrics Service");
        let ports = service["spec"]["ports"].as_array().expect("ports");
        let names: Vec<&str> = ports.iter().filter_map(|p| p["name"].as_str()).collect();
        assert_eq!(names, expected_ports, "{parts}");
        for port in ports {
            let target = port["targetPort"].as_str().expect("a named targetPort");
            assert_eq!(
                Some(&&port["port"]),
                container_ports.get(target),
                "{parts}: Service port {port} is not the Deployment's"
            );
        }
        let monitor = find(&objects, "ServiceMonitor", "raygate").expect("the ServiceMonitor");
        let endpoints: Vec<&str> = monitor["spec"]["endpoints"]
            .as_array()
            .expect("endpoints")
            .iter()
            .filter_map(|e| e["port"].as_str())
            .collect();
        assert_eq!(endpoints, expected_ports, "{parts}");
        for (key, value) in monitor["spec"]["selector"]["matchLabels"]
            .as_object()
            .expect("matchLabels")
        {
            assert_eq!(&service["metadata"]["labels"][key], value, "{parts}: {key}");
        }
        let webhook_service = find(&objects, "Service", "raygate");
        if let Some(webhook_service) = webhook_service {
            assert_ne!(
                webhook_service["metadata"]["labels"]["app.kubernetes.io/component"], "metrics",
                "the ServiceMonitor would scrape the webhook's TLS Service"
            );
        }
        let rule = find(&objects, "PrometheusRule", "raygate").expect("the PrometheusRule");
        let groups: Vec<&str> = rule["spec"]["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .filter_map(|g| g["name"].as_str())
            .collect();
        assert_eq!(groups, expected_groups, "{parts}");
    }
}

#[test]
fn the_dashboard_queries_through_its_data_source_variable_only() {
    let path = chart().join("files/dashboard.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("files/dashboard.json"))
            .expect("JSON");
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "no datasource variable: {variables:?}"
    );
    fn datasources<'a>(value: &'a Value, found: &mut Vec<&'a Value>) {
        match value {
            Value::Object(map) => {
                if let Some(datasource) = map.get("datasource") {
                    found.push(datasource);
                }
                map.values().for_each(|v| datasources(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| datasources(v, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    datasources(&dashboard, &mut found);
    assert!(!found.is_empty());
    for datasource in found {
        assert_eq!(
            datasource,
            &json!({"type": "prometheus", "uid": "${datasource}"}),
            "a hard-coded data source"
        );
    }
    let exprs = dashboard_expressions(&dashboard);
    assert!(exprs.len() >= 10, "{exprs:?}");
    for (panel, expr) in exprs {
        assert!(
            !metric_names(&expr).is_empty(),
            "{panel}: no metric in {expr:?}"
        );
    }
}

#[test]
fn promql_metric_names_are_the_identifiers_outside_matchers_label_lists_and_calls() {
    let names = |expr: &str| metric_names(expr).into_iter().collect::<Vec<_>>();
    assert_eq!(
        names(
            r#"histogram_quantile(0.99, sum by (webhook, le) (rate(controller_runtime_webhook_latency_seconds_bucket{job="raygate-metrics",code!~"2.."}[5m]))) > 1"#
        ),
        ["controller_runtime_webhook_latency_seconds_bucket"]
    );
    assert_eq!(
        names(
            "sum without (pod) (rate(a_total{x=\"}by(\"}[$__rate_interval] offset 1h)) \
             / on (controller) group_left (result) sum(b_total) by (controller) \
             and bool c unless max(d{namespace=\"$namespace\"}) or Inf"
        ),
        ["a_total", "b_total", "c", "d"]
    );
    assert_eq!(
        names(
            r#"(raygate_certificate_not_after_seconds{job="j"} > 0) - time() < 7 * 86400 or absent(up{endpoint="health"} == 1)"#
        ),
        ["raygate_certificate_not_after_seconds", "up"]
    );
    assert_eq!(
        names(r#"label_replace(rest_client_requests_total, "dst", "$1", "code", "(.*)") # sum(x)"#),
        ["rest_client_requests_total"]
    );
    assert_eq!(
        selectors(r#"max(leader_election_master_status {name="raygate-reconciler"}) < 1"#),
        [(
            "leader_election_master_status".to_string(),
            r#"name="raygate-reconciler""#.to_string()
        )]
    );
}

#[test]
fn exported_series_are_the_sample_names_of_the_text_format() {
    let text = "# HELP controller_runtime_reconcile Total number of reconciliations.\n\
                # TYPE controller_runtime_reconcile counter\n\
                controller_runtime_reconcile_total{controller=\"raycluster\",result=\"success\"} 1\n\
                # TYPE controller_runtime_reconcile_time_seconds histogram\n\
                controller_runtime_reconcile_time_seconds_sum{controller=\"raycluster\"} 0.1\n\
                controller_runtime_reconcile_time_seconds_count{controller=\"raycluster\"} 1\n\
                controller_runtime_reconcile_time_seconds_bucket{le=\"0.005\",controller=\"raycluster\"} 0\n\
                raygate_certificate_not_after_seconds 1767225600\n\
                # EOF\n";
    assert_eq!(
        exported_series(text).into_iter().collect::<Vec<_>>(),
        [
            "controller_runtime_reconcile_time_seconds_bucket",
            "controller_runtime_reconcile_time_seconds_count",
            "controller_runtime_reconcile_time_seconds_sum",
            "controller_runtime_reconcile_total",
            "raygate_certificate_not_after_seconds",
        ]
    );
}
