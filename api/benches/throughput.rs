//! Validation + sizing throughput on a 10,000-object manifest, single-threaded.
//!
//! Run with `cargo bench -p raygate-api --bench throughput` (`RAYGATE_BENCH_ONLY=<phase>` to
//! run the phases whose name contains it, `RAYGATE_BENCH_RUNS=<n>` to change the number of
//! runs, e.g. to 1 under `valgrind --tool=callgrind`; `api/benches/instructions.sh` does that
//! for each phase and prints instructions per object). Prints, per phase, the median
//! objects per second over several runs with the fastest and slowest run, so the phases can be
//! compared side by side on the same machine in the same run.

use std::hint::black_box;
use std::time::{Duration, Instant};

use raygate_api::check::check_object;
use raygate_api::input::{Document, for_each_document, parse_documents};
use raygate_api::validation::ValidationContext;
use serde_json::Value;

/// The same allocator as the `raygate` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Objects in the manifest unless `$RAYGATE_BENCH_OBJECTS` says otherwise (fewer keep a run
/// under callgrind short; instruction counts per object do not depend on it).
const DEFAULT_OBJECTS: usize = 10_000;

fn objects() -> usize {
    std::env::var("RAYGATE_BENCH_OBJECTS")
        .ok()
        .and_then(|objects| objects.parse().ok())
        .filter(|&objects| objects > 0)
        .unwrap_or(DEFAULT_OBJECTS)
}
/// Runs per phase unless `$RAYGATE_BENCH_RUNS` says otherwise.
const DEFAULT_RUNS: usize = 7;

