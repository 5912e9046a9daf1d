//! Carrying out a core decision: the one way every controller writes.
//!
//! A controller observes, asks `raygate_api` for a [`Decision`], and hands its actions to
//! [`carry_out`]: Events are queued for publishing ([`crate::events`]), writes are performed by the controller's [`Perform`]
//! in order, and the first failed write stops the pass. Its Warning Event carries the reason
//! the core gives ([`decision::Action::failure_reason`]), and the error goes to
//! [`crate::context::error_policy`], which retries the pass. Every write goes through a
//! [`Writer`], so all controllers share one field manager, one answer to AlreadyExists (success:
//! objects are named by identity, so an existing one is this pass's own) and to NotFound on
//! resize or delete (success: the object is gone, and its deletion wakes the next pass).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Client, Resource, ResourceExt};
use raygate_api::decision::{self, Decision, EventNote, PodGroupSize};
use raygate_api::volcano::{PodGroup, SubGroupPolicySpec};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tracing::Instrument;

use crate::MANAGER_NAME;
use crate::context::{Context, ReconcileError, api_error, is_status, object_key};
use crate::events::EventSink;
use crate::metrics::Metrics;

/// The `action` of every Event the reconciler records.
const EVENT_ACTION: &str = "Reconcile";

/// Runs one reconcile of `object` by `controller`: in a span named after the object's key,
/// counted and timed in the controller-runtime metrics.
pub(crate) async fn reconcile<K, F>(
    ctx: &Context,
    controller: &'static str,
    object: &K,
    pass: F,
) -> Result<Requeue, ReconcileError>
where
    K: Resource,
    F: Future<Output = Result<Requeue, ReconcileError>>,
{
    let key = object_key(object);
    let span = tracing::info_span!("reconcile", controller, object = %key);
    ctx.metrics
        .reconcile(controller, pass.instrument(span.clone()))
        .instrument(span)
        .await
}

/// The namespace and name of an object from a watch (both always set there).
pub(crate) fn namespace_and_name<K: Resource>(
    object: &K,
    kind: &'static str,
) -> Result<(String, String), ReconcileError> {
    match (object.namespace(), object.meta().name.clone()) {
        (Some(namespace), Some(name)) => Ok((namespace, name)),
        _ => Err(ReconcileError::Unnamed { kind }),
    }
}

/// Performs one controller's writes; Events never reach it.
pub(crate) trait Perform<A> {
    /// Performs one write.
    async fn perform(&mut self, action: A) -> Result<(), ReconcileError>;

    /// Whether the write just performed was a create that found its object there already (and
    /// forgets it): the Event that follows the write says it was made, so it is not recorded.
    fn found_existing(&mut self) -> bool {
        false
    }
}

/// A write that failed: the reason the core gives for it, and the error.
pub(crate) struct Failed {
    /// KubeRay's failure reason, when the write has one.
    pub reason: Option<&'static str>,
    /// The error.
    pub error: ReconcileError,
}

impl From<Failed> for ReconcileError {
    fn from(failed: Failed) -> Self {
        failed.error
    }
}

/// Carries out `decision`'s actions in order, stopping at the first failed write, and returns
/// the kube-runtime requeue the decision asks for.
///
/// The failure is recorded as a Warning Event with the action's failure reason, except a
/// conflict: the pass lost a race, the retry on the new version follows at once, and nothing
/// failed that a user should see.
pub(crate) async fn carry_out<A, P>(
    writer: &Writer,
    performer: &mut P,
    decision: Decision<A>,
) -> Result<Requeue, Failed>
where
    A: decision::Action,
    P: Perform<A>,
{
    let mut found_existing = false;
    for action in decision.actions {
        if let Some(note) = action.event() {
            if !std::mem::take(&mut found_existing) {
                writer.publish(note).await;
            }
            continue;
        }
        let reason = action.failure_reason();
        let performed = performer.perform(action).await;
        found_existing = performer.found_existing();
        if let Err(error) = performed {
            if let Some(reason) = reason.filter(|_| !error.is_conflict()) {
                writer
                    .publish(&EventNote::warning(reason, error.to_string()))
                    .await;
            }
            return Err(Failed { reason, error });
        }
    }
    Ok(decision
        .requeue_after
        .map_or_else(Requeue::await_change, Requeue::requeue))
}

