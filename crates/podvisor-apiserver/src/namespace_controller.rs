//! Namespace deletion, as the API server and kube-controller-manager's namespace controller
//! do it (`pkg/registry/core/namespace/storage`, `pkg/controller/namespace/deletion`):
//!
//! - `DELETE` marks the namespace: `metadata.deletionTimestamp` and `status.phase:
//!   Terminating`; the object stays while `spec.finalizers` holds `kubernetes`.
//! - While it is terminating, creating anything in it is refused (the `NamespaceLifecycle`
//!   admission plugin: 403 `unable to create new content in namespace x because it is
//!   being terminated`, cause `NamespaceTerminating`).
//! - The controller deletes its content: pods gracefully (each with its own grace period, so
//!   the node agent stops them as for any delete), every other object at once (objects with
//!   finalizers are only marked). It keeps the five deletion conditions of upstream in
//!   `status.conditions` (`NamespaceContentRemaining` says `pods. has 1 resource instances`).
//! - Once nothing is left, the `kubernetes` finalizer is removed (upstream's `finalize`
//!   subresource) and the namespace is deleted (only marked while `metadata.finalizers`
//!   remain).
//!
//! [`sync`] does one pass for one namespace (against the store); [`run`] is the controller
//! loop `podvisor serve` starts.

use std::collections::BTreeMap;
use std::time::Duration;

use podvisor_store::{Key, Preconditions, Store, StoreError, WatchFrom};
use serde_json::{Value, json};

use crate::db::{
    self, CONFIGMAPS, EVENTS, LEASES, NAMESPACES, PODS, Resource, SECRETS, SERVICEACCOUNTS,
};
use crate::request::{now, time_text};
use crate::status::{ApiError, ApiResult};

/// The namespaced kinds the API serves: a namespace's content.
pub(crate) const CONTENT: [Resource; 6] =
    [PODS, CONFIGMAPS, SECRETS, SERVICEACCOUNTS, LEASES, EVENTS];

/// How often a terminating namespace is looked at again while content remains.
const RESYNC: Duration = Duration::from_millis(250);

/// The finalizer the namespace controller owns in `spec.finalizers`.
const FINALIZER: &str = "kubernetes";

/// Whether the namespace object is being deleted.
pub(crate) fn is_terminating(ns: &Value) -> bool {
    ns.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
        || ns.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating")
}

/// The `NamespaceLifecycle` admission check for a create of `resource` `name` in `ns`: the
/// namespace must exist and not be terminating.
pub(crate) fn admit_create(store: &Store, resource: &str, name: &str, ns: &str) -> ApiResult<()> {
    let Some(namespace) = db::try_get(store, NAMESPACES, "", ns)? else {
        return Err(ApiError::not_found("namespaces", ns));
    };
    if is_terminating(&namespace) {
        let detail = format!(
            "unable to create new content in namespace {ns} because it is being terminated"
        );
        let mut e = ApiError::forbidden(resource, name, &detail);
        if let Some(d) = e.details.as_mut() {
            d["causes"] = json!([{
                "reason": "NamespaceTerminating",
                "message": format!("namespace {ns} is being terminated"),
                "field": "metadata.namespace",
            }]);
        }
        return Err(e);
    }
    Ok(())
}

/// Marks `ns` for deletion (the API server's namespace `Delete`): returns the object as it
/// now is. A namespace already terminating is returned as it is.
pub(crate) fn mark_terminating(store: &Store, name: &str, dry_run: bool) -> ApiResult<Value> {
    let obj = db::get(store, NAMESPACES, "", name)?;
    if obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return Ok(obj);
    }
    let mut marked = obj.clone();
    marked["metadata"]["deletionTimestamp"] = json!(time_text(now()));
    marked["status"]["phase"] = json!("Terminating");
    if dry_run {
        return Ok(marked);
    }
    db::update(store, NAMESPACES, "", name, marked, db::object_rv(&obj))
}

