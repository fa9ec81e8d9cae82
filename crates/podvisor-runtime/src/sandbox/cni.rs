//! Running CNI plugins (spec 1.0, and 0.4 lists) for a pod's network namespace.
//!
//! A plugin is an executable in one of the plugin directories (`/usr/lib/cni` on Debian),
//! named by a configuration's `type`. It is run with `CNI_COMMAND` (`ADD`, `DEL`, `CHECK`),
//! `CNI_CONTAINERID`, `CNI_NETNS` (the pod's bind-mounted network namespace), `CNI_IFNAME`,
//! `CNI_ARGS` and `CNI_PATH` in its environment and its configuration on stdin, in its own
//! process group so a timeout kills it and whatever it started (`iptables`, say). The rest
//! of the agent's environment is inherited, as libcni does: plugins find `iptables` on `PATH`.
//!
//! A network configuration list runs as libcni runs it, which is what containerd (go-cni)
//! calls:
//! - `ADD`: plugins in list order; each gets the list's `name` and `cniVersion`, the previous
//!   plugin's result as `prevResult`, and `runtimeConfig` holding only the capabilities it
//!   declares (`portMappings` for `portmap`). The last result is the list's; it is cached
//!   (`<cache>/<network>-<container>-<ifname>.json`) for `DEL` and `CHECK`.
//! - `DEL`: plugins in *reverse* order, each with the cached result as `prevResult` (0.4.0+),
//!   then the cache entry is removed. A plugin must succeed on `DEL` of what is already gone,
//!   so a second `DEL` is harmless.
//! - `CHECK` (0.4.0+, unless `disableCheck`): list order, with the cached result.
//!
//! go-cni attaches the loopback network (`cni-loopback`, plugin `loopback`, ifname `lo`) and
//! the default network (ifname `eth0`) concurrently and removes them in that order. podvisor
//! brings `lo` up itself when it creates the namespace ([`super::netns`]), which saves the
//! loopback plugin's process start; a caller that wants the plugin can still run
//! [`loopback_network`] as a list of its own.

mod config;
mod gateway;
mod record;
mod result;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::io::AsyncWriteExt;

pub use config::{
    DefaultNetwork, MASQ_CHAIN, NetworkChoice, NetworkConfigList, load_default_network,
    load_named_network, resolve_network, version_at_least,
};
pub use gateway::host_address;
pub use record::{AttachedNetwork, note_network_choice};
pub use result::{CniResult, Dns, Interface, IpConfig, PluginError, Route};

/// Debian's plugin directory (`containernetworking-plugins`).
pub const DEBIAN_PLUGIN_DIR: &str = "/usr/lib/cni";
/// Where the node's networks are configured (containerd's `conf_dir`): read only when named
/// (`--cni-conf-dir`, [`NetworkChoice::ConfDir`]).
pub const SYSTEM_CONF_DIR: &str = "/etc/cni/net.d";
/// The interface name of a pod's network inside its namespace.
pub const POD_IFNAME: &str = "eth0";
/// How long one plugin may run before its process group is killed.
pub const DEFAULT_PLUGIN_TIMEOUT: Duration = Duration::from_secs(20);

