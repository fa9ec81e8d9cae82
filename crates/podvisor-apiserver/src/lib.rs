//! podvisor-apiserver: the Kubernetes REST API subset that makes a podvisor machine a node
//! you drive with the real `kubectl` and client libraries.
//!
//! What it does:
//! - serves HTTPS with a self-generated CA and a bearer token, and writes a kubeconfig
//!   ([`serve`], [`ApiServer`]);
//! - discovery (`/version`, `/api`, `/api/v1`, `/apis`) and the OpenAPI documents (v3 and
//!   v2, from one list of the served kinds) kubectl reads for `explain`, validation and
//!   dry-run;
//! - pods: create (defaulting, validation), get, list, watch, update (spec mutability M11),
//!   patch (JSON, merge, strategic merge, server-side apply), graceful delete, the `status`
//!   subresource, `log` and `exec` (WebSockets, [`PodExec`]); events (as clients write them,
//!   with the API server's TTL) and namespaces;
//! - the generic registry (`registry/`, per-kind strategies): Namespaces, ConfigMaps,
//!   Secrets, ServiceAccounts, Events, Nodes, `coordination.k8s.io` Leases,
//!   `rbac.authorization.k8s.io`'s four kinds, and the read-only `kubernetes` Service with
//!   its `discovery.k8s.io` EndpointSlice;
//! - `meta.k8s.io/v1` `Table` output with kubectl's columns, so `kubectl get` prints READY,
//!   STATUS and RESTARTS as for a real cluster;
//! - errors as `Status` objects shaped like the API server's, so kubectl prints the same
//!   text;
//! - beside the API, the control plane's part for one node: binding (`pods/binding` and a
//!   one-node default scheduler that honours scheduling gates and applies kube-scheduler's
//!   filters, retrying pods that do not fit; [`bind_pending`]), kube-controller-manager's
//!   PodGC ([`podgc`]) and taint-eviction controller, the `DefaultTolerationSeconds`
//!   admission plugin, and, run by [`ApiServer::run`], the namespace, ServiceAccount, root CA
//!   publisher and legacy token controllers.
//!
//! What it does not do: hold lifecycle state or run anything (the agent watches the store
//! and writes status and events back through it), authorizers other than
//! `system:masters` and RBAC (`authz`), admission plugins, Services beyond the API's own,
//! protobuf (beyond the bodies kubectl's typed clients post), HTTP/2, SPDY,
//! `attach`/`port-forward`.
//!
//! Wiring (what `podvisor serve` does):
//!
//! ```no_run
//! # async fn wire(store: podvisor_store::Store, shutdown: impl std::future::Future<Output = ()>) -> Result<(), podvisor_apiserver::ServeError> {
//! use podvisor_apiserver::{ApiServer, ServeConfig};
//! let state_dir = std::path::PathBuf::from("/var/lib/podvisor");
//! let server = ApiServer::bind(ServeConfig {
//!     listen: "127.0.0.1:6443".parse().unwrap(),
//!     state_dir: state_dir.clone(),
//!     store: store.clone(), // the agent keeps its own clone
//!     log_root: state_dir.join("logs"),
//!     node_name: "node-1".to_owned(),
//!     pod_network: None, // or the CNI bridge's gateway, for pods on the pod network
//! })
//! .await?;
//! // `<state>/kubeconfig` appears once the API answers.
//! server.run(shutdown).await
//! # }
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use podvisor_store::Store;

mod auth;
mod authz;
mod controller;
mod db;
mod discovery;
mod events;
mod events_v1;
mod exec;
mod health;
mod history;
mod legacy_tokens;
mod list_options;
mod logs;
mod managed;
mod meta;
pub mod namespace_controller;
mod namespace_defaults;
mod namespaces;
mod objects;
mod openapi;
mod patch;
mod pod_network;
mod pod_security;
pub mod podgc;
mod pods;
mod portforward;
mod printers;
mod protobuf;
mod registry;
mod req;
mod request;
mod reviews;
mod routes;
mod runtimeclasses;
mod scheduler;
mod selectors;
mod server;
mod serviceaccounts;
mod spdy;
mod status;
mod table;
mod taint_eviction;
mod tls;
mod unserved;
mod watch;

pub use discovery::GIT_VERSION;
pub use events::{EVENT_TTL, expire_events};
pub use exec::PodExec;
pub use history::PodHistory;
pub use scheduler::bind_pending;
pub use server::{ApiServer, ServeConfig, ServeError, serve};
pub use serviceaccounts::{TOKEN_MOUNT_PATH, TokenIssuer};
pub use status::ApiError;

/// The state every handler shares: the store and what the node is.
#[derive(Clone)]
pub struct ApiState {
    inner: Arc<StateInner>,
}

#[derive(Clone)]
struct StateInner {
    store: Store,
    log_root: PathBuf,
    node_name: String,
    token: Option<String>,
    /// Service account tokens (issued and accepted) and the CA of `kube-root-ca.crt`.
    service_accounts: Option<(Arc<serviceaccounts::TokenIssuer>, String)>,
    advertise: String,
    bookmark_interval: Duration,
    log_poll_interval: Duration,
    /// Runs `pods/exec` sessions on the node (none: exec is refused).
    exec: Option<exec::ExecBackend>,
    /// Where `pods/history` reads the node's status transitions (none: empty).
    history: Option<Arc<dyn PodHistory>>,
    /// Set once the server stops: watches and log streams end at once.
    stopping: Arc<tokio::sync::watch::Sender<bool>>,
    /// The feature gates pod creation is validated with (`--feature-gates`).
    gates: podvisor_api::FeatureGates,
    /// The authorizer (`system:masters`, then RBAC over the store's cached RBAC objects).
    authorizer: authz::Authorizer,
}

