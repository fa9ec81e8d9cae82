//! Watches: a chunked stream of JSON lines `{"type":"ADDED","object":{...}}`, as the API
//! server sends them.
//!
//! - `resourceVersion` unset or `"0"`: the current state as synthetic `ADDED` events, then
//!   changes; `n`: every change after `n`, or one `ERROR` event with a 410 `Expired` status
//!   when `n` is older than the store keeps. `sendInitialEvents=true` (which the API server's
//!   defaulting gives a watch of no version or `"0"`, `list_options.rs`) sends the current
//!   state whatever the version; `sendInitialEvents=false` never does, and with no version
//!   starts at the latest.
//! - Selectors apply to every event, judged on the object before the change (the store's
//!   previous value, etcd's `prevKV`) and after it: one that stops matching is sent as
//!   `DELETED`, one that starts matching as `ADDED` (the watch cache's behaviour). So a watch
//!   resumed from an old `n` replays an object deleted since as `MODIFIED` then `DELETED`,
//!   and one created since as `ADDED`.
//! - `allowWatchBookmarks=true`: a `BOOKMARK` every bookmark interval and two seconds before
//!   the watch's `timeoutSeconds` end it (the watch cache's `nextBookmarkTime`), and with
//!   `sendInitialEvents=true` one annotated `k8s.io/initial-events-end` after the initial
//!   events.
//! - `timeoutSeconds` ends the stream (default 30 minutes); so does the client going away.
//! - With a `Table` Accept header every object is a one-row `Table` (column definitions on
//!   the first only).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use http_body::Frame;
use podvisor_store::{EventType, StoreError, Watch, WatchEvent, WatchFrom};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Instant;

use crate::db::{self, Resource};
use crate::list_options::ListOptions;
use crate::objects::table_options;
use crate::req::Req;
use crate::request::{Representation, flag, int_param, now, representation};
use crate::selectors::Selection;
use crate::status::{ApiError, ApiResult};
use crate::table::{TableOptions, table};

/// The default (and longest) watch duration.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// A response body fed by a channel: each message is one chunk.
pub(crate) struct ChannelBody(pub mpsc::Receiver<Bytes>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

/// The most bytes of encoded events one watch holds for a client that reads slower than they
/// come (a line larger than that is held alone): beyond it the watch waits for the client,
/// the store's buffer fills, and the store closes the watch, as the API server ends a watcher
/// that does not keep up. Together with the store's [`watch_buffer_bytes`] this bounds what a
/// slow watcher costs, however large the objects.
///
/// [`watch_buffer_bytes`]: podvisor_store::StoreOptions::watch_buffer_bytes
const UNSENT_BYTES: usize = 8 << 20;

/// One encoded event on its way to the client, holding its share of [`UNSENT_BYTES`] until
/// the body hands it over.
struct Chunk {
    bytes: Bytes,
    _share: Option<OwnedSemaphorePermit>,
}

/// A watch's response body: the chunks of its [`Lines`].
struct WatchBody(mpsc::Receiver<Chunk>);

impl http_body::Body for WatchBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        // The permit goes with the chunk's hand-over.
        self.0
            .poll_recv(cx)
            .map(|o| o.map(|chunk| Ok(Frame::data(chunk.bytes))))
    }
}

/// Where a watch's encoded events go: a channel bounded by count and by [`UNSENT_BYTES`].
struct Lines {
    tx: mpsc::Sender<Chunk>,
    budget: Arc<Semaphore>,
}

impl Lines {
    fn new() -> (Lines, WatchBody) {
        let (tx, rx) = mpsc::channel(64);
        let budget = Arc::new(Semaphore::new(UNSENT_BYTES));
        (Lines { tx, budget }, WatchBody(rx))
    }

    /// Sends `line` once the client has taken enough of what came before; `Err` once the
    /// client has gone.
    async fn send(&self, line: Bytes) -> Result<(), ()> {
        let share = u32::try_from(line.len().min(UNSENT_BYTES)).unwrap_or(u32::MAX);
        let permit = tokio::select! {
            permit = Arc::clone(&self.budget).acquire_many_owned(share) => permit.ok(),
            () = self.tx.closed() => return Err(()),
        };
        self.tx
            .send(Chunk {
                bytes: line,
                _share: permit,
            })
            .await
            .map_err(|_| ())
    }
}

