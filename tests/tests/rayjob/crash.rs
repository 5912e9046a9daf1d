//! Crash safety at the scale of issue 5: 20 RayJobs (K8sJobMode and HTTPMode, some failing and
//! retried) while the reconciler is SIGKILLed at random moments, again and again. Every RayJob
//! still ends, each attempt had exactly one RayCluster (and one submitter Job), Ray saw exactly
//! one submission per submission id and no other, and nothing is left without a live owner.
//!
//! The kill moments come from a seeded generator; the seed is printed, and
//! `RAYGATE_CRASH_SEED=<seed>` replays the same schedule.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DeleteParams, ListParams};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use raygate_api::keys;
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::PodGroup;
use raygate_e2e::ray::Dashboard;
use raygate_e2e::reconciler::{PRIVATE_RECONCILER_LABEL, Reconciler};
use raygate_e2e::seeded::SplitMix64;
use raygate_e2e::{Env, TestNamespace};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::create;

/// How many RayJobs run at once.
const JOBS: usize = 20;
/// At least this many kills, and kills go on until every RayJob has ended (up to `MAX_KILLS`).
const MIN_KILLS: u32 = 12;
/// Upper bound on kills, so that the RayJobs finish under the last reconciler in time.
const MAX_KILLS: u32 = 25;
/// How long each reconciler lives before its SIGKILL: 1 s + up to this many milliseconds.
const LIFETIME_SPREAD_MS: u64 = 5000;
/// Bound for all RayJobs to end once the last reconciler keeps running.
const SETTLE: Duration = Duration::from_secs(180);

fn seed() -> u64 {
    match std::env::var("RAYGATE_CRASH_SEED") {
        Ok(seed) => seed
            .parse()
            .unwrap_or_else(|e| panic!("RAYGATE_CRASH_SEED={seed:?}: not a u64: {e}")),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default(),
    }
}

/// What one RayJob of the test does.
struct Plan {
    name: String,
    http_mode: bool,
    fails: bool,
}

impl Plan {
    /// Most RayJobs use HTTPMode: every K8sJobMode attempt starts four Python processes of
    /// the Ray CLI in its submitter, too much for 20 at once on a shared 2-core machine.
    fn of(index: usize) -> Plan {
        Plan {
            name: format!("crash-{index:02}"),
            http_mode: index % 4 != 3,
            fails: index.is_multiple_of(5),
        }
    }

    /// Marker in the entrypoint that finds this RayJob's submissions in Ray's job list.
    fn marker(&self, ns: &str) -> String {
        format!("{ns} {}", self.name)
    }

    /// A head-only RayJob with small requests (20 of them fit the kwok nodes beside the other
    /// tests), cleaned up 2 s after it ends; a failing one retries once.
    fn ray_job(&self, ns: &str) -> RayJob {
        let marker = self.marker(ns);
        // HTTPMode hands Ray the string, which runs it in a shell: no Python driver to start.
        // The submitter's command line passes tokens, as the lifecycle tests use it.
        let entrypoint = match (self.http_mode, self.fails) {
            (true, true) => format!("echo \"{marker}\"; exit 3"),
            (true, false) => format!("echo \"{marker}\""),
            (false, true) => format!("python -c 'import sys; print(\"{marker}\"); sys.exit(3)'"),
            (false, false) => format!("python -c 'print(\"{marker}\")'"),
        };
        let mut spec = json!({
            "entrypoint": entrypoint,
            "shutdownAfterJobFinishes": true,
            "ttlSecondsAfterFinished": 2,
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{
                    "name": "ray-head", "image": "rayproject/ray:2.60.0",
                    "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                }]}}},
            },
        });
        if self.http_mode {
            spec["submissionMode"] = json!("HTTPMode");
        }
        if self.fails {
            spec["backoffLimit"] = json!(1);
        }
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": self.name},
            "spec": spec,
        }))
        .expect("a valid RayJob")
    }

    /// Attempts it makes: a failing one runs twice (`backoffLimit: 1`).
    fn attempts(&self) -> usize {
        if self.fails { 2 } else { 1 }
    }
}

