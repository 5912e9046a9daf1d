//! The installation's life after it was installed (run after `in_cluster`, as it ends the
//! installation): raygate's ServiceAccount is granted exactly the rendering's RBAC and raygate
//! met no 403 doing its work; an upgrade (the image's second tag and a changed setting roll both
//! replicas) and a rollback under continuous admission load fail no admission, and a RayJob
//! whose Ray job runs through both (the reconciler's Lease moves twice) ends on its first
//! cluster and submission, with one Ray job in it; uninstalling leaves no webhook
//! configuration that would refuse Pods and no Secret or Lease of raygate's. Each step is done
//! as README.md's install commands do it: `helm upgrade`/`rollback`/`uninstall` (which keeps the
//! CRDs, and so every RayJob) for `RAYGATE_ENV_INSTALL=helm`; `kubectl apply --server-side` of a
//! new and then the old `raygate manifests` rendering, and `kubectl delete -f` (which deletes
//! the CRDs with the rest) for `RAYGATE_ENV_INSTALL=manifests`.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, ListParams, PostParams};
use raygate_api::manifests::{InstallOptions, render};
use raygate_e2e::ray::Dashboard;
use raygate_e2e::rbac::{self, Grant, Listed};
use raygate_e2e::{Env, TestNamespace};
use raygate_in_cluster_e2e::{
    AdmissionLoad, in_cluster_env, is_ready, namespace, ray_api, raygate_pods, rayjob_ended,
};
use serde_json::json;

const OPT_IN: [(&str, &str); 1] = [("raygate.io/scheduler", "volcano")];

