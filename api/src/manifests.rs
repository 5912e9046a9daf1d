//! Everything needed to install raygate, rendered from two inputs: the namespace and the image.
//!
//! [`render`] returns the objects in the order `kubectl apply` needs them (CRDs and cluster
//! RBAC first, the webhook configurations last, so that the API server never calls a webhook
//! whose Service does not exist yet); [`render_yaml`] renders them as one multi-document YAML
//! stream (`raygate manifests`, committed as `manifests/install.yaml` for the defaults).
//!
//! Choices worth knowing:
//! * **Least privilege.** The ClusterRole lists only what raygate reads and writes (Ray objects
//!   and their status/finalizers, the Pods, Services and submitter Jobs it creates, Volcano
//!   PodGroups and Queues, QueuePolicies, Events, Namespaces read-only) and may patch only its
//!   own webhook configurations and the `ray.io` CRDs (by name, for the CA bundle). Secrets
//!   (its certificate) and Leases (leader election) are granted by a Role in raygate's own
//!   namespace only.
//! * **Blast radius of `failurePolicy: Fail`.** Both webhook configurations only select
//!   namespaces labelled `raygate.io/scheduler=volcano` and never `kube-system` or raygate's own
//!   namespace (by the tamper-resistant `kubernetes.io/metadata.name` label), and the Pod webhook
//!   only sees Ray Pods and Job Pods (`matchConditions` on KubeRay's labels and the Job
//!   controller's, mirror Pods skipped): while raygate is down only Ray objects and Jobs of
//!   opted-in namespaces are affected.
//! * **Hardened Pods.** Two replicas spread over nodes with a PodDisruptionBudget, non-root,
//!   read-only root file system, no capabilities, `RuntimeDefault` seccomp, requests and limits,
//!   probes on `/healthz` and `/readyz`.

use k8s_openapi::ByteString;
use serde_json::{Value, json};

use crate::crd;
use crate::keys;

/// The inputs of a rendering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallOptions {
    /// Namespace raygate runs in.
    pub namespace: String,
    /// Container image of raygate.
    pub image: String,
}

/// Image of the committed rendering (`manifests/install.yaml`).
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/raygate/raygate:", env!("CARGO_PKG_VERSION"));

impl Default for InstallOptions {
    fn default() -> Self {
        Self {
            namespace: keys::DEFAULT_NAMESPACE.to_owned(),
            image: DEFAULT_IMAGE.to_owned(),
        }
    }
}

/// Name of the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration.
pub const WEBHOOK_CONFIGURATION_NAME: &str = keys::APP_NAME;
/// Name of the Role (in raygate's namespace) for its certificate Secret and leader Lease.
const NAMESPACED_ROLE: &str = keys::APP_NAME;
/// `timeoutSeconds` of every webhook: raygate answers in well under a millisecond; a small
/// timeout bounds how long an API request waits when raygate is unreachable.
const WEBHOOK_TIMEOUT_SECONDS: i32 = 5;

/// Labels on every object raygate's manifests create.
fn app_labels() -> Value {
    json!({
        "app.kubernetes.io/name": keys::APP_NAME,
        "app.kubernetes.io/part-of": keys::APP_NAME,
    })
}

fn metadata(name: &str, namespace: Option<&str>) -> Value {
    let mut metadata = json!({"name": name, "labels": app_labels()});
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    metadata
}

/// Every object to install, in apply order.
pub fn render(options: &InstallOptions) -> Vec<Value> {
    let ns = options.namespace.as_str();
    let mut objects = vec![json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata(ns, None),
    })];
    objects.extend(crds(ns));
    objects.extend([
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(keys::APP_NAME, Some(ns)),
        }),
        cluster_role(),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": metadata(keys::APP_NAME, None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": keys::APP_NAME},
            "subjects": [{"kind": "ServiceAccount", "name": keys::APP_NAME, "namespace": ns}],
        }),
        namespaced_role(ns),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(NAMESPACED_ROLE, Some(ns)),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAMESPACED_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": keys::APP_NAME, "namespace": ns}],
        }),
        service(ns),
        deployment(options),
        json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": metadata(keys::APP_NAME, Some(ns)),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": selector_labels()}},
        }),
    ]);
    objects.extend(webhook_configurations(ns, &WebhookClient::Service));
    objects
}

