//! Network configuration lists: loading the node's from a CNI configuration directory as
//! containerd does, and podvisor's default bridge network when none is configured.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::CniError;

/// The largest configuration file read (go-cni's `MaxFileSize`, 2 MiB).
const MAX_CONF_FILE: u64 = 2 * 1024 * 1024;

/// A network configuration list (a `.conflist`, or a single `.conf` upconverted to a list of
/// one): the network's name and version, and each plugin's configuration object as written.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkConfigList {
    /// `name`: the network's name (keys the result cache and host-local's data).
    pub name: String,
    /// `cniVersion` of the list, given to every plugin.
    pub cni_version: String,
    /// Each plugin's configuration object, in order (`type` names the binary).
    pub plugins: Vec<Map<String, Value>>,
    /// `disableCheck`: `CHECK` is skipped for this list.
    pub disable_check: bool,
    /// The file it was read from, when it was.
    pub source: Option<PathBuf>,
}

impl NetworkConfigList {
    /// Parses a `.conflist` document.
    ///
    /// # Errors
    /// Not JSON, or `name`, `cniVersion` or a plugin's `type` missing.
    pub fn from_conflist_bytes(bytes: &[u8]) -> Result<NetworkConfigList, String> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let obj = v.as_object().ok_or("not a JSON object")?;
        let name = str_field(obj, "name")?;
        let cni_version = obj
            .get("cniVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let plugins = obj
            .get("plugins")
            .and_then(Value::as_array)
            .ok_or("error parsing configuration list: no 'plugins' key")?;
        if plugins.is_empty() {
            return Err("error parsing configuration list: no plugins in list".to_owned());
        }
        let plugins = plugins
            .iter()
            .map(|p| {
                let p = p.as_object().ok_or("a plugin is not a JSON object")?;
                str_field(p, "type")?;
                Ok(p.clone())
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(NetworkConfigList {
            name,
            cni_version,
            plugins,
            disable_check: obj.get("disableCheck").and_then(Value::as_bool) == Some(true),
            source: None,
        })
    }

    /// Parses a single-plugin `.conf` document and makes it a list of one, as libcni's
    /// `ConfListFromConf`.
    ///
    /// # Errors
    /// Not JSON, or `name` or `type` missing.
    pub fn from_conf_bytes(bytes: &[u8]) -> Result<NetworkConfigList, String> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let obj = v.as_object().ok_or("not a JSON object")?;
        let name = str_field(obj, "name")?;
        if obj
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            return Err("network type not found".to_owned());
        }
        Ok(NetworkConfigList {
            name,
            cni_version: obj
                .get("cniVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            plugins: vec![obj.clone()],
            disable_check: false,
            source: None,
        })
    }

    /// Reads `path` as a `.conflist` (by its extension) or a `.conf`/`.json`.
    ///
    /// # Errors
    /// Unreadable, larger than 2 MiB, or invalid.
    pub fn from_file(path: &Path) -> Result<NetworkConfigList, CniError> {
        let invalid = |reason: String| CniError::Config {
            path: path.to_owned(),
            reason,
        };
        let size = fs::metadata(path)
            .map_err(|e| CniError::io("read network config", path, e))?
            .len();
        if size > MAX_CONF_FILE {
            return Err(invalid(format!("larger than {MAX_CONF_FILE} bytes")));
        }
        let bytes = fs::read(path).map_err(|e| CniError::io("read network config", path, e))?;
        let mut list = if path.extension().is_some_and(|e| e == "conflist") {
            NetworkConfigList::from_conflist_bytes(&bytes)
        } else {
            NetworkConfigList::from_conf_bytes(&bytes)
        }
        .map_err(invalid)?;
        list.source = Some(path.to_owned());
        Ok(list)
    }

    /// The list as a `.conflist` document: what a sandbox records of the network it was
    /// attached with, and parses back into the same list ([`NetworkConfigList::from_conflist_bytes`]).
    #[must_use]
    pub fn to_conflist(&self) -> Value {
        let mut doc = Map::new();
        doc.insert(
            "cniVersion".to_owned(),
            Value::from(self.cni_version.as_str()),
        );
        doc.insert("name".to_owned(), Value::from(self.name.as_str()));
        if self.disable_check {
            doc.insert("disableCheck".to_owned(), Value::Bool(true));
        }
        doc.insert(
            "plugins".to_owned(),
            Value::Array(self.plugins.iter().cloned().map(Value::Object).collect()),
        );
        Value::Object(doc)
    }

    /// Whether the list's version has `prevResult` on `DEL` and a `CHECK` command (0.4.0+).
    #[must_use]
    pub fn has_cached_results(&self) -> bool {
        version_at_least(&self.cni_version, (0, 4, 0))
    }

    /// The list without its `portmap` plugins: what an attachment with no port mappings
    /// needs. Upstream's `portmap` does nothing without `runtimeConfig.portMappings` (`ADD`
    /// prints its `prevResult`, `DEL` and `CHECK` return at once), so leaving it out changes
    /// nothing but a process start per call. For podvisor's own network (the caller
    /// decides): a configured list is run as it is written.
    #[must_use]
    pub fn without_portmap(&self) -> NetworkConfigList {
        NetworkConfigList {
            plugins: self
                .plugins
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) != Some("portmap"))
                .cloned()
                .collect(),
            ..self.clone()
        }
    }
}

