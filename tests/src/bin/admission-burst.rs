//! `admission-burst`: a burst of Ray Pods created at once in a namespace opted into Volcano, as
//! KubeRay creates them for many RayClusters (Volcano's own webhook locked up near 2,000,
//! volcano-sh/volcano#3318).
//!
//! On the running `tests/env` environment it creates one RayCluster (the Pods' owner, which no
//! reconciler runs: the namespace is kept from the environment's reconciler) and then `--pods`
//! worker Pods of it, `--parallelism` at a time, through the API server and so through
//! raygate's Pod webhooks. It reports:
//!
//! * the failed creations (the target is none) and the client's wall time and latency;
//! * how many of the Pods came back onboarded (`schedulerName: volcano`, the group annotation);
//! * from the API server's own `apiserver_admission_webhook_admission_duration_seconds`
//!   histogram (the difference over the burst), per raygate webhook: the reviews, the share
//!   answered within each bucket bound (5 ms, 25 ms, …), and the p99 interpolated within its
//!   bucket, which is as precise as the API server's buckets allow;
//! * where the environment's webhook is a host process, the same from raygate's own
//!   `controller_runtime_webhook_latency_seconds`, which leaves out the API server's side and
//!   the connection.
//!
//! It refuses a debug build of the webhook: the burst measures it as users run it.
//!
//! ```text
//! cargo build --release -p raygate -p raygate-e2e --bin admission-burst
//! RAYGATE_ENV_PROFILE=release tests/env/control-plane up
//! tests/env/control-plane exec -- target/release/admission-burst [--pods 2000] [--parallelism 64]
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, ResourceExt};
use raygate_api::keys;
use raygate_e2e::ray::Dashboard;
use raygate_e2e::reconciler::PRIVATE_RECONCILER_LABEL;
use raygate_e2e::{Env, TestNamespace, kubectl};
use serde_json::json;

/// The API server's histogram of admission webhook calls.
const HISTOGRAM: &str = "apiserver_admission_webhook_admission_duration_seconds";

struct Options {
    pods: usize,
    parallelism: usize,
}

fn options() -> anyhow::Result<Options> {
    let mut options = Options {
        pods: 2000,
        parallelism: 64,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag}: missing value"))?;
        let number = value
            .parse::<usize>()
            .with_context(|| format!("{flag}: {value:?} is not a number"))?;
        match flag.as_str() {
            "--pods" => options.pods = number,
            "--parallelism" => options.parallelism = number.max(1),
            other => {
                bail!("unknown flag {other}; usage: admission-burst [--pods N] [--parallelism N]")
            }
        }
    }
    Ok(options)
}

/// Cumulative bucket counts (`le` → count) of one webhook's histogram, over every operation,
/// type and rejection.
type Buckets = BTreeMap<String, BTreeMap<u64, f64>>;

/// Nanoseconds of a bucket bound; `+Inf` is `u64::MAX`.
fn bound_nanos(le: &str) -> Option<u64> {
    if le == "+Inf" {
        return Some(u64::MAX);
    }
    let seconds: f64 = le.parse().ok()?;
    Some((seconds * 1e9).round() as u64)
}

/// The value of label `name` in a sample's label set.
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    labels
        .split(',')
        .find_map(|l| l.strip_prefix(name)?.strip_prefix("=\""))
        .map(|v| v.trim_end_matches('"'))
}

/// The buckets of histogram `histogram` in a Prometheus text page, by the value of label
/// `key`, keeping the values `keep` accepts.
fn buckets(
    text: &str,
    histogram: &str,
    key: &str,
    keep: impl Fn(&str) -> bool,
) -> anyhow::Result<Buckets> {
    let prefix = format!("{histogram}_bucket{{");
    let mut buckets = Buckets::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let (labels, value) = rest.split_once("} ").context("malformed sample")?;
        let (Some(name), Some(le)) = (label(labels, key), label(labels, "le")) else {
            continue;
        };
        if !keep(name) {
            continue;
        }
        let le = bound_nanos(le).with_context(|| format!("bucket bound {le:?}"))?;
        *buckets
            .entry(name.to_string())
            .or_default()
            .entry(le)
            .or_insert(0.0) += value.trim().parse::<f64>()?;
    }
    Ok(buckets)
}

/// raygate's webhooks' buckets from the API server's `/metrics`.
async fn api_server_buckets() -> anyhow::Result<Buckets> {
    let text = kubectl::stdout(&["get", "--raw", "/metrics"]).await;
    buckets(&text, HISTOGRAM, "name", |name| {
        name.ends_with(".raygate.io")
    })
}