/// Event reason when the API server drops `spec.subGroupPolicy` from a PodGroup.
pub const REASON_SUB_GROUP_POLICY_UNSUPPORTED: &str = "SubGroupPolicyUnsupported";

/// Whether the installed PodGroup CRD keeps `spec.subGroupPolicy` (Volcano v1.14 and later).
///
/// Learned from the API server's answers to raygate's own PodGroup writes: a CRD without the
/// field prunes it, so a create or patch that sent sub-group policies and got a PodGroup back
/// without any shows the field is not there. raygate assumes it is until then; afterwards (until
/// the reconciler restarts) PodGroups get and are compared by `minMember` and `minResources`
/// only, as before sub-gangs (docs/reconciler.md, "Sub-gangs").
pub struct SubGroupSupport {
    dropped: AtomicBool,
    metrics: Arc<Metrics>,
}

impl SubGroupSupport {
    /// Support assumed, reported in `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            dropped: AtomicBool::new(false),
            metrics,
        }
    }

    /// Whether PodGroups get sub-group policies.
    pub fn supported(&self) -> bool {
        !self.dropped.load(Ordering::Relaxed)
    }

    /// Records the answer to a write that sent `sent`; true when it is the first to show the
    /// field dropped (the one that says so).
    fn observe(&self, sent: Option<&[SubGroupPolicySpec]>, answer: &PodGroup) -> bool {
        let sent = sent.is_some_and(|s| !s.is_empty());
        let kept = (answer.spec.sub_group_policy.as_ref()).is_some_and(|s| !s.is_empty());
        if !sent || kept || self.dropped.swap(true, Ordering::Relaxed) {
            return false;
        }
        self.metrics.set_sub_group_policy_unsupported();
        true
    }
}

/// Writes in one namespace on behalf of one reconciled object, which Events are about.
pub(crate) struct Writer {
    client: Client,
    namespace: String,
    events: EventSink,
    regarding: ObjectReference,
    sub_groups: Arc<SubGroupSupport>,
}

impl Writer {
    /// A writer for the objects of `namespace`, recording Events on `owner`.
    pub(crate) fn new<K>(
        client: &Client,
        events: EventSink,
        sub_groups: Arc<SubGroupSupport>,
        namespace: &str,
        owner: &K,
    ) -> Self
    where
        K: Resource<DynamicType = ()>,
    {
        Self {
            client: client.clone(),
            namespace: namespace.to_string(),
            events,
            regarding: owner.object_ref(&()),
            sub_groups,
        }
    }

    /// Creates a PodGroup unless it exists, and learns from the answer whether the CRD kept
    /// its sub-group policies ([`SubGroupSupport`]).
    pub(crate) async fn create_pod_group(
        &self,
        pod_group: &PodGroup,
    ) -> Result<(), ReconcileError> {
        let what = format!("PodGroup {}", pod_group.name_any());
        let post = PostParams {
            field_manager: Some(MANAGER_NAME.to_string()),
            ..PostParams::default()
        };
        match self.api::<PodGroup>().create(&post, pod_group).await {
            Ok(created) => {
                tracing::info!("{what} created");
                self.learn_sub_groups(pod_group.spec.sub_group_policy.as_deref(), &created)
                    .await;
                Ok(())
            }
            Err(e) if is_status(&e, 409) => Ok(()),
            Err(e) => Err(api_error(format!("create {what}"))(e)),
        }
    }