fn str_field(obj: &Map<String, Value>, key: &str) -> Result<String, String> {
    match obj.get(key).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Ok(s.to_owned()),
        _ => Err(format!("missing or empty {key:?}")),
    }
}

/// Whether a CNI version string is at least `min` (an empty version is 0.1.0, as libcni).
#[must_use]
pub fn version_at_least(version: &str, min: (u32, u32, u32)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let v = if version.is_empty() {
        (0, 1, 0)
    } else {
        (
            parts.next().unwrap_or(0),
            parts.next().unwrap_or(0),
            parts.next().unwrap_or(0),
        )
    };
    v >= min
}

/// The node's default network, as containerd (go-cni `WithDefaultConf`) picks it: the first,
/// in lexical order, of the `.conf`, `.conflist` and `.json` files in `conf_dir`. `None` when
/// the directory is missing or holds none.
///
/// # Errors
/// The first file is unreadable or invalid (a broken configuration is reported, not skipped).
pub fn load_default_network(conf_dir: &Path) -> Result<Option<NetworkConfigList>, CniError> {
    let entries = match fs::read_dir(conf_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CniError::io("read network config directory", conf_dir, e)),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "conf" || e == "conflist" || e == "json")
                && p.is_file()
        })
        .collect();
    files.sort();
    match files.first() {
        Some(first) => NetworkConfigList::from_file(first).map(Some),
        None => Ok(None),
    }
}

/// The `nat` chain of the default network's masquerade.
pub const MASQ_CHAIN: &str = "PODVISOR-MASQ";

/// Settings of podvisor's default bridge network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultNetwork {
    /// The network's `name` (and host-local's directory under `ipam_data_dir`).
    pub name: String,
    /// The Linux bridge pods are attached to.
    pub bridge: String,
    /// The pod subnet (host-local's range); the bridge takes its first address as gateway.
    pub subnet: String,
    /// host-local's `dataDir`: one file per allocated IP, under `<dir>/<name>/`.
    pub ipam_data_dir: PathBuf,
}

impl DefaultNetwork {
    /// The defaults: network `podvisor`, bridge `pv0`, subnet `10.244.0.0/16`, IPAM data in
    /// host-local's own default, `/var/lib/cni/networks`: the bridge and its subnet are the
    /// machine's, so every state directory on it (two `serve`s, tests) must draw its addresses
    /// from one pool. `_state_dir` is where the conflist itself is written.
    #[must_use]
    pub fn new(_state_dir: &Path) -> DefaultNetwork {
        DefaultNetwork {
            name: "podvisor".to_owned(),
            bridge: "pv0".to_owned(),
            subnet: "10.244.0.0/16".to_owned(),
            ipam_data_dir: PathBuf::from("/var/lib/cni/networks"),
        }
    }

