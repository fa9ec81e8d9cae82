//! What plugins print: results (CNI 0.4.0 and 1.0.0 `ips`/`interfaces`/`routes`/`dns`) and
//! error objects (`{"code":..,"msg":..,"details":..}`).

use std::net::IpAddr;

use serde::Deserialize;
use serde_json::Value;

/// An interface a plugin made or configured.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Interface {
    /// The interface name (`eth0` inside the pod, `vethXXXX` and the bridge on the host).
    pub name: String,
    /// Its hardware address, when it has one.
    #[serde(default)]
    pub mac: String,
    /// The network namespace path for an interface inside the pod; empty on the host.
    #[serde(default)]
    pub sandbox: String,
}

/// An address a plugin assigned.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IpConfig {
    /// Index into the result's `interfaces` of the interface holding the address.
    #[serde(default)]
    pub interface: Option<usize>,
    /// The address with its prefix length, as the plugin wrote it (`10.244.0.5/16`).
    pub address: String,
    /// The gateway, when the plugin gave one.
    #[serde(default)]
    pub gateway: Option<IpAddr>,
}

impl IpConfig {
    /// The address without its prefix length.
    #[must_use]
    pub fn ip(&self) -> Option<IpAddr> {
        self.address.split('/').next()?.parse().ok()
    }

    /// The prefix length.
    #[must_use]
    pub fn prefix_len(&self) -> Option<u8> {
        self.address.split('/').nth(1)?.parse().ok()
    }
}

/// A route a plugin installed in the pod.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Route {
    /// Destination, with prefix length.
    pub dst: String,
    /// Next hop, when not the default.
    #[serde(default)]
    pub gw: Option<IpAddr>,
}

/// DNS settings a plugin suggests (the kubelet does not use them for pods).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Dns {
    /// `nameservers`.
    #[serde(default)]
    pub nameservers: Vec<String>,
    /// `domain`.
    #[serde(default)]
    pub domain: String,
    /// `search`.
    #[serde(default)]
    pub search: Vec<String>,
    /// `options`.
    #[serde(default)]
    pub options: Vec<String>,
}

/// A plugin's (or a whole list's) result. `raw` is what the plugin printed: it is what the
/// next plugin gets as `prevResult`, so nothing a newer version adds is lost on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct CniResult {
    /// `cniVersion` of the result.
    pub cni_version: String,
    /// `interfaces`.
    pub interfaces: Vec<Interface>,
    /// `ips`.
    pub ips: Vec<IpConfig>,
    /// `routes`.
    pub routes: Vec<Route>,
    /// `dns`.
    pub dns: Dns,
    /// The result as printed.
    pub raw: Value,
}

#[derive(Deserialize)]
struct Wire {
    #[serde(rename = "cniVersion", default)]
    cni_version: String,
    #[serde(default)]
    interfaces: Vec<Interface>,
    #[serde(default)]
    ips: Vec<IpConfig>,
    #[serde(default)]
    routes: Vec<Route>,
    #[serde(default)]
    dns: Dns,
}

impl CniResult {
    /// Parses a result document.
    ///
    /// # Errors
    /// Not JSON, or a field of the wrong shape.
    pub fn parse(bytes: &[u8]) -> Result<CniResult, serde_json::Error> {
        let raw: Value = serde_json::from_slice(bytes)?;
        CniResult::from_value(raw)
    }

    /// Reads a result from a JSON value.
    ///
    /// # Errors
    /// A field of the wrong shape.
    pub fn from_value(raw: Value) -> Result<CniResult, serde_json::Error> {
        let w: Wire = serde_json::from_value(raw.clone())?;
        Ok(CniResult {
            cni_version: w.cni_version,
            interfaces: w.interfaces,
            ips: w.ips,
            routes: w.routes,
            dns: w.dns,
            raw,
        })
    }

