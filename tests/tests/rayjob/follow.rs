//! The main job's demo core: `raygate follow` on the README's example RayJob, run as the demo
//! (`tests/env/dev`) runs it, so neither the example nor the command can rot.

use raygate_api::input::parse_documents;
use raygate_api::ray::v1::RayJob;
use raygate_e2e::{Env, TestNamespace};

use serde_json::json;

use super::{create, ray_job};

#[tokio::test]
async fn raygate_follow_shows_the_example_rayjob_to_success() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(
        &env,
        "rayjob-follow",
        &[("raygate.io/scheduler", "volcano")],
    )
    .await;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../manifests/examples/rayjob.yaml"
    );
    let text = std::fs::read_to_string(path).expect("the example manifest");
    let documents = parse_documents(path, &text).expect("the example parses");
    let job: RayJob =
        serde_json::from_value(documents[0].value.clone()).expect("the example is a RayJob");
    let name = job.metadata.name.clone().expect("the example has a name");
    create(&ns, &job).await;

    let output =
        raygate_e2e::raygate::run(&["follow", &name, "--namespace", ns.name(), "--timeout", "4m"])
            .await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = format!("stdout:\n{stdout}\nstderr:\n{stderr}\n{}", ns.dump().await);
    assert_eq!(output.status.code(), Some(0), "{report}");
    let lines: Vec<&str> = stdout.lines().collect();
    let position = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?}\n{report}"))
    };
    let initializing = position(&format!("RayJob {name}: Initializing"));
    let running = position(&format!("RayJob {name}: Running"));
    let complete = position(&format!("RayJob {name}: Complete, jobStatus SUCCEEDED"));
    assert!(initializing < running && running < complete, "{report}");
    position(&format!(
        "PodGroup ray-{name}-pg: minMember 3, minResources {{cpu=2500m, memory=4296Mi}}"
    ));
    let output_start = position("--- output of Ray job ");
    let output_end = position("--- end of output ---");
    assert!(
        complete < output_start && output_start < output_end,
        "{report}"
    );
    // ray.cluster_resources() of the RayJob's own cluster: the head and both workers joined,
    // one CPU each (`--num-cpus` from each container's CPU limit).
    assert!(
        lines[output_start..output_end]
            .iter()
            .any(|l| l.contains("'CPU': 3.0")),
        "the entrypoint prints ray.cluster_resources() of head + 2 workers\n{report}"
    );
}

#[tokio::test]
async fn raygate_follow_fails_with_exit_2_on_a_missing_rayjob_and_on_its_timeout() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(
        &env,
        "rayjob-follow-end",
        &[("raygate.io/scheduler", "volcano")],
    )
    .await;
    let follow = |name: &'static str, timeout: &'static str| {
        let namespace = ns.name().to_string();
        async move {
            let output = raygate_e2e::raygate::run(&[
                "follow",
                name,
                "--namespace",
                &namespace,
                "--timeout",
                timeout,
            ])
            .await;
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        }
    };

    let (code, stdout, stderr) = follow("nothing", "1m").await;
    assert_eq!(code, Some(2), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains(&format!("RayJob {}/nothing does not exist", ns.name())),
        "{stderr}"
    );

    create(
        &ns,
        &ray_job(
            "long",
            "python -c 'import time; time.sleep(300)'",
            0,
            json!({}),
        ),
    )
    .await;
    let (code, stdout, stderr) = follow("long", "3s").await;
    assert_eq!(code, Some(2), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.lines().any(|l| l.starts_with("RayJob long: ")),
        "{stdout}"
    );
    let message = format!("RayJob {}/long is still ", ns.name());
    assert!(
        stderr.contains(&message) && stderr.contains(" after 3s"),
        "{stderr}"
    );
}
