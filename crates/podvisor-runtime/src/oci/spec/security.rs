//! Capabilities, seccomp and the masked and read-only `/proc` paths of a container, from its
//! `securityContext` the way the kubelet asks for them and containerd's CRI plugin applies
//! them.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, Pod, SeccompProfile};
use oci_spec::runtime::{
    Arch, Capabilities, Capability, LinuxCapabilities, LinuxCapabilitiesBuilder, LinuxSeccomp,
    LinuxSeccompAction, LinuxSeccompArgBuilder, LinuxSeccompBuilder, LinuxSeccompOperator,
    LinuxSyscall, LinuxSyscallBuilder,
};

use super::SpecError;

/// containerd's default capability set (`defaultUnixCaps`), which Docker shares.
pub const DEFAULT_CAPABILITIES: [Capability; 14] = [
    Capability::Chown,
    Capability::DacOverride,
    Capability::Fsetid,
    Capability::Fowner,
    Capability::Mknod,
    Capability::NetRaw,
    Capability::Setgid,
    Capability::Setuid,
    Capability::Setfcap,
    Capability::Setpcap,
    Capability::NetBindService,
    Capability::SysChroot,
    Capability::Kill,
    Capability::AuditWrite,
];

/// Capabilities by number (`linux/capability.h`), 0 to `CAP_CHECKPOINT_RESTORE` (40).
const BY_NUMBER: [Capability; 41] = [
    Capability::Chown,
    Capability::DacOverride,
    Capability::DacReadSearch,
    Capability::Fowner,
    Capability::Fsetid,
    Capability::Kill,
    Capability::Setgid,
    Capability::Setuid,
    Capability::Setpcap,
    Capability::LinuxImmutable,
    Capability::NetBindService,
    Capability::NetBroadcast,
    Capability::NetAdmin,
    Capability::NetRaw,
    Capability::IpcLock,
    Capability::IpcOwner,
    Capability::SysModule,
    Capability::SysRawio,
    Capability::SysChroot,
    Capability::SysPtrace,
    Capability::SysPacct,
    Capability::SysAdmin,
    Capability::SysBoot,
    Capability::SysNice,
    Capability::SysResource,
    Capability::SysTime,
    Capability::SysTtyConfig,
    Capability::Mknod,
    Capability::Lease,
    Capability::AuditWrite,
    Capability::AuditControl,
    Capability::Setfcap,
    Capability::MacOverride,
    Capability::MacAdmin,
    Capability::Syslog,
    Capability::WakeAlarm,
    Capability::BlockSuspend,
    Capability::AuditRead,
    Capability::Perfmon,
    Capability::Bpf,
    Capability::CheckpointRestore,
];

/// The capabilities whose bits are set in `mask` (a `CapEff`/`CapPrm` line of
/// `/proc/<pid>/status`); bits this table does not know are ignored.
pub fn capabilities_from_mask(mask: u64) -> Capabilities {
    BY_NUMBER
        .iter()
        .enumerate()
        .filter(|(bit, _)| mask & (1 << bit) != 0)
        .map(|(_, c)| *c)
        .collect()
}

/// The effective capabilities of this process (`CapEff` of `/proc/self/status`): what a
/// privileged container, or `add: [ALL]`, gets (containerd's `WithAllCurrentCapabilities`:
/// a capability the runtime lacks cannot be granted).
pub fn current_capabilities() -> std::io::Result<Capabilities> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .ok_or_else(|| std::io::Error::other("no CapEff line in /proc/self/status"))?;
    Ok(capabilities_from_mask(mask))
}

/// One capability named as in a pod spec (`NET_ADMIN`), to which containerd prefixes `CAP_`.
fn parse_capability(name: &str) -> Result<Capability, SpecError> {
    let full = format!("CAP_{}", name.to_uppercase());
    let unknown = || SpecError::Create(format!("unknown capability {full:?}"));
    let cap: Capability =
        serde_json::from_value(serde_json::Value::String(full.clone())).map_err(|_| unknown())?;
    // oci-spec's parser forgives a doubled prefix; the runtime would not.
    if format!("CAP_{cap}") != full {
        return Err(unknown());
    }
    Ok(cap)
}

