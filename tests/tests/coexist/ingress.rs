//! The head Ingress (`headGroupSpec.enableIngress`), differentially: the same RayCluster run by
//! the live KubeRay operator in one namespace and by raygate's reconciler in another gets the
//! same Ingress (name, labels, annotations, class, rule, backend, owner).

use k8s_openapi::api::networking::v1::Ingress;
use raygate_e2e::kuberay::KubeRay;
use raygate_e2e::{Env, TestNamespace};
use serde_json::{Value, json};

use super::{KUBERAY, OPT_IN, SETTLE, create, head};

const NAME: &str = "web-head-ingress";

/// A RayCluster asking for a head Ingress of class `nginx`, with one annotation for it.
fn cluster() -> Value {
    let mut head = head();
    head["enableIngress"] = json!(true);
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "web", "annotations": {
            "kubernetes.io/ingress.class": "nginx",
            "nginx.ingress.kubernetes.io/rewrite-target": "/$1",
        }},
        "spec": {"rayVersion": "2.60.0", "headGroupSpec": head},
    })
}

/// The Ingress as compared: what both operators decide, without what the API server adds.
fn comparable(ingress: &Ingress) -> Value {
    let meta = &ingress.metadata;
    let owner = meta
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
        .map(|o| {
            json!([
                o.api_version,
                o.kind,
                o.name,
                o.controller,
                o.block_owner_deletion
            ])
        });
    json!({
        "labels": meta.labels,
        "annotations": meta.annotations,
        "owner": owner,
        "spec": ingress.spec,
    })
}

async fn ingress_of(ns: &TestNamespace) -> Ingress {
    let ingresses = ns.api::<Ingress>();
    ns.wait_for(&format!("Ingress {NAME}"), SETTLE, || async {
        Ok(ingresses.get_opt(NAME).await?)
    })
    .await
}

#[tokio::test]
async fn raygate_makes_the_head_ingress_kuberay_makes() {
    let env = Env::load();
    let by_kuberay = TestNamespace::with_labels(&env, "coexist-ing-kr", &[KUBERAY]).await;
    let by_raygate = TestNamespace::with_labels(&env, "coexist-ing-rg", &[OPT_IN]).await;
    let _kuberay = KubeRay::start(&env, &[&by_kuberay], None).await;
    create(&by_kuberay, cluster()).await;
    create(&by_raygate, cluster()).await;
    let theirs = ingress_of(&by_kuberay).await;
    let ours = ingress_of(&by_raygate).await;
    assert_eq!(
        comparable(&ours),
        comparable(&theirs),
        "raygate's Ingress (left) differs from KubeRay's (right)"
    );
    assert_eq!(
        comparable(&ours)["spec"]["ingressClassName"],
        "nginx",
        "the class annotation is the class"
    );
}
