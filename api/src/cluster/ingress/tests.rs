use serde_json::json;

use super::*;

fn cluster(patch: serde_json::Value) -> RayCluster {
    let mut value = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "web", "namespace": "team", "uid": "u-1",
                     "annotations": {"kubernetes.io/ingress.class": "nginx",
                                     "nginx.ingress.kubernetes.io/rewrite-target": "/$1"}},
        "spec": {"headGroupSpec": {"enableIngress": true, "rayStartParams": {},
                 "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}}}}
    });
    json_patch::merge(&mut value, &patch);
    serde_json::from_value(value).expect("a RayCluster")
}

fn backend(ingress: &Ingress) -> (String, String, i32) {
    let rule = &ingress
        .spec
        .as_ref()
        .expect("spec")
        .rules
        .as_ref()
        .expect("rules")[0];
    let path = &rule.http.as_ref().expect("http").paths[0];
    let service = path.backend.service.as_ref().expect("a Service backend");
    (
        path.path.clone().unwrap_or_default(),
        service.name.clone(),
        service
            .port
            .as_ref()
            .and_then(|p| p.number)
            .unwrap_or_default(),
    )
}

#[test]
fn the_dashboard_is_routed_under_the_cluster_name_with_kuberays_labels() {
    let c = cluster(json!({}));
    assert!(enabled(&c));
    let ingress = build(&c);
    let meta = &ingress.metadata;
    assert_eq!(meta.name.as_deref(), Some("web-head-ingress"));
    assert_eq!(meta.namespace.as_deref(), Some("team"));
    assert_eq!(
        meta.labels.clone().expect("labels"),
        BTreeMap::from([
            ("ray.io/cluster".to_string(), "web".to_string()),
            ("ray.io/identifier".to_string(), "web-head".to_string()),
            ("app.kubernetes.io/name".to_string(), "kuberay".to_string()),
            (
                "app.kubernetes.io/created-by".to_string(),
                "kuberay-operator".to_string()
            ),
        ])
    );
    // The class annotation becomes the class name; the rest is copied.
    assert_eq!(
        meta.annotations.clone().expect("annotations"),
        BTreeMap::from([(
            "nginx.ingress.kubernetes.io/rewrite-target".to_string(),
            "/$1".to_string()
        )])
    );
    let spec = ingress.spec.as_ref().expect("spec");
    assert_eq!(spec.ingress_class_name.as_deref(), Some("nginx"));
    let path = &spec.rules.as_ref().expect("rules")[0]
        .http
        .as_ref()
        .expect("http")
        .paths[0];
    assert_eq!(path.path_type, "Exact");
    assert_eq!(
        backend(&ingress),
        ("/web/(.*)".to_string(), "web-head-svc".to_string(), 8265)
    );
    let owner = &meta.owner_references.as_ref().expect("an owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("RayCluster", "u-1", Some(true))
    );
}

#[test]
fn a_renamed_head_service_and_dashboard_port_are_followed() {
    let c = cluster(json!({
        "metadata": {"annotations": null},
        "spec": {"headGroupSpec": {
            "headService": {"metadata": {"name": "front"}},
            "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray",
                "ports": [{"name": "dashboard", "containerPort": 9000},
                          {"name": "gcs", "containerPort": 6379}]}]}}
        }}
    }));
    let ingress = build(&c);
    assert_eq!(
        backend(&ingress),
        ("/web/(.*)".to_string(), "front".to_string(), 9000)
    );
    assert_eq!(ingress.spec.expect("spec").ingress_class_name, None);
    // Ports without a dashboard: Ray's default one.
    let c = cluster(
        json!({"spec": {"headGroupSpec": {"template": {"spec": {"containers":
        [{"name": "ray-head", "image": "ray", "ports": [{"name": "gcs", "containerPort": 6379}]}]}}}}}),
    );
    assert_eq!(backend(&build(&c)).2, 8265);
    assert!(!enabled(&cluster(
        json!({"spec": {"headGroupSpec": {"enableIngress": false}}})
    )));
}
