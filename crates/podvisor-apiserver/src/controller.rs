//! The loop of kube-controller-manager's watch-driven controllers that `serve` runs beside the
//! API (the `default` ServiceAccount and `kube-root-ca.crt` in `namespace_defaults.rs`, the
//! legacy token controller in `legacy_tokens.rs`): watches of a few kinds feed one queue of
//! keys; a pass syncs the queued keys, or everything after a (re)watch, on a blocking thread.
//!
//! A watch the store dropped (a slow watcher) is opened again and followed by a full pass, as
//! an informer's relist is; a failed pass is tried again a second later as a full pass.

use std::collections::BTreeSet;
use std::time::Duration;

use podvisor_store::{Store, WatchEvent, WatchFrom};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// How long a failed pass waits before the next full one.
const RETRY: Duration = Duration::from_secs(1);

/// What a controller does with events and passes.
pub(crate) trait Reconciler: Send + Sync + 'static {
    /// What one sync is about (a namespace, a Secret's namespace and name, ...).
    type Key: Ord + Clone + Send + 'static;

    /// The controller's name, for logs.
    fn name(&self) -> &'static str;

    /// The store kinds (plural) it watches across namespaces.
    fn kinds(&self) -> &'static [&'static str];

    /// The keys an event of `kind` queues (none when it is not the controller's business).
    fn keys(&self, kind: &str, event: &WatchEvent) -> Vec<Self::Key>;

    /// Syncs everything (at start and after a watch was opened again).
    ///
    /// # Errors
    ///
    /// A message for the log; the pass is tried again.
    fn sync_all(&self, store: &Store) -> Result<(), String>;

    /// Syncs one key.
    ///
    /// # Errors
    ///
    /// A message for the log; the pass is tried again.
    fn sync(&self, store: &Store, key: &Self::Key) -> Result<(), String>;
}

enum Signal {
    Event(&'static str, WatchEvent),
    /// A watch was (re)opened: what happened before it is known only from a full pass.
    Resync,
}

/// Forwards the events of `kind` to `tx`, watching again whenever the store ends the watch.
async fn forward(store: Store, kind: &'static str, tx: mpsc::Sender<Signal>, name: &'static str) {
    loop {
        let mut watch = match store.watch(kind, None, WatchFrom::Now) {
            Ok(w) => w,
            Err(e) => {
                tracing::error!("{name}: watching {kind}: {e}");
                return;
            }
        };
        if tx.send(Signal::Resync).await.is_err() {
            return;
        }
        while let Some(event) = watch.next().await {
            if tx.send(Signal::Event(kind, event)).await.is_err() {
                return;
            }
        }
    }
}

/// Runs `reconciler` until `stop` completes.
pub(crate) async fn run<R: Reconciler>(
    store: Store,
    reconciler: R,
    stop: impl std::future::Future<Output = ()>,
) {
    let reconciler = std::sync::Arc::new(reconciler);
    let (tx, mut rx) = mpsc::channel(1024);
    let mut forwarders = JoinSet::new();
    for kind in reconciler.kinds() {
        forwarders.spawn(forward(store.clone(), kind, tx.clone(), reconciler.name()));
    }
    drop(tx);
    tokio::pin!(stop);
    let mut retry_full = false;
    loop {
        let first = if retry_full {
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(RETRY) => Some(Signal::Resync),
            }
        } else {
            tokio::select! {
                () = &mut stop => return,
                s = rx.recv() => s,
            }
        };
        let Some(first) = first else { return };
        let mut full = false;
        let mut keys = BTreeSet::new();
        let mut take = |signal: Signal| match signal {
            Signal::Resync => full = true,
            Signal::Event(kind, event) => keys.extend(reconciler.keys(kind, &event)),
        };
        take(first);
        while let Ok(signal) = rx.try_recv() {
            take(signal);
        }
        let (s, r) = (store.clone(), std::sync::Arc::clone(&reconciler));
        let pass = tokio::task::spawn_blocking(move || {
            if full {
                return r.sync_all(&s);
            }
            let mut failed = Vec::new();
            for key in &keys {
                if let Err(e) = r.sync(&s, key) {
                    failed.push(e);
                }
            }
            if failed.is_empty() {
                Ok(())
            } else {
                Err(failed.join("; "))
            }
        })
        .await;
        retry_full = match pass {
            Ok(Ok(())) => false,
            Ok(Err(e)) => {
                tracing::warn!("{}: {e}", reconciler.name());
                true
            }
            Err(e) => {
                tracing::warn!("{}: the pass failed: {e}", reconciler.name());
                true
            }
        };
    }
}
