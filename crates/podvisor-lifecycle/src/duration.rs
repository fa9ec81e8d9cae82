//! Duration formatting exactly as Kubernetes prints it.
//!
//! Two families, because clients match on both:
//! - [`human_duration`] / [`human_signed_duration`] / [`short_human_duration`]: apimachinery's
//!   `k8s.io/apimachinery/pkg/util/duration`, used by kubectl for AGE and the `(45s ago)` suffix of
//!   RESTARTS (K8, K9);
//! - [`go_duration`]: Go's `time.Duration.String()`, used inside kubelet messages such as
//!   `back-off 1m20s restarting failed container=...` (B5).
//!
//! All functions are pure; "since" computations take both instants as arguments.

use std::time::Duration;

use k8s_openapi::jiff::SignedDuration;

/// `duration.HumanDuration` for a non-negative duration (K8, K9): a succinct form with about
/// two to three significant figures.
///
/// `45s`, `119s`, `2m3s`, `5m`, `3h`, `7h59m`, `47h`, `2d9h`, `7d`, `729d`, `2y3d`, `8y`.
/// Sub-second remainders are truncated (`1.9s` → `1s`).
pub fn human_duration(d: Duration) -> String {
    human_signed_duration(to_signed(d))
}

/// `duration.HumanDuration` over a signed duration, including its tolerance for clock skew:
/// anything above -2 s (exclusive) counts as "almost now" and prints `0s`; anything at or below
/// -2 s prints `<invalid>`.
///
/// This is what kubectl prints for `now - timestamp` when the timestamp lies in the future.
pub fn human_signed_duration(d: SignedDuration) -> String {
    // Go: `int(d.Seconds())` truncates toward zero, so -1.9 s is -1 and still "0s".
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{h}h", hours / 24);
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{dy}d", hours / 24 / 365);
    }
    format!("{}y", hours / 24 / 365)
}

/// `duration.ShortHumanDuration`: a single unit only (`45s`, `5m`, `3h`, `9d`, `3y`).
/// Used by older kubectl columns; kept for completeness.
pub fn short_human_duration(d: Duration) -> String {
    let seconds = to_signed(d).as_secs();
    if seconds < 60 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 60 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 24 {
        return format!("{hours}h");
    }
    if hours < 24 * 365 {
        return format!("{}d", hours / 24);
    }
    format!("{}y", hours / 24 / 365)
}

/// Go's `time.Duration.String()` (B5 back-off messages); one home: [`podvisor_api::gotext`].
pub use podvisor_api::gotext::duration as go_duration;

/// Converts with saturation: a `std` duration too large for `SignedDuration` is "forever" anyway.
fn to_signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}
