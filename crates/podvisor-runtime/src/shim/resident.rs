//! Keeps the shim's resident set small.
//!
//! The shim is a re-exec of the whole `podvisor` binary. Starting it touches code and tables
//! it never needs again (the dynamic loader's relocation tables, argument parsing, set-up),
//! and the kernel maps file pages around every fault, so a fresh shim has a few MiB of
//! *clean, file-backed* pages in its page tables. They cost no memory of their own (they
//! are the page cache the agent maps too), but they count in the shim's RSS.
//!
//! [`trim`] drops those mappings: for every mapping of a file that is not writable and holds
//! no anonymous (copied-on-write) page, `madvise(MADV_DONTNEED)` removes the page-table
//! entries. That is exact for such a mapping: the next access faults the same bytes back in
//! from the file, so only the pages the shim really keeps using return. Writable mappings, and
//! read-only ones with a private copy of any page (RELRO after relocation), are left alone.

use std::io;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long the shim must have been quiet before it trims: work comes in bursts (a start, an
/// exec probe, an exit), and trimming in the middle of one would only fault the pages back.
pub(super) const QUIET: Duration = Duration::from_secs(1);

/// Trims once the shim has been quiet for [`QUIET`] after some work: [`Idle::touch`] after
/// work, [`Idle::run`] on a thread of its own (it sleeps in between, running no code).
pub(super) struct Idle {
    last_work: Mutex<Option<Instant>>,
    worked: Condvar,
}

/// The shim's one [`Idle`].
pub(super) static IDLE: Idle = Idle::new();

impl Idle {
    pub(super) const fn new() -> Idle {
        Idle {
            last_work: Mutex::new(None),
            worked: Condvar::new(),
        }
    }

    /// Some work just ended.
    pub(super) fn touch(&self) {
        let mut last = self
            .last_work
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *last = Some(Instant::now());
        self.worked.notify_one();
    }

    /// Forever: waits for work, then for [`QUIET`] without any, then runs `quiet` and trims.
    pub(super) fn run(&self, quiet: impl Fn()) {
        let mut last = self
            .last_work
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            let Some(at) = *last else {
                last = self
                    .worked
                    .wait(last)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            };
            let quiet_for = at.elapsed();
            if quiet_for < QUIET {
                last = self
                    .worked
                    .wait_timeout(last, QUIET - quiet_for)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
                continue;
            }
            *last = None;
            drop(last);
            quiet();
            if let Err(e) = trim() {
                eprintln!("podvisor shim: trimming the resident set: {e}");
            }
            last = self
                .last_work
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// One mapping of `/proc/self/smaps`: its range, whether it may be dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    droppable: bool,
}

/// Parses `/proc/self/smaps`: a header line per mapping (`start-end perms offset dev inode
/// [path]`) followed by `Key: value` lines.
fn mappings(smaps: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            )
        {
            let perms = fields.next().unwrap_or("");
            let inode = fields.nth(2).unwrap_or("0");
            let path = fields.next().unwrap_or("");
            // A file (inode ≠ 0, a real path), read-only, private.
            let file_backed = inode != "0" && path.starts_with('/');
            let droppable = file_backed && perms.starts_with('r') && perms.get(1..2) == Some("-");
            out.push(Mapping {
                start,
                end,
                droppable,
            });
            continue;
        }
        // Any copied-on-write page makes the mapping's contents differ from the file.
        if first == "Anonymous:"
            && fields.next().is_some_and(|kb| kb != "0")
            && let Some(last) = out.last_mut()
        {
            last.droppable = false;
        }
    }
    out
}

/// Drops the page-table entries of the shim's clean, read-only file mappings; returns how many
/// bytes of address space it covered.
pub(super) fn trim() -> io::Result<usize> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mut covered = 0;
    for m in mappings(&smaps).into_iter().filter(|m| m.droppable) {
        let len = m.end - m.start;
        // SAFETY: the range is a whole mapping of this process that is read-only and holds no
        // private page, so MADV_DONTNEED only unmaps page-table entries whose contents the
        // kernel faults back in, unchanged, from the file on the next access. No Rust object
        // lives in it (it is code and constant data of mapped files).
        #[allow(unsafe_code)]
        let rc = unsafe { libc::madvise(m.start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
        if rc == 0 {
            covered += len;
        }
        // SAFETY: advice only.
        #[allow(unsafe_code)]
        let _ = unsafe { libc::madvise(m.start as *mut libc::c_void, len, libc::MADV_RANDOM) };
    }
    Ok(covered)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55e000000000-55e000100000 r--p 00000000 fe:00 123 /usr/bin/podvisor
Rss:                1096 kB
Anonymous:             0 kB
55e000100000-55e000200000 r-xp 00100000 fe:00 123 /usr/bin/podvisor
Anonymous:             0 kB
55e000200000-55e000210000 r--p 00200000 fe:00 123 /usr/bin/podvisor
Anonymous:            64 kB
55e000210000-55e000220000 rw-p 00210000 fe:00 123 /usr/bin/podvisor
Anonymous:             8 kB
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
Anonymous:           132 kB
7ffc00000000-7ffc00002000 r-xp 00000000 00:00 0                          [vdso]
Anonymous:             0 kB
7f0000100000-7f0000101000 r--s 00000000 fe:00 99 /dev/shm/x
Anonymous:             0 kB
";

    #[test]
    fn only_clean_read_only_private_file_mappings_are_dropped() {
        let ms = mappings(SMAPS);
        let droppable: Vec<bool> = ms.iter().map(|m| m.droppable).collect();
        assert_eq!(
            droppable,
            [true, true, false, false, false, false, true],
            "{ms:?}"
        );
        assert_eq!(ms[0].start, 0x55e0_0000_0000);
        assert_eq!(ms[0].end, 0x55e0_0010_0000);
    }

    #[test]
    fn idle_trims_only_after_a_quiet_second() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let idle = std::sync::Arc::new(Idle::new());
        let quiet = std::sync::Arc::new(AtomicUsize::new(0));
        {
            let (idle, quiet) = (std::sync::Arc::clone(&idle), std::sync::Arc::clone(&quiet));
            std::thread::spawn(move || {
                idle.run(|| {
                    quiet.fetch_add(1, Ordering::SeqCst);
                });
            });
        }
        idle.touch();
        // Pending until a quiet second has passed, then done (the marker is cleared).
        assert!(idle.last_work.lock().unwrap().is_some());
        assert_eq!(quiet.load(Ordering::SeqCst), 0);
        let deadline = Instant::now() + Duration::from_secs(10);
        while idle.last_work.lock().unwrap().is_some() {
            assert!(Instant::now() < deadline, "no trim after 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Once, before the trim.
        while quiet.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < deadline, "the quiet hook never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(quiet.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn trimming_this_process_keeps_it_working() {
        // This test binary keeps running code from the dropped mappings afterwards.
        let covered = trim().unwrap();
        assert!(covered > 0);
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        assert_eq!(text.len(), 1000);
        assert!(mappings(&std::fs::read_to_string("/proc/self/smaps").unwrap()).len() > 3);
    }
}
