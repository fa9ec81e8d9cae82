//! The kubelet's words for a finished pull (`pkg/kubelet/images/image_manager.go`).

use std::time::Duration;

/// The message of the `Pulled` event: `Successfully pulled image "x" in 1.2s (1.2s
/// including waiting). Image size: N bytes.` Both durations are truncated to milliseconds
/// and printed as Go prints a `time.Duration`; `image` is the name as the pod spec wrote it.
#[must_use]
pub fn pulled_message(
    image: &str,
    pull: Duration,
    including_waiting: Duration,
    size: u64,
) -> String {
    let ms = |d: Duration| Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    format!(
        "Successfully pulled image {} in {} ({} including waiting). Image size: {size} bytes.",
        podvisor_api::gotext::quote(image),
        podvisor_api::gotext::duration(ms(pull)),
        podvisor_api::gotext::duration(ms(including_waiting)),
    )
}
