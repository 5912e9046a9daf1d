//! The Ray auth tokens of token-authenticated clusters (`authOptions.mode: token`), which
//! raygate's dashboard calls carry ([`crate::dashboard`]). A token is read from its Secret once
//! and kept, so a status poll costs no API request; it is read again after the dashboard
//! refuses it (a Secret the user rotated).

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, ResourceExt};
use raygate_api::cluster::auth::{TOKEN_KEY, secret_name};
use raygate_api::ray::v1::{RayCluster, RayClusterSpec};

use crate::context::{ReconcileError, api_error};

/// Tokens by namespace and Secret name.
pub struct Tokens {
    client: Client,
    known: Mutex<HashMap<(String, String), String>>,
}

impl Tokens {
    /// Reads Secrets with `client`.
    pub fn new(client: Client) -> Self {
        Tokens {
            client,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The Secret of `cluster`'s token as `(namespace, name)`; `None` without token auth.
    fn key(cluster: &RayCluster) -> Option<(String, String)> {
        let secret = secret_name(&cluster.spec, &cluster.name_any())?;
        Some((cluster.namespace().unwrap_or_default(), secret))
    }

    /// The token `cluster`'s dashboard wants, `None` when it has no token auth. A Secret that
    /// is missing, or holds no `auth_token`, is an error naming it.
    pub async fn of(&self, cluster: &RayCluster) -> Result<Option<String>, ReconcileError> {
        let Some(key) = Self::key(cluster) else {
            return Ok(None);
        };
        self.read(key).await.map(Some)
    }

    /// [`Tokens::of`] the cluster `cluster_name` in `namespace` made from `spec` (a RayJob's
    /// `rayClusterSpec`, when its cluster may be gone).
    pub async fn of_spec(
        &self,
        namespace: &str,
        cluster_name: &str,
        spec: &RayClusterSpec,
    ) -> Result<Option<String>, ReconcileError> {
        let Some(secret) = secret_name(spec, cluster_name) else {
            return Ok(None);
        };
        self.read((namespace.to_string(), secret)).await.map(Some)
    }

    async fn read(&self, key: (String, String)) -> Result<String, ReconcileError> {
        if let Some(token) = self.lock().get(&key) {
            return Ok(token.clone());
        }
        let (namespace, name) = &key;
        let what = format!("read the Ray auth token Secret {namespace}/{name}");
        let secret = Api::<Secret>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
            .map_err(api_error(what.clone()))?;
        let token = secret
            .data
            .as_ref()
            .and_then(|data| data.get(TOKEN_KEY))
            .map(|bytes| String::from_utf8_lossy(&bytes.0).trim().to_string())
            .filter(|token| !token.is_empty())
            .ok_or_else(|| ReconcileError::NoToken {
                secret: format!("{namespace}/{name}"),
            })?;
        self.lock().insert(key, token.clone());
        Ok(token)
    }

    /// Drops `cluster`'s kept token: the next call reads its Secret again.
    pub fn forget(&self, cluster: &RayCluster) {
        if let Some(key) = Self::key(cluster) {
            self.lock().remove(&key);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), String>> {
        // A panic while holding the map leaves it consistent (single inserts and removes).
        self.known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