    /// Says once, as a Warning Event and in `raygate_volcano_sub_group_policy_supported`, that
    /// the API server dropped the sub-group policies of a PodGroup.
    async fn learn_sub_groups(&self, sent: Option<&[SubGroupPolicySpec]>, answer: &PodGroup) {
        if self.sub_groups.observe(sent, answer) {
            tracing::warn!(
                pod_group = %answer.name_any(),
                "the PodGroup CRD has no spec.subGroupPolicy; PodGroups get minMember and minResources only"
            );
            self.publish(&EventNote::warning(
                REASON_SUB_GROUP_POLICY_UNSUPPORTED,
                format!(
                    "PodGroup {}: the API server dropped spec.subGroupPolicy, so the installed PodGroup CRD (scheduling.volcano.sh/v1beta1) has no sub-groups (Volcano before v1.14); raygate falls back to minMember and minResources, which do not say which Pods make up the gang. Install Volcano v1.14 or later for sub-gangs",
                    answer.name_any()
                ),
            ))
            .await;
        }
    }

    /// An `Api` over kind `K` in the writer's namespace.
    pub(crate) fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// An `Api` over kind `K` as raw JSON, so fields raygate's types do not know survive.
    pub(crate) fn raw_api<K>(&self) -> Api<DynamicObject>
    where
        K: Resource<DynamicType = ()>,
    {
        Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &ApiResource::erase::<K>(&()),
        )
    }

    /// Object `name` of kind `K` (called `kind`) as stored, as raw JSON (with the fields
    /// raygate's types do not know), provided it is still at `decided`, the version the pass
    /// decided on: a newer one stops the pass, which goes on from the newer version.
    pub(crate) async fn read_stored<K>(
        &self,
        kind: &'static str,
        name: &str,
        decided: &str,
    ) -> Result<Value, ReconcileError>
    where
        K: Resource<DynamicType = ()>,
    {
        let current = self
            .raw_api::<K>()
            .get(name)
            .await
            .map_err(api_error(format!("get {kind} {name}")))?;
        let now = current.resource_version().unwrap_or_default();
        if now != decided {
            return Err(ReconcileError::Stale {
                kind,
                seen: decided.to_string(),
                now,
            });
        }
        serde_json::to_value(&current).map_err(|e| ReconcileError::Build {
            what: format!("{kind} {name}"),
            reason: e.to_string(),
        })
    }

    /// Patch parameters with raygate's field manager.
    pub(crate) fn patch_params() -> PatchParams {
        PatchParams {
            field_manager: Some(MANAGER_NAME.to_string()),
            ..PatchParams::default()
        }
    }

    /// Creates `object` of kind `K` unless it exists (AlreadyExists is success).
    pub(crate) async fn create<K>(&self, object: &K) -> Result<(), ReconcileError>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + Debug
            + Serialize
            + DeserializeOwned,
    {
        self.create_new(object).await.map(drop)
    }

    /// Creates `object` unless it exists: whether this create made it.
    pub(crate) async fn create_new<K>(&self, object: &K) -> Result<bool, ReconcileError>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + Debug
            + Serialize
            + DeserializeOwned,
    {
        let what = format!("{} {}", K::kind(&()), object.name_any());
        Ok(self.create_in(&self.api(), object, &what).await?.is_some())
    }

    /// Creates `object` unless it exists: the object as stored if this create made it, `None`
    /// if it existed already.
    async fn create_in<K>(
        &self,
        api: &Api<K>,
        object: &K,
        what: &str,
    ) -> Result<Option<K>, ReconcileError>
    where
        K: Clone + Debug + Serialize + DeserializeOwned,
    {
        let post = PostParams {
            field_manager: Some(MANAGER_NAME.to_string()),
            ..PostParams::default()
        };
        match api.create(&post, object).await {
            Ok(created) => {
                tracing::info!("{what} created");
                Ok(Some(created))
            }
            Err(e) if is_status(&e, 409) => Ok(None),
            Err(e) => Err(api_error(format!("create {what}"))(e)),
        }
    }

    /// Creates the object of kind `K` built as JSON (unknown fields kept) unless it exists: the
    /// object as stored if this create made it, `None` if it existed already.
    pub(crate) async fn create_raw<K>(
        &self,
        object: Value,
        what: &str,
    ) -> Result<Option<DynamicObject>, ReconcileError>
    where
        K: Resource<DynamicType = ()>,
    {
        let object: DynamicObject =
            serde_json::from_value(object).map_err(|e| ReconcileError::Build {
                what: what.to_string(),
                reason: e.to_string(),
            })?;
        self.create_in(&self.raw_api::<K>(), &object, what).await
    }

    /// Deletes `name` of kind `K` unless it is gone (NotFound is success).
    pub(crate) async fn delete<K>(
        &self,
        name: &str,
        params: &DeleteParams,
        what: &str,
    ) -> Result<(), ReconcileError>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + Debug
            + DeserializeOwned,
    {
        match self.api::<K>().delete(name, params).await {
            Ok(_) => {
                tracing::info!("{what} deleted");
                Ok(())
            }
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(api_error(format!("delete {what}"))(e)),
        }
    }

    /// Sets `spec.minMember`, `spec.minResources` and (when the size has them)
    /// `spec.subGroupPolicy` of a PodGroup and nothing else: its queue, priority and Volcano's
    /// status stay as they are. A PodGroup that is gone is left gone; the next pass, woken by its
    /// deletion, creates it where it is needed.
    pub(crate) async fn resize_pod_group(&self, size: &PodGroupSize) -> Result<(), ReconcileError> {
        let mut operations = vec![
            json!({"op": "add", "path": "/spec/minMember", "value": size.min_member}),
            json!({"op": "add", "path": "/spec/minResources", "value": size.min_resources}),
        ];
        if let Some(policies) = &size.sub_group_policy {
            operations
                .push(json!({"op": "add", "path": "/spec/subGroupPolicy", "value": policies}));
        }
        let patch: json_patch::Patch =
            serde_json::from_value(Value::Array(operations)).map_err(|e| {
                ReconcileError::Build {
                    what: format!("resize patch of PodGroup {}", size.name),
                    reason: e.to_string(),
                }
            })?;
        match self
            .api::<PodGroup>()
            .patch(&size.name, &Self::patch_params(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(resized) => {
                tracing::info!(pod_group = %size.name, min_member = size.min_member, "PodGroup resized");
                self.learn_sub_groups(size.sub_group_policy.as_deref(), &resized)
                    .await;
                Ok(())
            }
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(api_error(format!("resize PodGroup {}", size.name))(e)),
        }
    }

    /// Sets `values` in the `metadata.<field>` map (`labels` or `annotations`) of Pod `name`
    /// with a merge patch that also names its `uid`, so that a same-named successor is left
    /// alone: the API server refuses to change a UID (409). NotFound and that refusal are
    /// success; the next pass sees what is there instead.
    pub(crate) async fn merge_pod_metadata(
        &self,
        name: &str,
        uid: Option<&str>,
        field: PodMetadataMap,
        values: &BTreeMap<String, String>,
    ) -> Result<(), ReconcileError> {
        let key = field.key();
        let patch = json!({"metadata": {"uid": uid, key: values}});
        match self
            .api::<Pod>()
            .patch(name, &Self::patch_params(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(pod = %name, ?values, "Pod {key} set");
                Ok(())
            }
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
            Err(e) => Err(api_error(format!("set {key} of Pod {name}"))(e)),
        }
    }

    /// Queues an Event on the reconciled object ([`EventSink`]): it is published in the
    /// background, and a failure to publish is logged, never fatal.
    pub(crate) async fn publish(&self, note: &EventNote) {
        let event = Event {
            type_: if note.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: note.reason.clone(),
            // The API server refuses longer notes.
            note: Some(note.message.chars().take(1000).collect()),
            action: EVENT_ACTION.to_string(),
            secondary: None,
        };
        self.events.record(event, self.regarding.clone()).await;
    }
}

