//! The webhook router served in-process over real TLS (an rcgen-minted CA and serving
//! certificate, a rustls client), covering every AdmissionReview case the API server relies
//! on: uid echo, base64 JSON patches with their type, warnings, denials with field paths,
//! dry run, malformed reviews, body limit, timeout, readiness, metrics and graceful shutdown;
//! and the connection limits: the idle connection timeout and the bound on open connections.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame};
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use raygate_api::keys::{NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE};
use raygate_api::settings::OptInLabel;
use raygate_api::validation::ValidationContext;
use raygate_api::volcano::{Queue, QueueSpec, QueueStatus};
use raygate_certs::{CertResolver, certified_key_from_pem};
use raygate_webhook::metrics::CloseLabels;
use raygate_webhook::{AppState, Caches, Draining, Limits, Metrics, Preloaded, ServeOptions};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A CA and a serving certificate for 127.0.0.1 signed by it, as PEM.
struct Pki {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

fn mint_pki() -> Pki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.distinguished_name
        .push(DnType::CommonName, "raygate webhook test CA");
    let ca_cert = ca.self_signed(&ca_key).expect("self-signed CA");
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().expect("leaf key");
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("leaf params");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).expect("signed leaf");
    Pki {
        ca_pem: ca_cert.pem(),
        cert_pem: leaf_cert.pem(),
        key_pem: leaf_key.serialize_pem(),
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

fn namespace(name: &str, pairs: &[(&str, &str)]) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels(pairs)),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

fn meta(ns: &str, name: &str, pairs: &[(&str, &str)], owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.into()),
        labels: Some(labels(pairs)),
        owner_references: Some(owners),
        ..ObjectMeta::default()
    }
}

/// The cluster state the tests run against: one opted-in and one plain namespace, a standalone
/// RayCluster with queue and priority labels, and a RayCluster owned by a RayJob.
/// A non-default opt-in label (`--namespace-label`), and the namespace `team` carries it.
const TEAM_OPT_IN: (&str, &str) = ("team.example.com/gang", "on");

fn world() -> Preloaded {
    let job_owner = OwnerReference {
        api_version: "ray.io/v1".into(),
        kind: "RayJob".into(),
        name: "train".into(),
        uid: "job-uid".into(),
        controller: Some(true),
        ..OwnerReference::default()
    };
    Preloaded {
        namespaces: vec![
            Namespace {
                metadata: ObjectMeta {
                    annotations: Some(labels(&[("scheduling.volcano.sh/queue-name", "research")])),
                    ..namespace("ml", &[(NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE)]).metadata
                },
                ..Namespace::default()
            },
            namespace("web", &[]),
            // Opted in only where the server runs with `--namespace-label
            // team.example.com/gang=on`.
            namespace("team", &[(TEAM_OPT_IN.0, TEAM_OPT_IN.1)]),
        ],
        ray_clusters: vec![
            meta(
                "ml",
                "standalone",
                &[
                    ("volcano.sh/queue-name", "research"),
                    ("ray.io/priority-class-name", "high"),
                ],
                vec![],
            ),
            meta("ml", "train-x7k2p", &[], vec![job_owner.clone()]),
            meta("team", "standalone", &[], vec![]),
        ],
        ray_jobs: vec![
            ObjectMeta {
                uid: Some("job-uid".into()),
                ..meta("ml", "train", &[("volcano.sh/queue-name", "batch")], vec![])
            },
            // A RayJob that shares its name with an ordinary Job (`shadow`).
            ObjectMeta {
                uid: Some("shadow-uid".into()),
                ..meta("ml", "shadow", &[], vec![])
            },
        ],
        // KubeRay's submitter Job of RayJob `train` (named after it, controlled by it), an
        // ordinary Job named like RayJob `shadow`, and the Job of a RayJob `gone` that no
        // longer exists.
        jobs: vec![
            meta(
                "ml",
                "train",
                &[
                    ("ray.io/originated-from-crd", "RayJob"),
                    ("ray.io/originated-from-cr-name", "train"),
                ],
                vec![OwnerReference {
                    controller: Some(true),
                    ..job_owner.clone()
                }],
            ),
            meta("ml", "shadow", &[], vec![]),
            meta(
                "ml",
                "gone",
                &[
                    ("ray.io/originated-from-crd", "RayJob"),
                    ("ray.io/originated-from-cr-name", "gone"),
                ],
                vec![OwnerReference {
                    name: "gone".into(),
                    uid: "gone-uid".into(),
                    controller: Some(true),
                    ..job_owner.clone()
                }],
            ),
        ],
        queues: vec![
            queue("default", "Open"),
            queue("research", "Open"),
            queue("batch", "Open"),
            queue("closed", "Closed"),
        ],
        queue_policies: vec![],
        nodes: vec![node("node-1", "16")],
    }
}

/// A Node with `cpu` CPUs and 64Gi of memory.
fn node(name: &str, cpu: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi"}}}))
    .expect("a Node")
}

fn queue(name: &str, state: &str) -> Queue {
    Queue {
        status: Some(QueueStatus {
            state: Some(state.into()),
            ..QueueStatus::default()
        }),
        ..Queue::new(name, QueueSpec::default())
    }
}