/// The capability set of the process: the default set (all of `available` when
/// privileged), then `add: [ALL]` (all of `available`), `drop: [ALL]` (none), then each added
/// name, then each dropped name (containerd `WithCapabilities`; kubelet names have no `CAP_`).
/// Bounding, effective and permitted get the set; inheritable and ambient stay empty
/// (containerd since the CVE-2022-24769 fix).
pub(super) fn capabilities(
    container: &Container,
    privileged: bool,
    available: &Capabilities,
) -> Result<LinuxCapabilities, SpecError> {
    let mut set: HashSet<Capability> = if privileged {
        available.clone()
    } else {
        DEFAULT_CAPABILITIES.into_iter().collect()
    };
    let caps = container
        .security_context
        .as_ref()
        .and_then(|sc| sc.capabilities.as_ref());
    if let Some(caps) = caps {
        let add = caps.add.as_deref().unwrap_or_default();
        let drop = caps.drop.as_deref().unwrap_or_default();
        let is_all = |c: &String| c.eq_ignore_ascii_case("ALL");
        if add.iter().any(is_all) {
            set.clone_from(available);
        }
        if drop.iter().any(is_all) {
            set.clear();
        }
        for name in add.iter().filter(|c| !is_all(c)) {
            set.insert(parse_capability(name)?);
        }
        for name in drop.iter().filter(|c| !is_all(c)) {
            set.remove(&parse_capability(name)?);
        }
    }
    LinuxCapabilitiesBuilder::default()
        .bounding(set.clone())
        .effective(set.clone())
        .permitted(set)
        .inheritable(Capabilities::new())
        .ambient(Capabilities::new())
        .build()
        .map_err(SpecError::internal)
}

/// The kubelet's default masked paths (`securitycontext.ConvertToRuntimeMaskedPaths` for
/// `procMount: Default`).
pub const DEFAULT_MASKED_PATHS: [&str; 12] = [
    "/proc/asound",
    "/proc/acpi",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// The kubelet's default read-only paths (`ConvertToRuntimeReadonlyPaths`).
pub const DEFAULT_READONLY_PATHS: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// `(masked, read-only)` paths: the defaults, none for `procMount: Unmasked` or a privileged
/// container.
pub(super) fn proc_paths(container: &Container, privileged: bool) -> (Vec<String>, Vec<String>) {
    let unmasked = container
        .security_context
        .as_ref()
        .and_then(|sc| sc.proc_mount.as_deref())
        == Some("Unmasked");
    if privileged || unmasked {
        return (Vec::new(), Vec::new());
    }
    (
        DEFAULT_MASKED_PATHS.map(str::to_owned).to_vec(),
        DEFAULT_READONLY_PATHS.map(str::to_owned).to_vec(),
    )
}

/// The effective seccomp profile: the container's, else the pod's.
pub(super) fn seccomp_profile<'a>(
    pod: &'a Pod,
    container: &'a Container,
) -> Option<&'a SeccompProfile> {
    container
        .security_context
        .as_ref()
        .and_then(|sc| sc.seccomp_profile.as_ref())
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.security_context.as_ref())
                .and_then(|sc| sc.seccomp_profile.as_ref())
        })
}

/// `linux.seccomp`: none for `Unconfined`, no profile (the kubelet's `SeccompDefault` is off)
/// and privileged containers; [`runtime_default`] for `RuntimeDefault`; the JSON text the
/// caller read from the kubelet's seccomp directory for `Localhost`.
pub(super) fn seccomp(
    pod: &Pod,
    container: &Container,
    privileged: bool,
    caps: &Capabilities,
    localhost: Option<&str>,
) -> Result<Option<LinuxSeccomp>, SpecError> {
    if privileged {
        return Ok(None);
    }
    let Some(profile) = seccomp_profile(pod, container) else {
        return Ok(None);
    };
    match profile.type_.as_str() {
        "RuntimeDefault" => runtime_default(caps).map(Some),
        "Localhost" => {
            let name = profile.localhost_profile.as_deref().unwrap_or_default();
            let text = localhost.ok_or_else(|| {
                SpecError::Create(format!(
                    "failed to load seccomp profile {name:?}: not loaded by the node"
                ))
            })?;
            serde_json::from_str(text).map(Some).map_err(|e| {
                SpecError::Create(format!(
                    "failed to generate seccomp spec opts: decoding seccomp profile {name:?} \
                     failed: {e}"
                ))
            })
        }
        _ => Ok(None),
    }
}

