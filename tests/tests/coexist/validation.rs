//! The webhook validates for the controller that runs the namespace's Ray objects: a feature
//! raygate's reconciler does not run is refused where the namespace label
//! `raygate.io/reconciler` says `raygate`, and accepted where it says `kuberay`, whatever the
//! webhook's own `--reconciler` default is.

use kube::api::PostParams;
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{KUBERAY, OPT_IN, ray_api, ray_job};

/// Hands a namespace's Ray objects to raygate's own reconciler.
const RAYGATE: (&str, &str) = ("raygate.io/reconciler", "raygate");

#[tokio::test]
async fn a_feature_raygates_reconciler_lacks_is_refused_only_where_raygate_runs_the_namespace() {
    let env = Env::load();
    let by_raygate = TestNamespace::with_labels(&env, "coexist-val-rg", &[OPT_IN, RAYGATE]).await;
    let by_kuberay = TestNamespace::with_labels(&env, "coexist-val-kr", &[OPT_IN, KUBERAY]).await;
    let mut fault_tolerant = ray_job("fault-tolerant", "python -c 'print(1)'", json!({}));
    fault_tolerant["spec"]["rayClusterSpec"]["gcsFaultToleranceOptions"] =
        json!({"redisAddress": "redis:6379"});
    let object: kube::api::DynamicObject =
        serde_json::from_value(fault_tolerant).expect("a RayJob");
    // Dry runs: admission runs in full, nothing is stored.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    let refused = ray_api(&by_raygate, "RayJob")
        .create(&dry_run, &object)
        .await
        .expect_err("raygate's reconciler does not run GCS fault tolerance");
    let message = refused.to_string();
    assert!(
        message.contains("spec.rayClusterSpec.gcsFaultToleranceOptions")
            && message.contains("not supported by raygate's reconciler"),
        "{message}"
    );

    let accepted = ray_api(&by_kuberay, "RayJob")
        .create(&dry_run, &object)
        .await
        .unwrap_or_else(|e| panic!("KubeRay runs GCS fault tolerance: {e}"));
    assert_eq!(
        accepted.data["spec"]["rayClusterSpec"]["gcsFaultToleranceOptions"]["redisAddress"],
        "redis:6379"
    );
}
