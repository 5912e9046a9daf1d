//! Tests of CRD generation, defaulting and schema validation.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::schema::{self, Node};
use super::*;
use crate::finding::{Compat, Finding, Severity};
use crate::ray::v1alpha1::{RAYCLUSTER_DEPRECATION_WARNING, RAYJOB_DEPRECATION_WARNING};

const RAYJOB_YAML: &str = r#"
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: rayjob-sample
  namespace: default
spec:
  entrypoint: python /home/ray/samples/sample_code.py
  runtimeEnvYAML: |
    pip:
      - requests==2.26.0
  rayClusterSpec:
    rayVersion: '2.46.0'
    headGroupSpec:
      rayStartParams: {}
      template:
        metadata:
          labels:
            app: ray
        spec:
          containers:
            - name: ray-head
              image: rayproject/ray:2.46.0
              ports:
                - containerPort: 6379
                  name: gcs-server
                - containerPort: 8265
                  name: dashboard
              resources:
                limits:
                  cpu: 1
                  memory: 2Gi
                requests:
                  cpu: "500m"
                  memory: 2Gi
    workerGroupSpecs:
      - groupName: small-group
        rayStartParams: {}
        template:
          spec:
            containers:
              - name: ray-worker
                image: rayproject/ray:2.46.0
                resources:
                  limits:
                    cpu: 1
                    nvidia.com/gpu: 1
                  requests:
                    cpu: 1
"#;

fn rayjob() -> Value {
    serde_saphyr::from_str(RAYJOB_YAML).expect("test manifest parses")
}

fn defaulted(api_version: &str, kind: &str, mut obj: Value) -> Value {
    apply_defaults(api_version, kind, &mut obj).expect("known kind");
    obj
}

fn errors(api_version: &str, kind: &str, obj: &Value) -> Vec<Finding> {
    validate_schema(api_version, kind, obj)
        .into_iter()
        .filter(Finding::is_error)
        .collect()
}

fn rayjob_errors(obj: &Value) -> Vec<Finding> {
    errors(
        "ray.io/v1",
        "RayJob",
        &defaulted("ray.io/v1", "RayJob", obj.clone()),
    )
}

fn schema_json(crd_name: &str, version: &str) -> Value {
    let crd = ray_crds()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(crd_name))
        .expect("crd exists");
    let v = crd
        .spec
        .versions
        .into_iter()
        .find(|v| v.name == version)
        .expect("version exists");
    serde_json::to_value(v.schema.and_then(|s| s.open_api_v3_schema)).expect("serialises")
}

fn at<'a>(schema: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(schema, |node, key| match *key {
        "[]" => &node["items"],
        "{}" => &node["additionalProperties"],
        k => &node["properties"][k],
    })
}

// ---------------------------------------------------------------- generation

#[test]
fn embedded_crds_read_as_serde_saphyr_reads_them() {
    // The embedded files are read with serde_yaml_ng for speed; a YAML 1.1/1.2 difference
    // between the parsers would change a schema silently.
    let crds = ray_crds();
    let ray_files: Vec<_> = generate::COMMITTED
        .iter()
        .filter(|(name, _)| *name != generate::QUEUE_POLICY_FILE)
        .collect();
    assert_eq!(crds.len(), ray_files.len());
    for ((name, yaml), crd) in ray_files.into_iter().zip(&crds) {
        let reference: Value = serde_saphyr::from_str(yaml).expect("committed CRD is YAML");
        let reference: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_json::from_value(reference).expect("committed CRD is a CRD");
        assert_eq!(crd, &reference, "{name}");
    }
}

#[test]
fn crds_have_kuberay_identity() {
    let crds = ray_crds();
    let names: Vec<_> = crds.iter().map(|c| c.metadata.name.clone()).collect();
    assert_eq!(
        names,
        [
            Some("rayclusters.ray.io".into()),
            Some("rayjobs.ray.io".into())
        ]
    );
    for crd in &crds {
        let kind = &crd.spec.names.kind;
        assert_eq!(crd.spec.group, "ray.io");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.categories, Some(vec!["all".to_owned()]));
        assert_eq!(crd.spec.names.list_kind, Some(format!("{kind}List")));
        assert_eq!(
            crd.spec.conversion,
            Some(super::webhook_conversion("raygate-system"))
        );
        let versions: Vec<_> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage, v.deprecated))
            .collect();
        assert_eq!(
            versions,
            [
                ("v1", true, true, None),
                ("v1alpha1", true, false, Some(true))
            ]
        );
        let warning = match kind.as_str() {
            "RayJob" => RAYJOB_DEPRECATION_WARNING,
            _ => RAYCLUSTER_DEPRECATION_WARNING,
        };
        assert_eq!(
            crd.spec.versions[1].deprecation_warning.as_deref(),
            Some(warning)
        );
        assert_eq!(
            warning,
            format!(
                "ray.io/v1alpha1 {kind} is deprecated; it will not receive new fields and will be unavailable in KubeRay 1.9; use ray.io/v1"
            )
        );
        assert_eq!(crd.spec.versions[0].deprecation_warning, None);
        for v in &crd.spec.versions {
            assert!(v.subresources.as_ref().is_some_and(|s| s.status.is_some()));
            assert_eq!(
                v.additional_printer_columns, crd.spec.versions[0].additional_printer_columns,
                "same printer columns in every version"
            );
        }
    }
    let rayjob_columns: Vec<_> = crds[1].spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.json_path.as_str(), c.priority))
        .collect();
    assert_eq!(
        rayjob_columns,
        [
            ("job status", ".status.jobStatus", None),
            ("deployment status", ".status.jobDeploymentStatus", None),
            (
                "gang",
                ".status.conditions[?(@.type==\"GangPending\")].reason",
                None
            ),
            ("ray cluster name", ".status.rayClusterName", None),
            ("start time", ".status.startTime", None),
            ("end time", ".status.endTime", None),
            ("age", ".metadata.creationTimestamp", None),
        ]
    );
    let cluster_columns = crds[0].spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .map(Vec::len);
    assert_eq!(cluster_columns, Some(11));
}

/// Every key of the schema tree with its path.
fn keys(value: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                out.push((path.to_owned(), k.clone()));
                keys(v, &format!("{path}/{k}"), out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| keys(v, path, out)),
        _ => {}
    }
}

#[test]
fn schemas_have_no_descriptions_and_only_kuberays_nullable() {
    for (crd, nullable_at) in [
        (
            "rayclusters.ray.io",
            "/properties/status/properties/lastUpdateTime",
        ),
        (
            "rayjobs.ray.io",
            "/properties/status/properties/rayClusterStatus/properties/lastUpdateTime",
        ),
    ] {
        for version in ["v1", "v1alpha1"] {
            let mut all = Vec::new();
            keys(&schema_json(crd, version), "", &mut all);
            assert!(!all.iter().any(|(_, k)| k == "description" || k == "title"));
            let nullable: Vec<_> = all
                .iter()
                .filter(|(p, k)| k == "nullable" && !p.contains("/x-kubernetes"))
                .map(|(p, _)| p.as_str())
                .collect();
            assert_eq!(nullable, [nullable_at], "{crd} {version}");
        }
    }
}

