//! Serving: HTTPS (tokio-rustls + hyper) in front of the axum router, a self-check, and the
//! kubeconfig written once the API answers.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::Request;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use podvisor_store::Store;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::{TlsAcceptor, TlsConnector, rustls};

use crate::{ApiState, router, tls};

/// How often expired events are swept ([`crate::events::EVENT_TTL`]).
const EVENT_SWEEP: Duration = Duration::from_secs(60);

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Generating a certificate failed.
    #[error("generating certificates: {0}")]
    Cert(#[from] rcgen::Error),
    /// The store refused what the server writes at start.
    #[error("{0}")]
    Store(String),
    /// A stored certificate or key could not be read.
    #[error("reading PEM: {0}")]
    Pem(String),
    /// The TLS configuration was refused.
    #[error("configuring TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// The server did not answer its own `GET /version`.
    #[error("the API server did not answer its self-check: {0}")]
    SelfCheck(String),
}

/// What `serve` needs.
pub struct ServeConfig {
    /// Where to listen (`127.0.0.1:6443`; port 0 picks a free port).
    pub listen: SocketAddr,
    /// The state directory: `pki/`, `token` and `kubeconfig` live here.
    pub state_dir: PathBuf,
    /// The object store.
    pub store: Store,
    /// Where container logs are (`<state>/logs`).
    pub log_root: PathBuf,
    /// The node name: `spec.nodeName` of admitted pods, a certificate SAN, events' host.
    pub node_name: String,
    /// The host's address on the pod network (the CNI bridge's gateway), where pods with
    /// their own network namespace reach the node: the API listens there too, on the port of
    /// `listen` (unless `listen` is a wildcard that covers it), and the serving certificate
    /// names it. See [`ApiServer::pod_network_addr`].
    pub pod_network: Option<IpAddr>,
}

/// A bound, not yet serving, API server: its address, credentials and state are known, so a
/// caller can start the agent (sharing [`ApiServer::state`]) before [`ApiServer::run`].
pub struct ApiServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    /// The listener on the pod network, when `listen` does not cover it.
    pod_listener: Option<TcpListener>,
    pod_network_addr: Option<SocketAddr>,
    acceptor: TlsAcceptor,
    ca_pem: String,
    token: String,
    issuer: std::sync::Arc<crate::TokenIssuer>,
    state: ApiState,
    state_dir: PathBuf,
}