struct Server {
    address: SocketAddr,
    connector: Pki,
    state: AppState,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Server {
    async fn start(limits: Limits) -> Server {
        Server::start_with(
            limits,
            ServeOptions {
                drain_timeout: Duration::from_secs(5),
                ..ServeOptions::default()
            },
        )
        .await
    }

    /// A server with the default limits whose drain lasts at most `drain`.
    async fn start_draining_within(drain: Duration) -> Server {
        Server::start_with(
            default_limits(),
            ServeOptions {
                drain_timeout: drain,
                ..ServeOptions::default()
            },
        )
        .await
    }

    async fn start_with(limits: Limits, options: ServeOptions) -> Server {
        Server::start_opting_in(limits, options, OptInLabel::default()).await
    }

    /// A server whose opt-in label is `opt_in`.
    async fn start_opting_in(limits: Limits, options: ServeOptions, opt_in: OptInLabel) -> Server {
        let pki = mint_pki();
        let certs = Arc::new(CertResolver::new());
        certs.set(
            certified_key_from_pem(pki.cert_pem.as_bytes(), pki.key_pem.as_bytes())
                .expect("usable serving certificate"),
        );
        // The process registry also carries the certificate's metrics, as `raygate webhook` does.
        let mut registry = prometheus_client::registry::Registry::default();
        certs.metrics().register(&mut registry);
        let state = AppState {
            caches: Caches::preloaded(world()),
            certs: certs.clone(),
            metrics: Arc::new(Metrics::with_registry(registry)),
            validation: Arc::new(ValidationContext::default()),
            opt_in: Arc::new(opt_in),
            more_metrics: None,
            limits,
            draining: Draining::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let address = listener.local_addr().expect("bound address");
        let tls = raygate_webhook::tls_config(certs).expect("TLS config");
        let (stop, stopped) = oneshot::channel::<()>();
        let router = raygate_webhook::router(state.clone());
        let served = state.clone();
        let task = tokio::spawn(async move {
            raygate_webhook::serve(listener, tls, router, options, &served, async move {
                let _ = stopped.await;
            })
            .await;
        });
        Server {
            address,
            connector: pki,
            state,
            stop: Some(stop),
            task,
        }
    }

    async fn tls(
        &self,
        alpn: &[&[u8]],
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> TlsStream<TcpStream> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in
            rustls::pki_types::CertificateDer::pem_slice_iter(self.connector.ca_pem.as_bytes())
        {
            roots.add(cert.expect("CA PEM")).expect("CA added");
        }
        let mut config =
            rustls::ClientConfig::builder_with_provider(raygate_certs::ring_provider())
                .with_protocol_versions(versions)
                .expect("protocol versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let tcp = TcpStream::connect(self.address).await.expect("TCP connect");
        TlsConnector::from(Arc::new(config))
            .connect(ServerName::IpAddress(self.address.ip().into()), tcp)
            .await
            .expect("TLS handshake with the test CA")
    }

    /// One request on a fresh connection over HTTP/2 (`h2`) or HTTP/1.1.
    async fn send(&self, h2: bool, request: Request<Full<Bytes>>) -> (StatusCode, Bytes) {
        let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
        let tls = self
            .tls(alpn, &[&rustls::version::TLS13, &rustls::version::TLS12])
            .await;
        let negotiated = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        assert_eq!(negotiated.as_deref(), Some(alpn[0]), "ALPN");
        let io = TokioIo::new(tls);
        let response = if h2 {
            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .expect("h2 handshake");
            tokio::spawn(connection);
            sender.send_request(request).await.expect("h2 response")
        } else {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
                .await
                .expect("http/1.1 handshake");
            tokio::spawn(connection);
            sender
                .send_request(request)
                .await
                .expect("http/1.1 response")
        };
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("response body")
            .to_bytes();
        (status, body)
    }

    async fn post(&self, path: &str, body: Vec<u8>) -> (StatusCode, Bytes) {
        self.send(true, post_request(path, "application/json", body))
            .await
    }

    /// A review answered 200 with an AdmissionReview; returns its `response`.
    async fn review(&self, path: &str, request: Value) -> Value {
        let body = serde_json::to_vec(&review(request)).unwrap();
        let (status, answer) = self.post(path, body).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{}",
            String::from_utf8_lossy(&answer)
        );
        let answer: Value = serde_json::from_slice(&answer).expect("JSON answer");
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(answer["kind"], "AdmissionReview");
        answer["response"].clone()
    }

    async fn get(&self, path: &str) -> (StatusCode, String) {
        let request = Request::get(path)
            .header("host", "127.0.0.1")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let (status, body) = self.send(false, request).await;
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    async fn shut_down(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("serve returns after shutdown")
            .expect("serve task");
    }
}

fn post_request(path: &str, content_type: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
    Request::post(format!("https://127.0.0.1{path}"))
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

fn review(request: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

fn pod_request(uid: &str, namespace: &str, pod: Value) -> Value {
    json!({
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": namespace,
        "operation": "CREATE",
        "userInfo": {"username": "kuberay"},
        "object": pod,
        "oldObject": null,
        "dryRun": false,
    })
}

fn worker_pod(cluster: &str, group: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": format!("{cluster}-{group}-worker-"),
            "labels": {"ray.io/cluster": cluster, "ray.io/node-type": "worker", "ray.io/group": group},
        },
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}], "schedulerName": "default-scheduler"},
    })
}

fn ray_request(uid: &str, operation: &str, object: Value) -> Value {
    let kind = object["kind"].clone();
    json!({
        "uid": uid,
        "kind": {"group": "ray.io", "version": "v1", "kind": kind},
        "resource": {"group": "ray.io", "version": "v1", "resource": "rayclusters"},
        "namespace": "ml",
        "name": object["metadata"]["name"],
        "operation": operation,
        "userInfo": {"username": "alice"},
        "oldObject": if operation == "UPDATE" { object.clone() } else { Value::Null },
        "object": object,
        "dryRun": false,
    })
}

fn ray_cluster(min: i64, replicas: i64, max: i64) -> Value {
    json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "demo", "namespace": "ml"},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
            ]}}},
            "workerGroupSpecs": [{
                "groupName": "small", "minReplicas": min, "replicas": replicas, "maxReplicas": max,
                "rayStartParams": {},
                "template": {"spec": {"containers": [
                    {"name": "ray-worker", "image": "rayproject/ray", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
                ]}}
            }]
        }
    })
}

/// Decodes `response.patch` (base64 of a JSON patch) after checking `patchType`.
fn decoded_patch(response: &Value) -> json_patch::Patch {
    assert_eq!(response["patchType"], "JSONPatch", "{response}");
    let encoded = response["patch"]
        .as_str()
        .expect("patch is a base64 string");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("valid base64");
    serde_json::from_slice(&bytes).expect("a JSON patch")
}

fn patched(object: &Value, response: &Value) -> Value {
    let mut object = object.clone();
    json_patch::patch(&mut object, &decoded_patch(response)).expect("the patch applies");
    object
}

fn default_limits() -> Limits {
    Limits::default()
}

#[tokio::test]
async fn a_ray_pod_in_an_opted_in_namespace_joins_its_clusters_gang_over_h2_and_http1() {
    let server = Server::start(default_limits()).await;
    for (h2, uid) in [(true, "uid-h2"), (false, "uid-http1")] {
        let pod = worker_pod("standalone", "cpu");
        let body = serde_json::to_vec(&review(pod_request(uid, "ml", pod.clone()))).unwrap();
        let (status, answer) = server
            .send(h2, post_request("/mutate/pods", "application/json", body))
            .await;
        assert_eq!(status, StatusCode::OK);
        let response = serde_json::from_slice::<Value>(&answer).unwrap()["response"].clone();
        assert_eq!(response["uid"], uid, "uid echoed");
        assert_eq!(response["allowed"], true);
        assert!(response.get("warnings").is_none(), "{response}");
        let pod = patched(&pod, &response);
        assert_eq!(pod["spec"]["schedulerName"], "volcano");
        assert_eq!(
            pod["metadata"]["annotations"],
            json!({"scheduling.k8s.io/group-name": "ray-standalone-pg", "volcano.sh/task-spec": "cpu"})
        );
        assert_eq!(
            pod["metadata"]["labels"]["volcano.sh/queue-name"],
            "research"
        );
        assert_eq!(
            pod["metadata"]["labels"]["ray.io/priority-class-name"],
            "high"
        );
        assert_eq!(pod["metadata"]["labels"]["ray.io/cluster"], "standalone");
    }
    server.shut_down().await;
}

