//! `podvisor dashboard [--listen 127.0.0.1:8765]`: a web page of the pods of the running
//! `podvisor serve` and, for a chosen pod, its timeline, updated live.
//!
//! The dashboard is a client of the API like `podvisor get`: it reads the kubeconfig the same
//! way and talks HTTPS to `serve` with its token, which never reaches the browser. Towards
//! the browser it serves plain HTTP, on a loopback address only:
//! - `/` — the pods of every namespace with kubectl's columns (`kubectl::row_cells`);
//! - `/pods/NS/NAME` — the pod's timeline (`podvisor_lifecycle::timeline`, the renderer
//!   `simulate --output html` uses), drawn from the pod, its recorded status transitions
//!   (`pods/NAME/history`) and its events; under it the Events table and each container's
//!   log tail ([`super::dashboard_pod`]); a few lines of script replace each part with the
//!   messages of
//! - `/pods/NS/NAME/stream` — server-sent events: a new drawing (`event: timeline`) each time
//!   a watch on the pod or on its namespace's events reports a change, and every
//!   [`REFRESH`] so the time axis keeps up with the clock, followed by the Events table
//!   (`event: events`); the logs (`event: logs`) when they changed, looked at every
//!   [`LOG_POLL`]; `event: failure` with the message when the pod cannot be read, e.g. once
//!   it is gone;
//! - `/pods/NS/NAME/timeline.svg` — the drawing alone.
//!
//! Every asset is in the binary; the pages reference nothing outside the dashboard.

use super::dashboard_pod::{LOG_POLL, events_html, logs_html};
use crate::client::api::{pod_path, pods_path};
use crate::client::{ApiError, Client, ConnArgs, query_escape};
use anyhow::{Context, bail};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use podvisor_lifecycle::kubectl::{header_cells, pod_row, row_cells};
use podvisor_lifecycle::timeline::svg::esc;
use podvisor_lifecycle::timeline::{Timeline, Transition, html, svg};

/// What a pod page shows, read at one time.
struct PodView {
    pod: Pod,
    events: Vec<Event>,
    timeline: Timeline,
}
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often a live page is redrawn without a change (the axis ends at `now`).
pub const REFRESH: Duration = Duration::from_secs(10);
/// Changes closer together than this are drawn once.
const COALESCE: Duration = Duration::from_millis(150);

/// Arguments of `podvisor dashboard`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the page is served: plain HTTP, so a loopback address only (port 0 picks a free
    /// port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8765")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// Runs the dashboard until SIGINT or SIGTERM.
///
/// # Errors
///
/// A non-loopback `--listen`, no kubeconfig, or the address cannot be bound.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    if !args.listen.ip().is_loopback() {
        bail!(
            "--listen {}: the dashboard serves plain HTTP without authentication; listen on a \
             loopback address (127.0.0.1:PORT or [::1]:PORT) and reach it through an SSH \
             tunnel from elsewhere",
            args.listen
        );
    }
    let client = Arc::new(args.conn.client()?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(serve(args.listen, client))
}

async fn serve(listen: SocketAddr, client: Arc<Client>) -> anyhow::Result<i32> {
    use tokio::signal::unix::{SignalKind, signal};
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let app = Router::new()
        .route("/", get(pods_page))
        .route("/pods/{ns}/{name}", get(pod_page))
        .route("/pods/{ns}/{name}/timeline.svg", get(pod_svg))
        .route("/pods/{ns}/{name}/stream", get(pod_stream))
        .with_state(client);
    let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    eprintln!("podvisor: dashboard at http://{addr}/");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        })
        .await
        .context("serving the dashboard")?;
    Ok(0)
}

type ClientState = State<Arc<Client>>;

/// An error page: 404 for a pod that is not there, 502 for anything the API server said.
fn error_page(e: &anyhow::Error) -> Response {
    let code = match e.downcast_ref::<ApiError>() {
        Some(api) if api.is_not_found() => StatusCode::NOT_FOUND,
        _ => StatusCode::BAD_GATEWAY,
    };
    let body = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>podvisor dashboard</title>\
         </head><body><p id=\"error\">{}</p><p><a href=\"/\">all pods</a></p></body></html>\n",
        esc(&format!("{e:#}"))
    );
    (code, Html(body)).into_response()
}

