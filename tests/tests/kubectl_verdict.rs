//! `raygate validate` gives `kubectl apply`'s verdict: broken manifests of every class raygate
//! judges offline (unknown fields under each `--validate` mode, the API server's metadata rules,
//! `ray.io` versions and kinds no CRD serves, multi-document files with a syntax error, schema
//! and webhook rules) and a few valid ones, each through `raygate validate` and through
//! `kubectl apply --dry-run=server` against the environment's API server with raygate's CRDs
//! and webhook. Both must accept or refuse it, and refuse it for the same first error (its
//! field path and the API server's reason, without kubectl's `Error from server …:` prefix).
//! Every known difference is a [`Difference`] of its case, which says what kubectl says instead.
//! Run inside the environment: `tests/env/control-plane exec -- cargo test -p raygate-e2e --test kubectl_verdict`.

use std::fs;
use std::path::{Path, PathBuf};

use raygate_api::input::documents_to_yaml;
use raygate_api::keys::RECONCILER_LABEL;
use raygate_e2e::{Env, TestNamespace, kubectl, raygate};
use serde_json::{Value, json};

/// A difference between raygate and kubectl that is known and documented: raygate gives the
/// verdict `raygate_accepts`, and kubectl prints `kubectl_says` instead of raygate's first error
/// (or of its acceptance).
#[derive(Clone, Copy)]
struct Difference {
    raygate_accepts: bool,
    kubectl_says: &'static str,
    why: &'static str,
}

/// Which kubectl command is the oracle.
#[derive(Clone, Copy, PartialEq)]
enum Verb {
    /// `kubectl apply --dry-run=server`, the command raygate validate stands in for.
    Apply,
    /// `kubectl create --dry-run=server`: what the API server itself says about objects
    /// `kubectl apply` refuses before sending them (no name, only a `generateName`).
    Create,
}

struct Case {
    name: &'static str,
    text: String,
    /// `--validate` for both commands.
    validate: &'static str,
    verb: Verb,
    difference: Option<Difference>,
}

fn case(name: &'static str, object: Value) -> Case {
    Case {
        name,
        text: documents_to_yaml(&[object]),
        validate: "strict",
        verb: Verb::Apply,
        difference: None,
    }
}

impl Case {
    fn validate(mut self, mode: &'static str) -> Case {
        self.validate = mode;
        self
    }

    fn create(mut self) -> Case {
        self.verb = Verb::Create;
        self
    }

    /// raygate refuses it, and kubectl says `kubectl_says`.
    fn differs(mut self, kubectl_says: &'static str, why: &'static str) -> Case {
        self.difference = Some(Difference {
            raygate_accepts: false,
            kubectl_says,
            why,
        });
        self
    }

    /// raygate accepts it, and kubectl says `kubectl_says`.
    fn differs_accepted(mut self, kubectl_says: &'static str, why: &'static str) -> Case {
        self.difference = Some(Difference {
            raygate_accepts: true,
            kubectl_says,
            why,
        });
        self
    }
}

fn raw(name: &'static str, text: String) -> Case {
    Case {
        text,
        ..case(name, Value::Null)
    }
}

/// A RayJob every rule accepts (the README's example, smaller).
fn job() -> Value {
    json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "verdict-job", "labels": {"team": "ml"}},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "shutdownAfterJobFinishes": true,
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [{
                        "name": "ray-head",
                        "image": "rayproject/ray:2.60.0",
                        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                    }]}},
                },
                "workerGroupSpecs": [{
                    "groupName": "small",
                    "replicas": 1,
                    "minReplicas": 1,
                    "maxReplicas": 2,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [{
                        "name": "ray-worker",
                        "image": "rayproject/ray:2.60.0",
                        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                    }]}},
                }],
            },
        },
    })
}

/// A RayCluster every rule accepts.
fn cluster() -> Value {
    let mut spec = job()["spec"]["rayClusterSpec"].clone();
    spec["workerGroupSpecs"][0]["groupName"] = json!("workers");
    json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "verdict-cluster"},
        "spec": spec,
    })
}

fn edited(mut object: Value, edit: impl FnOnce(&mut Value)) -> Value {
    edit(&mut object);
    object
}

fn job_with(edit: impl FnOnce(&mut Value)) -> Value {
    edited(job(), edit)
}

fn head(object: &mut Value) -> &mut Value {
    &mut object["spec"]["rayClusterSpec"]["headGroupSpec"]
}

