//! The scheduling queue's part for pods that did not fit (`pkg/scheduler/backend/queue`): a
//! pod whose attempt failed waits in the unschedulable pool until a cluster event that may
//! make it fit moves it (a Node added or its labels, taints, cordon or allocatable changed; a
//! pod on the node deleted or finished, freeing resources and ports; the pod itself changed),
//! then runs again once its back-off has passed: 1 s after the first failure, doubling per
//! attempt up to 10 s (`podInitialBackoffDuration`, `podMaxBackoffDuration`). A pod nothing
//! moved is tried again after 5 minutes (`podMaxInUnschedulablePodsDuration`). Each attempt
//! writes at most one event, so a pod is never retried, nor reported, faster than this.
//!
//! Pure: time is an argument.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The first back-off.
pub(crate) const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// The longest back-off.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long a pod no event moved stays unschedulable before it is tried again.
pub(crate) const MAX_UNSCHEDULABLE: Duration = Duration::from_secs(300);

/// A waiting pod.
#[derive(Debug, Clone)]
struct Entry {
    namespace: String,
    name: String,
    attempts: u32,
    last_attempt: Instant,
    moved: bool,
}

/// The pods that did not fit, by uid.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    entries: HashMap<String, Entry>,
}

/// `calculateBackoffDuration`: 1 s doubled for each attempt after the first, at most 10 s.
pub(crate) fn backoff(attempts: u32) -> Duration {
    let shift = attempts.saturating_sub(1).min(16);
    INITIAL_BACKOFF.saturating_mul(1 << shift).min(MAX_BACKOFF)
}

impl Queue {
    /// An attempt of pod `uid` failed at `now` (or, at start, one failed before: `attempts`
    /// 0 lets it run at once if moved).
    pub(crate) fn failed(&mut self, uid: &str, namespace: &str, name: &str, now: Instant) {
        let e = self.entries.entry(uid.to_owned()).or_insert_with(|| Entry {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            attempts: 0,
            last_attempt: now,
            moved: false,
        });
        e.attempts += 1;
        e.last_attempt = now;
        e.moved = false;
    }

    /// Whether pod `uid` waits here.
    pub(crate) fn contains(&self, uid: &str) -> bool {
        self.entries.contains_key(uid)
    }

    /// A pod that failed before this queue existed (serve restarted): tried at once.
    pub(crate) fn adopt(&mut self, uid: &str, namespace: &str, name: &str, now: Instant) {
        self.entries.entry(uid.to_owned()).or_insert_with(|| Entry {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            attempts: 0,
            last_attempt: now,
            moved: true,
        });
    }

    /// `MoveAllToActiveOrBackoffQueue`: a cluster event that may let every waiting pod fit.
    pub(crate) fn move_all(&mut self) {
        for e in self.entries.values_mut() {
            e.moved = true;
        }
    }

    /// Pod `uid` itself changed (its spec, labels or annotations).
    pub(crate) fn move_one(&mut self, uid: &str) {
        if let Some(e) = self.entries.get_mut(uid) {
            e.moved = true;
        }
    }

    /// Pod `uid` is bound, deleted or no longer the default scheduler's.
    pub(crate) fn forget(&mut self, uid: &str) {
        self.entries.remove(uid);
    }

    fn due_at(e: &Entry) -> Instant {
        if e.attempts == 0 {
            e.last_attempt
        } else if e.moved {
            e.last_attempt + backoff(e.attempts)
        } else {
            e.last_attempt + MAX_UNSCHEDULABLE
        }
    }

    /// The pods to try now, `(uid, namespace, name)`; they stay until [`Queue::failed`] or
    /// [`Queue::forget`] reports the attempt.
    pub(crate) fn due(&self, now: Instant) -> Vec<(String, String, String)> {
        let mut due: Vec<_> = self
            .entries
            .iter()
            .filter(|(_, e)| Self::due_at(e) <= now)
            .map(|(uid, e)| (uid.clone(), e.namespace.clone(), e.name.clone()))
            .collect();
        due.sort_by(|a, b| (&a.1, &a.2).cmp(&(&b.1, &b.2)));
        due
    }

    /// When the next pod is due, if any waits.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.entries.values().map(Self::due_at).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_to_ten() {
        let got: Vec<u64> = (1..=6).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 10, 10]);
        assert_eq!(backoff(100), MAX_BACKOFF);
    }

    /// A failed pod waits for an event; once moved it runs after its back-off, not before;
    /// without any event it runs after five minutes.
    #[test]
    fn a_pod_runs_again_only_once_moved_and_backed_off() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        q.failed("u", "default", "web", t0);
        assert!(
            q.due(t0 + Duration::from_secs(60)).is_empty(),
            "nothing moved it"
        );
        q.move_all();
        assert!(q.due(t0 + Duration::from_millis(999)).is_empty());
        assert_eq!(q.due(t0 + INITIAL_BACKOFF).len(), 1);
        // Failed again: two seconds this time, and moved again first.
        let t1 = t0 + INITIAL_BACKOFF;
        q.failed("u", "default", "web", t1);
        q.move_one("u");
        assert!(q.due(t1 + Duration::from_millis(1999)).is_empty());
        assert_eq!(q.next_due(), Some(t1 + Duration::from_secs(2)));
        // Unmoved: the five-minute flush.
        let t2 = t1 + Duration::from_secs(2);
        q.failed("u", "default", "web", t2);
        assert_eq!(q.next_due(), Some(t2 + MAX_UNSCHEDULABLE));
        assert_eq!(q.due(t2 + MAX_UNSCHEDULABLE).len(), 1);
        q.forget("u");
        assert_eq!(q.next_due(), None);
        // A pod adopted at start runs at once.
        q.adopt("v", "default", "old", t2);
        assert_eq!(q.due(t2).len(), 1);
    }
}
