//! Checking one manifest object as the API server and raygate's webhook would see it.
//!
//! The pipeline is the API server's: prune nulls and apply the CRD's defaults, validate against
//! the CRD schema, then run KubeRay's rules and raygate's own on the typed object. `ray.io/v1alpha1`
//! objects are checked against the v1alpha1 schema and then, like the API server does without a
//! conversion webhook, read as `ray.io/v1`.

use serde::Serialize;
use serde_json::Value;

use crate::crd;
use crate::finding::{Compat, Finding};
use crate::keys;
use crate::ray::v1::{RayCluster, RayJob};
use crate::sizing::{self, GangSize, SizingError};
use crate::validation::{self, ValidationContext};
use crate::volcano::PodGroup;

/// The Ray kinds raygate validates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RayKind {
    /// `RayJob`.
    RayJob,
    /// `RayCluster`.
    RayCluster,
}

/// The served `ray.io` versions.
pub const RAY_API_VERSIONS: [&str; 2] = ["ray.io/v1", "ray.io/v1alpha1"];

impl RayKind {
    /// The kind of a manifest object, if raygate validates it.
    pub fn of(api_version: &str, kind: &str) -> Option<RayKind> {
        if !RAY_API_VERSIONS.contains(&api_version) {
            return None;
        }
        match kind {
            "RayJob" => Some(RayKind::RayJob),
            "RayCluster" => Some(RayKind::RayCluster),
            _ => None,
        }
    }
}

/// The verdict on one object.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReport {
    /// `apiVersion` as written.
    pub api_version: String,
    /// `kind` as written.
    pub kind: String,
    /// `metadata.namespace`, if written.
    pub namespace: Option<String>,
    /// `metadata.name`, if written.
    pub name: Option<String>,
    /// `metadata.generateName`, when written and `name` is not (the API server picks the name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<String>,
    /// Whether the object has no error findings (warnings allowed).
    pub valid: bool,
    /// Every broken rule, in evaluation order.
    pub findings: Vec<Finding>,
}

impl ObjectReport {
    /// The object's name for messages: its name, or its `generateName` with
    /// [`keys::GENERATED_SUFFIX`] for what the API server will append.
    pub fn display_name(&self) -> String {
        keys::display_name(self.name.as_deref(), self.generate_name.as_deref())
    }
}

/// The object after defaulting, when it could be read as a `ray.io/v1` type.
#[derive(Clone, Debug)]
pub enum Typed {
    /// A RayJob.
    RayJob(Box<RayJob>),
    /// A RayCluster.
    RayCluster(Box<RayCluster>),
}

/// What checking an object found, and the typed object when schema validation passed.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The verdict.
    pub report: ObjectReport,
    /// The defaulted object as `ray.io/v1`; `None` when its schema is broken.
    pub typed: Option<Typed>,
    /// The object's gang, sized while checking; `None` when there is no typed object.
    pub gang: Option<Result<GangSize, SizingError>>,
}

impl Checked {
    /// The PodGroup that gang-schedules the object, from the gang sized while checking;
    /// `None` when the object could not be read. For an object with only a `generateName`, the
    /// group's name shows [`keys::GENERATED_SUFFIX`] where the API server's characters will be.
    pub fn pod_group(&self) -> Option<Result<PodGroup, SizingError>> {
        let gang = match self.gang.as_ref()? {
            Ok(gang) => gang.clone(),
            Err(e) => return Some(Err(e.clone())),
        };
        let group = match self.typed.as_ref()? {
            Typed::RayJob(job) => sizing::ray_job_pod_group_of_size(job, gang),
            Typed::RayCluster(cluster) => sizing::ray_cluster_pod_group_of_size(cluster, gang),
        };
        Some(group.map(|mut group| {
            if self.report.generate_name.is_some() {
                group.metadata.name = Some(keys::pod_group_name(&self.report.display_name()));
            }
            group
        }))
    }
}

/// A manifest object's `apiVersion` and `kind`, if both are strings.
pub fn type_meta(value: &Value) -> Option<(&str, &str)> {
    Some((
        value.get("apiVersion")?.as_str()?,
        value.get("kind")?.as_str()?,
    ))
}

/// The Ray kind of a manifest object, `None` for everything [`check_object`] skips.
pub fn ray_kind(value: &Value) -> Option<RayKind> {
    let (api_version, kind) = type_meta(value)?;
    RayKind::of(api_version, kind)
}

fn metadata_str(value: &Value, key: &str) -> Option<String> {
    value
        .get("metadata")?
        .get(key)?
        .as_str()
        .map(str::to_string)
}