/// How the API server reaches raygate's webhooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookClient {
    /// Through raygate's Service in its namespace: the installation ([`render`]). The CA
    /// bundle is injected by raygate itself (self-managed certificates) or by cert-manager.
    Service,
    /// At `base` + the webhook's path, e.g. `https://127.0.0.1:9443` when the API server runs
    /// next to raygate without Service routing (the test environment). `ca_bundle` is the PEM
    /// of the CA that signed raygate's serving certificate; `None` leaves the bundle to
    /// raygate's self-managed injection.
    Url {
        /// Scheme, host and port, without a trailing slash.
        base: String,
        /// PEM of the CA to trust.
        ca_bundle: Option<String>,
    },
}

impl WebhookClient {
    fn config(&self, namespace: &str, path: &str) -> Value {
        match self {
            WebhookClient::Service => json!({"service": {
                "namespace": namespace, "name": keys::APP_NAME, "path": path, "port": keys::SERVICE_PORT,
            }}),
            WebhookClient::Url { base, ca_bundle } => {
                let mut config = json!({"url": format!("{}{path}", base.trim_end_matches('/'))});
                if let Some(pem) = ca_bundle {
                    // A byte array in the API's JSON: base64, as `ByteString` serializes it.
                    config["caBundle"] = json!(ByteString(pem.clone().into_bytes()));
                }
                config
            }
        }
    }
}

/// raygate's MutatingWebhookConfiguration and ValidatingWebhookConfiguration for an
/// installation in `namespace`, reached through `client`. [`render`] includes them with
/// [`WebhookClient::Service`]; everything but `clientConfig` is the same for every client, so
/// an environment that installs them with a URL has exactly the installation's scope.
pub fn webhook_configurations(namespace: &str, client: &WebhookClient) -> [Value; 2] {
    [
        mutating_webhooks(namespace, client),
        validating_webhooks(namespace, client),
    ]
}

/// [`webhook_configurations`] as one multi-document YAML stream.
pub fn webhook_configurations_yaml(namespace: &str, client: &WebhookClient) -> String {
    to_yaml_stream(
        "# raygate's webhook configurations, rendered by `raygate manifests --webhook-configurations`.\n",
        webhook_configurations(namespace, client),
    )
}

/// [`render`] as one multi-document YAML stream.
pub fn render_yaml(options: &InstallOptions) -> String {
    to_yaml_stream(
        "# raygate installation, rendered by `raygate manifests`. Apply with\n\
         # `kubectl apply --server-side -f` (the CRDs are too large for client-side apply).\n",
        render(options),
    )
}

fn to_yaml_stream(header: &str, objects: impl IntoIterator<Item = Value>) -> String {
    let mut out = String::from(header);
    for object in objects {
        out.push_str("---\n");
        match serde_saphyr::to_string(&object) {
            Ok(yaml) => out.push_str(&yaml),
            // Rendering plain JSON values cannot fail; keep the stream parseable regardless.
            Err(e) => out.push_str(&format!("# cannot render object: {e}\n")),
        }
    }
    out
}

/// The `ray.io` CRDs with their conversion webhook pointing at raygate's Service in
/// `namespace`, then raygate's own `raygate.io` CRDs (QueuePolicy).
fn crds(namespace: &str) -> Vec<Value> {
    let ray = crd::ray_crds().into_iter().map(|mut crd| {
        crd.spec.conversion = Some(crd::webhook_conversion(namespace));
        serde_json::to_value(&crd).unwrap_or(Value::Null)
    });
    let raygate = crd::crd_files()
        .into_iter()
        .filter(|(file, _)| file.starts_with(keys::RAYGATE_GROUP))
        .filter_map(|(_, yaml)| serde_saphyr::from_str::<Value>(&yaml).ok());
    ray.chain(raygate)
        .map(|mut value| {
            value["metadata"]["labels"] = app_labels();
            value
        })
        .collect()
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn named_rule(groups: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "resourceNames": names, "verbs": verbs})
}

const READ: &[&str] = &["get", "list", "watch"];
const MANAGE: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];
const WRITE_STATUS: &[&str] = &["get", "update", "patch"];

