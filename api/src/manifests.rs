//! Everything needed to install raygate, rendered from its settings ([`InstallOptions`]).
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
//! * **Policy without escape** (`docs/queue-policy.md`). Three more validating webhooks see
//!   every namespace but `kube-system` and raygate's own: Namespaces, only when the opt-in label
//!   changes (`matchConditions`; always `Fail`, a rare admin action); Pods with
//!   `schedulerName: volcano` that name no PodGroup; and PodGroups (CREATE, and UPDATEs that
//!   change `spec`). The last two follow `failure_policy`: `Fail` keeps the escape closed while
//!   raygate is down, at the price of holding up new Volcano gangs cluster-wide until it is back.
//! * **Hardened Pods.** Two replicas spread over nodes with a PodDisruptionBudget, non-root,
//!   read-only root file system, no capabilities, `RuntimeDefault` seccomp, requests and limits,
//!   probes on `/healthz` and `/readyz`.

use k8s_openapi::ByteString;
use serde_json::{Value, json};

use crate::crd;
use crate::keys;
use crate::settings::OptInLabel;

/// The inputs of a rendering: every setting the Helm chart (`manifests/chart`) offers too, so
/// that `raygate manifests` and `helm template` render the same objects for the same settings
/// (checked by `tests/tests/chart.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallOptions {
    /// Namespace raygate runs in.
    pub namespace: String,
    /// Container image of raygate.
    pub image: String,
    /// The container's `imagePullPolicy`.
    pub image_pull_policy: String,
    /// Replicas of the Deployment; with 2 or more a PodDisruptionBudget keeps one serving.
    pub replicas: u32,
    /// The namespace label that opts a namespace into Volcano gang scheduling.
    pub opt_in_label: OptInLabel,
    /// `failurePolicy` of the webhooks of opted-in namespaces.
    pub failure_policy: FailurePolicy,
    /// Where the webhook's serving certificate comes from.
    pub certificates: Certificates,
    /// Whether the admission and conversion webhook runs.
    pub webhook: bool,
    /// Whether the reconciler runs.
    pub reconciler: bool,
    /// `--reconciler`: the controller of RayJobs and RayClusters in namespaces without the
    /// `raygate.io/reconciler` label (`raygate` or `kuberay`).
    pub default_reconciler: String,
    /// `--namespace-selector`: a label selector on Namespaces (e.g. `team=ml,!legacy`); the
    /// reconciler leaves the Ray objects of namespaces it does not select alone. Empty: all.
    pub namespace_selector: String,
    /// `--feature-gates` (KubeRay's, e.g. `RayJobDeletionPolicy=true`); empty for the defaults.
    pub feature_gates: String,
    /// The container's resource requests and limits (`cpu`, `memory`, ...).
    pub resources: Resources,
    /// `--log-format`: `text` or `json`.
    pub log_format: String,
    /// The Pods' `nodeSelector`.
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// The Pods' `tolerations`, as API objects.
    pub tolerations: Vec<Value>,
}

/// `failurePolicy` of a webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// A request raygate cannot answer is refused: nothing unchecked is stored.
    Fail,
    /// A request raygate cannot answer is let through unchecked.
    Ignore,
}

impl FailurePolicy {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// Where the webhook's serving certificate comes from, and who writes the CA bundle into the
/// webhook configurations and the `ray.io` CRDs' conversion webhooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Certificates {
    /// raygate creates, shares (Secret [`SELF_MANAGED_SECRET`]), rotates and injects them.
    SelfManaged,
    /// cert-manager issues the certificate into Secret [`TLS_SECRET`] (a self-signed Issuer
    /// of the chart's own unless `issuer` names one) and its CA injector writes the bundle.
    CertManager {
        /// An existing issuer (`kind`, `name`, e.g. `ClusterIssuer`, `corp-ca`), or `None`
        /// for the installation's own self-signed Issuer.
        issuer: Option<(String, String)>,
    },
    /// A `kubernetes.io/tls` Secret the user provides, mounted and reloaded on change.
    Files {
        /// Name of the Secret (keys `tls.crt` and `tls.key`) in raygate's namespace.
        secret: String,
        /// PEM of the CA that signed it, written as every webhook's `caBundle` (`None`: the
        /// user injects it).
        ca_bundle: Option<String>,
    },
}

