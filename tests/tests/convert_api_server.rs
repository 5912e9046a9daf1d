//! `raygate convert`'s output is what kubectl and the real API server take it for: over
//! generated v1 manifests written the ways people write them (YAML 1.1-only scalars such as
//! `0644`, `0x1F`, `yes`, `on`, quoted look-alikes, anchors and merge keys, comments, block
//! and flow styles, several documents per file), each file, its `v1alpha1` conversion and that
//! conversion's `v1` conversion go through `kubectl create --dry-run=server --validate=strict`:
//! - the API server accepts the `v1alpha1` output with no unknown or duplicate field (strict
//!   field validation refuses what it would otherwise prune) and stores every value it sets,
//!   unchanged;
//! - the `v1` output means to the API server exactly what the input meant, read by kubectl.
//!
//! The cases come from a seeded generator, so a failure names the seed that reproduces it.
//! Run inside the environment: `tests/env/control-plane exec -- cargo test -p raygate-e2e --test
//! convert_api_server`.

use raygate_api::conversion::{RayVersion, convert_documents};
use raygate_api::input::{as_the_api_server_reads, documents_to_yaml, parse_documents};
use raygate_api::keys::{RECONCILER_LABEL, V1_FIELDS_ANNOTATION};
use raygate_e2e::seeded::SplitMix64;
use raygate_e2e::{Env, TestNamespace};
use serde_json::Value;

/// How many generated files the test sends.
const CASES: u64 = 24;

/// Picks spellings for one generated file, reproducibly from its seed.
struct Picker(SplitMix64);

impl Picker {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        let index = usize::try_from(self.next() % choices.len() as u64).expect("small index");
        choices[index]
    }

    fn flip(&mut self) -> bool {
        self.next().is_multiple_of(2)
    }
}

/// Integer spellings kubectl (YAML 1.1) reads as small whole numbers: 3, 3, 3, 10, 2, 0.
const SMALL_INTS: &[&str] = &["3", "0x3", "03", "1_0", "+2", "0"];
/// File modes: 420 (0644) and 511 (0777) in octal, decimal and hexadecimal.
const MODES: &[&str] = &["0644", "0777", "420", "0x1A4", "511", "0o644"];
/// Boolean spellings of YAML 1.1 (`0o644` above is a string there, and so is refused as a
/// mode: it is left out of the generator by [`mode`]).
const BOOLS: &[&str] = &["yes", "no", "on", "off", "y", "N", "True", "false", "ON"];
/// The spellings of [`BOOLS`] that mean true.
const TRUE: &[&str] = &["yes", "on", "y", "True", "ON"];
/// Strings that look like numbers or booleans, quoted so that they stay strings, and plain
/// strings that are strings in every YAML.
const STRINGS: &[&str] = &[
    "'0777'", "\"yes\"", "'on'", "\"1e3\"", "'08'", "\"0x1F\"", "hello", "4Gi", "'~'", "\"\"",
    "-Xmx1g",
];
/// Label values (a label value must be a string, and these look like something else).
const LABEL_VALUES: &[&str] = &["'0777'", "\"yes\"", "'on'", "'1e3'", "\"08\"", "team-a"];
/// Quantities: plain numbers, suffixed strings and floats with whole values (the CRD schema's
/// `int-or-string` refuses a fraction such as `0.5`, which kubectl sends as a JSON number).
const CPUS: &[&str] = &["1", "500m", "'2'", "1e0", "'0.5'"];
const MEMORIES: &[&str] = &["1Gi", "512Mi", "1e9", "'256Mi'", "1000000000"];

fn mode(p: &mut Picker) -> &'static str {
    match p.pick(MODES) {
        "0o644" => "0644",
        other => other,
    }
}

/// A container list; `style` picks block or flow.
fn containers(p: &mut Picker, name: &str, indent: &str) -> String {
    let env = format!(
        "[{{name: A, value: {}}}, {{name: B, value: {}}}]",
        p.pick(STRINGS),
        p.pick(STRINGS)
    );
    let (cpu, memory) = (p.pick(CPUS), p.pick(MEMORIES));
    if p.flip() {
        format!(
            "{indent}containers: [{{name: {name}, image: 'rayproject/ray:2.60.0', env: {env}, \
             resources: {{limits: {{cpu: {cpu}, memory: {memory}}}}}}}]\n"
        )
    } else {
        format!(
            "{indent}containers:\n\
             {indent}- name: {name} # the Ray container\n\
             {indent}  image: rayproject/ray:2.60.0\n\
             {indent}  stdin: {}\n\
             {indent}  env: {env}\n\
             {indent}  resources:\n\
             {indent}    limits:\n\
             {indent}      cpu: {cpu}\n\
             {indent}      memory: {memory}\n",
            p.pick(BOOLS),
        )
    }
}