/// `helm ARGS...` against the environment's cluster; panics with its output on failure.
async fn helm(env: &Env, args: &[&str]) -> String {
    let home = std::env::temp_dir().join("raygate-e2e-in-cluster-helm");
    let output = tokio::process::Command::new(env.var("RAYGATE_HELM"))
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .await
        .expect("running helm");
    assert!(
        output.status.success(),
        "helm {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// How the environment installed raygate, and so how this test changes and removes it.
enum Installation {
    /// `helm install` of the chart as this release.
    Helm { release: String },
    /// `kubectl apply --server-side -f` of `raygate manifests` with these flags.
    Manifests { flags: Vec<String> },
}

impl Installation {
    fn of(env: &Env) -> Installation {
        match env.var("RAYGATE_ENV_INSTALL") {
            "helm" => Installation::Helm {
                release: env.var("RAYGATE_IN_CLUSTER_RELEASE").to_owned(),
            },
            _ => Installation::Manifests {
                flags: env
                    .var("RAYGATE_IN_CLUSTER_MANIFESTS_FLAGS")
                    .split(',')
                    .filter(|flag| !flag.is_empty())
                    .map(str::to_owned)
                    .collect(),
            },
        }
    }

    /// Writes `raygate manifests` with the installation's flags and `extra` (a changed setting,
    /// or none for the installed rendering) to a file, as a user writes install.yaml.
    fn render(flags: &[String], extra: &[&str]) -> String {
        let file = std::env::temp_dir().join("raygate-e2e-in-cluster-install.yaml");
        let rendering = std::process::Command::new(raygate_e2e::raygate::binary())
            .arg("manifests")
            .args(flags)
            .args(extra)
            .output()
            .expect("running raygate manifests");
        assert!(
            rendering.status.success(),
            "raygate manifests: {}",
            String::from_utf8_lossy(&rendering.stderr)
        );
        std::fs::write(&file, &rendering.stdout).expect("writing install.yaml");
        file.to_string_lossy().into_owned()
    }

    /// `kubectl ARGS...`; panics with its output on failure.
    async fn kubectl(args: &[&str]) {
        let out = raygate_e2e::kubectl::run(args).await;
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Applies a new install.yaml: `kubectl apply --server-side -f`.
    async fn apply_rendering(flags: &[String], extra: &[&str]) {
        let file = Installation::render(flags, extra);
        Installation::kubectl(&["apply", "--server-side", "-f", &file]).await;
    }

    /// Upgrades to the image's second tag (`RAYGATE_IMAGE_UPGRADE`) and changes one setting
    /// (the log format): both replicas are replaced.
    async fn upgrade(&self, env: &Env, raygate_ns: &str) {
        let image = env.var("RAYGATE_IMAGE_UPGRADE");
        match self {
            Installation::Helm { release } => {
                let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/../../manifests/chart");
                let tag = format!(
                    "image.tag={}",
                    image.rsplit_once(':').expect("a tagged image").1
                );
                helm(
                    env,
                    &[
                        "upgrade",
                        release,
                        chart,
                        "-n",
                        raygate_ns,
                        "--reuse-values",
                        "--set",
                        &tag,
                        "--set",
                        "logFormat=json",
                        "--wait",
                        "--timeout",
                        "5m",
                    ],
                )
                .await;
            }
            Installation::Manifests { flags } => {
                let mut flags = flags.clone();
                let at = flags
                    .iter()
                    .position(|flag| flag == "--image")
                    .expect("the install's --image");
                flags[at + 1] = image.to_owned();
                Installation::apply_rendering(&flags, &["--log-format", "json"]).await;
            }
        }
    }

    /// Goes back to the installed settings.
    async fn roll_back(&self, env: &Env, raygate_ns: &str) {
        match self {
            Installation::Helm { release } => {
                helm(
                    env,
                    &[
                        "rollback",
                        release,
                        "1",
                        "-n",
                        raygate_ns,
                        "--wait",
                        "--timeout",
                        "5m",
                    ],
                )
                .await;
                let history =
                    helm(env, &["history", release, "-n", raygate_ns, "-o", "json"]).await;
                let history: serde_json::Value =
                    serde_json::from_str(&history).expect("history JSON");
                assert_eq!(
                    history.as_array().map(Vec::len),
                    Some(3),
                    "install, upgrade, rollback: {history}"
                );
            }
            Installation::Manifests { flags } => {
                Installation::apply_rendering(flags, &[]).await;
            }
        }
    }

    /// Uninstalls raygate as README.md says.
    async fn uninstall(&self, env: &Env, raygate_ns: &str) {
        match self {
            Installation::Helm { release } => {
                helm(
                    env,
                    &[
                        "uninstall",
                        release,
                        "-n",
                        raygate_ns,
                        "--wait",
                        "--timeout",
                        "3m",
                    ],
                )
                .await;
            }
            Installation::Manifests { flags } => {
                let file = Installation::render(flags, &[]);
                Installation::kubectl(&["delete", "-f", &file, "--wait", "--timeout=3m"]).await;
            }
        }
    }

    /// Whether uninstalling keeps the CRDs: Helm's convention for the chart; `kubectl delete -f`
    /// deletes every object of the file, the CRDs among them.
    fn keeps_crds(&self) -> bool {
        matches!(self, Installation::Helm { .. })
    }
}

/// Waits until the Deployment has rolled out: `replicas` Pods, all Ready, on the given template
/// generation.
async fn wait_rolled_out(env: &Env, ns: &TestNamespace) {
    ns.wait_for(
        "raygate's Deployment to roll out",
        Duration::from_secs(300),
        || async {
            let out = raygate_e2e::kubectl::run(&[
                "-n",
                &namespace(env),
                "rollout",
                "status",
                "deployment/raygate",
                "--timeout=5s",
            ])
            .await;
            let pods = raygate_pods(env).await;
            let settled = out.status.success()
                && pods.len() == 2
                && pods
                    .iter()
                    .all(|p| is_ready(p) && p.metadata.deletion_timestamp.is_none());
            Ok(settled.then_some(()))
        },
    )
    .await;
}

/// The RayJob that runs through the upgrade and the rollback.
const STEADY: &str = "steady";

/// A RayJob whose Ray job runs for 150 s (longer than an upgrade and a rollback take here) on
/// its own one-node Ray cluster, which is kept when it ends.
fn steady_rayjob() -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": STEADY},
        "spec": {
            "entrypoint": "python -c \"import time; time.sleep(150); print('steady')\"",
            "shutdownAfterJobFinishes": false,
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{
                    "name": "ray-head", "image": "rayproject/ray:2.60.0",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "2Gi"},
                        "limits": {"cpu": "1", "memory": "2Gi"},
                    },
                }]}}},
            },
        },
    }))
    .expect("a RayJob")
}