#[test]
fn root_and_embedded_metadata_follow_kuberay() {
    let schema = schema_json("rayjobs.ray.io", "v1");
    assert_eq!(schema["properties"]["metadata"], json!({"type": "object"}));
    assert_eq!(
        schema["properties"]["apiVersion"],
        json!({"type": "string"})
    );
    assert_eq!(schema["properties"]["kind"], json!({"type": "string"}));
    assert!(
        schema.get("required").is_none(),
        "spec is optional at the root"
    );
    let embedded = [
        at(&schema, &["spec", "submitterPodTemplate", "metadata"]),
        at(
            &schema,
            &[
                "spec",
                "rayClusterSpec",
                "headGroupSpec",
                "template",
                "metadata",
            ],
        ),
        at(
            &schema,
            &[
                "spec",
                "rayClusterSpec",
                "headGroupSpec",
                "headService",
                "metadata",
            ],
        ),
        at(
            &schema,
            &[
                "spec",
                "rayClusterSpec",
                "workerGroupSpecs",
                "[]",
                "template",
                "metadata",
            ],
        ),
    ];
    for meta in embedded {
        let props: Vec<_> = meta["properties"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(
            props,
            ["annotations", "finalizers", "labels", "name", "namespace"]
        );
    }
}

#[test]
fn quantities_and_int_or_strings_are_written_like_controller_gen() {
    let schema = schema_json("rayclusters.ray.io", "v1");
    let container = at(
        &schema,
        &[
            "spec",
            "headGroupSpec",
            "template",
            "spec",
            "containers",
            "[]",
        ],
    );
    let quantity = at(container, &["resources", "limits", "{}"]);
    assert_eq!(
        quantity,
        &json!({
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true,
        })
    );
    let port = at(container, &["livenessProbe", "httpGet", "port"]);
    assert_eq!(
        port,
        &json!({
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": true,
        })
    );
    assert_eq!(
        at(container, &["ports", "[]", "protocol"])["default"],
        json!("TCP")
    );
    assert_eq!(
        at(
            container,
            &["env", "[]", "valueFrom", "configMapKeyRef", "name"]
        )["default"],
        json!("")
    );
    // Not a LocalObjectReference: no default.
    assert!(at(container, &["name"]).get("default").is_none());
    let status = at(&schema, &["status", "desiredCPU"]);
    assert_eq!(status["pattern"], json!(QUANTITY_PATTERN));
}

#[test]
fn schema_defaults_match_kuberay() {
    let job = schema_json("rayjobs.ray.io", "v1");
    for (path, default) in [
        (vec!["spec", "submissionMode"], json!("K8sJobMode")),
        (vec!["spec", "backoffLimit"], json!(0)),
        (vec!["spec", "ttlSecondsAfterFinished"], json!(0)),
        (vec!["status", "succeeded"], json!(0)),
        (vec!["status", "failed"], json!(0)),
    ] {
        assert_eq!(at(&job, &path)["default"], default, "{path:?}");
    }
    let cluster = schema_json("rayclusters.ray.io", "v1");
    let worker = at(&cluster, &["spec", "workerGroupSpecs", "[]"]);
    for (field, default) in [
        ("replicas", json!(0)),
        ("minReplicas", json!(0)),
        ("maxReplicas", json!(2147483647)),
        ("numOfHosts", json!(1)),
    ] {
        assert_eq!(at(worker, &[field])["default"], default, "{field}");
    }
    assert_eq!(
        worker["required"],
        json!(["groupName", "maxReplicas", "minReplicas", "template"])
    );
}

#[test]
fn v1alpha1_schemas_have_the_frozen_feature_set() {
    let job = schema_json("rayjobs.ray.io", "v1alpha1");
    let spec = at(&job, &["spec"]);
    assert_eq!(spec["required"], json!(["entrypoint"]));
    for v1_only in [
        "activeDeadlineSeconds",
        "submissionMode",
        "backoffLimit",
        "submitterConfig",
        "managedBy",
        "deletionStrategy",
        "preRunningDeadlineSeconds",
    ] {
        assert!(spec["properties"].get(v1_only).is_none(), "{v1_only}");
    }
    let status = at(&job, &["status"]);
    for v1_only in [
        "reason",
        "succeeded",
        "failed",
        "rayJobInfo",
        "jobStatusCheckFailureStartTime",
    ] {
        assert!(status["properties"].get(v1_only).is_none(), "{v1_only}");
    }
    let cluster = schema_json("rayclusters.ray.io", "v1alpha1");
    let spec = at(&cluster, &["spec"]);
    assert_eq!(spec["required"], json!(["headGroupSpec"]));
    for v1_only in [
        "upgradeStrategy",
        "authOptions",
        "managedBy",
        "gcsFaultToleranceOptions",
        "historyServerOptions",
        "networkPolicy",
        "tlsOptions",
    ] {
        assert!(spec["properties"].get(v1_only).is_none(), "{v1_only}");
    }
    let head = at(spec, &["headGroupSpec"]);
    assert_eq!(head["required"], json!(["rayStartParams", "template"]));
    for v1_only in ["ingressOptions", "resources", "labels"] {
        assert!(head["properties"].get(v1_only).is_none(), "{v1_only}");
    }
    let worker = at(spec, &["workerGroupSpecs", "[]"]);
    assert_eq!(
        worker["required"],
        json!([
            "groupName",
            "maxReplicas",
            "minReplicas",
            "rayStartParams",
            "template"
        ])
    );
    for v1_only in [
        "suspend",
        "idleTimeoutSeconds",
        "priority",
        "resources",
        "labels",
        "numOfHosts",
    ] {
        assert!(worker["properties"].get(v1_only).is_none(), "{v1_only}");
    }
    let autoscaler = at(spec, &["autoscalerOptions"]);
    for v1_only in ["version", "command", "args"] {
        assert!(autoscaler["properties"].get(v1_only).is_none(), "{v1_only}");
    }
    let status = at(&cluster, &["status"]);
    for v1_only in ["conditions", "stateTransitionTimes"] {
        assert!(status["properties"].get(v1_only).is_none(), "{v1_only}");
    }
    let head_info: Vec<_> = at(status, &["head"])["properties"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    assert_eq!(head_info, ["podIP", "serviceIP"]);
    // The v1 schema does have what v1alpha1 lacks.
    let v1 = schema_json("rayclusters.ray.io", "v1");
    assert!(at(&v1, &["status", "head", "podName"]).is_object());
    assert!(at(&v1, &["spec", "workerGroupSpecs", "[]", "numOfHosts"]).is_object());
}

/// Paths (outside Kubernetes core types) that declare a default, per CRD and version.
fn own_defaults(crd: &str, version: &str) -> Vec<String> {
    let mut all = Vec::new();
    keys(&schema_json(crd, version), "", &mut all);
    let core = [
        "/template/",
        "/submitterPodTemplate/",
        "/headService/",
        "/autoscalerOptions/",
        "/redisPassword/",
        "/redisUsername/",
    ];
    let mut own: Vec<_> = all
        .into_iter()
        .filter(|(p, k)| k == "default" && !core.iter().any(|c| p.contains(c)))
        .map(|(p, _)| p.replace("/properties/", ".").replace("/items", "[]"))
        .collect();
    own.sort();
    own
}

#[test]
fn only_kuberays_defaults_are_declared() {
    let worker = [
        "maxReplicas",
        "minReplicas",
        "numOfHosts",
        "priority",
        "replicas",
    ];
    let mut cluster_v1: Vec<String> = worker
        .iter()
        .map(|f| format!(".spec.workerGroupSpecs[].{f}"))
        .collect();
    cluster_v1.sort();
    assert_eq!(own_defaults("rayclusters.ray.io", "v1"), cluster_v1);
    let mut job_v1: Vec<String> = worker
        .iter()
        .map(|f| format!(".spec.rayClusterSpec.workerGroupSpecs[].{f}"))
        .chain(
            [
                ".spec.backoffLimit",
                ".spec.deletionStrategy.deletionRules[].condition.ttlSeconds",
                ".spec.submissionMode",
                ".spec.ttlSecondsAfterFinished",
                ".status.failed",
                ".status.succeeded",
            ]
            .map(String::from),
        )
        .collect();
    job_v1.sort();
    assert_eq!(own_defaults("rayjobs.ray.io", "v1"), job_v1);
    assert_eq!(
        own_defaults("rayclusters.ray.io", "v1alpha1"),
        [
            ".spec.workerGroupSpecs[].maxReplicas",
            ".spec.workerGroupSpecs[].minReplicas",
            ".spec.workerGroupSpecs[].replicas"
        ]
    );
    assert_eq!(
        own_defaults("rayjobs.ray.io", "v1alpha1"),
        [
            ".spec.rayClusterSpec.workerGroupSpecs[].maxReplicas",
            ".spec.rayClusterSpec.workerGroupSpecs[].minReplicas",
            ".spec.rayClusterSpec.workerGroupSpecs[].replicas",
            ".spec.ttlSecondsAfterFinished"
        ]
    );
}

#[test]
fn every_int_or_string_that_is_not_a_port_is_a_quantity() {
    for crd in ["rayclusters.ray.io", "rayjobs.ray.io"] {
        for version in ["v1", "v1alpha1"] {
            let mut all = Vec::new();
            keys(&schema_json(crd, version), "", &mut all);
            let int_or_string: Vec<_> = all
                .iter()
                .filter(|(_, k)| k == "x-kubernetes-int-or-string")
                .map(|(p, _)| p.clone())
                .collect();
            assert!(!int_or_string.is_empty());
            for path in int_or_string {
                let is_port = path.ends_with("/port") || path.ends_with("/targetPort");
                let has_pattern = all.iter().any(|(p, k)| p == &path && k == "pattern");
                assert_eq!(has_pattern, !is_port, "{crd} {version} {path}");
            }
        }
    }
}

#[test]
fn every_crd_is_well_under_the_etcd_object_limit() {
    for crd in ray_crds() {
        let size = serde_json::to_vec(&generate::crd_json(&crd))
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        assert!(
            size < 1_000_000,
            "{:?} is {size} bytes of JSON",
            crd.metadata.name
        );
    }
}

#[test]
fn every_declared_cel_rule_is_implemented() {
    let rules: Vec<String> = served_schema_nodes()
        .iter()
        .flat_map(|n| n.rules.iter().map(|r| r.rule.clone()))
        .collect();
    assert!(rules.len() >= 6);
    for rule in rules {
        assert!(
            validate::is_known_rule(&rule),
            "CEL rule {rule:?} is declared but not implemented in crd/validate.rs"
        );
    }
}

#[test]
fn yaml_round_trips_to_the_same_crds() {
    let yaml = render_crds_yaml();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).expect("rendered YAML parses");
    let mut expected: Vec<Value> = ray_crds().iter().map(generate::crd_json).collect();
    expected.push(generate::crd_json(&generate::queue_policy_crd()));
    assert_eq!(docs, expected);
    assert!(yaml.starts_with("---\n"));
    let files = crd_files();
    let names: Vec<_> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "ray.io_rayclusters.yaml",
            "ray.io_rayjobs.yaml",
            "raygate.io_queuepolicies.yaml"
        ]
    );
    assert!(
        yaml.contains("minimum: 1\n"),
        "integral bounds are integers"
    );
}

