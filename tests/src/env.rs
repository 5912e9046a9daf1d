//! The environment started by `tests/env/control-plane up`, as its env file describes it.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

/// How to bring the environment up and run these tests; part of every "not up" panic.
const HOW_TO_RUN: &str = "start the environment with `tests/env/control-plane up`, then run the \
     tests inside its network namespace: `tests/env/control-plane exec -- cargo test -p raygate-e2e` \
     (tests/run does both)";

/// The variables of `$RAYGATE_STATE/env` (`export KEY=VALUE` lines).
#[derive(Clone, Debug)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// Reads `${RAYGATE_STATE:-/tmp/raygate-e2e}/env`. A variable this process's environment
    /// also sets takes that value, so that `control-plane exec -- env KEY=VALUE cargo test`
    /// changes one setting for one run (e.g. the KubeRay operator the coexist tests start).
    ///
    /// # Panics
    /// When the environment is not up, or this process does not run inside its network
    /// namespace (every address is inside it), with a message saying how to run the tests.
    pub fn load() -> Env {
        let state = std::env::var("RAYGATE_STATE").unwrap_or_else(|_| "/tmp/raygate-e2e".into());
        let path = Path::new(&state).join("env");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "the test environment is not up ({}: {e}): {HOW_TO_RUN}",
                path.display()
            )
        });
        let vars: BTreeMap<String, String> = text
            .lines()
            .filter_map(|line| line.strip_prefix("export "))
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| {
                let value = std::env::var(k).unwrap_or_else(|_| v.to_string());
                (k.to_string(), value)
            })
            .collect();
        let env = Env { vars };
        let netns = env.var("RAYGATE_NETNS");
        let ours = std::fs::metadata("/proc/self/ns/net").map(|m| m.ino());
        let theirs = std::fs::metadata(format!("/var/run/netns/{netns}")).map(|m| m.ino());
        match (ours, theirs) {
            (Ok(a), Ok(b)) if a == b => env,
            (_, Err(e)) => panic!("network namespace {netns} does not exist ({e}): {HOW_TO_RUN}"),
            _ => panic!(
                "this test process is not inside network namespace {netns}, where every address \
                 of the environment lives: {HOW_TO_RUN}"
            ),
        }
    }

    /// One variable of the env file, if it defines it (optional components write theirs only
    /// when they are part of the environment).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    /// One variable of the env file.
    ///
    /// # Panics
    /// When the env file does not define it (an `up` of another version wrote it).
    pub fn var(&self, key: &str) -> &str {
        self.get(key).unwrap_or_else(|| {
            panic!("the environment's env file has no {key}; restart it with tests/env/control-plane down && up")
        })
    }

    /// The cargo profile raygate's webhook was built with: `release`, the build users run and
    /// benchmarks need, or `debug`. Installed in-cluster it is the image's release build
    /// (`tests/env/build raygate-image`); as a host process, the `RAYGATE_ENV_PROFILE` build of
    /// `tests/env/control-plane up`.
    pub fn webhook_profile(&self) -> &str {
        match self.get("RAYGATE_ENV_INSTALL") {
            Some(install) if install != "process" => "release",
            _ => self.get("RAYGATE_ENV_PROFILE").unwrap_or("debug"),
        }
    }

    /// Refuses a webhook that is not a release build, for a benchmark whose figures hold only
    /// for the build users run. `why` is what the benchmark does with the webhook, a phrase
    /// that reads as the subject of "needs the release build" (`"measuring its latency"`).
    ///
    /// # Errors
    /// When [`Env::webhook_profile`] is not `release`, saying how to start the environment.
    pub fn require_release_webhook(&self, why: &str) -> anyhow::Result<()> {
        match self.webhook_profile() {
            "release" => Ok(()),
            profile => anyhow::bail!(
                "the environment's raygate webhook is a {profile} build, but {why} needs the release build users run: start the environment with RAYGATE_ENV_PROFILE=release"
            ),
        }
    }

    /// The admin kubeconfig (`system:masters`).
    pub fn kubeconfig(&self) -> PathBuf {
        PathBuf::from(self.var("KUBECONFIG"))
    }

    /// The Ray dashboard / Jobs API base URL, `http://127.0.0.1:8265`.
    pub fn ray_dashboard(&self) -> &str {
        self.var("RAYGATE_RAY_DASHBOARD")
    }

    /// Names of the kwok fake nodes (none in an environment without them).
    pub fn kwok_nodes(&self) -> Vec<String> {
        self.var("RAYGATE_KWOK_NODE_NAMES")
            .split(',')
            .filter(|name| !name.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Names of the real kubelet nodes (`real-1`, `real-2`, …), where Pods run containers.
    pub fn real_nodes(&self) -> Vec<String> {
        self.var("RAYGATE_REAL_NODE_NAMES")
            .split(',')
            .map(str::to_string)
            .collect()
    }

    /// The socket of real node `node`'s containerd (`ctr --address … -n k8s.io`), to act on
    /// containers behind the API server's back, as a crash or the OOM killer would.
    pub fn containerd_socket(&self, node: &str) -> PathBuf {
        Path::new(self.var("RAYGATE_STATE"))
            .join("nodes")
            .join(node)
            .join("containerd.sock")
    }

    /// A client configuration for the admin kubeconfig.
    ///
    /// # Panics
    /// When the kubeconfig cannot be read or used.
    pub async fn kube_config(&self) -> kube::Config {
        let path = self.kubeconfig();
        let kubeconfig = Kubeconfig::read_from(&path)
            .unwrap_or_else(|e| panic!("reading kubeconfig {}: {e}", path.display()));
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .unwrap_or_else(|e| panic!("using kubeconfig {}: {e}", path.display()))
    }

    /// A client of the environment's API server, as the admin user.
    pub async fn client(&self) -> kube::Client {
        kube::Client::try_from(self.kube_config().await)
            .expect("a kube client from the admin kubeconfig")
    }
}

/// Runs `tests/env/control-plane <args>` to act on the environment's own components
/// (`apiserver kill|start`, `webhook stop|start`, …), from inside its network namespace as the
/// tests run; fails with the script's output when it does.
pub async fn control_plane(args: &[&str]) -> anyhow::Result<()> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("env/control-plane");
    let output = tokio::process::Command::new(&script)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| anyhow::anyhow!("running {} {}: {e}", script.display(), args.join(" ")))?;
    if !output.status.success() {
        anyhow::bail!(
            "control-plane {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Env;

    fn env(vars: &[(&str, &str)]) -> Env {
        Env {
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn an_in_cluster_webhook_is_the_image_release_build() {
        for install in ["helm", "manifests"] {
            let env = env(&[
                ("RAYGATE_ENV_INSTALL", install),
                ("RAYGATE_ENV_PROFILE", "debug"),
            ]);
            assert_eq!(env.webhook_profile(), "release", "{install}");
            assert!(env.require_release_webhook("measuring it").is_ok());
        }
    }

    #[test]
    fn a_host_process_webhook_is_the_profile_build() {
        for install in [Some("process"), None] {
            let mut vars = vec![("RAYGATE_ENV_PROFILE", "release")];
            vars.extend(install.map(|i| ("RAYGATE_ENV_INSTALL", i)));
            let env = env(&vars);
            assert_eq!(env.webhook_profile(), "release", "{install:?}");
            assert!(env.require_release_webhook("measuring it").is_ok());
        }
    }

    #[test]
    fn a_debug_webhook_is_refused_with_the_fix() {
        for vars in [
            vec![],
            vec![("RAYGATE_ENV_INSTALL", "process")],
            vec![("RAYGATE_ENV_PROFILE", "debug")],
        ] {
            let env = env(&vars);
            assert_eq!(env.webhook_profile(), "debug", "{vars:?}");
            let message = env
                .require_release_webhook("measuring its latency")
                .unwrap_err()
                .to_string();
            assert_eq!(
                message,
                "the environment's raygate webhook is a debug build, but measuring its latency \
                 needs the release build users run: start the environment with \
                 RAYGATE_ENV_PROFILE=release",
                "{vars:?}"
            );
        }
    }
}
