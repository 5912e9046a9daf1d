use serde_json::{Value, json};

use super::*;

fn custom() -> InstallOptions {
    InstallOptions {
        namespace: "ops".to_owned(),
        image: "registry.local/raygate:dev".to_owned(),
        ..InstallOptions::default()
    }
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

#[test]
fn everything_lands_in_the_chosen_namespace_with_the_chosen_image() {
    let objects = render(&custom());
    let kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Secret",
            "Lease",
            "Service",
            "Deployment",
            "PodDisruptionBudget",
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ]
    );
    for object in &objects {
        let kind = object["kind"].as_str().unwrap();
        if CLUSTER_SCOPED.contains(&kind) {
            assert!(object["metadata"].get("namespace").is_none(), "{kind}");
        } else {
            assert_eq!(object["metadata"]["namespace"], "ops", "{kind}");
        }
        assert_eq!(
            object["metadata"]["labels"]["app.kubernetes.io/name"],
            "raygate"
        );
    }
    let deployment = find(&objects, "Deployment", "raygate");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.local/raygate:dev"
    );
    for binding in ["ClusterRoleBinding", "RoleBinding"] {
        assert_eq!(
            find(&objects, binding, "raygate")["subjects"],
            json!([{"kind": "ServiceAccount", "name": "raygate", "namespace": "ops"}])
        );
    }
}

#[test]
fn raygates_own_queue_policy_crd_is_installed() {
    let objects = render(&custom());
    let crd = find(
        &objects,
        "CustomResourceDefinition",
        "queuepolicies.raygate.io",
    );
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(
        crd["metadata"]["labels"]["app.kubernetes.io/name"],
        "raygate"
    );
}

#[test]
fn the_ray_crds_convert_through_raygates_service() {
    let objects = render(&custom());
    for name in ["rayjobs.ray.io", "rayclusters.ray.io"] {
        let crd = find(&objects, "CustomResourceDefinition", name);
        assert_eq!(
            crd["spec"]["conversion"],
            json!({"strategy": "Webhook", "webhook": {
                "clientConfig": {"service": {"namespace": "ops", "name": "raygate", "path": "/convert", "port": 443}},
                "conversionReviewVersions": ["v1"],
            }})
        );
        let versions: Vec<(&str, bool, bool)> = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap(),
                    v["served"].as_bool().unwrap(),
                    v["storage"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(versions, [("v1", true, true), ("v1alpha1", true, false)]);
    }
}

/// `(group, resource, verbs)` of every rule, one line per resource.
fn grants(role: &Value) -> Vec<(String, String, Vec<String>, bool)> {
    let mut out = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
                .unwrap_or_default()
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                out.push((
                    group.clone(),
                    resource,
                    strings(&rule["verbs"]),
                    rule.get("resourceNames").is_some(),
                ));
            }
        }
    }
    out
}

