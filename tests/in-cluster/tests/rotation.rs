//! The installation rotates its self-managed CA in-cluster without failing an admission (run
//! after `in_cluster`, whose checks expect one CA bundle everywhere, and before `lifecycle`,
//! which uninstalls): a forced rotation (`raygate.io/rotate-ca` on the Secret, as README.md
//! documents) stages a new CA, injects it into both webhook configurations and the CRDs'
//! conversion, and a minute later (the default propagation delay) both replicas serve a
//! certificate of the new CA, while Ray Pods are admitted through the Service all along.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use raygate_certs::pki::verifies_under;
use raygate_e2e::TestNamespace;
use raygate_e2e::pem::certificates;
use raygate_in_cluster_e2e::{
    AdmissionLoad, in_cluster_env, injection_targets, namespace, raygate_pods,
};
use rustls::pki_types::{CertificateDer, ServerName};

const OPT_IN: [(&str, &str); 1] = [("raygate.io/scheduler", "volcano")];
const SECRET: &str = "raygate-webhook-cert";
/// The default propagation delay (1 min) and the time for both replicas to load the new
/// certificate, with room for a busy machine.
const ROTATED: Duration = Duration::from_secs(240);

/// The Secret's data entry `key`.
async fn secret_entry(client: &Client, namespace: &str, key: &str) -> Option<Vec<u8>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    secrets
        .get(SECRET)
        .await
        .expect("the self-managed Secret")
        .data
        .and_then(|data| data.get(key).map(|bytes| bytes.0.clone()))
}

/// Every caBundle raygate injects: 8 webhooks and the 2 CRDs' conversion.
async fn injected_bundles(client: &Client) -> Vec<Vec<u8>> {
    injection_targets(client)
        .await
        .into_iter()
        .map(|target| target.ca_bundle)
        .collect()
}

/// The certificate the replica at `ip` presents for the Service's name to a client trusting
/// `bundle`, or why there is none yet.
async fn presented(
    ip: &str,
    service_name: &str,
    bundle: &[u8],
) -> Result<CertificateDer<'static>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in certificates(bundle) {
        roots.add(ca).map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(raygate_certs::ring_provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from(service_name.to_owned()).map_err(|e| e.to_string())?;
    let tcp = tokio::net::TcpStream::connect((ip, 9443))
        .await
        .map_err(|e| e.to_string())?;
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    tls.get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|leaf| leaf.clone().into_owned())
        .ok_or_else(|| "no certificate presented".to_owned())
}

#[tokio::test]
async fn a_forced_ca_rotation_in_cluster_fails_no_admission() {
    let env = in_cluster_env();
    let raygate_ns = namespace(&env);
    let client = env.client().await;
    let service_name = format!("raygate.{raygate_ns}.svc");
    let old_ca = secret_entry(&client, &raygate_ns, "signing-ca.crt")
        .await
        .expect("a signing CA");
    let ips: Vec<String> = raygate_pods(&env)
        .await
        .into_iter()
        .filter_map(|pod| pod.status.and_then(|s| s.pod_ip))
        .collect();
    assert_eq!(ips.len(), 2, "two replicas: {ips:?}");

    let ns = TestNamespace::with_labels(&env, "incluster-rotation", &OPT_IN).await;
    let load = AdmissionLoad::start(&ns);
    tokio::time::sleep(Duration::from_secs(3)).await;
    raygate_certs::request_rotation(client.clone(), &raygate_ns, SECRET)
        .await
        .expect("asking for a rotation");
    let now = time::OffsetDateTime::now_utc;
    let new_ca = ns
        .wait_for(
            "both replicas to serve a certificate of a new CA that every caBundle trusts",
            ROTATED,
            || async {
                let Some(signing) = secret_entry(&client, &raygate_ns, "signing-ca.crt").await
                else {
                    return Ok(None);
                };
                if signing == old_ca {
                    return Ok(None);
                }
                let new_ca = certificates(&signing).remove(0);
                let bundles = injected_bundles(&client).await;
                if !bundles.iter().all(|b| certificates(b).contains(&new_ca)) {
                    return Ok(None);
                }
                let bundle = secret_entry(&client, &raygate_ns, "ca.crt")
                    .await
                    .unwrap_or_default();
                for ip in &ips {
                    match presented(ip, &service_name, &bundle).await {
                        Ok(leaf) if verifies_under(&leaf, &new_ca, &service_name, now()) => {}
                        _ => return Ok(None),
                    }
                }
                Ok(Some(signing))
            },
        )
        .await;
    // The old CA stays trusted through the overlap, so a replica that still served the old
    // certificate would have been trusted too.
    let old = certificates(&old_ca).remove(0);
    for bundle in injected_bundles(&client).await {
        assert!(
            certificates(&bundle).contains(&old),
            "the old CA is kept for the overlap"
        );
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (sent, failed, errors) = load.finish().await;
    assert_ne!(new_ca, old_ca);
    assert!(sent > 100, "only {sent} admissions were sent");
    assert_eq!(
        failed, 0,
        "{failed} of {sent} admissions failed during the rotation: {errors:?}"
    );
}
