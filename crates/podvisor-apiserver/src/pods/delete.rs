//! Pod deletion as the API server does it (`rest.BeforeDelete` and the pod strategy's
//! `CheckGracefulDelete`): a graceful delete only sets `deletionTimestamp = now + grace`
//! and `deletionGracePeriodSeconds` (the node agent terminates the pod and removes the
//! object); grace 0 removes the object at once; a later delete may only shorten the grace.

use axum::http::StatusCode;
use axum::response::Response;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;
use serde_json::Value;

use super::{MAX_RETRIES, pod_of, value_of};
use crate::db::{self, PODS};
use crate::meta::Preconditions;
use crate::objects::respond;
use crate::req::Req;
use crate::request::{int_param, now};
use crate::status::{ApiError, ApiResult};

/// `DeleteOptions`, from the query and then the body (body fields win).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeleteOptions {
    grace_period_seconds: Option<i64>,
    preconditions: Option<Preconditions>,
    dry_run: Option<Vec<String>>,
}

fn options(req: &Req, body: &[u8]) -> ApiResult<DeleteOptions> {
    let mut opts = match crate::request::delete_options_body(body)? {
        None => DeleteOptions::default(),
        Some(v) => serde_json::from_value(v)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?,
    };
    if opts.grace_period_seconds.is_none() {
        opts.grace_period_seconds = int_param(
            "gracePeriodSeconds",
            req.params.grace_period_seconds.as_ref(),
        )?;
    }
    if req.params.dry_run()? {
        opts.dry_run = Some(vec!["All".to_owned()]);
    }
    Ok(opts)
}

/// What a delete does to a pod.
enum Plan {
    /// Nothing: a graceful deletion with an equal or shorter grace is already pending.
    Pending,
    /// Write the new deletion timestamp and grace period.
    Graceful(Value),
    /// Remove the object now.
    Now,
}

fn plan(obj: &Value, requested: Option<i64>, now: Timestamp) -> ApiResult<Plan> {
    let mut pod = pod_of(obj)?;
    let requested = requested.map(|g| if g < 0 { 1 } else { g });
    let meta = &mut pod.metadata;
    if let Some(Time(ts)) = meta.deletion_timestamp.clone() {
        let current = meta.deletion_grace_period_seconds.unwrap_or(0);
        if current == 0 {
            return Ok(Plan::Now);
        }
        return match requested {
            Some(g) if g < current => {
                if g == 0 {
                    return Ok(Plan::Now);
                }
                let start = ts - SignedDuration::from_secs(current);
                meta.deletion_timestamp = Some(Time(start + SignedDuration::from_secs(g)));
                meta.deletion_grace_period_seconds = Some(g);
                Ok(Plan::Graceful(value_of(&pod)))
            }
            _ => Ok(Plan::Pending),
        };
    }
    let spec = pod.spec.as_ref();
    let mut period = requested
        .or_else(|| spec.and_then(|s| s.termination_grace_period_seconds))
        .unwrap_or(0);
    if spec
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
        .is_empty()
    {
        period = 0;
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        period = 0;
    }
    if period == 0 {
        return Ok(Plan::Now);
    }
    let meta = &mut pod.metadata;
    meta.deletion_timestamp = Some(Time(now + SignedDuration::from_secs(period)));
    meta.deletion_grace_period_seconds = Some(period);
    if let Some(g) = meta.generation.filter(|g| *g > 0) {
        meta.generation = Some(g + 1);
    }
    Ok(Plan::Graceful(value_of(&pod)))
}

/// Starts the graceful deletion of one pod with its own grace period, as a delete with no
/// options does (the namespace controller's deletion of a namespace's pods); returns the
/// object as it now is.
pub(crate) fn delete_gracefully(
    store: &podvisor_store::Store,
    ns: &str,
    name: &str,
) -> ApiResult<Value> {
    delete_one(store, ns, name, &DeleteOptions::default())
}

