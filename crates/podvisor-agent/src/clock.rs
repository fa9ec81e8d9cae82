//! Where the agent's `now` comes from, and how a wall-clock deadline becomes a tokio timer.
//!
//! The lifecycle core speaks wall-clock [`Timestamp`]s; tokio sleeps until monotonic
//! [`Instant`]s. Only the agent reads a clock, through [`Clock`], so tests can run pods on
//! tokio's paused clock ([`TokioClock`]) while production uses the system time
//! ([`SystemClock`]).

use jiff::{SignedDuration, Timestamp};
use std::time::Duration;
use tokio::time::Instant;

/// The source of `now` for every input the agent feeds to a `PodMachine`.
pub trait Clock: Send + Sync + 'static {
    /// The current wall-clock time.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock (`jiff::Timestamp::now`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A wall clock that advances with tokio's clock: `origin` plus the tokio time elapsed since
/// the clock was created. Under `tokio::time::pause` (tests with `start_paused = true`) wall
/// time then jumps exactly as far as tokio's timers do, so a pod runs through minutes of
/// back-off in microseconds.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: Timestamp,
    anchor: Instant,
}

impl TokioClock {
    /// A clock reading `origin` now. Call it inside the tokio runtime whose clock it follows.
    pub fn new(origin: Timestamp) -> TokioClock {
        TokioClock {
            origin,
            anchor: Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed =
            SignedDuration::try_from(self.anchor.elapsed()).unwrap_or(SignedDuration::MAX);
        self.origin.saturating_add(elapsed).unwrap_or(self.origin)
    }
}

/// How long from `now` until `at`: zero when `at` is already past, rounded up to the next
/// millisecond (tokio's timer resolution) so the wake-up never comes before the deadline.
pub fn wait_until(now: Timestamp, at: Timestamp) -> Duration {
    let d = at.duration_since(now);
    if d <= SignedDuration::ZERO {
        return Duration::ZERO;
    }
    let d = Duration::try_from(d).unwrap_or(Duration::MAX);
    let ms = d.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// The tokio instant at which the wall-clock deadline `at` is reached, as seen by `clock`.
pub fn instant_for(clock: &dyn Clock, at: Timestamp) -> Instant {
    let now = clock.now();
    let base = Instant::now();
    base.checked_add(wait_until(now, at))
        .unwrap_or_else(|| base + Duration::from_secs(86_400 * 365))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_until_past_deadline_is_zero() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert_eq!(wait_until(now, now), Duration::ZERO);
        assert_eq!(
            wait_until(now, now - SignedDuration::from_secs(5)),
            Duration::ZERO
        );
    }

    #[test]
    fn wait_until_rounds_up_to_milliseconds() {
        let now = Timestamp::from_second(1_000).unwrap();
        let at = now + SignedDuration::from_nanos(1_500_001);
        assert_eq!(wait_until(now, at), Duration::from_millis(2));
        let at = now + SignedDuration::from_secs(10);
        assert_eq!(wait_until(now, at), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let origin = Timestamp::from_second(1_767_225_600).unwrap();
        let clock = TokioClock::new(origin);
        tokio::time::sleep(Duration::from_secs(42)).await;
        assert_eq!(clock.now(), origin + SignedDuration::from_secs(42));
    }
}