// ---------------------------------------------------------------- defaulting

#[test]
fn realistic_rayjob_gets_kuberays_defaults() {
    let obj = defaulted("ray.io/v1", "RayJob", rayjob());
    let spec = &obj["spec"];
    assert_eq!(spec["submissionMode"], json!("K8sJobMode"));
    assert_eq!(spec["backoffLimit"], json!(0));
    assert_eq!(spec["ttlSecondsAfterFinished"], json!(0));
    let worker = &spec["rayClusterSpec"]["workerGroupSpecs"][0];
    assert_eq!(worker["replicas"], json!(0));
    assert_eq!(worker["minReplicas"], json!(0));
    assert_eq!(worker["maxReplicas"], json!(2147483647));
    assert_eq!(worker["numOfHosts"], json!(1));
    let head = &spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0];
    assert_eq!(head["ports"][0]["protocol"], json!("TCP"));
    assert_eq!(head["ports"][1]["protocol"], json!("TCP"));
    // Untouched: what the user wrote, and fields without defaults.
    assert_eq!(spec["entrypoint"], rayjob()["spec"]["entrypoint"]);
    assert!(spec.get("activeDeadlineSeconds").is_none());
    assert!(spec.get("shutdownAfterJobFinishes").is_none());
    assert!(obj.get("status").is_none(), "no status is invented");
    assert!(errors("ray.io/v1", "RayJob", &obj).is_empty());
}

#[test]
fn defaults_never_overwrite_values() {
    let mut obj = rayjob();
    obj["spec"]["submissionMode"] = json!("HTTPMode");
    obj["spec"]["backoffLimit"] = json!(3);
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = json!(2);
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["maxReplicas"] = json!(5);
    let obj = defaulted("ray.io/v1", "RayJob", obj);
    assert_eq!(obj["spec"]["submissionMode"], json!("HTTPMode"));
    assert_eq!(obj["spec"]["backoffLimit"], json!(3));
    let worker = &obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0];
    assert_eq!(worker["replicas"], json!(2));
    assert_eq!(worker["maxReplicas"], json!(5));
    assert_eq!(worker["minReplicas"], json!(0));
}

#[test]
fn defaulting_is_idempotent() {
    let once = defaulted("ray.io/v1", "RayJob", rayjob());
    let twice = defaulted("ray.io/v1", "RayJob", once.clone());
    assert_eq!(once, twice);
}

#[test]
fn nulls_are_pruned_or_defaulted_like_the_api_server() {
    let mut obj = rayjob();
    obj["spec"]["backoffLimit"] = Value::Null; // non-nullable, default: defaulted
    obj["spec"]["jobId"] = Value::Null; // non-nullable, no default: pruned
    obj["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"] = json!({"a": null, "b": "1"});
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = Value::Null;
    obj["status"] = json!({"rayClusterStatus": {"lastUpdateTime": null}, "message": null});
    let obj = defaulted("ray.io/v1", "RayJob", obj);
    assert_eq!(obj["spec"]["backoffLimit"], json!(0));
    assert!(obj["spec"].get("jobId").is_none());
    assert_eq!(
        obj["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"],
        json!({"b": "1"})
    );
    assert_eq!(
        obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"],
        json!(0)
    );
    // Nullable: kept as null.
    assert_eq!(
        obj["status"]["rayClusterStatus"],
        json!({"lastUpdateTime": null})
    );
    assert!(obj["status"].get("message").is_none());
    assert_eq!(obj["status"]["succeeded"], json!(0));
    assert_eq!(obj["status"]["failed"], json!(0));
    // Unknown fields are not the defaulter's business.
    let mut unknown = json!({"spec": {"foo": null}});
    apply_defaults("ray.io/v1", "RayJob", &mut unknown).expect("known");
    assert_eq!(unknown["spec"]["foo"], Value::Null);
}

#[test]
fn v1alpha1_defaults_are_the_frozen_ones() {
    let mut obj = rayjob();
    obj["apiVersion"] = json!("ray.io/v1alpha1");
    let obj = defaulted("ray.io/v1alpha1", "RayJob", obj);
    assert!(obj["spec"].get("submissionMode").is_none());
    assert!(obj["spec"].get("backoffLimit").is_none());
    assert_eq!(obj["spec"]["ttlSecondsAfterFinished"], json!(0));
    let worker = &obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0];
    assert_eq!(worker["replicas"], json!(0));
    assert_eq!(worker["minReplicas"], json!(0));
    assert_eq!(worker["maxReplicas"], json!(2147483647));
    assert!(worker.get("numOfHosts").is_none());
}

#[test]
fn defaulting_rejects_what_it_cannot_handle() {
    let mut obj = rayjob();
    assert_eq!(
        apply_defaults("ray.io/v2", "RayJob", &mut obj),
        Err(CrdError::UnknownKind {
            api_version: "ray.io/v2".into(),
            kind: "RayJob".into()
        })
    );
    assert!(apply_defaults("ray.io/v1", "RayService", &mut obj).is_err());
    assert_eq!(
        apply_defaults("ray.io/v1", "RayJob", &mut json!([1])),
        Err(CrdError::NotAnObject { found: "array" })
    );
    // Wrongly typed subtrees are left alone (validation reports them).
    let mut odd = json!({"spec": {"rayClusterSpec": "x", "backoffLimit": "y"}});
    apply_defaults("ray.io/v1", "RayJob", &mut odd).expect("known");
    assert_eq!(odd["spec"]["rayClusterSpec"], json!("x"));
    assert_eq!(odd["spec"]["backoffLimit"], json!("y"));
    assert!(is_served("ray.io/v1alpha1", "RayCluster"));
    assert!(!is_served("ray.io/v1beta1", "RayCluster"));
}