#[tokio::test]
async fn pods_of_a_rayjobs_cluster_and_its_submitter_join_the_rayjobs_gang() {
    let server = Server::start(default_limits()).await;
    let head = json!({
        "metadata": {"name": "train-x7k2p-head", "labels": {"ray.io/cluster": "train-x7k2p", "ray.io/node-type": "head"}},
        "spec": {"containers": []},
    });
    let response = server
        .review("/mutate/pods", pod_request("h", "ml", head.clone()))
        .await;
    let head = patched(&head, &response);
    assert_eq!(
        head["metadata"]["annotations"],
        json!({"scheduling.k8s.io/group-name": "ray-train-pg", "volcano.sh/task-spec": "headgroup"})
    );
    assert_eq!(head["metadata"]["labels"]["volcano.sh/queue-name"], "batch");
    assert!(
        head["metadata"]["labels"]
            .get("ray.io/priority-class-name")
            .is_none()
    );

    let submitter = json!({
        "metadata": {"name": "train-abcde", "labels": {
            "ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "train",
            "batch.kubernetes.io/job-name": "train"}},
        "spec": {"containers": []},
    });
    let response = server
        .review("/mutate/pods", pod_request("s", "ml", submitter.clone()))
        .await;
    let submitter = patched(&submitter, &response);
    assert_eq!(
        submitter["metadata"]["annotations"]["volcano.sh/task-spec"],
        "submittergroup"
    );
    assert_eq!(
        submitter["metadata"]["annotations"]["scheduling.k8s.io/group-name"],
        "ray-train-pg"
    );
    server.shut_down().await;
}

/// A Pod of Job `job` as the Job controller creates it: its labels and controller
/// ownerReference only (KubeRay v1.5.0 puts no Ray label on its submitter's Pod template).
fn job_pod(job: &str) -> Value {
    json!({
        "metadata": {
            "name": format!("{job}-abcde"),
            "labels": {"batch.kubernetes.io/job-name": job, "job-name": job,
                       "batch.kubernetes.io/controller-uid": "u"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "u",
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"containers": [{"name": "ray-job-submitter", "image": "rayproject/ray"}]},
    })
}

#[tokio::test]
async fn kuberays_unlabelled_submitter_pod_joins_its_rayjobs_gang_through_its_job() {
    let server = Server::start(default_limits()).await;
    let pod = job_pod("train");
    let response = server
        .review("/mutate/pods", pod_request("k", "ml", pod.clone()))
        .await;
    assert_eq!(response["allowed"], true, "{response}");
    let submitter = patched(&pod, &response);
    assert_eq!(submitter["spec"]["schedulerName"], "volcano");
    assert_eq!(
        submitter["metadata"]["annotations"],
        json!({"scheduling.k8s.io/group-name": "ray-train-pg", "volcano.sh/task-spec": "submittergroup"})
    );
    assert_eq!(
        submitter["metadata"]["labels"]["volcano.sh/queue-name"],
        "batch"
    );
    assert_eq!(submitter["metadata"]["labels"]["job-name"], "train");
    // Idempotent: the patched Pod reviewed again (reinvocation) needs nothing more.
    let again = server
        .review("/mutate/pods", pod_request("k2", "ml", submitter))
        .await;
    assert!(again.get("patch").is_none(), "{again}");
    server.shut_down().await;
}

#[tokio::test]
async fn pods_of_jobs_that_are_no_rayjobs_submitter_are_allowed_unchanged() {
    let server = Server::start(default_limits()).await;
    let mut not_the_controller = job_pod("train");
    not_the_controller["metadata"]["ownerReferences"][0]["controller"] = json!(false);
    let cases = [
        // No RayJob of the Job's name.
        ("ml", job_pod("nightly")),
        // A RayJob of that name exists, but it does not control the Job.
        ("ml", job_pod("shadow")),
        // The Job's RayJob no longer exists.
        ("ml", job_pod("gone")),
        // The Pod is not controlled by the Job its label names.
        ("ml", not_the_controller),
        // A RayJob's submitter Pod in a namespace that did not opt in.
        ("web", job_pod("train")),
    ];
    for (namespace, pod) in cases {
        let name = pod["metadata"]["name"].clone();
        let response = server
            .review("/mutate/pods", pod_request("j", namespace, pod))
            .await;
        assert_eq!(response["allowed"], true, "{namespace}/{name}: {response}");
        assert!(
            response.get("patch").is_none(),
            "{namespace}/{name}: {response}"
        );
        assert!(
            response.get("warnings").is_none(),
            "{namespace}/{name}: {response}"
        );
    }
    server.shut_down().await;
}

#[tokio::test]
async fn unlabelled_namespaces_and_non_ray_pods_are_never_patched() {
    let server = Server::start(default_limits()).await;
    let cases = [
        ("web", worker_pod("standalone", "cpu")),
        (
            "ml",
            json!({"metadata": {"name": "nginx", "labels": {"app": "web"}}, "spec": {}}),
        ),
        ("unknown-namespace", worker_pod("standalone", "cpu")),
    ];
    for (namespace, pod) in cases {
        let response = server
            .review("/mutate/pods", pod_request("u", namespace, pod))
            .await;
        assert_eq!(response["uid"], "u");
        assert_eq!(response["allowed"], true);
        assert!(response.get("patch").is_none(), "{namespace}: {response}");
        assert!(
            response.get("patchType").is_none(),
            "{namespace}: {response}"
        );
    }
    server.shut_down().await;
}

#[tokio::test]
async fn values_the_user_set_are_kept_and_warned_about() {
    let server = Server::start(default_limits()).await;
    let mut pod = worker_pod("standalone", "cpu");
    pod["spec"]["schedulerName"] = json!("my-scheduler");
    let response = server
        .review("/mutate/pods", pod_request("w", "ml", pod.clone()))
        .await;
    assert_eq!(response["allowed"], true);
    let warnings = response["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .starts_with("spec.schedulerName is \"my-scheduler\""),
        "{warnings:?}"
    );
    assert_eq!(
        patched(&pod, &response)["spec"]["schedulerName"],
        "my-scheduler"
    );
    server.shut_down().await;
}

#[tokio::test]
async fn a_ray_object_no_cached_node_could_hold_gets_a_warning() {
    let server = Server::start(default_limits()).await;
    let mut cluster = ray_cluster(1, 1, 2);
    cluster["metadata"]["labels"] = json!({"volcano.sh/queue-name": "research"});
    let fits = server
        .review(
            "/validate/ray",
            ray_request("fits", "CREATE", cluster.clone()),
        )
        .await;
    assert_eq!(fits["allowed"], true, "{fits}");
    assert!(fits.get("warnings").is_none(), "{fits}");
    cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
        ["cpu"] = json!("64");
    let response = server
        .review("/validate/ray", ray_request("big", "CREATE", cluster))
        .await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(
        response["warnings"],
        json!([
            "spec.headGroupSpec.template.spec: head Pod asks cpu 64; the largest node offers 16 (node-1)"
        ])
    );
    server.shut_down().await;
}