fn cluster_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": metadata(keys::APP_NAME, None),
        "rules": [
            // The Ray objects: reconciled, defaulted, status written, finalizer managed.
            rule(&["ray.io"], &["rayjobs", "rayclusters"], &["get", "list", "watch", "create", "update", "patch", "delete"]),
            rule(&["ray.io"], &["rayjobs/status", "rayclusters/status"], WRITE_STATUS),
            rule(&["ray.io"], &["rayjobs/finalizers", "rayclusters/finalizers"], &["update"]),
            // What the reconciler creates for them.
            rule(&[""], &["pods", "services"], MANAGE),
            rule(&["batch"], &["jobs"], MANAGE),
            rule(&["scheduling.volcano.sh"], &["podgroups"], MANAGE),
            rule(&["scheduling.volcano.sh"], &["queues"], READ),
            // Admission policy.
            rule(&["raygate.io"], &["queuepolicies"], READ),
            rule(&["raygate.io"], &["queuepolicies/status"], WRITE_STATUS),
            rule(&[""], &["namespaces"], READ),
            rule(&["", "events.k8s.io"], &["events"], &["create", "patch"]),
            // CA bundle injection into raygate's own webhook configurations and the ray.io CRDs.
            named_rule(
                &["admissionregistration.k8s.io"],
                &["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                &[WEBHOOK_CONFIGURATION_NAME],
                &["get", "patch"],
            ),
            named_rule(
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                &["rayjobs.ray.io", "rayclusters.ray.io"],
                &["get", "patch"],
            ),
        ],
    })
}

fn namespaced_role(namespace: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": metadata(NAMESPACED_ROLE, Some(namespace)),
        "rules": [
            // The self-managed certificate Secret (create cannot be limited by name).
            rule(&[""], &["secrets"], &["get", "list", "watch", "create", "update", "patch"]),
            // Leader election of the reconciler.
            rule(&["coordination.k8s.io"], &["leases"], &["get", "list", "watch", "create", "update", "patch"]),
        ],
    })
}

fn selector_labels() -> Value {
    json!({"app.kubernetes.io/name": keys::APP_NAME})
}

fn service(namespace: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(keys::APP_NAME, Some(namespace)),
        "spec": {
            "selector": selector_labels(),
            "ports": [{"name": "webhook", "port": keys::SERVICE_PORT, "targetPort": "webhook", "protocol": "TCP"}],
        },
    })
}

fn deployment(options: &InstallOptions) -> Value {
    let probe = |path: &str, period: i32| {
        json!({
            "httpGet": {"path": path, "port": "health"},
            "periodSeconds": period,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        })
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(keys::APP_NAME, Some(&options.namespace)),
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": selector_labels()},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": app_labels()},
                "spec": {
                    "serviceAccountName": keys::APP_NAME,
                    "automountServiceAccountToken": true,
                    "priorityClassName": "system-cluster-critical",
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": selector_labels()},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }]}},
                    "containers": [{
                        "name": keys::APP_NAME,
                        "image": options.image,
                        "args": ["run"],
                        "env": container_env(),
                        "ports": [
                            {"name": "webhook", "containerPort": keys::WEBHOOK_PORT, "protocol": "TCP"},
                            {"name": "health", "containerPort": keys::HEALTH_PORT, "protocol": "TCP"},
                        ],
                        "livenessProbe": probe("/healthz", 10),
                        "readinessProbe": probe("/readyz", 5),
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "64Mi"},
                            "limits": {"cpu": "1", "memory": "256Mi"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "runAsNonRoot": true,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    }],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}],
                },
            },
        },
    })
}

/// The container's environment: its Pod's name and namespace, and [`keys::CONTAINER_ENV`].
fn container_env() -> Value {
    let pod_field = |name: &str, path: &str| json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}});
    let mut env = vec![
        pod_field("POD_NAMESPACE", "metadata.namespace"),
        pod_field("POD_NAME", "metadata.name"),
    ];
    env.extend(
        keys::CONTAINER_ENV
            .iter()
            .map(|(name, value)| json!({"name": name, "value": value})),
    );
    Value::Array(env)
}

