//! The head Service and the Pods of a RayCluster, built the way KubeRay v1.7 builds them
//! (docs/upstream.md, "KubeRay: RayCluster controller").
//!
//! Pods are built from the typed Pod template; the Volcano metadata is not added here but by
//! [`crate::onboarding`], which the reconciler applies to the built Pod in opted-in namespaces
//! (the same function the webhook uses).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ExecAction, HTTPGetAction,
    ObjectFieldSelector, Pod, PodSpec, Probe, Service, ServicePort, ServiceSpec, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use serde_json::Value;

use super::{auth, autoscaler, gcs_wait};
use crate::keys::{
    self, APP_NAME_LABEL, CREATED_BY_LABEL, CREATED_BY_VALUE, DEFAULT_CLIENT_PORT,
    DEFAULT_CLUSTER_DOMAIN, DEFAULT_DASHBOARD_PORT, DEFAULT_GCS_PORT, HEAD_GROUP, HEAD_NODE_TYPE,
    IDENTIFIER_LABEL, IS_RAY_NODE_LABEL, OVERWRITE_CONTAINER_CMD_ANNOTATION, WORKER_NODE_TYPE,
};
use crate::quantity::ResourceQuantity;
use crate::ray::v1::{RayCluster, WorkerGroupSpec};

/// Settings of the builders that come from the operator's configuration, not the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildOptions {
    /// DNS suffix of Service FQDNs (`CLUSTER_DOMAIN`, default `cluster.local`).
    pub cluster_domain: String,
    /// Keep a ClusterIP on the head Service (`ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE=true`) instead
    /// of making it headless.
    pub head_cluster_ip: bool,
    /// Put the `wait-gcs-ready` init container into worker Pods
    /// (`ENABLE_INIT_CONTAINER_INJECTION`, on unless `false`).
    pub wait_gcs_ready: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.to_string(),
            head_cluster_ip: false,
            wait_gcs_ready: true,
        }
    }
}

/// Longest name KubeRay gives an object derived from a cluster name (`utils.CheckName`).
const MAX_NAME_LENGTH: usize = 50;

/// KubeRay's `CheckName`: a name cut to its last 50 characters, and `r` in place of a first
/// character that is a digit or punctuation.
pub fn check_name(name: &str) -> String {
    let cut = name
        .char_indices()
        .nth(name.chars().count().saturating_sub(MAX_NAME_LENGTH))
        .map_or(name, |(at, _)| &name[at..]);
    let mut chars = cut.chars();
    match chars.next() {
        Some(first) if first.is_ascii_digit() || first.is_ascii_punctuation() => {
            format!("r{}", chars.as_str())
        }
        _ => cut.to_string(),
    }
}

/// Which Pod of a cluster to build.
#[derive(Clone, Copy, Debug)]
pub enum PodRole<'a> {
    /// The head Pod.
    Head,
    /// A worker Pod of this group.
    Worker(&'a WorkerGroupSpec),
}

fn name_of(cluster: &RayCluster) -> &str {
    cluster.metadata.name.as_deref().unwrap_or_default()
}

fn namespace_of(cluster: &RayCluster) -> &str {
    cluster.metadata.namespace.as_deref().unwrap_or_default()
}

/// The controller ownerReference every child of `cluster` carries.
pub fn owner_reference(cluster: &RayCluster) -> OwnerReference {
    OwnerReference {
        api_version: "ray.io/v1".to_string(),
        kind: "RayCluster".to_string(),
        name: name_of(cluster).to_string(),
        uid: cluster.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Name of the head Service: `headGroupSpec.headService.metadata.name` when set, else
/// `<cluster>-head-svc`.
pub fn head_service_name(cluster: &RayCluster) -> String {
    cluster
        .spec
        .head_group_spec
        .head_service
        .as_ref()
        .and_then(|s| s.metadata.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| keys::head_service_name(name_of(cluster)))
}

/// Fully qualified DNS name of the head Service.
pub fn head_service_fqdn(cluster: &RayCluster, options: &BuildOptions) -> String {
    format!(
        "{}.{}.svc.{}",
        head_service_name(cluster),
        namespace_of(cluster),
        options.cluster_domain
    )
}

fn head_labels(cluster: &RayCluster) -> BTreeMap<String, String> {
    let name = name_of(cluster);
    BTreeMap::from([
        (keys::RAY_CLUSTER_LABEL.to_string(), name.to_string()),
        (
            keys::RAY_NODE_TYPE_LABEL.to_string(),
            HEAD_NODE_TYPE.to_string(),
        ),
        (
            IDENTIFIER_LABEL.to_string(),
            identifier(name, HEAD_NODE_TYPE),
        ),
    ])
}

/// `ray.io/identifier`: `<cluster>-<node type>`, trimmed from the left to 63 characters.
pub(crate) fn identifier(cluster: &str, node_type: &str) -> String {
    let id = format!("{cluster}-{node_type}");
    let start = id.len().saturating_sub(63);
    id.get(start..).unwrap_or(&id).to_string()
}

/// The ports of the head: one per port of the Ray container (plus `metrics: 8080` when none is
/// named so), or KubeRay's defaults when the container declares none; sorted by name.
pub(super) fn head_ports(cluster: &RayCluster) -> Vec<ServicePort> {
    let container_ports = cluster
        .spec
        .head_group_spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.ports.clone())
        .unwrap_or_default();
    let mut ports: BTreeMap<String, i32> = BTreeMap::new();
    if container_ports.is_empty() {
        for (name, port) in [
            ("client", DEFAULT_CLIENT_PORT),
            ("gcs-server", DEFAULT_GCS_PORT),
            ("dashboard", DEFAULT_DASHBOARD_PORT),
            ("metrics", 8080),
            ("serve", 8000),
        ] {
            ports.insert(name.to_string(), port);
        }
    } else {
        for p in &container_ports {
            let name = p
                .name
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| format!("{}-port", p.container_port));
            ports.entry(name).or_insert(p.container_port);
        }
        ports.entry("metrics".to_string()).or_insert(8080);
    }
    ports
        .into_iter()
        .map(|(name, port)| ServicePort {
            name: Some(name),
            port,
            target_port: Some(IntOrString::Int(port)),
            app_protocol: Some("tcp".to_string()),
            ..ServicePort::default()
        })
        .collect()
}

