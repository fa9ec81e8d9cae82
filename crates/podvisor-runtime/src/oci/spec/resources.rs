//! Cgroup resources and the OOM score of a container, as the kubelet computes them
//! (`calculateLinuxResources`, `GetContainerOOMScoreAdjust`) and containerd applies them.

use k8s_openapi::api::core::v1::{Container, Pod};
use oci_spec::runtime::{
    LinuxCpuBuilder, LinuxDeviceCgroupBuilder, LinuxMemoryBuilder, LinuxPidsBuilder,
    LinuxResources, LinuxResourcesBuilder,
};
use podvisor_api::pod::{QosClass, qos_class};

use super::{HostFacts, SpecError};
use crate::config::quantity::Quantity;

/// `MinShares`: the fewest CPU shares the kubelet gives a container.
pub const MIN_SHARES: u64 = 2;
/// `MaxShares`.
pub const MAX_SHARES: u64 = 262_144;
/// `QuotaPeriod`: the CFS period in microseconds (100 ms).
pub const QUOTA_PERIOD: u64 = 100_000;
/// `MinQuotaPeriod`: the smallest quota in microseconds (1 ms).
pub const MIN_QUOTA: i64 = 1000;

/// `MilliCPUToShares`: millicores → `cpu.shares` (1024 per core), between 2 and 262144.
pub fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    if milli_cpu <= 0 {
        return MIN_SHARES;
    }
    let shares = u64::try_from(milli_cpu)
        .unwrap_or(u64::MAX)
        .saturating_mul(1024)
        / 1000;
    shares.clamp(MIN_SHARES, MAX_SHARES)
}

/// `milliCPUToQuota`: millicores → CFS quota for `period` µs; 0 (no quota) for no limit, at
/// least 1 ms otherwise.
pub fn milli_cpu_to_quota(milli_cpu: i64, period: u64) -> i64 {
    if milli_cpu <= 0 {
        return 0;
    }
    let quota = milli_cpu.saturating_mul(i64::try_from(period).unwrap_or(i64::MAX)) / 1000;
    quota.max(MIN_QUOTA)
}

/// The OOM killer's preference adjustments of the kubelet's QoS policy.
pub const GUARANTEED_OOM_SCORE_ADJ: i32 = -997;
/// The adjustment of `BestEffort` containers.
pub const BEST_EFFORT_OOM_SCORE_ADJ: i32 = 1000;

