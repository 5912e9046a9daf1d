//! raygate's self-managed webhook certificates on the real API server: the Secret is created
//! once however many replicas start together, its CA bundle is injected into webhook
//! configurations and CRD conversion webhooks (and re-injected when someone resets it), and a
//! forced CA rotation keeps every served certificate trusted by the injected bundle at every
//! moment. Run inside the environment: `tests/env/control-plane exec -- cargo test -p
//! raygate-e2e --test certs`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use raygate_certs::inject::InjectionTargets;
use raygate_certs::pki::{self, parse_certificate};
use raygate_certs::rotation::RotationPolicy;
use raygate_certs::secret::ROTATE_CA;
use raygate_certs::{CertResolver, CertTask, SelfManaged, SelfManagedConfig, request_rotation};
use raygate_e2e::cleanup::{DeleteOnDrop, delete_on_drop};
use raygate_e2e::pem::certificates;
use raygate_e2e::{Env, TestNamespace, free_ports};
use rustls::pki_types::CertificateDer;
use serde_json::json;
use time::OffsetDateTime;

const SECRET: &str = "raygate-webhook-cert";
const SERVICE: &str = "raygate-webhook";
const SETTLE: Duration = Duration::from_secs(30);
/// A debug build of raygate loads the ~2 MiB of CRD schemas before serving; on the shared
/// 2-core machine under test load that alone can take tens of seconds.
const STARTUP: Duration = Duration::from_secs(120);

/// Cluster-scoped objects a test created: a webhook configuration of each kind and a CRD with a
/// conversion webhook, none of which matches anything, deleted when dropped.
struct Targets {
    name: String,
    crd: String,
    config: kube::Config,
}

impl Targets {
    /// Creates them, named after the test namespace. The webhooks select only objects labelled
    /// `certs-e2e.raygate.io/never`, so they never affect another test.
    async fn create(env: &Env, ns: &TestNamespace) -> Targets {
        let client = ns.client();
        let name = format!("certs-e2e-{}", ns.name());
        let webhook = |kind: &str| {
            json!({
                "name": format!("{kind}.certs-e2e.raygate.io"),
                "clientConfig": {"url": "https://127.0.0.1:1/never"},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
                "objectSelector": {"matchLabels": {"certs-e2e.raygate.io/never": "true"}},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "timeoutSeconds": 3,
                "admissionReviewVersions": ["v1"],
            })
        };
        let mutating: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": name},
            "webhooks": [webhook("first"), webhook("second")],
        }))
        .unwrap();
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &mutating)
            .await
            .expect("creating the MutatingWebhookConfiguration");
        let validating: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": name},
            "webhooks": [webhook("only")],
        }))
        .unwrap();
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &validating)
            .await
            .expect("creating the ValidatingWebhookConfiguration");
        let group = format!("{}.certs-e2e.raygate.io", ns.name());
        let crd_name = format!("widgets.{group}");
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": crd_name, "annotations": {"written-by": "the test"}},
            "spec": {
                "group": group,
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
                "conversion": {"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": "https://127.0.0.1:1/convert"}}},
            },
        }))
        .unwrap();
        Api::<CustomResourceDefinition>::all(client)
            .create(&PostParams::default(), &crd)
            .await
            .expect("creating the CRD");
        Targets {
            name,
            crd: crd_name,
            config: env.kube_config().await,
        }
    }

    fn injection_targets(&self) -> InjectionTargets {
        InjectionTargets {
            mutating_webhook_configurations: vec![self.name.clone()],
            validating_webhook_configurations: vec![self.name.clone()],
            crds: vec![self.crd.clone()],
        }
    }

    /// Every `caBundle` of the targets, decoded.
    async fn bundles(&self, client: &Client) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
        let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
            .get(&self.name)
            .await?;
        let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .get(&self.name)
            .await?;
        let crd = Api::<CustomResourceDefinition>::all(client.clone())
            .get(&self.crd)
            .await?;
        let mut bundles: Vec<Option<Vec<u8>>> = Vec::new();
        for webhook in mutating.webhooks.unwrap_or_default() {
            bundles.push(webhook.client_config.ca_bundle.map(|b| b.0));
        }
        for webhook in validating.webhooks.unwrap_or_default() {
            bundles.push(webhook.client_config.ca_bundle.map(|b| b.0));
        }
        bundles.push(
            crd.spec
                .conversion
                .and_then(|c| c.webhook)
                .and_then(|w| w.client_config)
                .and_then(|c| c.ca_bundle)
                .map(|b| b.0),
        );
        Ok(bundles)
    }

    /// The bundle of the first mutating webhook: what the API server trusts when it calls it.
    async fn mutating_bundle(&self, client: &Client) -> anyhow::Result<Vec<u8>> {
        Ok(self.bundles(client).await?[0].clone().unwrap_or_default())
    }
}