#[test]
fn pruning_removes_undeclared_fields_only() {
    let mut obj = rayjob();
    obj["spec"]["foo"] = json!(1);
    obj["metadata"]["whatever"] = json!(1);
    obj["spec"]["rayClusterSpec"]["networkPolicy"] = json!({"anything": {"goes": 1}});
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["metadata"] =
        json!({"creationTimestamp": null, "labels": {"a": "b"}});
    obj["spec"]["deletionStrategy"] = json!({"onSuccess": {"policy": "DeleteCluster"}});
    let mut v1alpha1 = obj.clone();
    let removed = prune_unknown_fields("ray.io/v1", "RayJob", &mut obj).expect("known");
    assert_eq!(
        removed,
        [
            "spec.foo",
            "spec.rayClusterSpec.workerGroupSpecs[0].template.metadata.creationTimestamp"
        ]
    );
    assert_eq!(obj["metadata"]["whatever"], json!(1));
    assert_eq!(
        obj["spec"]["rayClusterSpec"]["networkPolicy"],
        json!({"anything": {"goes": 1}})
    );
    // Pruning a v1 object with the v1alpha1 schema loses the v1-only fields (what strategy None
    // does; raygate's conversion webhook keeps them in an annotation instead).
    let removed = prune_unknown_fields("ray.io/v1alpha1", "RayJob", &mut v1alpha1).expect("known");
    assert!(removed.contains(&"spec.deletionStrategy".to_owned()));
    assert!(removed.contains(&"spec.rayClusterSpec.networkPolicy".to_owned()));
}

// ---------------------------------------------------------------- validation

fn set(obj: &mut Value, pointer: &str, value: Value) {
    if let Some(slot) = obj.pointer_mut(pointer) {
        *slot = value;
    } else {
        let (parent, key) = pointer.rsplit_once('/').expect("pointer has a parent");
        if let Some(Value::Object(map)) = obj.pointer_mut(parent) {
            map.insert(key.to_owned(), value);
        } else {
            panic!("no parent {parent}");
        }
    }
}

fn one_error(obj: &Value) -> (String, String, String) {
    let errs = rayjob_errors(obj);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let f = &errs[0];
    assert_eq!(f.compat, Compat::Kuberay);
    (f.rule.clone(), f.field.clone(), f.message.clone())
}

const CPU: &str =
    "/spec/rayClusterSpec/workerGroupSpecs/0/template/spec/containers/0/resources/limits/cpu";

#[test]
fn quantities_accept_integers_and_quantity_strings_only() {
    for ok in [
        json!(1),
        json!("500m"),
        json!("1.5"),
        json!(2),
        json!("1e3"),
    ] {
        let mut obj = rayjob();
        set(&mut obj, CPU, ok.clone());
        assert!(rayjob_errors(&obj).is_empty(), "{ok} should be accepted");
    }
    let mut obj = rayjob();
    set(&mut obj, CPU, json!("1 core"));
    let field =
        "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0].resources.limits.cpu";
    assert_eq!(
        one_error(&obj),
        (
            "schema-pattern".into(),
            field.into(),
            format!(
                "Invalid value: \"1 core\": {field} in body is not a Kubernetes quantity: write a number with an optional unit suffix, e.g. 2, 500m or 4Gi"
            )
        )
    );
    let mut obj = rayjob();
    set(&mut obj, CPU, json!(0.5));
    assert_eq!(
        one_error(&obj),
        (
            "schema-type".into(),
            field.into(),
            format!(
                "Invalid value: 0.5: {field} in body must be of type integer,string: \"number\"; write a whole number or a quoted string, e.g. 2 or \"500m\""
            )
        )
    );
}

#[test]
fn integer_fields_reject_strings_and_fractions() {
    let mut obj = rayjob();
    set(&mut obj, "/spec/backoffLimit", json!("x"));
    assert_eq!(
        one_error(&obj),
        (
            "schema-type".into(),
            "spec.backoffLimit".into(),
            "Invalid value: \"x\": spec.backoffLimit in body must be of type integer: \"string\"; write a whole number without quotes, e.g. 3".into()
        )
    );
    let mut obj = rayjob();
    set(&mut obj, "/spec/backoffLimit", json!(1.5));
    assert_eq!(
        one_error(&obj).2,
        "Invalid value: 1.5: spec.backoffLimit in body must be of type integer: \"number\"; write a whole number without quotes, e.g. 3"
    );
    let mut obj = rayjob();
    set(&mut obj, "/spec/backoffLimit", json!(2.0));
    assert!(rayjob_errors(&obj).is_empty(), "2.0 is an integer");
    // A number field takes integers.
    let mut obj = rayjob();
    set(&mut obj, "/spec/entrypointNumCpus", json!(1));
    assert!(rayjob_errors(&obj).is_empty());
    set(&mut obj, "/spec/entrypointNumCpus", json!(true));
    assert_eq!(
        one_error(&obj).2,
        "Invalid value: true: spec.entrypointNumCpus in body must be of type number: \"boolean\"; write a number without quotes, e.g. 1.5"
    );
}

#[test]
fn other_types_are_checked() {
    let mut obj = rayjob();
    set(&mut obj, "/spec/shutdownAfterJobFinishes", json!("true"));
    assert_eq!(one_error(&obj).0, "schema-type");
    let mut obj = rayjob();
    set(
        &mut obj,
        "/spec/rayClusterSpec/workerGroupSpecs",
        json!({"a": 1}),
    );
    assert_eq!(
        one_error(&obj).2,
        "Invalid value: {...} (a mapping): spec.rayClusterSpec.workerGroupSpecs in body must be of type array: \"object\"; write a list, e.g. [a, b] or one \"- item\" line per item"
    );
    let mut obj = rayjob();
    set(
        &mut obj,
        "/spec/rayClusterSpec/workerGroupSpecs/0",
        Value::Null,
    );
    assert_eq!(
        one_error(&obj),
        (
            "schema-type".into(),
            "spec.rayClusterSpec.workerGroupSpecs[0]".into(),
            "Invalid value: null: spec.rayClusterSpec.workerGroupSpecs[0] in body must be of type object: \"null\"; write a mapping of keys to values, e.g. {key: value}".into()
        )
    );
    let mut obj = rayjob();
    set(&mut obj, "/spec/entrypoint", json!(7));
    assert_eq!(one_error(&obj).1, "spec.entrypoint");
}

#[test]
fn required_fields_are_reported_with_their_path() {
    let mut obj = rayjob();
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"] = json!([
        obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].clone(),
        {"rayStartParams": {}, "template": {}}
    ]);
    assert_eq!(
        one_error(&obj),
        (
            "schema-required".into(),
            "spec.rayClusterSpec.workerGroupSpecs[1].groupName".into(),
            "Required value".into()
        )
    );
    let mut obj = rayjob();
    if let Some(map) = obj["spec"]["rayClusterSpec"].as_object_mut() {
        map.remove("headGroupSpec");
    }
    assert_eq!(one_error(&obj).1, "spec.rayClusterSpec.headGroupSpec");
    // minReplicas is required, but defaulting always provides it.
    let mut obj = rayjob();
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["minReplicas"] = Value::Null;
    assert!(rayjob_errors(&obj).is_empty());
    let undefaulted = rayjob();
    let raw = errors("ray.io/v1", "RayJob", &undefaulted);
    assert_eq!(raw.len(), 2, "{raw:#?}");
    assert!(raw.iter().all(|f| f.message == "Required value"));
}