/// Resource requests and limits of raygate's container, by resource name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resources {
    /// `resources.requests`.
    pub requests: std::collections::BTreeMap<String, String>,
    /// `resources.limits`.
    pub limits: std::collections::BTreeMap<String, String>,
}

impl Default for Resources {
    fn default() -> Self {
        let map = |pairs: [(&str, &str); 2]| {
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        };
        Resources {
            requests: map([("cpu", "100m"), ("memory", "64Mi")]),
            limits: map([("cpu", "1"), ("memory", "256Mi")]),
        }
    }
}

/// Image of the committed rendering (`manifests/install.yaml`).
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/raygate/raygate:", env!("CARGO_PKG_VERSION"));
/// Secret of the self-managed CA and certificate (`raygate run --cert-secret`'s default).
pub const SELF_MANAGED_SECRET: &str = "raygate-webhook-cert";
/// The reconciler's leader Lease (`raygate run --lease-name`'s default), in raygate's namespace.
pub const LEASE_NAME: &str = "raygate-reconciler";
/// Secret of the serving certificate in cert-manager mode.
pub const TLS_SECRET: &str = "raygate-webhook-tls";
/// Where the certificate Secret is mounted in cert-manager and files modes.
pub const TLS_MOUNT_PATH: &str = "/etc/raygate/tls";

impl Default for InstallOptions {
    fn default() -> Self {
        Self {
            namespace: keys::DEFAULT_NAMESPACE.to_owned(),
            image: DEFAULT_IMAGE.to_owned(),
            image_pull_policy: "IfNotPresent".to_owned(),
            replicas: 2,
            opt_in_label: OptInLabel::default(),
            failure_policy: FailurePolicy::Fail,
            certificates: Certificates::SelfManaged,
            webhook: true,
            reconciler: true,
            default_reconciler: "raygate".to_owned(),
            namespace_selector: String::new(),
            feature_gates: String::new(),
            resources: Resources::default(),
            log_format: "text".to_owned(),
            node_selector: std::collections::BTreeMap::new(),
            tolerations: Vec::new(),
        }
    }
}

impl InstallOptions {
    /// Whether raygate itself maintains the certificate Secret and the CA bundles.
    fn self_managed(&self) -> bool {
        self.webhook && self.certificates == Certificates::SelfManaged
    }

    /// The container's `raygate run` arguments for these settings.
    fn args(&self) -> Vec<String> {
        let mut args = vec![
            "run".to_owned(),
            format!("--enable-webhook={}", self.webhook),
            format!("--enable-reconciler={}", self.reconciler),
            format!("--reconciler={}", self.default_reconciler),
            format!("--namespace-label={}", self.opt_in_label),
            format!("--namespace-label-admins={}", self.opt_in_label.admins),
            format!("--log-format={}", self.log_format),
        ];
        if self.reconciler && !self.namespace_selector.is_empty() {
            args.push(format!("--namespace-selector={}", self.namespace_selector));
        }
        if !self.feature_gates.is_empty() {
            args.push(format!("--feature-gates={}", self.feature_gates));
        }
        if self.webhook {
            match self.certificates {
                Certificates::SelfManaged => args.push("--cert-mode=self-managed".to_owned()),
                Certificates::CertManager { .. } | Certificates::Files { .. } => args.extend([
                    "--cert-mode=files".to_owned(),
                    format!("--tls-cert-file={TLS_MOUNT_PATH}/tls.crt"),
                    format!("--tls-key-file={TLS_MOUNT_PATH}/tls.key"),
                ]),
            }
        }
        args
    }