    /// The pod's addresses: those on an interface inside a sandbox (or on no named
    /// interface, for plugins that do not say), in the order given.
    #[must_use]
    pub fn pod_ips(&self) -> Vec<IpAddr> {
        self.ips
            .iter()
            .filter(|ip| {
                ip.interface
                    .and_then(|i| self.interfaces.get(i))
                    .is_none_or(|iface| !iface.sandbox.is_empty())
            })
            .filter_map(IpConfig::ip)
            .collect()
    }
}

/// A plugin's error object (CNI spec "Error"): well-known codes 1–11 and 50+ for plugins'
/// own, a message and details.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PluginError {
    /// `code`.
    pub code: u32,
    /// `msg`.
    #[serde(default)]
    pub msg: String,
    /// `details`.
    #[serde(default)]
    pub details: String,
}

impl PluginError {
    /// Parses an error object, when `bytes` holds one with a `code`.
    #[must_use]
    pub fn parse(bytes: &[u8]) -> Option<PluginError> {
        serde_json::from_slice(bytes).ok()
    }

    /// The spec's name of a well-known code.
    #[must_use]
    pub fn code_name(&self) -> Option<&'static str> {
        Some(match self.code {
            1 => "incompatible CNI version",
            2 => "unsupported field in network configuration",
            3 => "container unknown or does not exist",
            4 => "invalid necessary environment variables",
            5 => "I/O failure",
            6 => "failed to decode content",
            7 => "invalid network config",
            11 => "try again later",
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_1_0_0_bridge_result_gives_the_pod_ip_on_the_sandbox_interface() {
        let r = CniResult::parse(
            br#"{"cniVersion":"1.0.0",
                "interfaces":[{"name":"pv0","mac":"aa:bb:cc:dd:ee:01"},
                              {"name":"veth1234","mac":"aa:bb:cc:dd:ee:02"},
                              {"name":"eth0","mac":"aa:bb:cc:dd:ee:03","sandbox":"/s/pods/u/ns/net"}],
                "ips":[{"interface":2,"address":"10.244.0.7/16","gateway":"10.244.0.1"}],
                "routes":[{"dst":"0.0.0.0/0"}],
                "dns":{}}"#,
        )
        .unwrap();
        assert_eq!(r.interfaces.len(), 3);
        assert_eq!(r.ips[0].prefix_len(), Some(16));
        assert_eq!(r.ips[0].gateway, Some("10.244.0.1".parse().unwrap()));
        assert_eq!(r.pod_ips(), vec!["10.244.0.7".parse::<IpAddr>().unwrap()]);
        assert_eq!(r.routes[0].dst, "0.0.0.0/0");
        assert_eq!(r.raw["cniVersion"], "1.0.0");
    }

    #[test]
    fn a_0_4_0_result_with_versions_and_an_address_on_the_host_side() {
        let r = CniResult::parse(
            br#"{"cniVersion":"0.4.0",
                "interfaces":[{"name":"br0"},{"name":"eth0","sandbox":"/n"}],
                "ips":[{"version":"4","interface":1,"address":"10.1.0.2/24"},
                       {"version":"4","interface":0,"address":"10.1.0.1/24"},
                       {"version":"6","address":"fd00::2/64"}]}"#,
        )
        .unwrap();
        assert_eq!(
            r.pod_ips(),
            vec![
                "10.1.0.2".parse::<IpAddr>().unwrap(),
                "fd00::2".parse().unwrap()
            ]
        );
    }

    #[test]
    fn error_objects_carry_code_message_and_details() {
        let e = PluginError::parse(
            br#"{"cniVersion":"1.0.0","code":7,"msg":"invalid config","details":"no subnet"}"#,
        )
        .unwrap();
        assert_eq!(e.code, 7);
        assert_eq!(e.msg, "invalid config");
        assert_eq!(e.details, "no subnet");
        assert_eq!(e.code_name(), Some("invalid network config"));
        assert_eq!(PluginError::parse(b"panic: oops"), None);
        assert_eq!(PluginError::parse(br#"{"msg":"no code"}"#), None);
    }
}
