//! The `pods/resize` subresource (in-place resize, `InPlacePodVerticalScaling`, GA in 1.35):
//! the resize strategy's `dropNonResizeUpdates` and `ValidatePodResize`.
//!
//! 1.35 differs from 1.33/1.34 in one rule: memory limits may be decreased (and added) with
//! a `NotRequired` resize policy; the kubelet checks the usage before it applies a lower
//! limit (KEP-1287, "memory limit decreases", GA). What stays: only cpu and memory requests
//! and limits change, none may be removed, the QoS class stays, pod-level resources and static
//! pods are not resized, and regular init containers' resources are immutable.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::field::{FieldError, Path};
use super::meta::validate_object_meta_update;
use super::{ValidationErrors, into_result, pod_metadata_and_spec_errors};
use crate::pod::{is_sidecar, qos_class};

/// `kubernetes.io/config.mirror`: a static pod's mirror.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// `podResizeStrategy.PrepareForUpdate`'s `dropNonResizeUpdates`: the old pod with only the
/// containers' `resources` and `resizePolicy` (regular and init containers, matched by name)
/// taken from `new`. When containers were added or removed, `new` is returned as is and
/// validation reports it.
#[must_use]
pub fn drop_non_resize_updates(new: &Pod, old: &Pod) -> Pod {
    let empty = PodSpec::default();
    let (new_spec, old_spec) = (
        new.spec.as_ref().unwrap_or(&empty),
        old.spec.as_ref().unwrap_or(&empty),
    );
    let new_inits = new_spec.init_containers.as_deref().unwrap_or_default();
    let old_inits = old_spec.init_containers.as_deref().unwrap_or_default();
    if new_spec.containers.len() != old_spec.containers.len() || new_inits.len() != old_inits.len()
    {
        return new.clone();
    }
    let take = |new: &[Container], old: &[Container]| -> Vec<Container> {
        old.iter()
            .map(|o| {
                let mut c = o.clone();
                if let Some(n) = new.iter().find(|n| n.name == o.name) {
                    c.resources.clone_from(&n.resources);
                    c.resize_policy.clone_from(&n.resize_policy);
                }
                c
            })
            .collect()
    };
    let mut out = old.clone();
    let spec = out.spec.get_or_insert_with(PodSpec::default);
    spec.containers = take(&new_spec.containers, &old_spec.containers);
    if spec.init_containers.is_some() {
        spec.init_containers = Some(take(new_inits, old_inits));
    }
    out
}

/// `ValidatePodResize` (1.35): `new` is the old pod with the resize applied
/// ([`drop_non_resize_updates`]).
///
/// # Errors
///
/// Every problem found, in the API server's order.
pub fn validate_pod_resize(new: &Pod, old: &Pod) -> Result<(), ValidationErrors> {
    into_result(new, pod_resize_errors(new, old))
}