#[test]
fn v1alpha1_rayjob_requires_entrypoint_and_ray_start_params() {
    let mut obj = rayjob();
    obj["apiVersion"] = json!("ray.io/v1alpha1");
    let ok = defaulted("ray.io/v1alpha1", "RayJob", obj.clone());
    assert!(errors("ray.io/v1alpha1", "RayJob", &ok).is_empty());
    if let Some(spec) = obj["spec"].as_object_mut() {
        spec.remove("entrypoint");
    }
    if let Some(head) = obj["spec"]["rayClusterSpec"]["headGroupSpec"].as_object_mut() {
        head.remove("rayStartParams");
    }
    let obj = defaulted("ray.io/v1alpha1", "RayJob", obj);
    let errs: Vec<_> = errors("ray.io/v1alpha1", "RayJob", &obj)
        .into_iter()
        .map(|f| (f.rule, f.field, f.message))
        .collect();
    assert_eq!(
        errs,
        [
            (
                "schema-required".to_owned(),
                "spec.entrypoint".to_owned(),
                "Required value".to_owned()
            ),
            (
                "schema-required".to_owned(),
                "spec.rayClusterSpec.headGroupSpec.rayStartParams".to_owned(),
                "Required value".to_owned()
            ),
        ]
    );
    // The same object is fine in v1.
    assert!(errors("ray.io/v1", "RayJob", &obj).is_empty());
}

#[test]
fn v1_only_fields_are_unknown_in_v1alpha1() {
    let mut obj = rayjob();
    obj["spec"]["backoffLimit"] = json!(2);
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] = json!(2);
    let found = validate_schema("ray.io/v1alpha1", "RayJob", &obj);
    let warnings: Vec<_> = found
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(
        warnings,
        [
            "unknown field \"spec.backoffLimit\"",
            "unknown field \"spec.rayClusterSpec.workerGroupSpecs[0].numOfHosts\""
        ]
    );
}

#[test]
fn enums_are_checked() {
    let mut obj = rayjob();
    set(
        &mut obj,
        "/spec/rayClusterSpec/autoscalerOptions",
        json!({"upscalingMode": "Fast"}),
    );
    assert_eq!(
        one_error(&obj),
        (
            "schema-enum".into(),
            "spec.rayClusterSpec.autoscalerOptions.upscalingMode".into(),
            "Unsupported value: \"Fast\": supported values: \"Default\", \"Aggressive\", \"Conservative\"".into()
        )
    );
    set(
        &mut obj,
        "/spec/rayClusterSpec/autoscalerOptions",
        json!({"upscalingMode": "Conservative"}),
    );
    assert!(rayjob_errors(&obj).is_empty());
    // No enum on submissionMode: any string is accepted by the CRD.
    set(&mut obj, "/spec/submissionMode", json!("Whatever"));
    assert!(rayjob_errors(&obj).is_empty());
}

#[test]
fn minimums_are_checked() {
    let mut obj = rayjob();
    set(&mut obj, "/spec/preRunningDeadlineSeconds", json!(0));
    assert_eq!(
        one_error(&obj),
        (
            "schema-minimum".into(),
            "spec.preRunningDeadlineSeconds".into(),
            "Invalid value: 0: spec.preRunningDeadlineSeconds in body should be greater than or equal to 1".into()
        )
    );
    set(&mut obj, "/spec/preRunningDeadlineSeconds", json!(1));
    assert!(rayjob_errors(&obj).is_empty());
    set(
        &mut obj,
        "/spec/deletionStrategy",
        json!({"deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": -1}}]}),
    );
    assert_eq!(
        one_error(&obj).2,
        "Invalid value: -1: spec.deletionStrategy.deletionRules[0].condition.ttlSeconds in body should be greater than or equal to 0"
    );
}

#[test]
fn min_items_is_checked() {
    let mut obj = rayjob();
    set(
        &mut obj,
        "/spec/deletionStrategy",
        json!({"deletionRules": []}),
    );
    assert_eq!(
        one_error(&obj),
        (
            "schema-min-items".into(),
            "spec.deletionStrategy.deletionRules".into(),
            "Invalid value: 0: spec.deletionStrategy.deletionRules in body should have at least 1 items".into()
        )
    );
    set(
        &mut obj,
        "/spec/deletionStrategy",
        json!({"deletionRules": [{"policy": "DeleteSelf", "condition": {"jobDeploymentStatus": "Failed"}}]}),
    );
    assert!(rayjob_errors(&obj).is_empty());
    // The rule's own defaults were applied.
    let d = defaulted("ray.io/v1", "RayJob", obj);
    assert_eq!(
        d["spec"]["deletionStrategy"]["deletionRules"][0]["condition"]["ttlSeconds"],
        json!(0)
    );
}

#[test]
fn cel_rules_are_enforced_offline() {
    let cases = [
        (
            json!({"onSuccess": {"policy": "DeleteCluster"}}),
            Some((
                "cel-deletion-strategy-required",
                "spec.deletionStrategy",
                "Invalid value: \"object\": deletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)",
            )),
        ),
        (
            json!({"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteNone"}}),
            None,
        ),
        (
            json!({"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteNone"},
                   "deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED"}}]}),
            Some((
                "cel-deletion-strategy-exclusive",
                "spec.deletionStrategy",
                "Invalid value: \"object\": legacy policies (onSuccess/onFailure) and deletionRules cannot be used together within the same deletionStrategy",
            )),
        ),
        (
            json!({"deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Failed"}}]}),
            Some((
                "cel-deletion-condition-exclusive",
                "spec.deletionStrategy.deletionRules[0].condition",
                "Invalid value: \"object\": JobStatus and JobDeploymentStatus cannot be used together within the same deletion condition.",
            )),
        ),
        (
            json!({"deletionRules": [{"policy": "DeleteCluster", "condition": {}}]}),
            Some((
                "cel-deletion-condition-required",
                "spec.deletionStrategy.deletionRules[0].condition",
                "Invalid value: \"object\": the deletion condition requires either the JobStatus or the JobDeploymentStatus field.",
            )),
        ),
    ];
    for (strategy, expected) in cases {
        let mut obj = rayjob();
        set(&mut obj, "/spec/deletionStrategy", strategy.clone());
        let errs = rayjob_errors(&obj);
        match expected {
            None => assert!(errs.is_empty(), "{strategy}: {errs:#?}"),
            Some((rule, field, message)) => {
                assert_eq!(errs.len(), 1, "{strategy}: {errs:#?}");
                assert_eq!(
                    (
                        errs[0].rule.as_str(),
                        errs[0].field.as_str(),
                        errs[0].message.as_str()
                    ),
                    (rule, field, message)
                );
            }
        }
    }
}

#[test]
fn managed_by_values_are_enforced_and_immutability_is_skipped() {
    for (path, field) in [
        ("/spec/managedBy", "spec.managedBy"),
        (
            "/spec/rayClusterSpec/managedBy",
            "spec.rayClusterSpec.managedBy",
        ),
    ] {
        for ok in ["ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue"] {
            let mut obj = rayjob();
            set(&mut obj, path, json!(ok));
            assert!(rayjob_errors(&obj).is_empty());
        }
        let mut obj = rayjob();
        set(&mut obj, path, json!("someone-else"));
        assert_eq!(
            one_error(&obj),
            (
                "cel-managed-by".into(),
                field.into(),
                "Invalid value: \"string\": the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'".into()
            )
        );
    }
}

#[test]
fn cel_errors_come_after_schema_errors() {
    let mut obj = rayjob();
    set(&mut obj, "/spec/managedBy", json!("x"));
    set(&mut obj, "/spec/suspend", json!("yes"));
    let rules: Vec<_> = rayjob_errors(&obj).into_iter().map(|f| f.rule).collect();
    assert_eq!(rules, ["schema-type", "cel-managed-by"]);
}

