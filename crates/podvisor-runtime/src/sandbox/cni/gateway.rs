//! The host's own address on a pod network, known from the configuration alone (before any
//! pod is attached): where pods reach the node, and so where `serve`'s API listens for them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::{Map, Value};

use super::NetworkConfigList;

/// The address the host holds on `list`'s network: the gateway the `bridge` plugin puts on
/// its bridge (`isGateway` or `isDefaultGateway`) with `host-local` addresses, which is the
/// first range's `gateway`, else the first address of its subnet (host-local's
/// `Range.Canonicalize`, the bridge plugin's `calcGatewayIP`). `None` for every other set-up:
/// the host's address there cannot be told before a pod is attached, if it has one.
#[must_use]
pub fn host_address(list: &NetworkConfigList) -> Option<IpAddr> {
    let bridge = list
        .plugins
        .iter()
        .find(|p| p.get("type").and_then(Value::as_str) == Some("bridge"))?;
    let flag = |name: &str| bridge.get(name).and_then(Value::as_bool) == Some(true);
    if !flag("isGateway") && !flag("isDefaultGateway") {
        return None;
    }
    let ipam = bridge.get("ipam")?.as_object()?;
    if ipam.get("type").and_then(Value::as_str) != Some("host-local") {
        return None;
    }
    // `ranges` (a list of range sets), else the older single range at the top of `ipam`.
    let range = match ipam.get("ranges") {
        Some(sets) => sets.get(0)?.get(0)?.as_object()?,
        None => ipam,
    };
    range_gateway(range)
}

fn range_gateway(range: &Map<String, Value>) -> Option<IpAddr> {
    if let Some(gateway) = range.get("gateway").and_then(Value::as_str) {
        return gateway.parse().ok();
    }
    let (ip, prefix) = range.get("subnet")?.as_str()?.split_once('/')?;
    let (ip, prefix): (IpAddr, u32) = (ip.parse().ok()?, prefix.parse().ok()?);
    Some(match ip {
        IpAddr::V4(ip) if prefix < 32 => {
            let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from((u32::from(ip) & mask).wrapping_add(1)))
        }
        IpAddr::V6(ip) if prefix < 128 => {
            let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from((u128::from(ip) & mask).wrapping_add(1)))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str) -> NetworkConfigList {
        NetworkConfigList::from_conflist_bytes(text.as_bytes()).unwrap()
    }

    #[test]
    fn podvisors_own_network_has_the_subnets_first_address() {
        let net = super::super::DefaultNetwork::new(std::path::Path::new("/s"));
        assert_eq!(
            host_address(&net.config_list()),
            Some("10.244.0.1".parse().unwrap())
        );
    }

    #[test]
    fn a_given_gateway_a_legacy_range_and_an_unaligned_subnet() {
        let with = |ipam: &str, gw: &str| {
            format!(
                r#"{{"cniVersion":"1.0.0","name":"n","plugins":[{{"type":"bridge","bridge":"b",
                    "{gw}":true,"ipam":{ipam}}},{{"type":"portmap"}}]}}"#
            )
        };
        let cases = [
            (
                r#"{"type":"host-local","ranges":[[{"subnet":"10.88.0.0/16","gateway":"10.88.0.254"}]]}"#,
                "isGateway",
                Some("10.88.0.254"),
            ),
            (
                r#"{"type":"host-local","subnet":"172.30.5.9/24"}"#,
                "isDefaultGateway",
                Some("172.30.5.1"),
            ),
            (
                r#"{"type":"host-local","ranges":[[{"subnet":"fd00:10::/64"}]]}"#,
                "isGateway",
                Some("fd00:10::1"),
            ),
            // No gateway on the bridge, or addresses host-local does not hand out.
            (
                r#"{"type":"host-local","subnet":"10.1.0.0/16"}"#,
                "hairpinMode",
                None,
            ),
            (r#"{"type":"dhcp"}"#, "isGateway", None),
            (
                r#"{"type":"host-local","subnet":"10.1.0.1/32"}"#,
                "isGateway",
                None,
            ),
        ];
        for (ipam, flag, want) in cases {
            let got = host_address(&list(&with(ipam, flag)));
            assert_eq!(got, want.map(|w| w.parse().unwrap()), "{ipam} {flag}");
        }
        let ptp = list(
            r#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"ptp","ipam":{"type":"host-local","subnet":"10.1.0.0/16"}}]}"#,
        );
        assert_eq!(host_address(&ptp), None);
    }
}
