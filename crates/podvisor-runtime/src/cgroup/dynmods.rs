//! `favordynmods` on the cgroup2 hierarchy: the node tunable that keeps an RCU grace period off
//! every container start.
//!
//! Moving a process into a cgroup (a write to `cgroup.procs`, which every container start
//! makes: libcontainer's intermediate process, the shim's child) write-locks the kernel's
//! `cgroup_threadgroup_rwsem` by default. That lock is a per-CPU rwsem tuned for its readers
//! (every fork and exit), so its writer first waits out an RCU grace period whenever no
//! other writer came just before, which is the case for a pod started on a quiet node. Here
//! that wait was 6–7 ms of a 26 ms start (`perf` of the API bench: the intermediate asleep
//! in `synchronize_rcu` under `percpu_down_write`, from `__cgroup1_procs_write`).
//!
//! The cgroup2 mount option `favordynmods` is the kernel's own answer ("favor dynamic
//! modifications such as task migrations over the hot paths of fork and exit"): since
//! Linux 6.18 a migration then write-locks only the moved process's thread group (fork and
//! exit take one more uncontended read lock); from 6.0 to 6.17 the rwsem is kept in its
//! writer-friendly state (fork and exit take its slower path). On 6.18 the kernel cannot turn
//! the per-thread-group locking off again before a reboot, whatever the mount says.
//!
//! A node agent sets it as the kubelet sets its kernel tunables at start (`vm.overcommit_memory`
//! and the others of `setupKernelTunables`): by default, with `--protect-kernel-defaults` to
//! leave the host as it is. The option is a property of the cgroup2 hierarchy, whichever of its
//! mounts it is set through; only a process in the initial cgroup namespace can set it.

use std::io;
use std::path::{Path, PathBuf};

use super::parse_mount_table;

/// The cgroup2 mount option.
pub const FAVORDYNMODS: &str = "favordynmods";

/// What [`favor_dynamic_modifications`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dynmods {
    /// Set now, through the cgroup2 mount at this path.
    Set(PathBuf),
    /// Already set (by the host's configuration, or an earlier podvisor).
    AlreadySet(PathBuf),
    /// Not set, and left so (`--protect-kernel-defaults`).
    Protected(PathBuf),
    /// No cgroup2 hierarchy is mounted (a cgroup v1-only host).
    NoCgroup2,
    /// The kernel did not take it: it refused a flag (nothing was changed), or left the option
    /// off (outside the initial cgroup namespace), or, read back, the hierarchy lost another
    /// of its options (said in `reason`).
    Refused {
        /// The cgroup2 mount.
        mount: PathBuf,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for Dynmods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dynmods::Set(m) => write!(
                f,
                "set the cgroup2 option favordynmods on {} (a container's cgroup move no longer \
                 waits for an RCU grace period; --protect-kernel-defaults leaves it off)",
                m.display()
            ),
            Dynmods::AlreadySet(m) => {
                write!(f, "the cgroup2 option favordynmods is on ({})", m.display())
            }
            Dynmods::Protected(m) => write!(
                f,
                "the cgroup2 option favordynmods is off on {} and left so \
                 (--protect-kernel-defaults): each container start may wait for an RCU grace \
                 period (several ms) when it moves its process into its cgroup",
                m.display()
            ),
            Dynmods::NoCgroup2 => {
                write!(f, "no cgroup2 hierarchy is mounted: favordynmods not set")
            }
            Dynmods::Refused { mount, reason } => write!(
                f,
                "could not set the cgroup2 option favordynmods on {}: {reason}",
                mount.display()
            ),
        }
    }
}

/// The cgroup2 mount of a mount table (mountinfo text) and its superblock's options, without
/// `rw`/`ro` (the first cgroup2 mount: every mount of the hierarchy shares the options).
pub fn cgroup2_mount(mountinfo: &str) -> Option<(PathBuf, Vec<String>)> {
    parse_mount_table(mountinfo)
        .into_iter()
        .find(|m| m.fstype == "cgroup2")
        .map(|m| {
            let options = m
                .super_options
                .split(',')
                .filter(|o| !o.is_empty() && *o != "rw")
                .map(str::to_owned)
                .collect();
            (m.mount_point, options)
        })
}

/// Whether `favordynmods` is on (`None`: no cgroup2 hierarchy is mounted), from this process's
/// mount table.
#[must_use]
pub fn is_on() -> Option<bool> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    cgroup2_mount(&mountinfo).map(|(_, options)| options.iter().any(|o| o == FAVORDYNMODS))
}

/// [`is_on`] in a word, for the benches' headers: `on`, `off` or `(no cgroup2)`.
#[must_use]
pub fn state_word() -> &'static str {
    match is_on() {
        Some(true) => "on",
        Some(false) => "off",
        None => "(no cgroup2)",
    }
}

/// The flags a reconfiguration of the hierarchy is given: a reconfiguration sets every root
/// flag from the flags it is given (it would clear `nsdelegate` or `memory_recursiveprot` if they
/// were left out), so it carries each of today's options, then `favordynmods`.
pub fn reconfiguration_flags(options: &[String]) -> Vec<String> {
    options
        .iter()
        .filter(|o| *o != FAVORDYNMODS)
        .cloned()
        .chain(std::iter::once(FAVORDYNMODS.to_owned()))
        .collect()
}

