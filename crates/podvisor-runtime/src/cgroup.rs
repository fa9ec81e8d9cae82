//! Container cgroups: memory limits, OOM detection and kill-all, on pure cgroup v2, on the
//! v1/v2 hybrid layout, or on neither.
//!
//! Layouts ([`CgroupMode`], chosen once by [`detect`]):
//! - **unified** (pure v2): one cgroup `<root>/<parent>/<name>` carrying `memory.max`,
//!   `memory.swap.max = 0` and `memory.oom.group = 1` (the kubelet's default on v2), with
//!   `+memory` enabled in every ancestor's `cgroup.subtree_control`;
//! - **hybrid**: a v1 memory cgroup `<memory root>/<parent>/<name>` (`memory.limit_in_bytes`,
//!   `memory.memsw.limit_in_bytes` so the workload is OOM-killed instead of swapping, the OOM
//!   killer enabled in `memory.oom_control`) plus, when cgroup2 is mounted (usually at
//!   `/sys/fs/cgroup/unified`, without controllers), a parallel v2 cgroup for `cgroup.kill`
//!   and `cgroup.events`;
//! - **none**: no cgroup at all; every operation is a no-op and the caller falls back to
//!   process groups.
//!
//! This module does IO but makes no lifecycle decision: it never decides when to kill or
//! remove, and it never reaps (the shim, as subreaper, does).

pub mod dynmods;
pub mod resize;

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

/// Which cgroup layout the machine has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupMode {
    /// Pure cgroup v2 mounted at `root`.
    Unified {
        /// The cgroup2 mount point, usually `/sys/fs/cgroup`.
        root: PathBuf,
        /// `memory` is listed in the root's `cgroup.controllers` (limits and OOM counting are
        /// possible).
        memory: bool,
    },
    /// The v1 memory controller is mounted, and maybe a controller-less cgroup2 too.
    Hybrid {
        /// The v1 memory hierarchy's mount point, usually `/sys/fs/cgroup/memory`.
        memory_root: PathBuf,
        /// The cgroup2 mount point, usually `/sys/fs/cgroup/unified`.
        unified: Option<PathBuf>,
    },
    /// No usable cgroup hierarchy.
    None,
}

/// Detects the layout from `/proc/self/mountinfo` (or `/proc/mounts`).
pub fn detect() -> CgroupMode {
    let text = fs::read_to_string("/proc/self/mountinfo")
        .or_else(|_| fs::read_to_string("/proc/mounts"))
        .unwrap_or_default();
    detect_from(&text, |p| fs::read_to_string(p).ok())
}

/// [`detect`] on given mount-table text (mountinfo or `/proc/mounts` format); `read` reads a
/// file such as `<root>/cgroup.controllers`.
pub fn detect_from(mount_table: &str, read: impl Fn(&Path) -> Option<String>) -> CgroupMode {
    let mounts = parse_mount_table(mount_table);
    let memory_v1 = mounts
        .iter()
        .filter(|m| m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == "memory"))
        .min_by_key(|m| m.mount_point != Path::new("/sys/fs/cgroup/memory"));
    let v2 = cgroup2_mount(&mounts);
    match (memory_v1, v2) {
        (Some(mem), v2) => CgroupMode::Hybrid {
            memory_root: mem.mount_point.clone(),
            unified: v2.map(|m| m.mount_point.clone()),
        },
        (None, Some(v2)) => {
            let controllers = read(&v2.mount_point.join("cgroup.controllers")).unwrap_or_default();
            CgroupMode::Unified {
                root: v2.mount_point.clone(),
                memory: controllers.split_whitespace().any(|c| c == "memory"),
            }
        }
        (None, None) => CgroupMode::None,
    }
}

/// The cgroup2 mount: at `/sys/fs/cgroup` (pure v2), else `/sys/fs/cgroup/unified` (hybrid),
/// else any.
fn cgroup2_mount(mounts: &[MountEntry]) -> Option<&MountEntry> {
    mounts
        .iter()
        .filter(|m| m.fstype == "cgroup2")
        .min_by_key(|m| match m.mount_point.to_str() {
            Some("/sys/fs/cgroup") => 0,
            Some("/sys/fs/cgroup/unified") => 1,
            _ => 2,
        })
}