impl ApiState {
    /// State for a node named `node_name` whose container logs are under `log_root`; no
    /// authentication until [`ApiState::with_token`].
    pub fn new(store: Store, log_root: PathBuf, node_name: String) -> Self {
        ApiState {
            inner: Arc::new(StateInner {
                authorizer: authz::Authorizer::new(store.clone()),
                store,
                log_root,
                node_name,
                token: None,
                service_accounts: None,
                advertise: "127.0.0.1:6443".to_owned(),
                bookmark_interval: Duration::from_secs(60),
                log_poll_interval: Duration::from_millis(100),
                exec: None,
                history: None,
                stopping: Arc::new(tokio::sync::watch::Sender::new(false)),
                gates: podvisor_api::FeatureGates::default(),
            }),
        }
    }

    fn map(self, f: impl FnOnce(&mut StateInner)) -> Self {
        let mut inner = Arc::unwrap_or_clone(self.inner);
        f(&mut inner);
        ApiState {
            inner: Arc::new(inner),
        }
    }

    /// Validates created pods with `gates` (`serve --feature-gates`; default: all off).
    #[must_use]
    pub fn with_feature_gates(self, gates: podvisor_api::FeatureGates) -> Self {
        self.map(|s| s.gates = gates)
    }

    /// The feature gates pods are validated with.
    pub fn feature_gates(&self) -> podvisor_api::FeatureGates {
        self.inner.gates
    }

    /// Requires `Authorization: Bearer <token>` on every request but health checks.
    #[must_use]
    pub fn with_token(self, token: String) -> Self {
        self.map(|s| s.token = Some(token))
    }

    /// Serves ServiceAccount tokens issued by `issuer` (and accepts them), and publishes
    /// `ca_pem` as every namespace's `kube-root-ca.crt`.
    #[must_use]
    pub fn with_service_accounts(self, issuer: Arc<TokenIssuer>, ca_pem: String) -> Self {
        self.map(|s| s.service_accounts = Some((issuer, ca_pem)))
    }

    pub(crate) fn token_issuer(&self) -> Option<&TokenIssuer> {
        self.inner
            .service_accounts
            .as_ref()
            .map(|(i, _)| i.as_ref())
    }

    /// The CA `kube-root-ca.crt` publishes, when service accounts are served.
    pub(crate) fn root_ca(&self) -> Option<&str> {
        self.inner
            .service_accounts
            .as_ref()
            .map(|(_, ca)| ca.as_str())
    }

    /// The `host:port` `/api` advertises.
    #[must_use]
    pub fn with_advertise(self, advertise: String) -> Self {
        self.map(|s| s.advertise = advertise)
    }

    /// How often watches with `allowWatchBookmarks=true` get a `BOOKMARK` (default 60 s).
    #[must_use]
    pub fn with_bookmark_interval(self, interval: Duration) -> Self {
        self.map(|s| s.bookmark_interval = interval)
    }

    /// Serves `pods/exec` through `exec` (the node agent's pod workers).
    #[must_use]
    pub fn with_exec(self, exec: Arc<dyn PodExec>) -> Self {
        self.map(|s| s.exec = Some(exec))
    }

    /// Serves `pods/history` from `history` (the node agent's record of status transitions).
    #[must_use]
    pub fn with_history(self, history: Arc<dyn PodHistory>) -> Self {
        self.map(|s| s.history = Some(history))
    }

    /// The history source, if any.
    pub(crate) fn history(&self) -> Option<&Arc<dyn PodHistory>> {
        self.inner.history.as_ref()
    }

    /// Ends every watch and log stream (the server is stopping); new ones end at once.
    pub(crate) fn stop_streams(&self) {
        self.inner.stopping.send_replace(true);
    }

    /// Completes once [`ApiState::stop_streams`] was called.
    pub(crate) fn stopping(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut stopping = self.inner.stopping.subscribe();
        async move {
            let _ = stopping.wait_for(|s| *s).await;
        }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The authorizer.
    pub(crate) fn authorizer(&self) -> &authz::Authorizer {
        &self.inner.authorizer
    }

    /// The node name.
    pub fn node_name(&self) -> &str {
        &self.inner.node_name
    }
}

/// The API as an axum router (no TLS; [`serve`] puts it behind HTTPS). Requests must carry
/// the token if the state has one.
pub fn router(state: ApiState) -> Router {
    let app = routes::api_routes()
        .route("/healthz", get(health::healthz))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(health::readyz))
        .fallback(routes::fallback)
        .layer(axum::middleware::from_fn(routes::body_media_type))
        // Layers run outside in: authentication, impersonation, authorization, then the
        // body checks and the handler.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authz::middleware::authorize_request,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authz::impersonation::impersonate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .layer(DefaultBodyLimit::max(req::MAX_BODY));
    let app = if std::env::var_os("PODVISOR_API_TRACE").is_some() {
        app.layer(axum::middleware::from_fn(auth::trace))
    } else {
        app
    };
    app.with_state(state)
}
