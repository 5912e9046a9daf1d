//! Table-driven tests of every rule: a failing and a passing case for each condition, gates on
//! and off, both reconciler kinds, field paths, messages and evaluation order.
//!
//! Test objects are a valid base manifest plus a YAML patch. The patch is merged recursively;
//! `null` deletes a key; lists are merged element by element, and elements past the end of the
//! base list are merged onto a copy of the base list's first element (so `[{}, {}]` under
//! `workerGroupSpecs` means "two copies of the base group"). An empty list replaces the list.

use serde_json::Value;

use super::{ReconcilerKind, ValidationContext, validate_ray_cluster, validate_ray_job};
use crate::finding::{Compat, Finding, Severity};
use crate::ray::v1::{RayCluster, RayJob};

const CLUSTER_SPEC: &str = r#"
rayVersion: "2.52.0"
headGroupSpec:
  rayStartParams: {}
  template:
    spec:
      containers:
      - name: ray-head
        image: rayproject/ray:2.52.0
        resources:
          requests: {cpu: "1", memory: 2Gi}
workerGroupSpecs:
- groupName: small
  replicas: 1
  minReplicas: 0
  maxReplicas: 4
  numOfHosts: 1
  rayStartParams: {}
  template:
    spec:
      containers:
      - name: ray-worker
        image: rayproject/ray:2.52.0
        resources:
          requests: {cpu: "1", memory: 2Gi}
"#;

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).expect("test YAML parses")
}

fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (k, v) in patch {
                if v.is_null() {
                    base.remove(&k);
                } else if let Some(existing) = base.get_mut(&k) {
                    merge(existing, v);
                } else {
                    base.insert(k, v);
                }
            }
        }
        (Value::Array(base), Value::Array(patch)) if !patch.is_empty() => {
            let template = base.first().cloned();
            for (i, v) in patch.into_iter().enumerate() {
                if i < base.len() {
                    merge(&mut base[i], v);
                } else if let Some(mut t) = template.clone() {
                    merge(&mut t, v);
                    base.push(t);
                } else {
                    base.push(v);
                }
            }
        }
        (base, patch) => *base = patch,
    }
}

fn base_cluster() -> Value {
    let mut v =
        yaml("apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: demo, namespace: ml}\n");
    v["spec"] = yaml(CLUSTER_SPEC);
    v
}

fn base_job() -> Value {
    let mut v = yaml(
        "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: demo-job, namespace: ml}\nspec:\n  entrypoint: python train.py\n  submissionMode: K8sJobMode\n  backoffLimit: 0\n  ttlSecondsAfterFinished: 0\n",
    );
    v["spec"]["rayClusterSpec"] = yaml(CLUSTER_SPEC);
    v
}

fn cluster(patch: &str) -> RayCluster {
    let mut v = base_cluster();
    if !patch.trim().is_empty() {
        merge(&mut v, yaml(patch));
    }
    serde_json::from_value(v).expect("test RayCluster deserialises")
}

fn job(patch: &str) -> RayJob {
    let mut v = base_job();
    if !patch.trim().is_empty() {
        merge(&mut v, yaml(patch));
    }
    serde_json::from_value(v).expect("test RayJob deserialises")
}

fn ctx(gates: &str, reconciler: ReconcilerKind) -> ValidationContext {
    ValidationContext {
        gates: gates.parse().expect("test gates parse"),
        reconciler,
    }
}

/// One row: the patch, the gates, the reconciler, the rule, and whether it must fire.
struct Case {
    patch: &'static str,
    gates: &'static str,
    reconciler: ReconcilerKind,
    rule: &'static str,
    fires: bool,
}

const K: ReconcilerKind = ReconcilerKind::Kuberay;
const R: ReconcilerKind = ReconcilerKind::Raygate;

const fn fire(rule: &'static str, patch: &'static str) -> Case {
    Case {
        patch,
        gates: "",
        reconciler: K,
        rule,
        fires: true,
    }
}

const fn pass(rule: &'static str, patch: &'static str) -> Case {
    Case {
        patch,
        gates: "",
        reconciler: K,
        rule,
        fires: false,
    }
}

const fn gated(mut case: Case, gates: &'static str) -> Case {
    case.gates = gates;
    case
}

const fn raygate(mut case: Case) -> Case {
    case.reconciler = R;
    case
}

