//! Processes as `/proc` shows them: listing, finding a test's processes by marker, signals.

use rustix::process::{Pid, Signal};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How long [`kill_marked`] keeps killing before it gives up.
const KILL_LIMIT: Duration = Duration::from_secs(5);

/// One process, from `/proc/<pid>/stat` and `/proc/<pid>/cmdline`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    /// Its pid.
    pub pid: i32,
    /// Its parent's pid.
    pub ppid: i32,
    /// `R`, `S`, `D`, `Z` (zombie), ... (`?` when unreadable).
    pub state: char,
    /// Its session id (the pid of the session leader; 0 for a process whose session lies
    /// outside our PID namespace).
    pub session: i32,
    /// The arguments joined by spaces, trimmed (empty for a zombie or a kernel thread).
    pub cmdline: String,
}

impl Proc {
    /// Whether it has exited and waits to be reaped.
    pub fn is_zombie(&self) -> bool {
        self.state == 'Z'
    }
}

/// Where a marker is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerIn {
    /// In the command line only.
    Cmdline,
    /// In the command line or, failing that, the environment (`/proc/<pid>/environ`, readable
    /// for other users' processes only by root).
    CmdlineOrEnviron,
}

impl MarkerIn {
    fn marks(self, p: &Proc, marker: &str) -> bool {
        p.cmdline.contains(marker)
            || (self == MarkerIn::CmdlineOrEnviron
                && std::fs::read(format!("/proc/{}/environ", p.pid))
                    .is_ok_and(|env| String::from_utf8_lossy(&env).contains(marker)))
    }
}

/// Every process but this one, zombies included; a process that exits while `/proc` is read
/// is left out.
pub fn all_processes() -> Vec<Proc> {
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter_map(read_proc)
        .collect()
}

fn read_proc(pid: i32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name in parentheses may hold spaces and parentheses: fields start after the
    // last `)`. They are: state ppid pgrp session ...
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
    let ppid = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let session = fields.nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_owned()
        })
        .unwrap_or_default();
    Some(Proc {
        pid,
        ppid,
        state,
        session,
        cmdline,
    })
}

/// The processes carrying `marker` (where `look` says) and all their descendants, zombies
/// included. A zombie never carries a marker itself (its command line and environment read
/// empty), it is only found as a child.
pub fn marked_processes(marker: &str, look: MarkerIn) -> Vec<Proc> {
    let all = all_processes();
    let mut set: BTreeSet<i32> = all
        .iter()
        .filter(|p| look.marks(p, marker))
        .map(|p| p.pid)
        .collect();
    loop {
        let before = set.len();
        for p in &all {
            if set.contains(&p.ppid) {
                set.insert(p.pid);
            }
        }
        if set.len() == before {
            break;
        }
    }
    all.into_iter().filter(|p| set.contains(&p.pid)).collect()
}

/// The zombie children of `parents`.
pub fn zombie_children(parents: &[i32]) -> Vec<Proc> {
    all_processes()
        .into_iter()
        .filter(|p| p.is_zombie() && parents.contains(&p.ppid))
        .collect()
}

/// Whether `pid` is alive (a zombie is not).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s[s.rfind(')')? + 1..].split_whitespace().next()? != "Z"))
        .unwrap_or(false)
}