#[test]
fn rbac_is_least_privilege() {
    let objects = render(&custom());
    let cluster = grants(find(&objects, "ClusterRole", "raygate"));
    let namespaced = grants(find(&objects, "Role", "raygate"));
    for (group, resource, verbs, _) in cluster.iter().chain(&namespaced) {
        assert!(group != "*" && resource != "*", "wildcard resource");
        assert!(
            !verbs
                .iter()
                .any(|v| v == "*" || v == "escalate" || v == "bind" || v == "impersonate")
        );
    }
    // Leases only in raygate's own namespace; Secrets elsewhere only created and read by name
    // (Ray auth tokens), never listed or watched.
    for (_, resource, verbs, _) in &cluster {
        assert!(resource != "leases", "{resource} cluster-wide");
        if resource == "secrets" {
            assert_eq!(verbs, &["get", "create"], "Secrets cluster-wide");
        }
    }
    assert!(namespaced.iter().any(|(_, r, _, _)| r == "secrets"));
    assert!(
        namespaced
            .iter()
            .any(|(g, r, _, _)| g == "coordination.k8s.io" && r == "leases")
    );
    // Only reading namespaces, nodes and queues; only get/patch (by name) on webhook
    // configurations and CRDs.
    for (group, resource, verbs, named) in &cluster {
        match resource.as_str() {
            "namespaces" => assert_eq!(verbs, &["get", "list", "watch"]),
            "nodes" | "queues" | "queuepolicies" => assert_eq!(verbs, &["list", "watch"]),
            "mutatingwebhookconfigurations"
            | "validatingwebhookconfigurations"
            | "customresourcedefinitions" => {
                assert_eq!(verbs, &["get", "patch"], "{group}/{resource}");
                assert!(named, "{resource} must be limited to raygate's own objects");
            }
            "rayjobs/finalizers" | "rayclusters/finalizers" => assert_eq!(verbs, &["update"]),
            // An autoscaled cluster's access objects are only ever created (and collected by
            // their owner); pods/resize is held only so it may be granted.
            "serviceaccounts" | "roles" | "rolebindings" | "ingresses" => {
                assert_eq!(verbs, &["create"])
            }
            "secrets" => assert_eq!(verbs, &["get", "create"]),
            "pods/resize" => assert_eq!(verbs, &["patch"]),
            // Everything else is changed with patches only.
            _ => assert!(
                !verbs.iter().any(|verb| verb == "update"),
                "{group}/{resource} may be updated whole"
            ),
        }
    }
    let resources: Vec<String> = cluster
        .iter()
        .map(|(g, r, _, _)| {
            if g.is_empty() {
                r.clone()
            } else {
                format!("{r}.{g}")
            }
        })
        .collect();
    for needed in [
        "pods",
        "pods/resize",
        "serviceaccounts",
        "secrets",
        "roles.rbac.authorization.k8s.io",
        "rolebindings.rbac.authorization.k8s.io",
        "ingresses.networking.k8s.io",
        "services",
        "jobs.batch",
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
        "rayjobs.ray.io",
        "rayjobs/status.ray.io",
        "rayjobs/finalizers.ray.io",
        "rayclusters.ray.io",
        "rayclusters/status.ray.io",
        "rayclusters/finalizers.ray.io",
        "queuepolicies.raygate.io",
        "queuepolicies/status.raygate.io",
        "events.events.k8s.io",
        "namespaces",
        "nodes",
        "mutatingwebhookconfigurations.admissionregistration.k8s.io",
        "validatingwebhookconfigurations.admissionregistration.k8s.io",
        "customresourcedefinitions.apiextensions.k8s.io",
    ] {
        assert!(resources.iter().any(|r| r == needed), "missing {needed}");
    }
    assert_eq!(
        resources.len(),
        25,
        "unexpected extra grants: {resources:?}"
    );
}

#[test]
fn the_deployment_is_hardened_and_highly_available() {
    let objects = render(&InstallOptions::default());
    let deployment = find(&objects, "Deployment", "raygate");
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 2);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["containers"][0];
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    for kind in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                container["resources"][kind][resource].is_string(),
                "{kind}.{resource}"
            );
        }
    }
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    // The allocator settings the benchmarks measure RSS with.
    for (name, value) in [
        ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
        ("MIMALLOC_ALLOW_THP", "0"),
    ] {
        assert!(
            container["env"]
                .as_array()
                .expect("env")
                .contains(&json!({"name": name, "value": value})),
            "{name}: {}",
            container["env"]
        );
    }
    assert_eq!(
        spec["selector"]["matchLabels"],
        find(&objects, "PodDisruptionBudget", "raygate")["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        find(&objects, "PodDisruptionBudget", "raygate")["spec"]["minAvailable"],
        1
    );
    assert_eq!(
        spec["selector"]["matchLabels"],
        find(&objects, "Service", "raygate")["spec"]["selector"]
    );
}

