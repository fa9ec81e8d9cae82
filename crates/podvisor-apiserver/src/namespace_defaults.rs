//! What every namespace holds, kept there: the `default` ServiceAccount (the ServiceAccount
//! controller, `pkg/controller/serviceaccount/serviceaccounts_controller.go`) and the
//! `kube-root-ca.crt` ConfigMap with the API's CA (the root CA publisher,
//! `pkg/controller/certificates/rootcacertpublisher`).
//!
//! A namespace is synced when it is added or changes, when its `default` account is deleted,
//! and when its `kube-root-ca.crt` is deleted or changed (edited data or a removed
//! description annotation are put back); all of them at start. Terminating namespaces are
//! skipped, as upstream's creates are refused there. The objects themselves are written by
//! `serviceaccounts::ensure_namespace_objects`, which namespace creation calls too.

use podvisor_store::{EventType, Store, WatchEvent};
use serde_json::Value;

use crate::controller::Reconciler;
use crate::db::{self, NAMESPACES};
use crate::namespace_controller::is_terminating;
use crate::serviceaccounts::{
    DEFAULT_SERVICE_ACCOUNT, ROOT_CA_CONFIG_MAP, ensure_namespace_objects,
};

/// The two controllers as one reconciler of namespaces.
pub(crate) struct NamespaceDefaults {
    /// The CA `kube-root-ca.crt` publishes (PEM).
    pub ca_pem: String,
}

fn name_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/name").and_then(Value::as_str)
}

impl Reconciler for NamespaceDefaults {
    type Key = String;

