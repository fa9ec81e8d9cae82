//! `pods/log`: container logs from the CRI log files
//! (`<log_root>/<ns>_<name>_<uid>/<container>/<n>.log`, `n` the instance's restart count),
//! with the kubelet's choice of instance and its error texts, and `follow` streaming until
//! the instance terminates. As in the kubelet, only the instance's current file is read (not
//! its rotated files); a follow goes on in the new file after a rotation.

use std::path::{Path, PathBuf};

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use podvisor_runtime::logs::follow::LogFollower;
use podvisor_runtime::logs::{ReadOptions, read_log_to};
use tokio::sync::mpsc;

use crate::ApiState;
use crate::db::{self, PODS};
use crate::pods::pod_of;
use crate::req::Req;
use crate::request::{flag, int_param, now};
use crate::status::{ApiError, ApiResult};
use crate::watch::streaming_response;

/// `validateContainer` of the pod log REST handler.
pub(crate) fn container_name(pod: &Pod, requested: Option<&str>) -> ApiResult<String> {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let spec = pod.spec.clone().unwrap_or_default();
    let all: Vec<String> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.clone())
        .chain(spec.containers.iter().map(|c| c.name.clone()))
        .chain(
            spec.ephemeral_containers
                .iter()
                .flatten()
                .map(|c| c.name.clone()),
        )
        .collect();
    match requested.filter(|c| !c.is_empty()) {
        Some(c) if all.iter().any(|n| n == c) => Ok(c.to_owned()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None => match spec.containers.len() {
            1 => Ok(spec.containers[0].name.clone()),
            0 => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}"
            ))),
            _ => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                all.join(" ")
            ))),
        },
    }
}

fn container_status<'a>(pod: &'a Pod, container: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    [
        &status.container_statuses,
        &status.init_container_statuses,
        &status.ephemeral_container_statuses,
    ]
    .into_iter()
    .flatten()
    .flatten()
    .find(|s| s.name == container)
}

/// Which instance's file to read, and whether it may still grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Instance {
    restart_count: i32,
    running: bool,
}

/// The kubelet's `validateContainerLogStatus`, mapped to instance numbers: the current
/// instance is the status's `restartCount`; the `lastState` one is the one before it,
/// except under a synthetic waiting state (back-off), where the newest instance is the
/// dead one the status describes.
fn pick_instance(pod: &Pod, container: &str, previous: bool) -> ApiResult<Instance> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
    let err = |text: String| Err(ApiError::bad_request(text));
    let Some(cs) = container_status(pod, container) else {
        return err(format!(
            "container {container:?} in pod {pod_name:?} is waiting to start: ContainerCreating"
        ));
    };
    let state = cs.state.clone().unwrap_or_default();
    let last = cs.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let n = cs.restart_count;
    let last_index = if state.waiting.is_some() { n } else { n - 1 };
    let done = |restart_count| {
        Ok(Instance {
            restart_count,
            running: false,
        })
    };
    if previous {
        return match last {
            Some(_) => done(last_index.max(0)),
            None => err(format!(
                "previous terminated container {container:?} in pod {pod_name:?} not found"
            )),
        };
    }
    if state.running.is_some() {
        return Ok(Instance {
            restart_count: n,
            running: true,
        });
    }
    if state.terminated.is_some() {
        return done(n);
    }
    if last.is_some() {
        return done(last_index.max(0));
    }
    match state.waiting.and_then(|w| w.reason) {
        Some(r) if r == "ErrImagePull" => err(format!(
            "container {container:?} in pod {pod_name:?} is waiting to start: image can't be pulled"
        )),
        Some(r) if r == "ImagePullBackOff" => err(format!(
            "container {container:?} in pod {pod_name:?} is waiting to start: trying and failing to pull image"
        )),
        Some(r) => err(format!(
            "container {container:?} in pod {pod_name:?} is waiting to start: {r}"
        )),
        None => err(format!(
            "container {container:?} in pod {pod_name:?} is waiting to start - no logs yet"
        )),
    }
}

