//! Test support shared by podvisor's real-process tests and benches (a dev-dependency only,
//! never published): find the processes a test started by a *marker* string, kill them,
//! remove the cgroups their pods left, and summarise bench samples.
//!
//! A test gives every process it starts a unique marker: in a command line (a state directory
//! under `/tmp/<marker>` appears in every shim's `--pod-dir`), or in the environment (a variable
//! that every container inherits). [`marked_processes`] finds the processes carrying it and all
//! their descendants, which catches daemons and children that carry nothing themselves; a
//! clean-up then SIGKILLs them with [`kill_marked`] and removes the pods' cgroups with
//! [`remove_pod_cgroups`].
//!
//! [`registry::Registry`] is a real `docker-registry` on 127.0.0.1 for pull tests, with
//! `skopeo` pushes.
//!
//! What it does not do: start podvisor, talk to its API or judge a test. Everything here reads
//! `/proc` and `/sys/fs/cgroup` as it is at the moment of the call, so a process may come or go
//! between two calls; callers poll where that matters.

pub mod cgroups;
pub mod mounts;
pub mod numbers;
pub mod procs;
pub mod registry;

pub use cgroups::{remove_pod_cgroup, remove_pod_cgroups};
pub use mounts::{detach_mounts_under, mount_points_under};
pub use procs::{
    MarkerIn, Proc, alive, all_processes, kill_marked, marked_processes, signal, signal_marked,
    terminate, zombie_children,
};
/// The signals [`signal`] and [`signal_marked`] send.
pub use rustix::process::Signal;

/// The kubectl the tests drive: `PODVISOR_KUBECTL` when set, else the first `kubectl` on
/// `PATH` (`/usr/local/bin`, `/usr/bin`, ...), else the kubectl 1.34 that
/// `scripts/install-test-deps` keeps under `~/.cache/podvisor-test`. Panics, saying how to
/// get one, when there is none.
pub fn kubectl() -> std::path::PathBuf {
    use std::path::PathBuf;
    if let Some(p) = std::env::var_os("PODVISOR_KUBECTL").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("kubectl"))
            .find(|p| p.is_file())
    });
    let cached = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache/podvisor-test/kubectl-1.34/kubectl"))
        .filter(|p| p.is_file());
    on_path.or(cached).expect(
        "no kubectl: put one on PATH, name it with PODVISOR_KUBECTL, or run \
         scripts/install-test-deps (it downloads kubectl 1.34)",
    )
}

/// Writes an executable script (mode 0755) that a test is about to run, without the
/// "text file busy" race: were the test process to write it, another test thread's `fork`
/// could copy the still-open write descriptor into a child that holds it until its `exec`,
/// and running the script meanwhile fails with `ETXTBSY`. Here a `sh` child writes the file,
/// so only that short-lived, single-threaded process ever holds it open for writing.
pub fn write_script(path: &std::path::Path, body: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut sh = Command::new("/bin/sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn /bin/sh to write a script");
    let mut stdin = sh.stdin.take().expect("piped stdin");
    stdin
        .write_all(body.as_bytes())
        .expect("write the script body");
    drop(stdin);
    let status = sh.wait().expect("wait for /bin/sh");
    assert!(
        status.success(),
        "writing {} failed: {status}",
        path.display()
    );
}
