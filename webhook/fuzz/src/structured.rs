//! Structured AdmissionReviews (`arbitrary`): realistic objects of every kind the webhooks see
//! (KubeRay's head, worker and submitter Pods, RayJobs, RayClusters, QueuePolicies), then
//! arbitrary edits at arbitrary paths with values and keys biased towards what the handlers
//! read (Ray labels, owner references, replica counts, quantities, queue names), in
//! namespaces of the fuzz world, with every operation, dry run and old object combination.

use arbitrary::Arbitrary;
use raygate_api::keys;
use raygate_webhook::test_support::{self, ReviewRequest};
use serde_json::{Map, Value, json};

/// Deeper JSON is cut off: serde_json refuses nesting beyond 128 levels anyway, and nothing
/// the handlers read is deeper than this.
const MAX_DEPTH: usize = 12;

/// One fuzz input: a review on one path.
#[derive(Arbitrary, Debug)]
pub struct Input {
    path: PathChoice,
    object: Base,
    edits: Vec<Edit>,
    old_object: OldObject,
    operation: OperationChoice,
    namespace: NamespaceChoice,
    kind: KindChoice,
    sub_resource: Option<Text>,
    dry_run: Option<bool>,
    uid: Text,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum PathChoice {
    MutatePods,
    MutateRay,
    ValidateRay,
    ValidateQueuePolicy,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Base {
    HeadPod,
    WorkerPod,
    SubmitterPod,
    RayJob,
    RayCluster,
    QueuePolicy,
    Empty,
}

#[derive(Arbitrary, Debug)]
enum OldObject {
    Absent,
    Null,
    Unchanged,
    Edited(Vec<Edit>),
}

#[derive(Arbitrary, Debug)]
enum OperationChoice {
    Create,
    Update,
    Delete,
    Connect,
    Other(Text),
}

#[derive(Arbitrary, Debug)]
enum NamespaceChoice {
    /// The object's own `metadata.namespace`.
    OfObject,
    OptedIn,
    Unlabelled,
    Missing,
    Other(Text),
}

#[derive(Arbitrary, Debug)]
enum KindChoice {
    /// The GVK of the object's `apiVersion`/`kind`, as the API server sends it.
    OfObject,
    Pod,
    RayJob,
    RayCluster,
    RayJobV1Alpha1,
    QueuePolicy,
    Other {
        group: Text,
        version: Text,
        kind: Text,
    },
}

/// Replaces, removes or inserts at the path `steps` leads to (each step picks an entry of
/// the object or array it is at, modulo its length).
#[derive(Arbitrary, Debug)]
struct Edit {
    steps: Vec<u8>,
    op: EditOp,
}

#[derive(Arbitrary, Debug)]
enum EditOp {
    Replace(Json),
    Remove,
    Insert(Key, Json),
}

/// JSON with interesting keys and leaves.
#[derive(Arbitrary, Debug)]
enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(Text),
    Array(Vec<Json>),
    Object(Vec<(Key, Json)>),
}

#[derive(Arbitrary, Debug)]
enum Text {
    Known(KnownText),
    Any(String),
}

#[derive(Arbitrary, Debug)]
enum Key {
    Known(KnownKey),
    Any(String),
}

macro_rules! spelled {
    ($name:ident { $($variant:ident => $text:expr),+ $(,)? }) => {
        #[derive(Arbitrary, Debug, Clone, Copy)]
        enum $name { $($variant),+ }
        impl $name {
            fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }
    };
}

spelled!(KnownText {
    Empty => "",
    Head => "head",
    Worker => "worker",
    HeadGroup => keys::HEAD_TASK,
    Submitter => keys::SUBMITTER_TASK,
    Small => "small",
    RayJob => "RayJob",
    RayCluster => "RayCluster",
    Pod => "Pod",
    RayV1 => "ray.io/v1",
    RayV1Alpha1 => "ray.io/v1alpha1",
    Volcano => keys::VOLCANO_SCHEDULER_NAME,
    Batch => "batch",
    Default => keys::DEFAULT_QUEUE,
    Closed => "closed",
    Fresh => "fresh",
    Missing => "missing",
    Demo => "demo",
    Train => "train",
    TrainCluster => "train-raycluster-x",
    Ml => "ml",
    Web => "web",
    High => "high",
    True => "true",
    Minus1 => "-1",
    Zero => "0",
    One => "1",
    Milli => "100m",
    Gi => "1Gi",
    Huge => "9999999999999999999Ei",
    Exponent => "1e3",
    Fraction => "0.5",
    Gpu => "nvidia.com/gpu",
    K8sJobMode => "K8sJobMode",
    HttpMode => "HTTPMode",
    SidecarMode => "SidecarMode",
    InteractiveMode => "InteractiveMode",
    Deny => "Deny",
    Warn => "Warn",
    GroupName => "ray-train-pg",
    CustomScheduler => "my-scheduler",
});

spelled!(KnownKey {
    ApiVersion => "apiVersion",
    Kind => "kind",
    Metadata => "metadata",
    Name => "name",
    Namespace => "namespace",
    GenerateName => "generateName",
    Labels => "labels",
    Annotations => "annotations",
    OwnerReferences => "ownerReferences",
    Uid => "uid",
    Controller => "controller",
    Spec => "spec",
    Containers => "containers",
    Resources => "resources",
    Requests => "requests",
    Limits => "limits",
    Cpu => "cpu",
    Memory => "memory",
    Gpu => "nvidia.com/gpu",
    Template => "template",
    SchedulerName => "schedulerName",
    RayClusterSpec => "rayClusterSpec",
    HeadGroupSpec => "headGroupSpec",
    WorkerGroupSpecs => "workerGroupSpecs",
    GroupName => "groupName",
    Replicas => "replicas",
    MinReplicas => "minReplicas",
    MaxReplicas => "maxReplicas",
    NumOfHosts => "numOfHosts",
    Suspend => "suspend",
    ClusterSelector => "clusterSelector",
    SubmissionMode => "submissionMode",
    SubmitterPodTemplate => "submitterPodTemplate",
    ShutdownAfterJobFinishes => "shutdownAfterJobFinishes",
    Autoscaling => "enableInTreeAutoscaling",
    RayStartParams => "rayStartParams",
    Entrypoint => "entrypoint",
    NodeTypeLabel => keys::RAY_NODE_TYPE_LABEL,
    ClusterLabel => keys::RAY_CLUSTER_LABEL,
    GroupLabel => keys::RAY_GROUP_LABEL,
    OriginCrdLabel => keys::ORIGINATED_FROM_CRD_LABEL,
    OriginNameLabel => keys::ORIGINATED_FROM_CR_NAME_LABEL,
    QueueLabel => keys::QUEUE_LABEL,
    PriorityLabel => keys::PRIORITY_CLASS_LABEL,
    GroupAnnotation => keys::POD_GROUP_ANNOTATION,
    TaskAnnotation => keys::TASK_SPEC_ANNOTATION,
    MirrorAnnotation => keys::MIRROR_POD_ANNOTATION,
    TopologyMode => keys::NETWORK_TOPOLOGY_MODE_LABEL,
    V1Fields => keys::V1_FIELDS_ANNOTATION,
    NamespaceSelector => "namespaceSelector",
    MatchLabels => "matchLabels",
    MatchExpressions => "matchExpressions",
    Operator => "operator",
    Values => "values",
    DefaultQueue => "defaultQueue",
    AllowedQueues => "allowedQueues",
    RequireQueue => "requireQueue",
    AllowedPriorityClasses => "allowedPriorityClasses",
    MaxMinMember => "maxMinMember",
    MaxMinResources => "maxMinResources",
    Enforcement => "enforcement",
});

impl Text {
    fn value(&self) -> String {
        match self {
            Text::Known(known) => known.as_str().to_owned(),
            Text::Any(any) => any.clone(),
        }
    }
}

impl Key {
    fn value(&self) -> String {
        match self {
            Key::Known(known) => known.as_str().to_owned(),
            Key::Any(any) => any.clone(),
        }
    }
}

impl Json {
    fn value(&self, depth: usize) -> Value {
        if depth >= MAX_DEPTH {
            return Value::Null;
        }
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Int(i) => json!(i),
            Json::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Json::Text(text) => Value::String(text.value()),
            Json::Array(items) => items.iter().map(|i| i.value(depth + 1)).collect(),
            Json::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.value(), v.value(depth + 1)))
                    .collect::<Map<_, _>>(),
            ),
        }
    }
}

