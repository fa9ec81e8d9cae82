//! Container resources: names, quantities, requests against limits, and
//! resize policies; pod-level resources (V15).

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;

use super::Ctx;
use super::field::{FieldError, Path};
use super::names::is_qualified_name;
use crate::quantity::{QUANTITY_SYNTAX_MSG, Quantity};
use crate::resources::{aggregate_container_requests, is_supported_pod_level_resource};

fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || is_hugepages(name)
}

fn is_standard_resource(name: &str) -> bool {
    is_standard_container_resource(name)
        || matches!(
            name,
            "requests.cpu"
                | "requests.memory"
                | "requests.ephemeral-storage"
                | "limits.cpu"
                | "limits.memory"
                | "limits.ephemeral-storage"
                | "pods"
                | "services"
                | "replicationcontrollers"
                | "resourcequotas"
                | "secrets"
                | "configmaps"
                | "persistentvolumeclaims"
                | "storage"
                | "requests.storage"
                | "services.nodeports"
                | "services.loadbalancers"
        )
        || name.starts_with("requests.hugepages-")
}

fn is_extended_resource(name: &str) -> bool {
    !is_native_resource(name)
        && !name.starts_with("requests.")
        && is_qualified_name(&format!("requests.{name}")).is_empty()
}

fn is_overcommit_allowed(name: &str) -> bool {
    is_native_resource(name) && !is_hugepages(name)
}

fn validate_resource_name(name: &str, path: &Path) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = is_qualified_name(name)
        .into_iter()
        .map(|m| FieldError::invalid(path, name, m))
        .collect();
    if errs.is_empty() && !name.contains('/') && !is_standard_resource(name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "must be a standard resource type or fully qualified",
        ));
    }
    if !name.contains('/') {
        if !is_standard_container_resource(name) {
            errs.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native_resource(name) && !is_extended_resource(name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
    errs
}

fn validate_quantity_value(name: &str, q: &Quantity, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if q.is_negative() {
        errs.push(FieldError::invalid(
            path,
            q.canonical(),
            "must be greater than or equal to 0",
        ));
    }
    if is_extended_resource(name) && !q.is_integer() {
        errs.push(FieldError::invalid(
            path,
            q.canonical(),
            "must be an integer",
        ));
    }
    errs
}

fn parse_list<'a>(
    list: Option<&'a BTreeMap<String, WireQuantity>>,
    path: &Path,
    errs: &mut Vec<FieldError>,
) -> BTreeMap<&'a str, Quantity> {
    let mut out = BTreeMap::new();
    for (name, raw) in list.into_iter().flatten() {
        let p = path.key(name);
        errs.extend(validate_resource_name(name, &p));
        match Quantity::parse(&raw.0) {
            Some(q) => {
                errs.extend(validate_quantity_value(name, &q, &p));
                out.insert(name.as_str(), q);
            }
            None => errs.push(FieldError::invalid(&p, &raw.0, QUANTITY_SYNTAX_MSG)),
        }
    }
    out
}