impl Drop for Targets {
    fn drop(&mut self) {
        delete_on_drop::<MutatingWebhookConfiguration>(&self.config, &self.name);
        delete_on_drop::<ValidatingWebhookConfiguration>(&self.config, &self.name);
        delete_on_drop::<CustomResourceDefinition>(&self.config, &self.crd);
    }
}

fn config(ns: &TestNamespace, targets: &Targets, policy: RotationPolicy) -> SelfManagedConfig {
    SelfManagedConfig {
        namespace: ns.name().to_string(),
        secret_name: SECRET.into(),
        service_name: SERVICE.into(),
        extra_sans: vec!["127.0.0.1".into()],
        targets: targets.injection_targets(),
        policy,
        resync_interval: Duration::from_secs(1),
    }
}

/// A replica: its own client, resolver and task.
struct Replica {
    resolver: Arc<CertResolver>,
    _task: CertTask,
}

impl Replica {
    async fn start(env: &Env, config: SelfManagedConfig) -> Replica {
        let resolver = Arc::new(CertResolver::new());
        let task = SelfManaged::spawn(env.client().await, config, resolver.clone());
        Replica {
            resolver,
            _task: task,
        }
    }

    fn served(&self) -> Option<CertificateDer<'static>> {
        self.resolver.current().map(|key| key.cert[0].clone())
    }
}

/// The Secret's data entry `key`.
async fn secret_entry(ns: &TestNamespace, key: &str) -> anyhow::Result<Option<Vec<u8>>> {
    let secret = ns.api::<Secret>().get_opt(SECRET).await?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|data| data.get(key).map(|b| b.0.clone())))
}

/// Whether `leaf` verifies, for the Service name and for 127.0.0.1, under some CA of `bundle`.
fn trusted(leaf: &CertificateDer<'static>, bundle: &[u8], namespace: &str) -> bool {
    let now = OffsetDateTime::now_utc();
    certificates(bundle).iter().any(|ca| {
        pki::verifies_under(leaf, ca, &format!("{SERVICE}.{namespace}.svc"), now)
            && pki::verifies_under(leaf, ca, "127.0.0.1", now)
    })
}

fn fast_policy() -> RotationPolicy {
    RotationPolicy {
        propagation_delay: time::Duration::seconds(3),
        overlap: time::Duration::seconds(6),
        ..RotationPolicy::default()
    }
}

/// Waits until every replica serves the Secret's certificate and every target carries the
/// Secret's bundle; returns that bundle.
async fn settled(ns: &TestNamespace, targets: &Targets, replicas: &[&Replica]) -> Vec<u8> {
    let client = ns.client();
    ns.wait_for(
        "the replicas to serve the Secret's certificate and every caBundle to match",
        SETTLE,
        || async {
            let (Some(bundle), Some(leaf_pem)) = (
                secret_entry(ns, "ca.crt").await?,
                secret_entry(ns, "tls.crt").await?,
            ) else {
                return Ok(None);
            };
            let leaf = parse_certificate("tls.crt", &String::from_utf8(leaf_pem)?)?.der;
            let served_by_all = replicas.iter().all(|r| r.served().as_ref() == Some(&leaf));
            let injected = targets
                .bundles(&client)
                .await?
                .iter()
                .all(|b| b.as_deref() == Some(bundle.as_slice()));
            Ok((served_by_all && injected).then_some(bundle))
        },
    )
    .await
}