/// Grants raygate uses on paths this suite does not take, so that its audit cannot show them
/// used; each names the path.
const NOT_USED_HERE: [(&str, &str, &str); 20] = [
    // The `OwnerReferencesPermissionEnforcement` admission plugin (OpenShift turns it on; the
    // environment does not) lets only a user who may update an owner's `finalizers` set
    // `blockOwnerDeletion` on its dependents, which raygate's objects carry.
    ("ray.io", "rayjobs/finalizers", "update"),
    ("ray.io", "rayclusters/finalizers", "update"),
    // A RayJob's deletion strategy deleting the RayJob itself, or only its workers
    // (`reconciler/src/controllers/rayjob.rs`, `Action::DeleteRayJob`, `Action::SuspendWorkerGroups`).
    ("ray.io", "rayjobs", "delete"),
    ("ray.io", "rayclusters", "patch"),
    // A finished RayJob's cluster shut down (`shutdownAfterJobFinishes`, its TTL), or a
    // retry's old cluster and submitter Job removed (`Action::DeleteRayCluster`,
    // `Action::DeleteSubmitterJob`): this suite's RayJobs keep their clusters.
    ("ray.io", "rayclusters", "delete"),
    ("batch", "jobs", "delete"),
    // A retry repointing the RayJob's head Service at the new cluster (`Action::PatchService`).
    ("", "services", "patch"),
    // A failed or surplus Ray Pod replaced (`reconciler/src/controllers/raycluster.rs`, `DeletePod`).
    ("", "pods", "delete"),
    // A multi-host Pod made before raygate named replicas labelled into one
    // (`raygate_api::cluster::Action::LabelPod`): this suite's RayJobs have single-host groups.
    ("", "pods", "patch"),
    // An autoscaled cluster's autoscaler access, made with its head
    // (`raygate_api::cluster::autoscaler`): this suite's clusters do not autoscale. `get` on Pods
    // and `patch` on `pods/resize` are held only to grant them to its Role.
    ("", "pods", "get"),
    ("", "pods/resize", "patch"),
    ("", "serviceaccounts", "create"),
    ("rbac.authorization.k8s.io", "roles", "create"),
    ("rbac.authorization.k8s.io", "rolebindings", "create"),
    // A head Ingress (`raygate_api::cluster::ingress`): this suite's clusters ask for none.
    ("networking.k8s.io", "ingresses", "create"),
    // A QueuePolicy's status: this suite creates none (tests/tests/queue_policy.rs does, with
    // raygate as a host process).
    ("raygate.io", "queuepolicies/status", "patch"),
    // The certificate Secret and the Lease when missing: the installation creates both empty.
    ("", "secrets", "create"),
    ("coordination.k8s.io", "leases", "create"),
    // The webhook's Namespace lookup when its cache misses (`webhook/src/cache.rs`, `fallback`).
    ("", "namespaces", "get"),
    // An Event that repeats is patched (its series count) rather than created again; whether
    // one of raygate's repeats during the suite depends on timing (a RayJob polled while its
    // cluster starts, a reconcile retried).
    ("events.k8s.io", "events", "patch"),
];

fn grant_ref(grant: &(String, String, String)) -> (&str, &str, &str) {
    (&grant.0, &grant.1, &grant.2)
}