/// Checks one object; `None` when it is not a RayJob or RayCluster. Takes the object by value:
/// defaulting rewrites it in place, and a copy per object would dominate bulk validation.
pub fn check_object(mut object: Value, ctx: &ValidationContext) -> Option<Checked> {
    let ray_kind = ray_kind(&object)?;
    let (api_version, kind) = type_meta(&object)?;
    let (api_version, kind) = (api_version.to_string(), kind.to_string());
    let namespace = metadata_str(&object, "namespace");
    let name = metadata_str(&object, "name");
    let generate_name = metadata_str(&object, "generateName")
        .filter(|g| !g.is_empty() && name.as_deref().is_none_or(str::is_empty));
    if let Value::Object(map) = &mut object {
        // Go's zero value: an object without `spec` is checked as one with an empty spec.
        map.entry("spec")
            .or_insert_with(|| Value::Object(Default::default()));
    }
    let (api_version, kind) = (api_version.as_str(), kind.as_str());
    let unwritten = unwritten_replicas(&object);
    let mut findings = crd::default_and_validate(api_version, kind, &mut object);
    let typed = if findings.iter().any(Finding::is_error) {
        None
    } else {
        if let Value::Object(map) = &mut object {
            map.insert("apiVersion".into(), Value::String("ray.io/v1".into()));
        }
        match decode(ray_kind, object) {
            Ok(typed) => Some(typed),
            Err(e) => {
                findings.push(Finding::error("decode", "", e.to_string(), Compat::Kuberay));
                None
            }
        }
    };
    let gang = typed.as_ref().map(|typed| {
        findings.extend(match typed {
            Typed::RayJob(job) => validation::validate_ray_job(job, ctx),
            Typed::RayCluster(cluster) => validation::validate_ray_cluster(cluster, ctx),
        });
        let gang = match typed {
            Typed::RayJob(job) => sizing::ray_job_gang(job),
            Typed::RayCluster(cluster) => sizing::cluster_gang(&cluster.spec, "spec"),
        };
        findings.extend(sizing_finding(&gang));
        gang
    });
    mark_defaulted_replicas(&mut findings, &unwritten);
    let report = ObjectReport {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        namespace,
        name,
        generate_name,
        valid: !findings.iter().any(Finding::is_error),
        findings,
    };
    Some(Checked {
        report,
        typed,
        gang,
    })
}

fn decode(kind: RayKind, object: Value) -> Result<Typed, serde_json::Error> {
    Ok(match kind {
        RayKind::RayJob => Typed::RayJob(Box::new(serde_json::from_value(object)?)),
        RayKind::RayCluster => Typed::RayCluster(Box::new(serde_json::from_value(object)?)),
    })
}

/// Field paths of the worker groups' `replicas` the object leaves out (or writes as null): the
/// CRD defaults them to 0 before any rule sees them.
fn unwritten_replicas(object: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    for (prefix, pointer) in [
        ("spec", "/spec/workerGroupSpecs"),
        (
            "spec.rayClusterSpec",
            "/spec/rayClusterSpec/workerGroupSpecs",
        ),
    ] {
        let groups = object.pointer(pointer).and_then(Value::as_array);
        for (i, group) in groups.into_iter().flatten().enumerate() {
            if group.get("replicas").is_none_or(Value::is_null) {
                paths.push(format!("{prefix}.workerGroupSpecs[{i}].replicas"));
            }
        }
    }
    paths
}

/// A clamped `replicas` the user never wrote is the CRD's default: say so, instead of
/// presenting the 0 as written.
fn mark_defaulted_replicas(findings: &mut [Finding], unwritten: &[String]) {
    for finding in findings.iter_mut().filter(|f| {
        f.rule == crate::validation::raygate_rules::WORKER_GROUP_REPLICAS_OUT_OF_RANGE
            && unwritten.contains(&f.field)
    }) {
        finding.message = finding.message.replacen(
            ": replicas 0 is outside",
            ": replicas 0 (defaulted) is outside",
            1,
        );
    }
}