    /// The conflist: `bridge` (gateway on the bridge, hairpin so a pod reaches itself through
    /// its own hostPort) with host-local IPAM and a default route, then `portmap` for
    /// `hostPort`s (capability `portMappings`). Pod traffic leaving the subnet is masqueraded
    /// by one node-wide rule ([`DefaultNetwork::ensure_masquerade`]) rather than the bridge
    /// plugin's `ipMasq`, which adds a chain and three rules per pod on ADD and removes them
    /// on DEL: about half of each call's time here.
    #[must_use]
    pub fn conflist(&self) -> Value {
        json!({
            "cniVersion": "1.0.0",
            "name": self.name,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": true,
                    "ipMasq": false,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{ "subnet": self.subnet }]],
                        "routes": [{ "dst": "0.0.0.0/0" }],
                        "dataDir": self.ipam_data_dir,
                    }
                },
                {
                    "type": "portmap",
                    "capabilities": { "portMappings": true },
                    "snat": true
                }
            ]
        })
    }

    /// The rules of [`DefaultNetwork::ensure_masquerade`], as `iptables -t nat` arguments:
    /// the chain `PODVISOR-MASQ` (what the bridge plugin's per-pod chain does: traffic to
    /// the pod subnet and to multicast untouched, the rest masqueraded), jumped to from
    /// `POSTROUTING` for traffic from the subnet.
    #[must_use]
    pub fn masquerade_rules(&self) -> Vec<(&'static str, Vec<String>)> {
        let comment = format!("podvisor network {}", self.name);
        let rule = |chain: &'static str, args: &[&str]| {
            let mut v: Vec<String> = args.iter().map(|&a| a.to_owned()).collect();
            v.extend(["-m", "comment", "--comment", comment.as_str()].map(str::to_owned));
            (chain, v)
        };
        vec![
            rule(MASQ_CHAIN, &["-d", &self.subnet, "-j", "RETURN"]),
            rule(MASQ_CHAIN, &["-d", "224.0.0.0/4", "-j", "RETURN"]),
            rule(MASQ_CHAIN, &["-j", "MASQUERADE"]),
            rule("POSTROUTING", &["-s", &self.subnet, "-j", MASQ_CHAIN]),
        ]
    }

    /// Installs the node-wide masquerade of the pod subnet ([`DefaultNetwork::masquerade_rules`])
    /// with `iptables` where it is missing. Idempotent: each rule is checked (`-C`) first.
    ///
    /// # Errors
    /// `iptables` is missing or refuses a rule.
    pub fn ensure_masquerade(&self) -> Result<(), CniError> {
        let iptables = |args: &[&str]| {
            std::process::Command::new("iptables")
                .args(["-w", "-t", "nat"])
                .args(args)
                .stdin(std::process::Stdio::null())
                .output()
        };
        let failed = |what: String, detail: String| CniError::Config {
            path: PathBuf::from("iptables"),
            reason: format!("{what}: {detail}"),
        };
        // `-N` fails when the chain exists: that is fine, `-C` below tells the rest.
        let _ = iptables(&["-N", MASQ_CHAIN]);
        for (chain, rule) in self.masquerade_rules() {
            let rule: Vec<&str> = rule.iter().map(String::as_str).collect();
            let present = iptables(&[&["-C", chain][..], &rule].concat())
                .map_err(|e| failed("running iptables".to_owned(), e.to_string()))?;
            if present.status.success() {
                continue;
            }
            let added = iptables(&[&["-A", chain][..], &rule].concat())
                .map_err(|e| failed("running iptables".to_owned(), e.to_string()))?;
            if !added.status.success() {
                return Err(failed(
                    format!("adding the rule {chain} {}", rule.join(" ")),
                    String::from_utf8_lossy(&added.stderr).trim().to_owned(),
                ));
            }
        }
        Ok(())
    }

    /// The conflist as a [`NetworkConfigList`].
    #[must_use]
    pub fn config_list(&self) -> NetworkConfigList {
        let text = self.conflist().to_string();
        NetworkConfigList::from_conflist_bytes(text.as_bytes())
            .expect("the default conflist is valid")
    }

    /// Writes the conflist to `<own_conf_dir>/10-<name>.conflist` (atomically, only when its
    /// content changed) and returns it, read back from there.
    ///
    /// # Errors
    /// The directory or file cannot be written.
    pub fn write(&self, own_conf_dir: &Path) -> Result<NetworkConfigList, CniError> {
        let path = own_conf_dir.join(format!("10-{}.conflist", self.name));
        let mut text = serde_json::to_string_pretty(&self.conflist()).expect("JSON");
        text.push('\n');
        if fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            fs::create_dir_all(own_conf_dir)
                .map_err(|e| CniError::io("create network config directory", own_conf_dir, e))?;
            let tmp = path.with_extension("conflist.tmp");
            fs::write(&tmp, &text).map_err(|e| CniError::io("write network config", &tmp, e))?;
            fs::rename(&tmp, &path).map_err(|e| CniError::io("write network config", &path, e))?;
        }
        NetworkConfigList::from_file(&path)
    }
}