/// Sends `sig` to `pid` (a `u32` from [`std::process::Child::id`] or an `i32` from `/proc`);
/// a pid that does not fit, or a process already gone, is no error: the callers clean up.
pub fn signal(pid: impl TryInto<i32>, sig: Signal) {
    if let Some(pid) = pid.try_into().ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// Ends a child the polite way: SIGTERM, then up to `grace` for it to exit (its status),
/// else SIGKILL (`None`). Either way the child is reaped.
pub fn terminate(
    child: &mut std::process::Child,
    grace: Duration,
) -> Option<std::process::ExitStatus> {
    signal(child.id(), Signal::TERM);
    let deadline = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Sends `sig` once to every process [`marked_processes`] finds, and returns them.
pub fn signal_marked(marker: &str, look: MarkerIn, sig: Signal) -> Vec<Proc> {
    let found = marked_processes(marker, look);
    for p in &found {
        signal(p.pid, sig);
    }
    found
}

/// SIGKILLs every live marked process (and descendant) until none is left, for 5 s at most
/// (a fork racing the scan is caught by the next round); returns what was found first,
/// zombies included.
pub fn kill_marked(marker: &str, look: MarkerIn) -> Vec<Proc> {
    let first = marked_processes(marker, look);
    let deadline = Instant::now() + KILL_LIMIT;
    let mut left: Vec<Proc> = first.iter().filter(|p| !p.is_zombie()).cloned().collect();
    while !left.is_empty() && Instant::now() < deadline {
        for p in &left {
            signal(p.pid, Signal::KILL);
        }
        std::thread::sleep(Duration::from_millis(50));
        left = marked_processes(marker, look)
            .into_iter()
            .filter(|p| !p.is_zombie())
            .collect();
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    fn marker(tag: &str) -> String {
        format!("pvtestkit-{tag}-{}", std::process::id())
    }

    /// Polls `marked_processes` until it finds `n` processes.
    fn wait_marked(marker: &str, look: MarkerIn, n: usize) -> Vec<Proc> {
        wait_marked_until(marker, look, |found| found.len() >= n)
    }

    /// Polls `marked_processes` until `done` holds of what it finds (or 5 s pass).
    fn wait_marked_until(
        marker: &str,
        look: MarkerIn,
        done: impl Fn(&[Proc]) -> bool,
    ) -> Vec<Proc> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let found = marked_processes(marker, look);
            if done(&found) || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn reap(mut child: Child) {
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_marked_shell_and_its_unmarked_child_are_found_and_killed() {
        let m = marker("tree");
        // The child `sleep` carries no marker: it is found as a descendant.
        let shell = Command::new("sh")
            .args(["-c", &format!("sleep 30; : {m}")])
            .spawn()
            .unwrap();
        let pid = i32::try_from(shell.id()).unwrap();
        let me = i32::try_from(std::process::id()).unwrap();
        // Between the shell's fork and its child's exec, the child still shows the shell's
        // (marked) command line: wait until the child has become `sleep 30`.
        let found = wait_marked_until(&m, MarkerIn::Cmdline, |found| {
            found.len() == 2 && found.iter().any(|p| p.cmdline == "sleep 30")
        });
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(found.iter().any(|p| p.pid == pid && p.ppid == me));
        assert!(
            found
                .iter()
                .any(|p| p.ppid == pid && p.cmdline == "sleep 30")
        );
        assert!(alive(pid));

        let killed = kill_marked(&m, MarkerIn::Cmdline);
        assert_eq!(killed.len(), 2);
        // The shell is our child: a zombie until reaped, which `alive` does not count.
        assert!(!alive(pid));
        assert!(zombie_children(&[me]).iter().any(|p| p.pid == pid));
        reap(shell);
        assert!(marked_processes(&m, MarkerIn::Cmdline).is_empty());
    }

    #[test]
    fn a_marker_in_the_environment_counts_only_when_asked() {
        let m = marker("env");
        let child = Command::new("sleep")
            .arg("30")
            .env("PODVISOR_TESTKIT_MARKER", &m)
            .spawn()
            .unwrap();
        let found = wait_marked(&m, MarkerIn::CmdlineOrEnviron, 1);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(marked_processes(&m, MarkerIn::Cmdline).is_empty());
        signal(child.id(), Signal::KILL);
        reap(child);
    }

    #[test]
    fn the_session_is_read() {
        // `setsid` (not a group leader here) makes a session of its own, then execs `sleep`.
        let child = Command::new("setsid")
            .args(["sleep", "30"])
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = read_proc(pid);
        while seen.as_ref().is_none_or(|p| p.cmdline != "sleep 30") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            seen = read_proc(pid);
        }
        reap(child);
        assert_eq!(seen.map(|p| p.session), Some(pid));
        let me = i32::try_from(std::process::id()).unwrap();
        assert!(!all_processes().iter().any(|p| p.pid == me));
    }
}
