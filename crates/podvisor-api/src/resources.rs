//! A pod's aggregate container requests and limits, as Kubernetes'
//! `component-helpers/resource` (`AggregateContainerRequests`,
//! `AggregateContainerLimits`) computes them without pod overhead: regular
//! containers and sidecars run together, each regular init container runs
//! beside the sidecars started before it, and the pod needs the larger of
//! the two phases. Used by pod-level resources (V15): defaulting and
//! validation.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;

use crate::pod::is_sidecar;
use crate::quantity::Quantity;

/// Resource name → quantity, in name order.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Whether pod-level `spec.resources` may name this resource
/// (`IsSupportedPodLevelResource`): cpu, memory and huge pages.
#[must_use]
pub fn is_supported_pod_level_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory") || name.starts_with("hugepages-")
}

/// The effective requests of the pod's containers (`AggregateContainerRequests`).
#[must_use]
pub fn aggregate_container_requests(spec: &PodSpec) -> ResourceList {
    aggregate(spec, |r| r.requests.as_ref())
}

/// The effective limits of the pod's containers (`AggregateContainerLimits`).
#[must_use]
pub fn aggregate_container_limits(spec: &PodSpec) -> ResourceList {
    aggregate(spec, |r| r.limits.as_ref())
}

fn aggregate(
    spec: &PodSpec,
    pick: fn(&ResourceRequirements) -> Option<&BTreeMap<String, WireQuantity>>,
) -> ResourceList {
    let list_of = |c: &Container| -> ResourceList {
        c.resources
            .as_ref()
            .and_then(pick)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Quantity::parse(&v.0).map(|q| (k.clone(), q)))
            .collect()
    };
    let mut total = ResourceList::new();
    for c in &spec.containers {
        add_into(&mut total, &list_of(c));
    }
    // Sidecars run through both phases; a regular init container runs with
    // the sidecars declared before it.
    let mut sidecars = ResourceList::new();
    let mut init_peak = ResourceList::new();
    for c in spec.init_containers.iter().flatten() {
        let own = list_of(c);
        let phase = if is_sidecar(c) {
            add_into(&mut total, &own);
            add_into(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut with_sidecars = own;
            add_into(&mut with_sidecars, &sidecars);
            with_sidecars
        };
        max_into(&mut init_peak, &phase);
    }
    max_into(&mut total, &init_peak);
    total
}

fn add_into(acc: &mut ResourceList, other: &ResourceList) {
    for (k, v) in other {
        // A first value is copied (keeping its binary or decimal format).
        match acc.get_mut(k) {
            Some(e) => *e = e.saturating_add(*v),
            None => {
                acc.insert(k.clone(), *v);
            }
        }
    }
}

fn max_into(acc: &mut ResourceList, other: &ResourceList) {
    for (k, v) in other {
        match acc.get_mut(k) {
            Some(e) if *e >= *v => {}
            Some(e) => *e = *v,
            None => {
                acc.insert(k.clone(), *v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).expect("a pod spec")
    }

    #[test]
    fn v15_aggregate_takes_the_larger_phase() {
        let s = spec(json!({
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            ],
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m"}}},
            ],
        }));
        let got = aggregate_container_requests(&s);
        // cpu: max(100m + 500m + 250m, 2 + 100m); memory: max(2Gi, 1Gi).
        assert_eq!(got["cpu"].canonical(), "2100m");
        assert_eq!(got["memory"].canonical(), "2Gi");
        assert!(aggregate_container_limits(&s).is_empty());
    }
}
