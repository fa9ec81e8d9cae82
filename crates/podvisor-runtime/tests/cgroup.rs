//! Container cgroups: layout detection (pure parsing, everywhere) and real cgroups with real
//! processes (as root: those tests are `#[ignore]`d unless run with `--include-ignored`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use podvisor_runtime::cgroup::{self, CgroupMode, ContainerCgroup};
use rustix::process::{Pid, WaitOptions};

const HYBRID_MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
";

#[test]
fn detect_parses_mount_tables() {
    let no_files = |_: &Path| None;
    assert_eq!(
        cgroup::detect_from(HYBRID_MOUNTINFO, no_files),
        CgroupMode::Hybrid {
            memory_root: PathBuf::from("/sys/fs/cgroup/memory"),
            unified: Some(PathBuf::from("/sys/fs/cgroup/unified")),
        }
    );

    let v2 = "29 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";
    let controllers = |p: &Path| {
        (p == Path::new("/sys/fs/cgroup/cgroup.controllers"))
            .then(|| "cpuset cpu io memory hugetlb pids rdma misc\n".to_owned())
    };
    assert_eq!(
        cgroup::detect_from(v2, controllers),
        CgroupMode::Unified {
            root: PathBuf::from("/sys/fs/cgroup"),
            memory: true,
        }
    );
    assert_eq!(
        cgroup::detect_from(v2, |_| Some("cpu pids\n".to_owned())),
        CgroupMode::Unified {
            root: PathBuf::from("/sys/fs/cgroup"),
            memory: false,
        }
    );

    // /proc/mounts format, a v1 memory hierarchy sharing a mount with another controller,
    // an escaped mount point, and no cgroup2.
    let mounts = "\
proc /proc proc rw,nosuid 0 0
cgroup /sys/fs/cgroup/cpu\\040and\\040memory cgroup rw,nosuid,cpu,memory 0 0
";
    assert_eq!(
        cgroup::detect_from(mounts, no_files),
        CgroupMode::Hybrid {
            memory_root: PathBuf::from("/sys/fs/cgroup/cpu and memory"),
            unified: None,
        }
    );

    assert_eq!(
        cgroup::detect_from("22 1 0:5 / /proc rw - proc proc rw\n", no_files),
        CgroupMode::None
    );
    assert_eq!(cgroup::detect_from("", no_files), CgroupMode::None);
}

#[test]
fn hierarchy_roots_are_every_whole_cgroup_mount() {
    // A bind of a sub-cgroup (root other than `/`) is no hierarchy root.
    let table =
        format!("{HYBRID_MOUNTINFO}50 31 0:29 /kubepods /mnt/cpu rw - cgroup cgroup rw,cpu\n");
    assert_eq!(
        cgroup::hierarchy_roots_from(&table),
        ["cpu", "memory", "systemd", "unified"]
            .map(|h| PathBuf::from("/sys/fs/cgroup").join(h))
            .to_vec()
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn an_oci_containers_cpuset_is_made_without_load_balancing() {
    real_mode("an_oci_containers_cpuset_is_made_without_load_balancing");
    let Some(root) = cgroup::cpuset_v1_root() else {
        assert!(
            !matches!(cgroup::detect(), CgroupMode::Hybrid { .. }),
            "a hybrid machine without a v1 cpuset hierarchy"
        );
        assert_eq!(cgroup::prepare_v1_cpuset("p", "c").unwrap(), None);
        return;
    };
    let top = format!("podvisor-test/{}-cpuset", std::process::id());
    let parent = format!("{top}/pod");
    let dir = cgroup::prepare_v1_cpuset(&parent, "app-1")
        .unwrap()
        .unwrap();
    assert_eq!(dir, root.join(&parent).join("app-1"));
    // Every directory made has the root's CPUs and memory nodes, load balancing off.
    for d in [root.join(&top), root.join(&parent), dir.clone()] {
        assert_eq!(
            read(d.join("cpuset.cpus")),
            read(root.join("cpuset.cpus")),
            "{d:?}"
        );
        assert_eq!(
            read(d.join("cpuset.mems")),
            read(root.join("cpuset.mems")),
            "{d:?}"
        );
        assert_eq!(read(d.join("cpuset.sched_load_balance")), "0", "{d:?}");
    }
    // A process can join it (an empty cpuset would refuse: ENOSPC).
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exit 0 || exit 1",
            dir.display()
        ))
        .spawn()
        .unwrap();
    assert!(child.wait().unwrap().success());
    // Made again (a second container of the pod), nothing changes; all of it goes at once.
    let again = cgroup::prepare_v1_cpuset(&parent, "app-2")
        .unwrap()
        .unwrap();
    assert_eq!(read(again.join("cpuset.sched_load_balance")), "0");
    cgroup::remove_tree(&root.join(&top)).unwrap();
    assert!(!root.join(&top).exists());
    cgroup::remove_tree(&root.join(&top)).unwrap();
    let _ = std::fs::remove_dir(root.join("podvisor-test"));
}