impl ApiServer {
    /// Creates (or loads) the CA, server certificate and token under `state_dir`, and binds
    /// the listening socket.
    ///
    /// # Errors
    ///
    /// Certificate, file or socket errors.
    pub async fn bind(config: ServeConfig) -> Result<ApiServer, ServeError> {
        let pki =
            tls::load_or_create_pki(&config.state_dir, &config.node_name, config.pod_network)?;
        let token = tls::load_or_create_token(&config.state_dir)?;
        let acceptor = TlsAcceptor::from(tls::server_config(&pki)?);
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServeError::Io {
                what: format!("listening on {}", config.listen),
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| ServeError::Io {
            what: "reading the listening address".to_owned(),
            source,
        })?;
        let (pod_listener, pod_network_addr) = match config.pod_network {
            None => (None, None),
            Some(ip) if crate::pod_network::covers(local_addr, ip) => {
                (None, Some(SocketAddr::new(ip, local_addr.port())))
            }
            Some(ip) => {
                let addr = SocketAddr::new(ip, local_addr.port());
                match crate::pod_network::bind_freebind(addr) {
                    Ok(listener) => (Some(listener), Some(addr)),
                    // Pods on the pod network then go without the API, as they would without
                    // a pod network address; the host's own clients are not refused for it.
                    Err(e) => {
                        tracing::warn!(
                            "cannot listen on {addr} for pods on the pod network: {e}; their \
                             containers get no KUBERNETES_SERVICE_HOST"
                        );
                        (None, None)
                    }
                }
            }
        };
        let advertise = tls::server_url(local_addr)
            .trim_start_matches("https://")
            .to_owned();
        let issuer = std::sync::Arc::new(crate::TokenIssuer::load_or_create(&config.state_dir)?);
        // The API server's system namespaces controller: `kube-public` (readable by all in a
        // cluster) and `kube-node-lease`, which holds the nodes' Leases.
        for ns in ["kube-public", crate::namespaces::NODE_LEASE_NAMESPACE] {
            crate::namespaces::ensure_namespace(&config.store, ns).map_err(|e| {
                ServeError::Store(format!("creating the namespace {ns}: {}", e.message))
            })?;
        }
        crate::serviceaccounts::ensure_all(&config.store, &pki.ca_pem).map_err(|e| {
            ServeError::Store(format!("writing the service accounts: {}", e.message))
        })?;
        let endpoint = crate::registry::endpoint_address(local_addr, pod_network_addr);
        crate::registry::reconcile_kubernetes_service(&config.store, endpoint).map_err(|e| {
            ServeError::Store(format!("writing the kubernetes Service: {}", e.message))
        })?;
        // The API server's `ensureRBACPolicy`: the default roles and bindings, then the
        // aggregated roles filled at once (the controller keeps them current while serving).
        let touched = crate::authz::bootstrap::ensure(&config.store)
            .map_err(|e| ServeError::Store(format!("writing the bootstrap RBAC policy: {e}")))?;
        if !touched.is_empty() {
            tracing::info!("bootstrap RBAC policy: reconciled {}", touched.join(", "));
        }
        crate::authz::aggregation::sync(&config.store)
            .map_err(|e| ServeError::Store(format!("aggregating cluster roles: {e}")))?;
        let state = ApiState::new(config.store, config.log_root, config.node_name)
            .with_token(token.clone())
            .with_service_accounts(std::sync::Arc::clone(&issuer), pki.ca_pem.clone())
            .with_advertise(advertise);
        Ok(ApiServer {
            listener,
            local_addr,
            pod_listener,
            pod_network_addr,
            acceptor,
            ca_pem: pki.ca_pem,
            token,
            issuer,
            state,
            state_dir: config.state_dir,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Where pods on the pod network reach the API (the host's address there and the port
    /// of [`ApiServer::local_addr`]): `None` without a pod network address, or when it could
    /// not be listened on.
    pub fn pod_network_addr(&self) -> Option<SocketAddr> {
        self.pod_network_addr
    }

    /// The URL clients use (`https://127.0.0.1:<port>`).
    pub fn url(&self) -> String {
        tls::server_url(self.local_addr)
    }

    /// What issues service account tokens (the node agent's token requests go here).
    pub fn token_issuer(&self) -> std::sync::Arc<crate::TokenIssuer> {
        std::sync::Arc::clone(&self.issuer)
    }

    /// The bearer token clients must send.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The CA certificate (PEM) clients must trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Where the kubeconfig is written once the API answers.
    pub fn kubeconfig_path(&self) -> PathBuf {
        tls::kubeconfig_path(&self.state_dir)
    }

    /// Sends watches that allow bookmarks one every `interval` (default 60 s).
    #[must_use]
    pub fn with_bookmark_interval(mut self, interval: Duration) -> Self {
        self.state = self.state.with_bookmark_interval(interval);
        self
    }

    /// Validates created pods with `gates` (see [`ApiState::with_feature_gates`]).
    #[must_use]
    pub fn with_feature_gates(mut self, gates: podvisor_api::FeatureGates) -> Self {
        self.state = self.state.with_feature_gates(gates);
        self
    }

    /// Serves `pods/exec` through `exec` (see [`ApiState::with_exec`]).
    #[must_use]
    pub fn with_exec(mut self, exec: std::sync::Arc<dyn crate::PodExec>) -> Self {
        self.state = self.state.with_exec(exec);
        self
    }

    /// Serves `pods/history` through `history` (see [`ApiState::with_history`]).
    #[must_use]
    pub fn with_history(mut self, history: std::sync::Arc<dyn crate::PodHistory>) -> Self {
        self.state = self.state.with_history(history);
        self
    }

    /// The handlers' shared state (the store, the node name).
    pub fn state(&self) -> &ApiState {
        &self.state
    }

    /// Serves until `shutdown` completes, then stops accepting (the port is closed: new
    /// clients are refused, not left waiting), ends every watch and log stream at once, lets
    /// other open requests finish for up to 5 s and closes the rest.
    ///
    /// Writes `<state>/kubeconfig` (mode 0600, atomically) once a TLS `GET /version` with
    /// the token has succeeded.
    ///
    /// # Errors
    ///
    /// The self-check failed, or the kubeconfig could not be written.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let app = router(self.state.clone());
        let (url, kubeconfig_path) = (self.url(), self.kubeconfig_path());
        let (listener, pod_listener) = (self.listener, self.pod_listener);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut connections = JoinSet::new();
        let mut check = tokio::spawn(self_check(
            self.local_addr,
            self.ca_pem.clone(),
            self.token.clone(),
        ));
        let mut check_done = false;
        // The namespace controller (kube-controller-manager's): empties and removes deleted
        // namespaces while the API serves.
        let namespaces = tokio::spawn(crate::namespace_controller::run(
            self.state.store().clone(),
            std::future::pending(),
        ));
        let _namespaces = AbortOnDrop(namespaces);
        // The ServiceAccount controller and the root CA publisher (every namespace's `default`
        // account and `kube-root-ca.crt`), and the legacy token controller.
        let _defaults = AbortOnDrop(tokio::spawn(crate::controller::run(
            self.state.store().clone(),
            crate::namespace_defaults::NamespaceDefaults {
                ca_pem: self.ca_pem.clone(),
            },
            std::future::pending(),
        )));
        let _tokens = AbortOnDrop(tokio::spawn(crate::controller::run(
            self.state.store().clone(),
            crate::legacy_tokens::LegacyTokens {
                issuer: std::sync::Arc::clone(&self.issuer),
                ca_pem: self.ca_pem.clone(),
            },
            std::future::pending(),
        )));
        // The ClusterRole aggregation controller (kube-controller-manager's).
        let aggregation = tokio::spawn(crate::authz::aggregation::run(
            self.state.store().clone(),
            std::future::pending(),
        ));
        let _aggregation = AbortOnDrop(aggregation);
        // kube-scheduler's retries of pods that did not fit, and kube-controller-manager's
        // taint-eviction controller.
        let _control_plane = [
            tokio::spawn(crate::scheduler::run(
                self.state.store().clone(),
                self.state.node_name().to_owned(),
                std::future::pending(),
            )),
            tokio::spawn(crate::taint_eviction::run(
                self.state.store().clone(),
                std::future::pending(),
            )),
        ]
        .map(AbortOnDrop);
        let mut expiry = tokio::time::interval(EVENT_SWEEP);
        expiry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        let result = loop {
            tokio::select! {
                () = &mut shutdown => break Ok(()),
                accepted = crate::pod_network::accept_any(&listener, pod_listener.as_ref()) => {
                    let Ok((tcp, _peer)) = accepted else {
                        // Out of file descriptors and the like: back off a little.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    connections.spawn(serve_connection(
                        tcp,
                        self.acceptor.clone(),
                        app.clone(),
                        stop_rx.clone(),
                    ));
                }
                outcome = &mut check, if !check_done => {
                    check_done = true;
                    match outcome {
                        Ok(Ok(())) => {
                            let text = tls::kubeconfig(&url, &self.ca_pem, &self.token);
                            if let Err(e) = tls::write_private(&kubeconfig_path, text.as_bytes(), 0o600) {
                                break Err(e);
                            }
                        }
                        Ok(Err(e)) => break Err(e),
                        Err(e) => break Err(ServeError::SelfCheck(e.to_string())),
                    }
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                _ = expiry.tick() => {
                    let store = self.state.store().clone();
                    tokio::task::spawn_blocking(move || {
                        crate::events::expire_events(&store, jiff::Timestamp::now(), crate::events::EVENT_TTL)
                    });
                }
            }
        };
        check.abort();
        drop(listener);
        drop(pod_listener);
        self.state.stop_streams();
        let _ = stop_tx.send(true);
        let drain = async { while connections.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(5), drain)
            .await
            .is_err()
        {
            connections.abort_all();
        }
        result
    }
}

/// Binds and serves until `shutdown` completes ([`ApiServer::bind`] then [`ApiServer::run`]).
///
/// # Errors
///
/// As [`ApiServer::bind`] and [`ApiServer::run`].
pub async fn serve(
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    ApiServer::bind(config).await?.run(shutdown).await
}

async fn serve_connection(
    tcp: TcpStream,
    acceptor: TlsAcceptor,
    app: Router,
    mut stop: watch::Receiver<bool>,
) {
    let _ = tcp.set_nodelay(true);
    let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
    else {
        return;
    };
    let service = TowerToHyperService::new(app);
    // Upgrades: `pods/exec` turns its connection into a WebSocket.
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tls), service)
        .with_upgrades();
    tokio::pin!(conn);
    let stopped = tokio::select! {
        _ = conn.as_mut() => false,
        r = stop.wait_for(|s| *s) => r.is_ok(),
    };
    if stopped {
        conn.as_mut().graceful_shutdown();
        let _ = conn.await;
    }
}

/// `GET /version` over TLS with the token, trusting only our CA: proves the API answers
/// the way a client configured from the kubeconfig will reach it.
async fn self_check(addr: SocketAddr, ca_pem: String, token: String) -> Result<(), ServeError> {
    let connector = TlsConnector::from(tls::client_config(&ca_pem)?);
    let url = tls::server_url(addr);
    let host = url.trim_start_matches("https://");
    let connect_addr: SocketAddr = host
        .parse()
        .map_err(|e| ServeError::SelfCheck(format!("{e}")))?;
    let server_name = ServerName::IpAddress(connect_addr.ip().into());
    let mut last_error = String::new();
    for _ in 0..50 {
        match try_version(&connector, connect_addr, server_name.clone(), &token).await {
            Ok(()) => return Ok(()),
            Err(e) => last_error = e,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(ServeError::SelfCheck(last_error))
}

async fn try_version(
    connector: &TlsConnector,
    addr: SocketAddr,
    name: ServerName<'static>,
    token: &str,
) -> Result<(), String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(conn);
    let req = Request::get("/version")
        .header("host", addr.to_string())
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string());
    driver.abort();
    let resp = resp?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(format!("GET /version answered {}", resp.status()))
    }
}

/// Aborts a background task when dropped (when [`ApiServer::run`] returns).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
