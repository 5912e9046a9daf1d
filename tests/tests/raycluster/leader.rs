//! Two reconcilers, one Lease: only the leader acts, and a SIGKILLed leader fails over.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use raygate_e2e::Env;
use raygate_e2e::reconciler::{Election, Reconciler};

use super::{SETTLE, create, namespace, ray_cluster, set_replicas, wait_ready};

const LEASE: &str = "raygate-e2e-leader";
const RECONCILES: &str =
    r#"controller_runtime_reconcile_total{controller="raycluster",result="success"}"#;

fn leader_series() -> String {
    format!(r#"leader_election_master_status{{name="{LEASE}"}}"#)
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
        let lease = leases.get_opt(LEASE).await?;
        let holder = lease.and_then(|l| l.spec).and_then(|s| s.holder_identity);
        Ok((holder.as_deref() == Some("replica-a")).then_some(()))
    })
    .await;
    let b = Reconciler::start(
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
            let lease = leases.get_opt(LEASE).await?;
            let holder = lease.and_then(|l| l.spec).and_then(|s| s.holder_identity);
            Ok((holder.as_deref() == Some("replica-b")).then_some(()))
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
}