/// The mount point of every cgroup hierarchy this mount namespace sees whole (the mount's
/// root is the hierarchy's root): each v1 hierarchy (`cpu`, `memory`, `name=systemd`, ...)
/// and the cgroup2 mount. An OCI runtime places a container in every v1 hierarchy under
/// `linux.cgroupsPath`, so what a pod leaves behind is looked for in all of them.
pub fn hierarchy_roots() -> Vec<PathBuf> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    hierarchy_roots_from(&text)
}

/// Removes the cgroup at `path` (an OCI `linux.cgroupsPath`, `/<parent>/<name>`) and every
/// cgroup below it in every hierarchy, as an OCI runtime's delete does; the hierarchies are
/// read once per process (a shim's do not change). A missing cgroup is not an error; its
/// processes must be gone.
///
/// # Errors
///
/// `path` leaves the hierarchies' roots (`InvalidInput`), or a cgroup stays busy.
pub fn remove_in_every_hierarchy(path: &str) -> io::Result<()> {
    static ROOTS: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
    let rel = relative(parent, name)?;
    for root in ROOTS.get_or_init(hierarchy_roots) {
        remove_tree(&root.join(&rel))?;
    }
    Ok(())
}

/// [`hierarchy_roots`] of given mountinfo text.
pub fn hierarchy_roots_from(mount_table: &str) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = parse_mount_table(mount_table)
        .into_iter()
        .filter(|m| matches!(m.fstype.as_str(), "cgroup" | "cgroup2") && m.root == "/")
        .map(|m| m.mount_point)
        .collect();
    roots.sort();
    roots.dedup();
    roots
}

/// The v1 `cpuset` hierarchy's mount point, if this mount namespace sees it whole (read once
/// per process).
pub fn cpuset_v1_root() -> Option<&'static Path> {
    static ROOT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        parse_mount_table(&text)
            .into_iter()
            .find(|m| {
                m.fstype == "cgroup"
                    && m.root == "/"
                    && m.super_options.split(',').any(|o| o == "cpuset")
            })
            .map(|m| m.mount_point)
    })
    .as_deref()
}

/// Makes `<parent>/<name>` in the v1 `cpuset` hierarchy ready for an OCI runtime to put a
/// container there, without the cost a runtime pays making it itself: each directory it
/// makes gets `cpuset.sched_load_balance` 0 first, then its parent's `cpus` and `mems`.
///
/// A v1 cpuset starts with empty `cpus` and `mems`, so runc and youki's libcontainer copy
/// the parent's in. With load balancing on (every new cpuset's default), each such write
/// and each removal of the cpuset makes the kernel rebuild the scheduler domains: a walk of
/// every cpuset and every task, several milliseconds per container start on a busy node.
/// With the root cpuset load-balanced (as on every host with one scheduling domain) a child's
/// flag changes no scheduling, so turning it off before `cpus` is set costs nothing and
/// makes neither the write nor the removal rebuild anything. Existing directories are left
/// as they are. `Ok(None)`: no v1 cpuset hierarchy (pure v2, where an empty `cpuset.cpus`
/// means the parent's).
pub fn prepare_v1_cpuset(parent: &str, name: &str) -> io::Result<Option<PathBuf>> {
    match cpuset_v1_root() {
        Some(root) => prepare_v1_cpuset_at(root, parent, name).map(Some),
        None => Ok(None),
    }
}