/// Namespaces raygate acts in: opted in, and never `kube-system` or its own.
fn opted_in_namespaces(own_namespace: &str) -> Value {
    json!({"matchExpressions": [
        {"key": keys::NAMESPACE_OPT_IN_LABEL, "operator": "In", "values": [keys::NAMESPACE_OPT_IN_VALUE]},
        {"key": keys::NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": ["kube-system", own_namespace]},
    ]})
}

/// Fields every raygate webhook shares.
fn webhook(name: &str, namespace: &str, client: &WebhookClient, path: &str, rules: Value) -> Value {
    json!({
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": client.config(namespace, path),
        "rules": rules,
        "namespaceSelector": opted_in_namespaces(namespace),
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": WEBHOOK_TIMEOUT_SECONDS,
    })
}

fn ray_rules(operations: &[&str]) -> Value {
    json!([{
        "apiGroups": ["ray.io"],
        "apiVersions": ["v1"],
        "operations": operations,
        "resources": ["rayjobs", "rayclusters"],
        "scope": "Namespaced",
    }])
}

fn mutating_webhooks(namespace: &str, client: &WebhookClient) -> Value {
    let mut pods = webhook(
        "pods.raygate.io",
        namespace,
        client,
        keys::MUTATE_PODS_PATH,
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}]),
    );
    // Only Ray Pods and Job Pods reach raygate: heads and workers carry `ray.io/node-type`,
    // raygate's submitter Pods `ray.io/originated-from-crd=RayJob`; KubeRay's submitter Pods
    // carry no Ray label, only the Job controller's `batch.kubernetes.io/job-name` and its
    // ownerReference (raygate allows those of ordinary Jobs unchanged). Mirror Pods are never
    // mutated.
    pods["matchConditions"] = json!([
        {
            "name": "ray-or-job-pod",
            "expression": format!(
                "has(object.metadata.labels) && ('{node_type}' in object.metadata.labels || \
                 ('{origin}' in object.metadata.labels && object.metadata.labels['{origin}'] == 'RayJob') || \
                 ('{job_name}' in object.metadata.labels && has(object.metadata.ownerReferences) && \
                 object.metadata.ownerReferences.exists(o, o.kind == 'Job' && o.apiVersion == 'batch/v1')))",
                node_type = keys::RAY_NODE_TYPE_LABEL,
                origin = keys::ORIGINATED_FROM_CRD_LABEL,
                job_name = keys::JOB_NAME_LABEL,
            ),
        },
        {
            "name": "not-mirror-pod",
            "expression": format!(
                "!has(object.metadata.annotations) || !('{}' in object.metadata.annotations)",
                keys::MIRROR_POD_ANNOTATION
            ),
        },
    ]);
    // The patch is idempotent, so it is safe to run again after later mutations.
    pods["reinvocationPolicy"] = json!("IfNeeded");
    let mut ray = webhook(
        "rayobjects.mutate.raygate.io",
        namespace,
        client,
        keys::MUTATE_RAY_PATH,
        ray_rules(&["CREATE"]),
    );
    // Queue defaulting only adds what is missing: idempotent.
    ray["reinvocationPolicy"] = json!("IfNeeded");
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": metadata(WEBHOOK_CONFIGURATION_NAME, None),
        "webhooks": [pods, ray],
    })
}

fn validating_webhooks(namespace: &str, client: &WebhookClient) -> Value {
    let opted_in = webhook(
        "rayobjects.validate.raygate.io",
        namespace,
        client,
        keys::VALIDATE_RAY_PATH,
        ray_rules(&["CREATE", "UPDATE"]),
    );
    // Elsewhere raygate still catches broken RayJobs at `kubectl apply`, but an outage of raygate
    // must not block Ray objects of namespaces that did not opt in.
    let mut elsewhere = webhook(
        "rayobjects-elsewhere.validate.raygate.io",
        namespace,
        client,
        keys::VALIDATE_RAY_PATH,
        ray_rules(&["CREATE", "UPDATE"]),
    );
    elsewhere["namespaceSelector"] = json!({"matchExpressions": [
        {"key": keys::NAMESPACE_OPT_IN_LABEL, "operator": "NotIn", "values": [keys::NAMESPACE_OPT_IN_VALUE]},
        {"key": keys::NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": ["kube-system", namespace]},
    ]});
    elsewhere["failurePolicy"] = json!("Ignore");
    // QueuePolicies are cluster-scoped admin objects of raygate's own API (no namespace to
    // select): a policy raygate has not checked is never stored.
    let mut policies = webhook(
        "queuepolicies.validate.raygate.io",
        namespace,
        client,
        keys::VALIDATE_QUEUE_POLICY_PATH,
        json!([{
            "apiGroups": [keys::RAYGATE_GROUP],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["queuepolicies"],
            "scope": "Cluster",
        }]),
    );
    if let Some(policy_webhook) = policies.as_object_mut() {
        policy_webhook.remove("namespaceSelector");
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata(WEBHOOK_CONFIGURATION_NAME, None),
        "webhooks": [opted_in, elsewhere, policies],
    })
}

#[cfg(test)]
mod tests;