/// A string map of a Pod's metadata that [`Writer::merge_pod_metadata`] sets entries of.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PodMetadataMap {
    /// `metadata.labels`.
    Labels,
    /// `metadata.annotations`.
    Annotations,
}

impl PodMetadataMap {
    fn key(self) -> &'static str {
        match self {
            PodMetadataMap::Labels => "labels",
            PodMetadataMap::Annotations => "annotations",
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use raygate_api::lifecycle::Action as RayJobAction;

    use super::*;
    use crate::fake_api::{self, Log, Seen, echo, refusal};

    /// A fake API server: answers every request but Events (201) with `status` and records
    /// what it was asked.
    fn fake_api(status: u16) -> (Client, Log) {
        fake_api::fake_api(move |(_, uri, body): &Seen| {
            let code = if uri.contains("/events") { 201 } else { status };
            let answer = if code < 300 {
                echo(body)
            } else {
                refusal(code)
            };
            (code, answer)
        })
    }

    /// Publishes a test writer's queued Events; ends once the writer is dropped.
    type Publisher = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

    fn writer(client: &Client) -> (Writer, Publisher) {
        let support = Arc::new(SubGroupSupport::new(Arc::new(Metrics::new())));
        writer_with(client, support)
    }

    /// A writer for namespace `team` whose Events go on ConfigMap `owner`.
    fn writer_with(client: &Client, support: Arc<SubGroupSupport>) -> (Writer, Publisher) {
        let (events, publisher) = EventSink::new(
            client.clone(),
            kube::runtime::events::Reporter {
                controller: MANAGER_NAME.to_string(),
                instance: None,
            },
        );
        let mut owner = ConfigMap::default();
        owner.metadata.name = Some("owner".into());
        owner.metadata.namespace = Some("team".into());
        (
            Writer::new(client, events, support, "team", &owner),
            Box::pin(publisher),
        )
    }

    /// Drops `writer` and waits until its queued Events have reached the API server.
    async fn publish_all(writer: Writer, publisher: Publisher) {
        drop(writer);
        publisher.await;
    }

    fn size() -> PodGroupSize {
        PodGroupSize {
            name: "ray-demo-pg".into(),
            min_member: 3,
            min_resources: Default::default(),
            sub_group_policy: None,
        }
    }

    fn pod_group() -> PodGroup {
        let mut pg = PodGroup::new("ray-demo-pg", Default::default());
        pg.metadata.namespace = Some("team".into());
        pg
    }

    #[tokio::test]
    async fn a_resize_of_a_pod_group_that_is_gone_is_done_under_raygates_field_manager() {
        let (client, seen) = fake_api(404);
        writer(&client)
            .0
            .resize_pod_group(&size())
            .await
            .expect("NotFound is success");
        let seen = seen.lock().expect("lock").clone();
        let (method, uri, body) = &seen[0];
        assert_eq!(method, "PATCH");
        assert!(
            uri.contains("/namespaces/team/podgroups/ray-demo-pg"),
            "{uri}"
        );
        assert!(uri.contains("fieldManager=raygate-reconciler"), "{uri}");
        assert!(
            body.contains("/spec/minMember") && body.contains("/spec/minResources"),
            "{body}"
        );
        assert!(!body.contains("queue"), "only the size is written: {body}");

        let (client, _) = fake_api(500);
        let error = writer(&client)
            .0
            .resize_pod_group(&size())
            .await
            .expect_err("a server error fails the write");
        assert!(
            error
                .to_string()
                .starts_with("resize PodGroup ray-demo-pg: "),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_create_answered_already_exists_is_success_and_a_delete_answered_not_found_too() {
        let (client, seen) = fake_api(409);
        writer(&client)
            .0
            .create(&pod_group())
            .await
            .expect("AlreadyExists is success");
        let (method, uri, _) = seen.lock().expect("lock")[0].clone();
        assert_eq!(method, "POST");
        assert!(uri.contains("fieldManager=raygate-reconciler"), "{uri}");

        let (client, _) = fake_api(404);
        writer(&client)
            .0
            .delete::<PodGroup>(
                "ray-demo-pg",
                &DeleteParams::default(),
                "PodGroup ray-demo-pg",
            )
            .await
            .expect("NotFound is success");

        let (client, _) = fake_api(403);
        let error = writer(&client)
            .0
            .create(&pod_group())
            .await
            .expect_err("forbidden");
        assert!(
            error
                .to_string()
                .starts_with("create PodGroup ray-demo-pg: "),
            "{error}"
        );
    }

    /// Performs every write by creating `pod_group()`.
    struct CreateAll<'a>(&'a Writer);

    impl Perform<RayJobAction> for CreateAll<'_> {
        async fn perform(&mut self, _: RayJobAction) -> Result<(), ReconcileError> {
            self.0.create(&pod_group()).await
        }
    }

    fn events(seen: &[Seen]) -> Vec<String> {
        seen.iter()
            .filter(|(_, uri, _)| uri.contains("/events"))
            .map(|(_, _, body)| body.clone())
            .collect()
    }

    #[tokio::test]
    async fn a_failed_write_stops_the_pass_and_is_recorded_with_its_reason() {
        let (client, seen) = fake_api(403);
        let (writer, publisher) = writer(&client);
        let actions = vec![
            RayJobAction::Event(EventNote::normal("Starting", "first")),
            RayJobAction::CreateService(Box::default()),
            RayJobAction::Event(EventNote::normal("CreatedService", "never")),
            RayJobAction::DeleteRayJob,
        ];
        let decision = Decision {
            actions,
            requeue_after: None,
        };
        let failed = carry_out(&writer, &mut CreateAll(&writer), decision)
            .await
            .expect_err("the create fails");
        assert_eq!(failed.reason, Some("FailedToCreateService"));
        publish_all(writer, publisher).await;
        let seen = seen.lock().expect("lock");
        let events = events(&seen);
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(
            events.iter().any(|e| e.contains("\"Starting\"")),
            "{events:?}"
        );
        assert!(
            events
                .iter()
                .any(|e| e.contains("\"FailedToCreateService\"") && e.contains("\"Warning\"")),
            "{events:?}"
        );
        let writes = seen.iter().filter(|(_, uri, _)| !uri.contains("/events"));
        assert_eq!(writes.count(), 1, "the pass stops at the failed write");
    }

    #[tokio::test]
    async fn a_carried_out_decision_asks_for_its_own_requeue() {
        let (client, seen) = fake_api(200);
        let (writer, publisher) = writer(&client);
        let after = std::time::Duration::from_secs(5);
        for (requeue_after, expected) in [
            (Some(after), Requeue::requeue(after)),
            (None, Requeue::await_change()),
        ] {
            let decision = Decision {
                actions: vec![RayJobAction::Event(EventNote::normal("Waiting", "x"))],
                requeue_after,
            };
            let requeue = carry_out(&writer, &mut CreateAll(&writer), decision)
                .await
                .unwrap_or_else(|failed| panic!("{}", failed.error));
            assert_eq!(requeue, expected);
        }
        publish_all(writer, publisher).await;
        assert_eq!(events(&seen.lock().expect("lock").clone()).len(), 2);
    }

    #[tokio::test]
    async fn a_lost_race_is_retried_without_a_warning() {
        let (client, seen) = fake_api(200);
        let (writer, publisher) = writer(&client);
        struct Stale;
        impl Perform<RayJobAction> for Stale {
            async fn perform(&mut self, _: RayJobAction) -> Result<(), ReconcileError> {
                Err(ReconcileError::Stale {
                    kind: "RayJob",
                    seen: "1".into(),
                    now: "2".into(),
                })
            }
        }
        let decision = Decision {
            actions: vec![RayJobAction::CreateService(Box::default())],
            requeue_after: None,
        };
        let failed = carry_out(&writer, &mut Stale, decision)
            .await
            .expect_err("the pass stops");
        assert!(failed.error.is_conflict());
        publish_all(writer, publisher).await;
        assert!(events(&seen.lock().expect("lock")).is_empty());
    }

    /// Creates `pod_group()` for every write and says whether it was there already.
    struct CreateNew<'a> {
        writer: &'a Writer,
        found_existing: bool,
    }

