//! Freed memory given back to the system.
//!
//! glibc's malloc keeps what a thread's arena has freed for that arena's next allocations, and
//! gives an arena's pages back only from its top. A large pod (a thousand containers: every
//! status the worker publishes is the whole pod) leaves hundreds of MiB of such free memory
//! spread over the arenas of the threads that wrote its statuses, held long after the pod has
//! gone (seen: 44 MiB → 437 MiB after a 300-container pod's deletion, 75 MiB after a trim, with
//! 18 MiB in use). So once a pod's worker has finished the node asks for a trim, which
//! `malloc_trim` does by returning every free page of every arena (`MADV_DONTNEED`); a burst
//! of finished pods makes one trim, a second after the first of them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a trim waits for more pods of the same burst to finish.
const SETTLE: Duration = Duration::from_secs(1);

/// Returns the free memory of every malloc arena to the system; whether any was returned.
/// Nothing to do (false) where the C library is not glibc.
pub fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes no pointers and locks each arena while it works.
        #[allow(unsafe_code, reason = "glibc's malloc_trim has no safe wrapper")]
        unsafe {
            libc::malloc_trim(0) != 0
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Coalesces requests for a [`trim`] into one per burst.
#[derive(Clone, Debug, Default)]
pub(crate) struct Trimmer {
    pending: Arc<AtomicBool>,
}

impl Trimmer {
    /// A trim [`SETTLE`] from now on a blocking thread, unless one is already pending.
    pub(crate) fn request(&self) {
        if self.pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let pending = Arc::clone(&self.pending);
        tokio::spawn(async move {
            tokio::time::sleep(SETTLE).await;
            pending.store(false, Ordering::Release);
            let _ = tokio::task::spawn_blocking(trim).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("reading status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    /// What a finished large pod leaves: many small blocks freed on a thread of their own (an
    /// arena other than the main one), which glibc keeps; a trim gives them back.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn a_trim_gives_back_what_a_thread_freed() {
        let before = std::thread::spawn(|| {
            // 64 MiB in 256-byte blocks, below malloc's mmap threshold: arena memory.
            let blocks: Vec<Box<[u8; 256]>> = (0..262_144).map(|_| Box::new([7u8; 256])).collect();
            let with = rss_kib();
            drop(blocks);
            with
        })
        .join()
        .expect("the allocating thread");
        let freed_but_held = rss_kib();
        assert!(trim(), "a trim found nothing to give back");
        let after = rss_kib();
        assert!(
            after + 32 * 1024 <= freed_but_held.max(before),
            "RSS {before} KiB with the blocks, {freed_but_held} KiB after freeing them, \
             {after} KiB after the trim"
        );
    }
}