#[test]
fn escape_webhooks_see_every_namespace_but_the_system_ones_and_only_what_they_judge() {
    let options = InstallOptions {
        opt_in_label: OptInLabel {
            admins: "group:platform,user:gitops".parse().unwrap(),
            ..("team.example.com/gang=on".parse().unwrap())
        },
        failure_policy: FailurePolicy::Ignore,
        ..custom()
    };
    let objects = render(&options);
    let args = &find(&objects, "Deployment", "raygate")["spec"]["template"]["spec"]["containers"]
        [0]["args"];
    assert!(
        args.as_array().unwrap().contains(&json!(
            "--namespace-label-admins=group:platform,user:gitops"
        )),
        "{args}"
    );
    let webhooks = find(&objects, "ValidatingWebhookConfiguration", "raygate")["webhooks"]
        .as_array()
        .unwrap();
    let named = |name: &str| {
        webhooks
            .iter()
            .find(|w| w["name"] == name)
            .unwrap_or_else(|| panic!("no webhook {name}"))
    };
    let every_namespace = json!({"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "ops"]},
    ]});
    let condition = |webhook: &Value, index: usize| {
        webhook["matchConditions"][index]["expression"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    let namespaces = named("namespaces.validate.raygate.io");
    assert_eq!(
        namespaces["clientConfig"]["service"]["path"],
        keys::VALIDATE_NAMESPACE_PATH
    );
    assert_eq!(namespaces["rules"][0]["resources"], json!(["namespaces"]));
    assert_eq!(
        namespaces["rules"][0]["operations"],
        json!(["CREATE", "UPDATE"])
    );
    assert_eq!(namespaces["namespaceSelector"], every_namespace);
    // A label change raygate could not check is never stored, whatever failurePolicy says.
    assert_eq!(namespaces["failurePolicy"], "Fail");
    let label_changes = condition(namespaces, 0);
    assert!(
        label_changes.contains("object.metadata.labels['team.example.com/gang']")
            && label_changes.contains("oldObject.metadata.labels['team.example.com/gang']")
            && !label_changes.contains("raygate.io/scheduler"),
        "{label_changes}"
    );

    let pods = named("volcanopods.validate.raygate.io");
    assert_eq!(
        pods["clientConfig"]["service"]["path"],
        keys::VALIDATE_VOLCANO_POD_PATH
    );
    assert_eq!(pods["rules"][0]["resources"], json!(["pods"]));
    assert_eq!(pods["rules"][0]["operations"], json!(["CREATE"]));
    assert_eq!(pods["namespaceSelector"], every_namespace);
    assert_eq!(pods["failurePolicy"], "Ignore");
    let volcano = condition(pods, 0);
    assert!(
        volcano.contains("object.spec.schedulerName == 'volcano'")
            && volcano.contains("!('scheduling.k8s.io/group-name' in object.metadata.annotations)"),
        "{volcano}"
    );
    assert!(condition(pods, 1).contains("kubernetes.io/config.mirror"));

    let groups = named("podgroups.validate.raygate.io");
    assert_eq!(
        groups["clientConfig"]["service"]["path"],
        keys::VALIDATE_POD_GROUP_PATH
    );
    assert_eq!(
        groups["rules"][0]["apiGroups"],
        json!(["scheduling.volcano.sh"])
    );
    assert_eq!(groups["rules"][0]["resources"], json!(["podgroups"]));
    assert_eq!(
        groups["rules"][0]["operations"],
        json!(["CREATE", "UPDATE"])
    );
    assert_eq!(groups["namespaceSelector"], every_namespace);
    assert_eq!(groups["failurePolicy"], "Ignore");
    assert_eq!(
        condition(groups, 0),
        "request.operation == 'CREATE' || object.spec != oldObject.spec"
    );
}

#[test]
fn webhooks_fail_closed_only_in_opted_in_namespaces_and_never_in_system_ones() {
    let objects = render(&custom());
    let mut seen = 0;
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        for webhook in find(&objects, kind, "raygate")["webhooks"]
            .as_array()
            .unwrap()
        {
            seen += 1;
            let name = webhook["name"].as_str().unwrap();
            assert_eq!(webhook["sideEffects"], "None", "{name}");
            assert!(webhook["timeoutSeconds"].as_i64().unwrap() <= 5, "{name}");
            assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]));
            assert_eq!(webhook["clientConfig"]["service"]["namespace"], "ops");
            if webhook["rules"][0]["apiGroups"] == json!(["raygate.io"]) {
                // raygate's own cluster-scoped QueuePolicies: no namespace to select.
                assert_eq!(webhook["rules"][0]["scope"], "Cluster", "{name}");
                assert!(webhook.get("namespaceSelector").is_none(), "{name}");
                continue;
            }
            let expressions = webhook["namespaceSelector"]["matchExpressions"]
                .as_array()
                .unwrap();
            assert!(
                expressions.contains(&json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "ops"]})),
                "{name} must exclude kube-system and raygate's namespace"
            );
            let opted_in = expressions.contains(
                &json!({"key": "raygate.io/scheduler", "operator": "In", "values": ["volcano"]}),
            );
            if webhook["failurePolicy"] == "Fail" {
                // Outside the opted-in namespaces only the escape webhooks fail closed, and
                // only for the few requests their matchConditions let through.
                assert!(
                    opted_in
                        || webhook["matchConditions"]
                            .as_array()
                            .is_some_and(|c| !c.is_empty()),
                    "{name} fails closed outside the opted-in namespaces for every request"
                );
            }
        }
    }
    assert_eq!(seen, 8);
    let pods = &find(&objects, "MutatingWebhookConfiguration", "raygate")["webhooks"][0];
    assert_eq!(pods["rules"][0]["resources"], json!(["pods"]));
    assert_eq!(pods["failurePolicy"], "Fail");
    let conditions: Vec<&str> = pods["matchConditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["expression"].as_str().unwrap())
        .collect();
    assert!(conditions[0].contains("'ray.io/node-type' in object.metadata.labels"));
    // KubeRay's submitter Pods are known by their Job only.
    assert!(conditions[0].contains("'batch.kubernetes.io/job-name' in object.metadata.labels"));
    assert!(conditions[0].contains("o.kind == 'Job' && o.apiVersion == 'batch/v1'"));
    assert!(conditions[1].contains("kubernetes.io/config.mirror"));
}

