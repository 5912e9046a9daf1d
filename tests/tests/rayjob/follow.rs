//! The main job's demo core: `raygate follow` on the README's example RayJob, run as the demo
//! (`tests/env/dev`) runs it, so neither the example nor the command can rot.

use raygate_api::input::parse_documents;
use raygate_api::ray::v1::RayJob;
use raygate_e2e::{Env, TestNamespace};

use super::create;

#[tokio::test]
async fn raygate_follow_shows_the_example_rayjob_to_success() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(
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

    let output = raygate_e2e::raygate::run(&[
        "follow",
        &name,
        "--namespace",
        ns.name(),
        "--timeout",
        "4m",
        "--ray-dashboard-address",
        env.ray_dashboard(),
    ])
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
    assert!(
        lines[output_start..output_end]
            .iter()
            .any(|l| l.contains("'CPU'")),
        "the entrypoint prints ray.cluster_resources()\n{report}"
    );
}