    fn name(&self) -> &'static str {
        "namespace defaults controller"
    }

    fn kinds(&self) -> &'static [&'static str] {
        &["namespaces", "serviceaccounts", "configmaps"]
    }

    fn keys(&self, kind: &str, event: &WatchEvent) -> Vec<String> {
        let object = &event.object;
        let namespace = || {
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let key = match (kind, event.type_) {
            ("namespaces", EventType::Deleted) => None,
            ("namespaces", _) => name_of(object).map(str::to_owned),
            ("serviceaccounts", EventType::Deleted)
                if name_of(object) == Some(DEFAULT_SERVICE_ACCOUNT) =>
            {
                namespace()
            }
            ("configmaps", EventType::Deleted | EventType::Modified)
                if name_of(object) == Some(ROOT_CA_CONFIG_MAP) =>
            {
                namespace()
            }
            _ => None,
        };
        key.into_iter().collect()
    }

    fn sync_all(&self, store: &Store) -> Result<(), String> {
        crate::serviceaccounts::ensure_all(store, &self.ca_pem).map_err(|e| e.message)
    }

    fn sync(&self, store: &Store, ns: &String) -> Result<(), String> {
        let Some(namespace) = db::try_get(store, NAMESPACES, "", ns).map_err(|e| e.message)? else {
            return Ok(());
        };
        if is_terminating(&namespace) {
            return Ok(());
        }
        ensure_namespace_objects(store, ns, &self.ca_pem)
            .map_err(|e| format!("namespace {ns}: {}", e.message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store.redb")).unwrap();
        (dir, store)
    }

    fn event(type_: EventType, object: Value) -> WatchEvent {
        WatchEvent {
            type_,
            object,
            resource_version: 1,
            previous_json: None,
        }
    }

    #[test]
    fn only_the_namespaces_objects_queue_it() {
        let r = NamespaceDefaults {
            ca_pem: "CA".to_owned(),
        };
        let obj = |name: &str| json!({"metadata": {"name": name, "namespace": "team"}});
        let keys = |kind, t, o| r.keys(kind, &event(t, o));
        assert_eq!(
            keys("configmaps", EventType::Deleted, obj(ROOT_CA_CONFIG_MAP)),
            ["team"]
        );
        assert_eq!(
            keys("configmaps", EventType::Modified, obj(ROOT_CA_CONFIG_MAP)),
            ["team"]
        );
        assert!(keys("configmaps", EventType::Deleted, obj("other")).is_empty());
        assert_eq!(
            keys("serviceaccounts", EventType::Deleted, obj("default")),
            ["team"]
        );
        assert!(keys("serviceaccounts", EventType::Deleted, obj("robot")).is_empty());
        assert_eq!(
            keys(
                "namespaces",
                EventType::Added,
                json!({"metadata": {"name": "x"}})
            ),
            ["x"]
        );
    }

    /// The loop: a namespace created after it started gets its objects, and a deleted
    /// account comes back, from the watch events alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_watch_driven_loop_puts_a_deleted_account_back() {
        let (_dir, store) = store();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(crate::controller::run(
            store.clone(),
            NamespaceDefaults {
                ca_pem: "CA".to_owned(),
            },
            async {
                let _ = stopped.await;
            },
        ));
        let account = || {
            db::try_get(&store, db::SERVICEACCOUNTS, "team", DEFAULT_SERVICE_ACCOUNT)
                .unwrap()
                .map(|a| a["metadata"]["uid"].clone())
        };
        let wait_for_account = || async {
            // Bounds a hung test only: the loop answers the event at once.
            for _ in 0..500 {
                if let Some(uid) = account() {
                    return uid;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            panic!("the default account did not appear");
        };
        // No wait for the watches: a write before one opened is seen by the full pass that
        // follows its opening.
        db::create(
            &store,
            NAMESPACES,
            "",
            "team",
            json!({"metadata": {"name": "team"}, "status": {"phase": "Active"}}),
        )
        .unwrap();
        let first = wait_for_account().await;
        db::delete(
            &store,
            db::SERVICEACCOUNTS,
            "team",
            DEFAULT_SERVICE_ACCOUNT,
            None,
            None,
        )
        .unwrap();
        let second = wait_for_account().await;
        assert_ne!(first, second);
        let _ = stop.send(());
        running.await.unwrap();
    }

    /// A deleted account and an edited ConfigMap are put back; a terminating namespace is
    /// left alone.
    #[test]
    fn sync_restores_and_skips_terminating_namespaces() {
        let (_dir, store) = store();
        let r = NamespaceDefaults {
            ca_pem: "CA".to_owned(),
        };
        for (name, phase) in [("team", "Active"), ("gone", "Terminating")] {
            db::create(
                &store,
                NAMESPACES,
                "",
                name,
                json!({"metadata": {"name": name}, "status": {"phase": phase}}),
            )
            .unwrap();
        }
        r.sync(&store, &"team".to_owned()).unwrap();
        r.sync(&store, &"gone".to_owned()).unwrap();
        let cm = |ns| db::try_get(&store, db::CONFIGMAPS, ns, ROOT_CA_CONFIG_MAP).unwrap();
        assert_eq!(cm("team").unwrap()["data"], json!({"ca.crt": "CA"}));
        assert!(cm("gone").is_none());
        let mut edited = cm("team").unwrap();
        edited["data"]["ca.crt"] = json!("forged");
        edited["metadata"]["annotations"] = json!({});
        db::update(
            &store,
            db::CONFIGMAPS,
            "team",
            ROOT_CA_CONFIG_MAP,
            edited,
            None,
        )
        .unwrap();
        db::delete(&store, db::SERVICEACCOUNTS, "team", "default", None, None).unwrap();
        r.sync(&store, &"team".to_owned()).unwrap();
        let restored = cm("team").unwrap();
        assert_eq!(restored["data"], json!({"ca.crt": "CA"}));
        assert!(
            restored["metadata"]["annotations"]["kubernetes.io/description"]
                .as_str()
                .is_some_and(|d| !d.is_empty())
        );
        assert!(
            db::try_get(&store, db::SERVICEACCOUNTS, "team", "default")
                .unwrap()
                .is_some()
        );
    }
}