fn worker(object: &mut Value) -> &mut Value {
    &mut object["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
}

fn remove(object: &mut Value, key: &str) -> Value {
    object
        .as_object_mut()
        .and_then(|map| map.remove(key))
        .unwrap_or(Value::Null)
}

/// The job's YAML with its first `from` replaced by `to` (for what JSON cannot write).
fn job_yaml_replacing(from: &str, to: &str) -> String {
    let text = documents_to_yaml(&[job()]);
    assert!(text.contains(from), "{from:?} not in\n{text}");
    text.replacen(from, to, 1)
}

const NAMELESS: &str = "resource name may not be empty";
const NAMELESS_WHY: &str = "kubectl apply looks the object up by name before sending it and \
    refuses it itself; kubectl create sends it and gets the API server's error, raygate's";
const GENERATE_NAME_WHY: &str = "kubectl apply refuses an object with only a generateName \
    itself; kubectl create takes it, and so does raygate, which judges what the API server and \
    its webhook would take";

fn single_document_cases() -> Vec<Case> {
    let long = |n: usize| "x".repeat(n);
    vec![
        // Valid manifests.
        case("valid RayJob", job()),
        case("valid RayCluster", cluster()),
        case(
            "rayStartParams takes any key",
            job_with(|j| head(j)["rayStartParams"]["num-gpus-extra"] = json!("1")),
        ),
        case(
            "an extended resource in limits",
            job_with(|j| {
                worker(j)["template"]["spec"]["containers"][0]["resources"]["limits"] =
                    json!({"example.com/fpga": 1})
            }),
        ),
        case(
            "100 KiB of annotations fit with kubectl apply's copy",
            job_with(|j| j["metadata"]["annotations"] = json!({"notes": long(100 * 1024)})),
        ),
        case(
            "a valid v1alpha1 RayJob",
            job_with(|j| j["apiVersion"] = json!("ray.io/v1alpha1")),
        ),
        // Unknown fields, strict (kubectl's default).
        case(
            "spec.entrypont",
            job_with(|j| {
                let entrypoint = remove(&mut j["spec"], "entrypoint");
                j["spec"]["entrypont"] = entrypoint;
            }),
        ),
        case(
            "minReplica in a worker group",
            job_with(|j| {
                let min = remove(worker(j), "minReplicas");
                worker(j)["minReplica"] = min;
            }),
        ),
        case(
            "resource for resources in a container",
            job_with(|j| {
                let c = &mut worker(j)["template"]["spec"]["containers"][0];
                let resources = remove(c, "resources");
                c["resource"] = resources;
            }),
        ),
        case(
            "a typo inside a container's resources",
            job_with(|j| {
                let r = &mut head(j)["template"]["spec"]["containers"][0]["resources"];
                let requests = remove(r, "requests");
                r["request"] = requests;
            }),
        ),
        case(
            "containers misindented into the template",
            edited(cluster(), |c| {
                let t = &mut c["spec"]["headGroupSpec"]["template"];
                let spec = remove(t, "spec");
                t["containers"] = spec["containers"].clone();
                t["spec"] = json!({"containers": spec["containers"].clone()});
            }),
        ),
        case(
            "creationTimestamp: null in a Pod template (kubectl create --dry-run=client output)",
            job_with(|j| head(j)["template"]["metadata"] = json!({"creationTimestamp": null})),
        ),
        case(
            "an unknown field written null: kubectl apply accepts it",
            job_with(|j| {
                j["spec"]["foo"] = Value::Null;
                j["metadata"]["foo"] = Value::Null;
            }),
        ),
        case(
            "a label and an annotation written null: stored as empty strings",
            job_with(|j| {
                j["metadata"]["labels"] = json!({"team": null});
                j["metadata"]["annotations"] = json!({"note": null});
            }),
        ),
        case(
            "creationTimestamp set in a Pod template",
            job_with(|j| {
                head(j)["template"]["metadata"] =
                    json!({"creationTimestamp": "2020-01-01T00:00:00Z"})
            }),
        ),
        case(
            "generateName in a Pod template's metadata",
            job_with(|j| worker(j)["template"]["metadata"] = json!({"generateName": "w-"})),
        ),
        case(
            "a misspelt Pod spec field",
            job_with(|j| worker(j)["template"]["spec"]["nodeSelectorr"] = json!({"a": "b"})),
        ),
        case(
            "an unknown top-level field",
            job_with(|j| j["extra"] = json!("x")),
        ),
        case(
            "lables in the root metadata",
            job_with(|j| {
                let labels = remove(&mut j["metadata"], "labels");
                j["metadata"]["lables"] = labels;
            }),
        ),
        case(
            "an owner reference with a misspelt field",
            job_with(|j| {
                j["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
                    "name": "owner", "uid": "6f1a2b4c-0000-4000-8000-000000000000", "controler": true}])
            }),
        ),
        case(
            "two unknown fields: the first in the API server's sorted order",
            job_with(|j| {
                j["spec"]["zeta"] = json!(1);
                head(j)["alpha"] = json!(1);
            }),
        ),
        case(
            "a plural typo of a required field",
            edited(cluster(), |c| {
                let head = remove(&mut c["spec"], "headGroupSpec");
                c["spec"]["headGroupSpecs"] = head;
            }),
        ),
        case(
            "an unknown field in a v1alpha1 RayJob",
            job_with(|j| {
                j["apiVersion"] = json!("ray.io/v1alpha1");
                j["spec"]["entrypont"] = json!("x");
            }),
        ),
        case(
            "an unknown status field",
            job_with(|j| j["status"] = json!({"jobStatuss": "RUNNING"})),
        ),
        case(
            "servicetype for serviceType",
            job_with(|j| head(j)["servicetype"] = json!("ClusterIP")),
        ),
        // Unknown fields with --validate=warn and ignore: accepted by both.
        case(
            "spec.entrypont with --validate=warn",
            job_with(|j| j["spec"]["entrypont"] = json!("x")),
        )
        .validate("warn"),
        case(
            "minReplica with --validate=false",
            job_with(|j| worker(j)["minReplica"] = json!(1)),
        )
        .validate("false"),
        // An unknown field is dropped with warn, then the rule it broke is found.
        case(
            "shutdownAfterJobFinished with --validate=warn and a TTL",
            job_with(|j| {
                remove(&mut j["spec"], "shutdownAfterJobFinishes");
                j["spec"]["shutdownAfterJobFinished"] = json!(true);
                j["spec"]["ttlSecondsAfterFinished"] = json!(60);
            }),
        )
        .validate("warn"),
        // The API server's metadata rules.
        case(
            "no name",
            job_with(|j| {
                remove(&mut j["metadata"], "name");
            }),
        )
        .differs(NAMELESS, NAMELESS_WHY),
        case(
            "no name, created",
            job_with(|j| {
                remove(&mut j["metadata"], "name");
            }),
        )
        .create(),
        case(
            "only a generateName",
            job_with(|j| {
                remove(&mut j["metadata"], "name");
                j["metadata"]["generateName"] = json!("verdict-");
            }),
        )
        .differs_accepted("cannot use generate name with apply", GENERATE_NAME_WHY),
        case(
            "only a generateName, created",
            job_with(|j| {
                remove(&mut j["metadata"], "name");
                j["metadata"]["generateName"] = json!("verdict-");
            }),
        )
        .create(),
        case(
            "a name that is no DNS-1123 subdomain",
            job_with(|j| j["metadata"]["name"] = json!("Verdict_Job")),
        ),
        case(
            "a name of 254 characters",
            job_with(|j| j["metadata"]["name"] = json!(long(254))),
        ),
        case(
            "a name with a dot: a subdomain, but no DNS-1035 label (KubeRay's rule)",
            job_with(|j| j["metadata"]["name"] = json!("verdict.job")),
        ),
        case(
            "a name KubeRay finds too long",
            job_with(|j| j["metadata"]["name"] = json!(long(60))),
        ),
        case(
            "a generateName that starts with a capital",
            job_with(|j| {
                remove(&mut j["metadata"], "name");
                j["metadata"]["generateName"] = json!("Verdict-");
            }),
        )
        .create(),
        case(
            "a label key with a space",
            job_with(|j| j["metadata"]["labels"] = json!({"bad key": "x"})),
        ),
        case(
            "a label key with an empty name part",
            job_with(|j| j["metadata"]["labels"] = json!({"example.com/": "x"})),
        ),
        case(
            "a label key whose prefix is no subdomain",
            job_with(|j| j["metadata"]["labels"] = json!({"Example_com/team": "x"})),
        ),
        case(
            "a label name part of 64 characters",
            job_with(|j| j["metadata"]["labels"] = json!({long(64): "x"})),
        ),
        case(
            "a label value of 64 characters",
            job_with(|j| j["metadata"]["labels"] = json!({"team": long(64)})),
        ),
        case(
            "a label value starting with a dash",
            job_with(|j| j["metadata"]["labels"] = json!({"team": "-ml"})),
        ),
        raw(
            "a label value written as a number",
            job_yaml_replacing("team: ml", "version: 2"),
        ),
        case(
            "a label key with two slashes",
            job_with(|j| j["metadata"]["labels"] = json!({"a/b/c": "x"})),
        ),
        case(
            "an annotation name part of 64 characters",
            job_with(|j| j["metadata"]["annotations"] = json!({long(64): "x"})),
        ),
        case(
            "an annotation value written as a bool",
            job_with(|j| j["metadata"]["annotations"] = json!({"enabled": true})),
        ),
        case(
            "labels written as a list",
            job_with(|j| j["metadata"]["labels"] = json!(["team"])),
        ),
        case(
            "a name written as a number",
            job_with(|j| j["metadata"]["name"] = json!(7)),
        ),
        case(
            "a finalizer written as a number",
            job_with(|j| j["metadata"]["finalizers"] = json!([1])),
        ),
        case(
            "an annotation key with two slashes",
            job_with(|j| j["metadata"]["annotations"] = json!({"a/b/c": "x"})),
        ),
        case(
            "300 KiB of annotations",
            job_with(|j| j["metadata"]["annotations"] = json!({"notes": long(300 * 1024)})),
        ),
        case(
            "140 KiB of annotations: too much with kubectl apply's copy of the object",
            job_with(|j| j["metadata"]["annotations"] = json!({"notes": long(140 * 1024)})),
        ),
        case(
            "140 KiB of annotations, created: no copy",
            job_with(|j| j["metadata"]["annotations"] = json!({"notes": long(140 * 1024)})),
        )
        .create()
        .differs(
            "created (server dry run)",
            "raygate validate judges for kubectl apply, whose copy of the object in its \
             last-applied-configuration annotation kubectl create does not add",
        ),
        // ray.io versions and kinds no CRD serves.
        case(
            "ray.io/v2",
            job_with(|j| j["apiVersion"] = json!("ray.io/v2")),
        ),
        case("kind RayJobs", job_with(|j| j["kind"] = json!("RayJobs"))),
        case("kind Rayjob", job_with(|j| j["kind"] = json!("Rayjob"))),
        case(
            "ray.io/v1beta1 RayCluster",
            edited(cluster(), |c| c["apiVersion"] = json!("ray.io/v1beta1")),
        ),
        case(
            "apiVersion ray.io without a version",
            job_with(|j| j["apiVersion"] = json!("ray.io")),
        ),
        // The CRD schema and the webhook, for the order of the first error.
        case(
            "backoffLimit written as text",
            job_with(|j| j["spec"]["backoffLimit"] = json!("three")),
        ),
        case(
            "an unsupported submissionMode",
            job_with(|j| j["spec"]["submissionMode"] = json!("Sometimes")),
        ),
        case(
            "suspend without shutdownAfterJobFinishes (KubeRay's rule)",
            job_with(|j| {
                j["spec"]["shutdownAfterJobFinishes"] = json!(false);
                j["spec"]["suspend"] = json!(true);
            }),
        ),
        case(
            "an unknown field and a type error: the unknown field first",
            job_with(|j| {
                j["spec"]["backoffLimit"] = json!("three");
                j["spec"]["entrypont"] = json!("x");
            }),
        ),
        case(
            "a bad name and a type error: the name first",
            job_with(|j| {
                j["metadata"]["name"] = json!("Verdict_Job");
                j["spec"]["backoffLimit"] = json!("three");
            }),
        ),
    ]
}