/// The head Service: KubeRay's name, labels, selector and ports; headless unless
/// [`BuildOptions::head_cluster_ip`] or a non-ClusterIP `serviceType` is asked for.
pub fn build_head_service(cluster: &RayCluster, options: &BuildOptions) -> Service {
    let custom = cluster.spec.head_group_spec.head_service.clone();
    let mut service = custom.map_or_else(Service::default, |service| *service);
    let mut labels = service.metadata.labels.take().unwrap_or_default();
    let template_app_name = cluster
        .spec
        .head_group_spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref())
        .and_then(|l| l.get(APP_NAME_LABEL))
        .cloned();
    let mut selector = head_labels(cluster);
    selector.insert(
        APP_NAME_LABEL.to_string(),
        template_app_name.unwrap_or_else(|| "kuberay".to_string()),
    );
    labels.extend(selector.clone());
    labels.insert(CREATED_BY_LABEL.to_string(), CREATED_BY_VALUE.to_string());
    let mut annotations = service.metadata.annotations.take().unwrap_or_default();
    annotations.extend(
        cluster
            .spec
            .head_service_annotations
            .clone()
            .unwrap_or_default(),
    );
    service.metadata = ObjectMeta {
        name: Some(head_service_name(cluster)),
        namespace: Some(namespace_of(cluster).to_string()),
        labels: Some(labels),
        annotations: (!annotations.is_empty()).then_some(annotations),
        owner_references: Some(vec![owner_reference(cluster)]),
        ..ObjectMeta::default()
    };
    let mut spec = service.spec.take().unwrap_or_default();
    let mut ports = spec.ports.take().unwrap_or_default();
    for port in head_ports(cluster) {
        if !ports.iter().any(|p| p.name == port.name) {
            ports.push(port);
        }
    }
    ports.sort_by(|a, b| a.name.cmp(&b.name));
    let service_type = cluster
        .spec
        .head_group_spec
        .service_type
        .clone()
        .or(spec.type_.take())
        .filter(|t| !t.is_empty());
    let cluster_ip_type = matches!(service_type.as_deref(), None | Some("ClusterIP"));
    let headless = cluster_ip_type && !options.head_cluster_ip;
    service.spec = Some(ServiceSpec {
        selector: Some(selector),
        ports: Some(ports),
        type_: service_type,
        cluster_ip: if headless {
            Some("None".to_string())
        } else {
            spec.cluster_ip.take()
        },
        publish_not_ready_addresses: headless
            .then_some(true)
            .or(spec.publish_not_ready_addresses),
        ..spec
    });
    service.status = None;
    service
}

/// Whether some worker group of `cluster` has `numOfHosts > 1`: such a cluster gets a headless
/// worker Service ([`build_headless_worker_service`]).
pub fn has_multi_host_group(cluster: &RayCluster) -> bool {
    cluster
        .spec
        .worker_group_specs
        .iter()
        .flatten()
        .any(|g| crate::sizing::group_hosts(g) > 1)
}

/// Name of the headless worker Service: `<cluster>-headless` (KubeRay v1.7).
pub fn headless_worker_service_name(cluster: &RayCluster) -> String {
    format!("{}-headless", name_of(cluster))
}