    /// The Secret mounted at [`TLS_MOUNT_PATH`], if the certificate comes from one.
    fn tls_secret(&self) -> Option<&str> {
        match &self.certificates {
            _ if !self.webhook => None,
            Certificates::SelfManaged => None,
            Certificates::CertManager { .. } => Some(TLS_SECRET),
            Certificates::Files { secret, .. } => Some(secret),
        }
    }

    /// `cert-manager.io/inject-ca-from` of the webhook configurations and CRDs.
    fn ca_injection_annotation(&self) -> Option<Value> {
        matches!(self.certificates, Certificates::CertManager { .. }).then(|| {
            json!({"cert-manager.io/inject-ca-from": format!("{}/{}", self.namespace, CERTIFICATE_NAME)})
        })
    }

    /// The CA bundle written into the webhook configurations and CRDs (files mode).
    fn static_ca_bundle(&self) -> Option<&str> {
        match &self.certificates {
            Certificates::Files { ca_bundle, .. } => ca_bundle.as_deref(),
            _ => None,
        }
    }
}

/// Name of the cert-manager Certificate (and of the installation's own Issuer).
const CERTIFICATE_NAME: &str = "raygate-webhook";

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
    objects.extend(crds(options));
    objects.push(json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(keys::APP_NAME, Some(ns)),
    }));
    objects.push(cluster_role(options));
    objects.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata(keys::APP_NAME, None),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": keys::APP_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": keys::APP_NAME, "namespace": ns}],
    }));
    if let Some(role) = namespaced_role(options) {
        objects.push(role);
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(NAMESPACED_ROLE, Some(ns)),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAMESPACED_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": keys::APP_NAME, "namespace": ns}],
        }));
    }
    objects.extend(runtime_state(options));
    if let Certificates::CertManager { issuer } = &options.certificates
        && options.webhook
    {
        objects.extend(cert_manager_objects(ns, issuer.as_ref()));
    }
    if options.webhook {
        objects.push(service(ns));
    }
    objects.push(deployment(options));
    // One replica cannot keep one available through a drain: a budget would block it forever.
    if options.replicas >= 2 {
        objects.push(json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": metadata(keys::APP_NAME, Some(ns)),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": selector_labels()}},
        }));
    }
    if options.webhook {
        objects.extend(webhook_configurations(options, &WebhookClient::Service));
    }
    objects
}

/// The objects raygate fills in at run time, created empty by the installation so that they
/// belong to it: uninstalling (`helm uninstall`, `kubectl delete -f`) removes raygate's CA and
/// its leader Lease with everything else, and a reinstall starts afresh. raygate only writes
/// their contents (the Secret's data and annotations, the Lease's spec), which an upgrade of
/// the installation leaves alone.
fn runtime_state(options: &InstallOptions) -> Vec<Value> {
    let mut objects = Vec::new();
    if options.self_managed() {
        objects.push(json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata(SELF_MANAGED_SECRET, Some(&options.namespace)),
            "type": "Opaque",
        }));
    }
    if options.reconciler {
        objects.push(json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata(LEASE_NAME, Some(&options.namespace)),
        }));
    }
    objects
}