fn check(kind: &str, cases: &[Case], run: impl Fn(&Case) -> Vec<Finding>) {
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let findings = run(case);
        let fired = findings.iter().any(|f| f.rule == case.rule);
        if fired != case.fires {
            failures.push(format!(
                "{kind} case #{i} ({}, expected fires={}):\n  patch: {}\n  findings: {:#?}",
                case.rule, case.fires, case.patch, findings
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn rules(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.rule.as_str()).collect()
}

fn find<'f>(findings: &'f [Finding], rule: &str) -> &'f Finding {
    findings
        .iter()
        .find(|f| f.rule == rule)
        .unwrap_or_else(|| panic!("{rule} not in {findings:#?}"))
}

#[test]
fn base_objects_are_clean() {
    assert_eq!(
        validate_ray_cluster(&cluster(""), &ValidationContext::default()),
        vec![]
    );
    assert_eq!(
        validate_ray_job(&job(""), &ValidationContext::default()),
        vec![]
    );
    assert_eq!(
        validate_ray_job(&job(""), &ctx("", R)),
        vec![],
        "the base job uses no feature raygate's reconciler lacks"
    );
}

#[test]
fn raycluster_rules() {
    let cases = [
        // ValidateRayClusterMetadata
        fire(
            "raycluster-name-too-long",
            "metadata: {name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}",
        ),
        pass(
            "raycluster-name-too-long",
            "metadata: {name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}",
        ),
        fire("raycluster-name-not-dns1035", "metadata: {name: Demo}"),
        fire("raycluster-name-not-dns1035", "metadata: {name: 1demo}"),
        fire("raycluster-name-not-dns1035", "metadata: {name: null}"),
        pass(
            "raycluster-name-not-dns1035",
            "metadata: {name: null, generateName: demo-}",
        ),
        pass("raycluster-name-not-dns1035", "metadata: {name: demo-2}"),
        // ValidateRayClusterSpec: head
        fire(
            "head-group-no-containers",
            "spec: {headGroupSpec: {template: {spec: {containers: []}}}}",
        ),
        fire(
            "head-group-no-containers",
            "spec: {headGroupSpec: {template: {spec: null}}}",
        ),
        fire(
            "group-resources-set-twice",
            "spec: {headGroupSpec: {rayStartParams: {num-cpus: '1'}, resources: {CPU: '1'}}}",
        ),
        pass(
            "group-resources-set-twice",
            "spec: {headGroupSpec: {rayStartParams: {num-cpus: '1'}}}",
        ),
        pass(
            "group-resources-set-twice",
            "spec: {headGroupSpec: {rayStartParams: {num-cpus: ''}, resources: {CPU: '1'}}}",
        ),
        fire(
            "group-resources-set-twice",
            "spec: {workerGroupSpecs: [{rayStartParams: {memory: '1'}, resources: {x: '1'}}]}",
        ),
        fire(
            "group-labels-in-ray-start-params",
            "spec: {headGroupSpec: {rayStartParams: {labels: 'a=b'}}}",
        ),
        pass(
            "group-labels-in-ray-start-params",
            "spec: {headGroupSpec: {labels: {a: b}}}",
        ),
        fire(
            "group-label-key-invalid",
            "spec: {headGroupSpec: {labels: {'bad key': v}}}",
        ),
        pass(
            "group-label-key-invalid",
            "spec: {headGroupSpec: {labels: {ray.io/zone: a}}}",
        ),
        fire(
            "group-label-value-invalid",
            "spec: {workerGroupSpecs: [{labels: {k: 'bad value'}}]}",
        ),
        pass(
            "group-label-value-invalid",
            "spec: {workerGroupSpecs: [{labels: {k: ''}}]}",
        ),
        fire(
            "ray-container-no-resources",
            "spec: {headGroupSpec: {template: {spec: {containers: [{resources: null}]}}}}",
        ),
        fire(
            "ray-container-no-resources",
            "spec: {workerGroupSpecs: [{template: {spec: {containers: [{resources: {requests: {cpu: '1', memory: null}}}]}}}]}",
        ),
        pass(
            "ray-container-no-resources",
            "spec: {workerGroupSpecs: [{template: {spec: {containers: [{resources: {requests: {memory: null}, limits: {memory: 1Gi}}}]}}}]}",
        ),
        // ValidateRayClusterSpec: worker groups
        fire(
            "worker-group-no-containers",
            "spec: {workerGroupSpecs: [{template: {spec: {containers: []}}}]}",
        ),
        fire(
            "worker-group-duplicate-name",
            "spec: {workerGroupSpecs: [{}, {}]}",
        ),
        pass(
            "worker-group-duplicate-name",
            "spec: {workerGroupSpecs: [{}, {groupName: big}]}",
        ),
        fire(
            "worker-group-name-invalid",
            "spec: {workerGroupSpecs: [{groupName: 'has space'}]}",
        ),
        pass(
            "worker-group-name-invalid",
            "spec: {workerGroupSpecs: [{groupName: GPU_workers.v2}]}",
        ),
        fire(
            "worker-group-min-max-unset",
            "spec: {workerGroupSpecs: [{minReplicas: null}]}",
        ),
        fire(
            "worker-group-min-max-unset",
            "spec: {workerGroupSpecs: [{maxReplicas: null}]}",
        ),
        pass(
            "worker-group-min-max-unset",
            "spec: {enableInTreeAutoscaling: true, workerGroupSpecs: [{minReplicas: null}]}",
        ),
        fire(
            "worker-group-negative-min-replicas",
            "spec: {workerGroupSpecs: [{minReplicas: -1}]}",
        ),
        pass(
            "worker-group-negative-min-replicas",
            "spec: {workerGroupSpecs: [{minReplicas: 0}]}",
        ),
        fire(
            "worker-group-negative-max-replicas",
            "spec: {workerGroupSpecs: [{maxReplicas: -1}]}",
        ),
        fire(
            "worker-group-min-greater-than-max",
            "spec: {workerGroupSpecs: [{minReplicas: 5, maxReplicas: 2, replicas: 3}]}",
        ),
        pass(
            "worker-group-min-greater-than-max",
            "spec: {workerGroupSpecs: [{minReplicas: 2, maxReplicas: 2, replicas: 2}]}",
        ),
        fire(
            "worker-group-replicas-out-of-range",
            "spec: {workerGroupSpecs: [{replicas: 9}]}",
        ),
        fire(
            "worker-group-replicas-out-of-range",
            "spec: {workerGroupSpecs: [{minReplicas: 2, replicas: 1}]}",
        ),
        pass(
            "worker-group-replicas-out-of-range",
            "spec: {workerGroupSpecs: [{replicas: 4}]}",
        ),
        pass(
            "worker-group-replicas-out-of-range",
            "spec: {workerGroupSpecs: [{replicas: null}]}",
        ),
        fire(
            "worker-group-num-of-hosts",
            "spec: {workerGroupSpecs: [{numOfHosts: 0}]}",
        ),
        pass(
            "worker-group-num-of-hosts",
            "spec: {workerGroupSpecs: [{numOfHosts: 4}]}",
        ),
        pass(
            "worker-group-num-of-hosts",
            "spec: {workerGroupSpecs: [{numOfHosts: null}]}",
        ),
        fire(
            "worker-group-idle-timeout-negative",
            "spec: {workerGroupSpecs: [{idleTimeoutSeconds: -1}]}",
        ),
        fire(
            "worker-group-idle-timeout-requires-autoscaler-v2",
            "spec: {workerGroupSpecs: [{idleTimeoutSeconds: 60}]}",
        ),
        pass(
            "worker-group-idle-timeout-requires-autoscaler-v2",
            "spec: {autoscalerOptions: {version: v2}, workerGroupSpecs: [{idleTimeoutSeconds: 60}]}",
        ),
        pass(
            "worker-group-idle-timeout-requires-autoscaler-v2",
            "spec: {headGroupSpec: {template: {spec: {containers: [{env: [{name: RAY_enable_autoscaler_v2, value: '1'}]}]}}}, workerGroupSpecs: [{idleTimeoutSeconds: 60}]}",
        ),
        fire(
            "worker-group-priority-ray-version-missing",
            "spec: {rayVersion: null, workerGroupSpecs: [{priority: 1}]}",
        ),
        fire(
            "worker-group-priority-ray-version-invalid",
            "spec: {rayVersion: latest, workerGroupSpecs: [{priority: 1}]}",
        ),
        fire(
            "worker-group-priority-ray-version-too-old",
            "spec: {workerGroupSpecs: [{priority: 1}]}",
        ),
        pass(
            "worker-group-priority-ray-version-too-old",
            "spec: {rayVersion: '2.56.0', workerGroupSpecs: [{priority: 1}]}",
        ),
        pass(
            "worker-group-priority-ray-version-too-old",
            "spec: {workerGroupSpecs: [{priority: 0}]}",
        ),
        fire(
            "worker-group-priority-requires-autoscaler-v2",
            "spec: {rayVersion: '2.56.0', workerGroupSpecs: [{priority: 1}]}",
        ),
        pass(
            "worker-group-priority-requires-autoscaler-v2",
            "spec: {rayVersion: '2.56.0', autoscalerOptions: {version: v2}, workerGroupSpecs: [{priority: 1}]}",
        ),
        // ValidateRayClusterSpec: GCS fault tolerance
        fire(
            "gcs-ft-annotation-and-options",
            "metadata: {annotations: {ray.io/ft-enabled: 'false'}}\nspec: {gcsFaultToleranceOptions: {redisAddress: 'redis:6379'}}",
        ),
        pass(
            "gcs-ft-annotation-and-options",
            "spec: {gcsFaultToleranceOptions: {redisAddress: 'redis:6379'}}",
        ),
        fire(
            "redis-address-without-gcs-ft",
            "spec: {headGroupSpec: {template: {spec: {containers: [{env: [{name: RAY_REDIS_ADDRESS, value: 'redis:6379'}]}]}}}}",
        ),
        pass(
            "redis-address-without-gcs-ft",
            "metadata: {annotations: {ray.io/ft-enabled: 'TRUE'}}\nspec: {headGroupSpec: {template: {spec: {containers: [{env: [{name: RAY_REDIS_ADDRESS, value: 'redis:6379'}]}]}}}}",
        ),
        fire(
            "gcs-ft-redis-password-in-ray-start-params",
            "spec: {gcsFaultToleranceOptions: {}, headGroupSpec: {rayStartParams: {redis-password: x}}}",
        ),
        pass(
            "gcs-ft-redis-password-in-ray-start-params",
            "spec: {headGroupSpec: {rayStartParams: {redis-password: x}}}",
        ),
        fire(
            "gcs-ft-redis-password-env",
            "spec: {gcsFaultToleranceOptions: {}, headGroupSpec: {template: {spec: {containers: [{env: [{name: REDIS_PASSWORD, value: x}]}]}}}}",
        ),
        fire(
            "gcs-ft-redis-address-env",
            "spec: {gcsFaultToleranceOptions: {}, headGroupSpec: {template: {spec: {containers: [{env: [{name: RAY_REDIS_ADDRESS, value: x}]}]}}}}",
        ),
        fire(
            "gcs-ft-external-storage-namespace-annotation",
            "metadata: {annotations: {ray.io/external-storage-namespace: ns}}\nspec: {gcsFaultToleranceOptions: {}}",
        ),
        pass(
            "gcs-ft-external-storage-namespace-annotation",
            "metadata: {annotations: {ray.io/external-storage-namespace: ns}}",
        ),
        fire(
            "gcs-ft-rocksdb-feature-gate",
            "spec: {gcsFaultToleranceOptions: {backend: rocksdb}}",
        ),
        gated(
            pass(
                "gcs-ft-rocksdb-feature-gate",
                "spec: {gcsFaultToleranceOptions: {backend: rocksdb}}",
            ),
            "GCSFaultToleranceEmbeddedStorage=true",
        ),
        fire(
            "gcs-ft-rocksdb-redis-field",
            "spec: {gcsFaultToleranceOptions: {backend: rocksdb, redisAddress: 'r:1'}}",
        ),
        fire(
            "gcs-ft-rocksdb-redis-field",
            "spec: {gcsFaultToleranceOptions: {backend: rocksdb, redisPassword: {value: x}}}",
        ),
        pass(
            "gcs-ft-rocksdb-redis-field",
            "spec: {gcsFaultToleranceOptions: {backend: redis, redisAddress: 'r:1'}}",
        ),
        fire(
            "gcs-ft-rocksdb-claim-name-exclusive",
            "spec: {gcsFaultToleranceOptions: {backend: rocksdb, storage: {claimName: c, size: 1Gi}}}",
        ),
        pass(
            "gcs-ft-rocksdb-claim-name-exclusive",
            "spec: {gcsFaultToleranceOptions: {backend: rocksdb, storage: {claimName: c}}}",
        ),
        fire(
            "gcs-ft-rocksdb-storage-env",
            "spec: {gcsFaultToleranceOptions: {backend: rocksdb}, headGroupSpec: {template: {spec: {containers: [{env: [{name: RAY_gcs_storage_path, value: x}]}]}}}}",
        ),
        fire(
            "gcs-ft-rocksdb-storage-mount",
            "spec: {gcsFaultToleranceOptions: {backend: rocksdb}, headGroupSpec: {template: {spec: {containers: [{volumeMounts: [{name: data, mountPath: /data/gcs}]}]}}}}",
        ),
        pass(
            "gcs-ft-rocksdb-storage-mount",
            "spec: {gcsFaultToleranceOptions: {backend: rocksdb}, headGroupSpec: {template: {spec: {containers: [{volumeMounts: [{name: data, mountPath: /data}]}]}}}}",
        ),
        fire(
            "gcs-ft-rocksdb-storage-volume",
            "spec: {gcsFaultToleranceOptions: {backend: rocksdb}, headGroupSpec: {template: {spec: {volumes: [{name: gcs-storage, emptyDir: {}}]}}}}",
        ),
        fire(
            "gcs-ft-redis-storage",
            "spec: {gcsFaultToleranceOptions: {storage: {size: 1Gi}}}",
        ),
        pass(
            "gcs-ft-redis-storage",
            "spec: {gcsFaultToleranceOptions: {backend: rocksdb, storage: {size: 1Gi}}}",
        ),
        fire(
            "redis-username-outside-gcs-options",
            "spec: {headGroupSpec: {rayStartParams: {redis-username: u}}}",
        ),
        fire(
            "redis-username-outside-gcs-options",
            "spec: {headGroupSpec: {template: {spec: {containers: [{env: [{name: REDIS_USERNAME, value: u}]}]}}}}",
        ),
        pass(
            "redis-username-outside-gcs-options",
            "spec: {gcsFaultToleranceOptions: {redisUsername: {value: u}}}",
        ),
        // ValidateRayClusterSpec: suspend and autoscaler
        gated(
            fire(
                "worker-group-suspend-requires-feature-gate",
                "spec: {workerGroupSpecs: [{suspend: true}]}",
            ),
            "RayJobDeletionPolicy=false",
        ),
        pass(
            "worker-group-suspend-requires-feature-gate",
            "spec: {workerGroupSpecs: [{suspend: true}]}",
        ),
        fire(
            "autoscaler-v2-env-without-autoscaling",
            "spec: {headGroupSpec: {template: {spec: {containers: [{env: [{name: RAY_enable_autoscaler_v2, value: 'true'}]}]}}}}",
        ),
        pass(
            "autoscaler-v2-env-without-autoscaling",
            "spec: {headGroupSpec: {template: {spec: {containers: [{env: [{name: RAY_enable_autoscaler_v2, value: 'false'}]}]}}}}",
        ),
        fire(
            "worker-group-suspend-with-autoscaling",
            "spec: {enableInTreeAutoscaling: true, workerGroupSpecs: [{suspend: true}]}",
        ),
        pass(
            "worker-group-suspend-with-autoscaling",
            "spec: {enableInTreeAutoscaling: false, workerGroupSpecs: [{suspend: true}]}",
        ),
        fire(
            "autoscaler-version-and-env-both-set",
            "spec: {enableInTreeAutoscaling: true, autoscalerOptions: {version: v1}, headGroupSpec: {template: {spec: {containers: [{env: [{name: RAY_enable_autoscaler_v2, value: 'false'}]}]}}}}",
        ),
        pass(
            "autoscaler-version-and-env-both-set",
            "spec: {enableInTreeAutoscaling: true, headGroupSpec: {template: {spec: {containers: [{env: [{name: RAY_enable_autoscaler_v2, value: 'true'}]}]}}}}",
        ),
        fire(
            "autoscaler-v2-head-restart-policy",
            "spec: {enableInTreeAutoscaling: true, autoscalerOptions: {version: v2}, headGroupSpec: {template: {spec: {restartPolicy: Always}}}}",
        ),
        pass(
            "autoscaler-v2-head-restart-policy",
            "spec: {enableInTreeAutoscaling: true, autoscalerOptions: {version: v2}, headGroupSpec: {template: {spec: {restartPolicy: Never}}}}",
        ),
        fire(
            "autoscaler-v2-worker-restart-policy",
            "spec: {enableInTreeAutoscaling: true, autoscalerOptions: {version: v2}, workerGroupSpecs: [{template: {spec: {restartPolicy: OnFailure}}}]}",
        ),
        pass(
            "autoscaler-v2-worker-restart-policy",
            "spec: {enableInTreeAutoscaling: false, autoscalerOptions: {version: v2}, workerGroupSpecs: [{template: {spec: {restartPolicy: OnFailure}}}]}",
        ),
        fire(
            "autoscaler-v1-worker-restart-policy",
            "spec: {enableInTreeAutoscaling: true, workerGroupSpecs: [{template: {spec: {restartPolicy: OnFailure}}}]}",
        ),
        pass(
            "autoscaler-v1-worker-restart-policy",
            "spec: {enableInTreeAutoscaling: true, workerGroupSpecs: [{template: {spec: {restartPolicy: Never}}}]}",
        ),
        pass(
            "autoscaler-v1-worker-restart-policy",
            "spec: {enableInTreeAutoscaling: true, autoscalerOptions: {version: v2}, workerGroupSpecs: [{template: {spec: {restartPolicy: OnFailure}}}]}",
        ),
        fire(
            "autoscaler-idle-timeout-negative",
            "spec: {autoscalerOptions: {idleTimeoutSeconds: -5}}",
        ),
        pass(
            "autoscaler-idle-timeout-negative",
            "spec: {autoscalerOptions: {idleTimeoutSeconds: 0}}",
        ),
        fire(
            "autoscaler-env-start-cmd",
            "spec: {autoscalerOptions: {env: [{name: KUBERAY_GEN_AUTOSCALER_START_CMD, value: x}]}}",
        ),
        pass(
            "autoscaler-env-start-cmd",
            "spec: {autoscalerOptions: {env: [{name: OTHER, value: x}]}}",
        ),
        // ValidateRayClusterSpec: history server
        fire(
            "history-server-feature-gate",
            "spec: {historyServerOptions: {collectorOptions: {image: c}}}",
        ),
        gated(
            pass(
                "history-server-feature-gate",
                "spec: {historyServerOptions: {collectorOptions: {image: c}}}",
            ),
            "RayClusterHistoryServer=true",
        ),
        fire(
            "history-server-collector-options-missing",
            "spec: {historyServerOptions: {}}",
        ),
        fire(
            "history-server-collector-image-missing",
            "spec: {historyServerOptions: {collectorOptions: {env: [{name: STORAGE_BACKEND, value: s3}, {name: S3_REGION, value: r}]}}}",
        ),
        fire(
            "history-server-collector-env-forbidden",
            "spec: {historyServerOptions: {collectorOptions: {image: c, env: [{name: POD_IP, value: x}, {name: STORAGE_BACKEND, value: s3}, {name: S3_REGION, value: r}]}}}",
        ),
        pass(
            "history-server-collector-env-forbidden",
            "spec: {historyServerOptions: {collectorOptions: {image: c, env: [{name: STORAGE_BACKEND, value: s3}, {name: S3_REGION, value: r}]}}}",
        ),
        fire(
            "history-server-storage-backend-missing",
            "spec: {historyServerOptions: {collectorOptions: {image: c, env: [{name: STORAGE_BACKEND, valueFrom: {configMapKeyRef: {name: a, key: b}}}]}}}",
        ),
        fire(
            "history-server-storage-env-missing",
            "spec: {historyServerOptions: {collectorOptions: {image: c, env: [{name: STORAGE_BACKEND, value: gcs}]}}}",
        ),
        pass(
            "history-server-storage-env-missing",
            "spec: {historyServerOptions: {collectorOptions: {image: c, env: [{name: STORAGE_BACKEND, value: gcs}, {name: GCS_BUCKET, valueFrom: {secretKeyRef: {name: a, key: b}}}]}}}",
        ),
        fire(
            "history-server-storage-env-missing",
            "spec: {historyServerOptions: {collectorOptions: {image: c, env: [{name: STORAGE_BACKEND, value: AzureBlob}, {name: AZURE_STORAGE_AUTH_MODE, value: workload_identity}, {name: AZURE_STORAGE_CONNECTION_STRING, value: x}]}}}",
        ),
        pass(
            "history-server-storage-env-missing",
            "spec: {historyServerOptions: {collectorOptions: {image: c, env: [{name: STORAGE_BACKEND, value: azureblob}, {name: AZURE_STORAGE_CONNECTION_STRING, value: x}]}}}",
        ),
        fire(
            "history-server-storage-env-missing",
            "spec: {historyServerOptions: {collectorOptions: {image: c, env: [{name: STORAGE_BACKEND, value: aliyunoss}, {name: OSS_BUCKET, value: b}]}}}",
        ),
        pass(
            "history-server-storage-env-missing",
            "spec: {historyServerOptions: {collectorOptions: {image: c, env: [{name: STORAGE_BACKEND, value: minio}]}}}",
        ),
        fire(
            "history-server-collector-container-name",
            "spec: {historyServerOptions: {collectorOptions: {image: c}}, workerGroupSpecs: [{template: {spec: {containers: [{}, {name: ray-history-collector, image: x}]}}}]}",
        ),
        pass(
            "history-server-collector-container-name",
            "spec: {workerGroupSpecs: [{template: {spec: {containers: [{}, {name: ray-history-collector, image: x}]}}}]}",
        ),
        // ValidateRayClusterSpec: token authentication
        fire(
            "auth-token-ray-version-missing",
            "spec: {rayVersion: null, authOptions: {mode: token}}",
        ),
        fire(
            "auth-token-ray-version-invalid",
            "spec: {rayVersion: nightly, authOptions: {mode: token}}",
        ),
        fire(
            "auth-token-ray-version-too-old",
            "spec: {rayVersion: '2.51.1', authOptions: {mode: token}}",
        ),
        pass(
            "auth-token-ray-version-too-old",
            "spec: {rayVersion: 'v2.52', authOptions: {mode: token}}",
        ),
        pass(
            "auth-token-ray-version-too-old",
            "spec: {rayVersion: '2.51.1', authOptions: {mode: disabled}}",
        ),
        fire(
            "auth-k8s-token-ray-version-too-old",
            "spec: {rayVersion: '2.54.0', authOptions: {mode: token, enableK8sTokenAuth: true}}",
        ),
        pass(
            "auth-k8s-token-ray-version-too-old",
            "spec: {rayVersion: '2.55.0', authOptions: {mode: token, enableK8sTokenAuth: true}}",
        ),
        fire(
            "auth-k8s-token-with-secret-name",
            "spec: {rayVersion: '2.55.0', authOptions: {mode: token, enableK8sTokenAuth: true, secretName: s}}",
        ),
        pass(
            "auth-k8s-token-with-secret-name",
            "spec: {authOptions: {mode: token, secretName: s}}",
        ),
        fire(
            "auth-k8s-token-without-token-mode",
            "spec: {authOptions: {enableK8sTokenAuth: true}}",
        ),
        pass(
            "auth-k8s-token-without-token-mode",
            "spec: {authOptions: {enableK8sTokenAuth: false}}",
        ),
        // ValidateRayClusterSpec: network policy
        fire("network-policy-feature-gate", "spec: {networkPolicy: {}}"),
        gated(
            pass("network-policy-feature-gate", "spec: {networkPolicy: {}}"),
            "RayClusterNetworkPolicy=true",
        ),
        fire(
            "network-policy-rules-mode-conflict",
            "spec: {networkPolicy: {mode: DenyAllEgress, head: {ingressRules: [{}]}}}",
        ),
        fire(
            "network-policy-rules-mode-conflict",
            "spec: {networkPolicy: {mode: DenyAllIngress, workerGroups: [{groupName: small, egressRules: [{}]}]}}",
        ),
        pass(
            "network-policy-rules-mode-conflict",
            "spec: {networkPolicy: {head: {ingressRules: [{}], egressRules: [{}]}}}",
        ),
        fire(
            "network-policy-group-name-not-dns1123",
            "spec: {networkPolicy: {}, workerGroupSpecs: [{groupName: Small}]}",
        ),
        pass(
            "network-policy-group-name-not-dns1123",
            "spec: {workerGroupSpecs: [{groupName: Small}]}",
        ),
        fire(
            "network-policy-unknown-worker-group",
            "spec: {networkPolicy: {workerGroups: [{groupName: nope}]}}",
        ),
        pass(
            "network-policy-unknown-worker-group",
            "spec: {networkPolicy: {workerGroups: [{groupName: small}]}}",
        ),
        // ValidateRayClusterSpec: mTLS
        fire("tls-feature-gate", "spec: {tlsOptions: {}}"),
        gated(
            pass("tls-feature-gate", "spec: {tlsOptions: {}}"),
            "RayClusterMTLS=true",
        ),
        fire(
            "tls-forbidden-env",
            "spec: {tlsOptions: {}, workerGroupSpecs: [{template: {spec: {containers: [{env: [{name: RAY_USE_TLS, value: '1'}]}]}}}]}",
        ),
        fire(
            "tls-forbidden-env",
            "spec: {tlsOptions: {}, autoscalerOptions: {env: [{name: RAY_TLS_CA_CERT, value: x}]}}",
        ),
        pass(
            "tls-forbidden-env",
            "spec: {workerGroupSpecs: [{template: {spec: {containers: [{env: [{name: RAY_USE_TLS, value: '1'}]}]}}}]}",
        ),
        fire(
            "tls-forbidden-volume-mount",
            "spec: {tlsOptions: {}, headGroupSpec: {template: {spec: {containers: [{volumeMounts: [{name: certs, mountPath: /etc/ray/tls}]}]}}}}",
        ),
        fire(
            "tls-forbidden-volume-mount",
            "spec: {tlsOptions: {}, autoscalerOptions: {volumeMounts: [{name: ray-tls, mountPath: /x}]}}",
        ),
        // ValidateRayClusterUpgradeOptions
        fire(
            "upgrade-strategy-invalid-type",
            "spec: {upgradeStrategy: {type: Rolling}}",
        ),
        pass(
            "upgrade-strategy-invalid-type",
            "spec: {upgradeStrategy: {type: Recreate}}",
        ),
        fire(
            "upgrade-strategy-on-owned-cluster",
            "metadata: {labels: {ray.io/originated-from-crd: RayService}}\nspec: {upgradeStrategy: {type: None}}",
        ),
        pass(
            "upgrade-strategy-on-owned-cluster",
            "metadata: {labels: {ray.io/originated-from-crd: RayJob}}",
        ),
        // ValidateRayClusterStatus
        fire(
            "raycluster-status-suspending-and-suspended",
            "status: {conditions: [{type: RayClusterSuspending, status: 'True', reason: r, message: m, lastTransitionTime: '2026-01-01T00:00:00Z'}, {type: RayClusterSuspended, status: 'True', reason: r, message: m, lastTransitionTime: '2026-01-01T00:00:00Z'}]}",
        ),
        pass(
            "raycluster-status-suspending-and-suspended",
            "status: {conditions: [{type: RayClusterSuspending, status: 'False', reason: r, message: m, lastTransitionTime: '2026-01-01T00:00:00Z'}, {type: RayClusterSuspended, status: 'True', reason: r, message: m, lastTransitionTime: '2026-01-01T00:00:00Z'}]}",
        ),
        // raygate reconciler
        raygate(fire(
            "unsupported-gcs-fault-tolerance",
            "spec: {gcsFaultToleranceOptions: {redisAddress: 'r:1'}}",
        )),
        raygate(fire(
            "unsupported-gcs-fault-tolerance",
            "metadata: {annotations: {ray.io/ft-enabled: 'true'}}",
        )),
        raygate(pass(
            "unsupported-gcs-fault-tolerance",
            "metadata: {annotations: {ray.io/ft-enabled: 'false'}}",
        )),
        raygate(fire("unsupported-tls", "spec: {tlsOptions: {}}")),
        raygate(fire(
            "unsupported-history-server",
            "spec: {historyServerOptions: {}}",
        )),
        raygate(fire(
            "unsupported-network-policy",
            "spec: {networkPolicy: {}}",
        )),
        raygate(fire(
            "unsupported-k8s-token-auth",
            "spec: {authOptions: {mode: token, enableK8sTokenAuth: true}}",
        )),
        raygate(pass(
            "unsupported-k8s-token-auth",
            "spec: {authOptions: {mode: token}}",
        )),
        pass(
            "auth-token-ray-version-missing",
            "spec: {rayVersion: null, authOptions: {mode: disabled}}",
        ),
        pass(
            "gcs-ft-redis-address-env",
            "spec: {gcsFaultToleranceOptions: {redisAddress: 'r:1'}}",
        ),
        pass(
            "gcs-ft-redis-password-env",
            "spec: {headGroupSpec: {template: {spec: {containers: [{env: [{name: REDIS_PASSWORD, value: x}]}]}}}}",
        ),
        pass(
            "gcs-ft-rocksdb-storage-env",
            "spec: {gcsFaultToleranceOptions: {}, headGroupSpec: {template: {spec: {containers: [{env: [{name: RAY_gcs_storage_path, value: x}]}]}}}}",
        ),
        pass(
            "gcs-ft-rocksdb-storage-volume",
            "spec: {gcsFaultToleranceOptions: {backend: rocksdb}, headGroupSpec: {template: {spec: {volumes: [{name: data, emptyDir: {}}]}}}}",
        ),
        pass(
            "history-server-collector-image-missing",
            "spec: {historyServerOptions: {collectorOptions: {image: c}}}",
        ),
        pass(
            "history-server-collector-options-missing",
            "spec: {historyServerOptions: {collectorOptions: {image: c}}}",
        ),
        pass(
            "history-server-storage-backend-missing",
            "spec: {historyServerOptions: {collectorOptions: {image: c, env: [{name: STORAGE_BACKEND, value: minio}]}}}",
        ),
        raygate(pass("unsupported-history-server", "")),
        raygate(pass("unsupported-network-policy", "")),
        pass("unsupported-network-policy", "spec: {networkPolicy: {}}"),
        pass(
            "worker-group-idle-timeout-negative",
            "spec: {autoscalerOptions: {version: v2}, workerGroupSpecs: [{idleTimeoutSeconds: 0}]}",
        ),
        pass(
            "worker-group-negative-max-replicas",
            "spec: {workerGroupSpecs: [{maxReplicas: 0}]}",
        ),
        pass(
            "worker-group-priority-ray-version-invalid",
            "spec: {rayVersion: 'v2.56', workerGroupSpecs: [{priority: 1}]}",
        ),
        pass(
            "worker-group-priority-ray-version-missing",
            "spec: {rayVersion: null, workerGroupSpecs: [{priority: 0}]}",
        ),
    ];
    check("RayCluster", &cases, |case| {
        validate_ray_cluster(&cluster(case.patch), &ctx(case.gates, case.reconciler))
    });
}

#[test]
fn rayjob_rules() {
    let cases = [
        // ValidateRayJobMetadata
        fire(
            "rayjob-name-too-long",
            "metadata: {name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}",
        ),
        pass(
            "rayjob-name-too-long",
            "metadata: {name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}",
        ),
        fire("rayjob-name-not-dns1035", "metadata: {name: my_job}"),
        pass("rayjob-name-not-dns1035", "metadata: {name: my-job}"),
        // ValidateRayJobSpec: suspend and TTL
        fire("rayjob-suspend-requires-shutdown", "spec: {suspend: true}"),
        pass(
            "rayjob-suspend-requires-shutdown",
            "spec: {suspend: true, shutdownAfterJobFinishes: true}",
        ),
        fire("rayjob-ttl-negative", "spec: {ttlSecondsAfterFinished: -1}"),
        pass(
            "rayjob-ttl-negative",
            "spec: {ttlSecondsAfterFinished: null}",
        ),
        // ValidateRayJobSpec: deletion
        fire(
            "rayjob-ttl-requires-shutdown",
            "spec: {ttlSecondsAfterFinished: 60}",
        ),
        pass(
            "rayjob-ttl-requires-shutdown",
            "spec: {ttlSecondsAfterFinished: 60, shutdownAfterJobFinishes: true}",
        ),
        gated(
            fire(
                "rayjob-deletion-strategy-feature-gate",
                "spec: {deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {jobStatus: SUCCEEDED}}]}}",
            ),
            "RayJobDeletionPolicy=false",
        ),
        pass(
            "rayjob-deletion-strategy-feature-gate",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {jobStatus: SUCCEEDED}}]}}",
        ),
        fire(
            "rayjob-deletion-rules-with-shutdown",
            "spec: {shutdownAfterJobFinishes: true, deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {jobStatus: SUCCEEDED}}]}}",
        ),
        fire(
            "rayjob-deletion-rules-with-legacy",
            "spec: {deletionStrategy: {onSuccess: {policy: DeleteCluster}, onFailure: {policy: DeleteNone}, deletionRules: [{policy: DeleteCluster, condition: {jobStatus: SUCCEEDED}}]}}",
        ),
        pass(
            "rayjob-deletion-rules-with-legacy",
            "spec: {deletionStrategy: {onSuccess: {policy: DeleteCluster}, onFailure: {policy: DeleteNone}}}",
        ),
        fire(
            "rayjob-deletion-legacy-incomplete",
            "spec: {deletionStrategy: {onSuccess: {policy: DeleteCluster}}}",
        ),
        fire(
            "rayjob-deletion-legacy-policy-unset",
            "spec: {deletionStrategy: {onSuccess: {}, onFailure: {policy: DeleteCluster}}}",
        ),
        fire(
            "rayjob-deletion-legacy-cluster-selector",
            "spec: {rayClusterSpec: null, clusterSelector: {ray.io/cluster: c}, deletionStrategy: {onSuccess: {policy: DeleteSelf}, onFailure: {policy: DeleteWorkers}}}",
        ),
        pass(
            "rayjob-deletion-legacy-cluster-selector",
            "spec: {rayClusterSpec: null, clusterSelector: {ray.io/cluster: c}, deletionStrategy: {onSuccess: {policy: DeleteSelf}, onFailure: {policy: DeleteNone}}}",
        ),
        fire(
            "rayjob-deletion-legacy-delete-workers-autoscaling",
            "spec: {rayClusterSpec: {enableInTreeAutoscaling: true}, deletionStrategy: {onSuccess: {policy: DeleteWorkers}, onFailure: {policy: DeleteCluster}}}",
        ),
        pass(
            "rayjob-deletion-legacy-delete-workers-autoscaling",
            "spec: {deletionStrategy: {onSuccess: {policy: DeleteWorkers}, onFailure: {policy: DeleteCluster}}}",
        ),
        fire(
            "rayjob-deletion-legacy-delete-none-with-shutdown",
            "spec: {shutdownAfterJobFinishes: true, deletionStrategy: {onSuccess: {policy: DeleteCluster}, onFailure: {policy: DeleteNone}}}",
        ),
        pass(
            "rayjob-deletion-legacy-delete-none-with-shutdown",
            "spec: {shutdownAfterJobFinishes: true, deletionStrategy: {onSuccess: {policy: DeleteCluster}, onFailure: {policy: DeleteSelf}}}",
        ),
        fire(
            "rayjob-deletion-rule-both-conditions",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {jobStatus: FAILED, jobDeploymentStatus: Failed}}]}}",
        ),
        fire(
            "rayjob-deletion-rule-no-condition",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {ttlSeconds: 5}}]}}",
        ),
        fire(
            "rayjob-deletion-rule-negative-ttl",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {jobStatus: FAILED, ttlSeconds: -5}}]}}",
        ),
        pass(
            "rayjob-deletion-rule-negative-ttl",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {jobStatus: FAILED, ttlSeconds: 0}}]}}",
        ),
        fire(
            "rayjob-deletion-rule-cluster-selector",
            "spec: {rayClusterSpec: null, clusterSelector: {ray.io/cluster: c}, deletionStrategy: {deletionRules: [{policy: DeleteWorkers, condition: {jobStatus: FAILED}}]}}",
        ),
        pass(
            "rayjob-deletion-rule-cluster-selector",
            "spec: {rayClusterSpec: null, clusterSelector: {ray.io/cluster: c}, deletionStrategy: {deletionRules: [{policy: DeleteSelf, condition: {jobStatus: FAILED}}]}}",
        ),
        fire(
            "rayjob-deletion-rule-delete-workers-autoscaling",
            "spec: {rayClusterSpec: {enableInTreeAutoscaling: true}, deletionStrategy: {deletionRules: [{policy: DeleteWorkers, condition: {jobStatus: FAILED}}]}}",
        ),
        fire(
            "rayjob-deletion-rule-duplicate",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {jobStatus: FAILED}}, {policy: DeleteCluster, condition: {jobStatus: FAILED, ttlSeconds: 10}}]}}",
        ),
        pass(
            "rayjob-deletion-rule-duplicate",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {jobStatus: FAILED}}, {policy: DeleteCluster, condition: {jobDeploymentStatus: Failed}}]}}",
        ),
        fire(
            "rayjob-deletion-rule-ttl-order",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteWorkers, condition: {jobStatus: SUCCEEDED, ttlSeconds: 100}}, {policy: DeleteSelf, condition: {jobStatus: SUCCEEDED, ttlSeconds: 10}}]}}",
        ),
        pass(
            "rayjob-deletion-rule-ttl-order",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteWorkers, condition: {jobStatus: SUCCEEDED, ttlSeconds: 100}}, {policy: DeleteSelf, condition: {jobStatus: FAILED, ttlSeconds: 10}}]}}",
        ),
        fire(
            "rayjob-deletion-strategy-empty",
            "spec: {deletionStrategy: {}}",
        ),
        fire(
            "rayjob-deletion-strategy-empty",
            "spec: {deletionStrategy: {deletionRules: []}}",
        ),
        // ValidateRayJobSpec: clusterSelector and InteractiveMode
        fire(
            "rayjob-suspend-with-cluster-selector",
            "spec: {suspend: true, shutdownAfterJobFinishes: true, rayClusterSpec: null, clusterSelector: {ray.io/cluster: c}}",
        ),
        pass(
            "rayjob-suspend-with-cluster-selector",
            "spec: {suspend: true, shutdownAfterJobFinishes: true, clusterSelector: {}}",
        ),
        fire(
            "rayjob-cluster-spec-or-selector-required",
            "spec: {rayClusterSpec: null}",
        ),
        fire(
            "rayjob-cluster-spec-or-selector-required",
            "spec: {rayClusterSpec: null, clusterSelector: {}}",
        ),
        pass(
            "rayjob-cluster-spec-or-selector-required",
            "spec: {rayClusterSpec: null, clusterSelector: {ray.io/cluster: c}}",
        ),
        fire(
            "rayjob-cluster-selector-name-empty",
            "spec: {rayClusterSpec: null, clusterSelector: {team: a}}",
        ),
        fire(
            "rayjob-cluster-selector-name-empty",
            "spec: {rayClusterSpec: null, clusterSelector: {ray.io/cluster: ''}}",
        ),
        fire(
            "rayjob-cluster-selector-sidecar-mode",
            "spec: {rayClusterSpec: null, submissionMode: SidecarMode, clusterSelector: {ray.io/cluster: c}}",
        ),
        fire(
            "rayjob-cluster-selector-backoff-limit",
            "spec: {rayClusterSpec: null, backoffLimit: 2, clusterSelector: {ray.io/cluster: c}}",
        ),
        pass(
            "rayjob-cluster-selector-backoff-limit",
            "spec: {backoffLimit: 2}",
        ),
        fire(
            "rayjob-cluster-spec-ignored",
            "spec: {clusterSelector: {ray.io/cluster: c}}",
        ),
        fire(
            "rayjob-cluster-selector-shutdown",
            "spec: {rayClusterSpec: null, shutdownAfterJobFinishes: true, clusterSelector: {ray.io/cluster: c}}",
        ),
        pass(
            "rayjob-cluster-selector-shutdown",
            "spec: {shutdownAfterJobFinishes: true}",
        ),
        fire(
            "rayjob-interactive-backoff-limit",
            "spec: {submissionMode: InteractiveMode, backoffLimit: 1}",
        ),
        pass(
            "rayjob-interactive-backoff-limit",
            "spec: {submissionMode: InteractiveMode, backoffLimit: 0}",
        ),
        fire(
            "rayjob-unknown-submission-mode",
            "spec: {submissionMode: K8sJob}",
        ),
        pass(
            "rayjob-unknown-submission-mode",
            "spec: {submissionMode: null}",
        ),
        pass(
            "rayjob-unknown-submission-mode",
            "spec: {submissionMode: HTTPMode}",
        ),
        // ValidateRayJobSpec: SidecarMode
        fire(
            "rayjob-sidecar-submitter-pod-template",
            "spec: {submissionMode: SidecarMode, submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: i}]}}}",
        ),
        fire(
            "rayjob-sidecar-submitter-config",
            "spec: {submissionMode: SidecarMode, submitterConfig: {backoffLimit: 1}}",
        ),
        pass(
            "rayjob-sidecar-submitter-config",
            "spec: {submitterConfig: {backoffLimit: 1}}",
        ),
        fire(
            "rayjob-sidecar-head-restart-policy",
            "spec: {submissionMode: SidecarMode, rayClusterSpec: {headGroupSpec: {template: {spec: {restartPolicy: Always}}}}}",
        ),
        pass(
            "rayjob-sidecar-head-restart-policy",
            "spec: {rayClusterSpec: {headGroupSpec: {template: {spec: {restartPolicy: Always}}}}}",
        ),
        // raygate: submitter template
        fire(
            "rayjob-submitter-no-containers",
            "spec: {submitterPodTemplate: {spec: {restartPolicy: Never, containers: []}}}",
        ),
        fire(
            "rayjob-submitter-restart-policy-missing",
            "spec: {submitterPodTemplate: {spec: {containers: [{name: s, image: i}]}}}",
        ),
        pass(
            "rayjob-submitter-restart-policy-missing",
            "spec: {submitterPodTemplate: {spec: {restartPolicy: OnFailure, containers: [{name: s, image: i}]}}}",
        ),
        fire(
            "rayjob-submitter-restart-policy-invalid",
            "spec: {submitterPodTemplate: {spec: {restartPolicy: Always, containers: [{name: s, image: i}]}}}",
        ),
        pass(
            "rayjob-submitter-restart-policy-invalid",
            "spec: {submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: i}]}}}",
        ),
        fire(
            "rayjob-submitter-container-name-missing",
            "spec: {submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{image: i}]}}}",
        ),
        fire(
            "rayjob-submitter-container-image-missing",
            "spec: {submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s}]}}}",
        ),
        fire(
            "rayjob-submitter-template-ignored",
            "spec: {submissionMode: HTTPMode, submitterPodTemplate: {spec: {containers: []}}}",
        ),
        pass(
            "rayjob-submitter-no-containers",
            "spec: {submissionMode: HTTPMode, submitterPodTemplate: {spec: {containers: []}}}",
        ),
        // raygate: Kueue PodSet cap
        fire(
            "rayjob-kueue-pod-set-limit",
            "metadata: {labels: {kueue.x-k8s.io/queue-name: q}}\nspec: {rayClusterSpec: {workerGroupSpecs: [{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}]}}",
        ),
        pass(
            "rayjob-kueue-pod-set-limit",
            "metadata: {labels: {kueue.x-k8s.io/queue-name: q}}\nspec: {submissionMode: HTTPMode, rayClusterSpec: {workerGroupSpecs: [{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}]}}",
        ),
        pass(
            "rayjob-kueue-pod-set-limit",
            "spec: {rayClusterSpec: {workerGroupSpecs: [{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}]}}",
        ),
        // ValidateRayJobSpec: embedded cluster
        fire(
            "rayjob-k8s-token-auth-unsupported",
            "spec: {rayClusterSpec: {rayVersion: '2.55.0', authOptions: {mode: token, enableK8sTokenAuth: true}}}",
        ),
        pass(
            "rayjob-k8s-token-auth-unsupported",
            "spec: {rayClusterSpec: {authOptions: {mode: token}}}",
        ),
        fire(
            "worker-group-min-greater-than-max",
            "spec: {rayClusterSpec: {workerGroupSpecs: [{minReplicas: 3, maxReplicas: 1}]}}",
        ),
        fire(
            "gcs-ft-annotation-and-options",
            "metadata: {annotations: {ray.io/ft-enabled: 'true'}}\nspec: {rayClusterSpec: {gcsFaultToleranceOptions: {}}}",
        ),
        fire(
            "autoscaler-v1-worker-restart-policy",
            "spec: {rayClusterSpec: {enableInTreeAutoscaling: true, workerGroupSpecs: [{template: {spec: {restartPolicy: Always}}}]}}",
        ),
        // ValidateRayJobSpec: runtimeEnvYAML
        fire(
            "rayjob-runtime-env-yaml-invalid",
            "spec: {runtimeEnvYAML: \"- pip\\n- conda\\n\"}",
        ),
        fire(
            "rayjob-runtime-env-yaml-invalid",
            "spec: {runtimeEnvYAML: 'pip: [requests'}",
        ),
        pass(
            "rayjob-runtime-env-yaml-invalid",
            "spec: {runtimeEnvYAML: \"pip: [requests]\\nenv_vars: {A: b}\\n\"}",
        ),
        // Go's YAML reader turns non-string keys into strings: still a map.
        pass(
            "rayjob-runtime-env-yaml-invalid",
            "spec: {runtimeEnvYAML: \"1: a\\ntrue: b\\n\"}",
        ),
        pass(
            "rayjob-runtime-env-yaml-invalid",
            "spec: {runtimeEnvYAML: \"!env {pip: [requests]}\"}",
        ),
        fire(
            "rayjob-runtime-env-yaml-invalid",
            "spec: {runtimeEnvYAML: \"!env [pip]\"}",
        ),
        // raygate: submit payload
        fire("rayjob-entrypoint-empty", "spec: {entrypoint: null}"),
        fire("rayjob-entrypoint-empty", "spec: {entrypoint: '  '}"),
        pass(
            "rayjob-entrypoint-empty",
            "spec: {entrypoint: null, submissionMode: InteractiveMode}",
        ),
        // KubeRay keeps the submitter's own command and never uses the entrypoint.
        pass(
            "rayjob-entrypoint-empty",
            "spec: {entrypoint: null, submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: i, command: [python, submit.py]}]}}}",
        ),
        fire(
            "rayjob-entrypoint-empty",
            "spec: {entrypoint: null, submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: i, command: []}]}}}",
        ),
        fire(
            "rayjob-entrypoint-empty",
            "spec: {entrypoint: null, submissionMode: HTTPMode, submitterPodTemplate: {spec: {containers: [{name: s, image: i, command: [python]}]}}}",
        ),
        fire(
            "rayjob-entrypoint-resources-invalid",
            "spec: {entrypointResources: '{\"custom\": \"1\"}'}",
        ),
        fire(
            "rayjob-entrypoint-resources-invalid",
            "spec: {entrypointResources: 'custom=1'}",
        ),
        fire(
            "rayjob-entrypoint-resources-invalid",
            "spec: {entrypointResources: '[1]'}",
        ),
        pass(
            "rayjob-entrypoint-resources-invalid",
            "spec: {entrypointResources: '{\"custom\": 1, \"other\": 0.5}'}",
        ),
        fire(
            "rayjob-metadata-ray-version",
            "spec: {metadata: {owner: me}, rayClusterSpec: {rayVersion: '2.5.1'}}",
        ),
        fire(
            "rayjob-metadata-ray-version",
            "spec: {metadata: {owner: me}, rayClusterSpec: {rayVersion: 'nightly'}}",
        ),
        pass(
            "rayjob-metadata-ray-version",
            "spec: {metadata: {owner: me}, rayClusterSpec: {rayVersion: '2.6.0'}}",
        ),
        pass(
            "rayjob-metadata-ray-version",
            "spec: {metadata: {owner: me}, submissionMode: HTTPMode, rayClusterSpec: {rayVersion: '2.5.1'}}",
        ),
        pass(
            "rayjob-metadata-ray-version",
            "spec: {metadata: {owner: me}, rayClusterSpec: {rayVersion: null}}",
        ),
        // ValidateRayJobSpec: deadlines and backoffLimit
        fire(
            "rayjob-active-deadline-not-positive",
            "spec: {activeDeadlineSeconds: 0}",
        ),
        pass(
            "rayjob-active-deadline-not-positive",
            "spec: {activeDeadlineSeconds: 1}",
        ),
        fire(
            "rayjob-pre-running-deadline-not-positive",
            "spec: {preRunningDeadlineSeconds: -1}",
        ),
        pass(
            "rayjob-pre-running-deadline-not-positive",
            "spec: {preRunningDeadlineSeconds: 30}",
        ),
        fire("rayjob-backoff-limit-negative", "spec: {backoffLimit: -1}"),
        pass(
            "rayjob-backoff-limit-negative",
            "spec: {backoffLimit: null}",
        ),
        // ValidateRayJobStatus
        fire(
            "rayjob-status-waiting-not-interactive",
            "status: {jobDeploymentStatus: Waiting}",
        ),
        pass(
            "rayjob-status-waiting-not-interactive",
            "spec: {submissionMode: InteractiveMode}\nstatus: {jobDeploymentStatus: Waiting}",
        ),
        pass(
            "rayjob-status-waiting-not-interactive",
            "status: {jobDeploymentStatus: Running}",
        ),
        pass(
            "rayjob-cluster-selector-sidecar-mode",
            "spec: {submissionMode: SidecarMode}",
        ),
        pass("rayjob-cluster-spec-ignored", "spec: {clusterSelector: {}}"),
        pass(
            "rayjob-deletion-legacy-incomplete",
            "spec: {deletionStrategy: {onSuccess: {policy: DeleteCluster}, onFailure: {policy: DeleteCluster}}}",
        ),
        pass(
            "rayjob-deletion-legacy-policy-unset",
            "spec: {deletionStrategy: {onSuccess: {policy: DeleteSelf}, onFailure: {policy: DeleteCluster}}}",
        ),
        pass(
            "rayjob-deletion-rule-both-conditions",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {jobDeploymentStatus: Failed}}]}}",
        ),
        pass(
            "rayjob-deletion-rule-no-condition",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {jobStatus: SUCCEEDED}}]}}",
        ),
        pass(
            "rayjob-deletion-rule-delete-workers-autoscaling",
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteWorkers, condition: {jobStatus: FAILED}}]}}",
        ),
        pass(
            "rayjob-deletion-rules-with-shutdown",
            "spec: {shutdownAfterJobFinishes: true, deletionStrategy: {onSuccess: {policy: DeleteCluster}, onFailure: {policy: DeleteCluster}}}",
        ),
        pass(
            "rayjob-sidecar-submitter-pod-template",
            "spec: {submissionMode: SidecarMode}",
        ),
        pass(
            "rayjob-submitter-container-name-missing",
            "spec: {submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: i}]}}}",
        ),
        pass(
            "rayjob-submitter-container-image-missing",
            "spec: {submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: i}]}}}",
        ),
        pass(
            "rayjob-submitter-template-ignored",
            "spec: {submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: i}]}}}",
        ),
    ];
    check("RayJob", &cases, |case| {
        validate_ray_job(&job(case.patch), &ctx(case.gates, case.reconciler))
    });
}