/// Errors of running a network configuration.
#[derive(Debug, thiserror::Error)]
pub enum CniError {
    /// A configuration file or document is invalid.
    #[error("invalid network config {path}: {reason}")]
    Config {
        /// The file (or `<inline>`).
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// No plugin directory holds the plugin.
    #[error("failed to find plugin {plugin:?} in path {dirs:?}")]
    PluginNotFound {
        /// The plugin's `type`.
        plugin: String,
        /// The directories searched.
        dirs: Vec<PathBuf>,
    },
    /// The plugin answered with an error object.
    #[error("plugin type={plugin:?} failed ({command}): {}", plugin_message(.error))]
    Plugin {
        /// The plugin's `type`.
        plugin: String,
        /// `ADD`, `DEL` or `CHECK`.
        command: &'static str,
        /// What it said.
        error: PluginError,
    },
    /// The plugin failed without an error object (a crash, a signal).
    #[error("plugin type={plugin:?} failed ({command}): {status}: {output}")]
    PluginFailed {
        /// The plugin's `type`.
        plugin: String,
        /// `ADD`, `DEL` or `CHECK`.
        command: &'static str,
        /// How it ended.
        status: String,
        /// Its stdout and stderr, trimmed.
        output: String,
    },
    /// The plugin ran longer than the timeout; its process group was killed.
    #[error("plugin type={plugin:?} timed out ({command}) after {after:?}; killed")]
    Timeout {
        /// The plugin's `type`.
        plugin: String,
        /// `ADD`, `DEL` or `CHECK`.
        command: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// The plugin succeeded but printed no valid result.
    #[error("plugin type={plugin:?} ({command}) printed an invalid result: {reason}")]
    BadResult {
        /// The plugin's `type`.
        plugin: String,
        /// `ADD`, `DEL` or `CHECK`.
        command: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// A file operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// The step (lower case).
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl CniError {
    fn io(what: &'static str, path: &Path, source: std::io::Error) -> CniError {
        CniError::Io {
            what,
            path: path.to_owned(),
            source,
        }
    }
}

fn plugin_message(e: &PluginError) -> String {
    let mut s = e.msg.clone();
    if s.is_empty() {
        s = e.code_name().unwrap_or("error").to_owned();
    }
    if !e.details.is_empty() {
        s.push_str("; ");
        s.push_str(&e.details);
    }
    format!("{s} (code {})", e.code)
}

/// A `hostPort` for the `portmap` plugin (`runtimeConfig.portMappings`, as containerd
/// builds it from the pod's container ports: only ports with a `hostPort`, protocol in lower
/// case, `hostIP` only when set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PortMapping {
    /// The port on the host.
    pub host_port: u16,
    /// The port in the pod.
    pub container_port: u16,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    /// The host address to bind, when not all.
    #[serde(rename = "hostIP", skip_serializing_if = "String::is_empty")]
    pub host_ip: String,
}

impl PortMapping {
    /// The mappings of a pod's `hostPort`s (containers and init containers, in order).
    #[must_use]
    pub fn from_pod_spec(spec: &k8s_openapi::api::core::v1::PodSpec) -> Vec<PortMapping> {
        let containers = spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers);
        containers
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                let host_port = u16::try_from(p.host_port?).ok().filter(|&h| h > 0)?;
                Some(PortMapping {
                    host_port,
                    container_port: u16::try_from(p.container_port).ok()?,
                    protocol: p.protocol.as_deref().unwrap_or("TCP").to_lowercase(),
                    host_ip: p.host_ip.clone().unwrap_or_default(),
                })
            })
            .collect()
    }
}

/// One pod's attachment to a network: what `CNI_*` and `runtimeConfig` say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// `CNI_CONTAINERID`: the sandbox's id (stable for the sandbox's life: DEL needs it).
    pub container_id: String,
    /// `CNI_NETNS`: the pod's network namespace file.
    pub netns: PathBuf,
    /// `CNI_IFNAME`, [`POD_IFNAME`] for the pod network.
    pub ifname: String,
    /// `CNI_ARGS` pairs (see [`kubernetes_args`]).
    pub args: Vec<(String, String)>,
    /// `runtimeConfig.portMappings`.
    pub port_mappings: Vec<PortMapping>,
}

/// The `CNI_ARGS` containerd passes for a pod (`IgnoreUnknown=1` first, so plugins that do
/// not know the other keys accept them).
#[must_use]
pub fn kubernetes_args(
    namespace: &str,
    name: &str,
    uid: &str,
    sandbox_id: &str,
) -> Vec<(String, String)> {
    [
        ("IgnoreUnknown", "1"),
        ("K8S_POD_NAMESPACE", namespace),
        ("K8S_POD_NAME", name),
        ("K8S_POD_INFRA_CONTAINER_ID", sandbox_id),
        ("K8S_POD_UID", uid),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// go-cni's loopback network (`cni-loopback`: one `loopback` plugin, run with ifname `lo`).
#[must_use]
pub fn loopback_network() -> NetworkConfigList {
    NetworkConfigList::from_conflist_bytes(
        br#"{"cniVersion":"0.3.1","name":"cni-loopback","plugins":[{"type":"loopback"}]}"#,
    )
    .expect("the loopback conflist is valid")
}

/// A CNI invoker: where plugins are, where results are cached, how long a plugin may run.
#[derive(Debug, Clone)]
pub struct Cni {
    plugin_dirs: Vec<PathBuf>,
    cache_dir: PathBuf,
    timeout: Duration,
    /// Plugins run at the lowest CPU priority ([`Cni::in_background`]).
    background: bool,
}

/// The commands of the spec podvisor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Add,
    Del,
    Check,
}

impl Command {
    fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
        }
    }
}