/// A multi-document file: the names of the objects applied before the end or the syntax error.
struct MultiCase {
    name: &'static str,
    text: String,
}

fn multi_document_cases() -> Vec<MultiCase> {
    let named = |name: &str| job_with(|j| j["metadata"]["name"] = json!(name));
    let yaml = |objects: &[Value]| documents_to_yaml(objects);
    vec![
        MultiCase {
            name: "a syntax error after a valid document",
            text: format!("{}---\nkind: [\n", yaml(&[named("first")])),
        },
        MultiCase {
            name: "a bad separator after two valid documents",
            text: format!(
                "{}--- {{kind: RayJob}}\n",
                yaml(&[named("first"), named("second")])
            ),
        },
        MultiCase {
            name: "a broken document between two valid ones",
            text: yaml(&[
                named("first"),
                edited(named("second"), |j| j["spec"]["entrypont"] = json!("x")),
                named("third"),
            ]),
        },
        MultiCase {
            name: "labels kubectl cannot decode between two valid documents",
            text: yaml(&[
                named("first"),
                edited(named("second"), |j| {
                    j["metadata"]["labels"] = json!({"team": 2})
                }),
                named("third"),
            ]),
        },
        MultiCase {
            name: "a version no CRD serves between two valid documents",
            text: yaml(&[
                named("first"),
                edited(named("second"), |j| j["apiVersion"] = json!("ray.io/v2")),
                named("third"),
            ]),
        },
        MultiCase {
            name: "a syntax error in the first document",
            text: format!("kind: [\n---\n{}", yaml(&[named("second")])),
        },
    ]
}