fn items<T: serde::de::DeserializeOwned>(list: Value) -> Vec<T> {
    list.get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect()
}

/// `/`: every pod with kubectl's columns, newest changes on reload (every 5 s).
async fn pods_page(State(client): ClientState) -> Response {
    let list = match client.get(&pods_path(None)).await {
        Ok(list) => list,
        Err(e) => return error_page(&e),
    };
    let mut pods: Vec<Pod> = items(list);
    pods.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let now = Timestamp::now();
    let mut out = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" \
         content=\"5\"><title>pods — podvisor dashboard</title><style>body{font-family:\
         sans-serif;margin:16px}table{border-collapse:collapse}td,th{padding:2px 14px 2px 0;\
         text-align:left;font-family:monospace}a{color:#1f5fa8}</style></head><body>\
         <h1>Pods</h1><table id=\"pods\"><tr><th>NAMESPACE</th>",
    );
    for h in header_cells(false) {
        out.push_str(&format!("<th>{}</th>", esc(&h)));
    }
    out.push_str("</tr>");
    for pod in &pods {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let row = pod_row(pod, now);
        let cells = row_cells(&row, false);
        out.push_str(&format!(
            "<tr class=\"pod\" data-name=\"{}\"><td>{}</td>",
            esc(&row.name),
            esc(ns)
        ));
        for (i, cell) in cells.iter().enumerate() {
            if i == 0 {
                out.push_str(&format!(
                    "<td><a href=\"/pods/{}/{}\">{}</a></td>",
                    esc(&query_escape(ns)),
                    esc(&query_escape(&row.name)),
                    esc(cell)
                ));
            } else {
                out.push_str(&format!("<td>{}</td>", esc(cell)));
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></body></html>\n");
    Html(out).into_response()
}

/// The pod, its history and its events, drawn as of now.
async fn timeline(client: &Client, ns: &str, name: &str) -> anyhow::Result<PodView> {
    let pod: Pod = serde_json::from_value(client.get(&pod_path(ns, name)).await?)
        .context("decoding the pod")?;
    let history: Vec<Transition> =
        match client.get(&format!("{}/history", pod_path(ns, name))).await {
            Ok(list) => items(list),
            // A server without the subresource: the object and its events only.
            Err(e)
                if e.downcast_ref::<ApiError>()
                    .is_some_and(ApiError::is_not_found) =>
            {
                Vec::new()
            }
            Err(e) => return Err(e),
        };
    let events: Vec<Event> = match &pod.metadata.uid {
        Some(uid) => items(
            client
                .get(&format!(
                    "/api/v1/namespaces/{}/events?fieldSelector={}",
                    query_escape(ns),
                    query_escape(&format!("involvedObject.uid={uid}"))
                ))
                .await?,
        ),
        None => Vec::new(),
    };
    let timeline = Timeline::from_api(&pod, &history, &events, Timestamp::now());
    Ok(PodView {
        pod,
        events,
        timeline,
    })
}

/// `/pods/NS/NAME`: the live timeline page.
async fn pod_page(
    State(client): ClientState,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    let view = match timeline(&client, &ns, &name).await {
        Ok(x) => x,
        Err(e) => return error_page(&e),
    };
    let (pod, t) = (&view.pod, &view.timeline);
    let row = pod_row(pod, Timestamp::now());
    let heading = format!(
        "<p><a href=\"/\">all pods</a></p><h1 id=\"pod\">{}</h1><table id=\"row\"><tr>{}</tr>\
         <tr>{}</tr></table>",
        esc(&t.pod),
        header_cells(false)
            .iter()
            .map(|h| format!("<th>{}</th>", esc(h)))
            .collect::<String>(),
        row_cells(&row, false)
            .iter()
            .map(|c| format!("<td>{}</td>", esc(c)))
            .collect::<String>()
    );
    let stream = format!("/pods/{}/{}/stream", query_escape(&ns), query_escape(&name));
    let after = format!(
        "<h2>Events</h2><div id=\"events\">{}</div><h2>Logs</h2><div id=\"logs\">{}</div>",
        events_html(&view.events, Timestamp::now()),
        logs_html(&client, &ns, &name, pod).await
    );
    Html(html::page_with(t, &heading, &after, Some(&stream))).into_response()
}

/// `/pods/NS/NAME/timeline.svg`: the drawing alone.
async fn pod_svg(State(client): ClientState, Path((ns, name)): Path<(String, String)>) -> Response {
    match timeline(&client, &ns, &name).await {
        Ok(view) => (
            [(header::CONTENT_TYPE, "image/svg+xml")],
            svg::render(&view.timeline),
        )
            .into_response(),
        Err(e) => error_page(&e),
    }
}

/// `/pods/NS/NAME/stream`: a new drawing per change (see the module docs). The watches end
/// when the browser goes (the channel closes).
async fn pod_stream(
    State(client): ClientState,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    let (tx, rx) = mpsc::channel::<SseEvent>(4);
    let (changed_tx, changed_rx) = mpsc::channel::<()>(1);
    let pods = format!(
        "{}?watch=1&fieldSelector={}",
        pods_path(Some(&ns)),
        query_escape(&format!("metadata.name={name}"))
    );
    let events = format!("/api/v1/namespaces/{}/events?watch=1", query_escape(&ns));
    for path in [pods, events] {
        tokio::spawn(watch_changes(
            Arc::clone(&client),
            path,
            changed_tx.clone(),
            tx.clone(),
        ));
    }
    tokio::spawn(follow_logs(
        Arc::clone(&client),
        ns.clone(),
        name.clone(),
        tx.clone(),
    ));
    tokio::spawn(redraw(client, ns, name, changed_rx, tx));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|e| (Ok::<_, std::convert::Infallible>(e), rx))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Signals `changed` for each line of the watch at `path`, re-opening it when it ends, until
/// the page's stream closes.
async fn watch_changes(
    client: Arc<Client>,
    path: String,
    changed: mpsc::Sender<()>,
    page: mpsc::Sender<SseEvent>,
) {
    while !page.is_closed() {
        match client.stream(&path, crate::client::JSON).await {
            Ok(mut stream) => loop {
                tokio::select! {
                    line = stream.line() => match line {
                        Ok(Some(_)) => {
                            // Full: a redraw is pending anyway.
                            let _ = changed.try_send(());
                        }
                        Ok(None) | Err(_) => break,
                    },
                    () = page.closed() => return,
                }
            },
            Err(_) => {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    () = page.closed() => return,
                }
            }
        }
    }
}

/// Draws the timeline on each change (and every [`REFRESH`]) and sends it to the page.
async fn redraw(
    client: Arc<Client>,
    ns: String,
    name: String,
    mut changed: mpsc::Receiver<()>,
    page: mpsc::Sender<SseEvent>,
) {
    loop {
        tokio::select! {
            c = changed.recv() => if c.is_none() { return },
            () = tokio::time::sleep(REFRESH) => {}
            () = page.closed() => return,
        }
        tokio::time::sleep(COALESCE).await;
        while changed.try_recv().is_ok() {}
        let events = match timeline(&client, &ns, &name).await {
            Ok(view) => vec![
                SseEvent::default()
                    .event("timeline")
                    .data(svg::render(&view.timeline)),
                SseEvent::default()
                    .event("events")
                    .data(events_html(&view.events, Timestamp::now())),
            ],
            Err(e) => vec![SseEvent::default().event("failure").data(format!("{e:#}"))],
        };
        for event in events {
            if page.send(event).await.is_err() {
                return;
            }
        }
    }
}

/// Sends the containers' log tails to the page each time they differ from what it has,
/// looking every [`LOG_POLL`] (see `dashboard_pod`'s docs for why not `follow=true`).
async fn follow_logs(client: Arc<Client>, ns: String, name: String, page: mpsc::Sender<SseEvent>) {
    let mut last: Option<String> = None;
    loop {
        tokio::select! {
            () = tokio::time::sleep(LOG_POLL) => {}
            () = page.closed() => return,
        }
        let Ok(value) = client.get(&pod_path(&ns, &name)).await else {
            continue;
        };
        let Ok(pod) = serde_json::from_value::<Pod>(value) else {
            continue;
        };
        let logs = logs_html(&client, &ns, &name, &pod).await;
        if last.as_ref() != Some(&logs) {
            if page
                .send(SseEvent::default().event("logs").data(logs.clone()))
                .await
                .is_err()
            {
                return;
            }
            last = Some(logs);
        }
    }
}