fn runs() -> usize {
    std::env::var("RAYGATE_BENCH_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .filter(|&runs| runs > 0)
        .unwrap_or(DEFAULT_RUNS)
}

fn manifest(objects: usize) -> String {
    let mut text = String::new();
    for i in 0..objects {
        let workers = 1 + i % 3;
        let kind = if i % 4 == 3 { "RayCluster" } else { "RayJob" };
        text.push_str("---\n");
        if kind == "RayJob" {
            text.push_str(&format!(
                "apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: job-{i}\n  namespace: team-{}\n  labels: {{volcano.sh/queue-name: q{}}}\nspec:\n  entrypoint: python train.py --epochs {i}\n  shutdownAfterJobFinishes: true\n  ttlSecondsAfterFinished: 60\n  backoffLimit: {}\n  runtimeEnvYAML: |\n    pip: [torch]\n  rayClusterSpec:\n",
                i % 50,
                i % 5,
                i % 3
            ));
            push_cluster(&mut text, "    ", workers);
        } else {
            text.push_str(&format!(
                "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: cluster-{i}\n  namespace: team-{}\nspec:\n",
                i % 50
            ));
            push_cluster(&mut text, "  ", workers);
        }
    }
    text
}

fn push_cluster(text: &mut String, indent: &str, workers: usize) {
    let lines = [
        "rayVersion: '2.60.0'".to_string(),
        "headGroupSpec:".to_string(),
        "  rayStartParams: {dashboard-host: 0.0.0.0}".to_string(),
        "  template:".to_string(),
        "    spec:".to_string(),
        "      containers:".to_string(),
        "      - name: ray-head".to_string(),
        "        image: rayproject/ray:2.60.0".to_string(),
        "        ports: [{containerPort: 8265, name: dashboard}]".to_string(),
        "        resources: {requests: {cpu: '2', memory: 8Gi}, limits: {cpu: '2', memory: 8Gi}}"
            .to_string(),
        "workerGroupSpecs:".to_string(),
    ];
    for line in lines {
        text.push_str(indent);
        text.push_str(&line);
        text.push('\n');
    }
    for w in 0..workers {
        for line in [
            format!("- groupName: group-{w}"),
            format!("  replicas: {}", 1 + w),
            "  minReplicas: 1".to_string(),
            "  maxReplicas: 8".to_string(),
            "  template:".to_string(),
            "    spec:".to_string(),
            "      containers:".to_string(),
            "      - name: ray-worker".to_string(),
            "        image: rayproject/ray:2.60.0-gpu".to_string(),
            "        resources: {limits: {cpu: '8', memory: 32Gi, nvidia.com/gpu: '1'}}"
                .to_string(),
        ] {
            text.push_str(indent);
            text.push_str(&line);
            text.push('\n');
        }
    }
}

/// Runs `run` on a fresh input from `setup` (untimed) [`runs`] times; prints objects/s. Only
/// phases whose name contains `$RAYGATE_BENCH_ONLY` run (handy under a profiler).
fn measure<T>(
    name: &str,
    expected: usize,
    mut setup: impl FnMut() -> T,
    mut run: impl FnMut(T) -> usize,
) {
    if std::env::var("RAYGATE_BENCH_ONLY").is_ok_and(|only| !name.contains(&only)) {
        return;
    }
    let runs = runs();
    let mut rates: Vec<f64> = Vec::with_capacity(runs);
    let mut elapsed = Duration::ZERO;
    for _ in 0..runs {
        let input = setup();
        let start = Instant::now();
        let objects = black_box(run(input));
        let took = start.elapsed();
        elapsed += took;
        assert_eq!(objects, expected, "{name}: every object must be processed");
        rates.push(objects as f64 / took.as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "{name:<34} median {:>8.0} objects/s  (min {:>8.0}, max {:>8.0}; {runs} runs, {:.2} s)",
        rates[runs / 2],
        rates[0],
        rates[runs - 1],
        elapsed.as_secs_f64()
    );
}

/// Checks and sizes every object; counts those that are valid and sized. Never inlined, so that
/// `valgrind --tool=callgrind --toggle-collect=throughput::check_and_size` counts exactly this.
#[inline(never)]
fn check_and_size(values: Vec<Value>, ctx: &ValidationContext) -> usize {
    values
        .into_iter()
        .map(|value| checked_and_sized(value, ctx))
        .filter(|&sized| sized)
        .count()
}

/// Whether `value` is a Ray object that checks and gets its PodGroup.
fn checked_and_sized(value: Value, ctx: &ValidationContext) -> bool {
    check_object(value, ctx).is_some_and(|c| c.pod_group().is_some_and(|pg| pg.is_ok()))
}

/// Checks one object on a cold process: the first check loads and compiles the CRD schemas, once
/// per process, as every `raygate` run does. Never inlined, for callgrind's `--toggle-collect`
/// (`throughput::first_check`).
#[inline(never)]
fn first_check(value: Value, ctx: &ValidationContext) -> bool {
    check_object(value, ctx).is_some()
}

/// Parses a whole file into objects. Never inlined, for callgrind's `--toggle-collect`
/// (`throughput::parse`, which then counts the parse without freeing the objects).
#[inline(never)]
fn parse(name: &str, text: &str) -> Vec<Document> {
    parse_documents(name, text).unwrap_or_default()
}

/// Parses, checks and sizes a whole file, one object at a time as `raygate validate` does.
/// Never inlined, for callgrind's `--toggle-collect` (`throughput::whole_file`).
#[inline(never)]
fn whole_file(name: &str, text: &str, ctx: &ValidationContext) -> usize {
    let mut sized = 0;
    let read = for_each_document(name, text, |doc| {
        if checked_and_sized(doc.value, ctx) {
            sized += 1;
        }
    });
    if read.is_ok() { sized } else { 0 }
}

fn main() {
    let count = objects();
    let yaml = manifest(count);
    let ctx = ValidationContext::default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let values: Vec<Value> = parse_documents("bench.yaml", &yaml)
        .expect("benchmark manifest parses")
        .into_iter()
        .map(|d| d.value)
        .collect();
    assert_eq!(values.len(), count);
    let json: String = values.iter().map(|v| format!("{v}\n")).collect();
    println!(
        "{count} objects ({:.1} MiB as YAML, {:.1} MiB as JSON), one thread, {cpu}, {} logical CPUs",
        yaml.len() as f64 / 1048576.0,
        json.len() as f64 / 1048576.0,
        std::thread::available_parallelism().map_or(0, usize::from)
    );

    let started = Instant::now();
    assert!(first_check(values[0].clone(), &ctx), "a Ray object");
    println!(
        "first object, loading the CRD schemas: {:.1} ms (once per process)",
        started.elapsed().as_secs_f64() * 1e3
    );
    measure(
        "check + sizing (parsed objects)",
        count,
        || values.clone(),
        |values| check_and_size(values, &ctx),
    );
    measure(
        "check only (parsed objects)",
        count,
        || values.clone(),
        |values| {
            values
                .into_iter()
                .filter_map(|v| check_object(v, &ctx))
                .filter(|c| c.report.valid)
                .count()
        },
    );
    measure(
        "parse JSON",
        count,
        || (),
        |()| parse("bench.json", &json).len(),
    );
    measure(
        "parse YAML",
        count,
        || (),
        |()| parse("bench.yaml", &yaml).len(),
    );
    for (format, name, text) in [("JSON", "bench.json", &json), ("YAML", "bench.yaml", &yaml)] {
        measure(
            &format!("{format} file: parse + check + sizing"),
            count,
            || (),
            |()| whole_file(name, text, &ctx),
        );
    }
}
