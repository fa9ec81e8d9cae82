//! What the node tells a pod worker about the other pods for in-place resize: their
//! allocated cpu and memory (the kubelet's resize admission sees every admitted pod with its
//! allocation), so a resize that does not fit beside them is `Deferred`.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

/// A pod's effective cpu (millicores) and memory (bytes) requests as allocated: the spec's,
/// with each container's `allocatedResources` where the status has them (`PodRequests` over
/// the kubelet's allocated pod). A terminal pod has none.
pub(super) fn allocated_requests(pod: &Pod) -> (i64, i64) {
    let status = pod.status.as_ref();
    if status
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed")
    {
        return (0, 0);
    }
    let Some(mut spec) = pod.spec.clone() else {
        return (0, 0);
    };
    let statuses = status
        .into_iter()
        .flat_map(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
        })
        .filter_map(|c| Some((c.name.clone(), c.allocated_resources.clone()?)))
        .collect::<HashMap<_, _>>();
    let inits = spec.init_containers.iter_mut().flatten();
    for c in spec.containers.iter_mut().chain(inits) {
        if let Some(requests) = statuses.get(&c.name) {
            c.resources.get_or_insert_with(Default::default).requests = Some(requests.clone());
        }
    }
    let total = podvisor_api::resources::aggregate_container_requests(&spec);
    (
        total
            .get("cpu")
            .map_or(0, podvisor_api::quantity::Quantity::milli_value),
        total
            .get("memory")
            .map_or(0, podvisor_api::quantity::Quantity::value),
    )
}

/// Whether the pod's last published status has a `Deferred` resize pending.
pub(super) fn resize_deferred(pod: Option<&Pod>) -> bool {
    pod.and_then(|p| p.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == podvisor_api::pod::POD_RESIZE_PENDING
                    && c.reason.as_deref() == Some("Deferred")
            })
        })
}