/// A streaming response with `content_type`.
pub(crate) fn streaming_response(
    rx: mpsc::Receiver<Bytes>,
    content_type: &'static str,
) -> Response {
    let mut resp = Response::new(Body::new(ChannelBody(rx)));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn key_of(obj: &Value) -> String {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
    format!("{}/{}", s("/metadata/namespace"), s("/metadata/name"))
}

/// How one watch presents its events.
struct Presenter {
    res: Resource,
    table: Option<TableOptions>,
    sent_columns: bool,
}

impl Presenter {
    fn line(&mut self, type_: &str, obj: &Value) -> Bytes {
        let table_view;
        let object = match self.table {
            Some(mut opts) if type_ != "BOOKMARK" && type_ != "ERROR" => {
                opts.with_columns = !self.sent_columns;
                self.sent_columns = true;
                let rv = obj
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str);
                table_view = table(self.res, std::slice::from_ref(obj), rv, opts, now());
                &table_view
            }
            _ => obj,
        };
        // Written around the object, not through a copy of it (a large pod is megabytes).
        let mut text = Vec::with_capacity(64);
        text.extend_from_slice(b"{\"type\":");
        serde_json::to_writer(&mut text, type_).expect("a string serializes");
        text.extend_from_slice(b",\"object\":");
        serde_json::to_writer(&mut text, object).expect("a Value serializes");
        text.extend_from_slice(b"}\n");
        Bytes::from(text)
    }

    fn bookmark(&mut self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.res.kind, "apiVersion": crate::db::api_version(self.res), "metadata": meta});
        self.line("BOOKMARK", &obj)
    }
}