#[test]
fn unknown_fields_are_warnings_not_errors() {
    let mut obj = rayjob();
    set(&mut obj, "/spec/foo", json!({"bar": 1}));
    set(&mut obj, "/metadata/labels", json!({"a": "b"}));
    set(
        &mut obj,
        "/spec/rayClusterSpec/networkPolicy",
        json!({"anything": ["goes"]}),
    );
    set(
        &mut obj,
        "/spec/rayClusterSpec/headGroupSpec/template/metadata/creationTimestamp",
        Value::Null,
    );
    let obj = defaulted("ray.io/v1", "RayJob", obj);
    let found = validate_schema("ray.io/v1", "RayJob", &obj);
    let summary: Vec<_> = found
        .iter()
        .map(|f| {
            (
                f.severity,
                f.rule.as_str(),
                f.field.as_str(),
                f.message.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                Severity::Warning,
                "unknown-field",
                "spec.foo",
                "unknown field \"spec.foo\""
            ),
            (
                Severity::Warning,
                "unknown-field",
                "spec.rayClusterSpec.headGroupSpec.template.metadata.creationTimestamp",
                "unknown field \"spec.rayClusterSpec.headGroupSpec.template.metadata.creationTimestamp\""
            ),
        ]
    );
}

#[test]
fn nullable_last_update_time_accepts_null() {
    let obj = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "c"},
        "spec": {"headGroupSpec": {"template": {}}},
        "status": {"lastUpdateTime": null, "state": "ready"}
    });
    let obj = defaulted("ray.io/v1", "RayCluster", obj);
    assert_eq!(obj["status"]["lastUpdateTime"], Value::Null);
    assert!(validate_schema("ray.io/v1", "RayCluster", &obj).is_empty());
}

#[test]
fn v1alpha1_raycluster_workers_need_ray_start_params() {
    let obj = json!({
        "apiVersion": "ray.io/v1alpha1", "kind": "RayCluster", "metadata": {"name": "c"},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {}},
            "workerGroupSpecs": [{"groupName": "g", "template": {}}]
        }
    });
    let obj = defaulted("ray.io/v1alpha1", "RayCluster", obj);
    let errs = errors("ray.io/v1alpha1", "RayCluster", &obj);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].field, "spec.workerGroupSpecs[0].rayStartParams");
}

#[test]
fn unknown_kinds_and_non_objects_are_reported() {
    let found = validate_schema("ray.io/v1", "RayService", &json!({}));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].rule, "schema-kind");
    assert_eq!(
        found[0].message,
        "no matches for kind \"RayService\" in version \"ray.io/v1\""
    );
    let found = validate_schema("ray.io/v1", "RayJob", &json!("x"));
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].message,
        "Invalid value: \"x\": body must be of type object: \"string\"; write a mapping of keys to values, e.g. {key: value}"
    );
}

/// Arbitrary JSON, biased towards the shapes of a RayJob.
fn arb_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("spec".to_owned()),
        Just("rayClusterSpec".to_owned()),
        Just("workerGroupSpecs".to_owned()),
        Just("headGroupSpec".to_owned()),
        Just("template".to_owned()),
        Just("containers".to_owned()),
        Just("resources".to_owned()),
        Just("limits".to_owned()),
        Just("replicas".to_owned()),
        Just("deletionStrategy".to_owned()),
        Just("deletionRules".to_owned()),
        Just("managedBy".to_owned()),
        Just("metadata".to_owned()),
        Just("status".to_owned()),
        "[a-zA-Z]{0,6}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "\\PC{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_json(obj in arb_json()) {
        for (v, k) in SERVED {
            let mut copy = obj.clone();
            let _ = apply_defaults(v, k, &mut copy);
            let _ = validate_schema(v, k, &copy);
            let _ = validate_schema(v, k, &obj);
            let _ = prune_unknown_fields(v, k, &mut copy);
        }
    }

    #[test]
    fn never_panics_on_mutated_rayjobs(cpu in arb_json(), replicas in arb_json(), strategy in arb_json()) {
        let mut obj = rayjob();
        set(&mut obj, CPU, cpu);
        set(&mut obj, "/spec/rayClusterSpec/workerGroupSpecs/0/replicas", replicas);
        set(&mut obj, "/spec/deletionStrategy", strategy);
        let _ = apply_defaults("ray.io/v1", "RayJob", &mut obj);
        let _ = validate_schema("ray.io/v1", "RayJob", &obj);
    }
}

/// The one-walk defaulting against its definition: null pruning over the whole object, then
/// defaulting over the whole object.
fn assert_one_walk_defaulting_matches_two_walks(obj: &Value) -> Result<(), TestCaseError> {
    for (v, k) in SERVED {
        let root = schema::lookup(v, k).expect("served");
        let mut two_walks = obj.clone();
        structural::prune_nulls(&mut two_walks, root);
        structural::default(&mut two_walks, root);
        let mut one_walk = obj.clone();
        structural::prune_nulls_and_default(&mut one_walk, root);
        prop_assert_eq!(&one_walk, &two_walks, "{} {}", v, k);
    }
    Ok(())
}

/// A RayJob with nulls, or arbitrary JSON, where the schema declares defaults and nullability.
fn rayjob_with(values: Vec<Value>) -> Value {
    // Deeper paths first: a later value may replace their parent with a non-object.
    const PATHS: [&str; 10] = [
        "/spec/submissionMode",
        "/spec/backoffLimit",
        "/spec/rayClusterSpec/workerGroupSpecs/0/numOfHosts",
        "/spec/rayClusterSpec/workerGroupSpecs/0/minReplicas",
        "/spec/rayClusterSpec/headGroupSpec/template/spec/containers/0/ports/0/protocol",
        "/spec/rayClusterSpec/headGroupSpec/template/spec/containers/0/ports/1",
        "/spec/rayClusterSpec/headGroupSpec/template/spec/volumes",
        "/spec/rayClusterSpec/headGroupSpec/rayStartParams",
        "/spec/rayClusterSpec/workerGroupSpecs/0/template",
        "/status",
    ];
    let mut obj = rayjob();
    for (path, value) in PATHS.iter().zip(values) {
        set(&mut obj, path, value);
    }
    obj
}

proptest! {
    #[test]
    fn one_walk_defaulting_matches_two_walks_on_arbitrary_json(obj in arb_json()) {
        assert_one_walk_defaulting_matches_two_walks(&obj)?;
    }

    #[test]
    fn one_walk_defaulting_matches_two_walks_on_mutated_rayjobs(
        values in prop::collection::vec(prop_oneof![
            3 => Just(Value::Null),
            1 => Just(json!([null, {"containerPort": 1, "protocol": null}, {"name": null}])),
            1 => Just(json!({"name": null, "emptyDir": null, "hostPath": {"path": "/x", "type": null}})),
            2 => arb_json(),
        ], 10),
    ) {
        assert_one_walk_defaulting_matches_two_walks(&rayjob_with(values))?;
    }
}

/// Defaulting and validation in one walk against their definition: [`apply_defaults`], then
/// [`validate_schema`] on the defaulted object; same object, same findings in the same order.
fn assert_fused_walk_matches_two_calls(
    api_version: &str,
    kind: &str,
    obj: &Value,
) -> Result<(), TestCaseError> {
    let mut two_calls = obj.clone();
    let mut expected = Vec::new();
    if let Err(e) = apply_defaults(api_version, kind, &mut two_calls) {
        expected.push(Finding::error(
            "schema-defaults",
            "",
            e.to_string(),
            Compat::Kuberay,
        ));
    }
    expected.extend(validate_schema(api_version, kind, &two_calls));
    let mut one_walk = obj.clone();
    let found = default_and_validate(api_version, kind, &mut one_walk);
    prop_assert_eq!(&one_walk, &two_calls, "{} {}", api_version, kind);
    prop_assert_eq!(found, expected, "{} {}", api_version, kind);
    Ok(())
}

/// Every node of the four served schemas, depth first, once per place it is declared.
fn served_schema_nodes() -> Vec<&'static Node> {
    let mut nodes = Vec::new();
    for (v, k) in SERVED {
        schema::lookup(v, k).expect("served").walk(&mut nodes);
    }
    nodes
}

