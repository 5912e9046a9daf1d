//! AdmissionReview `admission.k8s.io/v1` on the wire.
//!
//! Objects stay `serde_json::Value`: the webhook reads what it needs and answers with a JSON
//! patch against the object exactly as the API server sent it, so no field a typed struct does
//! not know is ever dropped or rewritten.

use base64::Engine as _;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// The only AdmissionReview version raygate's webhook configurations ask for.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";
/// `kind` of an AdmissionReview.
pub const ADMISSION_REVIEW_KIND: &str = "AdmissionReview";

/// Why a request body is not an AdmissionReview raygate can answer. The HTTP answer is 400
/// with this text: without a readable `request.uid` there is no review to answer.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The body is not JSON, or not shaped like an AdmissionReview.
    #[error("the body is not an AdmissionReview: {0}")]
    Decode(#[from] serde_json::Error),
    /// `apiVersion` / `kind` are not `admission.k8s.io/v1` `AdmissionReview`.
    #[error(
        "apiVersion/kind is {api_version:?}/{kind:?}, expected \"admission.k8s.io/v1\"/\"AdmissionReview\""
    )]
    WrongType {
        /// The `apiVersion` sent.
        api_version: String,
        /// The `kind` sent.
        kind: String,
    },
    /// The review has no `request`.
    #[error("request: Required value: the AdmissionReview has no request")]
    MissingRequest,
    /// The request has an empty `uid`.
    #[error("request.uid: Required value: the request has no uid to answer with")]
    MissingUid,
}

/// `group`/`version`/`kind` of the object under review.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupVersionKind {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

/// The operation under review: the core's, which the Ray object review decides on.
pub use raygate_api::admission::Operation;
pub use raygate_api::admission::escape::UserInfo;

/// The parts of `request` raygate reads. `O` is how `object` and `oldObject` are read on the
/// wire; the webhooks get them as `Value`s (see [`ObjectView`]).
#[derive(Deserialize, Clone, Debug)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct AdmissionRequest<O = Value> {
    /// Correlation id, echoed in the response.
    pub uid: String,
    /// The object's kind (after `matchPolicy: Equivalent` conversion).
    pub kind: GroupVersionKind,
    /// Subresource, if any.
    #[serde(default)]
    pub sub_resource: Option<String>,
    /// Object name; empty on CREATE with `generateName`.
    #[serde(default)]
    pub name: Option<String>,
    /// Object namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: Operation,
    /// The new object; null on DELETE.
    #[serde(default)]
    pub object: Option<O>,
    /// The object before an UPDATE or DELETE.
    #[serde(default)]
    pub old_object: Option<O>,
    /// Whether nothing will be persisted.
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// Who asked (the opt-in label guard reads it).
    #[serde(default)]
    pub user_info: UserInfo,
}

impl<O> AdmissionRequest<O> {
    fn map_objects<P>(self, read: impl Fn(O) -> P) -> AdmissionRequest<P> {
        let AdmissionRequest {
            uid,
            kind,
            sub_resource,
            name,
            namespace,
            operation,
            object,
            old_object,
            dry_run,
            user_info,
        } = self;
        AdmissionRequest {
            uid,
            kind,
            sub_resource,
            name,
            namespace,
            operation,
            object: object.map(&read),
            old_object: old_object.map(read),
            dry_run,
            user_info,
        }
    }
}

/// How much of `request.object` and `request.oldObject` a webhook reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectView {
    /// All of it (Ray objects and QueuePolicies are validated whole).
    Whole,
    /// What Pod onboarding reads: `apiVersion`, `kind`, `metadata` and `spec.schedulerName`.
    /// The rest of a Pod (containers, volumes, …: most of its bytes) is only checked for JSON
    /// syntax. An object or a `spec` that is not a JSON object is kept whole, so that the
    /// verdict on it does not change.
    PodOnboarding,
    /// What Ray object admission reads: the whole object but `metadata.managedFields`, the API
    /// server's record of which client set which field. No rule reads it, and it is about as
    /// large as the fields it records (a `kubectl apply` gives every field it sets an entry).
    /// An object or a `metadata` that is not a JSON object is kept whole.
    RayObject,
}