impl Base {
    fn object(self) -> Value {
        match self {
            Base::HeadPod => test_support::head_pod(),
            Base::WorkerPod => test_support::worker_pod(),
            Base::SubmitterPod => test_support::submitter_pod(),
            Base::RayJob => test_support::ray_job(),
            Base::RayCluster => test_support::ray_cluster(),
            Base::QueuePolicy => test_support::queue_policy(),
            Base::Empty => json!({}),
        }
    }
}

/// The JSON pointer `steps` lead to in `value`.
fn pointer(value: &Value, steps: &[u8]) -> String {
    let mut pointer = String::new();
    let mut node = value;
    for step in steps {
        let step = usize::from(*step);
        let (token, child) = match node {
            Value::Object(map) if !map.is_empty() => {
                let (key, child) = map.iter().nth(step % map.len()).expect("in range");
                (key.replace('~', "~0").replace('/', "~1"), child)
            }
            Value::Array(items) if !items.is_empty() => {
                let index = step % items.len();
                (index.to_string(), &items[index])
            }
            _ => break,
        };
        pointer.push('/');
        pointer.push_str(&token);
        node = child;
    }
    pointer
}

fn apply(mut object: Value, edits: &[Edit]) -> Value {
    for edit in edits {
        let at = pointer(&object, &edit.steps);
        match &edit.op {
            EditOp::Replace(json) => {
                if let Some(target) = object.pointer_mut(&at) {
                    *target = json.value(at.matches('/').count());
                }
            }
            EditOp::Remove => {
                if let Some((parent, last)) = at.rsplit_once('/')
                    && let Some(parent) = object.pointer_mut(parent)
                {
                    let last = last.replace("~1", "/").replace("~0", "~");
                    match parent {
                        Value::Object(map) => {
                            map.remove(&last);
                        }
                        Value::Array(items) => {
                            if let Ok(index) = last.parse::<usize>()
                                && index < items.len()
                            {
                                items.remove(index);
                            }
                        }
                        _ => {}
                    }
                }
            }
            EditOp::Insert(key, json) => {
                let depth = at.matches('/').count() + 1;
                match object.pointer_mut(&at) {
                    Some(Value::Object(map)) => {
                        map.insert(key.value(), json.value(depth));
                    }
                    Some(Value::Array(items)) => items.push(json.value(depth)),
                    _ => {}
                }
            }
        }
    }
    object
}