#[tokio::test]
async fn an_invalid_ray_object_is_denied_with_its_field_path_and_a_valid_one_gets_warnings() {
    let server = Server::start(default_limits()).await;
    let response = server
        .review(
            "/validate/ray",
            ray_request("bad", "CREATE", ray_cluster(5, 5, 2)),
        )
        .await;
    assert_eq!(response["uid"], "bad");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 422);
    assert_eq!(response["status"]["reason"], "Invalid");
    assert_eq!(
        response["status"]["message"],
        "spec.workerGroupSpecs[0].minReplicas: worker group small has minReplicas 5 greater than maxReplicas 2"
    );
    assert!(response.get("patch").is_none());

    let response = server
        .review(
            "/validate/ray",
            ray_request("ok", "UPDATE", ray_cluster(1, 9, 4)),
        )
        .await;
    assert_eq!(response["uid"], "ok");
    assert_eq!(response["allowed"], true);
    assert!(response.get("status").is_none());
    assert!(response.get("patch").is_none(), "validation never patches");
    assert_eq!(
        response["warnings"],
        json!([
            "spec.workerGroupSpecs[0].replicas: worker group small: replicas 9 is outside [minReplicas 1, maxReplicas 4] and will be clamped to 4"
        ])
    );

    let mut deleting = ray_cluster(5, 5, 2);
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let response = server
        .review("/validate/ray", ray_request("del", "UPDATE", deleting))
        .await;
    assert_eq!(
        response["allowed"], true,
        "finalizer removal on an object being deleted is never blocked"
    );
    server.shut_down().await;
}

#[tokio::test]
async fn a_dry_run_gets_the_same_answer_and_is_counted_as_such() {
    let server = Server::start(default_limits()).await;
    let pod = worker_pod("standalone", "cpu");
    let mut wet = pod_request("p", "ml", pod.clone());
    let wet_response = server.review("/mutate/pods", wet.clone()).await;
    wet["dryRun"] = json!(true);
    let dry_response = server.review("/mutate/pods", wet).await;
    assert_eq!(dry_response, wet_response);

    let mut denied = ray_request("d", "CREATE", ray_cluster(5, 5, 2));
    let wet_denial = server.review("/validate/ray", denied.clone()).await;
    denied["dryRun"] = json!(true);
    assert_eq!(server.review("/validate/ray", denied).await, wet_denial);

    let (_, metrics) = server.get("/metrics").await;
    assert!(
        metrics.contains(r#"raygate_webhook_admission_requests_total{webhook="/mutate/pods",operation="CREATE",kind="Pod",verdict="patched",dry_run="true"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"raygate_webhook_admission_requests_total{webhook="/validate/ray",operation="CREATE",kind="RayCluster",verdict="denied",dry_run="true"} 1"#),
        "{metrics}"
    );
    server.shut_down().await;
}

#[tokio::test]
async fn kinds_the_webhooks_are_not_registered_for_share_one_metric_label() {
    let server = Server::start(default_limits()).await;
    for (uid, kind) in [("a", "Deployment"), ("b", "Whatever\u{1}"), ("c", "Zzz")] {
        let mut request = ray_request(uid, "CREATE", ray_cluster(1, 1, 1));
        request["kind"]["kind"] = json!(kind);
        let response = server.review("/validate/ray", request).await;
        assert_eq!(response["uid"], uid);
    }
    let (_, metrics) = server.get("/metrics").await;
    assert!(
        metrics.contains(r#"raygate_webhook_admission_requests_total{webhook="/validate/ray",operation="CREATE",kind="other",verdict="allowed",dry_run="false"} 3"#),
        "{metrics}"
    );
    for kind in ["Deployment", "Whatever", "Zzz"] {
        assert!(
            !metrics.contains(kind),
            "{kind} is a label value: {metrics}"
        );
    }
    server.shut_down().await;
}

#[tokio::test]
async fn malformed_reviews_are_answered_400_with_the_reason() {
    let server = Server::start(default_limits()).await;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"{".to_vec(), "the body is not an AdmissionReview"),
        (Vec::new(), "the body is not an AdmissionReview"),
        (
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}))
                .unwrap(),
            "expected \"admission.k8s.io/v1\"/\"AdmissionReview\"",
        ),
        (
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})).unwrap(),
            "request: Required value",
        ),
        (
            serde_json::to_vec(&review(json!({"kind": {"kind": "Pod"}, "operation": "CREATE"}))).unwrap(),
            "missing field `uid`",
        ),
        (
            serde_json::to_vec(&review(json!({"uid": "", "kind": {"kind": "Pod"}, "operation": "CREATE"}))).unwrap(),
            "request.uid: Required value",
        ),
        (
            serde_json::to_vec(&review(json!({"uid": "u", "kind": "Pod", "operation": "CREATE"}))).unwrap(),
            "invalid type: string \"Pod\"",
        ),
    ];
    for path in ["/mutate/pods", "/validate/ray"] {
        for (body, reason) in &cases {
            let (status, answer) = server.post(path, body.clone()).await;
            let answer = String::from_utf8_lossy(&answer);
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {answer}");
            assert!(
                answer.contains(reason),
                "{path}: {answer:?} lacks {reason:?}"
            );
        }
    }
    let (status, _) = server
        .send(
            true,
            post_request("/mutate/pods", "text/plain", b"{}".to_vec()),
        )
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    // A readable review without the object it needs is answered, not failed: uid echoed.
    let response = server
        .review("/mutate/pods", json!({"uid": "no-object", "kind": {"kind": "Pod"}, "operation": "CREATE", "namespace": "ml"}))
        .await;
    assert_eq!(response["uid"], "no-object");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 400);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("request.object: Required value")
    );

    let (_, metrics) = server.get("/metrics").await;
    assert!(
        metrics.contains(r#"raygate_webhook_admission_requests_total{webhook="/mutate/pods",operation="unknown",kind="unknown",verdict="malformed",dry_run="false"} 8"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            r#"controller_runtime_webhook_requests_total{webhook="/validate/ray",code="400"} 7"#
        ),
        "{metrics}"
    );
    server.shut_down().await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_413() {
    let server = Server::start(Limits {
        max_body_bytes: 64 * 1024,
        ..default_limits()
    })
    .await;
    let mut pod = worker_pod("standalone", "cpu");
    pod["metadata"]["annotations"] = json!({"big": "x".repeat(80 * 1024)});
    let body = serde_json::to_vec(&review(pod_request("big", "ml", pod))).unwrap();
    for h2 in [true, false] {
        let (status, _) = server
            .send(
                h2,
                post_request("/mutate/pods", "application/json", body.clone()),
            )
            .await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    }
    let small = serde_json::to_vec(&review(pod_request(
        "ok",
        "ml",
        worker_pod("standalone", "cpu"),
    )))
    .unwrap();
    let (status, _) = server.post("/mutate/pods", small).await;
    assert_eq!(status, StatusCode::OK, "a body under the limit is served");
    server.shut_down().await;
}

