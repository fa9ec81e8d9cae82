//! `UpdateContainerResources` for both runtime classes: the container's cgroups
//! (`podvisor/<pod uid>/<container>-<instance>`, made by the shim, and by runc for the `oci`
//! class with the cgroupfs driver, so `runc update` would write the same files) are written
//! directly by the agent, which sees every hierarchy.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;
use podvisor_api::pod::memory_limit_below_usage_message;
use podvisor_api::quantity::Quantity;

use crate::InstanceId;
use crate::RuntimeError;
use crate::cgroup::resize::{CgroupResources, ResizeError, update};
use crate::oci::spec::resources::{QUOTA_PERIOD, milli_cpu_to_quota, milli_cpu_to_shares};

/// The cgroup values the kubelet computes from a container's resources
/// (`calculateLinuxResources`): shares from the cpu request (the limit when there is no
/// request), the CFS quota from the cpu limit, the memory limit in bytes.
pub(super) fn cgroup_values(r: &ResourceRequirements) -> CgroupResources {
    let get = |list: &Option<BTreeMap<String, WireQuantity>>, name: &str| {
        list.as_ref()
            .and_then(|l| l.get(name))
            .and_then(|q| Quantity::parse(&q.0))
    };
    let request = get(&r.requests, "cpu").map_or(0, |q| q.milli_value());
    let limit = get(&r.limits, "cpu").map_or(0, |q| q.milli_value());
    let shares = if request == 0 && limit != 0 {
        milli_cpu_to_shares(limit)
    } else {
        milli_cpu_to_shares(request)
    };
    let quota = milli_cpu_to_quota(limit, QUOTA_PERIOD);
    CgroupResources {
        memory_limit: get(&r.limits, "memory")
            .and_then(|q| u64::try_from(q.value()).ok())
            .filter(|&b| b > 0),
        cpu_shares: shares,
        cpu_quota: (quota != 0).then_some(quota),
        cpu_period: QUOTA_PERIOD,
    }
}

/// Writes `values` to the cgroups of instance `instance` of container `name` in pod `uid`.
pub(super) fn apply(
    uid: &str,
    name: &str,
    instance: InstanceId,
    values: &CgroupResources,
) -> Result<(), RuntimeError> {
    let mode = crate::cgroup::detect();
    let parent = format!("podvisor/{uid}");
    let cgroup = format!("{name}-{instance}");
    match update(&mode, &parent, &cgroup, values) {
        Ok(()) => Ok(()),
        Err(ResizeError::BelowUsage { limit, usage }) => Err(RuntimeError::Other(
            memory_limit_below_usage_message(name, limit, usage),
        )),
        Err(ResizeError::Io(e)) => Err(RuntimeError::Io {
            what: format!("updating the resources of container {name:?}"),
            source: e,
        }),
    }
}