/// A JSON value read as [`ObjectView::PodOnboarding`] reads a Pod.
struct PodOnboardingObject(Value);

impl<'de> Deserialize<'de> for PodOnboardingObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Members {
            keep: &["apiVersion", "kind", "metadata"],
            reduced: Some(("spec", &["schedulerName"])),
        }
        .deserialize(deserializer)
        .map(PodOnboardingObject)
    }
}

/// A JSON value read as [`ObjectView::RayObject`] reads a RayJob or RayCluster.
struct RayObject(Value);

impl<'de> Deserialize<'de> for RayObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Without {
            path: &["metadata", "managedFields"],
        }
        .deserialize(deserializer)
        .map(RayObject)
    }
}

/// A JSON value read whole in one pass, except the member at `path` (a member of a member of
/// …): each object on the way is read without it, or, for the last name, without that member.
/// Anything on the way that is not an object is read whole; the last of duplicate members wins,
/// as in a `Value`.
#[derive(Clone, Copy)]
struct Without {
    path: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for Without {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// Every JSON value but an object is built as a `Value` builds it.
impl<'de> Visitor<'de> for Without {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut elements = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(element) = seq.next_element()? {
            elements.push(element);
        }
        Ok(Value::Array(elements))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match self.path {
                [name] if key == *name => {
                    map.next_value::<de::IgnoredAny>()?;
                }
                [name, rest @ ..] if key == *name => {
                    let value = map.next_value_seed(Without { path: rest })?;
                    kept.insert(key, value);
                }
                _ => {
                    kept.insert(key, map.next_value()?);
                }
            }
        }
        Ok(Value::Object(kept))
    }
}

/// A JSON object reduced to the members `keep` names, and the member `reduced.0` (when it is
/// an object) to its members `reduced.1`; the last of duplicate members wins, as in a `Value`.
/// Anything else than an object is read whole.
#[derive(Clone, Copy)]
struct Members {
    keep: &'static [&'static str],
    reduced: Option<(&'static str, &'static [&'static str])>,
}

impl<'de> DeserializeSeed<'de> for Members {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        // Borrowed from the review's body: only checked for syntax here.
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        let read = if raw.get().starts_with('{') {
            serde_json::Deserializer::from_str(raw.get()).deserialize_map(self)
        } else {
            serde_json::from_str(raw.get())
        };
        read.map_err(de::Error::custom)
    }
}

impl<'de> Visitor<'de> for Members {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match self.reduced {
                Some((reduced, keep)) if key == reduced => {
                    let value = map.next_value_seed(Members {
                        keep,
                        reduced: None,
                    })?;
                    kept.insert(key, value);
                }
                _ if self.keep.contains(&key.as_str()) => {
                    kept.insert(key, map.next_value()?);
                }
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }
}

impl AdmissionRequest {
    /// Whether the request is a dry run.
    pub fn is_dry_run(&self) -> bool {
        self.dry_run.unwrap_or(false)
    }

    /// Takes `object` out for a decision that consumes it (a Ray object's review defaults it
    /// in place), instead of a copy of it. What stays is what [`Self::object_key`] reads: the
    /// `generateName` of an object the request names no name for.
    pub fn take_object(&mut self) -> Option<Value> {
        let object = self.object.take()?;
        if self.name.as_deref().is_none_or(str::is_empty)
            && let Some(generate_name) = object.pointer("/metadata/generateName")
        {
            self.object = Some(serde_json::json!({"metadata": {"generateName": generate_name}}));
        }
        Some(object)
    }

    /// `namespace/name` for logs (name may be empty under `generateName`).
    pub fn object_key(&self) -> String {
        let name = self
            .name
            .as_deref()
            .filter(|n| !n.is_empty())
            .or_else(|| {
                self.object
                    .as_ref()?
                    .pointer("/metadata/generateName")?
                    .as_str()
            })
            .unwrap_or("");
        match self.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name.to_string(),
        }
    }
}

/// A whole AdmissionReview, read in one pass: what a well-formed review is parsed as.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
struct Review<O> {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    request: Option<AdmissionRequest<O>>,
}