#[tokio::test]
async fn self_managed_mode_creates_the_secret_and_injects_and_reinjects_the_ca_bundle() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "certs-inject").await;
    let targets = Targets::create(&env, &ns).await;
    let replica = Replica::start(&env, config(&ns, &targets, fast_policy())).await;

    let bundle = settled(&ns, &targets, &[&replica]).await;
    assert_eq!(
        certificates(&bundle).len(),
        1,
        "one CA after the first start"
    );
    let served = replica.served().expect("a served certificate");
    assert!(trusted(&served, &bundle, ns.name()));
    let sans = pki::facts_from_der(served.clone()).unwrap().sans;
    let namespace = ns.name();
    let expected: BTreeSet<String> = [
        format!("{SERVICE}.{namespace}.svc"),
        format!("{SERVICE}.{namespace}"),
        SERVICE.to_string(),
        "127.0.0.1".to_string(),
    ]
    .into();
    assert_eq!(sans, expected);
    let secret = ns.api::<Secret>().get(SECRET).await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    assert_eq!(replica.resolver.metrics().steps_written("create_ca"), 1);

    // Only caBundle was written: the rest of the objects is as the test created it.
    let client = ns.client();
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(&targets.crd)
        .await
        .unwrap();
    assert_eq!(crd.annotations()["written-by"], "the test");
    let conversion = crd.spec.conversion.unwrap().webhook.unwrap();
    assert_eq!(
        conversion.client_config.unwrap().url.as_deref(),
        Some("https://127.0.0.1:1/convert")
    );
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone());
    let webhooks = mutating.get(&targets.name).await.unwrap().webhooks.unwrap();
    assert_eq!(webhooks[1].timeout_seconds, Some(3));

    // Someone resets a caBundle: it comes back.
    let reset = json!([{"op": "remove", "path": "/webhooks/1/clientConfig/caBundle"}]);
    mutating
        .patch(
            &targets.name,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(reset).unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(targets.bundles(&client).await.unwrap()[1], None);
    assert_eq!(settled(&ns, &targets, &[&replica]).await, bundle);

    // A restarted replica adopts the stored CA instead of minting one.
    drop(replica);
    let restarted = Replica::start(&env, config(&ns, &targets, fast_policy())).await;
    assert_eq!(settled(&ns, &targets, &[&restarted]).await, bundle);
    assert_eq!(restarted.served(), Some(served));
    assert_eq!(restarted.resolver.metrics().steps_written("create_ca"), 0);
}

#[tokio::test]
async fn replicas_started_together_agree_on_one_ca() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "certs-race").await;
    let targets = Targets::create(&env, &ns).await;
    let config = config(&ns, &targets, fast_policy());
    let (a, b, c) = tokio::join!(
        Replica::start(&env, config.clone()),
        Replica::start(&env, config.clone()),
        Replica::start(&env, config.clone()),
    );
    let bundle = settled(&ns, &targets, &[&a, &b, &c]).await;
    assert_eq!(certificates(&bundle).len(), 1);
    let created: u64 = [&a, &b, &c]
        .iter()
        .map(|r| r.resolver.metrics().steps_written("create_ca"))
        .sum();
    assert_eq!(
        created, 1,
        "exactly one replica wrote the CA, the others adopted it"
    );

    // The mechanism behind it: a write based on a stale read is refused by the API server.
    let secrets = ns.api::<Secret>();
    let read = secrets.get(SECRET).await.unwrap();
    let stale_version = read.resource_version().unwrap();
    let mut state = raygate_certs::secret::decode(&read);
    state.rotation_requested = true;
    request_rotation(ns.client(), ns.name(), SECRET)
        .await
        .unwrap();
    let refused = secrets
        .patch(
            SECRET,
            &PatchParams::default(),
            &Patch::Merge(&raygate_certs::secret::patch(&state, &stale_version)),
        )
        .await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(status)) if status.code == 409),
        "a patch with a stale resourceVersion must conflict: {refused:?}"
    );
}

/// One sample of what the API server would see during a rotation.
#[derive(Debug)]
struct Sample {
    bundle_cas: usize,
    /// Index in the bundle of the CA under which each replica's certificate verifies.
    served_under: Vec<Option<usize>>,
}

