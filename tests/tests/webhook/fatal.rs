//! `raygate run` whose reconciler fails for good: the process's webhook first leaves the
//! Service (`/readyz` 503 while it still serves), then drains, and only then does the process
//! exit non-zero (`src/run.rs`, `src/webhook.rs`).

use std::time::{Duration, Instant};

use raygate_api::manifests::LEAVE_SERVICE_SECONDS;
use raygate_e2e::ray::Dashboard;
use raygate_e2e::{Env, TestNamespace, free_ports};

#[tokio::test]
async fn a_fatal_reconciler_error_takes_the_webhook_out_of_service_before_the_process_exits() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "run-fatal", &[]).await;
    let [port, ops_port] = free_ports();
    let log_path = std::path::Path::new(env.var("RAYGATE_LOGS"))
        .join(format!("raygate-run-{}.log", ns.name()));
    let mut raygate =
        raygate_e2e::raygate::run_on_loopback(&env, ns.name(), port, ops_port, &log_path)
            // No webhook configuration to inject the CA into: nothing calls this webhook.
            .args([
                "--mutating-webhook-configuration=",
                "--validating-webhook-configuration=",
            ])
            // The API server refuses this selector: the reconciler's start fails for good.
            .args(["--namespace-selector", "!!not a selector"])
            .spawn()
            .expect("starting raygate run");
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();

    let ops = Dashboard::new(&format!("http://127.0.0.1:{ops_port}"));
    let reasons = ns
        .wait_for(
            "raygate run to report not ready: shutting down",
            Duration::from_secs(60),
            || async {
                let readyz = ops.get("/readyz").await?;
                Ok(
                    (readyz.status == 503 && readyz.body.contains("shutting down"))
                        .then_some(readyz.body),
                )
            },
        )
        .await;
    let unready = Instant::now();
    eprintln!("/readyz: {reasons}");
    assert!(
        matches!(raygate.try_wait(), Ok(None)),
        "the process exited before leaving the Service:\n{}",
        log_text()
    );
    tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the webhook still accepts connections while it leaves the Service");

    let status = tokio::time::timeout(Duration::from_secs(90), raygate.wait())
        .await
        .unwrap_or_else(|_| panic!("raygate run still running 90 s later:\n{}", log_text()))
        .expect("waiting for raygate run");
    let served_unready = unready.elapsed();
    eprintln!("exited {served_unready:?} after /readyz first said 503: {status}");
    assert!(!status.success(), "exit status {status}:\n{}", log_text());
    // The 503 was first seen within moments of the failure (polled every 250 ms once the
    // listener is up): the process must have served on for most of the period after it.
    let period = Duration::from_secs(LEAVE_SERVICE_SECONDS.unsigned_abs());
    assert!(
        served_unready >= period / 2,
        "exited {served_unready:?} after reporting not ready; {period:?} are due:\n{}",
        log_text()
    );
    let text = log_text();
    assert!(text.contains("--namespace-selector"), "{text}");
    assert!(
        text.contains("another part of the process failed: reporting not ready, then draining"),
        "{text}"
    );
}