/// The review around `request`, which is only checked for JSON syntax here (a borrowed raw
/// slice of the body): `apiVersion` and `kind` are judged before the request is decoded, so
/// that a body that is no AdmissionReview is called that, whatever its `request` holds.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewEnvelope<'a> {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default, borrow)]
    request: Option<&'a RawValue>,
}

/// Reads an AdmissionReview v1 request body, with as much of the object as `view` says.
///
/// A review is read in one pass. Only a body that pass cannot read, or that is not an
/// `admission.k8s.io/v1` AdmissionReview with a request and a uid, is read again by
/// [`diagnose_request`] for the error, which judges the envelope first. Reading every review
/// that way (the envelope, then the request inside it) cost about 5 % of the webhook's CPU per
/// RayCluster review.
pub fn parse_request(body: &[u8], view: ObjectView) -> Result<AdmissionRequest, ReviewError> {
    let read = match view {
        ObjectView::Whole => read_in_one_pass(body, |object: Value| object),
        ObjectView::PodOnboarding => read_in_one_pass(body, |object: PodOnboardingObject| object.0),
        ObjectView::RayObject => read_in_one_pass(body, |object: RayObject| object.0),
    };
    read.map_or_else(|| diagnose_request(body, view), Ok)
}

/// The request of an `admission.k8s.io/v1` AdmissionReview with a uid, its object read as `O`
/// and kept as `into_value` makes it; `None` for anything else.
fn read_in_one_pass<'de, O: Deserialize<'de>>(
    body: &'de [u8],
    into_value: impl Fn(O) -> Value,
) -> Option<AdmissionRequest> {
    let review: Review<O> = serde_json::from_slice(body).ok()?;
    let request = review.request?;
    (review.api_version == ADMISSION_API_VERSION
        && review.kind == ADMISSION_REVIEW_KIND
        && !request.uid.is_empty())
    .then(|| request.map_objects(into_value))
}

/// Reads a review as [`parse_request`] does, the envelope first: its `apiVersion` and `kind`
/// are judged before the request is decoded, and the error names what is wrong.
fn diagnose_request(body: &[u8], view: ObjectView) -> Result<AdmissionRequest, ReviewError> {
    let envelope: ReviewEnvelope = serde_json::from_slice(body)?;
    if envelope.api_version != ADMISSION_API_VERSION || envelope.kind != ADMISSION_REVIEW_KIND {
        return Err(ReviewError::WrongType {
            api_version: envelope.api_version,
            kind: envelope.kind,
        });
    }
    // `"request": null` reads as `None` too.
    let Some(request) = envelope.request else {
        return Err(ReviewError::MissingRequest);
    };
    let request: AdmissionRequest = match view {
        ObjectView::Whole => serde_json::from_str(request.get())?,
        ObjectView::PodOnboarding => {
            serde_json::from_str::<AdmissionRequest<PodOnboardingObject>>(request.get())?
                .map_objects(|object| object.0)
        }
        ObjectView::RayObject => {
            serde_json::from_str::<AdmissionRequest<RayObject>>(request.get())?
                .map_objects(|object| object.0)
        }
    };
    if request.uid.is_empty() {
        return Err(ReviewError::MissingUid);
    }
    Ok(request)
}

/// Why a request is denied: the `metav1.Status` code, reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// HTTP-style code (400 malformed, 403 forbidden by policy, 422 invalid object).
    pub code: u16,
    /// Machine-readable reason (`BadRequest`, `Forbidden`, `Invalid`).
    pub reason: &'static str,
    /// What kubectl prints after `denied the request: `.
    pub message: String,
}

impl Denial {
    /// 422 `Invalid`: the object breaks a rule.
    pub fn invalid(message: impl Into<String>) -> Self {
        Denial {
            code: 422,
            reason: "Invalid",
            message: message.into(),
        }
    }

    /// 400 `BadRequest`: the review itself cannot be acted on (e.g. no object).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Denial {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
        }
    }

    /// 403 `Forbidden`: the object is well-formed but not allowed here.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Denial {
            code: 403,
            reason: "Forbidden",
            message: message.into(),
        }
    }
}

/// What the webhook decided about one request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// `Some` denies the request.
    pub denial: Option<Denial>,
    /// Operations to apply to the object (mutating webhooks only); empty for none.
    pub patch: json_patch::Patch,
    /// Messages kubectl shows as `Warning: …`.
    pub warnings: Vec<String>,
}