impl Input {
    /// The path to post to and the AdmissionReview body.
    pub fn review(&self) -> (&'static str, Vec<u8>) {
        let path = match self.path {
            PathChoice::MutatePods => keys::MUTATE_PODS_PATH,
            PathChoice::MutateRay => keys::MUTATE_RAY_PATH,
            PathChoice::ValidateRay => keys::VALIDATE_RAY_PATH,
            PathChoice::ValidateQueuePolicy => keys::VALIDATE_QUEUE_POLICY_PATH,
        };
        let base = self.object.object();
        let object = apply(base.clone(), &self.edits);
        let old_object = match &self.old_object {
            OldObject::Absent => None,
            OldObject::Null => Some(Value::Null),
            OldObject::Unchanged => Some(base),
            OldObject::Edited(edits) => Some(apply(base, edits)),
        };
        let operation = match &self.operation {
            OperationChoice::Create => "CREATE".to_owned(),
            OperationChoice::Update => "UPDATE".to_owned(),
            OperationChoice::Delete => "DELETE".to_owned(),
            OperationChoice::Connect => "CONNECT".to_owned(),
            OperationChoice::Other(text) => text.value(),
        };
        let namespace = match &self.namespace {
            NamespaceChoice::OfObject => object.pointer("/metadata/namespace").cloned(),
            NamespaceChoice::OptedIn => Some(json!("ml")),
            NamespaceChoice::Unlabelled => Some(json!("web")),
            NamespaceChoice::Missing => None,
            NamespaceChoice::Other(text) => Some(json!(text.value())),
        };
        let kind = match &self.kind {
            KindChoice::OfObject => test_support::gvk_of(&object),
            KindChoice::Pod => json!({"group": "", "version": "v1", "kind": "Pod"}),
            KindChoice::RayJob => json!({"group": "ray.io", "version": "v1", "kind": "RayJob"}),
            KindChoice::RayCluster => {
                json!({"group": "ray.io", "version": "v1", "kind": "RayCluster"})
            }
            KindChoice::RayJobV1Alpha1 => {
                json!({"group": "ray.io", "version": "v1alpha1", "kind": "RayJob"})
            }
            KindChoice::QueuePolicy => {
                json!({"group": "raygate.io", "version": "v1alpha1", "kind": "QueuePolicy"})
            }
            KindChoice::Other {
                group,
                version,
                kind,
            } => json!({"group": group.value(), "version": version.value(), "kind": kind.value()}),
        };
        let review = ReviewRequest {
            uid: self.uid.value(),
            kind,
            namespace,
            operation,
            object,
            old_object,
            dry_run: self.dry_run,
            sub_resource: self.sub_resource.as_ref().map(Text::value),
        };
        (path, review.to_body())
    }
}