/// The headless Service over a cluster's worker Pods, by which the hosts of a multi-host
/// replica find each other (KubeRay makes it when a group has `numOfHosts > 1`): no cluster
/// IP, no ports, and the addresses of Pods that are not ready yet published too, since the
/// hosts must reach each other before Ray is up. Labelled as KubeRay labels it, and with
/// `ray.io/cluster` and `ray.io/node-type=worker` as well, which raygate's Service watch selects
/// by.
pub fn build_headless_worker_service(cluster: &RayCluster) -> Service {
    let name = name_of(cluster);
    let selector = BTreeMap::from([
        (keys::RAY_CLUSTER_LABEL.to_string(), name.to_string()),
        (
            keys::RAY_NODE_TYPE_LABEL.to_string(),
            WORKER_NODE_TYPE.to_string(),
        ),
    ]);
    let mut labels = selector.clone();
    labels.insert(
        keys::HEADLESS_WORKER_SERVICE_LABEL.to_string(),
        name.to_string(),
    );
    Service {
        metadata: ObjectMeta {
            name: Some(headless_worker_service_name(cluster)),
            namespace: Some(namespace_of(cluster).to_string()),
            labels: Some(labels),
            owner_references: Some(vec![owner_reference(cluster)]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_string()),
            selector: Some(selector),
            type_: Some("ClusterIP".to_string()),
            publish_not_ready_addresses: Some(true),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The generateName-style prefix of a Pod: `<cluster>-head-` or `<cluster>-<group>-worker-`,
/// the part before the role cut to 50 characters (KubeRay's rule), lower-cased.
pub fn pod_name_prefix(cluster: &RayCluster, role: PodRole<'_>) -> String {
    let (base, suffix) = match role {
        PodRole::Head => (name_of(cluster).to_string(), "head"),
        PodRole::Worker(group) => (
            format!("{}-{}", name_of(cluster), group.group_name),
            "worker",
        ),
    };
    let cut: String = base.chars().take(50).collect();
    format!("{cut}-{suffix}-").to_lowercase()
}

/// The alphabet of Kubernetes' random name suffixes (no vowels, no confusable characters).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Five characters from [`SUFFIX_ALPHABET`] derived from the cluster UID, the group and the
/// slot with FNV-1a, a fixed hash, so the same slot always gets the same name.
pub fn pod_name_suffix(cluster_uid: &str, group: &str, slot: u32) -> String {
    let slot = slot.to_le_bytes();
    let mut hash = fnv1a([cluster_uid.as_bytes(), b"/", group.as_bytes(), b"/", &slot]);
    let radix = SUFFIX_ALPHABET.len() as u64;
    (0..5)
        .map(|_| {
            let c = SUFFIX_ALPHABET[(hash % radix) as usize] as char;
            hash /= radix;
            c
        })
        .collect()
}

/// 64-bit FNV-1a over the concatenated `parts`: a fixed hash (unlike std's), so what is derived
/// from it stays the same across processes and versions.
pub(crate) fn fnv1a<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.into_iter().flatten() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The name of the Pod in `slot` of a role: prefix plus deterministic suffix.
pub fn pod_name(cluster: &RayCluster, role: PodRole<'_>, slot: u32) -> String {
    let group = match role {
        PodRole::Head => HEAD_GROUP,
        PodRole::Worker(g) => g.group_name.as_str(),
    };
    let uid = cluster.metadata.uid.as_deref().unwrap_or_default();
    format!(
        "{}{}",
        pod_name_prefix(cluster, role),
        pod_name_suffix(uid, group, slot)
    )
}

/// The `ray start` parameters of a role: the user's, plus KubeRay's defaults where absent.
pub fn ray_start_params(
    cluster: &RayCluster,
    role: PodRole<'_>,
    options: &BuildOptions,
) -> BTreeMap<String, String> {
    let (user, resources, labels, container) = match role {
        PodRole::Head => {
            let head = &cluster.spec.head_group_spec;
            (
                head.ray_start_params.clone(),
                head.resources.as_ref(),
                head.labels.as_ref(),
                head.template
                    .spec
                    .as_ref()
                    .and_then(|s| s.containers.first()),
            )
        }
        PodRole::Worker(group) => (
            group.ray_start_params.clone(),
            group.resources.as_ref(),
            group.labels.as_ref(),
            group
                .template
                .spec
                .as_ref()
                .and_then(|s| s.containers.first()),
        ),
    };
    let mut params = user.unwrap_or_default();
    let mut default = |key: &str, value: String| {
        params.entry(key.to_string()).or_insert(value);
    };
    match role {
        PodRole::Head => default("dashboard-host", "0.0.0.0".to_string()),
        PodRole::Worker(_) => default(
            "address",
            format!(
                "{}:{}",
                head_service_fqdn(cluster, options),
                gcs_port(cluster)
            ),
        ),
    }
    default("metrics-export-port", "8080".to_string());
    default("dashboard-agent-listen-port", "52365".to_string());
    if let Some(container) = container {
        if let Some(cpus) = container_resource(container, "cpu") {
            let millis = cpus.nanos().div_euclid(1_000_000);
            let whole = (millis + 999).div_euclid(1000);
            default("num-cpus", whole.to_string());
        }
        if let Some(memory) = container_limit(container, "memory") {
            default("memory", (memory.nanos() / 1_000_000_000).to_string());
        }
        if let Some(gpus) = container_gpu_limit(container) {
            default("num-gpus", (gpus.nanos() / 1_000_000_000).to_string());
        }
    }
    if cluster.spec.autoscaling() {
        default("no-monitor", "true".to_string());
    }
    if let Some(resources) = resources.filter(|r| !r.is_empty()) {
        let json = serde_json::to_string(resources).unwrap_or_default();
        params.insert("resources".to_string(), format!("'{json}'"));
    }
    if let Some(labels) = labels.filter(|l| !l.is_empty()) {
        let joined: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        params.insert("labels".to_string(), joined.join(","));
    }
    params.insert("block".to_string(), "true".to_string());
    params
}

fn gcs_port(cluster: &RayCluster) -> String {
    cluster
        .spec
        .head_group_spec
        .ray_start_params
        .as_ref()
        .and_then(|p| p.get("port"))
        .cloned()
        .unwrap_or_else(|| DEFAULT_GCS_PORT.to_string())
}

fn container_limit(container: &Container, name: &str) -> Option<ResourceQuantity> {
    let resources = container.resources.as_ref()?;
    let q = resources.limits.as_ref()?.get(name)?;
    ResourceQuantity::try_from(q).ok()
}

/// A container's limit of `name`, else its request.
fn container_resource(container: &Container, name: &str) -> Option<ResourceQuantity> {
    container_limit(container, name).or_else(|| {
        let q = container.resources.as_ref()?.requests.as_ref()?.get(name)?;
        ResourceQuantity::try_from(q).ok()
    })
}

fn container_gpu_limit(container: &Container) -> Option<ResourceQuantity> {
    let limits = container.resources.as_ref()?.limits.as_ref()?;
    limits
        .iter()
        .find(|(name, _)| name.ends_with("gpu"))
        .and_then(|(_, q)| ResourceQuantity::try_from(q).ok())
}

/// The `ray start` command line: flags sorted by key, ` --k=v `, ` --k ` for `true`, `false`
/// dropped except for the flags where Ray reads it.
pub fn ray_start_command(role: PodRole<'_>, params: &BTreeMap<String, String>) -> String {
    let mut command = match role {
        PodRole::Head => "ray start --head ".to_string(),
        PodRole::Worker(_) => "ray start ".to_string(),
    };
    for (key, value) in params {
        match value.as_str() {
            "true" => command.push_str(&format!(" --{key} ")),
            "false"
                if !matches!(
                    key.as_str(),
                    "log-color" | "include-dashboard" | "include-log-monitor"
                ) => {}
            _ => command.push_str(&format!(" --{key}={value} ")),
        }
    }
    command
}

pub(super) fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_string(),
                api_version: None,
            }),
            ..EnvVarSource::default()
        }),
        value: None,
    }
}