/// [`prepare_v1_cpuset`] under a given cpuset hierarchy root.
pub fn prepare_v1_cpuset_at(root: &Path, parent: &str, name: &str) -> io::Result<PathBuf> {
    let rel = relative(parent, name)?;
    let mut current = root.to_path_buf();
    for component in rel.components() {
        let above = current.clone();
        current.push(component);
        match fs::create_dir(&current) {
            Ok(()) => {}
            // Made earlier: ready unless a crash came between its mkdir and its writes.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if !read_trimmed(&current.join("cpuset.cpus"))?.is_empty() {
                    continue;
                }
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("creating cgroup {}: {e}", current.display()),
                ));
            }
        }
        write_if_present(&current.join("cpuset.sched_load_balance"), "0")?;
        for file in ["cpuset.cpus", "cpuset.mems"] {
            write_file(&current.join(file), &read_trimmed(&above.join(file))?)?;
        }
    }
    Ok(current)
}

fn read_trimmed(path: &Path) -> io::Result<String> {
    fs::read_to_string(path)
        .map(|v| v.trim().to_owned())
        .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))
}

/// Removes `dir` and every cgroup below it, deepest first, retrying briefly while the kernel
/// still reports one busy. A missing `dir` is not an error. The processes must be gone.
pub fn remove_tree(dir: &Path) -> io::Result<()> {
    for child in fs::read_dir(dir).into_iter().flatten().flatten() {
        if child.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&child.path())?;
        }
    }
    remove_dir_retrying(dir)
}

/// One line of a mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// Where it is mounted (escapes undone).
    pub mount_point: PathBuf,
    /// The mount's root within its file system (`mountinfo`'s fourth field; `/` from
    /// `/proc/mounts`, which does not say).
    pub root: String,
    /// The file system type (`cgroup`, `cgroup2`, ...).
    pub fstype: String,
    /// The superblock's options (`rw,memory`, `rw,nsdelegate`).
    pub super_options: String,
}

/// Parses mountinfo lines (`id parent maj:min root mountpoint opts [optional...] - fstype
/// source superopts`) or `/proc/mounts` lines (`source mountpoint fstype opts 0 0`).
pub fn parse_mount_table(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if let Some(sep) = fields.iter().position(|f| *f == "-") {
                Some(MountEntry {
                    mount_point: unescape_mount_point(fields.get(4)?),
                    root: unescape_mount_path(fields.get(3)?),
                    fstype: (*fields.get(sep + 1)?).to_owned(),
                    super_options: fields.get(sep + 3).copied().unwrap_or_default().to_owned(),
                })
            } else {
                Some(MountEntry {
                    mount_point: unescape_mount_point(fields.get(1)?),
                    root: "/".to_owned(),
                    fstype: (*fields.get(2)?).to_owned(),
                    super_options: fields.get(3).copied().unwrap_or_default().to_owned(),
                })
            }
        })
        .collect()
}

/// Undoes the kernel's octal escapes in mount paths of `/proc/*/mountinfo` and `/proc/mounts`
/// (`\040` for a space).
pub fn unescape_mount_path(s: &str) -> String {
    String::from_utf8_lossy(&unescape_mount_bytes(s)).into_owned()
}

/// A mount point of a mount table, its escapes undone, byte for byte.
fn unescape_mount_point(s: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(unescape_mount_bytes(s)))
}