#[test]
fn the_yaml_rendering_parses_back_to_the_objects() {
    let yaml = render_yaml(&custom());
    let documents = crate::input::parse_documents("install.yaml", &yaml).unwrap();
    let values: Vec<Value> = documents.into_iter().map(|d| d.value).collect();
    // `minimum: 0.0` is the integer 0 to kubectl, as to the API server.
    let expected: Vec<Value> = render(&custom())
        .iter()
        .map(crate::input::as_the_api_server_reads)
        .collect();
    assert_eq!(values, expected);
}

#[test]
fn webhook_configurations_by_url_differ_from_the_installation_only_in_client_config() {
    let installed = render(&custom());
    let by_url = webhook_configurations(
        &custom(),
        &WebhookClient::Url {
            base: "https://127.0.0.1:9443/".to_owned(),
            ca_bundle: Some("-----BEGIN CERTIFICATE-----\nAA==\n".to_owned()),
        },
    );
    let mut urls = Vec::new();
    for mut configuration in by_url {
        let kind = configuration["kind"].as_str().unwrap().to_owned();
        let mut expected = find(&installed, &kind, "raygate").clone();
        let webhooks = configuration["webhooks"].as_array_mut().unwrap();
        let expected_webhooks = expected["webhooks"].as_array_mut().unwrap();
        assert_eq!(webhooks.len(), expected_webhooks.len(), "{kind}");
        for (webhook, installed) in webhooks.iter_mut().zip(expected_webhooks.iter_mut()) {
            let path = installed["clientConfig"]["service"]["path"]
                .as_str()
                .unwrap()
                .to_owned();
            assert_eq!(
                webhook["clientConfig"],
                json!({"url": format!("https://127.0.0.1:9443{path}"),
                       "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkFBPT0K"}),
                "{kind}"
            );
            urls.push(path);
            webhook["clientConfig"] = Value::Null;
            installed["clientConfig"] = Value::Null;
        }
        assert_eq!(configuration, expected, "{kind}");
    }
    assert_eq!(
        urls,
        [
            keys::MUTATE_PODS_PATH,
            keys::MUTATE_RAY_PATH,
            keys::VALIDATE_RAY_PATH,
            keys::VALIDATE_RAY_PATH,
            keys::VALIDATE_QUEUE_POLICY_PATH,
            keys::VALIDATE_NAMESPACE_PATH,
            keys::VALIDATE_VOLCANO_POD_PATH,
            keys::VALIDATE_POD_GROUP_PATH,
        ]
    );
    let without_bundle = webhook_configurations(
        &custom(),
        &WebhookClient::Url {
            base: "https://127.0.0.1:9443".to_owned(),
            ca_bundle: None,
        },
    );
    assert_eq!(
        without_bundle[0]["webhooks"][0]["clientConfig"],
        json!({"url": "https://127.0.0.1:9443/mutate/pods"})
    );
}

#[test]
fn the_webhook_configurations_yaml_parses_back_to_the_objects() {
    let client = WebhookClient::Url {
        base: "https://127.0.0.1:9443".to_owned(),
        ca_bundle: None,
    };
    let yaml = webhook_configurations_yaml(&custom(), &client);
    let documents = crate::input::parse_documents("webhooks.yaml", &yaml).unwrap();
    let values: Vec<Value> = documents.into_iter().map(|d| d.value).collect();
    assert_eq!(values, webhook_configurations(&custom(), &client));
}