/// Sets `favordynmods` on the cgroup2 hierarchy unless `protect` (or it is already set), and
/// says what it found or did. A flag the kernel refuses (a kernel before 6.0 has no such
/// option) aborts before anything changes; the result is read back from the mount table.
#[must_use]
pub fn favor_dynamic_modifications(protect: bool) -> Dynmods {
    let read = || std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Some((mount, options)) = cgroup2_mount(&read()) else {
        return Dynmods::NoCgroup2;
    };
    if options.iter().any(|o| o == FAVORDYNMODS) {
        return Dynmods::AlreadySet(mount);
    }
    if protect {
        return Dynmods::Protected(mount);
    }
    if let Err(e) = reconfigure(&mount, &reconfiguration_flags(&options)) {
        return Dynmods::Refused {
            mount,
            reason: e.to_string(),
        };
    }
    match cgroup2_mount(&read()) {
        Some((_, now)) if now.iter().any(|o| o == FAVORDYNMODS) => {
            let lost: Vec<&String> = options.iter().filter(|o| !now.contains(o)).collect();
            if lost.is_empty() {
                Dynmods::Set(mount)
            } else {
                Dynmods::Refused {
                    mount,
                    reason: format!("the hierarchy lost the options {lost:?} on reconfiguration"),
                }
            }
        }
        _ => Dynmods::Refused {
            mount,
            reason: "the kernel left it off (podvisor is not in the initial cgroup namespace)"
                .to_owned(),
        },
    }
}

/// Reconfigures the file system mounted at `mount` with `flags` (`fspick` + `fsconfig`: the
/// superblock only, the mount's own flags such as `nosuid` are untouched).
fn reconfigure(mount: &Path, flags: &[String]) -> io::Result<()> {
    use rustix::mount::{FsPickFlags, fsconfig_reconfigure, fsconfig_set_flag, fspick};
    let fd = fspick(
        rustix::fs::CWD,
        mount,
        FsPickFlags::FSPICK_CLOEXEC
            | FsPickFlags::FSPICK_NO_AUTOMOUNT
            | FsPickFlags::FSPICK_SYMLINK_NOFOLLOW,
    )?;
    for flag in flags {
        fsconfig_set_flag(&fd, flag.as_str())
            .map_err(|e| io::Error::new(e.kind(), format!("option {flag}: {e}")))?;
    }
    fsconfig_reconfigure(&fd)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
35 24 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
36 35 0:31 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
38 35 0:33 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory
";

    #[test]
    fn the_cgroup2_mount_and_its_superblock_options_without_rw() {
        let (mount, options) = cgroup2_mount(HYBRID).unwrap();
        assert_eq!(mount, Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(options, ["nsdelegate", "memory_recursiveprot"]);
        let v1_only = HYBRID
            .lines()
            .filter(|l| !l.contains("cgroup2"))
            .collect::<Vec<_>>();
        assert_eq!(cgroup2_mount(&v1_only.join("\n")), None);
    }

    #[test]
    fn a_reconfiguration_keeps_every_option_of_today_and_adds_favordynmods_once() {
        let keep = ["nsdelegate".to_owned(), "memory_recursiveprot".to_owned()];
        assert_eq!(
            reconfiguration_flags(&keep),
            ["nsdelegate", "memory_recursiveprot", "favordynmods"]
        );
        assert_eq!(reconfiguration_flags(&[]), ["favordynmods"]);
        let with = ["favordynmods".to_owned(), "nsdelegate".to_owned()];
        assert_eq!(reconfiguration_flags(&with), ["nsdelegate", "favordynmods"]);
    }

    /// Root, initial cgroup namespace: `protect` changes nothing; then it is set (or found
    /// set) with the other options kept, and a second call finds it set. It is left on: on
    /// Linux 6.18 the kernel keeps its per-thread-group locking until a reboot anyway, and
    /// `serve` sets it too.
    #[test]
    #[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
    fn favordynmods_is_set_on_the_cgroup2_hierarchy_keeping_its_other_options() {
        assert!(
            rustix::process::geteuid().is_root(),
            "needs root: this test is #[ignore]d unless run as root with --include-ignored"
        );
        let read = || std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let (mount, before) = cgroup2_mount(&read()).expect("a cgroup2 hierarchy is mounted");
        let protected = favor_dynamic_modifications(true);
        let was_set = before.iter().any(|o| o == FAVORDYNMODS);
        if was_set {
            assert_eq!(protected, Dynmods::AlreadySet(mount.clone()));
        } else {
            assert_eq!(protected, Dynmods::Protected(mount.clone()));
            assert_eq!(
                cgroup2_mount(&read()).unwrap().1,
                before,
                "protect changes nothing"
            );
        }
        let outcome = favor_dynamic_modifications(false);
        if matches!(outcome, Dynmods::Refused { .. }) {
            panic!("{outcome}");
        }
        let (_, after) = cgroup2_mount(&read()).unwrap();
        assert!(after.iter().any(|o| o == FAVORDYNMODS), "{after:?}");
        assert!(
            before.iter().all(|o| after.contains(o)),
            "{before:?} → {after:?}"
        );
        assert_eq!(
            favor_dynamic_modifications(false),
            Dynmods::AlreadySet(mount.clone())
        );
        if !was_set {
            assert_eq!(outcome, Dynmods::Set(mount.clone()));
        }
    }
}