/// Kubernetes' `ValidateContainerResourceRequirements` (without claims).
pub(crate) fn validate_resources(r: &ResourceRequirements, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let lim_path = path.child("limits");
    let req_path = path.child("requests");
    let limits = parse_list(r.limits.as_ref(), &lim_path, &mut errs);
    let requests = parse_list(r.requests.as_ref(), &req_path, &mut errs);
    for (name, q) in &requests {
        match limits.get(name) {
            Some(limit) => {
                if q != limit && !is_overcommit_allowed(name) {
                    errs.push(FieldError::invalid(
                        &req_path,
                        q.canonical(),
                        format!("must be equal to {name} limit of {}", limit.canonical()),
                    ));
                } else if q > limit {
                    errs.push(FieldError::invalid(
                        &req_path,
                        q.canonical(),
                        format!(
                            "must be less than or equal to {name} limit of {}",
                            limit.canonical()
                        ),
                    ));
                }
            }
            None if !is_overcommit_allowed(name) => errs.push(FieldError::required(
                &lim_path,
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
    }
    let cpu_or_memory =
        |m: &BTreeMap<&str, Quantity>| m.contains_key("cpu") || m.contains_key("memory");
    let hugepages = |m: &BTreeMap<&str, Quantity>| m.keys().any(|k| is_hugepages(k));
    if !cpu_or_memory(&limits)
        && !cpu_or_memory(&requests)
        && (hugepages(&limits) || hugepages(&requests))
    {
        errs.push(FieldError::forbidden(
            path,
            "HugePages require cpu or memory",
        ));
    }
    errs
}

/// `validatePodResources` (V15, PodLevelResources on): pod-level
/// `spec.resources` names cpu, memory or huge pages only, requests do not
/// exceed limits, the pod requests cover the containers' aggregate requests
/// and no container limit exceeds the pod's.
pub(crate) fn validate_pod_resources(spec: &PodSpec, path: &Path) -> Vec<FieldError> {
    let Some(r) = &spec.resources else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    if r.claims.is_some() {
        errs.push(FieldError::forbidden(
            &path.child("claims"),
            "claims cannot be set for Resources at pod-level",
        ));
    }
    let lim_path = path.child("limits");
    let req_path = path.child("requests");
    let limits = parse_pod_list(r.limits.as_ref(), &lim_path, &mut errs);
    let requests = parse_pod_list(r.requests.as_ref(), &req_path, &mut errs);
    for (name, q) in &requests {
        if let Some(limit) = limits.get(name)
            && q > limit
        {
            errs.push(FieldError::invalid(
                &req_path,
                q.canonical(),
                format!(
                    "must be less than or equal to {name} limit of {}",
                    limit.canonical()
                ),
            ));
        }
    }
    // validatePodResourceConsistency: every resource the containers request
    // (a missing pod request counts as zero).
    for (name, aggregate) in aggregate_container_requests(spec) {
        let pod_request = requests.get(name.as_str()).copied().unwrap_or_default();
        if aggregate > pod_request {
            errs.push(FieldError::invalid(
                &req_path.key(&name),
                pod_request.canonical(),
                format!(
                    "must be greater than or equal to aggregate container requests of {}",
                    aggregate.canonical()
                ),
            ));
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        let Some(c_limits) = c.resources.as_ref().and_then(|r| r.limits.as_ref()) else {
            continue;
        };
        for (name, raw) in c_limits {
            let (Some(pod_limit), Some(limit)) =
                (limits.get(name.as_str()), Quantity::parse(&raw.0))
            else {
                continue;
            };
            if limit > *pod_limit {
                errs.push(FieldError::invalid(
                    &path.child("containers").index(i).key(name).child("limits"),
                    limit.canonical(),
                    format!(
                        "must be less than or equal to pod limits of {}",
                        pod_limit.canonical()
                    ),
                ));
            }
        }
    }
    errs
}

/// Names and quantities of one pod-level list (`validatePodResourceName`,
/// `ValidateResourceQuantityValue`).
fn parse_pod_list<'a>(
    list: Option<&'a BTreeMap<String, WireQuantity>>,
    path: &Path,
    errs: &mut Vec<FieldError>,
) -> BTreeMap<&'a str, Quantity> {
    let mut out = BTreeMap::new();
    for (name, raw) in list.into_iter().flatten() {
        let p = path.key(name);
        let mut name_errs: Vec<FieldError> = is_qualified_name(name)
            .into_iter()
            .map(|m| FieldError::invalid(&p, name, m))
            .collect();
        if name_errs.is_empty() && !name.contains('/') && !is_standard_resource(name) {
            name_errs.push(FieldError::invalid(
                &p,
                name,
                "must be a standard resource type or fully qualified",
            ));
        }
        if name_errs.is_empty() && !is_supported_pod_level_resource(name) {
            name_errs.push(FieldError::not_supported(&p, name, &["cpu", "memory"]));
        }
        errs.extend(name_errs);
        match Quantity::parse(&raw.0) {
            Some(q) => {
                errs.extend(validate_quantity_value(name, &q, &p));
                out.insert(name.as_str(), q);
            }
            None => errs.push(FieldError::invalid(&p, &raw.0, QUANTITY_SYNTAX_MSG)),
        }
    }
    out
}

pub(crate) fn validate_resize_policy(c: &Container, path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = HashSet::new();
    for (i, p) in c.resize_policy.iter().flatten().enumerate() {
        if !seen.insert(p.resource_name.as_str()) {
            errs.push(FieldError::duplicate(&path.index(i), &p.resource_name));
        }
        match p.resource_name.as_str() {
            "cpu" | "memory" => {}
            "" => errs.push(FieldError::required(path, "")),
            other => errs.push(FieldError::not_supported(path, other, &["cpu", "memory"])),
        }
        match p.restart_policy.as_str() {
            "NotRequired" | "RestartContainer" => {}
            "" => errs.push(FieldError::required(path, "")),
            other => errs.push(FieldError::not_supported(
                path,
                other,
                &["NotRequired", "RestartContainer"],
            )),
        }
        if ctx.pod_restart_policy == "Never" && p.restart_policy != "NotRequired" {
            errs.push(FieldError::invalid(
                path,
                &p.restart_policy,
                "must be 'NotRequired' when `restartPolicy` is 'Never'",
            ));
        }
    }
    errs
}