/// Everything the test's watches saw, per RayJob name.
#[derive(Default)]
struct History {
    /// RayCluster name → the uids that ever carried it.
    clusters: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// Uids of the submitter Jobs.
    submitters: BTreeMap<String, BTreeSet<String>>,
    /// `(status.rayClusterName, status.jobId)` pairs the RayJob's status ever held.
    attempts: BTreeMap<String, BTreeSet<(String, String)>>,
    /// RayCluster name → uids of the head pods ever created for it.
    heads: BTreeMap<String, BTreeSet<String>>,
}

type Shared = Arc<Mutex<History>>;

/// Watches `api` from before the first RayJob exists, calling `record` on every version seen;
/// returns once the initial list is done.
async fn watch<K>(
    api: Api<K>,
    labels: Option<String>,
    history: Shared,
    record: fn(&mut History, &K),
) where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let config = match labels {
        Some(selector) => watcher::Config::default().labels(&selector),
        None => watcher::Config::default(),
    };
    let (synced, ready) = oneshot::channel();
    tokio::spawn(async move {
        let mut synced = Some(synced);
        let mut events = watcher(api, config).boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                    record(&mut history.lock().expect("history lock"), &object);
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(synced) = synced.take() {
                        let _ = synced.send(());
                    }
                }
                Ok(_) | Err(_) => {}
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(30), ready)
        .await
        .expect("the test's watch synced within 30 s")
        .expect("the watch task is alive");
}

fn owner_name<K: Resource>(object: &K) -> String {
    object
        .meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(keys::ORIGINATED_FROM_CR_NAME_LABEL))
        .cloned()
        .unwrap_or_default()
}

fn record_cluster(history: &mut History, cluster: &RayCluster) {
    history
        .clusters
        .entry(owner_name(cluster))
        .or_default()
        .entry(cluster.name_any())
        .or_default()
        .insert(cluster.uid().unwrap_or_default());
}

fn record_submitter(history: &mut History, job: &Job) {
    history
        .submitters
        .entry(owner_name(job))
        .or_default()
        .insert(job.uid().unwrap_or_default());
}

fn record_attempt(history: &mut History, job: &RayJob) {
    let status = job.status.clone().unwrap_or_default();
    let cluster = status.ray_cluster_name.unwrap_or_default();
    let id = status.job_id.unwrap_or_default();
    if !cluster.is_empty() || !id.is_empty() {
        history
            .attempts
            .entry(job.name_any())
            .or_default()
            .insert((cluster, id));
    }
}

fn record_head(history: &mut History, pod: &Pod) {
    let cluster = pod
        .labels()
        .get(keys::RAY_CLUSTER_LABEL)
        .cloned()
        .unwrap_or_default();
    history
        .heads
        .entry(cluster)
        .or_default()
        .insert(pod.uid().unwrap_or_default());
}

fn is_terminal(job: &RayJob) -> bool {
    matches!(
        job.status
            .as_ref()
            .and_then(|s| s.job_deployment_status.as_deref()),
        Some("Complete" | "Failed")
    )
}

async fn all_terminal(jobs: &Api<RayJob>) -> bool {
    jobs.list(&ListParams::default())
        .await
        .is_ok_and(|list| list.items.len() == JOBS && list.items.iter().all(is_terminal))
}

/// Names and owner uids of every object of kind `K` in the namespace.
async fn owned<K>(ns: &TestNamespace) -> Vec<(String, Vec<String>)>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    ns.api::<K>()
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list {}: {e}", K::kind(&())))
        .items
        .iter()
        .map(|o| {
            let owners = o.owner_references().iter().map(|r| r.uid.clone()).collect();
            (format!("{} {}", K::kind(&()), o.name_any()), owners)
        })
        .collect()
}

async fn uids<K>(ns: &TestNamespace) -> BTreeSet<String>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    ns.api::<K>()
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list {}: {e}", K::kind(&())))
        .items
        .iter()
        .filter_map(|o| o.uid())
        .collect()
}