/// A head group and one worker group, with a mounted ConfigMap whose mode is spelled one of
/// the ways of [`MODES`].
fn cluster_spec(p: &mut Picker, indent: &str) -> String {
    let head = containers(p, "ray-head", &format!("{indent}      "));
    let worker = containers(p, "ray-worker", &format!("{indent}      "));
    format!(
        "{indent}rayVersion: '2.60.0'\n\
         {indent}headGroupSpec:\n\
         {indent}  rayStartParams: {{num-cpus: '1', dashboard-host: 0.0.0.0}}\n\
         {indent}  template:\n\
         {indent}    metadata:\n\
         {indent}      labels: &podLabels {{app: ray, tier: {}}}\n\
         {indent}    spec:\n\
         {head}\
         {indent}      volumes:\n\
         {indent}      - name: config\n\
         {indent}        configMap: {{name: ray-config, defaultMode: {}}}\n\
         {indent}workerGroupSpecs:\n\
         {indent}- groupName: cpu\n\
         {indent}  replicas: {}\n\
         {indent}  minReplicas: 0\n\
         {indent}  maxReplicas: 0x10\n\
         {indent}  rayStartParams: {{}}\n\
         {indent}  template:\n\
         {indent}    metadata:\n\
         {indent}      labels:\n\
         {indent}        <<: *podLabels\n\
         {indent}        group: cpu\n\
         {indent}    spec:\n\
         {worker}",
        p.pick(LABEL_VALUES),
        mode(p),
        p.pick(SMALL_INTS),
    )
}

/// One document: a RayJob or a RayCluster named after `index`.
fn document(p: &mut Picker, index: usize) -> String {
    let labels = format!(
        "  labels: &labels\n    owner: {}\n    stage: {}\n  annotations:\n    <<: *labels\n    note: {}\n",
        p.pick(LABEL_VALUES),
        p.pick(LABEL_VALUES),
        p.pick(STRINGS),
    );
    if p.flip() {
        let entrypoint = if p.flip() {
            "  entrypoint: |\n    python -c 'import ray; ray.init(); print(ray.cluster_resources())'\n"
                .to_owned()
        } else {
            "  entrypoint: python -c \"print('yes')\"\n".to_owned()
        };
        let shutdown = p.pick(BOOLS);
        // A TTL only with shutdownAfterJobFinishes (KubeRay refuses it otherwise).
        let ttl = if TRUE.contains(&shutdown) {
            format!("  ttlSecondsAfterFinished: {}\n", p.pick(SMALL_INTS))
        } else {
            String::new()
        };
        format!(
            "# generated RayJob\napiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: job-{index}\n\
             {labels}spec:\n{entrypoint}  backoffLimit: {}\n  shutdownAfterJobFinishes: {shutdown}\n\
             {ttl}  rayClusterSpec:\n{}",
            p.pick(SMALL_INTS),
            cluster_spec(p, "    "),
        )
    } else {
        format!(
            "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: cluster-{index}\n{labels}spec:\n{}",
            cluster_spec(p, "  "),
        )
    }
}

/// A file of one to three documents.
fn file(seed: u64) -> String {
    let mut p = Picker(SplitMix64::new(seed));
    let count = 1 + usize::try_from(p.next() % 3).expect("small count");
    (0..count)
        .map(|index| format!("---\n{}", document(&mut p, index)))
        .collect()
}