#[test]
fn the_none_mode_does_nothing_and_paths_cannot_escape() {
    let cg =
        ContainerCgroup::create(&CgroupMode::None, "podvisor/x", "app", Some(1 << 20)).unwrap();
    assert!(cg.is_empty());
    assert!(cg.procs_paths().is_empty());
    assert!(cg.pids().is_empty());
    assert_eq!(cg.oom_kill_count(), 0);
    cg.kill_all().unwrap();
    cg.remove().unwrap();
    assert!(
        ContainerCgroup::open(&CgroupMode::None, "podvisor/x", "app")
            .unwrap()
            .is_empty()
    );

    let mode = CgroupMode::Unified {
        root: PathBuf::from("/nonexistent-cgroup-root"),
        memory: true,
    };
    for (parent, name) in [
        ("podvisor/../..", "app"),
        ("podvisor", "../app"),
        ("podvisor", ""),
        ("a", "b/c"),
    ] {
        let err = ContainerCgroup::create(&mode, parent, name, None).unwrap_err();
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::InvalidInput,
            "{parent} {name}"
        );
    }
}

/// Real-cgroup tests run only as root on a machine with cgroups.
fn real_mode(test: &str) -> CgroupMode {
    assert!(
        rustix::process::geteuid().is_root(),
        "{test}: needs root: this test is #[ignore]d unless run as root with --include-ignored (it creates cgroups)"
    );
    let mode = cgroup::detect();
    assert_ne!(
        mode,
        CgroupMode::None,
        "{test}: no cgroup hierarchy is mounted (the process runtime needs one)"
    );
    // Orphaned grandchildren come back to this process, which reaps them.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    mode
}

/// A test pod's cgroup parent, unique per test and process; removed (with everything in it)
/// when dropped, even if the test fails.
struct Scope {
    mode: CgroupMode,
    parent: String,
    cgroups: Vec<ContainerCgroup>,
    children: Vec<Child>,
}

impl Scope {
    fn new(mode: CgroupMode, test: &str) -> Scope {
        Scope {
            mode,
            parent: format!("podvisor-test/{}-{test}", std::process::id()),
            cgroups: Vec::new(),
            children: Vec::new(),
        }
    }

    fn create(&mut self, name: &str, limit: Option<u64>) -> ContainerCgroup {
        let cg = ContainerCgroup::create(&self.mode, &self.parent, name, limit).unwrap();
        self.cgroups.push(cg.clone());
        cg
    }

    /// Starts `sh -c <script>` after the shell has joined every cgroup of `cg`; `$@` holds
    /// the procs paths.
    fn spawn_in(&mut self, cg: &ContainerCgroup, script: &str) -> u32 {
        let join = "for p in \"$@\"; do echo $$ > \"$p\" || exit 99; done; ";
        let child = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("{join}{script}"))
            .arg("sh")
            .args(cg.procs_paths())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        self.children.push(child);
        pid
    }

    fn child_pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let pids: Vec<u32> = self
            .cgroups
            .iter()
            .flat_map(ContainerCgroup::pids)
            .collect();
        for cg in &self.cgroups {
            let _ = cg.kill_all();
        }
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        reap_grandchildren(&pids, &self.child_pids());
        for cg in &self.cgroups {
            let _ = cg.remove();
        }
        // The shared top directory, once no test uses it.
        for root in roots(&self.mode) {
            let _ = std::fs::remove_dir(root.join(&self.parent));
            let _ = std::fs::remove_dir(root.join("podvisor-test"));
        }
    }
}

fn roots(mode: &CgroupMode) -> Vec<PathBuf> {
    match mode {
        CgroupMode::Unified { root, .. } => vec![root.clone()],
        CgroupMode::Hybrid {
            memory_root,
            unified,
        } => std::iter::once(memory_root.clone())
            .chain(unified.clone())
            .collect(),
        CgroupMode::None => Vec::new(),
    }
}