/// Which network new pods are attached to (`--cni-conf-dir`, `--cni-network`).
///
/// On one machine podvisor's own network is the default whatever else is installed: a tool
/// that drops a conflist into `/etc/cni/net.d` (podman's `87-podman-bridge.conflist`, say)
/// changes nothing. A named configuration directory is read as containerd reads its
/// `conf_dir`: what the node's network add-on (a cluster's) writes there is the network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NetworkChoice {
    /// podvisor's own bridge network ([`DefaultNetwork`]), written under podvisor's state.
    #[default]
    Own,
    /// A network configured in `dir`: the one named `name`, else the first config file in
    /// lexical order (go-cni's `WithDefaultConf`).
    ConfDir {
        /// The directory (`/etc/cni/net.d` is containerd's).
        dir: PathBuf,
        /// The network's `name`, when one is asked for.
        name: Option<String>,
    },
}

/// The network `name` in `conf_dir` (libcni's `LoadConfList`: `.conflist` files first, then
/// `.conf` and `.json`, each in lexical order, the first whose `name` matches). `None` when
/// no file there has that name.
///
/// # Errors
/// The directory cannot be read, or a file that could be it is unreadable or invalid.
pub fn load_named_network(
    conf_dir: &Path,
    name: &str,
) -> Result<Option<NetworkConfigList>, CniError> {
    let entries = fs::read_dir(conf_dir)
        .map_err(|e| CniError::io("read network config directory", conf_dir, e))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let with_ext = |exts: &[&str]| {
        files
            .iter()
            .filter(|p| p.extension().is_some_and(|e| exts.iter().any(|x| e == *x)))
            .cloned()
            .collect::<Vec<_>>()
    };
    for file in with_ext(&["conflist"])
        .into_iter()
        .chain(with_ext(&["conf", "json"]))
    {
        let list = NetworkConfigList::from_file(&file)?;
        if list.name == name {
            return Ok(Some(list));
        }
    }
    Ok(None)
}