/// Sends the headers and part of a body, over HTTP/1.1 written by hand.
async fn start_slow_request(server: &Server, body: &[u8], sent: usize) -> TlsStream<TcpStream> {
    let mut tls = server.tls(&[b"http/1.1"], &[&rustls::version::TLS13]).await;
    let head = format!(
        "POST /mutate/pods HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&body[..sent]).await.unwrap();
    tls.flush().await.unwrap();
    tls
}

async fn read_status(tls: &mut TlsStream<TcpStream>) -> String {
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    answer.lines().next().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_request_slower_than_the_timeout_is_answered_408() {
    let server = Server::start(Limits {
        request_timeout: Duration::from_millis(300),
        ..default_limits()
    })
    .await;
    let body = serde_json::to_vec(&review(pod_request(
        "slow",
        "ml",
        worker_pod("standalone", "cpu"),
    )))
    .unwrap();
    let started = std::time::Instant::now();
    let mut tls = start_slow_request(&server, &body, 10).await;
    assert_eq!(read_status(&mut tls).await, "HTTP/1.1 408 Request Timeout");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
    server.shut_down().await;
}

/// The plain-HTTP probe server over `state`, as `raygate webhook` runs it next to the TLS one;
/// stops when the sender is dropped or fires.
async fn start_ops(state: AppState) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(raygate_webhook::serve_plain(
        listener,
        raygate_webhook::ops_router(state),
        async move {
            let _ = stopped.await;
        },
    ));
    (address, stop)
}

/// `GET /readyz` over plain HTTP/1.1: the whole answer, status line first.
async fn plain_readyz(address: SocketAddr) -> String {
    let mut tcp = TcpStream::connect(address).await.unwrap();
    tcp.write_all(b"GET /readyz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn shutdown_turns_readiness_off_drains_a_review_in_flight_and_refuses_new_connections() {
    let server = Server::start(default_limits()).await;
    let (ops, _ops_stop) = start_ops(server.state.clone()).await;
    let answer = plain_readyz(ops).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let body = serde_json::to_vec(&review(pod_request(
        "drain",
        "ml",
        worker_pod("standalone", "cpu"),
    )))
    .unwrap();
    let mut tls = start_slow_request(&server, &body, 10).await;
    // Let the server read the headers, so the request is in flight.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let address = server.address;
    let Server { stop, task, .. } = server;
    stop.expect("stop sender").send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        TcpStream::connect(address).await.is_err(),
        "the listener is closed once shutdown starts"
    );
    assert!(!task.is_finished(), "serve waits for the request in flight");
    let answer = plain_readyz(ops).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("not ready: shutting down: draining in-flight requests"),
        "{answer}"
    );
    tls.write_all(&body[10..]).await.unwrap();
    tls.flush().await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut answer))
        .await
        .expect("an answer before the drain timeout")
        .expect("readable answer");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.contains(r#""uid":"drain""#), "{answer}");
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("serve returns once drained")
        .unwrap();
}

#[tokio::test]
async fn tls_1_2_is_served_and_plaintext_is_not() {
    let server = Server::start(default_limits()).await;
    let tls = server.tls(&[b"http/1.1"], &[&rustls::version::TLS12]).await;
    assert_eq!(
        tls.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    drop(tls);
    let mut plain = TcpStream::connect(server.address).await.unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut answer)).await;
    assert!(
        !String::from_utf8_lossy(&answer).contains("200 OK"),
        "no plaintext HTTP on the TLS port"
    );
    server.shut_down().await;
}

#[tokio::test]
async fn health_readiness_and_metrics_are_served() {
    let server = Server::start(default_limits()).await;
    assert_eq!(server.get("/healthz").await, (StatusCode::OK, "ok".into()));
    assert_eq!(server.get("/readyz").await, (StatusCode::OK, "ok".into()));
    let body = serde_json::to_vec(&review(pod_request(
        "m",
        "ml",
        worker_pod("standalone", "cpu"),
    )))
    .unwrap();
    let (status, _) = server.post("/mutate/pods", body).await;
    assert_eq!(status, StatusCode::OK);
    let (status, metrics) = server.get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    for expected in [
        r#"controller_runtime_webhook_requests_total{webhook="/mutate/pods",code="200"} 1"#,
        r#"controller_runtime_webhook_latency_seconds_count{webhook="/mutate/pods"} 1"#,
        r#"controller_runtime_webhook_requests_in_flight{webhook="/mutate/pods"} 0"#,
        r#"raygate_webhook_patch_bytes_count{webhook="/mutate/pods"} 1"#,
        r#"raygate_webhook_cache_synced{cache="rayclusters"} 1"#,
        r#"raygate_webhook_cache_age_seconds{cache="namespaces"}"#,
        "raygate_certificate_loads_total 1",
        "raygate_certificate_not_after_seconds ",
    ] {
        assert!(
            metrics.contains(expected),
            "{expected} missing from\n{metrics}"
        );
    }
    assert!(metrics.ends_with("# EOF\n"));
    server.shut_down().await;
}

#[tokio::test]
async fn readiness_waits_for_the_certificate_and_the_caches() {
    let certs = Arc::new(CertResolver::new());
    let (caches, _watches) = Caches::start(unreachable_client());
    let state = AppState {
        caches,
        certs: certs.clone(),
        metrics: Arc::new(Metrics::new()),
        validation: Arc::new(ValidationContext::default()),
        opt_in: Arc::default(),
        more_metrics: None,
        limits: default_limits(),
        draining: Draining::default(),
    };
    let (address, stop) = start_ops(state).await;
    let answer = plain_readyz(address).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("serving certificate not loaded"),
        "{answer}"
    );
    assert!(
        answer.contains("cache namespaces not synced; cache rayclusters not synced; cache rayjobs not synced; cache queues not synced"),
        "{answer}"
    );
    let pki = mint_pki();
    certs.set(certified_key_from_pem(pki.cert_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap());
    let answer = plain_readyz(address).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(!answer.contains("certificate"), "{answer}");
    stop.send(()).unwrap();
}

/// A client for an API server that does not exist: its watches never sync.
fn unreachable_client() -> kube::Client {
    let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    kube::Client::try_from(config).expect("a client")
}

