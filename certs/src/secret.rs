//! The Secret of the self-managed mode: how a [`CertState`] is stored in it and the patch that
//! writes a new state under optimistic concurrency.
//!
//! Data keys: `tls.crt` / `tls.key` (serving certificate), `ca.crt` (the CA bundle to trust),
//! `signing-ca.crt` / `signing-ca.key`, `next-ca.crt` / `next-ca.key` (a staged CA),
//! `previous-ca.crt` (a retired CA still trusted). Annotations: [`STAGED_AT`], [`PROMOTED_AT`]
//! (RFC 3339) and [`ROTATE_CA`], which anyone may set to force a CA rotation.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::pki::PemPair;
use crate::rotation::{CertState, ca_bundle};

/// When the staged CA was added to the bundle.
pub const STAGED_AT: &str = "raygate.io/ca-staged-at";
/// When the signing CA was promoted.
pub const PROMOTED_AT: &str = "raygate.io/ca-promoted-at";
/// Set (any value) to rotate the CA now: e.g.
/// `kubectl annotate secret raygate-webhook-cert raygate.io/rotate-ca=now`. raygate removes it
/// when it stages the new CA.
pub const ROTATE_CA: &str = "raygate.io/rotate-ca";

const TLS_CRT: &str = "tls.crt";
const TLS_KEY: &str = "tls.key";
const CA_BUNDLE: &str = "ca.crt";
const SIGNING_CRT: &str = "signing-ca.crt";
const SIGNING_KEY: &str = "signing-ca.key";
const NEXT_CRT: &str = "next-ca.crt";
const NEXT_KEY: &str = "next-ca.key";
const PREVIOUS_CRT: &str = "previous-ca.crt";

/// Reads the certificate state out of a Secret. Missing or non-UTF-8 entries read as absent;
/// an unparsable timestamp reads as absent (and the rotation logic restarts that phase).
pub fn decode(secret: &Secret) -> CertState {
    let empty = BTreeMap::new();
    let data = secret.data.as_ref().unwrap_or(&empty);
    let text = |key: &str| {
        data.get(key)
            .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok())
            .filter(|text| !text.trim().is_empty())
    };
    let pair = |cert: &str, key: &str| {
        Some(PemPair {
            cert_pem: text(cert)?,
            key_pem: text(key)?,
        })
    };
    let annotations = secret.metadata.annotations.as_ref();
    let annotation = |key: &str| annotations.and_then(|a| a.get(key));
    let time =
        |key: &str| annotation(key).and_then(|value| OffsetDateTime::parse(value, &Rfc3339).ok());
    CertState {
        signing: pair(SIGNING_CRT, SIGNING_KEY),
        next: pair(NEXT_CRT, NEXT_KEY),
        previous: text(PREVIOUS_CRT),
        leaf: pair(TLS_CRT, TLS_KEY),
        staged_at: time(STAGED_AT),
        promoted_at: time(PROMOTED_AT),
        rotation_requested: annotation(ROTATE_CA).is_some(),
    }
}

/// A new Secret named `name` in `namespace` holding `state`.
pub fn new_secret(name: &str, namespace: &str, state: &CertState) -> Secret {
    let data = entries(state)
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_string(), ByteString(value?.into_bytes()))))
        .collect();
    let annotations = timestamps(state)
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_string(), value?)))
        .collect();
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            annotations: Some(annotations),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                "raygate".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Secret::default()
    }
}

/// A JSON merge patch turning the Secret at `resource_version` into `state`. It carries the
/// resource version, so the API server rejects it with 409 Conflict when someone else wrote
/// the Secret since it was read. Only raygate's own keys and annotations are touched; a
/// rotation request is removed only once it has been served.
pub fn patch(state: &CertState, resource_version: &str) -> Value {
    let mut data = Map::new();
    for (key, value) in entries(state) {
        let value = value.map_or(Value::Null, |text| {
            Value::String(base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                text,
            ))
        });
        data.insert(key.to_string(), value);
    }
    let mut annotations = Map::new();
    for (key, value) in timestamps(state) {
        annotations.insert(key.to_string(), value.map_or(Value::Null, Value::String));
    }
    if !state.rotation_requested {
        annotations.insert(ROTATE_CA.to_string(), Value::Null);
    }
    json!({
        "metadata": {"resourceVersion": resource_version, "annotations": annotations},
        "data": data,
    })
}