/// Deletes (or starts deleting) one pod; returns the object.
fn delete_one(
    store: &podvisor_store::Store,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<Value> {
    let dry_run = opts.dry_run.as_ref().is_some_and(|d| !d.is_empty());
    let mut attempt = 0;
    loop {
        attempt += 1;
        let obj = db::get(store, PODS, ns, name)?;
        let uid = obj
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(p) = &opts.preconditions {
            // The API server names the kind here, not the resource.
            p.check("Pod", name, &obj)?;
        }
        let result = match plan(&obj, opts.grace_period_seconds, now())? {
            Plan::Pending => return Ok(obj),
            Plan::Graceful(updated) if dry_run => return Ok(updated),
            Plan::Now if dry_run => return Ok(obj),
            Plan::Graceful(updated) => {
                db::update(store, PODS, ns, name, updated, db::object_rv(&obj))
            }
            Plan::Now => db::delete(
                store,
                PODS,
                ns,
                name,
                Some(uid.to_owned()),
                db::object_rv(&obj),
            ),
        };
        match result {
            Ok(v) => return Ok(v),
            Err(e) if e.code == 409 && attempt < MAX_RETRIES => {}
            Err(e) => return Err(e),
        }
    }
}

/// `DELETE /api/v1/namespaces/{ns}/pods/{name}`.
pub(crate) fn delete(req: &Req, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    let opts = options(req, body)?;
    let obj = delete_one(req.state.store(), ns, name, &opts)?;
    Ok(respond(req, PODS, StatusCode::OK, &obj, &[]))
}

/// `DELETE /api/v1/namespaces/{ns}/pods` (deletecollection): every selected pod; returns
/// the list of what was deleted or marked.
pub(crate) fn delete_collection(req: &Req, ns: &str, body: &[u8]) -> ApiResult<Response> {
    let opts = options(req, body)?;
    crate::registry::delete::delete_selected(req, PODS, ns, |name| {
        delete_one(req.state.store(), ns, name, &opts)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(extra_meta: Value, phase: &str) -> Value {
        let mut meta = json!({"name": "web", "namespace": "default", "uid": "u", "generation": 1});
        if let (Some(m), Some(e)) = (meta.as_object_mut(), extra_meta.as_object()) {
            m.extend(e.clone());
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
               "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30,
                        "containers": [{"name": "app", "image": "busybox"}]},
               "status": {"phase": phase}})
    }

    #[test]
    fn graceful_delete_sets_timestamp_and_grace() {
        let now: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let Plan::Graceful(v) = plan(&pod(json!({}), "Running"), None, now).unwrap() else {
            panic!("expected graceful");
        };
        assert_eq!(v["metadata"]["deletionTimestamp"], "2025-01-01T00:00:30Z");
        assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 30);
        assert_eq!(v["metadata"]["generation"], 2);
        assert!(matches!(
            plan(&pod(json!({}), "Succeeded"), None, now).unwrap(),
            Plan::Now
        ));
        assert!(matches!(
            plan(&pod(json!({}), "Running"), Some(0), now).unwrap(),
            Plan::Now
        ));
    }

    #[test]
    fn second_delete_only_shortens() {
        let now: Timestamp = "2025-01-01T00:00:10Z".parse().unwrap();
        let deleting = pod(
            json!({"deletionTimestamp": "2025-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30}),
            "Running",
        );
        assert!(matches!(
            plan(&deleting, Some(60), now).unwrap(),
            Plan::Pending
        ));
        assert!(matches!(plan(&deleting, None, now).unwrap(), Plan::Pending));
        let Plan::Graceful(v) = plan(&deleting, Some(5), now).unwrap() else {
            panic!("expected a shorter grace");
        };
        assert_eq!(v["metadata"]["deletionTimestamp"], "2025-01-01T00:00:05Z");
        assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 5);
        assert!(matches!(plan(&deleting, Some(0), now).unwrap(), Plan::Now));
    }
}