/// Every RayCluster, Job, PodGroup, Service and Pod of the namespace, with its owner uids.
async fn children(ns: &TestNamespace) -> Vec<(String, Vec<String>)> {
    let mut all = owned::<RayCluster>(ns).await;
    all.extend(owned::<Job>(ns).await);
    all.extend(owned::<PodGroup>(ns).await);
    all.extend(owned::<Service>(ns).await);
    all.extend(owned::<Pod>(ns).await);
    all
}

#[tokio::test]
async fn twenty_rayjobs_survive_a_reconciler_killed_at_random_moments() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(
        &env,
        "rayjob-crash",
        &[
            (keys::NAMESPACE_OPT_IN_LABEL, keys::NAMESPACE_OPT_IN_VALUE),
            (PRIVATE_RECONCILER_LABEL, "true"),
        ],
    )
    .await;
    let seed = seed();
    println!("crash schedule seed {seed} (replay: RAYGATE_CRASH_SEED={seed})");
    let mut schedule = SplitMix64::new(seed);
    let history = Shared::default();
    let ours = format!("{}=RayJob", keys::ORIGINATED_FROM_CRD_LABEL);
    watch(
        ns.api::<RayCluster>(),
        Some(ours.clone()),
        history.clone(),
        record_cluster,
    )
    .await;
    watch(
        ns.api::<Job>(),
        Some(ours),
        history.clone(),
        record_submitter,
    )
    .await;
    watch(ns.api::<RayJob>(), None, history.clone(), record_attempt).await;
    let heads = format!("{}=head", keys::RAY_NODE_TYPE_LABEL);
    watch(ns.api::<Pod>(), Some(heads), history.clone(), record_head).await;

    let plans: Vec<Plan> = (0..JOBS).map(Plan::of).collect();
    for plan in &plans {
        create(&ns, &plan.ray_job(ns.name())).await;
    }
    let jobs = ns.api::<RayJob>();
    let started = std::time::Instant::now();
    let mut kills = 0;
    while kills < MAX_KILLS {
        let mut reconciler = Reconciler::start(&env, &ns, None).await;
        let lifetime = 1000 + schedule.next_u64() % LIFETIME_SPREAD_MS;
        tokio::time::sleep(Duration::from_millis(lifetime)).await;
        reconciler.kill().await;
        kills += 1;
        println!(
            "kill {kills} after {lifetime} ms (t = {:.1} s)",
            started.elapsed().as_secs_f64()
        );
        if kills >= MIN_KILLS && all_terminal(&jobs).await {
            break;
        }
    }
    let reconciler = Reconciler::start(&env, &ns, None).await;
    ns.wait_for("every RayJob to end", SETTLE, || async {
        Ok(all_terminal(&jobs).await.then_some(()))
    })
    .await;
    println!(
        "{JOBS} RayJobs ended after {kills} kills, {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let dashboard = Dashboard::new(env.ray_dashboard());
    let submissions: Value = dashboard
        .get("/api/jobs/")
        .await
        .and_then(|r| r.json())
        .expect("Ray's job list");
    let submissions = submissions.as_array().cloned().unwrap_or_default();
    let history = std::mem::take(&mut *history.lock().expect("history lock"));
    let context = || format!("reconciler log: {}", reconciler.log.display());
    for plan in &plans {
        let name = &plan.name;
        let status = jobs
            .get(name)
            .await
            .expect("get RayJob")
            .status
            .unwrap_or_default();
        let expected_attempts = plan.attempts();
        if plan.fails {
            assert_eq!(
                status.job_deployment_status.as_deref(),
                Some("Failed"),
                "{name}: {status:?}"
            );
            assert_eq!(status.failed, Some(2), "{name}: {status:?}");
            assert_eq!(
                status.reason.as_deref(),
                Some("AppFailed"),
                "{name}: {status:?}"
            );
        } else {
            assert_eq!(
                status.job_deployment_status.as_deref(),
                Some("Complete"),
                "{name}: {status:?}"
            );
            assert_eq!(
                status.job_status.as_deref(),
                Some("SUCCEEDED"),
                "{name}: {status:?}"
            );
            assert_eq!(status.succeeded, Some(1), "{name}: {status:?}");
        }
        // Each attempt: one (cluster, submission id) identity, written once, never half-changed.
        let attempts = history.attempts.get(name).cloned().unwrap_or_default();
        let cluster_names: BTreeSet<&String> = attempts.iter().map(|(c, _)| c).collect();
        let job_ids: BTreeSet<&String> = attempts.iter().map(|(_, id)| id).collect();
        assert_eq!(
            attempts.len(),
            expected_attempts,
            "{name}: identities {attempts:?}; {}",
            context()
        );
        assert_eq!(
            cluster_names.len(),
            expected_attempts,
            "{name}: {attempts:?}"
        );
        assert_eq!(job_ids.len(), expected_attempts, "{name}: {attempts:?}");
        // Each attempt had exactly one RayCluster: the one its status names, created once.
        let created = history.clusters.get(name).cloned().unwrap_or_default();
        assert_eq!(
            created.keys().collect::<BTreeSet<_>>(),
            cluster_names,
            "{name}: RayClusters created vs. named in status; {}",
            context()
        );
        for (cluster, uids) in &created {
            assert_eq!(
                uids.len(),
                1,
                "{name}: RayCluster {cluster} created {} times",
                uids.len()
            );
            let heads = history.heads.get(cluster).map_or(0, BTreeSet::len);
            assert_eq!(
                heads,
                1,
                "{name}: RayCluster {cluster} had {heads} head pods; {}",
                context()
            );
        }
        if !plan.http_mode {
            let submitters = history.submitters.get(name).map_or(0, BTreeSet::len);
            assert_eq!(
                submitters,
                expected_attempts,
                "{name}: one submitter Job per attempt; {}",
                context()
            );
        }
        // Ray saw exactly one submission per submission id, and none but the attempts'.
        let marker = plan.marker(ns.name());
        let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for submission in &submissions {
            let entrypoint = submission["entrypoint"].as_str().unwrap_or_default();
            if entrypoint.contains(&format!("{marker}\"")) {
                seen.entry(
                    submission["submission_id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
                .or_default()
                .push(
                    submission["status"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
            }
        }
        for (id, runs) in &seen {
            assert_eq!(
                runs.len(),
                1,
                "{name}: Ray ran submission {id} {} times",
                runs.len()
            );
        }
        assert_eq!(
            seen.keys().collect::<BTreeSet<_>>(),
            job_ids,
            "{name}: Ray's submissions vs. the attempts' ids; {}",
            context()
        );
        let want = if plan.fails { "FAILED" } else { "SUCCEEDED" };
        assert!(
            seen.values().flatten().all(|s| s == want),
            "{name}: Ray says {seen:?}"
        );
    }

    // After the TTL every cluster is gone, and whatever remains has a live owner.
    let clusters = ns.api::<RayCluster>();
    ns.wait_for(
        "every RayCluster to be deleted after its TTL",
        Duration::from_secs(60),
        || async {
            Ok(clusters
                .list(&ListParams::default())
                .await?
                .items
                .is_empty()
                .then_some(()))
        },
    )
    .await;
    let mut live = uids::<RayJob>(&ns).await;
    live.extend(uids::<RayCluster>(&ns).await);
    live.extend(uids::<Job>(&ns).await);
    live.extend(uids::<Pod>(&ns).await);
    let orphans: Vec<_> = children(&ns)
        .await
        .into_iter()
        .filter(|(_, owners)| !owners.iter().any(|uid| live.contains(uid)))
        .collect();
    assert!(
        orphans.is_empty(),
        "objects without a live owner: {orphans:?}\n{}",
        ns.dump().await
    );

    // Deleting the RayJobs takes everything with them (finalizer released, children collected).
    jobs.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete the RayJobs");
    ns.wait_for(
        "the RayJobs and all their children to be gone",
        Duration::from_secs(90),
        || async {
            let left: Vec<String> = jobs
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .map(|j| format!("RayJob {}", j.name_any()))
                .chain(children(&ns).await.into_iter().map(|(name, _)| name))
                .collect();
            Ok(left.is_empty().then_some(()))
        },
    )
    .await;
}