/// Reaps `pids` that are not direct children: orphaned grandchildren come back to this
/// process (a subreaper) once their parent dies. Only these pids are waited for, so that
/// tests running in parallel never reap each other's children.
fn reap_grandchildren(pids: &[u32], children: &[u32]) {
    for &pid in pids.iter().filter(|p| !children.contains(p)) {
        let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            continue;
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match rustix::process::waitpid(Some(pid), WaitOptions::NOHANG) {
                Ok(Some(_)) => break,
                // Not dead yet, or not reparented to us yet.
                _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                _ => break,
            }
        }
    }
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 2..].chars().next();
            !matches!(state, Some('Z' | 'X'))
        }
        Err(_) => false,
    }
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .trim()
        .to_owned()
}

#[test]
fn detect_finds_this_machines_layout() {
    let mode = cgroup::detect();
    println!("detected cgroup mode: {mode:?}");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let v1_memory = mountinfo.lines().any(|l| {
        l.contains(" - cgroup ")
            && l.split(' ')
                .next_back()
                .is_some_and(|o| o.split(',').any(|o| o == "memory"))
    });
    if v1_memory {
        let CgroupMode::Hybrid {
            memory_root,
            unified,
        } = &mode
        else {
            panic!("a v1 memory hierarchy is mounted, expected the hybrid mode: {mode:?}");
        };
        assert!(memory_root.join("memory.limit_in_bytes").exists());
        if mountinfo.contains(" /sys/fs/cgroup/unified ") {
            assert_eq!(
                unified.as_deref(),
                Some(Path::new("/sys/fs/cgroup/unified"))
            );
        }
    } else {
        println!("no v1 memory hierarchy here; the hybrid assertions do not apply");
    }
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn create_join_kill_all_and_remove() {
    let mode = real_mode("create_join_kill_all_and_remove");
    let mut scope = Scope::new(mode.clone(), "kill");
    let cg = scope.create("app-1", Some(32 << 20));

    // The limit is in place, and the OOM killer enabled.
    match &mode {
        CgroupMode::Hybrid { .. } => {
            let dir = cg.memory_v1_dir().unwrap().to_path_buf();
            assert_eq!(read(dir.join("memory.limit_in_bytes")), "33554432");
            if dir.join("memory.memsw.limit_in_bytes").exists() {
                assert_eq!(read(dir.join("memory.memsw.limit_in_bytes")), "33554432");
            }
            assert!(read(dir.join("memory.oom_control")).contains("oom_kill_disable 0"));
        }
        CgroupMode::Unified { memory: true, .. } => {
            let dir = cg.unified_dir().unwrap().to_path_buf();
            assert_eq!(read(dir.join("memory.max")), "33554432");
        }
        _ => {}
    }

    // A process and its child join every cgroup.
    let sh = scope.spawn_in(&cg, "sleep 1000 & wait");
    wait_until(
        "two processes in the cgroup",
        Duration::from_secs(5),
        || cg.pids().len() == 2,
    );
    let pids = cg.pids();
    assert!(pids.contains(&sh), "{pids:?} lacks the shell {sh}");
    for path in cg.procs_paths() {
        let mut listed: Vec<u32> = read(path).lines().map(|l| l.parse().unwrap()).collect();
        listed.sort_unstable();
        assert_eq!(listed, pids);
    }

    // Re-adoption sees the same cgroup.
    let adopted = ContainerCgroup::open(&mode, &scope.parent, "app-1").unwrap();
    assert_eq!(adopted.procs_paths(), cg.procs_paths());
    assert_eq!(adopted.pids(), pids);
    let missing = ContainerCgroup::open(&mode, &scope.parent, "nope").unwrap_err();
    assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);

    let started = Instant::now();
    cg.kill_all().unwrap();
    println!("kill_all took {:?}", started.elapsed());
    for pid in &pids {
        assert!(!alive(*pid), "{pid} survived kill_all");
    }
    for child in &mut scope.children {
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
    }
    reap_grandchildren(&pids, &scope.child_pids());
    wait_until("an empty cgroup", Duration::from_secs(2), || {
        cg.pids().is_empty()
    });

    cg.remove().unwrap();
    for path in cg.procs_paths() {
        assert!(
            !path.parent().unwrap().exists(),
            "{} remains",
            path.display()
        );
        // The pod-level parent went with its last container.
        assert!(!path.parent().unwrap().parent().unwrap().exists());
    }
    cg.remove().unwrap();
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn kill_all_without_cgroup_kill_signals_every_process() {
    let mode = real_mode("kill_all_without_cgroup_kill_signals_every_process");
    let mut scope = Scope::new(mode.clone(), "loop");
    let cg = scope.create("app-2", None);
    scope.spawn_in(
        &cg,
        "sleep 1000 & sleep 1000 & sh -c 'sleep 1000 & wait' & wait",
    );
    wait_until("five processes", Duration::from_secs(5), || {
        cg.pids().len() == 5
    });
    let pids = cg.pids();

    // The v1 memory cgroup alone has no cgroup.kill: kill_all falls back to SIGKILL loops.
    let v1_only = match &mode {
        CgroupMode::Hybrid { memory_root, .. } => CgroupMode::Hybrid {
            memory_root: memory_root.clone(),
            unified: None,
        },
        other => other.clone(),
    };
    let only = ContainerCgroup::open(&v1_only, &scope.parent, "app-2").unwrap();
    only.kill_all().unwrap();
    for pid in &pids {
        assert!(!alive(*pid), "{pid} survived kill_all");
    }
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn oom_kill_count_rises_when_the_limit_is_exceeded() {
    let mode = real_mode("oom_kill_count_rises_when_the_limit_is_exceeded");
    if matches!(mode, CgroupMode::Unified { memory: false, .. }) {
        println!("skipping: the memory controller is not available");
        return;
    }
    let python = if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    let mut scope = Scope::new(mode, "oom");
    let cg = scope.create("hog-1", Some(32 << 20));
    assert_eq!(cg.oom_kill_count(), 0);
    scope.spawn_in(
        &cg,
        &format!("exec {python} -c 'a = bytearray(100 * 1024 * 1024); print(\"survived\")'"),
    );
    let status = scope.children[0].wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "python should be OOM-killed, got {status:?}"
    );
    wait_until("the OOM kill to be counted", Duration::from_secs(2), || {
        cg.oom_kill_count() >= 1
    });
    println!("oom_kill_count = {}", cg.oom_kill_count());
    cg.remove().unwrap();
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn the_v2_path_on_a_cgroup2_mount_without_controllers() {
    let mode = real_mode("the_v2_path_on_a_cgroup2_mount_without_controllers");
    // Here the hybrid's cgroup2 mount stands in for a pure v2 machine without the memory
    // controller; on a pure v2 machine the root itself is used.
    let root = match &mode {
        CgroupMode::Hybrid {
            unified: Some(u), ..
        } => u.clone(),
        CgroupMode::Unified { root, .. } => root.clone(),
        _ => {
            println!("skipping: no cgroup2 mount");
            return;
        }
    };
    let controllers = read(root.join("cgroup.controllers"));
    if controllers.split_whitespace().any(|c| c == "memory") {
        println!("skipping: {} has the memory controller", root.display());
        return;
    }
    let v2 = CgroupMode::Unified {
        root: root.clone(),
        memory: false,
    };
    let mut scope = Scope::new(v2.clone(), "v2");

    let err = ContainerCgroup::create(&v2, &scope.parent, "limited", Some(32 << 20)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    assert!(err.to_string().contains("cgroup.controllers"), "{err}");

    // Claiming a memory controller that is not there: the limit cannot be applied and the
    // error names the file; without a limit the cgroup degrades to kill-all only.
    let claims_memory = CgroupMode::Unified {
        root: root.clone(),
        memory: true,
    };
    let err = ContainerCgroup::create(&claims_memory, &scope.parent, "limited", Some(32 << 20))
        .unwrap_err();
    assert!(err.to_string().contains("cgroup.subtree_control"), "{err}");
    let cg = ContainerCgroup::create(&claims_memory, &scope.parent, "plain", None).unwrap();
    scope.cgroups.push(cg.clone());
    assert_eq!(cg.procs_paths().len(), 1);
    assert_eq!(cg.oom_kill_count(), 0);

    scope.spawn_in(&cg, "sleep 1000 & wait");
    wait_until("two processes", Duration::from_secs(5), || {
        cg.pids().len() == 2
    });
    let events = read(cg.events_path().unwrap());
    assert!(events.contains("populated 1"), "{events}");
    cg.kill_all().unwrap();
    assert!(cg.pids().is_empty());
    wait_until("populated 0", Duration::from_secs(2), || {
        read(cg.events_path().unwrap()).contains("populated 0")
    });
    // Zombies do not keep a cgroup busy: it can go before the shell is reaped.
    cg.remove().unwrap();
    assert!(!cg.unified_dir().unwrap().exists());
}