#[tokio::test]
async fn a_forced_rotation_keeps_every_served_certificate_trusted() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "certs-rotate").await;
    let targets = Targets::create(&env, &ns).await;
    let config = config(&ns, &targets, fast_policy());
    let (a, b) = tokio::join!(
        Replica::start(&env, config.clone()),
        Replica::start(&env, config.clone()),
    );
    let old_bundle = settled(&ns, &targets, &[&a, &b]).await;
    let old_ca = certificates(&old_bundle).remove(0);

    request_rotation(ns.client(), ns.name(), SECRET)
        .await
        .unwrap();

    // Sample the mutating webhook's bundle and both served certificates until the rotation is
    // over; every served certificate must verify under the injected bundle at every sample.
    let client = ns.client();
    let mut samples = Vec::new();
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let bundle = targets.mutating_bundle(&client).await.unwrap();
        let bundle_cas = certificates(&bundle);
        let now = OffsetDateTime::now_utc();
        let name = format!("{SERVICE}.{}.svc", ns.name());
        let served_under: Vec<Option<usize>> = [&a, &b]
            .iter()
            .map(|replica| {
                let leaf = replica.served().expect("a served certificate");
                bundle_cas
                    .iter()
                    .position(|ca| pki::verifies_under(&leaf, ca, &name, now))
            })
            .collect();
        assert!(
            served_under.iter().all(Option::is_some),
            "a replica serves a certificate the injected bundle does not trust: {served_under:?} \
             after {samples:#?}"
        );
        let sample = Sample {
            bundle_cas: bundle_cas.len(),
            served_under,
        };
        let done = sample.bundle_cas == 1 && bundle_cas[0] != old_ca;
        samples.push(sample);
        if done {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the rotation did not finish within {SETTLE:?}: {samples:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The overlap was observed in both halves: two CAs trusted while the old one still served,
    // and while the new one already served.
    assert!(
        samples
            .iter()
            .any(|s| s.bundle_cas == 2 && s.served_under.iter().all(|i| *i == Some(0))),
        "never saw the staged phase: {samples:#?}"
    );
    assert!(
        samples
            .iter()
            .any(|s| s.bundle_cas == 2 && s.served_under.iter().all(|i| *i == Some(1))),
        "never saw the overlap phase: {samples:#?}"
    );

    let new_bundle = settled(&ns, &targets, &[&a, &b]).await;
    assert_eq!(certificates(&new_bundle).len(), 1);
    assert_ne!(certificates(&new_bundle)[0], old_ca);
    let secret = ns.api::<Secret>().get(SECRET).await.unwrap();
    assert!(!secret.annotations().contains_key(ROTATE_CA));
    for step in ["stage_next_ca", "promote_next_ca", "drop_previous_ca"] {
        let written: u64 = [&a, &b]
            .iter()
            .map(|r| r.resolver.metrics().steps_written(step))
            .sum();
        assert_eq!(written, 1, "{step} written once across the replicas");
    }
}

/// `GET path` on a plain-HTTP port; the body, or an error while the server is not up.
async fn http_get(port: u16, path: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP response"))?;
    anyhow::ensure!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
        "{head}"
    );
    Ok(body.to_string())
}