fn unescape_mount_bytes(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && b.get(i + 1..i + 4)
                .is_some_and(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// How long [`ContainerCgroup::kill_all`] keeps killing before giving up.
const KILL_TIMEOUT: Duration = Duration::from_secs(2);
/// How long [`ContainerCgroup::remove`] retries a busy cgroup.
const REMOVE_TIMEOUT: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(10);

/// One container instance's cgroups (zero, one or two directories depending on the mode).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerCgroup {
    /// The v1 memory cgroup (hybrid).
    memory_v1: Option<PathBuf>,
    /// The v2 cgroup (unified, or the hybrid's controller-less companion).
    unified: Option<PathBuf>,
    /// The v2 cgroup carries the memory controller (pure v2).
    unified_memory: bool,
}

impl ContainerCgroup {
    /// Creates `<parent>/<name>` in every hierarchy the mode uses and applies the memory
    /// limit. `parent` is relative to the hierarchy roots (e.g. `podvisor/<pod uid>`). An
    /// existing cgroup of that name is reused. With [`CgroupMode::None`] nothing is created.
    pub fn create(
        mode: &CgroupMode,
        parent: &str,
        name: &str,
        memory_limit: Option<u64>,
    ) -> io::Result<ContainerCgroup> {
        let rel = relative(parent, name)?;
        let mut cg = ContainerCgroup::default();
        let result = (|| match mode {
            CgroupMode::None => Ok(()),
            CgroupMode::Hybrid {
                memory_root,
                unified,
            } => {
                let dir = memory_root.join(&rel);
                make_dirs(memory_root, &dir)?;
                cg.memory_v1 = Some(dir.clone());
                // Keep the kernel OOM killer enabled: a limit must end in an OOM kill (and
                // `OOMKilled`), never in a frozen container.
                write_file(&dir.join("memory.oom_control"), "0")?;
                set_v1_limit(&dir, memory_limit)?;
                if let Some(unified) = unified {
                    let dir = unified.join(&rel);
                    make_dirs(unified, &dir)?;
                    cg.unified = Some(dir);
                }
                Ok(())
            }
            CgroupMode::Unified { root, memory } => {
                let dir = root.join(&rel);
                if !*memory && memory_limit.is_some() {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        format!(
                            "cannot limit memory: the memory controller is not listed in {}",
                            root.join("cgroup.controllers").display()
                        ),
                    ));
                }
                let mut enable = *memory;
                // Enable +memory from the root down to the parent, creating directories.
                let mut current = root.clone();
                let parents: Vec<_> = rel
                    .parent()
                    .into_iter()
                    .flat_map(Path::components)
                    .collect();
                for component in std::iter::once(None).chain(parents.into_iter().map(Some)) {
                    if let Some(c) = component {
                        current.push(c);
                        make_dir(&current)?;
                    }
                    if enable && let Err(e) = enable_memory(&current) {
                        if memory_limit.is_some() {
                            return Err(e);
                        }
                        // Without a limit, memory accounting is a nicety; kill-all still works.
                        enable = false;
                    }
                }
                make_dir(&dir)?;
                cg.unified = Some(dir.clone());
                cg.unified_memory = enable;
                if enable {
                    let max = memory_limit.map_or_else(|| "max".to_owned(), |l| l.to_string());
                    write_file(&dir.join("memory.max"), &max)?;
                    write_if_present(&dir.join("memory.swap.max"), "0")?;
                    // The kubelet's default on v2: an OOM kill takes the whole container.
                    write_if_present(&dir.join("memory.oom.group"), "1")?;
                }
                Ok(())
            }
        })();
        match result {
            Ok(()) => Ok(cg),
            Err(e) => {
                let _ = cg.remove();
                Err(e)
            }
        }
    }

    /// Re-adopts an existing container cgroup (after an agent or shim restart). Fails with
    /// `NotFound` when the mode uses cgroups and none of them exists.
    pub fn open(mode: &CgroupMode, parent: &str, name: &str) -> io::Result<ContainerCgroup> {
        let rel = relative(parent, name)?;
        let existing = |root: &Path| Some(root.join(&rel)).filter(|d| d.is_dir());
        let cg = match mode {
            CgroupMode::None => return Ok(ContainerCgroup::default()),
            CgroupMode::Hybrid {
                memory_root,
                unified,
            } => ContainerCgroup {
                memory_v1: existing(memory_root),
                unified: unified.as_deref().and_then(existing),
                unified_memory: false,
            },
            CgroupMode::Unified { root, .. } => {
                let unified = existing(root);
                ContainerCgroup {
                    unified_memory: unified
                        .as_ref()
                        .is_some_and(|d| d.join("memory.max").exists()),
                    unified,
                    memory_v1: None,
                }
            }
        };
        if cg.memory_v1.is_none() && cg.unified.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no cgroup {} exists", rel.display()),
            ));
        }
        Ok(cg)
    }

    /// Every `cgroup.procs` file a container process must join (write its pid, or `0` from
    /// the process itself before exec), so that its descendants are born inside.
    pub fn procs_paths(&self) -> Vec<PathBuf> {
        self.dirs().map(|d| d.join("cgroup.procs")).collect()
    }

    /// The v1 memory cgroup directory, if any (for `cgroup.event_control` OOM eventfds).
    pub fn memory_v1_dir(&self) -> Option<&Path> {
        self.memory_v1.as_deref()
    }

    /// The v2 cgroup directory, if any.
    pub fn unified_dir(&self) -> Option<&Path> {
        self.unified.as_deref()
    }

    /// The v2 `cgroup.events` file (`populated 0|1`, pollable with `POLLPRI`), if any.
    pub fn events_path(&self) -> Option<PathBuf> {
        self.unified.as_ref().map(|d| d.join("cgroup.events"))
    }

    /// Whether there is no cgroup at all ([`CgroupMode::None`]).
    pub fn is_empty(&self) -> bool {
        self.memory_v1.is_none() && self.unified.is_none()
    }

    /// The processes in the cgroup(s), sorted, each once. Exited-but-unreaped processes may
    /// be listed on some kernels.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self
            .dirs()
            .filter_map(|d| fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|text| {
                text.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<u32>>()
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// How many processes the kernel OOM killer has killed in this cgroup (v1
    /// `memory.oom_control` `oom_kill`, v2 `memory.events` `oom_kill`); 0 when unknown.
    pub fn oom_kill_count(&self) -> u64 {
        let file = if let Some(dir) = &self.memory_v1 {
            dir.join("memory.oom_control")
        } else if let (Some(dir), true) = (&self.unified, self.unified_memory) {
            dir.join("memory.events")
        } else {
            return 0;
        };
        fs::read_to_string(file)
            .ok()
            .and_then(|text| {
                text.lines().find_map(|l| {
                    let (key, value) = l.split_once(' ')?;
                    (key == "oom_kill").then(|| value.trim().parse().ok())?
                })
            })
            .unwrap_or(0)
    }

    /// Kills every process in the cgroup: v2 `cgroup.kill` when available, and SIGKILL to each
    /// listed pid until none is left alive, for at most about 2 s (then `TimedOut`). Dead but
    /// unreaped processes count as gone; reaping them is the parent's (the shim's) job.
    pub fn kill_all(&self) -> io::Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        if let Some(dir) = &self.unified {
            let kill = dir.join("cgroup.kill");
            if kill.exists() {
                write_file(&kill, "1")?;
            }
        }
        let deadline = Instant::now() + KILL_TIMEOUT;
        loop {
            let alive: Vec<u32> = self.pids().into_iter().filter(|p| is_alive(*p)).collect();
            if alive.is_empty() {
                return Ok(());
            }
            for pid in &alive {
                if let Some(pid) = i32::try_from(*pid)
                    .ok()
                    .and_then(rustix::process::Pid::from_raw)
                {
                    // ESRCH: it died meanwhile.
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "processes {alive:?} still alive in {} after {} s of SIGKILL",
                        self.dirs()
                            .map(|d| d.display().to_string())
                            .collect::<Vec<_>>()
                            .join(" and "),
                        KILL_TIMEOUT.as_secs()
                    ),
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Removes the container cgroup(s), retrying briefly while the kernel still reports them
    /// busy, then the parent directories (`<parent>`) if they became empty. Missing
    /// directories are not an error.
    pub fn remove(&self) -> io::Result<()> {
        let mut first_error = None;
        for dir in self.dirs() {
            // Exec cgroups a killed shim could not remove (the container's kill emptied them).
            for child in fs::read_dir(dir).into_iter().flatten().flatten() {
                if child.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = remove_dir_retrying(&child.path());
                }
            }
            if let Err(e) = remove_dir_retrying(dir) {
                first_error.get_or_insert(e);
                continue;
            }
            if let Some(parent) = dir.parent() {
                // Other containers of the pod may still have cgroups there: best effort.
                let _ = fs::remove_dir(parent);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn dirs(&self) -> impl Iterator<Item = &PathBuf> {
        self.memory_v1.iter().chain(self.unified.iter())
    }

    /// Where one exec's processes go, so that all of them can be found and killed when it
    /// ends, even those that left its process group (`setsid`): the `cgroup.procs` files to
    /// join and the exec's own cgroup, a child `name` of the container's v2 cgroup (the
    /// hybrid's companion, or the pure v2 cgroup, whose memory limit still applies to its
    /// children). They stay in the container's v1 memory cgroup (its limit applies; v1 has
    /// no `cgroup.kill`). Without a v2 cgroup, or when the child cannot be made, the exec
    /// joins the container's cgroups and `None` comes back: only its process group can be
    /// killed then.
    pub fn exec_cgroup(&self, name: &str) -> (Vec<PathBuf>, Option<ExecCgroup>) {
        let child = self.unified.as_ref().and_then(|dir| {
            let child = dir.join(relative("", name).ok()?);
            match make_dir(&child) {
                Ok(()) => Some(ExecCgroup { dir: child }),
                Err(e) => {
                    eprintln!("podvisor: exec cgroup: {e}");
                    None
                }
            }
        });
        let Some(child) = child else {
            return (self.procs_paths(), None);
        };
        let procs = self
            .memory_v1
            .iter()
            .chain(std::iter::once(&child.dir))
            .map(|d| d.join("cgroup.procs"))
            .collect();
        (procs, Some(child))
    }
}

/// One exec's v2 cgroup (see [`ContainerCgroup::exec_cgroup`]).
#[derive(Debug)]
pub struct ExecCgroup {
    dir: PathBuf,
}

impl ExecCgroup {
    /// The processes still in it.
    pub fn pids(&self) -> Vec<u32> {
        fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Kills every process in it (`cgroup.kill`, then SIGKILL to each one left, for at most
    /// about 2 s) and removes it once they are gone (the shim reaps them).
    pub fn kill_and_remove(&self) -> io::Result<()> {
        let kill = self.dir.join("cgroup.kill");
        if kill.exists() {
            write_file(&kill, "1")?;
        }
        let deadline = Instant::now() + KILL_TIMEOUT;
        loop {
            let alive: Vec<u32> = self.pids().into_iter().filter(|p| is_alive(*p)).collect();
            if alive.is_empty() {
                break;
            }
            for pid in alive {
                if let Some(pid) = i32::try_from(pid)
                    .ok()
                    .and_then(rustix::process::Pid::from_raw)
                {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("processes still alive in {}", self.dir.display()),
                ));
            }
            std::thread::sleep(POLL);
        }
        remove_dir_retrying(&self.dir)
    }
}

/// `<parent>/<name>` as a relative path that cannot escape the hierarchy root.
/// Sets the pod's memory limit on its cgroup `parent` (V15: `ResourceConfigForPod`), once a
/// container cgroup below it exists (on v2 that enabled the memory controller down to it). A
/// hierarchy without the memory controller is skipped.
///
/// # Errors
///
/// The limit cannot be written.
pub fn limit_pod_memory(mode: &CgroupMode, parent: &str, limit: u64) -> io::Result<()> {
    let rel = Path::new(parent.trim_start_matches('/'));
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid cgroup path {parent:?}"),
        ));
    }
    match mode {
        CgroupMode::None => Ok(()),
        CgroupMode::Hybrid { memory_root, .. } => set_v1_limit(&memory_root.join(rel), Some(limit)),
        CgroupMode::Unified { root, memory } => {
            let max = root.join(rel).join("memory.max");
            if *memory && max.exists() {
                write_file(&max, &limit.to_string())
            } else {
                Ok(())
            }
        }
    }
}

fn relative(parent: &str, name: &str) -> io::Result<PathBuf> {
    let rel = Path::new(parent.trim_start_matches('/')).join(name);
    let ok = !name.is_empty()
        && !name.contains('/')
        && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(rel)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid cgroup path {parent:?} / {name:?}"),
        ))
    }
}