/// The `(group, resource, verb)` triples of the requests `account` made that the API server
/// answered (any status but 403), from the environment's audit log (`RAYGATE_AUDIT_LOG`: every
/// request of raygate's ServiceAccount, metadata only); `resource` is `resource/subresource`
/// for a subresource, as RBAC names it.
fn audited_requests(env: &Env, account: &str) -> BTreeSet<(String, String, String)> {
    let path = env.var("RAYGATE_AUDIT_LOG");
    let log = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let mut used = BTreeSet::new();
    for line in log.lines() {
        let event: serde_json::Value = serde_json::from_str(line).expect("an audit event");
        let object = &event["objectRef"];
        if event["user"]["username"] != account
            || event["responseStatus"]["code"] == 403
            || object.is_null()
        {
            continue;
        }
        let resource = match object["subresource"].as_str() {
            Some(sub) => format!("{}/{sub}", object["resource"].as_str().unwrap_or_default()),
            None => object["resource"].as_str().unwrap_or_default().to_owned(),
        };
        used.insert((
            object["apiGroup"].as_str().unwrap_or_default().to_owned(),
            resource,
            event["verb"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    used
}

#[tokio::test]
async fn upgrade_rollback_and_uninstall_under_load_fail_no_admission_and_leave_nothing_behind() {
    let env = in_cluster_env();
    let raygate_ns = namespace(&env);
    let installation = Installation::of(&env);
    let client = env.client().await;

    // Least privilege: what `kubectl auth can-i --list` shows raygate's ServiceAccount may do,
    // beyond what any ServiceAccount may, is exactly README.md's permissions table; and it met
    // no 403 in the work the in_cluster tests had it do.
    let account = format!("system:serviceaccount:{raygate_ns}:raygate");
    let can_i = |user: String| {
        let namespace = raygate_ns.clone();
        async move {
            let out = raygate_e2e::kubectl::stdout(&[
                "auth", "can-i", "--list", "--as", &user, "-n", &namespace,
            ])
            .await;
            rbac::can_i_list(&out)
        }
    };
    let anyone = can_i(format!("system:serviceaccount:{raygate_ns}:nobody")).await;
    let own: BTreeSet<Listed> = can_i(account.clone())
        .await
        .difference(&anyone)
        .cloned()
        .collect();
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let documented: BTreeSet<Listed> = rbac::documented(&readme)
        .iter()
        .map(Grant::listed)
        .collect();
    assert_eq!(
        own, documented,
        "raygate's ServiceAccount may do (left) what README.md's permissions table says (right)"
    );
    // An RBAC refusal names the account ("User \"system:serviceaccount:…\" cannot …"); a 403
    // for a namespace being deleted (a test's own clean-up) is no missing grant.
    let logs = raygate_e2e::raygate::installation_logs(&env).await;
    let refusal = format!("User \\\"{account}\\\" cannot");
    let unescaped = format!("User \"{account}\" cannot");
    for line in logs.lines() {
        assert!(
            !line.contains(&refusal) && !line.contains(&unescaped),
            "raygate was refused by RBAC: {line}"
        );
    }

    let ns = TestNamespace::on_real_nodes(&env, "incluster-upgrade", &OPT_IN).await;
    // A RayJob whose Ray job runs through the upgrade and the rollback, each of which moves the
    // reconciler's Lease to a new replica.
    let rayjobs = ray_api(&ns, "v1", "RayJob");
    rayjobs
        .create(&PostParams::default(), &steady_rayjob())
        .await
        .expect("creating the RayJob");
    let running = ns
        .wait_for("the Ray job to run", Duration::from_secs(300), || async {
            let status = rayjobs.get(STEADY).await?.data["status"].clone();
            Ok((status["jobStatus"] == "RUNNING").then_some(status))
        })
        .await;
    let load = AdmissionLoad::start(&ns);
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Another tag and a changed setting: both replicas are replaced, one at a time
    // (maxUnavailable 0).
    let before: Vec<String> = raygate_pods(&env)
        .await
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    installation.upgrade(&env, &raygate_ns).await;
    wait_rolled_out(&env, &ns).await;
    let upgraded = raygate_pods(&env).await;
    let after: Vec<String> = upgraded
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert!(
        after.iter().all(|p| !before.contains(p)),
        "upgraded Pods {after:?} replace {before:?}"
    );
    let upgrade_image = env.var("RAYGATE_IMAGE_UPGRADE");
    for pod in &upgraded {
        let image = pod.spec.as_ref().map(|s| s.containers[0].image.clone());
        assert_eq!(
            image.flatten().as_deref(),
            Some(upgrade_image),
            "the upgrade's image"
        );
    }
    installation.roll_back(&env, &raygate_ns).await;
    wait_rolled_out(&env, &ns).await;
    let (sent, failed, errors) = load.finish().await;
    assert!(sent > 20, "only {sent} admissions were sent");
    assert_eq!(
        failed, 0,
        "{failed} of {sent} admissions failed during upgrade and rollback: {errors:?}"
    );
    let status = rayjobs.get(STEADY).await.expect("the RayJob").data["status"].clone();
    assert_eq!(
        status["jobStatus"], "RUNNING",
        "the Ray job ended before the rollback did, so it proves nothing of both: {status}"
    );
    let done = rayjob_ended(&ns, STEADY, Duration::from_secs(300)).await;
    // No progress lost: the same cluster and submission, no failed attempt, one cluster and one
    // Ray job in it.
    assert_eq!(done["jobDeploymentStatus"], "Complete", "{done}");
    assert_eq!(done["jobStatus"], "SUCCEEDED", "{done}");
    for key in ["rayClusterName", "jobId", "startTime"] {
        assert_eq!(
            done[key], running[key],
            "{key} changed: {running} -> {done}"
        );
    }
    assert!(
        done["failed"].as_i64().unwrap_or(0) == 0,
        "a failed attempt: {done}"
    );
    let clusters = ray_api(&ns, "v1", "RayCluster")
        .list(&ListParams::default())
        .await
        .expect("listing RayClusters");
    assert_eq!(clusters.items.len(), 1, "one RayCluster");
    let dashboard = Dashboard::new(&format!(
        "http://{}",
        done["dashboardURL"].as_str().expect("a dashboard URL")
    ));
    let jobs = dashboard
        .get("/api/jobs/")
        .await
        .expect("the Ray job list")
        .json()
        .expect("JSON");
    assert_eq!(
        jobs.as_array().map(Vec::len),
        Some(1),
        "one submission in the Ray cluster: {jobs}"
    );

    // Deleting it runs the reconciler's clean-up (finalizer, Ray job, cluster, submitter).
    rayjobs
        .delete(STEADY, &DeleteParams::default())
        .await
        .expect("deleting the RayJob");
    ns.wait_for(
        "the RayJob to be gone",
        Duration::from_secs(120),
        || async { Ok(rayjobs.get_opt(STEADY).await?.is_none().then_some(())) },
    )
    .await;

    // Least privilege, the other way round: every grant was used by raygate in this suite, as
    // the API server's audit log of raygate's ServiceAccount shows.
    let used = audited_requests(&env, &account);
    let unused: BTreeSet<_> = rbac::rendered(&render(&InstallOptions {
        namespace: raygate_ns.clone(),
        ..InstallOptions::default()
    }))
    .into_iter()
    .map(|grant| (grant.group, grant.resource, grant.verb))
    .filter(|grant| !used.contains(grant) && !NOT_USED_HERE.contains(&grant_ref(grant)))
    .collect();
    assert!(
        unused.is_empty(),
        "granted but never used by raygate (group, resource, verb): {unused:?}\nused: {used:?}"
    );

    installation.uninstall(&env, &raygate_ns).await;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    assert!(
        mutating.get_opt("raygate").await.expect("get").is_none(),
        "MutatingWebhookConfiguration left"
    );
    assert!(
        validating.get_opt("raygate").await.expect("get").is_none(),
        "ValidatingWebhookConfiguration left"
    );
    // Pods are admitted again without raygate (nothing refuses them).
    let pods: Api<Pod> = ns.api();
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "after", "labels": {"ray.io/node-type": "head"}},
        "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0"}]},
    }))
    .expect("a Pod");
    pods.create(
        &PostParams {
            dry_run: true,
            ..PostParams::default()
        },
        &pod,
    )
    .await
    .expect("a Ray Pod is admitted after uninstall");
    // raygate's own Secret and Lease go with it: nothing of its state is left to confuse a
    // reinstall.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &raygate_ns);
    ns.wait_for(
        "raygate's Secret and Lease to be gone",
        Duration::from_secs(60),
        || async {
            let secret = secrets.get_opt("raygate-webhook-cert").await?;
            let leases: Api<Lease> = Api::namespaced(client.clone(), &raygate_ns);
            let lease = leases.get_opt("raygate-reconciler").await?;
            Ok((secret.is_none() && lease.is_none()).then_some(()))
        },
    )
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    for name in [
        "rayjobs.ray.io",
        "rayclusters.ray.io",
        "queuepolicies.raygate.io",
    ] {
        let crd = crds.get_opt(name).await.expect("get");
        let kept = crd.is_some_and(|crd| crd.metadata.deletion_timestamp.is_none());
        assert_eq!(
            kept,
            installation.keeps_crds(),
            "CRD {name} kept: {kept}, expected {}",
            installation.keeps_crds()
        );
    }
}