/// Sum of `controller_runtime_webhook_requests_total` samples for `path` with code 200.
fn served_ok(metrics: &str, path: &str) -> u64 {
    metrics
        .lines()
        .filter(|line| line.starts_with("controller_runtime_webhook_requests_total{"))
        .filter(|line| line.contains(&format!("\"{path}\"")) && line.contains("\"200\""))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The certificate a TLS server on `port` presents to a client trusting `bundle`.
async fn presented_leaf(port: u16, bundle: &[u8]) -> anyhow::Result<CertificateDer<'static>> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in certificates(bundle) {
        roots.add(ca)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(raygate_certs::ring_provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let tls = connector
        .connect(
            rustls::pki_types::ServerName::try_from("127.0.0.1")?,
            stream,
        )
        .await?;
    let leaf = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .ok_or_else(|| anyhow::anyhow!("no certificate presented"))?;
    Ok(leaf.clone().into_owned())
}

#[tokio::test]
async fn a_ca_rotation_under_admission_load_fails_no_admission() {
    use k8s_openapi::api::core::v1::Pod;

    let env = Env::load();
    let ns = TestNamespace::new(&env, "certs-load").await;
    let client = ns.client();
    let [port, ops_port] = free_ports();
    let configuration = format!("certs-load-{}", ns.name());
    // Every Pod created in the test namespace goes through raygate's Pod webhook, and a failed
    // call fails the creation (failurePolicy Fail).
    let mutating: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": configuration},
        "webhooks": [{
            "name": "pods.certs-load.raygate.io",
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/mutate/pods")},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name()}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": 5,
            "admissionReviewVersions": ["v1"],
        }],
    }))
    .unwrap();
    let configurations = Api::<MutatingWebhookConfiguration>::all(client.clone());
    configurations
        .create(&PostParams::default(), &mutating)
        .await
        .expect("creating the MutatingWebhookConfiguration");
    let _delete_configuration =
        DeleteOnDrop::<MutatingWebhookConfiguration>::new(&env.kube_config().await, &configuration);

    let log_path = std::path::Path::new(env.var("RAYGATE_LOGS"))
        .join(format!("raygate-webhook-{}.log", ns.name()));
    let log = std::fs::File::create(&log_path).expect("a log file for raygate webhook");
    let address = format!("127.0.0.1:{port}");
    let ops_address = format!("127.0.0.1:{ops_port}");
    let _raygate = tokio::process::Command::new(raygate_e2e::raygate::binary())
        .args([
            "webhook",
            "--address",
            &address,
            "--metrics-address",
            &ops_address,
            "--cert-mode",
            "self-managed",
            "--webhook-namespace",
            ns.name(),
            "--webhook-service",
            SERVICE,
            "--cert-secret",
            SECRET,
            "--cert-extra-san",
            "127.0.0.1",
            "--mutating-webhook-configuration",
            &configuration,
            "--validating-webhook-configuration=",
            "--conversion-crd=",
            "--ca-propagation-delay=3s",
            "--ca-overlap=5s",
            "--cert-resync-interval=1s",
        ])
        .env("KUBECONFIG", env.kubeconfig())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("starting raygate webhook");

    let pods = ns.api::<Pod>();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"generateName": "load-"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        field_manager: None,
    };
    let old_bundle = ns
        .wait_for(
            &format!(
                "raygate webhook ready and trusted (log {})",
                log_path.display()
            ),
            STARTUP,
            || async {
                http_get(ops_port, "/readyz").await?;
                let Some(bundle) = secret_entry(&ns, "ca.crt").await? else {
                    return Ok(None);
                };
                let injected = configurations.get(&configuration).await?.webhooks.unwrap()[0]
                    .client_config
                    .ca_bundle
                    .clone()
                    .map(|b| b.0);
                if injected.as_deref() != Some(bundle.as_slice()) {
                    return Ok(None);
                }
                pods.create(&dry_run, &pod).await?;
                Ok(Some(bundle))
            },
        )
        .await;
    let old_leaf = presented_leaf(port, &old_bundle).await.unwrap();
    let served_before = served_ok(
        &http_get(ops_port, "/metrics").await.unwrap(),
        "/mutate/pods",
    );

    // Load: concurrent dry-run Pod creations, each one an admission call by the API server.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (pods, pod, dry_run, stop) =
                (pods.clone(), pod.clone(), dry_run.clone(), stop.clone());
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0u64, Vec::new());
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match pods.create(&dry_run, &pod).await {
                        Ok(_) => ok += 1,
                        Err(error) => failed.push(error.to_string()),
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;

    request_rotation(client.clone(), ns.name(), SECRET)
        .await
        .unwrap();
    let old_ca = certificates(&old_bundle).remove(0);
    let new_bundle = ns
        .wait_for(
            "the forced rotation to finish under load",
            SETTLE,
            || async {
                let bundle = configurations.get(&configuration).await?.webhooks.unwrap()[0]
                    .client_config
                    .ca_bundle
                    .clone()
                    .map(|b| b.0)
                    .unwrap_or_default();
                let bundle_cas = certificates(&bundle);
                Ok((bundle_cas.len() == 1 && bundle_cas[0] != old_ca).then_some(bundle))
            },
        )
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);

    let (mut admitted, mut failures) = (0, Vec::new());
    for worker in workers {
        let (ok, failed) = worker.await.unwrap();
        admitted += ok;
        failures.extend(failed);
    }
    let served = served_ok(
        &http_get(ops_port, "/metrics").await.unwrap(),
        "/mutate/pods",
    ) - served_before;
    eprintln!(
        "rotation under load: {admitted} admissions, {} failed, webhook served {served}",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} admissions failed during the rotation: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(
        admitted >= 100,
        "too little load to prove anything: {admitted} admissions"
    );
    assert!(
        served >= admitted,
        "the API server called the webhook for every admission ({served} < {admitted})"
    );
    let new_leaf = presented_leaf(port, &new_bundle).await.unwrap();
    assert_ne!(
        new_leaf, old_leaf,
        "the webhook serves a certificate of the new CA"
    );
}
