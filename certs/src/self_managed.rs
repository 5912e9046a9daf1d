//! Self-managed mode: raygate's own CA and serving certificate in a Secret shared by every
//! replica.
//!
//! Each replica runs the same loop: read the Secret (the source of truth), serve its
//! certificate, inject its CA bundle where the API server needs it, and — when
//! [`rotation::decide`] says a step is due — write the next state with the resource version it
//! read. Two replicas racing for the same step both write with the same resource version; the
//! API server accepts one and answers the other 409 Conflict, and the loser simply reads the
//! winner's state and adopts it. A replica wakes up on every change of the Secret (watch), when
//! the next step falls due, and at least every resync interval.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use time::OffsetDateTime;

use crate::config::SelfManagedConfig;
use crate::inject::{InjectError, Injector};
use crate::pki::PkiError;
use crate::rotation::{self, CertState, Decision, Step};
use crate::secret::{self, ROTATE_CA};
use crate::{CertResolver, CertTask, certified_key_from_pem};

/// Consecutive writes without reaching a steady state after which the loop pauses: a guard
/// against a write that never converges (e.g. an admission plugin rewriting the Secret).
const MAX_WRITES_IN_A_ROW: u32 = 10;

/// Why one pass of the loop failed; the loop logs it and retries with a backoff.
#[derive(Debug, thiserror::Error)]
enum PassError {
    #[error("reading Secret {namespace}/{name}: {source}")]
    Read {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing Secret {namespace}/{name} ({step:?}): {source}")]
    Write {
        namespace: String,
        name: String,
        step: Step,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Mint(#[from] PkiError),
    #[error(transparent)]
    Inject(#[from] InjectError),
}

/// What the loop does after a pass.
enum Next {
    /// Something was written (or a race lost): look again at once.
    Again,
    /// Steady: sleep until this moment (or a change of the Secret).
    Until(OffsetDateTime),
}

/// The self-managed certificate source.
#[derive(Debug)]
pub struct SelfManaged;

impl SelfManaged {
    /// Starts the loop described in the module documentation; `resolver` is loaded as soon as
    /// the Secret holds a certificate (created by this replica or another one).
    pub fn spawn(
        client: Client,
        config: SelfManagedConfig,
        resolver: Arc<CertResolver>,
    ) -> CertTask {
        CertTask::spawn(run(client, config, resolver))
    }
}

/// Asks the replicas to rotate the CA now, by annotating the Secret with [`ROTATE_CA`]
/// (equivalent to `kubectl annotate secret <name> raygate.io/rotate-ca=<value>`).
pub async fn request_rotation(
    client: Client,
    namespace: &str,
    secret_name: &str,
) -> Result<(), kube::Error> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let value = OffsetDateTime::now_utc().unix_timestamp().to_string();
    let patch = json!({"metadata": {"annotations": {ROTATE_CA: value}}});
    secrets
        .patch(secret_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

async fn run(client: Client, config: SelfManagedConfig, resolver: Arc<CertResolver>) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &config.namespace);
    let changes = watcher(
        secrets.clone(),
        watcher::Config::default().fields(&format!("metadata.name={}", config.secret_name)),
    )
    .default_backoff();
    let mut changes = changes.boxed();
    let mut injector = Injector::new(client, config.targets.clone());
    let mut writes_in_a_row = 0;
    let mut failures: u32 = 0;
    loop {
        let sleep = match pass(&mut injector, &secrets, &config, &resolver).await {
            Ok(Next::Again) if writes_in_a_row < MAX_WRITES_IN_A_ROW => {
                writes_in_a_row += 1;
                failures = 0;
                continue;
            }
            Ok(Next::Again) => {
                tracing::error!(
                    secret = %config.secret_name,
                    "the certificate Secret keeps changing without settling; pausing"
                );
                writes_in_a_row = 0;
                config.resync_interval
            }
            Ok(Next::Until(until)) => {
                writes_in_a_row = 0;
                failures = 0;
                let due = until - OffsetDateTime::now_utc();
                Duration::try_from(due)
                    .unwrap_or(Duration::ZERO)
                    .min(config.resync_interval)
            }
            Err(error) => {
                resolver.metrics().errors.inc();
                tracing::warn!(
                    secret = %config.secret_name,
                    error = %error,
                    "webhook certificate management failed; retrying"
                );
                writes_in_a_row = 0;
                failures = failures.saturating_add(1);
                Duration::from_millis(500 * 2u64.pow(failures.min(6))).min(config.resync_interval)
            }
        };
        tokio::select! {
            () = tokio::time::sleep(sleep) => {}
            // Any watch event (including the watcher's own errors, which it backs off) means
            // "look again"; the pass reads the Secret fresh.
            Some(_) = changes.next() => {}
        }
    }
}

async fn pass(
    injector: &mut Injector,
    secrets: &Api<Secret>,
    config: &SelfManagedConfig,
    resolver: &CertResolver,
) -> Result<Next, PassError> {
    let name = &config.secret_name;
    let existing = secrets
        .get_opt(name)
        .await
        .map_err(|source| PassError::Read {
            namespace: config.namespace.clone(),
            name: name.clone(),
            source,
        })?;
    let state = existing.as_ref().map(secret::decode).unwrap_or_default();

    let now = OffsetDateTime::now_utc();
    let spec = config.leaf_spec();
    let step = match rotation::decide(&state, &spec, &config.policy, now) {
        Decision::Wait { until } => {
            // Bundle first, so a brand-new CA is trusted before its certificate is served;
            // but serve even when injection fails (e.g. a target without RBAC), since the
            // other targets may be fine.
            let injected = injector.inject(&rotation::ca_bundle(&state)).await;
            serve(&state, resolver, config);
            injected?;
            return Ok(Next::Until(until));
        }
        Decision::Write(step) => step,
    };
    if step == Step::PromoteNextCa {
        // A certificate signed by the staged CA may only be served once every caBundle trusts
        // that CA; if this pass had to inject it, the propagation delay starts now.
        let patched = injector.inject(&rotation::ca_bundle(&state)).await?;
        if patched > 0 {
            return Ok(Next::Until(now + config.policy.propagation_delay));
        }
    }
    let next = rotation::apply(step, &state, &spec, &config.policy, &config.ca_name(), now)?;
    let written = match &existing {
        None => {
            let fresh = secret::new_secret(name, &config.namespace, &next);
            secrets
                .create(&PostParams::default(), &fresh)
                .await
                .map(|_| ())
        }
        Some(current) => {
            let version = current.resource_version().unwrap_or_default();
            secrets
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(&secret::patch(&next, &version)),
                )
                .await
                .map(|_| ())
        }
    };
    match written {
        Ok(()) => {
            resolver.metrics().step_written(step);
            tracing::info!(secret = %name, namespace = %config.namespace, ?step, "wrote the webhook certificate Secret");
            Ok(Next::Again)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            tracing::info!(secret = %name, namespace = %config.namespace, ?step, "another replica wrote the Secret first; adopting its state");
            Ok(Next::Again)
        }
        Err(source) => Err(PassError::Write {
            namespace: config.namespace.clone(),
            name: name.clone(),
            step,
            source,
        }),
    }
}

/// Serves the Secret's certificate if it is a usable pair and not served already.
fn serve(state: &CertState, resolver: &CertResolver, config: &SelfManagedConfig) {
    let Some(leaf) = &state.leaf else {
        return;
    };
    match certified_key_from_pem(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes()) {
        Ok(key) => {
            if resolver.set_if_changed(key) {
                tracing::info!(secret = %config.secret_name, namespace = %config.namespace, "serving the certificate from the Secret");
            }
        }
        Err(error) => {
            tracing::warn!(secret = %config.secret_name, namespace = %config.namespace, %error, "the Secret's serving certificate is unusable");
        }
    }
}