    impl Perform<RayJobAction> for CreateNew<'_> {
        async fn perform(&mut self, _: RayJobAction) -> Result<(), ReconcileError> {
            self.found_existing = !self.writer.create_new(&pod_group()).await?;
            Ok(())
        }

        fn found_existing(&mut self) -> bool {
            std::mem::take(&mut self.found_existing)
        }
    }

    #[tokio::test]
    async fn a_create_that_finds_its_object_earns_no_created_event() {
        for (status, created_events) in [(201, 1), (409, 0)] {
            let (client, seen) = fake_api(status);
            let (writer, publisher) = writer(&client);
            let decision = Decision {
                actions: vec![
                    RayJobAction::CreateService(Box::default()),
                    RayJobAction::Event(EventNote::normal("CreatedService", "made")),
                    RayJobAction::Event(EventNote::normal("Waiting", "always")),
                ],
                requeue_after: None,
            };
            let mut performer = CreateNew {
                writer: &writer,
                found_existing: false,
            };
            carry_out(&writer, &mut performer, decision)
                .await
                .unwrap_or_else(|failed| panic!("{}", failed.error));
            publish_all(writer, publisher).await;
            let events = events(&seen.lock().expect("lock"));
            let created = events
                .iter()
                .filter(|e| e.contains("\"CreatedService\""))
                .count();
            assert_eq!(created, created_events, "{status}: {events:?}");
            assert!(
                events.iter().any(|e| e.contains("\"Waiting\"")),
                "{status}: {events:?}"
            );
        }
    }

    /// A fake API server whose PodGroup CRD has no `subGroupPolicy`: it answers a PodGroup
    /// create or patch with the object written, less that field (as structural pruning does).
    fn pruning_api() -> (Client, Log) {
        fake_api::fake_api(|(_, uri, body): &Seen| {
            if uri.contains("/events") {
                return (201, body.clone());
            }
            let mut pg = serde_json::to_value(pod_group()).expect("JSON");
            if let Ok(written) = serde_json::from_str::<Value>(body)
                && written.is_object()
            {
                pg = written;
            }
            pg["spec"]
                .as_object_mut()
                .map(|spec| spec.remove("subGroupPolicy"));
            pg["spec"]["minMember"] = json!(3);
            (200, pg.to_string())
        })
    }

    fn policy() -> Vec<SubGroupPolicySpec> {
        vec![SubGroupPolicySpec {
            name: Some("gpu".into()),
            sub_group_size: Some(2),
            min_sub_groups: Some(1),
            ..SubGroupPolicySpec::default()
        }]
    }

    #[tokio::test]
    async fn a_dropped_sub_group_policy_is_said_once_and_turns_sub_groups_off() {
        let (client, seen) = pruning_api();
        let metrics = Arc::new(Metrics::new());
        let support = Arc::new(SubGroupSupport::new(metrics.clone()));
        let (writer, publisher) = writer_with(&client, support.clone());
        assert!(support.supported());
        assert!(
            metrics
                .encode()
                .contains("raygate_volcano_sub_group_policy_supported 1")
        );

        // A PodGroup without policies says nothing about the CRD.
        writer
            .create_pod_group(&pod_group())
            .await
            .expect("created");
        assert!(support.supported());

        let mut with = pod_group();
        with.spec.sub_group_policy = Some(policy());
        writer.create_pod_group(&with).await.expect("created");
        assert!(!support.supported());
        assert!(
            metrics
                .encode()
                .contains("raygate_volcano_sub_group_policy_supported 0")
        );
        let mut size = size();
        size.sub_group_policy = Some(policy());
        writer.resize_pod_group(&size).await.expect("resized");
        publish_all(writer, publisher).await;
        let seen = seen.lock().expect("lock").clone();
        let warnings: Vec<String> = events(&seen)
            .into_iter()
            .filter(|body| body.contains(REASON_SUB_GROUP_POLICY_UNSUPPORTED))
            .collect();
        assert_eq!(warnings.len(), 1, "said once: {seen:?}");
        assert!(
            warnings[0].contains("spec.subGroupPolicy"),
            "{}",
            warnings[0]
        );
        let patch = seen
            .iter()
            .find(|(method, _, _)| method == "PATCH")
            .expect("the resize");
        assert!(patch.2.contains("/spec/subGroupPolicy"), "{}", patch.2);
    }
}