/// What is left in a namespace after a deletion pass.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Remaining {
    /// Objects still there, by resource.
    pub by_resource: BTreeMap<&'static str, usize>,
    /// Objects still held by each finalizer.
    pub by_finalizer: BTreeMap<String, usize>,
}

impl Remaining {
    fn is_empty(&self) -> bool {
        self.by_resource.values().all(|n| *n == 0)
    }
}

fn condition(type_: &str, status: bool, reason: &str, message: String) -> Value {
    json!({
        "type": type_,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": message,
    })
}

/// The deletion conditions upstream's `namespaceConditionUpdater` keeps, in its order.
fn conditions(left: &Remaining, failures: &[String]) -> Vec<Value> {
    let ok = |t: &str, reason: &str, message: &str| condition(t, false, reason, message.into());
    let content_failure = if failures.is_empty() {
        ok(
            "NamespaceDeletionContentFailure",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        )
    } else {
        let mut msgs = failures.to_vec();
        msgs.sort();
        condition(
            "NamespaceDeletionContentFailure",
            true,
            "ContentDeletionFailed",
            format!(
                "Failed to delete all resource types, {} remaining: {}",
                msgs.len(),
                msgs.join(", ")
            ),
        )
    };
    let resources: Vec<String> = left
        .by_resource
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| format!("{r}. has {n} resource instances"))
        .collect();
    let remaining = if resources.is_empty() {
        ok(
            "NamespaceContentRemaining",
            "ContentRemoved",
            "All content successfully removed",
        )
    } else {
        condition(
            "NamespaceContentRemaining",
            true,
            "SomeResourcesRemain",
            format!("Some resources are remaining: {}", resources.join(", ")),
        )
    };
    let finalizers: Vec<String> = left
        .by_finalizer
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(f, n)| format!("{f} in {n} resource instances"))
        .collect();
    let finalizing = if finalizers.is_empty() {
        ok(
            "NamespaceFinalizersRemaining",
            "ContentRemoved",
            "All content successfully removed",
        )
    } else {
        condition(
            "NamespaceFinalizersRemaining",
            true,
            "SomeFinalizerRemain",
            format!("Some finalizers are remaining: {}", finalizers.join(", ")),
        )
    };
    vec![
        ok(
            "NamespaceDeletionDiscoveryFailure",
            "ResourcesDiscovered",
            "All resources successfully discovered",
        ),
        ok(
            "NamespaceDeletionGroupVersionParsingFailure",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
        ),
        content_failure,
        remaining,
        finalizing,
    ]
}