/// cert-manager mode: the serving Certificate (and, without a named issuer, the self-signed
/// Issuer that signs it; its `ca.crt` is then the certificate itself, which the CA injector
/// writes into the webhook configurations and CRDs).
fn cert_manager_objects(namespace: &str, issuer: Option<&(String, String)>) -> Vec<Value> {
    let mut objects = Vec::new();
    let issuer_ref = match issuer {
        Some((kind, name)) => json!({"kind": kind, "name": name, "group": "cert-manager.io"}),
        None => {
            objects.push(json!({
                "apiVersion": "cert-manager.io/v1",
                "kind": "Issuer",
                "metadata": metadata(CERTIFICATE_NAME, Some(namespace)),
                "spec": {"selfSigned": {}},
            }));
            json!({"kind": "Issuer", "name": CERTIFICATE_NAME, "group": "cert-manager.io"})
        }
    };
    let service = keys::APP_NAME;
    objects.push(json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": metadata(CERTIFICATE_NAME, Some(namespace)),
        "spec": {
            "secretName": TLS_SECRET,
            "issuerRef": issuer_ref,
            "dnsNames": [
                format!("{service}.{namespace}.svc"),
                format!("{service}.{namespace}.svc.cluster.local"),
            ],
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        },
    }));
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
    fn config(&self, options: &InstallOptions, path: &str) -> Value {
        match self {
            WebhookClient::Service => {
                let mut config = json!({"service": {
                    "namespace": options.namespace, "name": keys::APP_NAME, "path": path, "port": keys::SERVICE_PORT,
                }});
                if let Some(pem) = options.static_ca_bundle() {
                    config["caBundle"] = json!(ByteString(pem.as_bytes().to_vec()));
                }
                config
            }
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
/// installation with `options`, reached through `client`. [`render`] includes them with
/// [`WebhookClient::Service`]; everything but `clientConfig` is the same for every client, so
/// an environment that installs them with a URL has exactly the installation's scope.
pub fn webhook_configurations(options: &InstallOptions, client: &WebhookClient) -> [Value; 2] {
    [
        mutating_webhooks(options, client),
        validating_webhooks(options, client),
    ]
}

/// [`webhook_configurations`] as one multi-document YAML stream.
pub fn webhook_configurations_yaml(options: &InstallOptions, client: &WebhookClient) -> String {
    to_yaml_stream(
        "# raygate's webhook configurations, rendered by `raygate manifests --webhook-configurations`.\n",
        webhook_configurations(options, client),
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

/// The `ray.io` CRDs with their conversion webhook pointing at raygate's Service (without
/// the webhook nothing could convert, so they then store and serve objects unconverted), then
/// raygate's own `raygate.io` CRDs (QueuePolicy).
fn crds(options: &InstallOptions) -> Vec<Value> {
    let ray = crd::ray_crds().into_iter().map(|mut crd| {
        if options.webhook {
            let mut conversion = crd::webhook_conversion(&options.namespace);
            if let (Some(pem), Some(webhook)) =
                (options.static_ca_bundle(), conversion.webhook.as_mut())
                && let Some(client) = webhook.client_config.as_mut()
            {
                client.ca_bundle = Some(ByteString(pem.as_bytes().to_vec()));
            }
            crd.spec.conversion = Some(conversion);
        } else {
            crd.spec.conversion = None;
        }
        let mut value = serde_json::to_value(&crd).unwrap_or(Value::Null);
        if let Some(annotations) = options.ca_injection_annotation() {
            value["metadata"]["annotations"] = annotations;
        }
        value
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
/// Status is written with merge patches of the status subresource, never read through it.
const WRITE_STATUS: &[&str] = &["patch"];

/// Only what the enabled parts use: the webhook reads the objects its checks look up; the
/// reconciler manages what it creates; self-managed certificates need the CA-bundle patches.
fn cluster_role(options: &InstallOptions) -> Value {
    let mut rules = Vec::new();
    if options.reconciler {
        // The Ray objects: reconciled, status written, finalizer managed (patches, never
        // whole-object updates); a RayJob's own RayCluster is created, suspended and deleted,
        // and a RayJob deleted by its deletion strategy.
        rules.extend([
            rule(
                &["ray.io"],
                &["rayjobs"],
                &["get", "list", "watch", "patch", "delete"],
            ),
            rule(
                &["ray.io"],
                &["rayclusters"],
                &["get", "list", "watch", "create", "patch", "delete"],
            ),
            rule(
                &["ray.io"],
                &["rayjobs/status", "rayclusters/status"],
                WRITE_STATUS,
            ),
            rule(
                &["ray.io"],
                &["rayjobs/finalizers", "rayclusters/finalizers"],
                &["update"],
            ),
            // What the reconciler creates for them, read from its watch caches (never one by
            // one): Pods (replaced by deleting; patched only to label a multi-host Pod made before
            // raygate named replicas into one), head Services (patched on a retry), submitter
            // Jobs, PodGroups (resized). `get` on Pods and `patch` on `pods/resize` are held only
            // to grant them: RBAC lets raygate give an autoscaled cluster's Role no more than it
            // holds itself.
            rule(
                &[""],
                &["pods"],
                &["get", "list", "watch", "create", "patch", "delete"],
            ),
            rule(&[""], &["pods/resize"], &["patch"]),
            // An autoscaled cluster's autoscaler: its ServiceAccount, Role and RoleBinding,
            // created with its head (never read).
            rule(&[""], &["serviceaccounts"], &["create"]),
            // A token-authenticated cluster's token: its Secret created with its head, and read
            // (by name, never listed) for the dashboard calls.
            rule(&[""], &["secrets"], &["get", "create"]),
            rule(
                &["rbac.authorization.k8s.io"],
                &["roles", "rolebindings"],
                &["create"],
            ),
            // A head Ingress (`enableIngress`), created with its head (never read).
            rule(&["networking.k8s.io"], &["ingresses"], &["create"]),
            rule(&[""], &["services"], &["list", "watch", "create", "patch"]),
            rule(
                &["batch"],
                &["jobs"],
                &["list", "watch", "create", "delete"],
            ),
            rule(
                &["scheduling.volcano.sh"],
                &["podgroups"],
                &["list", "watch", "create", "patch"],
            ),
        ]);
    } else {
        // The webhook's lookups: RayJobs and RayClusters (name clashes, submitter Jobs' owners)
        // and Jobs (the submitter Pods it onboards).
        rules.extend([
            rule(&["ray.io"], &["rayjobs", "rayclusters"], READ),
            rule(&["batch"], &["jobs"], READ),
        ]);
    }
    // Admission policy (both parts), from the webhook's caches and the QueuePolicy status
    // controller's watch, and the reconciler's queue watch (why a gang is pending): never read
    // one by one.
    rules.extend([
        rule(&["scheduling.volcano.sh"], &["queues"], &["list", "watch"]),
        rule(&["raygate.io"], &["queuepolicies"], &["list", "watch"]),
    ]);
    if options.reconciler {
        rules.push(rule(
            &["raygate.io"],
            &["queuepolicies/status"],
            WRITE_STATUS,
        ));
    }
    rules.push(rule(&[""], &["namespaces"], READ));
    // The shapes of the nodes, for feasibility: at admission (the webhook's Node cache) and in
    // the reconciler's `GangPending` condition (its own).
    rules.push(rule(&[""], &["nodes"], &["list", "watch"]));
    if options.reconciler {
        // kube-runtime's recorder writes events.k8s.io/v1 Events (and patches their series).
        rules.push(rule(&["events.k8s.io"], &["events"], &["create", "patch"]));
    }
    if options.self_managed() {
        // CA bundle injection into raygate's own webhook configurations and the ray.io CRDs.
        rules.extend([
            named_rule(
                &["admissionregistration.k8s.io"],
                &[
                    "mutatingwebhookconfigurations",
                    "validatingwebhookconfigurations",
                ],
                &[WEBHOOK_CONFIGURATION_NAME],
                &["get", "patch"],
            ),
            named_rule(
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                &["rayjobs.ray.io", "rayclusters.ray.io"],
                &["get", "patch"],
            ),
        ]);
    }
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": metadata(keys::APP_NAME, None),
        "rules": rules,
    })
}

/// The Role in raygate's namespace, if any part needs one.
fn namespaced_role(options: &InstallOptions) -> Option<Value> {
    let mut rules = Vec::new();
    if options.self_managed() {
        // The self-managed certificate Secret (create cannot be limited by name).
        rules.push(rule(
            &[""],
            &["secrets"],
            &["get", "list", "watch", "create", "patch"],
        ));
    }
    if options.reconciler {
        // Leader election of the reconciler.
        // kube-lease-manager reads, creates and patches the Lease; it does not watch it.
        rules.push(rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "create", "patch"],
        ));
    }
    (!rules.is_empty()).then(|| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(NAMESPACED_ROLE, Some(&options.namespace)),
            "rules": rules,
        })
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
    // One plain-HTTP listener answers the probes and serves every part's metrics; while the
    // webhook runs, its `/readyz` turns 503 while draining.
    let probe = |path: &str, period: i64| {
        json!({
            "httpGet": {"path": path, "port": "health"},
            "periodSeconds": period,
            "timeoutSeconds": 2,
            "failureThreshold": PROBE_FAILURE_THRESHOLD,
        })
    };
    let mut ports = Vec::new();
    if options.webhook {
        ports.push(
            json!({"name": "webhook", "containerPort": keys::WEBHOOK_PORT, "protocol": "TCP"}),
        );
    }
    ports.push(json!({"name": "health", "containerPort": keys::HEALTH_PORT, "protocol": "TCP"}));
    let mut mounts = vec![json!({"name": "tmp", "mountPath": "/tmp"})];
    let mut volumes = vec![json!({"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}})];
    if let Some(secret) = options.tls_secret() {
        mounts.push(json!({"name": "tls", "mountPath": TLS_MOUNT_PATH, "readOnly": true}));
        volumes.push(json!({"name": "tls", "secret": {"secretName": secret}}));
    }
    let mut deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(keys::APP_NAME, Some(&options.namespace)),
        "spec": {
            "replicas": options.replicas,
            "selector": {"matchLabels": selector_labels()},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": app_labels()},
                "spec": {
                    "serviceAccountName": keys::APP_NAME,
                    "automountServiceAccountToken": true,
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
                    "priorityClassName": "system-cluster-critical",
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": RUN_AS,
                        "runAsGroup": RUN_AS,
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
                        "imagePullPolicy": options.image_pull_policy,
                        "args": options.args(),
                        "env": container_env(),
                        "ports": ports,
                        // Kubernetes removes a terminating Pod from the Service's endpoints
                        // while it sends SIGTERM; until every kube-proxy has caught up, new
                        // connections still reach it. Serving on for a few seconds before the
                        // signal keeps them from being refused (a failed admission with
                        // `failurePolicy: Fail`); the drain that follows has its own timeout.
                        "lifecycle": {"preStop": {"sleep": {"seconds": PRE_STOP_SECONDS}}},
                        "livenessProbe": probe("/healthz", 10),
                        "readinessProbe": probe("/readyz", READINESS_PERIOD_SECONDS),
                        "resources": {
                            "requests": options.resources.requests,
                            "limits": options.resources.limits,
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "runAsNonRoot": true,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    });
    let pod = &mut deployment["spec"]["template"]["spec"];
    if !options.node_selector.is_empty() {
        pod["nodeSelector"] = json!(options.node_selector);
    }
    if !options.tolerations.is_empty() {
        pod["tolerations"] = json!(options.tolerations);
    }
    deployment
}

/// How long a terminating replica keeps serving before SIGTERM (`preStop` sleep): longer than
/// kube-proxy takes to drop it from the Service here (about a second; seen in
/// `tests/in-cluster/tests/lifecycle.rs`, which failed 4 of 288 admissions without it).
pub const PRE_STOP_SECONDS: i64 = 5;

/// How often the kubelet asks a replica's `/readyz`.
pub const READINESS_PERIOD_SECONDS: i64 = 5;

/// Failed probes in a row before the kubelet acts (unready, or a restart for `/healthz`).
pub const PROBE_FAILURE_THRESHOLD: i64 = 3;

/// How long a replica that stops of its own accord (the reconciler's fatal error in
/// `raygate run`) answers 503 on `/readyz` while still serving, before it stops accepting: the
/// kubelet needs [`PROBE_FAILURE_THRESHOLD`] failed probes to mark it unready, and the Service
/// then drops it as fast as after a `preStop` ([`PRE_STOP_SECONDS`]).
pub const LEAVE_SERVICE_SECONDS: i64 =
    READINESS_PERIOD_SECONDS * PROBE_FAILURE_THRESHOLD + PRE_STOP_SECONDS;

/// How long Kubernetes lets a stopping replica take before it is killed: the `preStop` sleep,
/// the webhook's drain ([`keys::DRAIN_TIMEOUT_SECONDS`], which outlasts the API server's idle
/// connections to it) and 10 s for the rest of the process to stop.
pub const TERMINATION_GRACE_SECONDS: i64 =
    PRE_STOP_SECONDS + keys::DRAIN_TIMEOUT_SECONDS as i64 + 10;

/// UID and GID raygate's container runs as (the image's own non-root user).
pub const RUN_AS: i64 = 65532;

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
fn opted_in_namespaces(options: &InstallOptions) -> Value {
    let OptInLabel { key, value, .. } = &options.opt_in_label;
    json!({"matchExpressions": [
        {"key": key, "operator": "In", "values": [value]},
        {"key": keys::NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": ["kube-system", options.namespace]},
    ]})
}

/// Fields every raygate webhook shares.
fn webhook(
    name: &str,
    options: &InstallOptions,
    client: &WebhookClient,
    path: &str,
    rules: Value,
) -> Value {
    json!({
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": client.config(options, path),
        "rules": rules,
        "namespaceSelector": opted_in_namespaces(options),
        "failurePolicy": options.failure_policy.as_str(),
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": WEBHOOK_TIMEOUT_SECONDS,
    })
}

/// The webhook configurations' metadata: cert-manager's CA injector is told where to look.
fn webhook_configuration_metadata(options: &InstallOptions) -> Value {
    let mut metadata = metadata(WEBHOOK_CONFIGURATION_NAME, None);
    if let Some(annotations) = options.ca_injection_annotation() {
        metadata["annotations"] = annotations;
    }
    metadata
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

fn mutating_webhooks(options: &InstallOptions, client: &WebhookClient) -> Value {
    let mut pods = webhook(
        "pods.raygate.io",
        options,
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
        options,
        client,
        keys::MUTATE_RAY_PATH,
        ray_rules(&["CREATE"]),
    );
    // Queue defaulting only adds what is missing: idempotent.
    ray["reinvocationPolicy"] = json!("IfNeeded");
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": webhook_configuration_metadata(options),
        "webhooks": [pods, ray],
    })
}

fn validating_webhooks(options: &InstallOptions, client: &WebhookClient) -> Value {
    let opted_in = webhook(
        "rayobjects.validate.raygate.io",
        options,
        client,
        keys::VALIDATE_RAY_PATH,
        ray_rules(&["CREATE", "UPDATE"]),
    );
    // Elsewhere raygate still catches broken RayJobs at `kubectl apply`, but an outage of raygate
    // must not block Ray objects of namespaces that did not opt in.
    let mut elsewhere = webhook(
        "rayobjects-elsewhere.validate.raygate.io",
        options,
        client,
        keys::VALIDATE_RAY_PATH,
        ray_rules(&["CREATE", "UPDATE"]),
    );
    let OptInLabel { key, value, .. } = &options.opt_in_label;
    elsewhere["namespaceSelector"] = json!({"matchExpressions": [
        {"key": key, "operator": "NotIn", "values": [value]},
        {"key": keys::NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": ["kube-system", options.namespace]},
    ]});
    elsewhere["failurePolicy"] = json!("Ignore");
    // QueuePolicies are cluster-scoped admin objects of raygate's own API (no namespace to
    // select): a policy raygate has not checked is never stored.
    let mut policies = webhook(
        "queuepolicies.validate.raygate.io",
        options,
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
    // Whatever `failure_policy` says: a QueuePolicy is rare admin input, and one that raygate
    // could not check must not be stored.
    policies["failurePolicy"] = json!(FailurePolicy::Fail.as_str());
    let [namespaces, volcano_pods, pod_groups] = escape_webhooks(options, client);
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": webhook_configuration_metadata(options),
        "webhooks": [opted_in, elsewhere, policies, namespaces, volcano_pods, pod_groups],
    })
}

/// Every namespace but `kube-system` and raygate's own, opted in or not.
fn all_but_system_namespaces(options: &InstallOptions) -> Value {
    json!({"matchExpressions": [
        {"key": keys::NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": ["kube-system", options.namespace]},
    ]})
}

/// The webhooks that keep QueuePolicies without escape: the opt-in label guard, Volcano Pods
/// without a PodGroup, and PodGroups, in every namespace but the system ones.
fn escape_webhooks(options: &InstallOptions, client: &WebhookClient) -> [Value; 3] {
    let key = &options.opt_in_label.key;
    let mut namespaces = webhook(
        "namespaces.validate.raygate.io",
        options,
        client,
        keys::VALIDATE_NAMESPACE_PATH,
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["namespaces"], "scope": "Cluster"}]),
    );
    namespaces["namespaceSelector"] = all_but_system_namespaces(options);
    // Only a change of the opt-in label reaches raygate: the namespace controller's and every
    // other Namespace write go by, so `Fail` only ever holds up a change of the label itself.
    let value_of = |object: &str| {
        format!(
            "(has({object}.metadata.labels) && '{key}' in {object}.metadata.labels ? {object}.metadata.labels['{key}'] : '')"
        )
    };
    namespaces["matchConditions"] = json!([{
        "name": "opt-in-label-changes",
        "expression": format!(
            "request.operation == 'CREATE' ? {new} != '' : {new} != {old}",
            new = value_of("object"),
            old = value_of("oldObject"),
        ),
    }]);
    namespaces["failurePolicy"] = json!(FailurePolicy::Fail.as_str());
    let mut volcano_pods = webhook(
        "volcanopods.validate.raygate.io",
        options,
        client,
        keys::VALIDATE_VOLCANO_POD_PATH,
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}]),
    );
    volcano_pods["namespaceSelector"] = all_but_system_namespaces(options);
    // Only Pods Volcano schedules that are in no PodGroup yet (those in one are bound by its
    // queue, checked by the PodGroup webhook); mirror Pods never.
    volcano_pods["matchConditions"] = json!([
        {
            "name": "volcano-pod-without-group",
            "expression": format!(
                "has(object.spec.schedulerName) && object.spec.schedulerName == '{scheduler}' && \
                 (!has(object.metadata.annotations) || !('{group}' in object.metadata.annotations))",
                scheduler = keys::VOLCANO_SCHEDULER_NAME,
                group = keys::POD_GROUP_ANNOTATION,
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
    let mut pod_groups = webhook(
        "podgroups.validate.raygate.io",
        options,
        client,
        keys::VALIDATE_POD_GROUP_PATH,
        json!([{"apiGroups": ["scheduling.volcano.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["podgroups"], "scope": "Namespaced"}]),
    );
    pod_groups["namespaceSelector"] = all_but_system_namespaces(options);
    // The scheduler's status writes change no `spec`.
    pod_groups["matchConditions"] = json!([{
        "name": "spec-written",
        "expression": "request.operation == 'CREATE' || object.spec != oldObject.spec",
    }]);
    [namespaces, volcano_pods, pod_groups]
}

#[cfg(test)]
mod tests;