impl Cni {
    /// An invoker searching `plugin_dirs` in order and caching results in `cache_dir`
    /// (podvisor's: `<state>/cni/results`), with [`DEFAULT_PLUGIN_TIMEOUT`].
    #[must_use]
    pub fn new(plugin_dirs: Vec<PathBuf>, cache_dir: PathBuf) -> Cni {
        Cni {
            plugin_dirs,
            cache_dir,
            timeout: DEFAULT_PLUGIN_TIMEOUT,
            background: false,
        }
    }

    /// The same invoker for work no start waits for (the warm pool's refills, a sandbox's
    /// tear-down): its plugins run at nice 19, so that on a busy node they take the CPU a
    /// pod's start leaves over instead of half of it (a `bridge` ADD is ~15 ms of a Go
    /// process's CPU, a DEL 25 to 50 ms).
    #[must_use]
    pub fn in_background(&self) -> Cni {
        Cni {
            background: true,
            ..self.clone()
        }
    }

    /// The same invoker with another per-plugin timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Cni {
        self.timeout = timeout;
        self
    }

    /// Runs `ADD` of every plugin of `list` in order, chaining results, caches the final
    /// result and returns it. On failure nothing is undone here: the caller runs
    /// [`Cni::del`], as the kubelet tears down a sandbox whose network setup failed.
    ///
    /// # Errors
    /// The first plugin that fails, times out, or prints no valid result.
    pub async fn add(
        &self,
        list: &NetworkConfigList,
        att: &Attachment,
    ) -> Result<CniResult, CniError> {
        let mut prev: Option<Value> = None;
        for plugin in &list.plugins {
            let out = self
                .run(Command::Add, list, plugin, prev.as_ref(), att)
                .await?;
            let kind = plugin_type(plugin);
            let raw = serde_json::from_slice::<Value>(&out).map_err(|e| CniError::BadResult {
                plugin: kind.clone(),
                command: "ADD",
                reason: e.to_string(),
            })?;
            prev = Some(raw);
        }
        let raw = prev.unwrap_or_else(|| json!({ "cniVersion": list.cni_version }));
        let result = CniResult::from_value(raw).map_err(|e| CniError::BadResult {
            plugin: list.plugins.last().map(plugin_type).unwrap_or_default(),
            command: "ADD",
            reason: e.to_string(),
        })?;
        self.write_cache(list, att, &result.raw)?;
        Ok(result)
    }

    /// Runs `DEL` of every plugin of `list` in reverse order with the cached result, then
    /// drops the cache entry. Releasing what is already released succeeds.
    ///
    /// # Errors
    /// The first plugin that fails or times out (the cache entry is kept for a retry).
    pub async fn del(&self, list: &NetworkConfigList, att: &Attachment) -> Result<(), CniError> {
        let cached = if list.has_cached_results() {
            self.read_cache(list, att)
        } else {
            None
        };
        self.del_with(list, att, cached.as_ref()).await
    }

    /// Runs `DEL` of exactly what `attached` records (the list it was added with, its result
    /// as `prevResult`), whatever the node's configuration is now, then drops the cache
    /// entry.
    ///
    /// # Errors
    /// The record is damaged, or the first plugin that fails or times out.
    pub async fn del_recorded(
        &self,
        attached: &AttachedNetwork,
        att: &Attachment,
    ) -> Result<(), CniError> {
        let list = attached.list().map_err(|reason| CniError::Config {
            path: PathBuf::from(format!("<the record of network {}>", attached.name)),
            reason,
        })?;
        let prev = list.has_cached_results().then_some(&attached.result);
        self.del_with(&list, att, prev).await
    }

    /// Releases an attachment: with exactly what `attached` records when there is a record
    /// ([`Cni::del_recorded`]), else (a record from before they were kept) with `fallback`,
    /// the agent's network.
    ///
    /// # Errors
    /// As [`Cni::del_recorded`] and [`Cni::del`].
    pub async fn release(
        &self,
        attached: Option<&AttachedNetwork>,
        fallback: &NetworkConfigList,
        att: &Attachment,
    ) -> Result<(), CniError> {
        match attached {
            Some(attached) => self.del_recorded(attached, att).await,
            None => self.del(fallback, att).await,
        }
    }

    async fn del_with(
        &self,
        list: &NetworkConfigList,
        att: &Attachment,
        prev: Option<&Value>,
    ) -> Result<(), CniError> {
        for plugin in list.plugins.iter().rev() {
            self.run(Command::Del, list, plugin, prev, att).await?;
        }
        let path = self.cache_path(list, att);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(CniError::io("remove cached result", &path, e))
            }
            _ => Ok(()),
        }
    }

    /// Runs `CHECK` of every plugin of `list` in order with the cached result. Does nothing
    /// for lists older than 0.4.0 or with `disableCheck`.
    ///
    /// # Errors
    /// No cached result (the network was never added), or the first plugin that fails.
    pub async fn check(&self, list: &NetworkConfigList, att: &Attachment) -> Result<(), CniError> {
        if !list.has_cached_results() || list.disable_check {
            return Ok(());
        }
        let cached = self.read_cache(list, att).ok_or_else(|| CniError::Config {
            path: self.cache_path(list, att),
            reason: "no cached result for CHECK: the network was not added".to_owned(),
        })?;
        for plugin in &list.plugins {
            self.run(Command::Check, list, plugin, Some(&cached), att)
                .await?;
        }
        Ok(())
    }

    /// The result cached by the last successful `ADD`, if any.
    #[must_use]
    pub fn cached_result(&self, list: &NetworkConfigList, att: &Attachment) -> Option<CniResult> {
        CniResult::from_value(self.read_cache(list, att)?).ok()
    }

    /// Where a plugin binary is: the first plugin directory holding it.
    ///
    /// # Errors
    /// No directory holds it.
    pub fn find_plugin(&self, plugin: &str) -> Result<PathBuf, CniError> {
        if !plugin.contains('/') {
            for dir in &self.plugin_dirs {
                let path = dir.join(plugin);
                if path.is_file() {
                    return Ok(path);
                }
            }
        }
        Err(CniError::PluginNotFound {
            plugin: plugin.to_owned(),
            dirs: self.plugin_dirs.clone(),
        })
    }

    fn cache_path(&self, list: &NetworkConfigList, att: &Attachment) -> PathBuf {
        let name = format!("{}-{}-{}.json", list.name, att.container_id, att.ifname);
        self.cache_dir.join(name.replace('/', "_"))
    }

    fn read_cache(&self, list: &NetworkConfigList, att: &Attachment) -> Option<Value> {
        let bytes = std::fs::read(self.cache_path(list, att)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    fn write_cache(
        &self,
        list: &NetworkConfigList,
        att: &Attachment,
        result: &Value,
    ) -> Result<(), CniError> {
        std::fs::create_dir_all(&self.cache_dir)
            .map_err(|e| CniError::io("create result cache", &self.cache_dir, e))?;
        let path = self.cache_path(list, att);
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, result.to_string())
            .map_err(|e| CniError::io("write cached result", &tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| CniError::io("write cached result", &path, e))
    }

    /// Runs one plugin and returns its stdout on success.
    async fn run(
        &self,
        command: Command,
        list: &NetworkConfigList,
        plugin: &Map<String, Value>,
        prev: Option<&Value>,
        att: &Attachment,
    ) -> Result<Vec<u8>, CniError> {
        let kind = plugin_type(plugin);
        let binary = self.find_plugin(&kind)?;
        let stdin = plugin_config(list, plugin, prev, att).to_string();
        let cni_path = std::env::join_paths(&self.plugin_dirs).unwrap_or_default();
        let args: Vec<String> = att.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut child = tokio::process::Command::new(&binary)
            .env("CNI_COMMAND", command.as_str())
            .env("CNI_CONTAINERID", &att.container_id)
            .env("CNI_NETNS", &att.netns)
            .env("CNI_IFNAME", &att.ifname)
            .env("CNI_ARGS", args.join(";"))
            .env("CNI_PATH", cni_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| CniError::io("start CNI plugin", &binary, e))?;
        let started = std::time::Instant::now();
        let pid = child.id();
        if self.background {
            // The whole process group (every thread of it, as `PRIO_PGRP` does), so the
            // threads a Go plugin started before this call are lowered too; later ones inherit.
            // Failing leaves it at the normal priority.
            let group = pid.and_then(|p| rustix::process::Pid::from_raw(p.cast_signed()));
            if group.is_some() {
                let _ = rustix::process::setpriority_pgrp(group, 19);
            }
        }
        let mut input = child.stdin.take().expect("piped stdin");
        let run = async move {
            // A plugin that exits without reading its stdin is not an error here: its exit
            // status says what happened.
            let _ = input.write_all(stdin.as_bytes()).await;
            drop(input);
            child.wait_with_output().await
        };
        let output = match tokio::time::timeout(self.timeout, run).await {
            Ok(out) => out.map_err(|e| CniError::io("wait for CNI plugin", &binary, e))?,
            Err(_) => {
                // The child was dropped with the future (SIGKILL to it); its group goes too.
                if let Some(pgid) =
                    pid.and_then(|p| rustix::process::Pid::from_raw(p.cast_signed()))
                {
                    let _ =
                        rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
                }
                return Err(CniError::Timeout {
                    plugin: kind,
                    command: command.as_str(),
                    after: self.timeout,
                });
            }
        };
        tracing::debug!(
            plugin = %kind,
            command = command.as_str(),
            container = %att.container_id,
            elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
            success = output.status.success(),
            "CNI plugin ran"
        );
        if output.status.success() {
            return Ok(output.stdout);
        }
        if let Some(error) = PluginError::parse(&output.stdout) {
            return Err(CniError::Plugin {
                plugin: kind,
                command: command.as_str(),
                error,
            });
        }
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        Err(CniError::PluginFailed {
            plugin: kind,
            command: command.as_str(),
            status: output.status.to_string(),
            output: text.trim().to_owned(),
        })
    }
}

fn plugin_type(plugin: &Map<String, Value>) -> String {
    plugin
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The configuration one plugin gets on stdin (libcni's `buildOneConfig`): its own object with
/// the list's `name` and `cniVersion`, `prevResult` when there is one, and `runtimeConfig`
/// with only the capabilities the plugin declares in `capabilities`.
fn plugin_config(
    list: &NetworkConfigList,
    plugin: &Map<String, Value>,
    prev: Option<&Value>,
    att: &Attachment,
) -> Value {
    let mut conf = plugin.clone();
    conf.insert("name".to_owned(), Value::from(list.name.as_str()));
    conf.insert(
        "cniVersion".to_owned(),
        Value::from(list.cni_version.as_str()),
    );
    match prev {
        Some(p) => conf.insert("prevResult".to_owned(), p.clone()),
        None => conf.remove("prevResult"),
    };
    let declares = |cap: &str| {
        plugin
            .get("capabilities")
            .and_then(|c| c.get(cap))
            .and_then(Value::as_bool)
            == Some(true)
    };
    let mut runtime = Map::new();
    if declares("portMappings") && !att.port_mappings.is_empty() {
        runtime.insert(
            "portMappings".to_owned(),
            serde_json::to_value(&att.port_mappings).expect("JSON"),
        );
    }
    if !runtime.is_empty() {
        conf.insert("runtimeConfig".to_owned(), Value::Object(runtime));
    }
    Value::Object(conf)
}

#[cfg(test)]
mod tests;