/// Creates `dir` and its missing ancestors below `root`.
fn make_dirs(root: &Path, dir: &Path) -> io::Result<()> {
    let rel = dir.strip_prefix(root).unwrap_or(dir);
    let mut current = root.to_path_buf();
    for c in rel.components() {
        current.push(c);
        make_dir(&current)?;
    }
    Ok(())
}

fn make_dir(dir: &Path) -> io::Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("creating cgroup {}: {e}", dir.display()),
        )),
    }
}

fn write_file(path: &Path, value: &str) -> io::Result<()> {
    fs::write(path, value).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing {value:?} to {}: {e}", path.display()),
        )
    })
}

/// Writes a file that only exists with some kernel configurations (swap accounting, newer
/// kernels).
fn write_if_present(path: &Path, value: &str) -> io::Result<()> {
    if path.exists() {
        write_file(path, value)
    } else {
        Ok(())
    }
}

/// Enables the memory controller for `dir`'s children.
fn enable_memory(dir: &Path) -> io::Result<()> {
    let control = dir.join("cgroup.subtree_control");
    let current = fs::read_to_string(&control)
        .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", control.display())))?;
    if current.split_whitespace().any(|c| c == "memory") {
        return Ok(());
    }
    write_file(&control, "+memory").map_err(|e| {
        if e.kind() == io::ErrorKind::ResourceBusy {
            io::Error::new(
                e.kind(),
                format!(
                    "{e} (cgroup v2 allows no processes in a cgroup that delegates controllers: \
                     move the processes in {} into a child cgroup)",
                    dir.join("cgroup.procs").display()
                ),
            )
        } else {
            e
        }
    })
}

