//! QueuePolicy on the real control plane: the CRD is installed, its status is kept by raygate's
//! status controller, and raygate's webhook enforces policies and Volcano queue rules on Ray
//! objects. Run inside the environment:
//! `tests/env/control-plane exec -- cargo test -p raygate-e2e --test queue_policy`.
//!
//! QueuePolicies and Queues are cluster-scoped: every one created here has a unique name and a
//! namespace selector that matches only this test's namespaces, and is deleted at the end.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use raygate_api::keys;
use raygate_api::queue_policy::{QueuePolicy, QueuePolicySpec};
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

/// How long a status or cache change may take to show.
const SETTLE: Duration = Duration::from_secs(60);
/// Label tying a test's namespaces to its policies.
const MARKER: &str = "e2e.raygate.io/queue-policy";

fn policy(name: &str, marker: &str, spec: serde_json::Value) -> QueuePolicy {
    let mut spec: QueuePolicySpec = serde_json::from_value(spec).expect("a policy spec");
    spec.namespace_selector =
        Some(serde_json::from_value(json!({"matchLabels": {MARKER: marker}})).expect("a selector"));
    QueuePolicy::new(name, spec)
}

async fn label_namespace(client: &Client, name: &str, key: &str, value: Option<&str>) {
    Api::<Namespace>::all(client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
        )
        .await
        .unwrap_or_else(|e| panic!("labelling namespace {name}: {e}"));
}

/// Waits until the policy's status reads `(observedGeneration, matchedNamespaces)`.
async fn wait_status(
    ns: &TestNamespace,
    policies: &Api<QueuePolicy>,
    name: &str,
    want: (i64, i32),
) {
    ns.wait_for(
        &format!("QueuePolicy {name} status {want:?}"),
        SETTLE,
        || async {
            let policy = policies.get(name).await?;
            let status = policy.status.unwrap_or_default();
            Ok((status.observed_generation == Some(want.0)
                && status.matched_namespaces == Some(want.1))
            .then_some(()))
        },
    )
    .await;
}

#[tokio::test]
async fn status_reports_observed_generation_and_matched_namespaces() {
    let env = Env::load();
    let opt_in = (keys::NAMESPACE_OPT_IN_LABEL, keys::NAMESPACE_OPT_IN_VALUE);
    let a = TestNamespace::with_labels(&env, "qp-status-a", &[opt_in]).await;
    let marker = a.name().to_string();
    let client = a.client();
    label_namespace(&client, a.name(), MARKER, Some(&marker)).await;
    let b = TestNamespace::with_labels(&env, "qp-status-b", &[opt_in, (MARKER, &marker)]).await;
    // Selected but not opted in: never counted.
    let _c = TestNamespace::with_labels(&env, "qp-status-c", &[(MARKER, &marker)]).await;

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(raygate_reconciler::queue_policy::run(
        client.clone(),
        async move {
            let _ = stopped.await;
        },
    ));

    let policies: Api<QueuePolicy> = Api::all(client.clone());
    let name = format!("{marker}-status");
    policies
        .create(&PostParams::default(), &policy(&name, &marker, json!({})))
        .await
        .expect("create QueuePolicy");
    wait_status(&a, &policies, &name, (1, 2)).await;

    // A spec change is observed.
    policies
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"allowedQueues": ["default"]}})),
        )
        .await
        .expect("patch QueuePolicy");
    wait_status(&a, &policies, &name, (2, 2)).await;

    // A namespace leaving Volcano scheduling is no longer counted, without any policy change.
    label_namespace(&client, b.name(), keys::NAMESPACE_OPT_IN_LABEL, None).await;
    wait_status(&a, &policies, &name, (2, 1)).await;

    policies
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete QueuePolicy");
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(30), controller)
        .await
        .expect("the controller stops on shutdown")
        .expect("the controller task does not panic");
}