#[tokio::test]
async fn the_mutating_ray_webhook_only_defaults_the_queue_and_the_validating_one_only_judges() {
    let server = Server::start(default_limits()).await;
    let cluster = ray_cluster(1, 1, 2);
    let response = server
        .review("/mutate/ray", ray_request("m", "CREATE", cluster.clone()))
        .await;
    assert_eq!(response["uid"], "m");
    assert_eq!(response["allowed"], true);
    assert!(response.get("warnings").is_none(), "{response}");
    let defaulted = patched(&cluster, &response);
    assert_eq!(
        defaulted["metadata"]["labels"]["volcano.sh/queue-name"], "research",
        "the namespace annotation's queue"
    );
    let response = server
        .review("/validate/ray", ray_request("v", "CREATE", defaulted))
        .await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("patch").is_none());

    let mut web = cluster.clone();
    web["metadata"]["namespace"] = json!("web");
    let mut request = ray_request("w", "CREATE", web);
    request["namespace"] = json!("web");
    let response = server.review("/mutate/ray", request).await;
    assert!(
        response.get("patch").is_none(),
        "no defaulting outside opted-in namespaces: {response}"
    );
    server.shut_down().await;
}

#[tokio::test]
async fn a_non_default_opt_in_label_is_the_only_one_that_onboards_and_governs() {
    let label = format!("{}={}", TEAM_OPT_IN.0, TEAM_OPT_IN.1);
    let server = Server::start_opting_in(
        default_limits(),
        ServeOptions::default(),
        label.parse().expect("a label"),
    )
    .await;
    let pod = worker_pod("standalone", "cpu");
    let response = server
        .review("/mutate/pods", pod_request("team", "team", pod.clone()))
        .await;
    let onboarded = patched(&pod, &response);
    assert_eq!(onboarded["spec"]["schedulerName"], "volcano", "{response}");
    assert_eq!(
        onboarded["metadata"]["annotations"]["scheduling.k8s.io/group-name"],
        "ray-standalone-pg"
    );
    // `ml` carries raygate's default label, which is not the one in force.
    let response = server
        .review("/mutate/pods", pod_request("ml", "ml", pod))
        .await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none(), "{response}");

    // Queue rules govern the namespaces of the label in force only.
    let mut cluster = ray_cluster(1, 1, 2);
    cluster["metadata"]["labels"] = json!({"volcano.sh/queue-name": "closed"});
    let verdicts = [("team", false), ("ml", true)].map(|(namespace, allowed)| {
        let mut cluster = cluster.clone();
        cluster["metadata"]["namespace"] = json!(namespace);
        let mut request = ray_request(namespace, "CREATE", cluster);
        request["namespace"] = json!(namespace);
        (request, allowed)
    });
    for (request, allowed) in verdicts {
        let response = server.review("/validate/ray", request).await;
        assert_eq!(response["allowed"], allowed, "{response}");
    }
    server.shut_down().await;
}

#[tokio::test]
async fn a_closed_queue_denies_in_an_opted_in_namespace_only() {
    let server = Server::start(default_limits()).await;
    let mut cluster = ray_cluster(1, 1, 2);
    cluster["metadata"]["labels"] = json!({"volcano.sh/queue-name": "closed"});
    let response = server
        .review("/validate/ray", ray_request("c", "CREATE", cluster.clone()))
        .await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 422);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("metadata.labels[volcano.sh/queue-name]: queue \"closed\" is Closed"),
        "{message}"
    );
    cluster["metadata"]["namespace"] = json!("web");
    let mut request = ray_request("c2", "CREATE", cluster);
    request["namespace"] = json!("web");
    assert_eq!(
        server.review("/validate/ray", request).await["allowed"],
        true
    );

    let mut update = ray_request("u", "UPDATE", ray_cluster(1, 1, 2));
    update["oldObject"] = Value::Null;
    let response = server.review("/validate/ray", update).await;
    assert_eq!(response["status"]["code"], 400);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("request.oldObject: Required value")
    );
    server.shut_down().await;
}

#[tokio::test]
async fn queue_policies_are_validated() {
    let server = Server::start(default_limits()).await;
    let policy = |default_queue: &str| {
        json!({
            "uid": "qp",
            "kind": {"group": "raygate.io", "version": "v1alpha1", "kind": "QueuePolicy"},
            "operation": "CREATE",
            "name": "team",
            "object": {
                "apiVersion": "raygate.io/v1alpha1", "kind": "QueuePolicy",
                "metadata": {"name": "team"},
                "spec": {"allowedQueues": ["research"], "defaultQueue": default_queue}
            }
        })
    };
    let response = server
        .review("/validate/queuepolicy", policy("batch"))
        .await;
    assert_eq!(response["uid"], "qp");
    assert_eq!(response["allowed"], false);
    assert!(
        response["status"]["message"].as_str().unwrap().starts_with(
            "spec.defaultQueue: queue \"batch\" is not in spec.allowedQueues [research]"
        ),
        "{response}"
    );
    let response = server
        .review("/validate/queuepolicy", policy("research"))
        .await;
    assert_eq!(response["allowed"], true, "{response}");
    server.shut_down().await;
}

#[tokio::test]
async fn ray_objects_are_converted_between_versions() {
    let server = Server::start(default_limits()).await;
    let cluster = ray_cluster(1, 1, 2);
    let body = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "conv", "desiredAPIVersion": "ray.io/v1alpha1", "objects": [cluster]}
    });
    let (status, answer) = server
        .post("/convert", serde_json::to_vec(&body).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["response"]["uid"], "conv");
    assert_eq!(answer["response"]["result"]["status"], "Success");
    let converted = answer["response"]["convertedObjects"].as_array().unwrap();
    assert_eq!(converted.len(), 1);
    assert_eq!(converted[0]["apiVersion"], "ray.io/v1alpha1");
    assert_eq!(converted[0]["metadata"]["name"], "demo");
    server.shut_down().await;
}

/// Both TLS versions the server speaks.
const TLS_VERSIONS: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// Connection options with an idle timeout of `idle` and a bound of `max` connections.
fn connection_options(idle: Duration, max: u32) -> ServeOptions {
    ServeOptions {
        idle_connection_timeout: idle,
        max_connections: max,
        drain_timeout: Duration::from_secs(5),
        ..ServeOptions::default()
    }
}

