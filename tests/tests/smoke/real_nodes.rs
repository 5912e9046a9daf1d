//! The real kubelet nodes: containerd runs the Pods' containers, Pods on different nodes reach
//! each other through a Service by its cluster DNS name, `kubectl logs` and `kubectl exec` go
//! through the kubelet, and Pods reach the API server through the `kubernetes` Service.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Service, Taint};
use kube::Api;
use kube::api::{ListParams, PostParams};
use raygate_e2e::ray::Dashboard;
use raygate_e2e::{Env, TestNamespace, kubectl};
use serde_json::json;

/// Starting a container from a local image takes a few seconds; Python a few more.
const START: Duration = Duration::from_secs(120);

/// A Pod of the Ray image pinned to `node`, running `script` with Python.
fn python_pod(name: &str, node: &str, script: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{
                "name": "main", "image": "rayproject/ray:2.60.0",
                "command": ["python", "-c", script],
                "ports": [{"containerPort": 8000}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}
            }]
        }
    }))
    .expect("a valid Pod")
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

#[tokio::test]
async fn real_nodes_are_ready_untainted_and_run_containerd_kwok_nodes_tainted() {
    let env = Env::load();
    let nodes: Api<Node> = Api::all(env.client().await);
    let real = nodes
        .list(&ListParams::default().labels("type=real"))
        .await
        .expect("listing nodes");
    let names: Vec<_> = real
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert!(names.len() >= 2, "at least two real nodes: {names:?}");
    assert_eq!(names.len(), env.real_nodes().len(), "{names:?}");
    for node in &real {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let status = node.status.clone().unwrap_or_default();
        let ready = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        assert!(ready, "node {name} is not Ready");
        let info = status.node_info.expect("node info");
        assert!(
            info.container_runtime_version.starts_with("containerd://"),
            "{name}: runtime {}",
            info.container_runtime_version
        );
        let internal: Vec<_> = status
            .addresses
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a.type_ == "InternalIP")
            .map(|a| a.address)
            .collect();
        assert!(
            internal.len() == 1 && internal[0].starts_with("198.19.0."),
            "{name}: InternalIP {internal:?} is not a private node address"
        );
        // Untainted: any namespace's Pods run here unless they ask for kwok.
        let taints = taints(node);
        assert!(
            taints.iter().all(|t| t.effect != "NoSchedule"),
            "{name}: taints {taints:?}"
        );
    }
    let kwok = nodes
        .list(&ListParams::default().labels("type=kwok"))
        .await
        .expect("listing nodes");
    assert!(!kwok.items.is_empty(), "the environment has kwok nodes");
    for node in &kwok {
        let taints = taints(node);
        assert!(
            taints
                .iter()
                .any(|t| t.key == env.var("RAYGATE_KWOK_NODE_TAINT") && t.effect == "NoSchedule"),
            "{}: taints {taints:?}",
            node.metadata.name.as_deref().unwrap_or_default()
        );
    }
}

#[tokio::test]
async fn pods_on_two_real_nodes_talk_through_a_service_name_and_kubectl_reaches_them() {
    let env = Env::load();
    let nodes = env.real_nodes();
    let ns = TestNamespace::on_real_nodes(&env, "smoke-real", &[]).await;
    let pods = ns.api::<Pod>();
    let server = python_pod(
        "server",
        &nodes[0],
        "import http.server, os, socket\n\
         os.makedirs('/tmp/www', exist_ok=True)\n\
         open('/tmp/www/who', 'w').write('served by ' + socket.gethostname())\n\
         os.chdir('/tmp/www')\n\
         http.server.ThreadingHTTPServer(('', 8000), http.server.SimpleHTTPRequestHandler).serve_forever()",
        json!({"app": "server"}),
    );
    pods.create(&PostParams::default(), &server)
        .await
        .expect("creating the server Pod");
    let service: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "server"}, "ports": [{"port": 80, "targetPort": 8000}]}
    }))
    .expect("a valid Service");
    ns.api::<Service>()
        .create(&PostParams::default(), &service)
        .await
        .expect("creating the Service");

    // From the other node, by the Service's DNS name; and the API server through the
    // `kubernetes` Service with the ServiceAccount's CA and token.
    let fqdn = format!("web.{}.svc.cluster.local", ns.name());
    let client = python_pod(
        "client",
        &nodes[1],
        &format!(
            "import json, ssl, time, urllib.request\n\
             for attempt in range(60):\n\
             \x20   try:\n\
             \x20       print(urllib.request.urlopen('http://{fqdn}/who', timeout=2).read().decode()); break\n\
             \x20   except OSError as e:\n\
             \x20       time.sleep(1)\n\
             else:\n\
             \x20   raise SystemExit('web never answered')\n\
             sa = '/var/run/secrets/kubernetes.io/serviceaccount/'\n\
             tls = ssl.create_default_context(cafile=sa + 'ca.crt')\n\
             request = urllib.request.Request('https://kubernetes.default.svc/version',\n\
             \x20   headers={{'Authorization': 'Bearer ' + open(sa + 'token').read()}})\n\
             print('apiserver', json.load(urllib.request.urlopen(request, context=tls, timeout=5))['gitVersion'])"
        ),
        json!({}),
    );
    pods.create(&PostParams::default(), &client)
        .await
        .expect("creating the client Pod");

    let done = ns
        .wait_for("the client Pod to finish", START, || async {
            let pod = pods.get("client").await?;
            Ok(matches!(phase(&pod), "Succeeded" | "Failed").then_some(pod))
        })
        .await;
    let logs = kubectl::stdout(&["-n", ns.name(), "logs", "client"]).await;
    assert_eq!(phase(&done), "Succeeded", "client failed:\n{logs}");
    assert!(logs.contains("served by server"), "{logs}");
    assert!(
        logs.contains(&format!("apiserver {}", env.var("RAYGATE_K8S_VERSION"))),
        "{logs}"
    );
    let placed: Vec<_> = [&done, &pods.get("server").await.expect("the server Pod")]
        .iter()
        .map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect();
    assert_eq!(
        placed,
        vec![Some(nodes[1].clone()), Some(nodes[0].clone())],
        "client and server on different real nodes"
    );

    // kubectl exec goes through the kubelet into the running container.
    let version = kubectl::stdout(&[
        "-n",
        ns.name(),
        "exec",
        "server",
        "--",
        "python",
        "-c",
        "import ray; print(ray.__version__)",
    ])
    .await;
    assert_eq!(version.trim(), env.var("RAYGATE_RAY_VERSION"));

    // The test process resolves and reaches the Service as a Pod does (CoreDNS, kube-proxy).
    let from_here = Dashboard::new(&format!("http://{fqdn}:80"))
        .get("/who")
        .await
        .expect("GET /who through the Service from the test process");
    assert_eq!(from_here.body, "served by server");
}