/// Sets (or, with `None`, lifts) a v1 memory limit, swap included when swap accounting is on.
/// The kernel requires `memsw >= limit` at every step, so the order of the writes depends on
/// the direction of the change.
fn set_v1_limit(dir: &Path, limit: Option<u64>) -> io::Result<()> {
    let value = limit.map_or_else(|| "-1".to_owned(), |l| l.to_string());
    let limit_file = dir.join("memory.limit_in_bytes");
    let memsw_file = dir.join("memory.memsw.limit_in_bytes");
    if !memsw_file.exists() {
        return write_file(&limit_file, &value);
    }
    let current_memsw: u64 = fs::read_to_string(&memsw_file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(u64::MAX);
    if limit.unwrap_or(u64::MAX) > current_memsw {
        write_file(&memsw_file, &value)?;
        write_file(&limit_file, &value)
    } else {
        write_file(&limit_file, &value)?;
        write_file(&memsw_file, &value)
    }
}

/// Whether `pid` is a live (not zombie) process.
fn is_alive(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name, which may itself contain ')'.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, Some("Z" | "X" | "x") | None)
}

fn remove_dir_retrying(dir: &Path) -> io::Result<()> {
    let deadline = Instant::now() + REMOVE_TIMEOUT;
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::ResourceBusy && Instant::now() < deadline => {
                std::thread::sleep(POLL);
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("removing cgroup {}: {e}", dir.display()),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_mount_table;
    use std::os::unix::ffi::OsStrExt;

    /// Mount points come back byte for byte, escapes undone (a space, and a byte that is not
    /// UTF-8), from both table formats.
    #[test]
    fn mount_points_are_unescaped_byte_for_byte() {
        let table = "\
36 25 0:32 / /var/lib/pod\\040dir/ns rw - tmpfs tmpfs rw
37 25 0:33 / /var/lib/x\\377y rw - tmpfs tmpfs rw
tmpfs /run/a\\134b tmpfs rw 0 0
";
        let points: Vec<Vec<u8>> = parse_mount_table(table)
            .into_iter()
            .map(|m| m.mount_point.as_os_str().as_bytes().to_vec())
            .collect();
        assert_eq!(
            points,
            [
                b"/var/lib/pod dir/ns".to_vec(),
                b"/var/lib/x\xffy".to_vec(),
                b"/run/a\\b".to_vec()
            ]
        );
    }
}