const SERVED: [(&str, &str); 4] = [
    ("ray.io/v1", "RayJob"),
    ("ray.io/v1", "RayCluster"),
    ("ray.io/v1alpha1", "RayJob"),
    ("ray.io/v1alpha1", "RayCluster"),
];

/// A schema with what the ray.io CRDs have few or none of: defaults under
/// `additionalProperties` and array items, nullable members, an enum over objects, CEL rules,
/// required members with defaults, and defaults the schema rejects (`retries` below its
/// minimum, an item default with an unknown field), so that validating filled-in defaults is
/// pinned too.
fn synthetic_with_defaults() -> Node {
    let props: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps =
        serde_json::from_value(json!({
            "type": "object",
            "required": ["spec"],
            "properties": {
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "required": ["mode"],
                    "properties": {
                        "mode": {"type": "string", "default": "a", "enum": ["a", "b"]},
                        "retries": {"type": "integer", "minimum": 5, "default": 1},
                        "limits": {"type": "object", "additionalProperties":
                            {"type": "integer", "default": 1, "minimum": 0}},
                        "list": {"type": "array", "maxItems": 3, "items":
                            {"type": "object", "default": {"x": null, "z": 1},
                             "properties": {"x": {"type": "integer", "default": 7},
                                            "y": {"type": "string", "nullable": true}}}},
                        "pair": {"type": "object", "enum": [{"a": 1}, {"a": 2}],
                                 "properties": {"a": {"type": "integer", "default": 1}}},
                        "deletionStrategy": {"type": "object",
                            "x-kubernetes-validations": [{"rule":
                                "(has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules)"}],
                            "properties": {"onSuccess": {"type": "object", "default": {}},
                                           "onFailure": {"type": "object"},
                                           "deletionRules": {"type": "array", "nullable": true}}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                },
                "status": {"type": "object", "nullable": true,
                           "properties": {"n": {"type": "integer", "default": 0}}}
            }
        }))
        .expect("valid schema");
    Node::compile(&props)
}

proptest! {
    #[test]
    fn fused_walk_matches_two_calls_on_arbitrary_json(obj in arb_json()) {
        for (v, k) in SERVED {
            assert_fused_walk_matches_two_calls(v, k, &obj)?;
        }
        assert_fused_walk_matches_two_calls("ray.io/v2", "RayJob", &obj)?;
    }

    #[test]
    fn fused_walk_matches_two_calls_on_mutated_rayjobs(
        values in prop::collection::vec(prop_oneof![
            3 => Just(Value::Null),
            1 => Just(json!([null, {"containerPort": 1, "protocol": null}, {"name": null}])),
            1 => Just(json!({"name": null, "emptyDir": null, "hostPath": {"path": "/x", "type": null}})),
            2 => arb_json(),
        ], 10),
    ) {
        let obj = rayjob_with(values);
        for (v, k) in SERVED {
            assert_fused_walk_matches_two_calls(v, k, &obj)?;
        }
    }

    #[test]
    fn fused_walk_matches_two_walks_on_a_schema_with_defaults_everywhere(
        spec in prop::collection::vec((prop_oneof![
            Just("mode".to_owned()),
            Just("limits".to_owned()),
            Just("list".to_owned()),
            Just("pair".to_owned()),
            Just("deletionStrategy".to_owned()),
            Just("free".to_owned()),
            "[a-z]{1,3}",
        ], prop_oneof![
            2 => Just(Value::Null),
            1 => Just(json!({"cpu": null, "gpu": 2, "bad": "x"})),
            1 => Just(json!([null, {"y": null}, {"x": null, "y": "s"}, 4])),
            1 => Just(json!({"a": null})),
            1 => Just(json!({"onSuccess": null, "deletionRules": null})),
            3 => arb_json(),
        ]), 0..7),
        status in arb_json(),
    ) {
        let root = synthetic_with_defaults();
        let spec: serde_json::Map<String, Value> = spec.into_iter().collect();
        let obj = json!({"metadata": {"name": null}, "spec": spec, "status": status, "extra": 1});
        let mut two_walks = obj.clone();
        structural::prune_nulls_and_default(&mut two_walks, &root);
        let expected = validate::validate_node(&two_walks, &root);
        let mut one_walk = obj;
        let found = validate::default_and_validate_node(&mut one_walk, &root);
        prop_assert_eq!(&one_walk, &two_walks);
        prop_assert_eq!(found, expected);
    }
}

#[test]
fn the_fused_walk_defaults_and_validates_a_sample() {
    let mut obj = rayjob();
    obj["spec"]["backoffLimit"] = json!("three");
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] = Value::Null;
    let mut expected_obj = obj.clone();
    apply_defaults("ray.io/v1", "RayJob", &mut expected_obj).expect("served");
    let expected = validate_schema("ray.io/v1", "RayJob", &expected_obj);
    let found = default_and_validate("ray.io/v1", "RayJob", &mut obj);
    assert_eq!(obj, expected_obj);
    assert_eq!(obj["spec"]["submissionMode"], "K8sJobMode");
    assert_eq!(
        obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"],
        1
    );
    assert_eq!(found, expected);
    assert!(
        found
            .iter()
            .any(|f| f.field == "spec.backoffLimit" && f.is_error())
    );
}

// ------------------------------------------------ constraints the ray.io CRDs do not use (yet)

fn synthetic() -> Node {
    let props: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps =
        serde_json::from_value(json!({
            "type": "object",
            "properties": {
                "small": {"type": "integer", "maximum": 10},
                "below": {"type": "number", "maximum": 1.5, "exclusiveMaximum": true},
                "above": {"type": "integer", "minimum": 0, "exclusiveMinimum": true},
                "name": {"type": "string", "minLength": 2, "maxLength": 4},
                "list": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "other": {"type": "string", "pattern": "^[a-z]+$"},
                "mode": {"type": "integer", "enum": [1, 2]},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "any": {"x-kubernetes-preserve-unknown-fields": true},
                "maybe": {"type": "string", "nullable": true}
            }
        }))
        .expect("valid schema");
    Node::compile(&props)
}

fn synthetic_messages(obj: Value) -> Vec<(String, String, String)> {
    validate::validate_node(&obj, &synthetic())
        .into_iter()
        .map(|f| (f.rule, f.field, f.message))
        .collect()
}

fn triple(rule: &str, field: &str, message: &str) -> (String, String, String) {
    (rule.to_owned(), field.to_owned(), message.to_owned())
}

#[test]
fn maximum_and_exclusive_bounds() {
    assert!(synthetic_messages(json!({"small": 10, "below": 1.4, "above": 1})).is_empty());
    assert_eq!(
        synthetic_messages(json!({"small": 11, "below": 1.5, "above": 0})),
        [
            triple(
                "schema-minimum",
                "above",
                "Invalid value: 0: above in body should be greater than 0"
            ),
            triple(
                "schema-maximum",
                "below",
                "Invalid value: 1.5: below in body should be less than 1.5"
            ),
            triple(
                "schema-maximum",
                "small",
                "Invalid value: 11: small in body should be less than or equal to 10"
            ),
        ]
    );
}

#[test]
fn string_lengths() {
    assert!(synthetic_messages(json!({"name": "ab"})).is_empty());
    assert!(synthetic_messages(json!({"name": "abcd"})).is_empty());
    assert_eq!(
        synthetic_messages(json!({"name": "a"})),
        [triple(
            "schema-min-length",
            "name",
            "Invalid value: \"a\": name in body should be at least 2 chars long"
        )]
    );
    assert_eq!(
        synthetic_messages(json!({"name": "abcde"})),
        [triple(
            "schema-max-length",
            "name",
            "Too long: may not be more than 4 bytes"
        )]
    );
}