fn kinds_and_names(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn each_part_is_granted_only_what_it_uses() {
    let webhook_only = render(&InstallOptions {
        reconciler: false,
        ..custom()
    });
    let granted = grants(find(&webhook_only, "ClusterRole", "raygate"));
    let writes: Vec<_> = granted
        .iter()
        .filter(|(_, _, verbs, _)| {
            verbs
                .iter()
                .any(|v| !["get", "list", "watch"].contains(&v.as_str()))
        })
        .map(|(group, resource, _, _)| format!("{group}/{resource}"))
        .collect();
    // Only the CA-bundle patches of its own webhook configurations and CRDs.
    assert_eq!(
        writes,
        [
            "admissionregistration.k8s.io/mutatingwebhookconfigurations",
            "admissionregistration.k8s.io/validatingwebhookconfigurations",
            "apiextensions.k8s.io/customresourcedefinitions",
        ]
    );
    let names = kinds_and_names(&webhook_only);
    assert!(
        names.contains(&"Secret/raygate-webhook-cert".to_owned()),
        "{names:?}"
    );
    assert!(
        !names.contains(&"Lease/raygate-reconciler".to_owned()),
        "{names:?}"
    );
    let role = find(&webhook_only, "Role", "raygate");
    assert_eq!(
        role["rules"].as_array().unwrap().len(),
        1,
        "secrets only, no leases"
    );
    assert_eq!(role["rules"][0]["resources"], json!(["secrets"]));

    let reconciler_only = render(&InstallOptions {
        webhook: false,
        ..custom()
    });
    let names = kinds_and_names(&reconciler_only);
    assert!(
        names.contains(&"Lease/raygate-reconciler".to_owned()),
        "{names:?}"
    );
    for absent in [
        "Service/raygate",
        "Secret/raygate-webhook-cert",
        "MutatingWebhookConfiguration/raygate",
        "ValidatingWebhookConfiguration/raygate",
    ] {
        assert!(!names.contains(&absent.to_owned()), "{absent} in {names:?}");
    }
    let granted = grants(find(&reconciler_only, "ClusterRole", "raygate"));
    assert!(
        granted
            .iter()
            .all(|(group, _, _, _)| group != "admissionregistration.k8s.io"
                && group != "apiextensions.k8s.io"),
        "{granted:?}"
    );
    // Both keep Node shapes for feasibility.
    for only in [&reconciler_only, &webhook_only] {
        let grants = grants(find(only, "ClusterRole", "raygate"));
        assert!(
            grants.iter().any(|(_, resource, _, _)| resource == "nodes"),
            "{grants:?}"
        );
    }
    let role = find(&reconciler_only, "Role", "raygate");
    assert_eq!(role["rules"].as_array().unwrap().len(), 1, "leases only");
    assert_eq!(role["rules"][0]["resources"], json!(["leases"]));
    // Nothing can convert without the webhook.
    let crd = find(
        &reconciler_only,
        "CustomResourceDefinition",
        "rayjobs.ray.io",
    );
    assert!(
        crd["spec"].get("conversion").is_none(),
        "{}",
        crd["spec"]["conversion"]
    );
    // Probed on the one health and metrics listener, which serves the reconciler alone.
    let container = &find(&reconciler_only, "Deployment", "raygate")["spec"]["template"]["spec"]["containers"]
        [0];
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "health");
    assert_eq!(
        container["ports"],
        json!([{"name": "health", "containerPort": 9090, "protocol": "TCP"}])
    );
    assert!(
        !container["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a.as_str().unwrap().starts_with("--cert-mode"))
    );
}

#[test]
fn cert_manager_issues_the_certificate_and_injects_every_bundle() {
    let objects = render(&InstallOptions {
        certificates: Certificates::CertManager { issuer: None },
        ..custom()
    });
    let certificate = find(&objects, "Certificate", "raygate-webhook");
    assert_eq!(certificate["spec"]["secretName"], TLS_SECRET);
    assert_eq!(certificate["spec"]["issuerRef"]["kind"], "Issuer");
    assert_eq!(certificate["spec"]["dnsNames"][0], "raygate.ops.svc");
    assert_eq!(
        find(&objects, "Issuer", "raygate-webhook")["spec"],
        json!({"selfSigned": {}})
    );
    for (kind, name) in [
        ("MutatingWebhookConfiguration", "raygate"),
        ("ValidatingWebhookConfiguration", "raygate"),
        ("CustomResourceDefinition", "rayjobs.ray.io"),
        ("CustomResourceDefinition", "rayclusters.ray.io"),
    ] {
        assert_eq!(
            find(&objects, kind, name)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "ops/raygate-webhook",
            "{kind} {name}"
        );
    }
    // raygate serves the mounted Secret and needs no Secret or CA-bundle permissions.
    let deployment = find(&objects, "Deployment", "raygate");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"--cert-mode=files"), "{args:?}");
    assert!(
        args.contains(&"--tls-cert-file=/etc/raygate/tls/tls.crt"),
        "{args:?}"
    );
    assert_eq!(
        deployment["spec"]["template"]["spec"]["volumes"][1]["secret"]["secretName"],
        TLS_SECRET
    );
    let role = find(&objects, "Role", "raygate");
    assert_eq!(role["rules"].as_array().unwrap().len(), 1);
    assert_eq!(role["rules"][0]["resources"], json!(["leases"]));

    let named = render(&InstallOptions {
        certificates: Certificates::CertManager {
            issuer: Some(("ClusterIssuer".to_owned(), "corp-ca".to_owned())),
        },
        ..custom()
    });
    assert!(!kinds_and_names(&named).contains(&"Issuer/raygate-webhook".to_owned()));
    assert_eq!(
        find(&named, "Certificate", "raygate-webhook")["spec"]["issuerRef"],
        json!({"kind": "ClusterIssuer", "name": "corp-ca", "group": "cert-manager.io"})
    );
}