/// Whether the server closes `tls` (EOF, `close_notify` or a reset) within `within`; the
/// client sends nothing, and the server sends no data unasked.
async fn closed_within(tls: &mut TlsStream<TcpStream>, within: Duration) -> bool {
    let mut buffer = [0u8; 64];
    let read = async {
        loop {
            match tls.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, read).await.is_ok()
}

/// Waits up to `within` for `condition`.
async fn eventually(within: Duration, condition: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while !condition() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// How many connections the server closed for `reason`.
fn closed_for(server: &Server, reason: &str) -> u64 {
    server
        .state
        .metrics
        .connections_closed
        .get_or_create(&CloseLabels {
            reason: reason.to_string(),
        })
        .get()
}

/// A keep-alive client connection over HTTP/2 or HTTP/1.1, and the task driving it, which ends
/// when the connection closes.
enum KeptAlive {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl KeptAlive {
    async fn open(server: &Server, h2: bool) -> (KeptAlive, JoinHandle<()>) {
        let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
        let io = TokioIo::new(server.tls(alpn, TLS_VERSIONS).await);
        if h2 {
            let (sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .expect("h2 handshake");
            let task = tokio::spawn(async move {
                let _ = connection.await;
            });
            (KeptAlive::H2(sender), task)
        } else {
            let (sender, connection) = hyper::client::conn::http1::handshake(io)
                .await
                .expect("http/1.1 handshake");
            let task = tokio::spawn(async move {
                let _ = connection.await;
            });
            (KeptAlive::H1(sender), task)
        }
    }

    async fn get(&mut self, path: &str) -> StatusCode {
        self.get_with_headers(path).await.0
    }

    /// The answer's status and headers.
    async fn get_with_headers(&mut self, path: &str) -> (StatusCode, hyper::HeaderMap) {
        let request = Request::get(format!("https://127.0.0.1{path}"))
            .header("host", "127.0.0.1")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = match self {
            KeptAlive::H1(sender) => sender.send_request(request).await,
            KeptAlive::H2(sender) => sender.send_request(request).await,
        }
        .expect("an answer on the kept-alive connection");
        let (parts, body) = response.into_parts();
        body.collect().await.expect("body");
        (parts.status, parts.headers)
    }
}

/// What the API server sees of a stopping replica. It keeps its HTTP/1.1 connections to a
/// webhook open between reviews and writes the next review on one without warning, so a server
/// that closed an idle one could cut that review ("broken pipe"): the idle HTTP/1.1 connection
/// stays open, its next request is answered with `Connection: close`, and the client closes it.
/// An HTTP/2 connection is told with GOAWAY at once. The drain ends when the last connection
/// has closed, long before its timeout.
#[tokio::test]
async fn draining_leaves_idle_http1_connections_to_their_client_and_sends_goaway_over_h2() {
    let drain = Duration::from_secs(30);
    let mut server = Server::start_draining_within(drain).await;
    let (mut h1, h1_connection) = KeptAlive::open(&server, false).await;
    let (mut h2, h2_connection) = KeptAlive::open(&server, true).await;
    let (status, headers) = h1.get_with_headers("/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers.get("connection"), None, "kept alive while serving");
    assert_eq!(h2.get("/healthz").await, StatusCode::OK);
    let stopped = Instant::now();
    server.stop.take().expect("stop sender").send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), h2_connection)
        .await
        .expect("GOAWAY ends the idle HTTP/2 connection")
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !h1_connection.is_finished(),
        "the idle HTTP/1.1 connection is not closed under its client"
    );
    assert!(!server.task.is_finished(), "the drain waits for it");
    let (status, headers) = h1.get_with_headers("/healthz").await;
    assert_eq!(status, StatusCode::OK, "a request on it is still served");
    assert_eq!(
        headers.get("connection").map(|v| v.to_str().unwrap()),
        Some("close")
    );
    tokio::time::timeout(Duration::from_secs(5), h1_connection)
        .await
        .expect("the connection ends after the answer that said close")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), &mut server.task)
        .await
        .expect("serve returns once its last connection has closed")
        .unwrap();
    assert!(stopped.elapsed() < drain, "{:?}", stopped.elapsed());
    assert_eq!(closed_for(&server, "shutdown"), 1, "only the HTTP/2 one");
}

#[tokio::test]
async fn connections_still_open_at_the_drain_timeout_are_closed() {
    let drain = Duration::from_secs(1);
    let mut server = Server::start_draining_within(drain).await;
    let (mut h1, h1_connection) = KeptAlive::open(&server, false).await;
    assert_eq!(h1.get("/healthz").await, StatusCode::OK);
    let stopped = Instant::now();
    server.stop.take().expect("stop sender").send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), &mut server.task)
        .await
        .expect("serve returns after the drain timeout")
        .unwrap();
    assert!(stopped.elapsed() >= drain, "{:?}", stopped.elapsed());
    tokio::time::timeout(Duration::from_secs(2), h1_connection)
        .await
        .expect("the idle connection is closed")
        .unwrap();
    assert_eq!(closed_for(&server, "shutdown"), 1);
}

#[tokio::test]
async fn connections_that_send_nothing_after_the_handshake_are_closed_after_the_idle_timeout() {
    let idle = Duration::from_secs(1);
    let server = Server::start_with(default_limits(), connection_options(idle, 64)).await;
    let started = Instant::now();
    // A bare TLS probe and connections that negotiated h2 or http/1.1, all sending nothing
    // (the server is still reading the first bytes to tell HTTP/1 from HTTP/2)...
    let mut quiet = Vec::new();
    for alpn in [&[][..], &[&b"h2"[..]][..], &[&b"http/1.1"[..]][..]] {
        quiet.push(server.tls(alpn, TLS_VERSIONS).await);
    }
    // ...and one that opened HTTP/2 (preface and SETTINGS) but sends no request.
    let io = TokioIo::new(server.tls(&[b"h2"], TLS_VERSIONS).await);
    let (_sender, h2) =
        hyper::client::conn::http2::handshake::<_, _, Full<Bytes>>(TokioExecutor::new(), io)
            .await
            .expect("h2 handshake");
    let h2 = tokio::spawn(h2);
    for tls in &mut quiet {
        assert!(
            closed_within(tls, idle + Duration::from_secs(4)).await,
            "an idle connection is closed within the idle timeout and slack"
        );
        assert!(started.elapsed() >= idle, "closed before the idle timeout");
    }
    let ended = tokio::time::timeout(idle + Duration::from_secs(4), h2).await;
    assert!(ended.is_ok(), "an idle HTTP/2 connection is closed too");
    assert!(started.elapsed() >= idle, "closed before the idle timeout");
    assert_eq!(closed_for(&server, "idle"), 4);
    let open = &server.state.metrics.open_connections;
    assert!(
        eventually(Duration::from_secs(5), || open.get() == 0).await,
        "{} connections still open",
        open.get()
    );
    server.shut_down().await;
}

#[tokio::test]
async fn a_kept_alive_connection_is_closed_once_idle_after_its_requests_over_h2_and_http1() {
    let idle = Duration::from_secs(1);
    let server = Server::start_with(default_limits(), connection_options(idle, 64)).await;
    for h2 in [true, false] {
        let (mut client, connection) = KeptAlive::open(&server, h2).await;
        assert_eq!(client.get("/healthz").await, StatusCode::OK);
        // A pause shorter than the idle timeout keeps the connection.
        tokio::time::sleep(idle / 2).await;
        assert_eq!(client.get("/healthz").await, StatusCode::OK, "h2: {h2}");
        let answered = Instant::now();
        let ended = tokio::time::timeout(idle + Duration::from_secs(4), connection).await;
        assert!(
            ended.is_ok(),
            "h2: {h2}: the connection is closed once idle"
        );
        assert!(
            answered.elapsed() >= idle / 2,
            "h2: {h2}: closed {:?} after the last answer",
            answered.elapsed()
        );
    }
    assert_eq!(closed_for(&server, "idle"), 2);
    server.shut_down().await;
}

