//! One `podvisor serve` per state directory: `<state>/serve.lock`, held (`flock`) for the
//! server's whole life and naming its pid.
//!
//! The lock is taken before anything else of the state is opened, so any process that holds
//! the store also holds this lock. A `serve` killed with SIGKILL releases both when it dies,
//! except while a child it was forking had not yet exec'd: that child holds copies of every
//! descriptor (all close-on-exec) for the moment until its exec. So a held lock whose recorded
//! owner is dead is waited for; a held lock whose recorded owner is a live `serve` is refused
//! at once, naming it.

use anyhow::{Context, bail};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a lock left to a dead `serve`'s descendants is waited for.
const LEFTOVER_WAIT: Duration = Duration::from_secs(10);
/// How often it is tried meanwhile.
const RETRY: Duration = Duration::from_millis(10);

/// The held lock (released when dropped, or when the process dies).
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

/// Takes the lock of `state_dir`.
///
/// # Errors
///
/// Another live `serve` holds it (its pid is named), or processes left by a dead one still
/// hold it after [`LEFTOVER_WAIT`] (their pids are named), or the file cannot be opened.
pub fn acquire(state_dir: &Path) -> anyhow::Result<StateLock> {
    let path = state_dir.join("serve.lock");
    // std opens every file close-on-exec: no shim or container inherits it.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()));
            }
        }
        let owner = recorded_pid(&mut file);
        if let Some(pid) = owner.filter(|&pid| is_live_serve(pid)) {
            bail!(
                "another podvisor serve (pid {pid}) is using the state directory {}",
                state_dir.display()
            );
        }
        if started.elapsed() > LEFTOVER_WAIT {
            let holders = holders_of(&path);
            bail!(
                "{} is still locked {LEFTOVER_WAIT:?} after its podvisor serve{} died, by {}",
                path.display(),
                owner.map(|p| format!(" (pid {p})")).unwrap_or_default(),
                if holders.is_empty() {
                    "a process this one cannot see".to_owned()
                } else {
                    holders.join(", ")
                }
            );
        }
        std::thread::sleep(RETRY);
    }
    file.set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)).map(drop))
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(StateLock { _file: file })
}

fn recorded_pid(file: &mut File) -> Option<i32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Whether `pid` is a live (not zombie) process running `podvisor serve` (and so not a pid
/// reused by something else).
fn is_live_serve(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    if !matches!(state, Some(s) if s != "Z" && s != "X") {
        return false;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    cmdline.split(|&b| b == 0).any(|arg| arg == b"serve")
}

/// `pid (command)` of every process with `path` open.
pub fn holders_of(path: &Path) -> Vec<String> {
    let target: PathBuf = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mut holders = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let holds = std::fs::read_dir(entry.path().join("fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == target));
        if holds {
            let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            holders.push(format!("pid {pid} ({})", comm.trim()));
        }
    }
    holders
}
