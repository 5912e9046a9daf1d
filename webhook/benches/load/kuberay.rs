//! The KubeRay peer of the load benchmark: the real KubeRay operator (built by
//! `tests/env/build kuberay`, version in `tests/env/versions.sh`) with `ENABLE_WEBHOOKS=true`,
//! serving its RayCluster webhook (`/validate-ray-io-v1-raycluster`) over TLS, so that the
//! benchmark can send it the same review it sends raygate.
//!
//! KubeRay's operator is a controller manager: it does not start without a kube API server
//! that serves the Ray CRDs, so the peer runs only inside a running `tests/env` (through
//! `tests/env/control-plane exec`, which exports the env file's `KUBECONFIG` and
//! `RAYGATE_KUBERAY_OPERATOR`). Its webhook server listens on controller-runtime's fixed port
//! (9443, every address of the network namespace, which inside the env's namespace is
//! private); its certificate is read from `$TMPDIR/k8s-webhook-server/serving-certs/`, so the
//! operator gets a `TMPDIR` of its own holding a certificate made here.
//!
//! Its controllers watch one namespace that holds nothing ([`EMPTY_NAMESPACE`]), without
//! leader election, metrics or health endpoints, so that they add nothing to the measurement
//! but an idle informer per kind.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{CertificateParams, KeyPair};

/// `RAYGATE_LOAD_KUBERAY`: unset (run the peer when the environment provides it), `0` (never),
/// `1` (required, the binary the env file names) or the path of a `kuberay-operator` binary
/// (required).
pub const REQUEST_ENV: &str = "RAYGATE_LOAD_KUBERAY";
/// The path of KubeRay's RayCluster validating webhook (`vraycluster.kb.io`).
pub const PATH: &str = "/validate-ray-io-v1-raycluster";
/// controller-runtime's default webhook port; KubeRay's operator has no flag for it.
const PORT: u16 = 9443;
/// The only namespace the peer's controllers watch; nothing is ever created in it.
const EMPTY_NAMESPACE: &str = "raygate-load-bench-empty";
/// How long the operator may take to serve its webhook.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// What the benchmark was asked to do about the peer.
pub enum Request {
    /// Not requested and not available: the benchmark says so and measures raygate alone.
    NotRequested(String),
    /// Start this binary with this kubeconfig.
    Run {
        binary: PathBuf,
        kubeconfig: PathBuf,
        version: String,
    },
}

/// Why a requested peer cannot run: the benchmark reports it and exits non-zero.
pub struct Unavailable(pub String);

/// Reads [`REQUEST_ENV`] and the env file's variables.
///
/// # Errors
/// When the peer is requested (or the environment offers it) but cannot run here.
pub fn request() -> Result<Request, Unavailable> {
    let requested = std::env::var(REQUEST_ENV).ok();
    let in_env = std::env::var_os("RAYGATE_NETNS_EXEC").is_some();
    let offered = std::env::var_os("RAYGATE_KUBERAY_OPERATOR").map(PathBuf::from);
    let binary = match requested.as_deref() {
        Some("0") => {
            return Ok(Request::NotRequested(format!("{REQUEST_ENV}=0")));
        }
        None | Some("") => match offered {
            Some(binary) if in_env => binary,
            _ => {
                return Ok(Request::NotRequested(format!(
                    "{REQUEST_ENV} unset and no tests/env KubeRay here (run through `tests/env/control-plane exec`, or set {REQUEST_ENV}=1 to require it)"
                )));
            }
        },
        Some("1") => offered.ok_or_else(|| {
            Unavailable(
                "RAYGATE_KUBERAY_OPERATOR is not set: build KubeRay (`tests/env/build kuberay`), start the environment and run through `tests/env/control-plane exec`".to_string(),
            )
        })?,
        Some(path) => PathBuf::from(path),
    };
    if !in_env {
        return Err(Unavailable(
            "not inside a tests/env network namespace (RAYGATE_NETNS_EXEC unset): KubeRay's webhook listens on port 9443 of every address, which only the env's private namespace may offer; run through `tests/env/control-plane exec`".to_string(),
        ));
    }
    if !binary.is_file() {
        return Err(Unavailable(format!(
            "no KubeRay operator at {}",
            binary.display()
        )));
    }
    let kubeconfig = std::env::var_os("KUBECONFIG")
        .map(PathBuf::from)
        .filter(|k| k.is_file())
        .ok_or_else(|| {
            Unavailable(
                "KUBECONFIG unset or missing: KubeRay's operator needs the env's API server"
                    .to_string(),
            )
        })?;
    let version =
        std::env::var("RAYGATE_KUBERAY_VERSION").unwrap_or_else(|_| "(version unknown)".into());
    Ok(Request::Run {
        binary,
        kubeconfig,
        version,
    })
}

