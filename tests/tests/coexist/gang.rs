//! One RayJob, two namespaces, one KubeRay operator without a batch scheduler: gang-scheduled
//! by Volcano through raygate where the namespace is opted in, plain KubeRay where it is not.

use raygate_e2e::kuberay::KubeRay;
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{
    KUBERAY, OPT_IN, SETTLE, annotation, create, holds_nothing, min_resources, pod_group, pods,
    quantities, ray_job, scheduler, wait_complete,
};

#[tokio::test]
async fn the_same_rayjob_is_gang_scheduled_where_opted_in_and_plain_kuberay_elsewhere() {
    let env = Env::load();
    let volcano = TestNamespace::with_labels(&env, "coexist-gang", &[OPT_IN, KUBERAY]).await;
    let plain = TestNamespace::with_labels(&env, "coexist-plain", &[KUBERAY]).await;
    let kuberay = KubeRay::start(&env, &[&volcano, &plain], None).await;
    let job = ray_job("pi", "python -c 'print(3.14)'", json!({}));
    create(&volcano, job.clone()).await;
    create(&plain, job).await;

    // Both namespaces are checked at once: each short job's cluster goes as soon as its job is
    // done, so the checks must not wait for each other.
    // Plain namespace: exactly KubeRay, nothing of raygate's or Volcano's (checked while the
    // cluster lives: KubeRay deletes it once the job is done).
    let plain_bound = plain.wait_for(
        "head and 2 workers bound by the default scheduler",
        SETTLE,
        || async {
            let all = pods(&plain).await;
            let bound = all
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                .count();
            Ok((all.len() >= 3 && bound == all.len()).then_some(all))
        },
    );
    let volcano_checks = async {
        // Volcano namespace: raygate's PodGroup, raygate's sizing (submitter in minResources only).
        let group = volcano
            .wait_for("PodGroup ray-pi-pg", SETTLE, || async {
                Ok(pod_group(&volcano, "ray-pi-pg").await)
            })
            .await;
        assert_eq!(group.spec.min_member, Some(3), "head + 2 workers");
        assert_eq!(
            min_resources(&group),
            // head 1/2Gi + 2 × 1/1Gi + KubeRay's default submitter 500m/200Mi
            quantities(&[("cpu", "3500m"), ("memory", "4296Mi")])
        );
        assert_eq!(
            group
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app.kubernetes.io/managed-by"))
                .map(String::as_str),
            Some("raygate")
        );
        let owner = &group.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("RayJob", "pi"));

        // Every Ray Pod KubeRay made (head, workers) joined the gang and was bound.
        let members = volcano
            .wait_for("head and 2 workers bound", SETTLE, || async {
                let ray_pods: Vec<_> = pods(&volcano)
                    .await
                    .into_iter()
                    .filter(|p| {
                        p.metadata
                            .labels
                            .as_ref()
                            .is_some_and(|l| l.contains_key("ray.io/node-type"))
                    })
                    .collect();
                let bound = ray_pods
                    .iter()
                    .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                    .count();
                Ok((ray_pods.len() == 3 && bound == 3).then_some(ray_pods))
            })
            .await;
        for pod in &members {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            assert_eq!(scheduler(pod), "volcano", "{name}");
            assert_eq!(
                annotation(pod, "scheduling.k8s.io/group-name"),
                Some("ray-pi-pg"),
                "{name}"
            );
        }
        let mut tasks: Vec<&str> = members
            .iter()
            .filter_map(|p| annotation(p, "volcano.sh/task-spec"))
            .collect();
        tasks.sort_unstable();
        assert_eq!(
            tasks,
            ["headgroup", "small", "small"],
            "task of every member"
        );
    };
    let ((), plain_pods) = tokio::join!(volcano_checks, plain_bound);
    for pod in &plain_pods {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        assert_ne!(scheduler(pod), "volcano", "{name}");
        assert_eq!(
            annotation(pod, "scheduling.k8s.io/group-name"),
            None,
            "{name}"
        );
        assert_eq!(annotation(pod, "volcano.sh/task-spec"), None, "{name}");
    }

    // KubeRay's submitter Pod (v1.5.0 and v1.6.2) carries no Ray label (only its Job has
    // them): the webhook knows it by its Job, which the RayJob controls, and it joins the gang
    // too.
    let submitter = volcano
        .wait_for("KubeRay's submitter Pod bound", SETTLE, || async {
            Ok(pods(&volcano).await.into_iter().find(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("batch.kubernetes.io/job-name"))
                    .is_some_and(|job| job == "pi")
                    && p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
            }))
        })
        .await;
    let name = submitter.metadata.name.as_deref().unwrap_or_default();
    let labels = submitter.metadata.labels.clone().unwrap_or_default();
    assert!(
        !labels.keys().any(|k| k.starts_with("ray.io/")),
        "{name}: KubeRay puts no Ray label on its submitter Pod: {labels:?}"
    );
    assert_eq!(scheduler(&submitter), "volcano", "{name}");
    assert_eq!(
        annotation(&submitter, "scheduling.k8s.io/group-name"),
        Some("ray-pi-pg"),
        "{name}"
    );
    assert_eq!(
        annotation(&submitter, "volcano.sh/task-spec"),
        Some("submittergroup"),
        "{name}"
    );

    // The real Ray head ran it, in both namespaces.
    wait_complete(&volcano, "pi").await;
    wait_complete(&plain, "pi").await;
    let plain_groups = plain
        .api::<raygate_api::volcano::PodGroup>()
        .list(&Default::default())
        .await
        .expect("listing PodGroups");
    assert!(
        plain_groups.items.is_empty(),
        "no PodGroup in the plain namespace: {:?}",
        plain_groups
            .items
            .iter()
            .map(|g| g.metadata.name.clone())
            .collect::<Vec<_>>()
    );

    // Completion (the cluster shut down after the job): the group holds nothing.
    volcano
        .wait_for(
            "the finished RayJob's PodGroup to hold nothing",
            SETTLE,
            || async {
                Ok(holds_nothing(pod_group(&volcano, "ray-pi-pg").await.as_ref()).then_some(()))
            },
        )
        .await;
    drop(kuberay);
}
