//! NodeResourcesFit (`pkg/scheduler/framework/plugins/noderesources/fit.go`) and the requests
//! it counts (`component-helpers/resource` `PodRequests` with the status resources of an
//! in-place resize and pod-level resources, as 1.35's scheduler asks for them).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;

use crate::quantity::Quantity;
use crate::resources::{
    ResourceList, aggregate_container_requests, is_supported_pod_level_resource,
};

fn parse_list(list: Option<&BTreeMap<String, WireQuantity>>) -> ResourceList {
    list.into_iter()
        .flatten()
        .filter_map(|(k, v)| Quantity::parse(&v.0).map(|q| (k.clone(), q)))
        .collect()
}

fn max_into(acc: &mut ResourceList, other: &ResourceList) {
    for (k, v) in other {
        let e = acc.entry(k.clone()).or_insert(*v);
        if *v > *e {
            *e = *v;
        }
    }
}

fn to_wire(list: &ResourceList) -> BTreeMap<String, WireQuantity> {
    list.iter()
        .map(|(k, v)| (k.clone(), WireQuantity(v.canonical())))
        .collect()
}

/// `determineContainerReqs`: a container whose status reports resources counts the largest
/// of its spec's requests, the status's and the allocated ones (only the status's and the
/// allocated ones while the pod's resize is `Infeasible`).
fn status_requests(c: &Container, cs: &ContainerStatus, infeasible: bool) -> Option<ResourceList> {
    let reported = cs.resources.as_ref()?;
    let mut reqs = if infeasible {
        ResourceList::new()
    } else {
        parse_list(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
    };
    max_into(&mut reqs, &parse_list(reported.requests.as_ref()));
    max_into(&mut reqs, &parse_list(cs.allocated_resources.as_ref()));
    Some(reqs)
}

/// The pod's spec with each container's requests as the scheduler counts them
/// (`UseStatusResources`).
fn counted_spec(pod: &Pod, spec: &PodSpec) -> PodSpec {
    let mut spec = spec.clone();
    let Some(status) = &pod.status else {
        return spec;
    };
    let infeasible = status.conditions.iter().flatten().any(|c| {
        c.type_ == crate::pod::POD_RESIZE_PENDING && c.reason.as_deref() == Some("Infeasible")
    });
    let statuses: Vec<&ContainerStatus> = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .collect();
    let inits = spec.init_containers.iter_mut().flatten();
    for c in spec.containers.iter_mut().chain(inits) {
        let Some(cs) = statuses.iter().find(|s| s.name == c.name) else {
            continue;
        };
        if let Some(reqs) = status_requests(c, cs, infeasible) {
            c.resources.get_or_insert_with(Default::default).requests = Some(to_wire(&reqs));
        }
    }
    spec
}

/// `PodRequests`: the containers' aggregate requests (init containers, sidecars and in-place
/// resizes counted as the scheduler counts them), replaced by the pod-level requests where
/// `spec.resources` sets them, plus the pod's `overhead`.
#[must_use]
pub fn pod_requests(pod: &Pod) -> ResourceList {
    let Some(spec) = &pod.spec else {
        return ResourceList::new();
    };
    let counted = counted_spec(pod, spec);
    let mut reqs = aggregate_container_requests(&counted);
    let pod_level = parse_list(spec.resources.as_ref().and_then(|r| r.requests.as_ref()));
    for (k, v) in pod_level {
        if is_supported_pod_level_resource(&k) {
            reqs.insert(k, v);
        }
    }
    for (k, v) in parse_list(spec.overhead.as_ref()) {
        let e = reqs.entry(k).or_insert(Quantity::from_units(0));
        *e = e.saturating_add(v);
    }
    reqs
}

/// Whether a pod still holds its node's resources: bound pods until they are Succeeded or
/// Failed (the scheduler's cache drops terminated pods).
#[must_use]
pub fn holds_resources(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// One resource the node lacks (`InsufficientResource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insufficient {
    /// The filter's reason: `Too many pods`, `Insufficient cpu`, …
    pub reason: String,
    /// The request is larger than the node's whole allocatable: preemption cannot help.
    pub unresolvable: bool,
}

/// How a resource's amount is compared: cpu in millicores, the rest in units.
fn amount(name: &str, q: Quantity) -> i64 {
    if name == "cpu" {
        q.milli_value()
    } else {
        q.value()
    }
}

/// `fitsRequest`: what `node` lacks for a pod requesting `request` beside the `pod_count`
/// pods bound to it that hold resources, whose requests (summed by [`pod_requests`]) are
/// those of `pods` (which may be left empty when `request` is: only the count matters then).
/// The pod count first, then cpu, memory, ephemeral storage and the other resources in name
/// order.
#[must_use]
pub fn insufficient_resources(
    request: &ResourceList,
    node: &Node,
    pods: &[&Pod],
    pod_count: usize,
) -> Vec<Insufficient> {
    let allocatable = parse_list(node.status.as_ref().and_then(|s| s.allocatable.as_ref()));
    let mut used = ResourceList::new();
    for p in pods {
        for (k, v) in pod_requests(p) {
            let e = used.entry(k).or_insert(Quantity::from_units(0));
            *e = e.saturating_add(v);
        }
    }
    let mut out = Vec::new();
    let allowed_pods = allocatable.get("pods").map_or(0, |q| q.value());
    if i64::try_from(pod_count)
        .unwrap_or(i64::MAX)
        .saturating_add(1)
        > allowed_pods
    {
        out.push(Insufficient {
            reason: "Too many pods".to_owned(),
            unresolvable: false,
        });
    }
    let requested = |name: &str| request.get(name).map_or(0, |q| amount(name, *q));
    let fixed = ["cpu", "memory", "ephemeral-storage"];
    let scalars = request
        .keys()
        .filter(|k| !fixed.contains(&k.as_str()) && k.as_str() != "pods")
        .map(String::as_str);
    for name in fixed.into_iter().chain(scalars) {
        let want = requested(name);
        if want <= 0 {
            continue;
        }
        let have = allocatable.get(name).map_or(0, |q| amount(name, *q));
        let taken = used.get(name).map_or(0, |q| amount(name, *q));
        if want > have.saturating_sub(taken) {
            out.push(Insufficient {
                reason: format!("Insufficient {name}"),
                unresolvable: want > have,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn node(alloc: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n"}, "status": {"allocatable": alloc}}))
            .unwrap()
    }

    fn requesting(cpu: &str, mem: &str) -> Pod {
        pod(
            json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}),
        )
    }

    fn lacking(p: &Pod, n: &Node, pods: &[&Pod]) -> Vec<Insufficient> {
        insufficient_resources(&pod_requests(p), n, pods, pods.len())
    }

    fn reasons(v: &[Insufficient]) -> Vec<(&str, bool)> {
        v.iter()
            .map(|i| (i.reason.as_str(), i.unresolvable))
            .collect()
    }

    /// `TestPodRequests`-like: init containers, sidecars, pod-level resources and overhead.
    #[test]
    fn pod_requests_as_the_scheduler_counts_them() {
        let p = pod(json!({
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            ],
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}}}],
            "overhead": {"cpu": "250m", "memory": "120Mi"},
        }));
        let r = pod_requests(&p);
        assert_eq!(r["cpu"].milli_value(), 2100 + 250);
        assert_eq!(r["memory"].value(), (2 << 30) + 120 * (1 << 20));
        let level = pod(json!({
            "resources": {"requests": {"cpu": "3"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        }));
        let r = pod_requests(&level);
        assert_eq!(
            (r["cpu"].milli_value(), r["memory"].value()),
            (3000, 1 << 30)
        );
    }

    /// An in-place resize under way counts the larger of the spec and the status.
    #[test]
    fn a_resized_container_counts_its_larger_requests() {
        let mut p = requesting("500m", "64Mi");
        p.status = serde_json::from_value(json!({"containerStatuses": [{
            "name": "c", "image": "", "imageID": "", "ready": true, "restartCount": 0,
            "allocatedResources": {"cpu": "1"},
            "resources": {"requests": {"cpu": "1", "memory": "32Mi"}}
        }]}))
        .unwrap();
        let r = pod_requests(&p);
        assert_eq!(
            (r["cpu"].milli_value(), r["memory"].value()),
            (1000, 64 << 20)
        );
    }

    /// `TestEnoughRequests`' shape: what is free is the allocatable minus the bound pods'.
    #[test]
    fn fit_checks_pods_cpu_memory_and_extended_resources() {
        let n = node(json!({"cpu": "2", "memory": "1Gi", "pods": "3", "example.com/gpu": "1"}));
        let a = requesting("1500m", "512Mi");
        let b = requesting("600m", "100Mi");
        assert!(lacking(&b, &n, &[]).is_empty());
        assert_eq!(
            reasons(&lacking(&b, &n, &[&a])),
            [("Insufficient cpu", false)]
        );
        let big = requesting("3", "2Gi");
        assert_eq!(
            reasons(&lacking(&big, &n, &[])),
            [("Insufficient cpu", true), ("Insufficient memory", true)]
        );
        let none = pod(json!({"containers": [{"name": "c"}]}));
        assert_eq!(
            reasons(&insufficient_resources(&pod_requests(&none), &n, &[], 3)),
            [("Too many pods", false)]
        );
        let gpu = pod(
            json!({"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]}),
        );
        assert!(lacking(&gpu, &n, &[]).is_empty());
        assert_eq!(
            reasons(&lacking(&gpu, &n, &[&gpu])),
            [("Insufficient example.com/gpu", false)]
        );
        // A node without allocatable fits no pod.
        assert_eq!(
            reasons(&lacking(&none, &node(json!({})), &[])),
            [("Too many pods", false)]
        );
    }
}