/// `GetContainerOOMScoreAdjust`: -997 for `Guaranteed` pods and node-critical pods, 1000 for
/// `BestEffort`, and for `Burstable` 1000 − 1000·request/capacity kept within 3..=999.
/// `memory_capacity` is the node's memory in bytes (`None`: treated as a burstable request
/// of 0, i.e. 999).
pub fn oom_score_adj(pod: &Pod, container: &Container, memory_capacity: Option<u64>) -> i32 {
    let spec = pod.spec.as_ref();
    if spec.and_then(|s| s.priority_class_name.as_deref()) == Some("system-node-critical") {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match spec.map(qos_class) {
        Some(QosClass::Guaranteed) => return GUARANTEED_OOM_SCORE_ADJ,
        Some(QosClass::BestEffort) | None => return BEST_EFFORT_OOM_SCORE_ADJ,
        Some(QosClass::Burstable) => {}
    }
    let request = quantity(container, "requests", "memory")
        .and_then(|q| u64::try_from(q.value()).ok())
        .unwrap_or(0);
    let adjust = match memory_capacity {
        Some(capacity) if capacity > 0 => {
            let scaled = u128::from(request) * 1000 / u128::from(capacity);
            1000 - i64::try_from(scaled).unwrap_or(i64::MAX).min(1000)
        }
        _ => 1000,
    };
    let adjust = i32::try_from(adjust).unwrap_or(1000);
    if adjust < 1000 + GUARANTEED_OOM_SCORE_ADJ {
        1000 + GUARANTEED_OOM_SCORE_ADJ
    } else if adjust == BEST_EFFORT_OOM_SCORE_ADJ {
        adjust - 1
    } else {
        adjust
    }
}

fn quantity(container: &Container, which: &str, name: &str) -> Option<Quantity> {
    let r = container.resources.as_ref()?;
    let list = if which == "limits" {
        r.limits.as_ref()?
    } else {
        r.requests.as_ref()?
    };
    Quantity::parse(&list.get(name)?.0)
}

fn milli(container: &Container, which: &str) -> i64 {
    quantity(container, which, "cpu").map_or(0, |q| q.milli_value())
}

/// `linux.resources`: CPU shares, quota and period, the memory limit (and swap, as the
/// kubelet's `NoSwap`), the pids limit, and the device rule (all denied but runc's defaults;
/// all allowed when privileged).
pub(super) fn linux_resources(
    container: &Container,
    memory_limit: Option<u64>,
    privileged: bool,
    host: &HostFacts,
) -> Result<LinuxResources, SpecError> {
    let (request, limit) = (milli(container, "requests"), milli(container, "limits"));
    // A request defaults to the limit (the API server does so too, for new pods).
    let shares = if request == 0 && limit != 0 {
        milli_cpu_to_shares(limit)
    } else {
        milli_cpu_to_shares(request)
    };
    let mut cpu = LinuxCpuBuilder::default().shares(shares);
    // The kubelet's request always carries the 100 ms period; here it goes with a quota only.
    // Without one the cgroup ends the same (100 ms is the kernel's default period), and a
    // period write is not free: the kernel checks it against every CPU cgroup on the node.
    let quota = milli_cpu_to_quota(limit, QUOTA_PERIOD);
    if quota != 0 {
        cpu = cpu.quota(quota).period(QUOTA_PERIOD);
    }
    let mut builder = LinuxResourcesBuilder::default()
        .cpu(cpu.build().map_err(SpecError::internal)?)
        .devices(vec![
            LinuxDeviceCgroupBuilder::default()
                .allow(privileged)
                .access("rwm")
                .build()
                .map_err(SpecError::internal)?,
        ]);
    if let Some(bytes) = memory_limit {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let mut memory = LinuxMemoryBuilder::default().limit(bytes);
        // NoSwap: on cgroup v1 memory+swap equals the memory limit; v2 is set below.
        if !host.cgroup_v2 && host.swap_controller {
            memory = memory.swap(bytes);
        }
        builder = builder.memory(memory.build().map_err(SpecError::internal)?);
    }
    if host.cgroup_v2 && host.swap_controller {
        builder = builder.unified(std::collections::HashMap::from([(
            "memory.swap.max".to_owned(),
            "0".to_owned(),
        )]));
    }
    if let Some(pids) = host.pids_limit {
        builder = builder.pids(
            LinuxPidsBuilder::default()
                .limit(pids)
                .build()
                .map_err(SpecError::internal)?,
        );
    }
    builder.build().map_err(SpecError::internal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
    use std::collections::BTreeMap;

    #[test]
    fn shares_as_the_kubelet() {
        let cases = [
            (0, 2),
            (1, 2),
            (2, 2),
            (100, 102),
            (250, 256),
            (1000, 1024),
            (1500, 1536),
            (300_000, 262_144),
        ];
        for (milli, shares) in cases {
            assert_eq!(milli_cpu_to_shares(milli), shares, "{milli}m");
        }
    }

    #[test]
    fn quota_as_the_kubelet() {
        let cases = [
            (0, 100_000, 0),
            (5, 100_000, 1000),
            (9, 100_000, 1000),
            (10, 100_000, 1000),
            (200, 100_000, 20_000),
            (500, 100_000, 50_000),
            (1000, 100_000, 100_000),
            (1500, 100_000, 150_000),
            (2000, 50_000, 100_000),
        ];
        for (milli, period, quota) in cases {
            assert_eq!(
                milli_cpu_to_quota(milli, period),
                quota,
                "{milli}m/{period}"
            );
        }
    }

    fn list(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Q>> {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Q((*v).to_owned())))
                .collect()
        })
    }

    fn with(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> (Pod, Container) {
        let c = Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: list(requests),
                limits: list(limits),
                ..Default::default()
            }),
            ..Default::default()
        };
        let pod = Pod {
            spec: Some(PodSpec {
                containers: vec![c.clone()],
                ..Default::default()
            }),
            ..Default::default()
        };
        (pod, c)
    }

    #[test]
    fn oom_score_by_qos() {
        let gi = 1 << 30;
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], i32);
        let cases: [Case; 6] = [
            (&[], &[], 1000),
            (
                &[("cpu", "1"), ("memory", "1Gi")],
                &[("cpu", "1"), ("memory", "1Gi")],
                -997,
            ),
            // Burstable: 1000 - 1000 * 1Gi / 4Gi.
            (&[("memory", "1Gi")], &[], 750),
            // A request of nothing but CPU is 1000 - 0 → 999.
            (&[("cpu", "100m")], &[], 999),
            // A huge request floors at 3.
            (&[("memory", "4Gi")], &[("memory", "8Gi")], 3),
            (&[("memory", "3.99Gi")], &[("memory", "8Gi")], 3),
        ];
        for (requests, limits, want) in cases {
            let (pod, c) = with(requests, limits);
            assert_eq!(
                oom_score_adj(&pod, &c, Some(4 * gi)),
                want,
                "{requests:?} {limits:?}"
            );
        }
        let (mut pod, c) = with(&[], &[]);
        pod.spec.as_mut().unwrap().priority_class_name = Some("system-node-critical".into());
        assert_eq!(oom_score_adj(&pod, &c, Some(gi)), -997);
    }

    #[test]
    fn cgroup_values() {
        let host = HostFacts {
            swap_controller: true,
            pids_limit: Some(1024),
            ..HostFacts::default()
        };
        let (_, c) = with(&[("cpu", "250m")], &[("cpu", "500m"), ("memory", "20Mi")]);
        let r = linux_resources(&c, Some(20 << 20), false, &host).unwrap();
        let cpu = r.cpu().as_ref().unwrap();
        assert_eq!(
            (cpu.shares(), cpu.quota(), cpu.period()),
            (Some(256), Some(50_000), Some(100_000))
        );
        let mem = r.memory().as_ref().unwrap();
        assert_eq!((mem.limit(), mem.swap()), (Some(20 << 20), Some(20 << 20)));
        assert_eq!(r.pids().as_ref().map(|p| p.limit()), Some(1024));
        let devices = r.devices().as_ref().unwrap();
        assert!(!devices[0].allow());

        // A limit alone sets the shares too; no limit, no quota.
        let (_, c) = with(&[], &[("cpu", "2")]);
        let cpu = linux_resources(&c, None, true, &HostFacts::default()).unwrap();
        assert_eq!(cpu.cpu().as_ref().unwrap().shares(), Some(2048));
        assert!(cpu.devices().as_ref().unwrap()[0].allow());
        let (_, c) = with(&[], &[]);
        let r = linux_resources(&c, None, false, &HostFacts::default()).unwrap();
        assert_eq!(r.cpu().as_ref().unwrap().quota(), None);
        assert_eq!(r.cpu().as_ref().unwrap().period(), None);
        assert_eq!(r.cpu().as_ref().unwrap().shares(), Some(2));
        assert!(r.memory().is_none());

        // cgroup v2 without swap: memory.swap.max = 0.
        let v2 = HostFacts {
            cgroup_v2: true,
            swap_controller: true,
            ..HostFacts::default()
        };
        let r = linux_resources(&c, Some(1 << 20), false, &v2).unwrap();
        assert_eq!(r.memory().as_ref().unwrap().swap(), None);
        assert_eq!(
            r.unified()
                .as_ref()
                .unwrap()
                .get("memory.swap.max")
                .map(String::as_str),
            Some("0")
        );
    }
}