/// Merges `fresh` conditions into `old` as upstream's `updateConditions`: a condition's
/// `lastTransitionTime` changes only with its status. Returns whether anything changed.
fn merge_conditions(old: &mut Vec<Value>, fresh: Vec<Value>, at: &str) -> bool {
    let mut changed = false;
    for mut c in fresh {
        let same_type = old.iter_mut().find(|o| o["type"] == c["type"]);
        match same_type {
            None => {
                c["lastTransitionTime"] = json!(at);
                old.push(c);
                changed = true;
            }
            Some(o) => {
                if o["status"] != c["status"] {
                    o["lastTransitionTime"] = json!(at);
                }
                if o["status"] != c["status"]
                    || o["reason"] != c["reason"]
                    || o["message"] != c["message"]
                {
                    o["status"] = c["status"].take();
                    o["reason"] = c["reason"].take();
                    o["message"] = c["message"].take();
                    changed = true;
                }
            }
        }
    }
    changed
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Deletes what is left of terminating namespace `ns` and records the conditions; deletes the
/// namespace once it is empty. Returns what remains (empty once the namespace is gone).
pub fn sync(store: &Store, ns: &str) -> Result<Remaining, StoreError> {
    let Some(namespace) = store.get(&Key::cluster("namespaces", ns))? else {
        return Ok(Remaining::default());
    };
    if !is_terminating(&namespace) {
        return Ok(Remaining::default());
    }
    let mut failures = Vec::new();
    for res in CONTENT {
        let (objects, _) = store.list(res.plural, Some(ns))?;
        for obj in objects.iter().filter(|o| {
            o.pointer("/metadata/deletionTimestamp")
                .is_none_or(Value::is_null)
                || res.kind == "Pod"
        }) {
            let name = name_of(obj);
            let result = if res.kind == "Pod" {
                crate::pods::delete_gracefully(store, ns, name).map(drop)
            } else {
                db::delete(store, res, ns, name, None, None).map(drop)
            };
            match result {
                Ok(()) => {}
                Err(e) if e.code == 404 || e.code == 409 => {}
                Err(e) => failures.push(format!("{}: {}", res.plural, e.message)),
            }
        }
    }
    let mut left = Remaining::default();
    for res in CONTENT {
        let (objects, _) = store.list(res.plural, Some(ns))?;
        left.by_resource.insert(res.plural, objects.len());
        for obj in &objects {
            for f in obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                *left.by_finalizer.entry(f.to_owned()).or_default() += 1;
            }
        }
    }
    let key = Key::cluster("namespaces", ns);
    let at = time_text(now());
    let fresh = conditions(&left, &failures);
    let empty = left.is_empty() && failures.is_empty();
    // An unchanged object writes nothing.
    store.update_with(&key, |mut obj| {
        let mut conds: Vec<Value> = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if merge_conditions(&mut conds, fresh, &at) {
            obj["status"]["conditions"] = Value::Array(conds);
        }
        if empty
            && let Some(list) = obj
                .pointer_mut("/spec/finalizers")
                .and_then(Value::as_array_mut)
        {
            list.retain(|f| f.as_str() != Some(FINALIZER));
        }
        Ok(obj)
    })?;
    if empty {
        let spec_done = store
            .get(&key)?
            .and_then(|o| {
                o.pointer("/spec/finalizers")
                    .and_then(Value::as_array)
                    .map(Vec::len)
            })
            .unwrap_or(0)
            == 0;
        if spec_done {
            match store.delete(&key, Preconditions::default()) {
                Ok(_) | Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(left)
}

/// The terminating namespaces' names.
fn terminating(store: &Store) -> Result<Vec<String>, StoreError> {
    let (all, _) = store.list("namespaces", None)?;
    Ok(all
        .iter()
        .filter(|n| is_terminating(n))
        .map(|n| name_of(n).to_owned())
        .collect())
}

/// The controller: a pass over every terminating namespace whenever a namespace changes, and
/// every `RESYNC` while one is terminating.
pub async fn run(store: Store, stop: impl std::future::Future<Output = ()>) {
    tokio::pin!(stop);
    let mut watch = match store.watch("namespaces", None, WatchFrom::Now) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!("namespace controller: watching namespaces: {e}");
            return;
        }
    };
    let mut busy = true;
    loop {
        if busy {
            let s = store.clone();
            let pass = tokio::task::spawn_blocking(move || -> Result<bool, StoreError> {
                let mut any = false;
                for ns in terminating(&s)? {
                    any |= !sync(&s, &ns)?.is_empty()
                        || s.get(&Key::cluster("namespaces", &ns))?.is_some();
                }
                Ok(any)
            })
            .await;
            busy = match pass {
                Ok(Ok(any)) => any,
                Ok(Err(e)) => {
                    tracing::warn!("namespace controller: {e}");
                    true
                }
                Err(_) => true,
            };
        }
        let wait = if busy {
            RESYNC
        } else {
            Duration::from_secs(3600)
        };
        tokio::select! {
            () = &mut stop => return,
            event = watch.next() => {
                if event.is_none() {
                    // The store dropped a slow watcher: watch again.
                    match store.watch("namespaces", None, WatchFrom::Now) {
                        Ok(w) => watch = w,
                        Err(_) => return,
                    }
                }
                busy = true;
            }
            () = tokio::time::sleep(wait) => busy = true,
        }
    }
}