#[test]
fn max_items() {
    assert!(synthetic_messages(json!({"list": ["a", "b"]})).is_empty());
    assert_eq!(
        synthetic_messages(json!({"list": ["a", "b", "c"]})),
        [triple(
            "schema-max-items",
            "list",
            "Too many: 3: must have at most 2 items"
        )]
    );
    assert_eq!(
        synthetic_messages(json!({"list": ["a", 1]})),
        [triple(
            "schema-type",
            "list[1]",
            "Invalid value: 1: list[1] in body must be of type string: \"integer\"; write text, quoted if it looks like a number or a boolean, e.g. \"2.9\""
        )]
    );
}

#[test]
fn unknown_patterns_are_not_guessed_and_integer_enums_print_bare() {
    assert!(synthetic_messages(json!({"other": "ABC"})).is_empty());
    assert_eq!(
        synthetic_messages(json!({"mode": 3})),
        [triple(
            "schema-enum",
            "mode",
            "Unsupported value: 3: supported values: 1, 2"
        )]
    );
    assert!(synthetic_messages(json!({"mode": 2})).is_empty());
}

#[test]
fn preserve_unknown_fields_and_nullable() {
    assert!(
        synthetic_messages(
            json!({"free": {"x": [1, {"y": null}]}, "any": [1, "a"], "maybe": null})
        )
        .is_empty()
    );
    assert_eq!(
        synthetic_messages(json!({"free": 1})),
        [triple(
            "schema-type",
            "free",
            "Invalid value: 1: free in body must be of type object: \"integer\"; write a mapping of keys to values, e.g. {key: value}"
        )]
    );
    assert_eq!(
        synthetic_messages(json!({"zzz": 1})),
        [triple("unknown-field", "zzz", "unknown field \"zzz\"")]
    );
}

#[test]
fn conditions_carry_the_metav1_markers() {
    let schema = schema_json("rayclusters.ray.io", "v1");
    let condition = at(&schema, &["status", "conditions", "[]"]);
    assert_eq!(at(condition, &["message"])["maxLength"], json!(32768));
    assert_eq!(
        at(condition, &["reason"])["pattern"],
        json!(CONDITION_REASON_PATTERN)
    );
    assert_eq!(
        at(condition, &["type"])["pattern"],
        json!(CONDITION_TYPE_PATTERN)
    );
    assert_eq!(
        at(condition, &["status"])["enum"],
        json!(["True", "False", "Unknown"])
    );
    let cluster = |conditions: Value| {
        json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "c"},
            "spec": {"headGroupSpec": {"template": {}}},
            "status": {"conditions": conditions}
        })
    };
    let good = cluster(json!([{
        "type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]));
    assert!(validate_schema("ray.io/v1", "RayCluster", &good).is_empty());
    let bad = cluster(json!([{
        "type": "Head Pod", "status": "Maybe", "reason": "",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]));
    let rules: Vec<_> = validate_schema("ray.io/v1", "RayCluster", &bad)
        .into_iter()
        .map(|f| (f.rule, f.field))
        .collect();
    let at0 = |f: &str| format!("status.conditions[0].{f}");
    assert_eq!(
        rules,
        [
            ("schema-min-length".to_owned(), at0("reason")),
            ("schema-pattern".to_owned(), at0("reason")),
            ("schema-enum".to_owned(), at0("status")),
            ("schema-pattern".to_owned(), at0("type")),
        ]
    );
}

#[test]
fn schemas_read_from_the_yaml_equal_those_compiled_from_the_typed_crds() {
    // The webhook reads the embedded CRD YAML straight into compiled nodes; the typed CRDs
    // (k8s-openapi's JSONSchemaProps, what the API server would decode) must give the same.
    let mut compared = 0;
    for crd in ray_crds() {
        for version in crd.spec.versions.iter().filter(|v| v.served) {
            let api_version = format!("{}/{}", crd.spec.group, version.name);
            let typed = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("every served version has a schema");
            let read = schema::lookup(&api_version, &crd.spec.names.kind).expect("served");
            let mut nodes = Vec::new();
            read.walk(&mut nodes);
            assert!(nodes.len() > 1_000, "{api_version} {}", crd.spec.names.kind);
            assert!(
                *read == Node::compile(typed),
                "{api_version} {}: the schema read from the YAML differs",
                crd.spec.names.kind
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 4);
}

#[test]
fn every_keyword_the_crds_declare_is_read_into_the_compiled_schema() {
    // Both sides of the test above go through the same reading, so a misspelt keyword there
    // would pass it: each keyword the committed RayJob CRD uses must set something.
    let mut nodes = Vec::new();
    schema::lookup("ray.io/v1", "RayJob")
        .expect("served")
        .walk(&mut nodes);
    let yaml = include_str!("../../../manifests/chart/files/crds/ray.io_rayjobs.yaml");
    type IsRead = fn(&Node) -> bool;
    let checks: [(&str, IsRead); 13] = [
        ("minItems", |n| n.min_items.is_some()),
        ("minLength", |n| n.min_length.is_some()),
        ("maxLength", |n| n.max_length.is_some()),
        ("minimum", |n| n.minimum.is_some()),
        ("x-kubernetes-int-or-string", |n| {
            n.ty.name() == "integer,string"
        }),
        ("x-kubernetes-preserve-unknown-fields", |n| {
            n.preserve_unknown
        }),
        ("nullable", |n| n.nullable),
        ("enum", |n| !n.enum_values.is_empty()),
        ("pattern", |n| n.pattern.is_some()),
        ("x-kubernetes-validations", |n| !n.rules.is_empty()),
        ("additionalProperties", |n| n.additional.is_some()),
        ("required", |n| !n.required.is_empty()),
        ("default", |n| n.default.is_some()),
    ];
    for (keyword, is_read) in checks {
        assert!(
            yaml.contains(&format!(" {keyword}:")),
            "the RayJob CRD no longer declares {keyword}"
        );
        assert!(
            nodes.iter().any(|n| is_read(n)),
            "{keyword} is declared but no compiled node has it"
        );
    }
}

/// The node at `path` below `root`: property names, `[]` for array items.
fn schema_at<'a>(root: &'a Node, path: &[&str]) -> &'a Node {
    path.iter().fold(root, |node, step| match *step {
        "[]" => node.items.as_deref().expect("items"),
        name => node.property(name).unwrap_or_else(|| panic!("{name}")),
    })
}

/// Equal schema subtrees are compiled once: every Pod template of both kinds in both served
/// versions is one compiled node, and the four schemas hold over twenty times fewer distinct
/// nodes than they declare (14,176 declared, 221 distinct when this was written).
#[test]
fn equal_schema_subtrees_are_compiled_once() {
    let head = ["spec", "headGroupSpec", "template"];
    let worker = ["spec", "workerGroupSpecs", "[]", "template"];
    let templates = [
        ("ray.io/v1", "RayCluster", head.to_vec()),
        ("ray.io/v1", "RayCluster", worker.to_vec()),
        ("ray.io/v1alpha1", "RayCluster", head.to_vec()),
        (
            "ray.io/v1",
            "RayJob",
            [&["spec", "rayClusterSpec"][..], &head[1..]].concat(),
        ),
        (
            "ray.io/v1",
            "RayJob",
            [&["spec", "rayClusterSpec"][..], &worker[1..]].concat(),
        ),
        ("ray.io/v1", "RayJob", vec!["spec", "submitterPodTemplate"]),
        (
            "ray.io/v1alpha1",
            "RayJob",
            vec!["spec", "submitterPodTemplate"],
        ),
    ];
    let first = schema_at(
        schema::lookup("ray.io/v1", "RayCluster").expect("served"),
        &head,
    );
    assert!(first.property("spec").is_some(), "a Pod template schema");
    for (v, k, path) in &templates {
        let template = schema_at(schema::lookup(v, k).expect("served"), path);
        assert!(std::ptr::eq(template, first), "{v} {k} {path:?} is a copy");
    }

    let declared = served_schema_nodes();
    let distinct: std::collections::HashSet<*const Node> =
        declared.iter().map(|n| *n as *const Node).collect();
    assert!(
        distinct.len() * 20 < declared.len(),
        "{} declared schema nodes, {} distinct",
        declared.len(),
        distinct.len()
    );
}
