//! The pod page's two tables under the timeline: the pod's events as `kubectl describe`'s
//! Events table (`kubectl::event_rows`) and the tail of each container's log
//! (`pods/NAME/log?container=C&tailLines=`[`LOG_LINES`]), each as an HTML fragment the page
//! holds in `#events` and `#logs` and the live stream replaces (`event: events`,
//! `event: logs`).
//!
//! Logs are re-fetched every [`LOG_POLL`] and sent only when they changed: a fresh request per
//! container survives restarts, containers that have not started yet and a `serve` restarted
//! under the page, where a `follow=true` stream per instance would have to be re-opened on
//! each of those.

use crate::client::api::pod_path;
use crate::client::{Client, query_escape};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use podvisor_lifecycle::kubectl::event_rows;
use podvisor_lifecycle::timeline::lanes_of;
use podvisor_lifecycle::timeline::svg::esc;
use std::fmt::Write;
use std::time::Duration;

/// How many lines of each container's log the page shows.
pub const LOG_LINES: usize = 200;
/// How often the logs are re-fetched while a page is open.
pub const LOG_POLL: Duration = Duration::from_secs(2);
/// The most of one container's log read per fetch (a line can be long).
const LOG_BYTES: usize = 256 * 1024;

/// The Events table (`<none>` without events), as `kubectl describe pod` prints it.
pub fn events_html(events: &[Event], now: Timestamp) -> String {
    if events.is_empty() {
        return "<p id=\"no-events\">&lt;none&gt;</p>".to_owned();
    }
    let mut out = String::from(
        "<table id=\"events-table\"><tr><th>Type</th><th>Reason</th><th>Age</th><th>From</th>\
         <th>Message</th></tr>",
    );
    for row in event_rows(events, now) {
        let class = if row[0] == "Warning" {
            "event warning"
        } else {
            "event"
        };
        let _ = write!(
            out,
            "<tr class=\"{class}\" data-reason=\"{}\">",
            esc(&row[1])
        );
        for cell in &row {
            let _ = write!(out, "<td>{}</td>", esc(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

/// The tail of one container's log, or why there is none (not started yet, ...).
async fn log_tail(
    client: &Client,
    ns: &str,
    name: &str,
    container: &str,
) -> Result<String, String> {
    let path = format!(
        "{}/log?container={}&tailLines={LOG_LINES}",
        pod_path(ns, name),
        query_escape(container)
    );
    let mut stream = client
        .stream(&path, "*/*")
        .await
        .map_err(|e| format!("{e:#}"))?;
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.chunk().await.map_err(|e| format!("{e:#}"))? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > LOG_BYTES {
            let cut = bytes.len() - LOG_BYTES;
            bytes.drain(..cut);
        }
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// One `<section class="log">` per container of `pod` (drawing order: init, sidecar,
/// regular, ephemeral), each with its log's last [`LOG_LINES`] lines.
pub async fn logs_html(client: &Client, ns: &str, name: &str, pod: &Pod) -> String {
    let mut out = String::new();
    for lane in lanes_of(pod) {
        let (class, text) = match log_tail(client, ns, name, &lane.name).await {
            Ok(text) if text.is_empty() => ("log-text empty", "(no output yet)".to_owned()),
            Ok(text) => ("log-text", text),
            Err(e) => ("log-text unavailable", e),
        };
        let _ = write!(
            out,
            "<section class=\"log\" data-container=\"{0}\"><h3>{0} <span class=\"kind\">{1}, \
             last {LOG_LINES} lines</span></h3><pre class=\"{class}\" id=\"log-{0}\">{2}</pre>\
             </section>",
            esc(&lane.name),
            lane.kind.as_str(),
            esc(&text)
        );
    }
    out
}