/// The buckets of raygate's own `controller_runtime_webhook_latency_seconds` (from the request
/// to the answer inside its server), by path; `None` when the environment's webhook is not a
/// host process with a metrics address of its own.
async fn raygate_buckets(env: &Env) -> anyhow::Result<Option<Buckets>> {
    let Some(base) = env.get("RAYGATE_WEBHOOK_METRICS") else {
        return Ok(None);
    };
    let text = Dashboard::new(base).get("/metrics").await?.body;
    Ok(Some(buckets(
        &text,
        "controller_runtime_webhook_latency_seconds",
        "webhook",
        |_| true,
    )?))
}

/// Prints one row per histogram with reviews over the burst: the reviews, the share within
/// each of `bounds` (seconds) and the interpolated p99.
fn report(before: &Buckets, after: &Buckets, bounds: &[f64]) {
    let mut header = "| webhook | reviews |".to_string();
    let mut rule = "|---|---|".to_string();
    for bound in bounds {
        header.push_str(&format!(" ≤ {} ms |", bound * 1000.0));
        rule.push_str("---|");
    }
    println!("{header} p99 (interpolated) |");
    println!("{rule}---|");
    for (name, counts) in after {
        let delta: BTreeMap<u64, f64> = counts
            .iter()
            .map(|(le, n)| {
                let earlier = before.get(name).and_then(|b| b.get(le)).unwrap_or(&0.0);
                (*le, n - earlier)
            })
            .collect();
        let total = delta.get(&u64::MAX).copied().unwrap_or(0.0);
        if total <= 0.0 {
            continue;
        }
        let mut line = format!("| {name} | {total:.0} |");
        for bound in bounds {
            let le = (bound * 1e9).round() as u64;
            let share = delta
                .get(&le)
                .map_or("—".to_string(), |n| format!("{:.1} %", 100.0 * n / total));
            line.push_str(&format!(" {share} |"));
        }
        let p99 = histogram_quantile(&delta, 0.99).map_or("> last bound".to_string(), |d| {
            format!("{:.1} ms", d.as_secs_f64() * 1000.0)
        });
        println!("{line} {p99} |");
    }
}

/// The `q`-quantile of a cumulative histogram, interpolated linearly within its bucket (the
/// lower bound of the first bucket is 0); `None` when it is empty or falls in `+Inf`.
fn histogram_quantile(cumulative: &BTreeMap<u64, f64>, q: f64) -> Option<Duration> {
    let total = *cumulative.get(&u64::MAX)?;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0_u64, 0.0);
    for (&le, &count) in cumulative {
        if count >= rank {
            if le == u64::MAX {
                return None;
            }
            let share = if count > below {
                (rank - below) / (count - below)
            } else {
                0.0
            };
            let nanos = lower as f64 + share * (le - lower) as f64;
            return Some(Duration::from_nanos(nanos as u64));
        }
        (lower, below) = (le, count);
    }
    None
}

fn ray_cluster(name: &str) -> anyhow::Result<DynamicObject> {
    let container = |name: &str| {
        json!({"name": name, "image": "rayproject/ray:2.60.0",
               "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}})
    };
    Ok(serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "rayVersion": "2.60.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
            "workerGroupSpecs": [{
                "groupName": "small", "replicas": 1, "minReplicas": 0, "maxReplicas": 10000,
                "rayStartParams": {}, "template": {"spec": {"containers": [container("ray-worker")]}}
            }]
        }
    }))?)
}