fn convert(text: &str, to: RayVersion) -> String {
    let documents =
        parse_documents("generated.yaml", text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let values = documents.into_iter().map(|d| d.value).collect();
    let converted = convert_documents(values, to).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    documents_to_yaml(&converted)
}

/// What the API server makes of `text` as kubectl sends it, one object per document, or
/// kubectl's error.
async fn dry_run_create(ns: &TestNamespace, text: &str) -> Result<Vec<Value>, String> {
    let path = std::env::temp_dir().join(format!("raygate-convert-{}.yaml", ns.name()));
    std::fs::write(&path, text).expect("write the manifest");
    let output = raygate_e2e::kubectl::run(&[
        "create",
        "--dry-run=server",
        "--validate=strict",
        "-o",
        "json",
        "-n",
        ns.name(),
        "-f",
        path.to_str().expect("a UTF-8 path"),
    ])
    .await;
    let _ = std::fs::remove_file(&path);
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    // One JSON object per document, one after another (a `List` from older kubectl versions).
    let mut objects = Vec::new();
    for answer in serde_json::Deserializer::from_slice(&output.stdout).into_iter::<Value>() {
        let answer = answer.expect("kubectl's JSON");
        match answer["kind"].as_str() {
            Some("List") => objects.extend(answer["items"].as_array().cloned().unwrap_or_default()),
            _ => objects.push(answer),
        }
    }
    Ok(objects)
}

/// The paths at which `sent` and `stored` differ, for every value `sent` sets: a path `sent`
/// has and `stored` lacks was pruned, one with another value was changed.
fn not_stored_as_sent(sent: &Value, stored: &Value, path: &str, out: &mut Vec<String>) {
    match (sent, stored) {
        (Value::Object(sent), Value::Object(stored)) => {
            for (key, value) in sent {
                let here = format!("{path}.{key}");
                match stored.get(key) {
                    Some(kept) => not_stored_as_sent(value, kept, &here, out),
                    None => out.push(format!("{here}: pruned")),
                }
            }
        }
        (Value::Array(sent), Value::Array(stored)) if sent.len() == stored.len() => {
            for (index, (value, kept)) in sent.iter().zip(stored).enumerate() {
                not_stored_as_sent(value, kept, &format!("{path}[{index}]"), out);
            }
        }
        _ if sent == stored => {}
        // The v1-only fields raygate keeps for a v1alpha1 object are JSON in an annotation; the
        // API server's round trip through v1 adds the v1 defaults there, as it adds them to
        // the spec of a v1 object.
        (Value::String(sent), Value::String(stored)) if path.ends_with(V1_FIELDS_ANNOTATION) => {
            match (serde_json::from_str(sent), serde_json::from_str(stored)) {
                (Ok(sent), Ok(stored)) => not_stored_as_sent(&sent, &stored, path, out),
                _ => out.push(format!("{path}: sent {sent}, stored {stored}")),
            }
        }
        _ => out.push(format!("{path}: sent {sent}, stored {stored}")),
    }
}

/// What an object means, without what the API server adds to every object it is given.
fn meaning(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for generated in [
            "uid",
            "creationTimestamp",
            "managedFields",
            "namespace",
            "generation",
            "resourceVersion",
        ] {
            metadata.remove(generated);
        }
    }
    object
}

#[tokio::test]
async fn convert_output_is_accepted_strictly_by_the_api_server_and_means_what_the_input_meant() {
    let env = Env::load();
    // Judged for KubeRay: the generated objects are about YAML, not about raygate's own rules.
    let ns = TestNamespace::with_labels(&env, "convert", &[(RECONCILER_LABEL, "kuberay")]).await;
    let mut problems = Vec::new();
    for seed in 0..CASES {
        let input = file(seed);
        let as_written = match dry_run_create(&ns, &input).await {
            Ok(objects) => objects,
            Err(error) => {
                panic!("seed {seed}: the generated input itself is refused: {error}\n{input}")
            }
        };
        let alpha = convert(&input, RayVersion::V1alpha1);
        match dry_run_create(&ns, &alpha).await {
            Ok(stored) => {
                let sent =
                    parse_documents("v1alpha1.yaml", &alpha).expect("raygate reads its own output");
                for (document, stored) in sent.iter().zip(&stored) {
                    let mut differences = Vec::new();
                    not_stored_as_sent(
                        &as_the_api_server_reads(&document.value),
                        stored,
                        "",
                        &mut differences,
                    );
                    if !differences.is_empty() {
                        problems.push(format!(
                            "seed {seed}: v1alpha1 output: {differences:?}\n{alpha}"
                        ));
                    }
                }
            }
            Err(error) => problems.push(format!(
                "seed {seed}: v1alpha1 output refused: {error}\n{alpha}"
            )),
        }
        let back = convert(&alpha, RayVersion::V1);
        match dry_run_create(&ns, &back).await {
            Ok(read_back) => {
                let (before, after): (Vec<Value>, Vec<Value>) = (
                    as_written.iter().map(meaning).collect(),
                    read_back.iter().map(meaning).collect(),
                );
                if before != after {
                    problems.push(format!(
                        "seed {seed}: v1 -> v1alpha1 -> v1 changed the meaning\ninput:\n{input}\nv1alpha1:\n{alpha}\nv1:\n{back}"
                    ));
                }
            }
            Err(error) => problems.push(format!("seed {seed}: v1 output refused: {error}\n{back}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn the_generator_writes_the_spellings_it_is_meant_to() {
    let files: String = (0..CASES).map(file).collect();
    for spelling in [
        "0x",
        "<<: *",
        "&podLabels",
        "# the Ray container",
        "{name:",
        "'0777'",
    ] {
        assert!(files.contains(spelling), "no {spelling:?} in {CASES} files");
    }
    // And each file reads: the generator writes YAML, not just text.
    for seed in 0..CASES {
        let text = file(seed);
        parse_documents("generated.yaml", &text)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
    }
}