/// Quantities that cannot be summed make the gang unsizable: report them where they are.
fn sizing_finding(gang: &Result<GangSize, SizingError>) -> Option<Finding> {
    match gang {
        Err(SizingError::Quantity { field, source }) => Some(Finding::error(
            "resource-quantity",
            field.clone(),
            source.to_string(),
            Compat::Kuberay,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(value: Value) -> Checked {
        check_object(value, &ValidationContext::default()).expect("a Ray kind")
    }

    fn job(spec: Value) -> Value {
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
               "metadata": {"name": "demo", "namespace": "ml"}, "spec": spec})
    }

    fn cluster_spec() -> Value {
        json!({"headGroupSpec": {"template": {"spec": {"containers": [
            {"name": "head", "image": "rayproject/ray:2.60.0",
             "resources": {"requests": {"cpu": 1, "memory": "2Gi"}}}]}}},
               "workerGroupSpecs": [{"groupName": "w", "template": {"spec": {"containers": [
            {"name": "w", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}]})
    }

    #[test]
    fn other_kinds_are_not_checked() {
        let ctx = ValidationContext::default();
        assert!(check_object(json!({"apiVersion": "v1", "kind": "Pod"}), &ctx).is_none());
        assert!(
            check_object(
                json!({"apiVersion": "ray.io/v1", "kind": "RayService"}),
                &ctx
            )
            .is_none()
        );
        assert!(check_object(json!({"kind": "RayJob"}), &ctx).is_none());
    }

    #[test]
    fn a_valid_job_is_defaulted_before_it_is_read() {
        let checked = check(job(
            json!({"entrypoint": "python x.py", "rayClusterSpec": cluster_spec()}),
        ));
        assert!(checked.report.valid, "{:?}", checked.report.findings);
        let Some(Typed::RayJob(job)) = checked.typed else {
            panic!("not decoded")
        };
        assert_eq!(job.spec.submission_mode.as_deref(), Some("K8sJobMode"));
        let group = &job
            .spec
            .ray_cluster_spec
            .unwrap()
            .worker_group_specs
            .unwrap()[0];
        assert_eq!(
            (
                group.replicas,
                group.min_replicas,
                group.max_replicas,
                group.num_of_hosts
            ),
            (Some(0), Some(0), Some(i32::MAX), Some(1))
        );
        assert_eq!(checked.report.namespace.as_deref(), Some("ml"));
    }

    #[test]
    fn schema_errors_stop_before_the_rules() {
        let checked = check(job(
            json!({"backoffLimit": "three", "rayClusterSpec": cluster_spec()}),
        ));
        assert!(!checked.report.valid);
        assert!(checked.typed.is_none());
        assert!(
            checked
                .report
                .findings
                .iter()
                .any(|f| f.field == "spec.backoffLimit" && f.is_error())
        );
    }

    #[test]
    fn rule_findings_are_reported_with_kuberays_message() {
        let checked = check(job(
            json!({"suspend": true, "rayClusterSpec": cluster_spec()}),
        ));
        assert!(!checked.report.valid);
        assert!(checked.report.findings.iter().any(|f| f.message
            == "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended"));
    }

    #[test]
    fn the_pod_group_reuses_the_gang_sized_while_checking() {
        let checked = check(job(json!({"rayClusterSpec": cluster_spec()})));
        let Some(Typed::RayJob(rayjob)) = &checked.typed else {
            panic!("not decoded")
        };
        let from_check = checked.pod_group().expect("typed").expect("sized");
        let from_scratch = sizing::ray_job_pod_group(rayjob).unwrap();
        assert_eq!(from_check.spec, from_scratch.spec);
        assert_eq!(from_check.metadata, from_scratch.metadata);
        assert_eq!(from_check.spec.min_member, Some(1));

        let selector = check(job(
            json!({"clusterSelector": {"ray.io/cluster": "shared"}}),
        ));
        assert!(matches!(
            selector.pod_group(),
            Some(Err(SizingError::ClusterSelector(_)))
        ));
        let broken = check(job(json!({"backoffLimit": "x"})));
        assert!(broken.pod_group().is_none());
    }

    #[test]
    fn unsizable_quantities_are_findings() {
        let mut spec = cluster_spec();
        spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]
            ["cpu"] = json!("lots");
        let checked = check(job(json!({"rayClusterSpec": spec})));
        assert!(!checked.report.valid);
        assert!(checked.report.findings.iter().any(|f| f.field
            == "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0].resources.requests.cpu"));
    }

    #[test]
    fn a_clamped_replicas_nobody_wrote_is_called_defaulted() {
        let mut spec = cluster_spec();
        spec["workerGroupSpecs"][0]["minReplicas"] = json!(2);
        spec["workerGroupSpecs"][0]["maxReplicas"] = json!(4);
        let message = |spec: Value| {
            check(job(json!({"entrypoint": "x", "rayClusterSpec": spec})))
                .report
                .findings
                .into_iter()
                .find(|f| f.field == "spec.rayClusterSpec.workerGroupSpecs[0].replicas")
                .map(|f| f.message)
                .expect("the replicas warning")
        };
        assert_eq!(
            message(spec.clone()),
            "worker group w: replicas 0 (defaulted) is outside [minReplicas 2, maxReplicas 4] and will be clamped to 2"
        );
        spec["workerGroupSpecs"][0]["replicas"] = json!(0);
        assert_eq!(
            message(spec),
            "worker group w: replicas 0 is outside [minReplicas 2, maxReplicas 4] and will be clamped to 2"
        );
    }

    #[test]
    fn v1alpha1_objects_are_read_as_v1() {
        let mut value = job(json!({"entrypoint": "python x.py", "rayClusterSpec": cluster_spec()}));
        value["apiVersion"] = json!("ray.io/v1alpha1");
        value["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"] = json!({});
        value["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["rayStartParams"] = json!({});
        let checked = check(value);
        assert!(checked.report.valid, "{:?}", checked.report.findings);
        assert_eq!(checked.report.api_version, "ray.io/v1alpha1");
        assert!(matches!(checked.typed, Some(Typed::RayJob(_))));
    }
}