/// The network new pods get, and whether it is podvisor's own ([`NetworkChoice`]): the own
/// network is written to `own_conf_dir` (podvisor's state, so no other runtime on the host
/// picks it up).
///
/// # Errors
/// The named directory holds no configuration (or none of that name), a configuration is
/// invalid, or the own network cannot be written.
pub fn resolve_network(
    choice: &NetworkChoice,
    own_conf_dir: &Path,
    default: &DefaultNetwork,
) -> Result<(NetworkConfigList, bool), CniError> {
    match choice {
        NetworkChoice::Own => Ok((default.write(own_conf_dir)?, true)),
        NetworkChoice::ConfDir { dir, name } => {
            let found = match name {
                Some(name) => load_named_network(dir, name)?,
                None => load_default_network(dir)?,
            };
            let list = found.ok_or_else(|| CniError::Config {
                path: dir.clone(),
                reason: match name {
                    Some(name) => format!(
                        "no network named {name:?} is configured there (--cni-network names \
                         the `name` of a config file in --cni-conf-dir)"
                    ),
                    None => "no network is configured there (a .conf, .conflist or .json \
                             file; drop --cni-conf-dir for podvisor's own network)"
                        .to_owned(),
                },
            })?;
            // The own network named explicitly is still podvisor's own (its pool, its
            // masquerade).
            let own = list.to_conflist() == default.config_list().to_conflist();
            Ok((list, own))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_numerically() {
        assert!(version_at_least("1.0.0", (0, 4, 0)));
        assert!(version_at_least("0.4.0", (0, 4, 0)));
        assert!(!version_at_least("0.3.1", (0, 4, 0)));
        assert!(!version_at_least("", (0, 4, 0)));
        assert!(version_at_least("0.10.0", (0, 4, 0)));
    }

    #[test]
    fn a_conflist_keeps_each_plugin_as_written() {
        let list = NetworkConfigList::from_conflist_bytes(
            br#"{"cniVersion":"0.4.0","name":"n","disableCheck":true,
                "plugins":[{"type":"bridge","bridge":"b0"},{"type":"portmap","capabilities":{"portMappings":true}}]}"#,
        )
        .unwrap();
        assert_eq!(list.name, "n");
        assert_eq!(list.cni_version, "0.4.0");
        assert!(list.disable_check);
        assert_eq!(list.plugins.len(), 2);
        assert_eq!(list.plugins[0]["bridge"], "b0");
        assert!(list.has_cached_results());
    }

    #[test]
    fn invalid_lists_say_what_is_missing() {
        let err = NetworkConfigList::from_conflist_bytes(br#"{"name":"n"}"#).unwrap_err();
        assert!(err.contains("no 'plugins' key"), "{err}");
        let err =
            NetworkConfigList::from_conflist_bytes(br#"{"name":"n","plugins":[]}"#).unwrap_err();
        assert!(err.contains("no plugins"), "{err}");
        let err =
            NetworkConfigList::from_conflist_bytes(br#"{"name":"n","plugins":[{}]}"#).unwrap_err();
        assert!(err.contains("\"type\""), "{err}");
        let err = NetworkConfigList::from_conf_bytes(br#"{"name":"n"}"#).unwrap_err();
        assert_eq!(err, "network type not found");
    }

    #[test]
    fn a_list_parses_back_from_its_conflist_document() {
        let list = NetworkConfigList::from_conflist_bytes(
            br#"{"cniVersion":"0.4.0","name":"n","disableCheck":true,
                "plugins":[{"type":"bridge","bridge":"b0","ipam":{"type":"host-local"}},{"type":"portmap"}]}"#,
        )
        .unwrap();
        let text = list.to_conflist().to_string();
        let back = NetworkConfigList::from_conflist_bytes(text.as_bytes()).unwrap();
        assert_eq!(back, list);
    }

    #[test]
    fn a_single_conf_becomes_a_list_of_one() {
        let list = NetworkConfigList::from_conf_bytes(
            br#"{"cniVersion":"0.3.1","name":"one","type":"bridge"}"#,
        )
        .unwrap();
        assert_eq!(list.plugins.len(), 1);
        assert!(!list.has_cached_results());
    }

    #[test]
    fn without_portmap_keeps_the_rest_of_the_chain_in_order() {
        let list = NetworkConfigList::from_conflist_bytes(
            br#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"},{"type":"portmap"},{"type":"tuning"}]}"#,
        )
        .unwrap();
        let trimmed = list.without_portmap();
        let types: Vec<&str> = trimmed
            .plugins
            .iter()
            .filter_map(|p| p.get("type").and_then(Value::as_str))
            .collect();
        assert_eq!(types, ["bridge", "tuning"]);
        assert_eq!(
            (trimmed.name.as_str(), trimmed.cni_version.as_str()),
            ("n", "1.0.0")
        );
    }

    #[test]
    fn the_default_network_is_a_bridge_with_host_local_and_portmap() {
        let net = DefaultNetwork::new(Path::new("/var/lib/podvisor"));
        let list = net.config_list();
        assert_eq!(list.name, "podvisor");
        assert_eq!(list.cni_version, "1.0.0");
        let types: Vec<_> = list.plugins.iter().map(|p| p["type"].clone()).collect();
        assert_eq!(types, ["bridge", "portmap"]);
        assert_eq!(list.plugins[0]["bridge"], "pv0");
        assert_eq!(list.plugins[0]["isGateway"], true);
        assert_eq!(list.plugins[0]["ipMasq"], false, "masquerade is node-wide");
        assert_eq!(list.plugins[0]["ipam"]["type"], "host-local");
        assert_eq!(
            list.plugins[0]["ipam"]["ranges"][0][0]["subnet"],
            "10.244.0.0/16"
        );
        // One pool for the machine's bridge, whatever the state directory.
        assert_eq!(list.plugins[0]["ipam"]["dataDir"], "/var/lib/cni/networks");
        assert_eq!(list.plugins[1]["capabilities"]["portMappings"], true);
    }

    #[test]
    fn the_first_config_file_in_lexical_order_is_the_default_and_others_are_ignored() {
        let dir = std::env::temp_dir().join(format!("pv-cni-conf-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(load_default_network(&dir).unwrap(), None);
        fs::write(dir.join("README"), "not a config").unwrap();
        fs::write(
            dir.join("20-b.conflist"),
            r#"{"cniVersion":"1.0.0","name":"b","plugins":[{"type":"bridge"}]}"#,
        )
        .unwrap();
        fs::write(
            dir.join("10-a.conf"),
            r#"{"cniVersion":"1.0.0","name":"a","type":"ptp"}"#,
        )
        .unwrap();
        let list = load_default_network(&dir).unwrap().unwrap();
        assert_eq!(list.name, "a");
        assert_eq!(
            list.source.as_deref(),
            Some(dir.join("10-a.conf").as_path())
        );

        // podvisor's own network unless a directory is named: whatever that directory holds.
        let own = dir.join("own");
        let net = DefaultNetwork::new(&dir);
        let (list, is_own) = resolve_network(&NetworkChoice::Own, &own, &net).unwrap();
        assert_eq!((list.name.as_str(), is_own), ("podvisor", true));
        assert!(own.join("10-podvisor.conflist").is_file());
        // A named directory: its first file, or the network of the name asked for.
        let named = |name: Option<&str>| NetworkChoice::ConfDir {
            dir: dir.clone(),
            name: name.map(str::to_owned),
        };
        let (list, is_own) = resolve_network(&named(None), &own, &net).unwrap();
        assert_eq!((list.name.as_str(), is_own), ("a", false));
        let (list, _) = resolve_network(&named(Some("b")), &own, &net).unwrap();
        assert_eq!(list.name, "b");
        let err = resolve_network(&named(Some("c")), &own, &net).unwrap_err();
        assert!(err.to_string().contains("no network named \"c\""), "{err}");
        // podvisor's own conflist in a named directory is still its own network.
        let (list, is_own) = resolve_network(
            &NetworkChoice::ConfDir {
                dir: own.clone(),
                name: None,
            },
            &own,
            &net,
        )
        .unwrap();
        assert_eq!((list.name.as_str(), is_own), ("podvisor", true));
        // An empty named directory is an error naming the fix, not a silent fallback.
        let empty = dir.join("empty");
        fs::create_dir_all(&empty).unwrap();
        let err = resolve_network(
            &NetworkChoice::ConfDir {
                dir: empty,
                name: None,
            },
            &own,
            &net,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("no network is configured"),
            "{err}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