fn entries(state: &CertState) -> [(&'static str, Option<String>); 8] {
    let cert = |pair: &Option<PemPair>| pair.as_ref().map(|p| p.cert_pem.clone());
    let key = |pair: &Option<PemPair>| pair.as_ref().map(|p| p.key_pem.clone());
    [
        (TLS_CRT, cert(&state.leaf)),
        (TLS_KEY, key(&state.leaf)),
        (CA_BUNDLE, state.signing.as_ref().map(|_| ca_bundle(state))),
        (SIGNING_CRT, cert(&state.signing)),
        (SIGNING_KEY, key(&state.signing)),
        (NEXT_CRT, cert(&state.next)),
        (NEXT_KEY, key(&state.next)),
        (PREVIOUS_CRT, state.previous.clone()),
    ]
}

fn timestamps(state: &CertState) -> [(&'static str, Option<String>); 2] {
    let format = |t: Option<OffsetDateTime>| t.and_then(|t| t.format(&Rfc3339).ok());
    [
        (STAGED_AT, format(state.staged_at)),
        (PROMOTED_AT, format(state.promoted_at)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rotation::{LeafSpec, RotationPolicy, Step, apply};

    fn t0() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    fn staged_and_promoted() -> CertState {
        let spec = LeafSpec {
            sans: vec!["svc.ns.svc".into()],
        };
        let policy = RotationPolicy::default();
        let created = apply(
            Step::CreateCa,
            &CertState::default(),
            &spec,
            &policy,
            "ca",
            t0(),
        )
        .unwrap();
        let staged = apply(Step::StageNextCa, &created, &spec, &policy, "ca", t0()).unwrap();
        let mut promoted = apply(Step::PromoteNextCa, &staged, &spec, &policy, "ca", t0()).unwrap();
        // A promoted state with a staged CA again does not occur, but exercises every key.
        promoted.next = staged.next.clone();
        promoted.staged_at = Some(t0());
        promoted
    }

    #[test]
    fn a_new_secret_decodes_to_the_same_state() {
        let state = staged_and_promoted();
        let secret = new_secret("cert", "ns", &state);
        assert_eq!(decode(&secret), state);
        let data = secret.data.unwrap();
        assert_eq!(
            String::from_utf8(data["ca.crt"].0.clone()).unwrap(),
            ca_bundle(&state)
        );
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    }

    #[test]
    fn the_patch_carries_the_resource_version_and_clears_what_is_gone() {
        let mut state = staged_and_promoted();
        state.previous = None;
        state.promoted_at = None;
        let patch = patch(&state, "42");
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        assert_eq!(patch["data"]["previous-ca.crt"], Value::Null);
        assert_eq!(patch["metadata"]["annotations"][PROMOTED_AT], Value::Null);
        assert_eq!(patch["metadata"]["annotations"][ROTATE_CA], Value::Null);
        assert_eq!(
            patch["metadata"]["annotations"][STAGED_AT],
            "2027-01-15T08:00:00Z"
        );
        let encoded = patch["data"]["tls.crt"].as_str().unwrap();
        let decoded =
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded).unwrap();
        assert_eq!(decoded, state.leaf.unwrap().cert_pem.into_bytes());
    }

    #[test]
    fn a_pending_rotation_request_is_left_in_place() {
        let mut state = staged_and_promoted();
        state.rotation_requested = true;
        let patch = patch(&state, "1");
        assert!(
            patch["metadata"]["annotations"]
                .as_object()
                .unwrap()
                .get(ROTATE_CA)
                .is_none()
        );
    }

    #[test]
    fn a_secret_with_foreign_or_broken_entries_decodes_without_panicking() {
        let mut secret = new_secret("cert", "ns", &staged_and_promoted());
        let data = secret.data.as_mut().unwrap();
        data.insert("tls.crt".into(), ByteString(vec![0xff, 0xfe]));
        data.insert("unrelated".into(), ByteString(b"kept".to_vec()));
        let annotations = secret.metadata.annotations.as_mut().unwrap();
        annotations.insert(STAGED_AT.into(), "yesterday".into());
        annotations.insert(ROTATE_CA.into(), String::new());
        let state = decode(&secret);
        assert_eq!(state.leaf, None);
        assert_eq!(state.staged_at, None);
        assert!(state.rotation_requested);
        assert_eq!(decode(&Secret::default()), CertState::default());
    }
}
