//! Ray token authentication (`authOptions.mode: token`) under raygate's reconciler, on the real
//! nodes: raygate makes the cluster's token Secret, every Ray process reads it (the worker's
//! `wait-gcs-ready` too), the submitter and raygate's own status polls use it, and the dashboard
//! refuses a request without it. The token is in no Event and no reconciler log line.

use k8s_openapi::api::core::v1::{Event, Secret};
use kube::api::ListParams;
use raygate_api::ray::v1::AuthOptions;
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::lifecycle::{OPT_IN, assert_on_real_nodes, assert_waited_for_the_gcs};
use super::{create, job_dashboard, pods, ray_job, wait_succeeded};

#[tokio::test(flavor = "multi_thread")]
async fn a_token_authenticated_rayjob_runs_and_its_dashboard_wants_the_token() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-token", &OPT_IN).await;
    // The task runs on the worker (the head offers Ray no CPU), so the worker's raylet must
    // have joined with the token.
    let mut job = ray_job(
        "secure",
        "python -c \"import ray; ray.init(); print('answer:', ray.get(ray.remote(num_cpus=1)(lambda: 42).remote()))\"",
        1,
        json!({"shutdownAfterJobFinishes": false}),
    );
    let cluster_spec = job.spec.ray_cluster_spec.as_mut().expect("a cluster spec");
    cluster_spec.auth_options = Some(AuthOptions {
        mode: Some("token".into()),
        ..AuthOptions::default()
    });
    cluster_spec
        .head_group_spec
        .ray_start_params
        .get_or_insert_default()
        .insert("num-cpus".into(), "0".into());
    cluster_spec.worker_group_specs.as_mut().expect("a group")[0]
        .ray_start_params
        .get_or_insert_default()
        .insert("num-cpus".into(), "1".into());
    create(&ns, &job).await;

    let done = wait_succeeded(&ns, "secure").await;
    let cluster = done.ray_cluster_name.clone().expect("a cluster");
    let submission = done.job_id.clone().expect("a job id");

    let secret = ns
        .api::<Secret>()
        .get(&cluster)
        .await
        .unwrap_or_else(|e| panic!("the token Secret {cluster}: {e}"));
    let owner = &secret.metadata.owner_references.clone().expect("an owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("RayCluster", cluster.as_str())
    );
    let token = secret
        .data
        .as_ref()
        .and_then(|d| d.get("auth_token"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .expect("an auth_token");
    assert_eq!(token.len(), 44, "32 random bytes in base64");

    let workers = pods(
        &ns,
        &format!("ray.io/cluster={cluster},ray.io/node-type=worker"),
    )
    .await;
    let dump = ns.dump().await;
    assert_eq!(workers.len(), 1, "{dump}");
    assert_on_real_nodes(&workers, &env, &dump);
    assert_waited_for_the_gcs(&workers[0]);

    let path = format!("/api/jobs/{submission}");
    let refused = job_dashboard(&ns, "secure")
        .get(&path)
        .await
        .expect("an answer");
    assert!(
        refused.status == 401 || refused.status == 403,
        "a request without the token: HTTP {} {}",
        refused.status,
        refused.body
    );
    let wrong = job_dashboard(&ns, "secure")
        .with_token("not-the-token")
        .get(&path)
        .await
        .expect("an answer");
    assert!(
        wrong.status == 401 || wrong.status == 403,
        "a wrong token: HTTP {}",
        wrong.status
    );
    let authed = job_dashboard(&ns, "secure").with_token(&token);
    let logs = authed.get(&format!("{path}/logs")).await.expect("the logs");
    assert_eq!(logs.status, 200, "{}", logs.body);
    assert!(logs.body.contains("answer: 42"), "{}", logs.body);

    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .expect("the Events")
        .items;
    assert!(!events.is_empty());
    for event in &events {
        assert!(
            !event
                .message
                .as_deref()
                .unwrap_or_default()
                .contains(&token),
            "an Event shows the token: {event:?}"
        );
    }
    let log = raygate_e2e::reconciler::environment_log(&env).await;
    assert!(
        log.contains(&cluster),
        "the reconciler's log is not the one that ran this cluster"
    );
    assert!(
        !log.contains(&token),
        "the reconciler's log shows the token"
    );
}