/// The log file of an instance; falls back to the newest older file when that one is
/// missing (a restart count the runtime did not use).
fn log_file(root: &Path, pod: &Pod, container: &str, restart_count: i32) -> PathBuf {
    let m = &pod.metadata;
    let dir = root
        .join(format!(
            "{}_{}_{}",
            m.namespace.as_deref().unwrap_or(""),
            m.name.as_deref().unwrap_or(""),
            m.uid.as_deref().unwrap_or("")
        ))
        .join(container);
    let wanted = dir.join(format!("{restart_count}.log"));
    if wanted.exists() {
        return wanted;
    }
    (0..restart_count)
        .rev()
        .map(|i| dir.join(format!("{i}.log")))
        .find(|p| p.exists())
        .unwrap_or(wanted)
}

fn read_options(req: &Req) -> ApiResult<ReadOptions> {
    let p = &req.params;
    let positive = |name: &str, v: Option<i64>, min: i64| -> ApiResult<Option<i64>> {
        match v {
            Some(x) if x < min => Err(ApiError::bad_request(format!(
                "{name}: Invalid value: {x}: must be greater than {}",
                if min == 0 { "or equal to 0" } else { "0" }
            ))),
            other => Ok(other),
        }
    };
    let tail = positive(
        "tailLines",
        int_param("tailLines", p.tail_lines.as_ref())?,
        0,
    )?;
    let limit = positive(
        "limitBytes",
        int_param("limitBytes", p.limit_bytes.as_ref())?,
        1,
    )?;
    let since_seconds = positive(
        "sinceSeconds",
        int_param("sinceSeconds", p.since_seconds.as_ref())?,
        1,
    )?;
    let since_time =
        match p.since_time.as_deref().filter(|s| !s.is_empty()) {
            Some(s) => Some(s.parse::<Timestamp>().map_err(|e| {
                ApiError::bad_request(format!("sinceTime: Invalid value: {s:?}: {e}"))
            })?),
            None => None,
        };
    if since_seconds.is_some() && since_time.is_some() {
        return Err(ApiError::bad_request(
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ));
    }
    let since = since_time.or_else(|| since_seconds.map(|s| now() - SignedDuration::from_secs(s)));
    Ok(ReadOptions {
        tail_lines: tail.map(|t| usize::try_from(t).unwrap_or(usize::MAX)),
        since,
        timestamps: flag(p.timestamps.as_ref()),
        limit_bytes: limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
        ..ReadOptions::default()
    })
}