pub(super) fn value_env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

/// Builds one Pod of `cluster` named `name`: the role's template with KubeRay's labels, the
/// cluster ownerReference, the `ray start` command, environment and health probes in
/// `containers[0]`, a memory-backed `/dev/shm`, and on a worker the `wait-gcs-ready` init
/// container.
pub fn build_pod(
    cluster: &RayCluster,
    role: PodRole<'_>,
    name: &str,
    options: &BuildOptions,
) -> Pod {
    let cluster_name = name_of(cluster);
    let (template, group_name, node_type, group_labels) = match role {
        PodRole::Head => (
            &cluster.spec.head_group_spec.template,
            HEAD_GROUP.to_string(),
            HEAD_NODE_TYPE,
            cluster.spec.head_group_spec.labels.as_ref(),
        ),
        PodRole::Worker(group) => (
            &group.template,
            group.group_name.clone(),
            WORKER_NODE_TYPE,
            group.labels.as_ref(),
        ),
    };
    let template_meta = template.metadata.clone().unwrap_or_default();
    let mut labels = BTreeMap::from([
        (IS_RAY_NODE_LABEL.to_string(), "yes".to_string()),
        (
            IDENTIFIER_LABEL.to_string(),
            identifier(cluster_name, node_type),
        ),
        (APP_NAME_LABEL.to_string(), "kuberay".to_string()),
        (CREATED_BY_LABEL.to_string(), CREATED_BY_VALUE.to_string()),
    ]);
    labels.extend(template_meta.labels.clone().unwrap_or_default());
    labels.extend(group_labels.cloned().unwrap_or_default());
    for key in [
        keys::ORIGINATED_FROM_CRD_LABEL,
        keys::ORIGINATED_FROM_CR_NAME_LABEL,
    ] {
        if let Some(value) = cluster.metadata.labels.as_ref().and_then(|l| l.get(key)) {
            labels.insert(key.to_string(), value.clone());
        }
    }
    labels.insert(
        keys::RAY_CLUSTER_LABEL.to_string(),
        cluster_name.to_string(),
    );
    labels.insert(keys::RAY_NODE_TYPE_LABEL.to_string(), node_type.to_string());
    labels.insert(keys::RAY_GROUP_LABEL.to_string(), group_name);

    let fqdn = head_service_fqdn(cluster, options);
    let port = gcs_port(cluster);
    let mut spec: PodSpec = template.spec.clone().unwrap_or_default();
    if options.wait_gcs_ready && matches!(role, PodRole::Worker(_)) {
        gcs_wait::add_to_worker(&mut spec, &format!("{fqdn}:{port}"));
    }
    let autoscaling = cluster.spec.autoscaling();
    if autoscaling {
        match role {
            PodRole::Head => autoscaler::add_to_head(cluster, &mut spec),
            PodRole::Worker(_) => autoscaler::add_to_worker(&cluster.spec, &mut spec),
        }
    }
    let params = ray_start_params(cluster, role, options);
    let ray_start = ray_start_command(role, &params);
    let keep_command = template_meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(OVERWRITE_CONTAINER_CMD_ANNOTATION))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if let Some(container) = spec.containers.first_mut() {
        set_command(container, &ray_start, keep_command);
        let mut env = vec![
            field_env("RAY_CLUSTER_NAME", "metadata.labels['ray.io/cluster']"),
            field_env("RAY_CLUSTER_NAMESPACE", "metadata.namespace"),
            field_env("RAY_CLOUD_INSTANCE_ID", "metadata.name"),
            field_env("RAY_NODE_TYPE_NAME", "metadata.labels['ray.io/group']"),
            value_env("KUBERAY_GEN_RAY_START_CMD", &ray_start),
            value_env("RAY_PORT", &port),
            value_env("RAY_USAGE_STATS_KUBERAY_IN_USE", "1"),
            value_env("RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "1"),
        ];
        match role {
            PodRole::Head => env.push(value_env("RAY_ADDRESS", &format!("127.0.0.1:{port}"))),
            PodRole::Worker(_) => {
                env.push(value_env("RAY_ADDRESS", &format!("{fqdn}:{port}")));
                env.push(value_env("FQ_RAY_IP", &fqdn));
                let short = fqdn.split('.').next().unwrap_or_default();
                env.push(value_env("RAY_IP", short));
            }
        }
        let existing = container.env.get_or_insert_with(Vec::new);
        for var in env {
            if !existing.iter().any(|e| e.name == var.name) {
                existing.push(var);
            }
        }
        add_shared_memory(container, spec.volumes.get_or_insert_with(Vec::new));
        let port_param = |key: &str, default: i32| {
            params
                .get(key)
                .and_then(|p| p.parse().ok())
                .unwrap_or(default)
        };
        add_probes(
            container,
            role,
            &cluster.spec.ray_version,
            port_param("dashboard-agent-listen-port", DEFAULT_DASHBOARD_AGENT_PORT),
            port_param("dashboard-port", DEFAULT_DASHBOARD_PORT),
        );
    }
    if autoscaling && matches!(role, PodRole::Head) {
        autoscaler::mount_logs(&mut spec);
    }
    auth::add_to_pod(cluster, &mut spec);
    // As KubeRay, every init container (the user's too) can find the head: `FQ_RAY_IP`, and
    // the deprecated `RAY_IP` (its first label). One the container sets itself is kept.
    let short = fqdn.split('.').next().unwrap_or_default().to_string();
    for container in spec.init_containers.iter_mut().flatten() {
        let env = container.env.get_or_insert_with(Vec::new);
        for var in [value_env("FQ_RAY_IP", &fqdn), value_env("RAY_IP", &short)] {
            if !env.iter().any(|e| e.name == var.name) {
                env.push(var);
            }
        }
    }

    let mut annotations = template_meta.annotations;
    if let PodRole::Head = role {
        // What a Recreate upgrade compares the spec with (super::upgrade).
        annotations
            .get_or_insert_with(BTreeMap::new)
            .extend(super::upgrade::head_stamp(cluster));
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace_of(cluster).to_string()),
            labels: Some(labels),
            annotations,
            owner_references: Some(vec![owner_reference(cluster)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// `pod` (built by [`build_pod`] and onboarded) as the JSON to create: raygate's changes applied
/// to the role's template as stored in `raw_cluster` (the RayCluster's JSON from the API
/// server), so template fields raygate's types do not know reach the Pod
/// ([`crate::preserve::keep_unknown_fields`]). Without a raw template, the typed Pod.
pub fn pod_object(raw_cluster: &Value, cluster: &RayCluster, pod: &Pod) -> Value {
    let built = serde_json::to_value(pod).unwrap_or(Value::Null);
    let labels = pod.metadata.labels.as_ref();
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    let (pointer, template) = if label(keys::RAY_NODE_TYPE_LABEL) == Some(HEAD_NODE_TYPE) {
        (
            "/spec/headGroupSpec/template".to_string(),
            &cluster.spec.head_group_spec.template,
        )
    } else {
        let group = label(keys::RAY_GROUP_LABEL).unwrap_or_default();
        let found = cluster
            .spec
            .worker_group_specs
            .iter()
            .flatten()
            .enumerate()
            .find(|(_, g)| g.group_name == group);
        let Some((index, spec)) = found else {
            return built;
        };
        (
            format!("/spec/workerGroupSpecs/{index}/template"),
            &spec.template,
        )
    };
    let (Some(raw), Ok(typed)) = (
        raw_cluster.pointer(&pointer),
        serde_json::to_value(template),
    ) else {
        return built;
    };
    crate::preserve::keep_unknown_fields(raw, &typed, &built)
}

/// Sets `["/bin/bash","-c","--"]` with `ulimit …; ray start …` as the container command,
/// prefixing a user command that does not start Ray itself; a user command that does, or the
/// overwrite annotation, leaves the container alone.
fn set_command(container: &mut Container, ray_start: &str, keep_command: bool) {
    if keep_command {
        return;
    }
    let user: Vec<String> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .cloned()
        .collect();
    let user = user.join(" ");
    if user.contains("ray start") {
        return;
    }
    let generated = format!("ulimit -n ${{RAY_START_ULIMIT_OPEN_FILES:-65536}}; {ray_start}");
    let args = if user.trim().is_empty() {
        generated
    } else {
        format!("{user} && {generated}")
    };
    container.command = Some(vec!["/bin/bash".into(), "-c".into(), "--".into()]);
    container.args = Some(vec![args]);
}

/// Port of the Ray dashboard agent (`--dashboard-agent-listen-port`), which serves the health
/// endpoints the probes call.
const DEFAULT_DASHBOARD_AGENT_PORT: i32 = 52365;

/// Readiness and liveness probes on `containers[0]` where the user set none, as KubeRay v1.7
/// injects them (docs/upstream.md, "KubeRay: RayCluster controller"): from Ray 2.53 on, an HTTP GET
/// of the agent's `/api/healthz` (raylet, and GCS on the head); before, a `wget` of the raylet's
/// health and, on the head, of the GCS's through the dashboard. So the head Pod is Ready only once
/// GCS answers, and a worker only once its raylet runs. An unparsable `rayVersion` gets the exec
/// probes, which every Ray release answers.
fn add_probes(
    container: &mut Container,
    role: PodRole<'_>,
    ray_version: &Option<String>,
    agent_port: i32,
    dashboard_port: i32,
) {
    let head = matches!(role, PodRole::Head);
    let unified = ray_version
        .as_deref()
        .and_then(|v| crate::validation::version::GenericVersion::parse(v).ok())
        .is_some_and(|v| !v.less_than(2, 53, 0));
    let probe = |initial_delay: i32, failure_threshold: i32| {
        let mut probe = Probe {
            initial_delay_seconds: Some(initial_delay),
            timeout_seconds: Some(if head { 5 } else { 2 }),
            period_seconds: Some(5),
            success_threshold: Some(1),
            failure_threshold: Some(failure_threshold),
            ..Probe::default()
        };
        if unified {
            probe.http_get = Some(HTTPGetAction {
                path: Some("/api/healthz".to_string()),
                port: IntOrString::Int(agent_port),
                ..HTTPGetAction::default()
            });
        } else {
            let wget = |url: String| format!("wget -T 2 -q -O- {url} | grep success");
            let mut check = wget(format!(
                "http://localhost:{agent_port}/api/local_raylet_healthz"
            ));
            if head {
                check.push_str(" && ");
                check.push_str(&wget(format!(
                    "http://localhost:{dashboard_port}/api/gcs_healthz"
                )));
            }
            probe.exec = Some(ExecAction {
                command: Some(vec!["bash".to_string(), "-c".to_string(), check]),
            });
        }
        probe
    };
    container
        .readiness_probe
        .get_or_insert_with(|| probe(10, 10));
    container
        .liveness_probe
        .get_or_insert_with(|| probe(30, 120));
}

/// Mounts a memory-backed emptyDir `shared-mem` at `/dev/shm` unless something is mounted
/// there already (Ray's object store lives in shared memory).
fn add_shared_memory(container: &mut Container, volumes: &mut Vec<Volume>) {
    let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
    if mounts.iter().any(|m| m.mount_path == "/dev/shm")
        || volumes.iter().any(|v| v.name == "shared-mem")
    {
        return;
    }
    volumes.push(Volume {
        name: "shared-mem".to_string(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".to_string()),
            ..EmptyDirVolumeSource::default()
        }),
        ..Volume::default()
    });
    mounts.push(VolumeMount {
        name: "shared-mem".to_string(),
        mount_path: "/dev/shm".to_string(),
        ..VolumeMount::default()
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn cluster(yaml: &str) -> RayCluster {
        serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("bad test YAML: {e}"))
    }

    const CLUSTER: &str = r#"
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: demo, namespace: team, uid: u-1, labels: {volcano.sh/queue-name: q}}
spec:
  rayVersion: "2.60.0"
  headGroupSpec:
    rayStartParams: {num-cpus: "0"}
    template:
      metadata: {labels: {team: nlp}, annotations: {note: kept}}
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.60.0
          resources: {limits: {cpu: "1500m", memory: 2Gi}}
  workerGroupSpecs:
  - groupName: small
    replicas: 2
    minReplicas: 1
    maxReplicas: 5
    resources: {TPU: "1"}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.60.0
          command: ["echo", "hi"]
          env: [{name: RAY_PORT, value: "7000"}]
          resources: {requests: {cpu: "1"}, limits: {nvidia.com/gpu: "2"}}
"#;

    fn worker(c: &RayCluster) -> &WorkerGroupSpec {
        &c.spec.worker_group_specs.as_ref().expect("groups")[0]
    }

    #[test]
    fn head_service_has_kuberay_name_ports_and_is_headless() {
        let c = cluster(CLUSTER);
        let svc = build_head_service(&c, &BuildOptions::default());
        assert_eq!(svc.metadata.name.as_deref(), Some("demo-head-svc"));
        let spec = svc.spec.expect("spec");
        let ports: Vec<(String, i32)> = spec
            .ports
            .expect("ports")
            .into_iter()
            .map(|p| (p.name.unwrap_or_default(), p.port))
            .collect();
        assert_eq!(
            ports,
            [
                ("client".to_string(), 10001),
                ("dashboard".to_string(), 8265),
                ("gcs-server".to_string(), 6379),
                ("metrics".to_string(), 8080),
                ("serve".to_string(), 8000),
            ]
        );
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.publish_not_ready_addresses, Some(true));
        let selector = spec.selector.expect("selector");
        assert_eq!(selector["ray.io/cluster"], "demo");
        assert_eq!(selector["ray.io/node-type"], "head");
        assert_eq!(selector["ray.io/identifier"], "demo-head");
        let owner = &svc.metadata.owner_references.expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("RayCluster", "u-1")
        );
        let with_ip = build_head_service(
            &c,
            &BuildOptions {
                head_cluster_ip: true,
                ..BuildOptions::default()
            },
        );
        assert_eq!(with_ip.spec.expect("spec").cluster_ip, None);
    }

    #[test]
    fn container_ports_replace_the_defaults_and_metrics_is_added() {
        let mut c = cluster(CLUSTER);
        let spec = c.spec.head_group_spec.template.spec.as_mut().expect("spec");
        spec.containers[0].ports = Some(vec![
            k8s_openapi::api::core::v1::ContainerPort {
                container_port: 8265,
                name: Some("dashboard".into()),
                ..Default::default()
            },
            k8s_openapi::api::core::v1::ContainerPort {
                container_port: 9999,
                ..Default::default()
            },
        ]);
        let svc = build_head_service(&c, &BuildOptions::default());
        let names: Vec<String> = svc
            .spec
            .expect("spec")
            .ports
            .expect("ports")
            .into_iter()
            .map(|p| p.name.unwrap_or_default())
            .collect();
        assert_eq!(names, ["9999-port", "dashboard", "metrics"]);
    }

    #[test]
    fn head_pod_has_labels_owner_command_and_env() {
        let c = cluster(CLUSTER);
        let name = pod_name(&c, PodRole::Head, 0);
        assert!(name.starts_with("demo-head-"), "{name}");
        assert_eq!(name.len(), "demo-head-".len() + 5);
        let pod = build_pod(&c, PodRole::Head, &name, &BuildOptions::default());
        let labels = pod.metadata.labels.clone().expect("labels");
        assert_eq!(labels["ray.io/cluster"], "demo");
        assert_eq!(labels["ray.io/node-type"], "head");
        assert_eq!(labels["ray.io/group"], "headgroup");
        assert_eq!(labels["ray.io/is-ray-node"], "yes");
        assert_eq!(labels["team"], "nlp");
        assert_eq!(
            pod.metadata.annotations.expect("annotations")["note"],
            "kept"
        );
        let spec = pod.spec.expect("spec");
        let container = &spec.containers[0];
        assert_eq!(
            container.command.as_deref(),
            Some(&["/bin/bash".to_string(), "-c".into(), "--".into()][..])
        );
        let args = &container.args.as_ref().expect("args")[0];
        assert_eq!(
            args,
            "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start --head  --block  \
             --dashboard-agent-listen-port=52365  --dashboard-host=0.0.0.0  --memory=2147483648  \
             --metrics-export-port=8080  --num-cpus=0 "
        );
        let env: BTreeMap<String, Option<String>> = container
            .env
            .clone()
            .expect("env")
            .into_iter()
            .map(|e| (e.name, e.value))
            .collect();
        assert_eq!(env["RAY_ADDRESS"].as_deref(), Some("127.0.0.1:6379"));
        assert_eq!(env["RAY_PORT"].as_deref(), Some("6379"));
        assert!(env.contains_key("RAY_CLUSTER_NAME"));
        assert_eq!(
            container.volume_mounts.as_ref().expect("mounts")[0].mount_path,
            "/dev/shm"
        );
        assert_eq!(spec.volumes.expect("volumes")[0].name, "shared-mem");
    }

    #[test]
    fn worker_pod_points_at_the_head_and_keeps_user_env_and_command() {
        let c = cluster(CLUSTER);
        let group = worker(&c);
        let name = pod_name(&c, PodRole::Worker(group), 3);
        assert!(name.starts_with("demo-small-worker-"), "{name}");
        let pod = build_pod(&c, PodRole::Worker(group), &name, &BuildOptions::default());
        let labels = pod.metadata.labels.expect("labels");
        assert_eq!(labels["ray.io/group"], "small");
        assert_eq!(labels["ray.io/node-type"], "worker");
        assert_eq!(labels["ray.io/identifier"], "demo-worker");
        let container = &pod.spec.expect("spec").containers[0];
        let args = &container.args.as_ref().expect("args")[0];
        assert!(
            args.starts_with(
                "echo hi && ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start "
            ),
            "{args}"
        );
        assert!(
            args.contains(" --address=demo-head-svc.team.svc.cluster.local:6379 "),
            "{args}"
        );
        assert!(args.contains(" --num-cpus=1 "), "{args}");
        assert!(args.contains(" --num-gpus=2 "), "{args}");
        assert!(args.contains(" --resources='{\"TPU\":\"1\"}' "), "{args}");
        let env = container.env.as_ref().expect("env");
        let port: Vec<_> = env.iter().filter(|e| e.name == "RAY_PORT").collect();
        assert_eq!(port.len(), 1);
        assert_eq!(port[0].value.as_deref(), Some("7000"));
        let fq = env
            .iter()
            .find(|e| e.name == "FQ_RAY_IP")
            .expect("FQ_RAY_IP");
        assert_eq!(
            fq.value.as_deref(),
            Some("demo-head-svc.team.svc.cluster.local")
        );
    }

    #[test]
    fn names_are_deterministic_distinct_and_cut() {
        let c = cluster(CLUSTER);
        let a = pod_name(&c, PodRole::Head, 0);
        assert_eq!(a, pod_name(&c, PodRole::Head, 0));
        let names: std::collections::BTreeSet<String> = (0..200)
            .map(|i| pod_name(&c, PodRole::Worker(worker(&c)), i))
            .collect();
        assert_eq!(names.len(), 200);
        let mut long = cluster(CLUSTER);
        long.metadata.name = Some("A".repeat(60));
        let prefix = pod_name_prefix(&long, PodRole::Head);
        assert_eq!(prefix, format!("{}-head-", "a".repeat(50)));
        assert!(pod_name(&long, PodRole::Head, 7).len() <= 63);
    }

    #[test]
    fn a_user_ray_start_or_the_overwrite_annotation_keeps_the_command() {
        let mut c = cluster(CLUSTER);
        let head = c.spec.head_group_spec.template.spec.as_mut().expect("spec");
        head.containers[0].command = Some(vec!["ray start --head --block".into()]);
        let pod = build_pod(&c, PodRole::Head, "h", &BuildOptions::default());
        assert_eq!(
            pod.spec.expect("spec").containers[0].command.as_deref(),
            Some(&["ray start --head --block".to_string()][..])
        );
        let mut c = cluster(CLUSTER);
        c.spec.worker_group_specs.as_mut().expect("groups")[0]
            .template
            .metadata
            .get_or_insert_default()
            .annotations = Some(BTreeMap::from([(
            OVERWRITE_CONTAINER_CMD_ANNOTATION.to_string(),
            "true".to_string(),
        )]));
        let pod = build_pod(
            &c,
            PodRole::Worker(worker(&c)),
            "w",
            &BuildOptions::default(),
        );
        assert_eq!(
            pod.spec.expect("spec").containers[0].command.as_deref(),
            Some(&["echo".to_string(), "hi".into()][..])
        );
    }

    #[test]
    fn false_flags_are_dropped_except_where_ray_reads_them() {
        let params = BTreeMap::from([
            ("include-dashboard".to_string(), "false".to_string()),
            ("disable-usage-stats".to_string(), "false".to_string()),
            ("port".to_string(), "6380".to_string()),
        ]);
        assert_eq!(
            ray_start_command(PodRole::Head, &params),
            "ray start --head  --include-dashboard=false  --port=6380 "
        );
    }

    #[test]
    fn probes_wait_for_the_raylet_and_gcs_and_keep_the_users() {
        let c = cluster(CLUSTER);
        let head = build_pod(&c, PodRole::Head, "h", &BuildOptions::default());
        let container = &head.spec.expect("spec").containers[0];
        let readiness = container.readiness_probe.clone().expect("readiness probe");
        let get = readiness.http_get.clone().expect("HTTP probe for Ray 2.60");
        assert_eq!(get.path.as_deref(), Some("/api/healthz"));
        assert_eq!(get.port, IntOrString::Int(52365));
        let timing = |p: &Probe| {
            (
                p.initial_delay_seconds,
                p.timeout_seconds,
                p.period_seconds,
                p.failure_threshold,
            )
        };
        assert_eq!(timing(&readiness), (Some(10), Some(5), Some(5), Some(10)));
        let liveness = container.liveness_probe.clone().expect("liveness probe");
        assert_eq!(timing(&liveness), (Some(30), Some(5), Some(5), Some(120)));

        let group = worker(&c);
        let w = build_pod(&c, PodRole::Worker(group), "w", &BuildOptions::default());
        let probe = w.spec.expect("spec").containers[0]
            .readiness_probe
            .clone()
            .expect("worker readiness probe");
        assert_eq!(probe.timeout_seconds, Some(2));

        // Before Ray 2.53 the agent has no /api/healthz: wget the raylet's and the GCS's, on
        // the ports rayStartParams chose.
        let mut old = cluster(CLUSTER);
        old.spec.ray_version = Some("2.46.0".into());
        old.spec.head_group_spec.ray_start_params = Some(BTreeMap::from([
            ("dashboard-port".to_string(), "9000".to_string()),
            (
                "dashboard-agent-listen-port".to_string(),
                "9001".to_string(),
            ),
        ]));
        let head = build_pod(&old, PodRole::Head, "h", &BuildOptions::default());
        let exec = head.spec.expect("spec").containers[0]
            .readiness_probe
            .clone()
            .and_then(|p| p.exec)
            .and_then(|e| e.command)
            .expect("exec probe");
        assert_eq!(
            exec[2],
            "wget -T 2 -q -O- http://localhost:9001/api/local_raylet_healthz | grep success && \
             wget -T 2 -q -O- http://localhost:9000/api/gcs_healthz | grep success"
        );

        // A probe the user wrote is theirs.
        let mut own = cluster(CLUSTER);
        own.spec
            .head_group_spec
            .template
            .spec
            .as_mut()
            .expect("spec")
            .containers[0]
            .readiness_probe = Some(Probe {
            period_seconds: Some(1),
            ..Probe::default()
        });
        let head = build_pod(&own, PodRole::Head, "h", &BuildOptions::default());
        let probe = head.spec.expect("spec").containers[0]
            .readiness_probe
            .clone()
            .expect("probe");
        assert_eq!(probe.period_seconds, Some(1));
        assert!(probe.http_get.is_none());
    }
}
