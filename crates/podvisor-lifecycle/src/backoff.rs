//! Restart back-off (CrashLoopBackOff), section 5.
//!
//! One entry per (container name, image) — the image stands in for the spec hash (B2), so an
//! image change starts a fresh back-off.

use crate::config::BackoffConfig;
use crate::time::{since, to_signed};
use k8s_openapi::jiff::Timestamp;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
struct Entry {
    delay: Duration,
    last_update: Timestamp,
}

/// The result of a back-off check at a start attempt (B3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackoffCheck {
    /// The start may proceed (the entry was advanced).
    Proceed,
    /// The start is blocked until `until`; `delay` is the current delay shown in messages (B5).
    Blocked {
        /// The current delay.
        delay: Duration,
        /// When the start may proceed.
        until: Timestamp,
    },
}

/// All back-off entries of one pod.
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    config: BackoffConfig,
    entries: HashMap<(String, String), Entry>,
}

impl Backoff {
    /// An empty table using `config`.
    pub fn new(config: BackoffConfig) -> Self {
        Backoff {
            config,
            entries: HashMap::new(),
        }
    }

    fn expired(&self, entry: &Entry, finished_at: Timestamp) -> bool {
        // B4: expired when the dead instance ran longer than `reset_after` after the last restart.
        since(finished_at, entry.last_update) > to_signed(self.config.reset_after)
    }

    /// Whether a start may proceed now (B3). `finished_at` is the newest exited instance's
    /// finish time; with none, no back-off applies and the entry is left untouched.
    /// Does not modify the table: call [`Backoff::advance`] when the start proceeds.
    pub fn check(
        &self,
        name: &str,
        image: &str,
        finished_at: Option<Timestamp>,
        now: Timestamp,
    ) -> BackoffCheck {
        let Some(finished_at) = finished_at else {
            return BackoffCheck::Proceed;
        };
        if let Some(entry) = self.entries.get(&(name.to_string(), image.to_string()))
            && !self.expired(entry, finished_at)
            && since(now, finished_at) < to_signed(entry.delay)
        {
            return BackoffCheck::Blocked {
                delay: entry.delay,
                until: finished_at + to_signed(entry.delay),
            };
        }
        BackoffCheck::Proceed
    }

    /// Advances the entry for a start that proceeds after an exited instance (B3 `Next`):
    /// (re)initialised to the initial delay when absent or expired, else doubled up to the cap.
    pub fn advance(&mut self, name: &str, image: &str, finished_at: Timestamp, now: Timestamp) {
        let key = (name.to_string(), image.to_string());
        let delay = match self.entries.get(&key) {
            Some(entry) if !self.expired(entry, finished_at) => {
                (entry.delay * 2).min(self.config.max)
            }
            _ => self.config.initial,
        };
        self.entries.insert(
            key,
            Entry {
                delay,
                last_update: now,
            },
        );
    }

    /// Restores an entry after an agent restart: the delay shown in the last published
    /// `CrashLoopBackOff` message and the time of the start it last let through.
    pub fn restore(&mut self, name: &str, image: &str, delay: Duration, last_update: Timestamp) {
        self.entries.insert(
            (name.to_string(), image.to_string()),
            Entry { delay, last_update },
        );
    }

    /// Forgets entries of other images of `name` (B2: an image change starts afresh).
    pub fn retain_image(&mut self, name: &str, image: &str) {
        self.entries.retain(|(n, i), _| n != name || i == image);
    }
}

/// Image pull back-off (B9): one entry per image of the pod (the kubelet's key is
/// `<podUID>_<image>`), measured from the last failed pull. The curve is the restart
/// back-off's (10 s doubling to 300 s); an entry expires after twice the cap without a failure
/// (client-go's `hasExpired`: 600 s).
#[derive(Debug, Clone, Default)]
pub struct ImageBackoff {
    config: BackoffConfig,
    entries: HashMap<String, Entry>,
}

impl ImageBackoff {
    /// An empty table using `config`'s initial delay and cap.
    pub fn new(config: BackoffConfig) -> Self {
        ImageBackoff {
            config,
            entries: HashMap::new(),
        }
    }

    fn live(&self, image: &str, now: Timestamp) -> Option<&Entry> {
        self.entries
            .get(image)
            .filter(|e| since(now, e.last_update) <= to_signed(self.config.max * 2))
    }

    /// When pulls of `image` may be tried again, if they are backing off now
    /// (`IsInBackOffSinceUpdate`).
    pub fn blocked_until(&self, image: &str, now: Timestamp) -> Option<Timestamp> {
        let entry = self.live(image, now)?;
        (since(now, entry.last_update) < to_signed(entry.delay))
            .then(|| entry.last_update + to_signed(entry.delay))
    }

    /// A pull of `image` failed at `now` (`Next`): the delay starts at the initial one, or
    /// doubles up to the cap.
    pub fn failed(&mut self, image: &str, now: Timestamp) {
        let delay = match self.live(image, now) {
            Some(entry) => (entry.delay * 2).min(self.config.max),
            None => self.config.initial,
        };
        self.entries.insert(
            image.to_string(),
            Entry {
                delay,
                last_update: now,
            },
        );
    }
}
