//! The Ray head: Jobs REST API and the `ray job` CLI.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use raygate_e2e::ray::Dashboard;
use raygate_e2e::{Env, TestNamespace};
use serde_json::Value;

/// A submission id no other run of these tests used (the Ray head outlives test runs only while
/// the environment stays up, but ids must still be unique within it).
fn submission_id(what: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("smoke-{what}-{nanos:x}")
}

/// Waits for a terminal status of `id` (first jobs after a head start take up to ~6 s).
async fn terminal(ns: &TestNamespace, ray: &Dashboard, id: &str) -> Value {
    ns.wait_for(
        &format!("Ray job {id} to finish"),
        Duration::from_secs(120),
        || ray.terminal_job(id),
    )
    .await
}

#[tokio::test]
async fn rest_submission_succeeds_and_a_duplicate_id_is_rejected() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-ray-rest").await;
    let ray = Dashboard::new(env.ray_dashboard());
    let id = submission_id("rest");
    let answer = ray
        .submit(&id, "python -c 'print(1)'")
        .await
        .expect("POST /api/jobs/");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.json().unwrap()["submission_id"],
        Value::from(id.clone())
    );
    let job = terminal(&ns, &ray, &id).await;
    assert_eq!(job["status"], "SUCCEEDED", "{job}");
    assert_eq!(job["driver_exit_code"], 0, "{job}");

    let again = ray
        .submit(&id, "python -c 'print(1)'")
        .await
        .expect("POST /api/jobs/ again");
    assert_eq!(again.status, 500, "duplicate submission: {}", again.body);
    assert!(
        again.body.contains("already exists"),
        "duplicate submission: {}",
        again.body
    );
}

#[tokio::test]
async fn cli_submission_with_submission_id_succeeds() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-ray-cli").await;
    let ray = Dashboard::new(env.ray_dashboard());
    let id = submission_id("cli");
    let output = tokio::process::Command::new("ray")
        .args([
            "job",
            "submit",
            "--address",
            env.ray_dashboard(),
            "--submission-id",
            &id,
        ])
        .args(["--", "python", "-c", "print(2)"])
        .kill_on_drop(true)
        .output()
        .await
        .expect("run `ray` (the Ray venv is first on PATH inside `control-plane exec`)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "ray job submit failed ({}):\n{text}",
        output.status
    );
    let job = terminal(&ns, &ray, &id).await;
    assert_eq!(job["status"], "SUCCEEDED", "{job}\n{text}");
}

#[tokio::test]
async fn failing_entrypoint_reports_its_exit_code() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-ray-fail").await;
    let ray = Dashboard::new(env.ray_dashboard());
    let id = submission_id("fail");
    let answer = ray.submit(&id, "exit 3").await.expect("POST /api/jobs/");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let job = terminal(&ns, &ray, &id).await;
    assert_eq!(
        (&job["status"], &job["driver_exit_code"]),
        (&Value::from("FAILED"), &Value::from(3)),
        "{job}"
    );
}
