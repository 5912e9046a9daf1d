//! Two reconcilers, one Lease: only the leader acts, and a SIGKILLed leader fails over; a
//! leader whose Lease is taken stands by in the same process and leads again later.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Patch, PatchParams};
use raygate_e2e::Env;
use raygate_e2e::reconciler::{Election, Reconciler};

use super::{SETTLE, create, namespace, ray_cluster, set_replicas, wait_ready};

const LEASE: &str = "raygate-e2e-leader";
const RECONCILES: &str =
    r#"controller_runtime_reconcile_total{controller="raycluster",result="success"}"#;

fn leader_series() -> String {
    series_of(LEASE)
}

fn series_of(lease: &str) -> String {
    format!(r#"leader_election_master_status{{name="{lease}"}}"#)
}

async fn holder(leases: &kube::Api<Lease>, lease: &str) -> kube::Result<Option<String>> {
    let lease = leases.get_opt(lease).await?;
    Ok(lease.and_then(|l| l.spec).and_then(|s| s.holder_identity))
}

#[tokio::test]
async fn only_the_leader_reconciles_and_a_killed_leader_fails_over() {
    let env = Env::load();
    let ns = namespace(&env, "rc-leader", false).await;
    let mut a = Reconciler::start(
        &env,
        &ns,
        Some(Election {
            lease: LEASE,
            identity: "replica-a",
        }),
    )
    .await;
    let leases = ns.api::<Lease>();
    // `a` started first and takes the Lease; `b` then stands by.
    ns.wait_for("replica-a holds the Lease", SETTLE, || async {
        Ok((holder(&leases, LEASE).await?.as_deref() == Some("replica-a")).then_some(()))
    })
    .await;
    let mut b = Reconciler::start(
        &env,
        &ns,
        Some(Election {
            lease: LEASE,
            identity: "replica-b",
        }),
    )
    .await;

    create(&ns, &ray_cluster("led", 1)).await;
    wait_ready(&ns, "led", 1).await;
    assert_eq!(a.sample(&leader_series()).await.expect("metrics of a"), 1.0);
    assert_eq!(b.sample(&leader_series()).await.expect("metrics of b"), 0.0);
    assert!(
        a.sample(RECONCILES).await.expect("metrics of a") > 0.0,
        "{}",
        a.log_text()
    );
    assert_eq!(
        b.sample(RECONCILES).await.expect("metrics of b"),
        0.0,
        "the standby reconciled:\n{}",
        b.log_text()
    );

    a.kill().await;
    let killed = Instant::now();
    // Work that only a new leader can do.
    set_replicas(&ns, "led", 2).await;
    ns.wait_for(
        "replica-b takes the Lease",
        Duration::from_secs(60),
        || async {
            Ok((holder(&leases, LEASE).await?.as_deref() == Some("replica-b")).then_some(()))
        },
    )
    .await;
    let takeover = killed.elapsed();
    wait_ready(&ns, "led", 2).await;
    let done = killed.elapsed();
    eprintln!("fail-over: Lease taken {takeover:?} after SIGKILL, cluster scaled {done:?} after");
    assert!(
        takeover <= Duration::from_secs(25),
        "fail-over took {takeover:?}"
    );
    assert_eq!(b.sample(&leader_series()).await.expect("metrics of b"), 1.0);
    assert!(
        b.sample(RECONCILES).await.expect("metrics of b") > 0.0,
        "{}",
        b.log_text()
    );

    // A graceful stop exits 0 and releases the Lease (no holder left behind); the standby
    // takes it when its cached view of the old Lease expires (kube-lease-manager does not
    // re-read a Lease it believes held), so within the Lease duration.
    let _c = Reconciler::start(
        &env,
        &ns,
        Some(Election {
            lease: LEASE,
            identity: "replica-c",
        }),
    )
    .await;
    let stopped = Instant::now();
    let status = b.terminate().await;
    assert!(
        status.success(),
        "SIGTERM exit status {status}:\n{}",
        b.log_text()
    );
    let released = leases
        .get(LEASE)
        .await
        .expect("the Lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert_ne!(
        released.as_deref(),
        Some("replica-b"),
        "the Lease was not released"
    );
    ns.wait_for(
        "replica-c takes the released Lease",
        Duration::from_secs(60),
        || async {
            Ok((holder(&leases, LEASE).await?.as_deref() == Some("replica-c")).then_some(()))
        },
    )
    .await;
    let handover = stopped.elapsed();
    eprintln!("hand-over after SIGTERM: {handover:?}");
    assert!(
        handover <= Duration::from_secs(25),
        "hand-over took {handover:?}"
    );
}

/// What happens to a leader that missed its renewals (a paused or starved process) while
/// another replica took the expired Lease: here the Lease is handed to another identity
/// directly. The leader must stop acting, yet its process (in `raygate run`, the webhook's
/// too) must keep running, and it must lead again once the Lease is free.
#[tokio::test]
async fn a_leader_whose_lease_is_taken_stands_by_in_the_same_process_and_leads_again() {
    const TAKEN: &str = "raygate-e2e-taken";
    let env = Env::load();
    let ns = namespace(&env, "rc-lease-taken", false).await;
    let mut a = Reconciler::start(
        &env,
        &ns,
        Some(Election {
            lease: TAKEN,
            identity: "replica-a",
        }),
    )
    .await;
    let leases = ns.api::<Lease>();
    ns.wait_for("replica-a holds the Lease", SETTLE, || async {
        Ok((holder(&leases, TAKEN).await?.as_deref() == Some("replica-a")).then_some(()))
    })
    .await;
    create(&ns, &ray_cluster("kept", 1)).await;
    wait_ready(&ns, "kept", 1).await;

    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    leases
        .patch(
            TAKEN,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {
                "holderIdentity": "replica-elsewhere",
                "acquireTime": now,
                "renewTime": now,
                "leaseDurationSeconds": 10,
            }})),
        )
        .await
        .expect("handing the Lease to another identity");
    ns.wait_for(
        "replica-a to notice and stand by",
        Duration::from_secs(60),
        || async {
            let leading = a.sample(&series_of(TAKEN)).await?;
            let stood_by = a
                .log_text()
                .contains("lost leadership; stopping controllers and standing by");
            Ok((leading == 0.0 && stood_by).then_some(()))
        },
    )
    .await;
    assert!(
        a.is_running(),
        "the process exited on lost leadership:\n{}",
        a.log_text()
    );

    // Nobody renews the taken Lease: it expires and replica-a, still waiting in the same
    // process, takes it and starts its controllers again.
    ns.wait_for(
        "replica-a to lead again",
        Duration::from_secs(90),
        || async {
            let held = holder(&leases, TAKEN).await?.as_deref() == Some("replica-a");
            Ok((held && a.sample(&series_of(TAKEN)).await? == 1.0).then_some(()))
        },
    )
    .await;
    set_replicas(&ns, "kept", 2).await;
    wait_ready(&ns, "kept", 2).await;
    assert!(a.is_running(), "{}", a.log_text());
    assert_eq!(
        a.log_text()
            .matches("became leader; starting controllers")
            .count(),
        2,
        "one process, two terms:\n{}",
        a.log_text()
    );
}