/// What re-allows a denied system call.
#[derive(Clone, Copy)]
enum Unless {
    /// Denied to every container.
    Never,
    /// Allowed when the container holds one of these capabilities.
    Cap(&'static [Capability]),
}

/// The system calls `RuntimeDefault` refuses with `EPERM`, and the capability that lets a
/// container use them anyway. Written from the behaviour of containerd's and Docker's default
/// profile (an allow-list that leaves these out): kernel modules, reboot and kexec, clock
/// setting, mounting and namespace juggling, the kernel keyring (not namespaced), BPF and
/// perf, accounting, swap, raw I/O ports, NUMA policy, obsolete calls. Names a kernel does not
/// know on an architecture are skipped by the runtime.
const DENIED: &[(&str, Unless)] = &[
    ("acct", Unless::Cap(&[Capability::SysPacct])),
    ("add_key", Unless::Never),
    ("bpf", Unless::Cap(&[Capability::SysAdmin, Capability::Bpf])),
    ("clock_adjtime", Unless::Cap(&[Capability::SysTime])),
    ("clock_adjtime64", Unless::Cap(&[Capability::SysTime])),
    ("clock_settime", Unless::Cap(&[Capability::SysTime])),
    ("clock_settime64", Unless::Cap(&[Capability::SysTime])),
    ("create_module", Unless::Cap(&[Capability::SysModule])),
    ("delete_module", Unless::Cap(&[Capability::SysModule])),
    ("fanotify_init", Unless::Cap(&[Capability::SysAdmin])),
    ("finit_module", Unless::Cap(&[Capability::SysModule])),
    ("fsconfig", Unless::Cap(&[Capability::SysAdmin])),
    ("fsmount", Unless::Cap(&[Capability::SysAdmin])),
    ("fsopen", Unless::Cap(&[Capability::SysAdmin])),
    ("fspick", Unless::Cap(&[Capability::SysAdmin])),
    ("get_kernel_syms", Unless::Cap(&[Capability::SysModule])),
    ("get_mempolicy", Unless::Cap(&[Capability::SysNice])),
    ("init_module", Unless::Cap(&[Capability::SysModule])),
    ("ioperm", Unless::Cap(&[Capability::SysRawio])),
    ("iopl", Unless::Cap(&[Capability::SysRawio])),
    ("kcmp", Unless::Cap(&[Capability::SysPtrace])),
    ("kexec_file_load", Unless::Cap(&[Capability::SysBoot])),
    ("kexec_load", Unless::Cap(&[Capability::SysBoot])),
    ("keyctl", Unless::Never),
    ("lookup_dcookie", Unless::Cap(&[Capability::SysAdmin])),
    ("mbind", Unless::Cap(&[Capability::SysNice])),
    ("mount", Unless::Cap(&[Capability::SysAdmin])),
    ("mount_setattr", Unless::Cap(&[Capability::SysAdmin])),
    ("move_mount", Unless::Cap(&[Capability::SysAdmin])),
    ("move_pages", Unless::Cap(&[Capability::SysNice])),
    ("name_to_handle_at", Unless::Cap(&[Capability::SysAdmin])),
    ("nfsservctl", Unless::Never),
    (
        "open_by_handle_at",
        Unless::Cap(&[Capability::DacReadSearch]),
    ),
    ("open_tree", Unless::Cap(&[Capability::SysAdmin])),
    (
        "perf_event_open",
        Unless::Cap(&[Capability::SysAdmin, Capability::Perfmon]),
    ),
    ("pivot_root", Unless::Cap(&[Capability::SysAdmin])),
    ("query_module", Unless::Cap(&[Capability::SysModule])),
    ("quotactl", Unless::Cap(&[Capability::SysAdmin])),
    ("quotactl_fd", Unless::Cap(&[Capability::SysAdmin])),
    ("reboot", Unless::Cap(&[Capability::SysBoot])),
    ("request_key", Unless::Never),
    ("set_mempolicy", Unless::Cap(&[Capability::SysNice])),
    ("setns", Unless::Cap(&[Capability::SysAdmin])),
    ("settimeofday", Unless::Cap(&[Capability::SysTime])),
    ("stime", Unless::Cap(&[Capability::SysTime])),
    ("swapoff", Unless::Cap(&[Capability::SysAdmin])),
    ("swapon", Unless::Cap(&[Capability::SysAdmin])),
    ("_sysctl", Unless::Never),
    ("sysfs", Unless::Never),
    (
        "syslog",
        Unless::Cap(&[Capability::SysAdmin, Capability::Syslog]),
    ),
    ("umount", Unless::Cap(&[Capability::SysAdmin])),
    ("umount2", Unless::Cap(&[Capability::SysAdmin])),
    ("unshare", Unless::Cap(&[Capability::SysAdmin])),
    ("uselib", Unless::Never),
    ("userfaultfd", Unless::Cap(&[Capability::SysPtrace])),
    ("ustat", Unless::Never),
    ("vhangup", Unless::Cap(&[Capability::SysTtyConfig])),
    ("vm86", Unless::Never),
    ("vm86old", Unless::Never),
];

/// The namespace flags `clone` may not carry without `CAP_SYS_ADMIN`: `CLONE_NEWNS`,
/// `CLONE_NEWCGROUP`, `CLONE_NEWUTS`, `CLONE_NEWIPC`, `CLONE_NEWUSER`, `CLONE_NEWPID`,
/// `CLONE_NEWNET`.
const CLONE_NAMESPACE_FLAGS: [u64; 7] = [
    0x0002_0000,
    0x0200_0000,
    0x0400_0000,
    0x0800_0000,
    0x1000_0000,
    0x2000_0000,
    0x4000_0000,
];

/// The architectures the filter covers (the native one and its compat ABIs, so a 32-bit
/// binary meets the same rules; calls of any other architecture are refused by the runtime).
fn architectures() -> Vec<Arch> {
    if cfg!(target_arch = "aarch64") {
        vec![Arch::ScmpArchAarch64, Arch::ScmpArchArm]
    } else {
        vec![Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32]
    }
}

const EPERM: u32 = 1;
const ENOSYS: u32 = 38;

/// The `RuntimeDefault` profile for a container holding `caps`: everything allowed but the
/// denied calls (this module's table) whose capability it lacks (`EPERM`), `clone` with a
/// namespace flag and `clone3` (whose flags a filter cannot read: `ENOSYS`, so the C library
/// falls back to `clone`) unless it holds `CAP_SYS_ADMIN`.
pub fn runtime_default(caps: &Capabilities) -> Result<LinuxSeccomp, SpecError> {
    let holds = |needed: &[Capability]| needed.iter().any(|c| caps.contains(c));
    let denied: Vec<String> = DENIED
        .iter()
        .filter(|(_, unless)| match unless {
            Unless::Never => true,
            Unless::Cap(needed) => !holds(needed),
        })
        .map(|(name, _)| (*name).to_owned())
        .collect();
    let rule = |names: Vec<String>, errno: u32| -> Result<LinuxSyscall, SpecError> {
        LinuxSyscallBuilder::default()
            .names(names)
            .action(LinuxSeccompAction::ScmpActErrno)
            .errno_ret(errno)
            .build()
            .map_err(SpecError::internal)
    };
    let mut syscalls = vec![rule(denied, EPERM)?];
    if !caps.contains(&Capability::SysAdmin) {
        for flag in CLONE_NAMESPACE_FLAGS {
            let arg = LinuxSeccompArgBuilder::default()
                .index(0_usize)
                .value(flag)
                .value_two(flag)
                .op(LinuxSeccompOperator::ScmpCmpMaskedEq)
                .build()
                .map_err(SpecError::internal)?;
            let mut r = rule(vec!["clone".to_owned()], EPERM)?;
            r.set_args(Some(vec![arg]));
            syscalls.push(r);
        }
        syscalls.push(rule(vec!["clone3".to_owned()], ENOSYS)?);
    }
    LinuxSeccompBuilder::default()
        .default_action(LinuxSeccompAction::ScmpActAllow)
        .architectures(architectures())
        .syscalls(syscalls)
        .build()
        .map_err(SpecError::internal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SecurityContext};

    fn with_caps(add: &[&str], drop: &[&str]) -> Container {
        let names = |l: &[&str]| Some(l.iter().map(|s| (*s).to_owned()).collect());
        Container {
            name: "c".into(),
            security_context: Some(SecurityContext {
                capabilities: Some(k8s_openapi::api::core::v1::Capabilities {
                    add: names(add),
                    drop: names(drop),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn names(set: &Capabilities) -> Vec<String> {
        let mut v: Vec<String> = set.iter().map(ToString::to_string).collect();
        v.sort();
        v
    }

    #[test]
    fn capability_add_and_drop() {
        let available = capabilities_from_mask(0x0000_01ff_feff_ffff);
        assert_eq!(available.len(), 40);
        assert!(!available.contains(&Capability::SysResource));
        let default_len = DEFAULT_CAPABILITIES.len();
        // add, drop, privileged → how many, some it has, some it lacks.
        type Case<'a> = (
            &'a [&'a str],
            &'a [&'a str],
            bool,
            usize,
            &'a [Capability],
            &'a [Capability],
        );
        let cases: [Case; 8] = [
            (
                &[],
                &[],
                false,
                default_len,
                &[Capability::Chown],
                &[Capability::SysAdmin],
            ),
            (
                &["NET_ADMIN"],
                &[],
                false,
                default_len + 1,
                &[Capability::NetAdmin],
                &[],
            ),
            (
                &["net_admin"],
                &["CHOWN"],
                false,
                default_len,
                &[Capability::NetAdmin],
                &[Capability::Chown],
            ),
            (&[], &["ALL"], false, 0, &[], &[Capability::Chown]),
            (
                &["NET_BIND_SERVICE"],
                &["ALL"],
                false,
                1,
                &[Capability::NetBindService],
                &[Capability::Chown],
            ),
            (
                &["ALL"],
                &["CHOWN"],
                false,
                39,
                &[Capability::SysAdmin],
                &[Capability::Chown],
            ),
            // add ALL and drop ALL: nothing (drop ALL is applied after add ALL).
            (&["ALL"], &["ALL"], false, 0, &[], &[Capability::SysAdmin]),
            (
                &[],
                &["KILL"],
                true,
                39,
                &[Capability::SysAdmin],
                &[Capability::Kill, Capability::SysResource],
            ),
        ];
        for (add, drop, privileged, len, has, lacks) in cases {
            let caps = capabilities(&with_caps(add, drop), privileged, &available).unwrap();
            let eff = caps.effective().clone().unwrap();
            assert_eq!(eff.len(), len, "{add:?} {drop:?}: {:?}", names(&eff));
            assert_eq!(caps.bounding(), caps.effective());
            assert_eq!(caps.permitted(), caps.effective());
            assert_eq!(caps.inheritable().as_ref().map(HashSet::len), Some(0));
            for c in has {
                assert!(eff.contains(c), "{add:?} {drop:?} lacks {c}");
            }
            for c in lacks {
                assert!(!eff.contains(c), "{add:?} {drop:?} has {c}");
            }
        }
        let err = capabilities(&with_caps(&["CAP_NET_ADMIN"], &[]), false, &available);
        assert_eq!(
            err.unwrap_err().to_string(),
            "unknown capability \"CAP_CAP_NET_ADMIN\""
        );
    }

    #[test]
    fn proc_paths_by_proc_mount_and_privilege() {
        let c = |proc_mount: Option<&str>| Container {
            security_context: Some(SecurityContext {
                proc_mount: proc_mount.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (masked, ro) = proc_paths(&c(None), false);
        assert!(masked.contains(&"/proc/kcore".to_owned()));
        assert!(ro.contains(&"/proc/sys".to_owned()));
        assert_eq!(proc_paths(&c(Some("Default")), false).0.len(), 12);
        assert_eq!(proc_paths(&c(Some("Unmasked")), false), (vec![], vec![]));
        assert_eq!(proc_paths(&c(None), true), (vec![], vec![]));
    }

    fn profile(t: &str) -> Option<SeccompProfile> {
        Some(SeccompProfile {
            type_: t.to_owned(),
            localhost_profile: (t == "Localhost").then(|| "my.json".to_owned()),
        })
    }

    #[test]
    fn seccomp_by_profile_type() {
        let pod = |p: Option<SeccompProfile>| Pod {
            spec: Some(PodSpec {
                security_context: Some(PodSecurityContext {
                    seccomp_profile: p,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let container = |p: Option<SeccompProfile>| Container {
            security_context: Some(SecurityContext {
                seccomp_profile: p,
                ..Default::default()
            }),
            ..Default::default()
        };
        let caps: Capabilities = DEFAULT_CAPABILITIES.into_iter().collect();
        let local = r#"{"defaultAction":"SCMP_ACT_LOG"}"#;
        type Case = (
            Option<SeccompProfile>,
            Option<SeccompProfile>,
            bool,
            Option<LinuxSeccompAction>,
        );
        let cases: [Case; 7] = [
            (None, None, false, None),
            (
                profile("RuntimeDefault"),
                None,
                false,
                Some(LinuxSeccompAction::ScmpActAllow),
            ),
            (
                None,
                profile("RuntimeDefault"),
                false,
                Some(LinuxSeccompAction::ScmpActAllow),
            ),
            // The container's profile wins over the pod's.
            (
                profile("RuntimeDefault"),
                profile("Unconfined"),
                false,
                None,
            ),
            (
                profile("Unconfined"),
                profile("Localhost"),
                false,
                Some(LinuxSeccompAction::ScmpActLog),
            ),
            // Privileged: no filter at all.
            (profile("RuntimeDefault"), None, true, None),
            (None, None, true, None),
        ];
        for (p, c, privileged, want) in cases {
            let got = seccomp(
                &pod(p.clone()),
                &container(c.clone()),
                privileged,
                &caps,
                Some(local),
            )
            .unwrap();
            assert_eq!(
                got.map(|s| s.default_action()),
                want,
                "{p:?} {c:?} {privileged}"
            );
        }
        let missing = seccomp(
            &pod(None),
            &container(profile("Localhost")),
            false,
            &caps,
            None,
        );
        assert!(missing.is_err());
    }

    #[test]
    fn runtime_default_denies_by_capability() {
        let denied = |caps: &Capabilities| -> (Vec<String>, usize) {
            let s = runtime_default(caps).unwrap();
            let calls = s.syscalls().clone().unwrap();
            (calls[0].names().clone(), calls.len())
        };
        let default: Capabilities = DEFAULT_CAPABILITIES.into_iter().collect();
        let (names, rules) = denied(&default);
        for call in [
            "mount",
            "unshare",
            "setns",
            "keyctl",
            "reboot",
            "init_module",
            "bpf",
        ] {
            assert!(names.contains(&call.to_owned()), "{call}");
        }
        // 1 list + 7 clone flags + clone3.
        assert_eq!(rules, 9);
        let mut admin = default.clone();
        admin.insert(Capability::SysAdmin);
        admin.insert(Capability::SysTime);
        let (names, rules) = denied(&admin);
        for call in ["mount", "unshare", "setns", "settimeofday", "bpf"] {
            assert!(!names.contains(&call.to_owned()), "{call}");
        }
        assert!(names.contains(&"keyctl".to_owned()));
        assert!(names.contains(&"reboot".to_owned()));
        assert_eq!(rules, 1);
        let s = runtime_default(&default).unwrap();
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["defaultAction"], "SCMP_ACT_ALLOW");
        assert_eq!(json["syscalls"][1]["args"][0]["op"], "SCMP_CMP_MASKED_EQ");
        assert_eq!(json["syscalls"][8]["names"][0], "clone3");
        assert_eq!(json["syscalls"][8]["errnoRet"], 38);
    }
}
