//! Timestamp arithmetic helpers. The core never reads the clock: every instant comes in as an
//! argument.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// `a - b` as a signed duration.
pub fn since(a: Timestamp, b: Timestamp) -> SignedDuration {
    a.duration_since(b)
}

/// Converts a std duration (saturating).
pub fn to_signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

/// Whole seconds as a signed duration.
pub fn secs(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

/// Whole seconds elapsed from `b` to `a`, floored, never negative.
pub fn whole_secs_between(a: Timestamp, b: Timestamp) -> i64 {
    since(a, b).as_secs().max(0)
}

/// Truncates to whole seconds, as the API stores times (P16).
pub fn trunc_secs(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}