/// Starts a watch and returns the streaming response.
pub(crate) fn start(
    req: &Req,
    res: Resource,
    ns: Option<&str>,
    name: Option<&str>,
) -> ApiResult<Response> {
    let mut selection = Selection::parse(
        res,
        req.params.label_selector.as_deref(),
        req.params.field_selector.as_deref(),
    )?;
    if let Some(n) = name {
        selection.fields.pin_name(n);
    }
    let timeout = match int_param("timeoutSeconds", req.params.timeout_seconds.as_ref())? {
        Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs()).min(DEFAULT_TIMEOUT),
        _ => DEFAULT_TIMEOUT,
    };
    let bookmarks = flag(req.params.allow_watch_bookmarks.as_ref());
    // A `/watch/` path is a watch without `watch=true`, which the API server validates (and
    // does not default) as a list.
    let opts = ListOptions::from_params(&req.params, flag(req.params.watch.as_ref()))?;
    let send_initial = opts.send_initial_events;
    let table = match representation(&req.headers) {
        Representation::Table { beta } => Some(table_options(req, beta, true)),
        Representation::Object => None,
    };
    let mut presenter = Presenter {
        res,
        table,
        sent_columns: false,
    };
    let store = req.state.store();
    let requested = db::query_rv(req.params.resource_version.as_deref())?;
    // Initial state: with sendInitialEvents=true (a legacy watch of no resourceVersion or "0"
    // is defaulted to it), or without the option and without a resourceVersion, the current
    // objects are sent as ADDED; the watch then continues from the list's version, as it
    // does with sendInitialEvents=false and no resourceVersion ("start at most recent").
    let (current, list_rv) = db::list_filtered(store, res, ns, |o| selection.matches(o))?;
    let initial = send_initial.unwrap_or(requested.is_none());
    // The initial state must be at least as new as the version asked for
    // (`NotOlderThan`): one the store has not reached is the watch cache's "too large", as
    // for a list.
    if let Some(requested) = requested.filter(|&r| initial && r > list_rv) {
        return Err(ApiError::too_large_resource_version(requested, list_rv));
    }
    let mut lines = Vec::new();
    if initial {
        let mut sorted: Vec<&Value> = current.iter().collect();
        sorted.sort_by_key(|o| key_of(o));
        for obj in sorted {
            lines.push(presenter.line("ADDED", obj));
        }
    }
    if initial && bookmarks && send_initial == Some(true) {
        lines.push(presenter.bookmark(list_rv, true));
    }
    let from = match requested {
        Some(rv) if !initial => WatchFrom::After(rv),
        _ => WatchFrom::After(list_rv),
    };
    let (tx, body) = Lines::new();
    match db::watch(store, res, ns, from) {
        Ok(watch) => {
            let job = WatchJob {
                watch,
                tx,
                presenter,
                selection,
                last_rv: if initial {
                    list_rv
                } else {
                    requested.unwrap_or(list_rv)
                },
                bookmarks,
                bookmark_interval: req.state.inner.bookmark_interval,
                timeout,
            };
            tokio::spawn(job.run(lines, req.state.stopping()));
        }
        Err(e @ StoreError::Gone { .. }) => {
            let status = ApiError::expired(e.to_string()).to_status();
            let line = presenter.line("ERROR", &status);
            let _ = tx.tx.try_send(Chunk {
                bytes: line,
                _share: None,
            });
        }
        Err(e) => return Err(db::api_error(res, name.unwrap_or(""), e)),
    }
    let mut resp = Response::new(Body::new(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// A watch's last bookmark comes this long before it ends, so that a client resumes from a
/// version as fresh as the server's (the watch cache's `nextBookmarkTime`).
const PRE_TIMEOUT_BOOKMARK: Duration = Duration::from_secs(2);

/// When the next `BOOKMARK` is due: one interval from `now`, or two seconds before the watch
/// ends if that is sooner; none once that moment has passed (upstream's `nextBookmarkTime`).
fn next_bookmark(now: Instant, interval: Duration, ends_at: Instant) -> Option<Instant> {
    let heartbeat = now + interval;
    let at = match ends_at.checked_sub(PRE_TIMEOUT_BOOKMARK) {
        Some(pre_timeout) if pre_timeout < heartbeat => pre_timeout,
        _ => heartbeat,
    };
    (at > now).then_some(at)
}

struct WatchJob {
    watch: Watch,
    tx: Lines,
    presenter: Presenter,
    selection: Selection,
    last_rv: u64,
    bookmarks: bool,
    bookmark_interval: Duration,
    timeout: Duration,
}

impl WatchJob {
    /// The event type to send for a store event, given the selection, or `None`: from
    /// whether the object matched before the change (the store's previous value, as etcd's
    /// `prevKV`) and after it, as the API server's watch cache decides.
    fn classify(&self, event: &WatchEvent) -> Option<&'static str> {
        // Without a selector the object before matched if there was one: no need to decode
        // it (a large pod is megabytes, for every watcher).
        let before = if self.selection.selects_all() {
            event.previous_json.is_some()
        } else {
            event
                .previous()
                .is_some_and(|previous| self.selection.matches(&previous))
        };
        let after = event.type_ != EventType::Deleted && self.selection.matches(&event.object);
        match (before, after) {
            (false, true) => Some("ADDED"),
            (true, true) => Some("MODIFIED"),
            (true, false) => Some("DELETED"),
            (false, false) => None,
        }
    }

    async fn run(mut self, initial: Vec<Bytes>, stopping: impl Future<Output = ()>) {
        tokio::pin!(stopping);
        for line in initial {
            if self.tx.send(line).await.is_err() {
                return;
            }
        }
        let ends_at = Instant::now() + self.timeout;
        let deadline = tokio::time::sleep_until(ends_at);
        tokio::pin!(deadline);
        let mut bookmark_at = next_bookmark(Instant::now(), self.bookmark_interval, ends_at);
        let bookmark = tokio::time::sleep_until(bookmark_at.unwrap_or(ends_at));
        tokio::pin!(bookmark);
        loop {
            let line = tokio::select! {
                () = self.tx.tx.closed() => return,
                () = &mut deadline => return,
                () = &mut stopping => return,
                () = &mut bookmark, if self.bookmarks && bookmark_at.is_some() => {
                    bookmark_at = next_bookmark(Instant::now(), self.bookmark_interval, ends_at);
                    if let Some(at) = bookmark_at {
                        bookmark.as_mut().reset(at);
                    }
                    self.presenter.bookmark(self.last_rv, false)
                }
                event = self.watch.next() => {
                    let Some(event) = event else { return };
                    self.last_rv = self.last_rv.max(event.resource_version);
                    match self.classify(&event) {
                        Some(t) => self.presenter.line(t, &event.object),
                        None => continue,
                    }
                }
            };
            if self.tx.send(line).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cache_watcher.go`'s `nextBookmarkTime`: a heartbeat one interval away unless the
    /// pre-timeout one (2 s before the end) is sooner; none once that has passed.
    #[test]
    fn next_bookmark_follows_next_bookmark_time() {
        let now = Instant::now();
        let minute = Duration::from_secs(60);
        let secs = Duration::from_secs;
        assert_eq!(
            next_bookmark(now, minute, now + secs(290)),
            Some(now + minute)
        );
        assert_eq!(
            next_bookmark(now, minute, now + secs(30)),
            Some(now + secs(28))
        );
        assert_eq!(
            next_bookmark(now, secs(1), now + secs(4)),
            Some(now + secs(1))
        );
        assert_eq!(next_bookmark(now, minute, now + secs(2)), None);
        assert_eq!(next_bookmark(now, minute, now + secs(1)), None);
    }
}