impl Verdict {
    /// Allowed as is.
    pub fn allow() -> Self {
        Verdict::default()
    }

    /// Denied.
    pub fn deny(denial: Denial) -> Self {
        Verdict {
            denial: Some(denial),
            ..Verdict::default()
        }
    }

    /// The metric label of the verdict: `denied`, `patched` or `allowed`.
    pub fn label(&self) -> &'static str {
        if self.denial.is_some() {
            "denied"
        } else if !self.patch.0.is_empty() {
            "patched"
        } else {
            "allowed"
        }
    }
}

/// `metav1.Status` of a denial.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// Always `Failure`.
    pub status: &'static str,
    /// HTTP-style code.
    pub code: u16,
    /// Machine-readable reason.
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
}

/// `response` of an AdmissionReview.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// The request's uid.
    pub uid: String,
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Why not, when denied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// The JSON patch, base64-encoded (a byte array in the API's JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// `JSONPatch` whenever `patch` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// Warnings for the client.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A whole AdmissionReview answer.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewResponse {
    /// `admission.k8s.io/v1`.
    pub api_version: &'static str,
    /// `AdmissionReview`.
    pub kind: &'static str,
    /// The answer.
    pub response: AdmissionResponse,
}

/// The answer to request `uid` carrying `verdict`, and the size of its encoded patch in bytes
/// (0 without one). A denial never carries a patch.
pub fn respond(uid: &str, verdict: Verdict) -> (AdmissionReviewResponse, usize) {
    let Verdict {
        denial,
        patch,
        warnings,
    } = verdict;
    let (patch, patch_bytes) = match &denial {
        None if !patch.0.is_empty() => {
            let json = serde_json::to_vec(&patch).unwrap_or_else(|_| b"[]".to_vec());
            let bytes = json.len();
            (
                Some(base64::engine::general_purpose::STANDARD.encode(json)),
                bytes,
            )
        }
        _ => (None, 0),
    };
    let response = AdmissionResponse {
        uid: uid.to_string(),
        allowed: denial.is_none(),
        status: denial.map(|d| Status {
            status: "Failure",
            code: d.code,
            reason: d.reason,
            message: d.message,
        }),
        patch_type: patch.as_ref().map(|_| "JSONPatch"),
        patch,
        warnings,
    };
    (
        AdmissionReviewResponse {
            api_version: ADMISSION_API_VERSION,
            kind: ADMISSION_REVIEW_KIND,
            response,
        },
        patch_bytes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(request: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request,
        }))
        .unwrap()
    }

    #[test]
    fn a_minimal_request_is_read() {
        let body = review(json!({
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": "ns",
            "object": {"metadata": {"generateName": "p-"}},
            "dryRun": true,
        }));
        let request = parse_request(&body, ObjectView::Whole).unwrap();
        assert_eq!(request.uid, "u-1");
        assert_eq!(request.operation, Operation::Create);
        assert!(request.is_dry_run());
        assert_eq!(request.object_key(), "ns/p-");
    }

    /// What [`ObjectView::PodOnboarding`] must read: the whole object's `apiVersion`, `kind`,
    /// `metadata` and `spec.schedulerName`, and anything that is not an object whole.
    fn onboarding_part(whole: &Value) -> Value {
        let Value::Object(members) = whole else {
            return whole.clone();
        };
        let kept = members.iter().filter_map(|(key, value)| {
            let value = match (key.as_str(), value) {
                ("apiVersion" | "kind" | "metadata", _) => value.clone(),
                ("spec", Value::Object(spec)) => Value::Object(
                    spec.iter()
                        .filter(|(k, _)| *k == "schedulerName")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                ("spec", _) => value.clone(),
                _ => return None,
            };
            Some((key.clone(), value))
        });
        Value::Object(kept.collect())
    }

    #[test]
    fn a_pod_review_reads_only_what_onboarding_needs_and_the_same_values() {
        let objects = [
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"p-","labels":{"ray.io/cluster":"c"}},"spec":{"schedulerName":"volcano","containers":[{"name":"ray","image":"i","env":[{"name":"A","value":"\u00e9"}]}]},"status":{}}"#,
            r#"{"metadata":{"name":"p"},"spec":{"containers":[]}}"#,
            r#"{"spec":{"schedulerName":"a"},"spec":{"schedulerName":"b","x":1},"metadata":{"name":"first"},"metadata":{"name":"last"}}"#,
            r#"{"spec":"not an object","metadata":null}"#,
            r#"{"spec":null}"#,
            r#"{"spec":[{"schedulerName":"x"}]}"#,
            r#"{}"#,
            r#"[1,{"spec":{}}]"#,
            r#""a string""#,
            r#"null"#,
        ];
        assert_view_reads(
            ObjectView::PodOnboarding,
            &objects,
            onboarding_part,
            r#"{"spec":{"containers":[}}"#,
        );
    }

    /// What [`ObjectView::RayObject`] must read: the whole object without
    /// `metadata.managedFields`, and anything that is not an object whole.
    fn ray_part(whole: &Value) -> Value {
        let mut part = whole.clone();
        if let Some(Value::Object(metadata)) = part.get_mut("metadata") {
            metadata.remove("managedFields");
        }
        part
    }

    #[test]
    fn a_ray_review_reads_all_but_managed_fields_and_the_same_values() {
        let objects = [
            r#"{"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"c","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"a\":\"\u00e9\"}"},"managedFields":[{"manager":"kubectl","fieldsV1":{"f:spec":{"f:x":{}}}}]},"spec":{"headGroupSpec":{"rayStartParams":{}},"n":[-1,18446744073709551615,1.5e300,0.1,true,null,"s"]}}"#,
            r#"{"metadata":{"managedFields":null,"name":"first"},"metadata":{"name":"last","managedFields":[1],"managedFields":[2]}}"#,
            r#"{"metadata":"not an object","spec":{"metadata":{"managedFields":[]}}}"#,
            r#"{"metadata":[{"managedFields":[]}]}"#,
            r#"{"metadata":null}"#,
            r#"{}"#,
            r#"[1,{"metadata":{"managedFields":[]}}]"#,
            r#""a string""#,
            r#"-7"#,
            r#"null"#,
        ];
        // The member is skipped, not left unread: it must still be JSON.
        assert_view_reads(
            ObjectView::RayObject,
            &objects,
            ray_part,
            r#"{"metadata":{"managedFields":[}}"#,
        );
    }

    /// Checks that `view` reads each of `objects`, as the object and the old object of an
    /// UPDATE review, as `part` of what the whole read gives, with the same uid and key; and
    /// that a review whose object is the malformed `bad` is no AdmissionReview under it.
    fn assert_view_reads(view: ObjectView, objects: &[&str], part: fn(&Value) -> Value, bad: &str) {
        let review = |object: &str| {
            format!(
                r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{}},"operation":"UPDATE","namespace":"ns","object":{object},"oldObject":{object}}}}}"#
            )
        };
        for object in objects {
            let body = review(object);
            let whole = parse_request(body.as_bytes(), ObjectView::Whole).unwrap();
            let read = parse_request(body.as_bytes(), view).unwrap();
            let expected = whole.object.as_ref().map(part);
            assert_eq!(read.object, expected, "{object}");
            assert_eq!(read.old_object, expected, "{object}");
            assert_eq!(read.uid, whole.uid);
            assert_eq!(read.object_key(), whole.object_key(), "{object}");
        }
        let error = parse_request(review(bad).as_bytes(), view).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("the body is not an AdmissionReview"),
            "{error}"
        );
    }

    #[test]
    fn malformed_reviews_say_what_is_wrong() {
        let cases: [(&[u8], &str); 6] = [
            (b"not json", "the body is not an AdmissionReview"),
            (
                br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"}"#,
                "expected \"admission.k8s.io/v1\"",
            ),
            (
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
                "request: Required value",
            ),
            (
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"","kind":{},"operation":"CREATE"}}"#,
                "request.uid: Required value",
            ),
            (
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{},"operation":"PATCH"}}"#,
                "unknown variant `PATCH`",
            ),
            (
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":[1]}"#,
                "the body is not an AdmissionReview",
            ),
        ];
        for (body, expected) in cases {
            let error = parse_request(body, ObjectView::Whole)
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{error:?} lacks {expected:?}");
        }
    }

    #[test]
    fn a_taken_object_leaves_the_key_for_logs() {
        for (name, object, key) in [
            (
                None,
                json!({"metadata": {"generateName": "c-"}, "spec": {}}),
                "ns/c-",
            ),
            (
                Some(""),
                json!({"metadata": {"generateName": "c-"}}),
                "ns/c-",
            ),
            (
                Some("c"),
                json!({"metadata": {"name": "c"}, "spec": {}}),
                "ns/c",
            ),
            (None, json!({"metadata": {"name": "c"}}), "ns/"),
        ] {
            let mut request = parse_request(
                &review(
                    json!({"uid": "u", "kind": {"kind": "RayCluster"}, "operation": "CREATE",
                               "namespace": "ns", "name": name, "object": object}),
                ),
                ObjectView::Whole,
            )
            .unwrap();
            assert_eq!(request.take_object(), Some(object));
            assert_eq!(request.object_key(), key);
            assert!(
                request
                    .object
                    .as_ref()
                    .is_none_or(|o| o.get("spec").is_none())
            );
        }
    }

    #[test]
    fn the_one_pass_read_and_the_envelope_first_read_agree() {
        let bodies: [&[u8]; 9] = [
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"RayJob"},"operation":"UPDATE","name":"j","object":{"metadata":{"name":"j"},"spec":{"a":[1,2]}},"oldObject":{"metadata":{"name":"j"}}}}"#,
            br#"{"request":{"uid":"u","kind":{"kind":"Pod"},"operation":"CREATE","object":{"spec":{"schedulerName":"x","containers":[]}}},"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":null}"#,
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u"}}"#,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","kind":{},"operation":"CREATE"}}"#,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}"#,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"","kind":{},"operation":"CREATE"}}"#,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{},"operation":"CREATE"},"request":{"uid":"v","kind":{},"operation":"CREATE"}}"#,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{},"operation":"CREATE"}} trailing"#,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{},"operation":"CREATE","object":{"a":1,}}}"#,
        ];
        for body in bodies {
            for view in [
                ObjectView::Whole,
                ObjectView::PodOnboarding,
                ObjectView::RayObject,
            ] {
                assert_eq!(
                    format!("{:?}", parse_request(body, view)),
                    format!("{:?}", diagnose_request(body, view)),
                    "{}",
                    String::from_utf8_lossy(body)
                );
            }
        }
        // Not an AdmissionReview v1: said so, whatever its request holds.
        let error = parse_request(bodies[2], ObjectView::Whole).unwrap_err();
        assert!(matches!(error, ReviewError::WrongType { .. }), "{error}");
    }

    #[test]
    fn a_patch_is_base64_json_with_its_type_and_a_denial_has_none() {
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/a", "value": 1}])).unwrap();
        let (answer, bytes) = respond(
            "u",
            Verdict {
                patch: patch.clone(),
                warnings: vec!["w".into()],
                ..Verdict::default()
            },
        );
        let wire = serde_json::to_value(&answer).unwrap();
        let encoded = wire["response"]["patch"].as_str().unwrap();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap();
        assert_eq!(decoded.len(), bytes);
        assert_eq!(
            serde_json::from_slice::<Value>(&decoded).unwrap(),
            json!([{"op": "add", "path": "/a", "value": 1}])
        );
        assert_eq!(wire["response"]["patchType"], "JSONPatch");
        assert_eq!(wire["response"]["warnings"], json!(["w"]));
        assert!(wire["response"].get("status").is_none());

        let (denied, bytes) = respond(
            "u",
            Verdict {
                denial: Some(Denial::invalid("spec.x: bad")),
                patch,
                warnings: vec![],
            },
        );
        let wire = serde_json::to_value(&denied).unwrap();
        assert_eq!(bytes, 0);
        assert_eq!(wire["response"]["allowed"], false);
        assert!(wire["response"].get("patch").is_none());
        assert!(wire["response"].get("patchType").is_none());
        assert_eq!(
            wire["response"]["status"],
            json!({"status": "Failure", "code": 422, "reason": "Invalid", "message": "spec.x: bad"})
        );
    }
}