fn text_response(body: Vec<u8>) -> Response {
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

/// Reads what there is (a missing file reads as empty: the instance has not logged yet).
fn read_all(path: &Path, opts: &ReadOptions) -> ApiResult<(Vec<u8>, u64, bool)> {
    let mut out = Vec::new();
    match read_log_to(path, opts, &mut out) {
        Ok(p) => Ok((out, p.offset, p.limit_reached)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((out, 0, false)),
        Err(e) => Err(ApiError::internal(e.to_string())),
    }
}

/// `GET /api/v1/namespaces/{ns}/pods/{name}/log`.
pub(crate) async fn get(req: &Req, ns: &str, name: &str) -> ApiResult<Response> {
    let pod = pod_of(&db::get(req.state.store(), PODS, ns, name)?)?;
    let container = container_name(&pod, req.params.container.as_deref())?;
    let previous = flag(req.params.previous.as_ref());
    let instance = pick_instance(&pod, &container, previous)?;
    let path = log_file(
        &req.state.inner.log_root,
        &pod,
        &container,
        instance.restart_count,
    );
    let mut opts = read_options(req)?;
    let follow = flag(req.params.follow.as_ref()) && instance.running;
    if !follow {
        let (body, _, _) = tokio::task::spawn_blocking(move || read_all(&path, &opts))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))??;
        return Ok(text_response(body));
    }
    opts.follow = true;
    let (tx, rx) = mpsc::channel(16);
    let follower = Follower {
        state: req.state.clone(),
        ns: ns.to_owned(),
        name: name.to_owned(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        container,
        restart_count: instance.restart_count,
        log: LogFollower::new(path),
        tx,
    };
    let stopping = req.state.stopping();
    tokio::spawn(follower.run(opts, stopping));
    Ok(streaming_response(rx, "text/plain"))
}

/// Streams one running instance's log until it terminates, the pod goes away, the byte
/// limit is reached or the client leaves.
struct Follower {
    state: ApiState,
    ns: String,
    name: String,
    uid: String,
    container: String,
    restart_count: i32,
    log: LogFollower,
    tx: mpsc::Sender<Bytes>,
}

impl Follower {
    /// Whether the instance being followed is still the running one.
    fn still_running(&self) -> bool {
        let Ok(Some(obj)) = db::try_get(self.state.store(), PODS, &self.ns, &self.name) else {
            return false;
        };
        let Ok(pod) = pod_of(&obj) else { return false };
        if pod.metadata.uid.as_deref() != Some(self.uid.as_str()) {
            return false;
        }
        container_status(&pod, &self.container).is_some_and(|cs| {
            cs.restart_count == self.restart_count
                && cs.state.as_ref().is_some_and(|s| s.running.is_some())
        })
    }

    async fn run(mut self, mut opts: ReadOptions, stopping: impl std::future::Future<Output = ()>) {
        tokio::pin!(stopping);
        let interval = self.state.inner.log_poll_interval;
        loop {
            let running = self.still_running();
            // Once the instance has ended, the last read also flushes an unfinished line.
            opts.follow = running;
            let mut chunk = Vec::new();
            let Ok(progress) = self.log.read(&opts, &mut chunk) else {
                return;
            };
            if let Some(limit) = opts.limit_bytes.as_mut() {
                *limit = limit.saturating_sub(chunk.len());
            }
            if !chunk.is_empty() && self.tx.send(Bytes::from(chunk)).await.is_err() {
                return;
            }
            if !running || progress.limit_reached {
                return;
            }
            tokio::select! {
                () = self.tx.closed() => return,
                () = &mut stopping => return,
                () = tokio::time::sleep(interval) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(statuses: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u"},
            "spec": {"containers": [{"name": "app"}, {"name": "side"}], "initContainers": [{"name": "init"}]},
            "status": {"containerStatuses": statuses}
        }))
        .unwrap()
    }

    #[test]
    fn container_choice_errors() {
        let p = pod(json!([]));
        assert_eq!(
            container_name(&p, None).unwrap_err().message,
            "a container name must be specified for pod web, choose one of: [init app side]"
        );
        assert_eq!(
            container_name(&p, Some("x")).unwrap_err().message,
            "container x is not valid for pod web"
        );
    }

    #[test]
    fn instances() {
        let running = pod(
            json!([{"name": "app", "image": "i", "ready": true, "restartCount": 2,
            "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 1}}}]),
        );
        assert_eq!(
            pick_instance(&running, "app", false).unwrap(),
            Instance {
                restart_count: 2,
                running: true
            }
        );
        assert_eq!(
            pick_instance(&running, "app", true).unwrap().restart_count,
            1
        );
        let backoff = pod(
            json!([{"name": "app", "image": "i", "ready": false, "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {"exitCode": 1}}}]),
        );
        assert_eq!(
            pick_instance(&backoff, "app", false).unwrap().restart_count,
            3
        );
        let waiting = pod(
            json!([{"name": "app", "image": "i", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}}}]),
        );
        assert_eq!(
            pick_instance(&waiting, "app", false).unwrap_err().message,
            "container \"app\" in pod \"web\" is waiting to start: ContainerCreating"
        );
        assert_eq!(
            pick_instance(&waiting, "app", true).unwrap_err().message,
            "previous terminated container \"app\" in pod \"web\" not found"
        );
    }
}