fn pod_resize_errors(new: &Pod, old: &Pod) -> Vec<FieldError> {
    let mut errs =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    // An update may keep what the stored pod uses with its gate off.
    let gates = crate::FeatureGates::default().for_update(old.spec.as_ref());
    errs.extend(pod_metadata_and_spec_errors(new, gates));
    let empty = PodSpec::default();
    let new_spec = new.spec.as_ref().unwrap_or(&empty);
    let old_spec = old.spec.as_ref().unwrap_or(&empty);
    let pod_level = |s: &PodSpec| {
        s.resources.as_ref().is_some_and(|r| {
            r.requests.as_ref().map_or(0, |m| m.len()) + r.limits.as_ref().map_or(0, |m| m.len())
                > 0
        })
    };
    if pod_level(old_spec) || pod_level(new_spec) {
        return vec![FieldError::forbidden(
            &Path::new(""),
            "pods with pod-level resources cannot be resized",
        )];
    }
    if old
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
    {
        return vec![FieldError::forbidden(
            &Path::new(""),
            "static pods cannot be resized",
        )];
    }
    if old_spec.os.as_ref().is_some_and(|os| os.name == "windows") {
        return vec![FieldError::forbidden(
            &Path::new(""),
            "windows pods cannot be resized",
        )];
    }
    let spec_path = Path::new("spec");
    // `GetPodQOS(oldPod)`: the class the status carries, else computed.
    let old_qos = old
        .status
        .as_ref()
        .and_then(|s| s.qos_class.clone())
        .unwrap_or_else(|| qos_class(old_spec).as_str().to_owned());
    if old_qos != qos_class(new_spec).as_str() {
        let shown = new
            .status
            .as_ref()
            .and_then(|s| s.qos_class.clone())
            .unwrap_or_default();
        errs.push(FieldError::invalid(
            &spec_path,
            shown,
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    let new_inits = new_spec.init_containers.as_deref().unwrap_or_default();
    let old_inits = old_spec.init_containers.as_deref().unwrap_or_default();
    if new_spec.containers.len() != old_spec.containers.len() || new_inits.len() != old_inits.len()
    {
        errs.push(FieldError::forbidden(
            &spec_path,
            "only cpu and memory resources are mutable",
        ));
        return errs;
    }
    for (i, (n, o)) in new_inits.iter().zip(old_inits).enumerate() {
        if is_sidecar(o) {
            errs.extend(container_resize_errors(
                n,
                o,
                &spec_path
                    .child("initContainers")
                    .index(i)
                    .child("resources"),
            ));
        }
    }
    for (i, (n, o)) in new_spec
        .containers
        .iter()
        .zip(&old_spec.containers)
        .enumerate()
    {
        errs.extend(container_resize_errors(
            n,
            o,
            &spec_path.child("containers").index(i).child("resources"),
        ));
    }
    let mut munged = new_spec.clone();
    for (c, o) in munged.containers.iter_mut().zip(&old_spec.containers) {
        keep_old_cpu_memory(c, o);
        if c != o {
            errs.push(FieldError::forbidden(
                &spec_path,
                "only cpu and memory resources are mutable",
            ));
        }
    }
    for (c, o) in munged.init_containers.iter_mut().flatten().zip(old_inits) {
        if is_sidecar(o) {
            keep_old_cpu_memory(c, o);
            if c != o {
                errs.push(FieldError::forbidden(
                    &spec_path,
                    "only cpu and memory resources for sidecar containers are mutable",
                ));
            }
        } else if c != o {
            errs.push(FieldError::forbidden(
                &spec_path,
                "resources for non-sidecar init containers are immutable",
            ));
        }
    }
    if errs.is_empty() && &munged != old_spec {
        errs.push(FieldError::forbidden(
            &spec_path,
            "only cpu and memory resources are mutable",
        ));
    }
    errs
}

/// `validateContainerResize` (1.35): requests and limits may not be removed.
fn container_resize_errors(new: &Container, old: &Container, path: &Path) -> Vec<FieldError> {
    let none = ResourceRequirements::default();
    let (n, o) = (
        new.resources.as_ref().unwrap_or(&none),
        old.resources.as_ref().unwrap_or(&none),
    );
    let removed = |n: Option<&BTreeMap<String, Quantity>>,
                   o: Option<&BTreeMap<String, Quantity>>| {
        o.into_iter()
            .flatten()
            .any(|(k, _)| !n.is_some_and(|n| n.contains_key(k)))
    };
    let mut errs = Vec::new();
    if removed(n.requests.as_ref(), o.requests.as_ref()) {
        errs.push(FieldError::forbidden(
            &path.child("requests"),
            "resource requests cannot be removed",
        ));
    }
    if removed(n.limits.as_ref(), o.limits.as_ref()) {
        errs.push(FieldError::forbidden(
            &path.child("limits"),
            "resource limits cannot be removed",
        ));
    }
    errs
}

/// `dropCPUMemoryResourcesFromContainer`: `c`'s cpu and memory requests and limits replaced by
/// `old`'s (lists `old` does not have are dropped, as upstream does). The resize policy is
/// compared as it is: the strategy takes it from the request, and validation then refuses a
/// change of it.
fn keep_old_cpu_memory(c: &mut Container, old: &Container) {
    let none = ResourceRequirements::default();
    let o = old.resources.as_ref().unwrap_or(&none);
    let mut r = c.resources.take().unwrap_or_default();
    let munge = |list: Option<BTreeMap<String, Quantity>>,
                 old: Option<&BTreeMap<String, Quantity>>| {
        let old = old?;
        let mut list = list.unwrap_or_default();
        list.remove("cpu");
        list.remove("memory");
        for key in ["cpu", "memory"] {
            if let Some(q) = old.get(key) {
                list.insert(key.to_owned(), q.clone());
            }
        }
        Some(list)
    };
    r.limits = munge(r.limits, o.limits.as_ref());
    r.requests = munge(r.requests, o.requests.as_ref());
    r.claims.clone_from(&o.claims);
    c.resources = (r != none || old.resources.is_some()).then_some(r);
}