/// What kubectl printed about one file.
struct KubectlRun {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn kubectl_run(verb: Verb, validate: &str, ns: &str, file: &Path) -> KubectlRun {
    let file = file.to_string_lossy();
    let validate = format!("--validate={validate}");
    let verb = match verb {
        Verb::Apply => "apply",
        Verb::Create => "create",
    };
    let args = [verb, "--dry-run=server", &validate, "-n", ns, "-f", &file];
    let output = kubectl::run(&args).await;
    KubectlRun {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// What raygate validate printed about one file: its exit code and JSON reports.
struct RaygateRun {
    code: Option<i32>,
    reports: Vec<Value>,
    stderr: String,
}

async fn raygate_run(validate: &str, file: &Path) -> RaygateRun {
    let file = file.to_string_lossy();
    let validate = format!("--validate={validate}");
    let output = raygate::run(&["validate", "-o", "json", &validate, "-f", &file]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reports = serde_json::from_str::<Vec<Value>>(&stdout)
        .unwrap_or_else(|e| panic!("raygate validate -o json printed no reports ({e}): {stdout}"));
    RaygateRun {
        code: output.status.code(),
        reports,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The first error of a report, as the API server (or raygate's webhook) words it: kubectl
/// prints it after its own prefix.
fn server_text(finding: &Value) -> String {
    let rule = finding["rule"].as_str().unwrap_or_default();
    let field = finding["field"].as_str().unwrap_or_default();
    let message = finding["message"].as_str().unwrap_or_default();
    // raygate adds what to write after "; " to the API server's sentence.
    let sentence = message.split("; ").next().unwrap_or(message);
    match rule {
        "unknown-field" | "metadata-type" => message.to_string(),
        "no-kind-match" => message
            .split(": raygate's CRDs serve")
            .next()
            .unwrap_or(message)
            .to_string(),
        "schema-type" => type_error_wording(field, sentence),
        _ if rule.starts_with("metadata-") || rule.starts_with("schema-") => {
            format!("{field}: {sentence}")
        }
        // raygate's webhook denies with the finding as raygate validate prints it.
        _ if field.is_empty() => message.to_string(),
        _ => format!("{field}: {message}"),
    }
}

/// The API server's text for raygate's type error: it repeats the type it found where raygate
/// echoes what was written (`docs/validation-rules.md`, message style).
fn type_error_wording(field: &str, sentence: &str) -> String {
    let subject = format!(": {field} in body ");
    let Some((_, rest)) = sentence.split_once(&subject) else {
        return sentence.to_string();
    };
    let found = rest.rsplit(": ").next().unwrap_or_default();
    format!("{field}: Invalid value: {found}{subject}{rest}")
}

fn first_error(report: &Value) -> Option<&Value> {
    report["findings"]
        .as_array()?
        .iter()
        .find(|f| f["severity"] == "error")
}

fn write(dir: &Path, index: usize, text: &str) -> PathBuf {
    let path = dir.join(format!("case-{index:02}.yaml"));
    fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path
}

#[tokio::test]
async fn raygate_validate_gives_kubectl_apply_s_verdict() {
    let env = Env::load();
    // Judged for raygate's reconciler, raygate validate's default.
    let ns =
        TestNamespace::with_labels(&env, "kubectl-verdict", &[(RECONCILER_LABEL, "raygate")]).await;
    let dir = std::env::temp_dir().join(format!("raygate-kubectl-verdict-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("a scratch directory");
    let mut problems = Vec::new();
    let (mut broken, mut valid, mut documented) = (0, 0, Vec::new());
    for (index, case) in single_document_cases().into_iter().enumerate() {
        let file = write(&dir, index, &case.text);
        let ours = raygate_run(case.validate, &file).await;
        let theirs = kubectl_run(case.verb, case.validate, ns.name(), &file).await;
        let accepted = ours.code == Some(0);
        let said = format!("{}{}", theirs.stdout, theirs.stderr);
        if let Some(difference) = case.difference {
            // kubectl says something else, documented here.
            documented.push(format!("{}: {}", case.name, difference.why));
            broken += 1;
            if accepted != difference.raygate_accepts || !said.contains(difference.kubectl_says) {
                let verdict = if difference.raygate_accepts {
                    "accept"
                } else {
                    "refuse"
                };
                problems.push(format!(
                    "{}: expected raygate to {verdict} it and kubectl to say {:?}; raygate: exit \
                     {:?} {:?}; kubectl: {}",
                    case.name,
                    difference.kubectl_says,
                    ours.code,
                    ours.reports,
                    said.trim()
                ));
            }
            continue;
        }
        if accepted != theirs.ok {
            let verdict = |ok| if ok { "accepts" } else { "refuses" };
            problems.push(format!(
                "{}: raygate {} it (exit {:?}: {:?}), kubectl {} it: {}",
                case.name,
                verdict(accepted),
                ours.code,
                ours.reports,
                verdict(theirs.ok),
                said.trim()
            ));
            continue;
        }
        if accepted {
            valid += 1;
            continue;
        }
        broken += 1;
        let Some(error) = ours.reports.first().and_then(first_error) else {
            problems.push(format!(
                "{}: raygate refuses it without an error: {:?}",
                case.name, ours.reports
            ));
            continue;
        };
        let expected = server_text(error);
        if !said.contains(&expected) {
            problems.push(format!(
                "{}: kubectl does not say raygate's first error\n  raygate: {expected}\n  kubectl: {}",
                case.name,
                said.trim()
            ));
        }
    }
    for (index, case) in multi_document_cases().into_iter().enumerate() {
        let file = write(&dir, 100 + index, &case.text);
        let ours = raygate_run("strict", &file).await;
        let theirs = kubectl_run(Verb::Apply, "strict", ns.name(), &file).await;
        broken += 1;
        let ours_applied: Vec<&str> = ours
            .reports
            .iter()
            .filter(|r| r["valid"] == true)
            .filter_map(|r| r["name"].as_str())
            .collect();
        let theirs_applied: Vec<&str> = theirs
            .stdout
            .lines()
            .filter_map(|line| line.strip_suffix(" created (server dry run)"))
            .filter_map(|object| object.strip_prefix("rayjob.ray.io/"))
            .collect();
        if ours_applied != theirs_applied {
            problems.push(format!(
                "{}: raygate accepts {ours_applied:?}, kubectl applies {theirs_applied:?}: {}{}",
                case.name, theirs.stdout, theirs.stderr
            ));
        }
        let unreadable = ours.code == Some(2);
        if unreadable != theirs.stderr.contains("error parsing") || theirs.ok {
            problems.push(format!(
                "{}: raygate exits {:?} ({}), kubectl: {}{}",
                case.name, ours.code, ours.stderr, theirs.stdout, theirs.stderr
            ));
        }
        for report in ours.reports.iter().filter(|r| r["valid"] == false) {
            let expected = first_error(report).map(server_text).unwrap_or_default();
            if expected.is_empty() || !theirs.stderr.contains(&expected) {
                problems.push(format!(
                    "{}: kubectl does not say raygate's first error {expected:?}: {}",
                    case.name, theirs.stderr
                ));
            }
        }
    }
    let _ = fs::remove_dir_all(&dir);
    assert!(
        problems.is_empty(),
        "{} disagreements:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(
        broken >= 40 && valid >= 3,
        "only {broken} broken and {valid} valid manifests were compared"
    );
    eprintln!(
        "{broken} broken and {valid} valid manifests agree but {} documented differences:\n{}",
        documented.len(),
        documented.join("\n")
    );
}