#[tokio::test]
async fn a_request_in_flight_longer_than_the_idle_timeout_is_not_cut_over_h2_and_http1() {
    let idle = Duration::from_secs(1);
    let server = Server::start_with(default_limits(), connection_options(idle, 64)).await;
    assert!(default_limits().request_timeout > idle * 3);
    let body = |uid: &str| {
        serde_json::to_vec(&review(pod_request(
            uid,
            "ml",
            worker_pod("standalone", "cpu"),
        )))
        .unwrap()
    };
    let http1 = async {
        let body = body("slow-http1");
        let mut tls = start_slow_request(&server, &body, 10).await;
        tokio::time::sleep(idle * 5 / 2).await;
        tls.write_all(&body[10..]).await.unwrap();
        tls.flush().await.unwrap();
        read_status(&mut tls).await
    };
    let h2 = async {
        let body = body("slow-h2");
        let io = TokioIo::new(server.tls(&[b"h2"], TLS_VERSIONS).await);
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .expect("h2 handshake");
        tokio::spawn(connection);
        let (mut chunks, stream) =
            futures::channel::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(2);
        let request = Request::post("https://127.0.0.1/mutate/pods")
            .header("content-type", "application/json")
            .body(StreamBody::new(stream))
            .unwrap();
        let response = tokio::spawn(sender.send_request(request));
        chunks
            .try_send(Ok(Frame::data(Bytes::copy_from_slice(&body[..10]))))
            .unwrap();
        tokio::time::sleep(idle * 5 / 2).await;
        chunks
            .try_send(Ok(Frame::data(Bytes::copy_from_slice(&body[10..]))))
            .unwrap();
        drop(chunks);
        let response = response.await.unwrap().expect("an h2 answer");
        let status = response.status();
        let answer = response.into_body().collect().await.unwrap().to_bytes();
        (status, answer)
    };
    let (http1, (h2_status, h2_answer)) = tokio::join!(http1, h2);
    assert_eq!(http1, "HTTP/1.1 200 OK");
    assert_eq!(h2_status, StatusCode::OK);
    let answer: Value = serde_json::from_slice(&h2_answer).unwrap();
    assert_eq!(answer["response"]["uid"], "slow-h2");
    server.shut_down().await;
}

#[tokio::test]
async fn at_the_bound_a_connection_with_a_request_in_flight_is_kept_and_a_new_one_waits_for_it() {
    let server = Server::start_with(
        default_limits(),
        connection_options(Duration::from_secs(60), 1),
    )
    .await;
    let body = serde_json::to_vec(&review(pod_request(
        "in-flight",
        "ml",
        worker_pod("standalone", "cpu"),
    )))
    .unwrap();
    let mut slow = start_slow_request(&server, &body, 10).await;
    // Let the server read the head, so the request is in flight on the only connection.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let waiting = async {
        tokio::time::timeout(
            Duration::from_secs(10),
            server.review(
                "/mutate/pods",
                pod_request("waited", "ml", worker_pod("standalone", "cpu")),
            ),
        )
        .await
        .expect("the new connection is served once the busy one has closed")
    };
    let finishing = async {
        // Longer than an evicted connection would get to close (a second), well within the
        // request timeout.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        slow.write_all(&body[10..]).await.unwrap();
        slow.flush().await.unwrap();
        read_status(&mut slow).await
    };
    let (waited, finished) = tokio::join!(waiting, finishing);
    assert_eq!(
        finished, "HTTP/1.1 200 OK",
        "the busy connection is not cut"
    );
    assert_eq!(waited["uid"], "waited");
    assert_eq!(server.state.metrics.max_connections.get(), 1);
    server.shut_down().await;
}

#[tokio::test]
async fn a_flood_of_idle_connections_cannot_keep_a_review_out_nor_pass_the_connection_bound() {
    const BOUND: u32 = 50;
    const FLOOD: usize = 200;
    // An idle timeout far longer than the test: only the bound makes room.
    let server = Server::start_with(
        default_limits(),
        connection_options(Duration::from_secs(300), BOUND),
    )
    .await;
    let open = server.state.metrics.open_connections.clone();
    let (stop_sampling, mut sampling) = oneshot::channel::<()>();
    let sampler = tokio::spawn(async move {
        let mut most = 0;
        loop {
            most = most.max(open.get());
            tokio::select! {
                _ = &mut sampling => return most,
                () = tokio::time::sleep(Duration::from_millis(1)) => {}
            }
        }
    });
    let flood = tokio::time::timeout(
        Duration::from_secs(30),
        futures::future::join_all((0..FLOOD).map(|_| server.tls(&[], TLS_VERSIONS))),
    )
    .await
    .expect("every connection of the flood gets its handshake in turn");
    assert_eq!(flood.len(), FLOOD);
    assert_eq!(
        server.state.metrics.open_connections.get(),
        i64::from(BOUND),
        "the idle connections fill the bound"
    );
    let response = tokio::time::timeout(
        Duration::from_secs(10),
        server.review(
            "/mutate/pods",
            pod_request("legit", "ml", worker_pod("standalone", "cpu")),
        ),
    )
    .await
    .expect("a review on a new connection is answered despite the flood");
    assert_eq!(response["uid"], "legit");
    assert_eq!(response["allowed"], true);
    stop_sampling.send(()).unwrap();
    let most = sampler.await.unwrap();
    assert!(
        most <= i64::from(BOUND),
        "{most} connections open at once, over the bound of {BOUND}"
    );
    // 201 connections through a bound of 50: each one past the bound closed the connection
    // idle the longest, all of them the flood's.
    let evicted = FLOOD as u64 + 1 - u64::from(BOUND);
    assert!(closed_for(&server, "evicted") >= evicted);
    let mut still_open = 0;
    for mut tls in flood {
        if !closed_within(&mut tls, Duration::from_millis(100)).await {
            still_open += 1;
        }
    }
    assert!(
        still_open < BOUND as usize,
        "{still_open} of the flood's connections still open"
    );
    assert_eq!(closed_for(&server, "idle"), 0);
    server.shut_down().await;
}

#[tokio::test]
async fn the_connection_metrics_are_exported() {
    let idle = Duration::from_secs(1);
    let server = Server::start_with(default_limits(), connection_options(idle, 7)).await;
    let mut quiet = server.tls(&[b"h2"], TLS_VERSIONS).await;
    assert!(closed_within(&mut quiet, idle + Duration::from_secs(4)).await);
    let open = &server.state.metrics.open_connections;
    assert!(eventually(Duration::from_secs(5), || open.get() == 0).await);
    let (_, metrics) = server.get("/metrics").await;
    for expected in [
        "raygate_webhook_max_connections 7",
        // The connection of this scrape.
        "raygate_webhook_open_connections 1",
        r#"raygate_webhook_connections_closed_total{reason="idle"} 1"#,
    ] {
        assert!(
            metrics.contains(expected),
            "{expected} missing from\n{metrics}"
        );
    }
    server.shut_down().await;
}
