//! ConversionReview throughput and latency, single-threaded, JSON body in → JSON body out (what
//! the webhook server does per request, minus TLS and HTTP).
//!
//! Run with `cargo bench -p raygate-api --bench conversion`. Prints conversions per second for
//! 100-object reviews in both directions (median of several runs), and the p50/p99/p99.9 latency
//! of single-object reviews.

use std::hint::black_box;
use std::time::{Duration, Instant};

use raygate_api::conversion::{RAY_V1, RAY_V1ALPHA1, RayVersion, convert, convert_review_json};
use serde_json::{Value, json};

/// The same allocator as the `raygate` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const OBJECTS_PER_REVIEW: usize = 100;
const REVIEWS_PER_RUN: usize = 50;
const RUNS: usize = 7;
const SINGLE_REVIEWS: usize = 20_000;

/// A realistic v1 RayJob: two worker groups, v1-only fields at every level, a status.
fn ray_job(i: usize) -> Value {
    let worker = |name: &str, gpus: u32| {
        json!({
            "groupName": name, "replicas": 2, "minReplicas": 1, "maxReplicas": 8,
            "numOfHosts": 1, "idleTimeoutSeconds": 60, "labels": {"accelerator": "h100"},
            "rayStartParams": {"num-gpus": gpus.to_string()},
            "template": {"spec": {"containers": [{
                "name": "ray-worker", "image": "rayproject/ray:2.60.0-gpu",
                "resources": {"limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": gpus.to_string()}},
            }]}},
        })
    };
    json!({
        "apiVersion": RAY_V1, "kind": "RayJob",
        "metadata": {
            "name": format!("job-{i}"), "namespace": "team-a", "uid": format!("uid-{i}"),
            "resourceVersion": "12345", "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"volcano.sh/queue-name": "research"},
            "finalizers": ["ray.io/rayjob-finalizer"],
        },
        "spec": {
            "entrypoint": format!("python train.py --epochs {i}"),
            "submissionMode": "K8sJobMode", "backoffLimit": 2, "activeDeadlineSeconds": 3600,
            "shutdownAfterJobFinishes": true, "ttlSecondsAfterFinished": 60,
            "runtimeEnvYAML": "pip: [torch]\n",
            "deletionStrategy": {"deletionRules": [
                {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 30}},
            ]},
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {
                    "rayStartParams": {"dashboard-host": "0.0.0.0"},
                    "template": {"spec": {"containers": [{
                        "name": "ray-head", "image": "rayproject/ray:2.60.0",
                        "ports": [{"containerPort": 8265, "name": "dashboard"}],
                        "resources": {"requests": {"cpu": "2", "memory": "8Gi"}},
                    }]}},
                },
                "workerGroupSpecs": [worker("small", 1), worker("large", 4)],
            },
        },
        "status": {
            "jobId": format!("job-{i}-abc"), "jobStatus": "RUNNING", "jobDeploymentStatus": "Running",
            "rayClusterName": format!("job-{i}-raycluster-x7k2p"), "startTime": "2026-01-01T00:00:05Z",
            "succeeded": 0, "failed": 0,
            "rayClusterStatus": {"state": "ready", "head": {"podIP": "10.0.0.1", "podName": "head-0"},
                "conditions": [{"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady",
                                "message": "", "lastTransitionTime": "2026-01-01T00:00:04Z"}]},
        },
    })
}

fn review_body(desired: &str, objects: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "desiredAPIVersion": desired, "objects": objects},
    }))
    .expect("serialisable")
}

/// Answers `body` as the server would: parse, convert, serialise.
fn answer(body: &[u8]) -> Vec<u8> {
    let response = convert_review_json(body);
    let status = response.response.as_ref().and_then(|r| r.result.status);
    assert!(
        matches!(status, Some(kube::core::response::StatusSummary::Success)),
        "the benchmark reviews must convert"
    );
    serde_json::to_vec(&response).expect("serialisable")
}

fn batch(name: &str, body: &[u8]) {
    let mut rates = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = Instant::now();
        for _ in 0..REVIEWS_PER_RUN {
            black_box(answer(black_box(body)));
        }
        let took = start.elapsed();
        rates.push((REVIEWS_PER_RUN * OBJECTS_PER_REVIEW) as f64 / took.as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "{name:<44} median {:>8.0} conversions/s (min {:>8.0}, max {:>8.0}; {RUNS} runs of {REVIEWS_PER_RUN} reviews)",
        rates[RUNS / 2],
        rates[0],
        rates[RUNS - 1]
    );
}

fn latency(name: &str, bodies: &[Vec<u8>]) {
    let mut samples: Vec<Duration> = Vec::with_capacity(SINGLE_REVIEWS);
    for i in 0..SINGLE_REVIEWS {
        let body = &bodies[i % bodies.len()];
        let start = Instant::now();
        black_box(answer(black_box(body)));
        samples.push(start.elapsed());
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!(
        "{name:<44} p50 {:>6.1} µs  p99 {:>6.1} µs  p99.9 {:>6.1} µs  max {:>7.1} µs ({SINGLE_REVIEWS} reviews)",
        at(0.50).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        at(0.999).as_secs_f64() * 1e6,
        samples[samples.len() - 1].as_secs_f64() * 1e6,
    );
}

fn main() {
    let v1: Vec<Value> = (0..OBJECTS_PER_REVIEW).map(ray_job).collect();
    let v1alpha1: Vec<Value> = v1
        .iter()
        .map(|o| convert(o.clone(), RayVersion::V1alpha1).expect("converts"))
        .collect();
    let to_alpha = review_body(RAY_V1ALPHA1, v1.clone());
    let to_v1 = review_body(RAY_V1, v1alpha1.clone());
    println!(
        "ConversionReview of {OBJECTS_PER_REVIEW} RayJobs: {:.0} KiB (v1 -> v1alpha1), {:.0} KiB (v1alpha1 -> v1); one thread, {} logical CPUs",
        to_alpha.len() as f64 / 1024.0,
        to_v1.len() as f64 / 1024.0,
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    batch("100-object review, v1 -> v1alpha1", &to_alpha);
    batch("100-object review, v1alpha1 -> v1", &to_v1);
    let singles_down: Vec<Vec<u8>> = v1
        .iter()
        .map(|o| review_body(RAY_V1ALPHA1, vec![o.clone()]))
        .collect();
    let singles_up: Vec<Vec<u8>> = v1alpha1
        .iter()
        .map(|o| review_body(RAY_V1, vec![o.clone()]))
        .collect();
    latency("single-object review, v1 -> v1alpha1", &singles_down);
    latency("single-object review, v1alpha1 -> v1", &singles_up);
}