#[test]
fn rayjob_reports_everything_in_kuberay_order() {
    let findings = validate_ray_job(
        &job(r#"
metadata: {name: Bad_Name}
spec:
  suspend: true
  ttlSecondsAfterFinished: -1
  rayClusterSpec:
    workerGroupSpecs: [{minReplicas: 5, maxReplicas: 2}]
  runtimeEnvYAML: "just a string"
  activeDeadlineSeconds: 0
  backoffLimit: -1
status: {jobDeploymentStatus: Waiting}
"#),
        &ValidationContext::default(),
    );
    assert_eq!(
        rules(&findings),
        vec![
            "rayjob-name-not-dns1035",
            "rayjob-suspend-requires-shutdown",
            "rayjob-ttl-negative",
            "worker-group-min-greater-than-max",
            "rayjob-runtime-env-yaml-invalid",
            "rayjob-active-deadline-not-positive",
            "rayjob-backoff-limit-negative",
            "rayjob-status-waiting-not-interactive",
        ]
    );
}

#[test]
fn raycluster_reports_everything_in_kuberay_order() {
    let findings = validate_ray_cluster(
        &cluster(
            r#"
metadata: {name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}
spec:
  headGroupSpec: {template: {spec: {containers: []}}}
  workerGroupSpecs: [{minReplicas: -1}, {groupName: small, numOfHosts: 0}]
  enableInTreeAutoscaling: true
  upgradeStrategy: {type: Blue}
  tlsOptions: {}
status:
  conditions:
  - {type: RayClusterSuspending, status: 'True', reason: r, message: m, lastTransitionTime: '2026-01-01T00:00:00Z'}
  - {type: RayClusterSuspended, status: 'True', reason: r, message: m, lastTransitionTime: '2026-01-01T00:00:00Z'}
"#,
        ),
        &ctx("", R),
    );
    assert_eq!(
        rules(&findings),
        vec![
            "raycluster-name-too-long",
            "raycluster-name-not-dns1035",
            "head-group-no-containers",
            "worker-group-negative-min-replicas",
            "worker-group-duplicate-name",
            "worker-group-num-of-hosts",
            "tls-feature-gate",
            "unsupported-tls",
            "upgrade-strategy-invalid-type",
            "raycluster-status-suspending-and-suspended",
        ]
    );
}

#[test]
fn fields_messages_severities_and_compat() {
    let findings = validate_ray_job(
        &job(
            "spec: {rayClusterSpec: {workerGroupSpecs: [{}, {groupName: big, minReplicas: 3, maxReplicas: 1}]}}",
        ),
        &ValidationContext::default(),
    );
    let f = find(&findings, "worker-group-min-greater-than-max");
    assert_eq!(
        f.field,
        "spec.rayClusterSpec.workerGroupSpecs[1].minReplicas"
    );
    assert_eq!(
        f.message,
        "The RayJob spec is invalid: worker group big has minReplicas 3 greater than maxReplicas 1"
    );
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(f.compat, Compat::Kuberay);

    let findings = validate_ray_job(
        &job("metadata: {name: Demo}"),
        &ValidationContext::default(),
    );
    assert_eq!(
        find(&findings, "rayjob-name-not-dns1035").message,
        "The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: [a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')]"
    );
    assert_eq!(
        find(&findings, "rayjob-name-not-dns1035").field,
        "metadata.name"
    );

    let findings = validate_ray_cluster(
        &cluster("spec: {workerGroupSpecs: [{}, {}]}"),
        &ValidationContext::default(),
    );
    let f = find(&findings, "worker-group-duplicate-name");
    assert_eq!(f.field, "spec.workerGroupSpecs[1].groupName");
    assert_eq!((f.severity, f.compat), (Severity::Error, Compat::Raygate));

    let findings = validate_ray_cluster(
        &cluster("spec: {workerGroupSpecs: [{replicas: 9}]}"),
        &ValidationContext::default(),
    );
    let f = find(&findings, "worker-group-replicas-out-of-range");
    assert_eq!(f.field, "spec.workerGroupSpecs[0].replicas");
    assert_eq!((f.severity, f.compat), (Severity::Warning, Compat::Raygate));

    let findings = validate_ray_cluster(
        &cluster(
            "spec: {enableInTreeAutoscaling: true, workerGroupSpecs: [{template: {spec: {restartPolicy: Always}}}, {groupName: b, template: {spec: {restartPolicy: OnFailure}}}]}",
        ),
        &ValidationContext::default(),
    );
    let f = find(&findings, "autoscaler-v1-worker-restart-policy");
    assert_eq!(
        f.message,
        "restartPolicy for worker groups [small, b] should be Never or unset when using autoscaler V1"
    );
    assert_eq!((f.severity, f.compat), (Severity::Warning, Compat::Kuberay));
    assert!(!super::has_errors(&findings));

    let findings = validate_ray_cluster(
        &cluster("spec: {headGroupSpec: {labels: {'a b': 'c d'}}}"),
        &ValidationContext::default(),
    );
    assert_eq!(
        find(&findings, "group-label-key-invalid").field,
        "spec.headGroupSpec.labels[a b]"
    );
    assert!(find(&findings, "group-label-value-invalid").message.starts_with(
        "invalid label value for key 'a b' in Head group: 'c d', error: a valid label must be an empty string"
    ));

    let findings = validate_ray_cluster(
        &cluster("spec: {rayVersion: latest, authOptions: {mode: token}}"),
        &ValidationContext::default(),
    );
    assert_eq!(
        find(&findings, "auth-token-ray-version-invalid").message,
        "authOptions.mode is 'token' but RayVersion format is invalid: latest, could not parse \"latest\" as version"
    );

    let findings = validate_ray_job(
        &job("spec: {submitterPodTemplate: {spec: {containers: [{name: s, image: i}]}}}"),
        &ValidationContext::default(),
    );
    let f = find(&findings, "rayjob-submitter-restart-policy-missing");
    assert_eq!(f.field, "spec.submitterPodTemplate.spec.restartPolicy");
    assert!(f.message.contains("restartPolicy: Never"));

    let findings = validate_ray_job(
        &job(
            "spec: {deletionStrategy: {deletionRules: [{policy: DeleteCluster, condition: {jobStatus: FAILED, ttlSeconds: 5}}, {policy: DeleteWorkers, condition: {jobStatus: FAILED, ttlSeconds: 50}}]}}",
        ),
        &ValidationContext::default(),
    );
    let f = find(&findings, "rayjob-deletion-rule-ttl-order");
    assert_eq!(
        f.message,
        "for JobStatus 'FAILED': DeleteCluster TTL (5) must be >= DeleteWorkers TTL (50)"
    );
    assert_eq!(
        f.field,
        "spec.deletionStrategy.deletionRules[0].condition.ttlSeconds"
    );

    let findings = validate_ray_cluster(
        &cluster("spec: {networkPolicy: {mode: DenyAllEgress, head: {ingressRules: [{}]}}}"),
        &ctx("RayClusterNetworkPolicy=true", K),
    );
    assert_eq!(rules(&findings), vec!["network-policy-rules-mode-conflict"]);
    assert_eq!(
        findings[0].message,
        "networkPolicy.head.ingressRules cannot be set when mode is \"DenyAllEgress\" (ingress is not restricted)"
    );

    let findings = validate_ray_cluster(
        &cluster("spec: {gcsFaultToleranceOptions: {redisAddress: 'redis:6379'}}"),
        &ctx("", R),
    );
    assert_eq!(
        find(&findings, "unsupported-gcs-fault-tolerance").message,
        "gcsFaultToleranceOptions (GCS fault tolerance) is not supported by raygate's reconciler; run this object with KubeRay (--reconciler kuberay) or remove the field"
    );
    // raygate's reconciler runs the autoscaler (crate::cluster::autoscaler).
    let findings = validate_ray_cluster(
        &cluster("spec: {enableInTreeAutoscaling: true}"),
        &ctx("", R),
    );
    assert!(
        !findings.iter().any(|f| f.rule.starts_with("unsupported-")),
        "{findings:?}"
    );
}

#[test]
fn every_gate_is_honoured_both_ways() {
    let patch = "spec: {workerGroupSpecs: [{suspend: true}], historyServerOptions: {collectorOptions: {image: c, env: [{name: STORAGE_BACKEND, value: minio}]}}, networkPolicy: {}, tlsOptions: {}, gcsFaultToleranceOptions: {backend: rocksdb}}";
    let off = validate_ray_cluster(&cluster(patch), &ctx("RayJobDeletionPolicy=false", K));
    assert_eq!(
        rules(&off),
        vec![
            "gcs-ft-rocksdb-feature-gate",
            "worker-group-suspend-requires-feature-gate",
            "history-server-feature-gate",
            "network-policy-feature-gate",
            "tls-feature-gate",
        ]
    );
    let on = validate_ray_cluster(
        &cluster(patch),
        &ctx(
            "GCSFaultToleranceEmbeddedStorage=true,RayClusterHistoryServer=true,RayClusterNetworkPolicy=true,RayClusterMTLS=true",
            K,
        ),
    );
    assert_eq!(on, vec![]);
}

#[test]
fn absent_fields_do_not_panic() {
    let empty_job: RayJob = serde_json::from_value(yaml("metadata: {}\nspec: {}")).expect("parses");
    let findings = validate_ray_job(&empty_job, &ValidationContext::default());
    assert_eq!(
        rules(&findings),
        vec![
            "rayjob-name-not-dns1035",
            "rayjob-cluster-spec-or-selector-required",
            "rayjob-entrypoint-empty",
        ]
    );
    let bare: RayCluster = serde_json::from_value(yaml(
        "metadata: {name: c}\nspec: {headGroupSpec: {template: {}}, workerGroupSpecs: [{groupName: g, template: {}}]}",
    ))
    .expect("parses");
    let findings = validate_ray_cluster(&bare, &ctx("", R));
    assert_eq!(
        rules(&findings),
        vec![
            "head-group-no-containers",
            "worker-group-no-containers",
            "worker-group-min-max-unset",
        ]
    );
    // Everything optional present but empty.
    let odd = cluster(
        "spec: {autoscalerOptions: {}, authOptions: {}, upgradeStrategy: {}, gcsFaultToleranceOptions: {storage: {}}, historyServerOptions: {collectorOptions: {env: [{}]}}, networkPolicy: {workerGroups: [{}]}}",
    );
    let _ = validate_ray_cluster(&odd, &ctx("", R));
}

/// Every rule name in the sources: KubeRay rules are kebab-case literals in `cluster/` and
/// `job.rs` (minus a few non-rule literals), raygate rules are `raygate_rules::ALL`.
fn all_rule_names() -> Vec<String> {
    const NOT_RULES: [&str; 7] = [
        "gcs-storage",
        "num-cpus",
        "num-gpus",
        "ray-history-collector",
        "ray-tls",
        "redis-password",
        "redis-username",
    ];
    let mut names: Vec<String> = Vec::new();
    let sources = [
        include_str!("cluster/mod.rs"),
        include_str!("cluster/auth.rs"),
        include_str!("cluster/autoscaler.rs"),
        include_str!("cluster/gcs_fault_tolerance.rs"),
        include_str!("cluster/groups.rs"),
        include_str!("cluster/history_server.rs"),
        include_str!("cluster/network_policy.rs"),
        include_str!("cluster/tls.rs"),
        include_str!("cluster/unsupported.rs"),
        include_str!("job.rs"),
    ];
    for source in sources {
        for literal in source.split('"').skip(1).step_by(2) {
            let kebab = literal.contains('-')
                && literal.split('-').all(|p| {
                    !p.is_empty()
                        && p.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                });
            if kebab && !NOT_RULES.contains(&literal) && !names.iter().any(|n| n == literal) {
                names.push(literal.to_string());
            }
        }
    }
    names.extend(super::raygate_rules::ALL.iter().map(|s| s.to_string()));
    names
}

/// The list the sample tests and `--reconciler raygate` users rely on names exactly the rules of
/// the `unsupported-<feature>` family (module docs), so a new one cannot be left out of it.
#[test]
fn the_unsupported_by_raygate_reconciler_list_is_every_unsupported_rule() {
    use super::raygate_rules::{ALL, UNSUPPORTED_BY_RAYGATE_RECONCILER};
    let unsupported: Vec<&str> = ALL
        .into_iter()
        .filter(|rule| rule.starts_with("unsupported-"))
        .collect();
    assert_eq!(unsupported, UNSUPPORTED_BY_RAYGATE_RECONCILER);
}

#[test]
fn every_rule_is_tested_and_catalogued() {
    let names = all_rule_names();
    assert_eq!(
        names.len(),
        123,
        "100 KubeRay rules + 23 raygate rules: {names:?}"
    );
    let tests = include_str!("tests.rs");
    let catalogue = include_str!("../../../docs/validation-rules.md");
    let untested: Vec<&String> = names
        .iter()
        .filter(|n| tests.matches(&format!("\"{n}\"")).count() < 2)
        .collect();
    assert!(
        untested.is_empty(),
        "need a failing and a passing case: {untested:?}"
    );
    let uncatalogued: Vec<&String> = names
        .iter()
        .filter(|n| !catalogue.contains(&format!("| `{n}` |")))
        .collect();
    assert!(
        uncatalogued.is_empty(),
        "missing from docs/validation-rules.md: {uncatalogued:?}"
    );
}