/// A running KubeRay operator serving its webhook; killed (SIGKILL) and its certificate
/// directory removed when dropped.
pub struct KubeRay {
    child: Child,
    dir: PathBuf,
    /// Its log, kept after the run: `$RAYGATE_LOGS/kuberay-load-bench.log` in the env.
    pub log: PathBuf,
    /// Where its webhook answers.
    pub address: SocketAddr,
    /// The CA (its self-signed certificate) a client trusts.
    pub ca_pem: String,
    /// `KubeRay v1.5.0`, from the env file.
    pub name: String,
}

impl KubeRay {
    /// The operator's process id, for `/proc`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts the operator and waits until its webhook completes a TLS and HTTP/2 handshake.
    ///
    /// # Errors
    /// When the port is already taken, the operator exits, or it does not serve within
    /// [`START_TIMEOUT`]; the operator is stopped first.
    pub async fn start(
        binary: &std::path::Path,
        kubeconfig: &std::path::Path,
        version: &str,
    ) -> Result<KubeRay, Unavailable> {
        let address: SocketAddr = ([127, 0, 0, 1], PORT).into();
        if tokio::net::TcpStream::connect(address).await.is_ok() {
            return Err(Unavailable(format!(
                "something already listens on {address}, KubeRay's webhook port"
            )));
        }
        let dir = std::env::temp_dir().join(format!("raygate-load-kuberay-{}", std::process::id()));
        let certs = dir.join("k8s-webhook-server").join("serving-certs");
        std::fs::create_dir_all(&certs)
            .map_err(|e| Unavailable(format!("creating {}: {e}", certs.display())))?;
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .expect("params")
            .self_signed(&key)
            .expect("self-signed");
        for (file, pem) in [("tls.crt", cert.pem()), ("tls.key", key.serialize_pem())] {
            std::fs::write(certs.join(file), pem)
                .map_err(|e| Unavailable(format!("writing {file}: {e}")))?;
        }
        let log = std::env::var_os("RAYGATE_LOGS")
            .map_or_else(std::env::temp_dir, PathBuf::from)
            .join("kuberay-load-bench.log");
        let file = std::fs::File::create(&log)
            .map_err(|e| Unavailable(format!("creating {}: {e}", log.display())))?;
        let stderr = file.try_clone().expect("a second handle on the log file");
        let child = Command::new(binary)
            .args(["--watch-namespace", EMPTY_NAMESPACE])
            .args(["--metrics-addr", "0", "--health-probe-bind-address", "0"])
            .arg("--enable-leader-election=false")
            .env("ENABLE_WEBHOOKS", "true")
            .env("KUBECONFIG", kubeconfig)
            .env("TMPDIR", &dir)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(stderr)
            .spawn()
            .map_err(|e| Unavailable(format!("starting {}: {e}", binary.display())))?;
        let mut kuberay = KubeRay {
            child,
            dir,
            log,
            address,
            ca_pem: cert.pem(),
            name: format!("KubeRay {version}"),
        };
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = kuberay.child.try_wait() {
                return Err(Unavailable(format!(
                    "KubeRay's operator exited ({status}) before serving its webhook; its log:\n{}",
                    kuberay.log_tail()
                )));
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(Unavailable(format!(
                    "KubeRay's webhook did not answer on {address} within {} s; its log:\n{}",
                    START_TIMEOUT.as_secs(),
                    kuberay.log_tail()
                )));
            }
            if super::try_connect(address, &kuberay.ca_pem).await.is_ok() {
                return Ok(kuberay);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The last lines of its log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for KubeRay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