/// A worker Pod as KubeRay creates it for `cluster`.
fn worker_pod(cluster: &DynamicObject, index: usize) -> anyhow::Result<Pod> {
    let name = cluster.name_any();
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{name}-small-worker-{index:05}"),
            "labels": {
                keys::RAY_CLUSTER_LABEL: name, "ray.io/node-type": "worker", "ray.io/group": "small",
                "app.kubernetes.io/created-by": "kuberay-operator",
            },
            "ownerReferences": [{
                "apiVersion": "ray.io/v1", "kind": "RayCluster", "name": name,
                "uid": cluster.uid().context("the RayCluster's uid")?,
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
        },
    }))?)
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let last = sorted.len().saturating_sub(1);
    sorted
        .get(((last as f64) * q).round() as usize)
        .copied()
        .unwrap_or_default()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = options()?;
    let env = Env::load();
    env.require_release_webhook("measuring its admission latency")?;
    let ns = TestNamespace::with_labels(
        &env,
        "admission-burst",
        &[
            (keys::NAMESPACE_OPT_IN_LABEL, keys::NAMESPACE_OPT_IN_VALUE),
            (PRIVATE_RECONCILER_LABEL, "true"),
        ],
    )
    .await;
    let clusters: Api<DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &kube::api::ApiResource::from_gvk(&GroupVersionKind::gvk("ray.io", "v1", "RayCluster")),
    );
    let cluster = clusters
        .create(&PostParams::default(), &ray_cluster("burst")?)
        .await
        .context("creating the RayCluster")?;
    // The webhook learns the cluster from its watch; give it a moment.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let before = api_server_buckets().await?;
    let raygate_before = raygate_buckets(&env).await?;
    let pods: Api<Pod> = ns.api();
    println!(
        "creating {} Pods in {}, {} at a time",
        options.pods,
        ns.name(),
        options.parallelism
    );
    let start = Instant::now();
    let results: Vec<(Duration, Result<(), String>)> =
        futures::stream::iter((0..options.pods).map(|i| {
            let pods = pods.clone();
            let cluster = &cluster;
            async move {
                let sent = Instant::now();
                let result = match worker_pod(cluster, i) {
                    Ok(pod) => pods
                        .create(&PostParams::default(), &pod)
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                (sent.elapsed(), result)
            }
        }))
        .buffer_unordered(options.parallelism)
        .collect()
        .await;
    let wall = start.elapsed();
    let after = api_server_buckets().await?;
    let raygate_after = raygate_buckets(&env).await?;

    let mut failures: BTreeMap<String, usize> = BTreeMap::new();
    for (_, result) in &results {
        if let Err(e) = result {
            *failures.entry(e.clone()).or_insert(0) += 1;
        }
    }
    let mut latencies: Vec<Duration> = results.iter().map(|(d, _)| *d).collect();
    latencies.sort();
    let created = pods.list(&ListParams::default()).await?.items;
    let onboarded = created
        .iter()
        .filter(|p| {
            p.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()) == Some("volcano")
                && p.annotations().contains_key("scheduling.k8s.io/group-name")
        })
        .count();

    println!();
    println!("| Pods | failed | wall time | creations / s | client p50 | client p99 | onboarded |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {:.1} s | {:.0} | {:.1} ms | {:.1} ms | {onboarded} |",
        options.pods,
        failures.values().sum::<usize>(),
        wall.as_secs_f64(),
        options.pods as f64 / wall.as_secs_f64(),
        percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
        percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
    );
    for (error, n) in &failures {
        println!("failed {n}×: {error}");
    }
    println!();
    println!(
        "API server's {HISTOGRAM} over the burst, per raygate webhook (the API server's buckets):"
    );
    println!();
    report(&before, &after, &[0.005, 0.025, 0.1]);
    if let (Some(before), Some(after)) = (raygate_before, raygate_after) {
        println!();
        println!(
            "raygate's own controller_runtime_webhook_latency_seconds over the burst (request to answer inside its server):"
        );
        println!();
        report(&before, &after, &[0.0005, 0.002, 0.008, 0.032]);
    }
    println!("load average at the end: {}", {
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    });
    if !failures.is_empty() || onboarded != options.pods {
        bail!(
            "{} of {} Pods failed, {onboarded} onboarded",
            failures.values().sum::<usize>(),
            options.pods
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quantile_is_interpolated_within_its_bucket() {
        let cumulative =
            BTreeMap::from([(5_000_000, 90.0), (25_000_000, 100.0), (u64::MAX, 100.0)]);
        let ms = |q: f64| histogram_quantile(&cumulative, q).map(|d| d.as_secs_f64() * 1000.0);
        assert!(
            ms(0.5).is_some_and(|v| (v - 2.7778).abs() < 0.001),
            "{:?}",
            ms(0.5)
        );
        // The 99th of 100 lies 9/10 of the way through the 5–25 ms bucket.
        assert!(
            ms(0.99).is_some_and(|v| (v - 23.0).abs() < 0.001),
            "{:?}",
            ms(0.99)
        );
        let slow = BTreeMap::from([(5_000_000, 0.0), (u64::MAX, 10.0)]);
        assert_eq!(
            histogram_quantile(&slow, 0.99),
            None,
            "beyond the last bound"
        );
        assert_eq!(histogram_quantile(&BTreeMap::new(), 0.99), None);
    }
}