#[test]
fn files_mode_writes_the_given_ca_into_every_webhook_and_conversion() {
    let objects = render(&InstallOptions {
        certificates: Certificates::Files {
            secret: "my-tls".to_owned(),
            ca_bundle: Some("-----BEGIN CERTIFICATE-----\nAA==\n".to_owned()),
        },
        ..custom()
    });
    let bundle = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkFBPT0K";
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        for webhook in find(&objects, kind, "raygate")["webhooks"]
            .as_array()
            .unwrap()
        {
            assert_eq!(webhook["clientConfig"]["caBundle"], bundle, "{kind}");
        }
    }
    let crd = find(&objects, "CustomResourceDefinition", "rayclusters.ray.io");
    assert_eq!(
        crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"],
        bundle
    );
    let deployment = find(&objects, "Deployment", "raygate");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["volumes"][1]["secret"]["secretName"],
        "my-tls"
    );
}

#[test]
fn settings_reach_the_selectors_the_policies_and_the_container() {
    let objects = render(&InstallOptions {
        replicas: 1,
        opt_in_label: "team.example.com/gang=on".parse().expect("a label"),
        failure_policy: FailurePolicy::Ignore,
        default_reconciler: "kuberay".to_owned(),
        namespace_selector: "team=ml,!legacy".to_owned(),
        feature_gates: "RayJobDeletionPolicy=true".to_owned(),
        log_format: "json".to_owned(),
        ..custom()
    });
    assert!(
        !kinds_and_names(&objects).contains(&"PodDisruptionBudget/raygate".to_owned()),
        "one replica cannot keep one available through a drain"
    );
    let mutating = find(&objects, "MutatingWebhookConfiguration", "raygate");
    for webhook in mutating["webhooks"].as_array().unwrap() {
        assert_eq!(webhook["failurePolicy"], "Ignore");
        assert_eq!(
            webhook["namespaceSelector"]["matchExpressions"][0],
            json!({"key": "team.example.com/gang", "operator": "In", "values": ["on"]})
        );
    }
    let validating = find(&objects, "ValidatingWebhookConfiguration", "raygate");
    assert_eq!(
        validating["webhooks"][2]["name"],
        "queuepolicies.validate.raygate.io"
    );
    assert_eq!(
        validating["webhooks"][2]["failurePolicy"], "Fail",
        "policies are always checked"
    );
    let container =
        &find(&objects, "Deployment", "raygate")["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for expected in [
        "--reconciler=kuberay",
        "--namespace-selector=team=ml,!legacy",
        "--namespace-label=team.example.com/gang=on",
        "--feature-gates=RayJobDeletionPolicy=true",
        "--log-format=json",
    ] {
        assert!(args.contains(&expected), "{expected} not in {args:?}");
    }
}
