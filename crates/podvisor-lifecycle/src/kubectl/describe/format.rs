//! Formatting helpers of `kubectl describe pod`: probes (`DescribeProbe` and Go's URL
//! printing), env var values kubectl resolves, QoS when the status has none, label selectors,
//! quantities and Go-style quoting.

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, Probe};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::s;

/// `DescribeProbe`: `http-get http://:8080/healthz delay=0s timeout=1s period=10s #success=1
/// #failure=3`, `exec [cmd arg]`, `tcp-socket :8080`, `grpc <pod>:9000 service`.
pub(super) fn describe_probe(probe: &Probe) -> String {
    let attrs = format!(
        "delay={}s timeout={}s period={}s #success={} #failure={}",
        probe.initial_delay_seconds.unwrap_or(0),
        probe.timeout_seconds.unwrap_or(0),
        probe.period_seconds.unwrap_or(0),
        probe.success_threshold.unwrap_or(0),
        probe.failure_threshold.unwrap_or(0),
    );
    if let Some(exec) = &probe.exec {
        let command = exec.command.as_deref().unwrap_or_default().join(" ");
        format!("exec [{command}] {attrs}")
    } else if let Some(http) = &probe.http_get {
        let scheme = s(http.scheme.as_ref()).to_lowercase();
        let port = int_or_string(&http.port);
        let host = s(http.host.as_ref());
        let host = if port.is_empty() {
            host.to_owned()
        } else if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        format!(
            "http-get {} {attrs}",
            url_string(&scheme, &host, s(http.path.as_ref()))
        )
    } else if let Some(tcp) = &probe.tcp_socket {
        format!(
            "tcp-socket {}:{} {attrs}",
            s(tcp.host.as_ref()),
            int_or_string(&tcp.port)
        )
    } else if let Some(grpc) = &probe.grpc {
        format!(
            "grpc <pod>:{} {} {attrs}",
            grpc.port,
            s(grpc.service.as_ref())
        )
    } else {
        format!("unknown {attrs}")
    }
}

/// Go's `url.URL{Scheme, Host, Path}.String()` for the parts a probe has.
fn url_string(scheme: &str, host: &str, path: &str) -> String {
    let mut out = String::new();
    if !scheme.is_empty() {
        out.push_str(scheme);
        out.push(':');
    }
    if !scheme.is_empty() || !host.is_empty() {
        if !host.is_empty() || !path.is_empty() {
            out.push_str("//");
        }
        out.push_str(&escape(host, |c| {
            c.is_ascii_alphanumeric() || "-_.~!$&'()*+,;=:[]<>\"".contains(c)
        }));
    }
    let path = if path == "*" {
        path.to_owned()
    } else {
        escape(path, |c| {
            c.is_ascii_alphanumeric() || "-_.~$&+,/:;=@".contains(c)
        })
    };
    if !path.is_empty() && !path.starts_with('/') && !host.is_empty() {
        out.push('/');
    }
    out.push_str(&path);
    out
}

/// Percent-encodes every byte whose character `keep` rejects (uppercase hex, as Go does).
fn escape(text: &str, keep: impl Fn(char) -> bool) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii() && keep(c) {
            out.push(c);
        } else {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

fn int_or_string(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// What kubectl can resolve for a `fieldRef` env var. Its scheme has no field-label
/// conversions for pods, so only `metadata.name` and `metadata.namespace` get a value; every
/// other path shows empty.
pub(super) struct EnvContext {
    name: String,
    namespace: String,
}

impl EnvContext {
    pub(super) fn of(pod: &Pod) -> EnvContext {
        EnvContext {
            name: s(pod.metadata.name.as_ref()).to_owned(),
            namespace: s(pod.metadata.namespace.as_ref()).to_owned(),
        }
    }

    pub(super) fn field(&self, path: &str) -> &str {
        match path {
            "metadata.name" => &self.name,
            "metadata.namespace" => &self.namespace,
            _ => "",
        }
    }
}

/// `ExtractContainerResourceValue`: the value a `resourceFieldRef` would get, rounded up in
/// units of the divisor; `None` for resources kubectl does not support.
pub(super) fn container_resource_value(
    c: &Container,
    resource: &str,
    divisor: &Option<Quantity>,
) -> Option<String> {
    use podvisor_api::quantity::Quantity as Q;
    let divisor = divisor
        .as_ref()
        .and_then(|d| Q::parse(&d.0))
        .filter(|d| !d.is_zero())
        .unwrap_or_else(|| Q::from_units(1));
    let (list, name) = resource.split_once('.')?;
    let resources = c.resources.as_ref();
    let list = match list {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => return None,
    };
    let value = list
        .and_then(|l| l.get(name))
        .and_then(|q| Q::parse(&q.0))
        .unwrap_or_default();
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let ceil_div = |a: i64, b: i64| ((a as f64) / (b as f64)).ceil() as i64;
    match name {
        "cpu" => Some(ceil_div(value.milli_value(), divisor.milli_value()).to_string()),
        "memory" | "ephemeral-storage" => {
            Some(ceil_div(value.value(), divisor.value()).to_string())
        }
        _ => None,
    }
}

/// `metav1.FormatLabelSelector`: requirements sorted by key, `<none>` when empty.
pub(super) fn format_label_selector(selector: &LabelSelector) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    for (k, v) in selector.match_labels.iter().flatten() {
        reqs.push((k.clone(), format!("{k}={v}")));
    }
    for e in selector.match_expressions.iter().flatten() {
        let mut values = e.values.clone().unwrap_or_default();
        values.sort();
        let text = match e.operator.as_str() {
            "In" => format!("{} in ({})", e.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", e.key, values.join(",")),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => format!("{} {other} ({})", e.key, values.join(",")),
        };
        reqs.push((e.key.clone(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    let text = reqs
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",");
    if text.is_empty() {
        "<none>".to_owned()
    } else {
        text
    }
}

/// The container part of an ephemeral container (the fields kubectl describes).
pub(super) fn ephemeral_common(e: &EphemeralContainer) -> Container {
    Container {
        name: e.name.clone(),
        image: e.image.clone(),
        command: e.command.clone(),
        args: e.args.clone(),
        ports: e.ports.clone(),
        env: e.env.clone(),
        env_from: e.env_from.clone(),
        resources: e.resources.clone(),
        liveness_probe: e.liveness_probe.clone(),
        readiness_probe: e.readiness_probe.clone(),
        startup_probe: e.startup_probe.clone(),
        volume_mounts: e.volume_mounts.clone(),
        volume_devices: e.volume_devices.clone(),
        security_context: e.security_context.clone(),
        ..Container::default()
    }
}

/// `Quantity.String()`: the canonical form (`0.5` → `500m`, `1024Mi` → `1Gi`).
pub(super) fn canonical(q: &Quantity) -> String {
    podvisor_api::quantity::Quantity::parse(&q.0).map_or_else(|| q.0.clone(), |p| p.canonical())
}

pub(super) use podvisor_api::gotext::quote as go_quote;

pub(super) fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The attributes of a probe whose numbers were never defaulted.
    const ZEROS: &str = "delay=0s timeout=0s period=0s #success=0 #failure=0";

    fn probe(v: serde_json::Value) -> Probe {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn probe_lines() {
        let http = probe(json!({"httpGet": {"port": "http", "host": "::1",
                                            "path": "/a b?x", "scheme": "HTTPS"}}));
        assert_eq!(
            describe_probe(&http),
            format!("http-get https://[::1]:http/a%20b%3Fx {ZEROS}")
        );
        let grpc = probe(json!({"grpc": {"port": 9000, "service": "health"}}));
        assert_eq!(
            describe_probe(&grpc),
            format!("grpc <pod>:9000 health {ZEROS}")
        );
        let tcp = probe(json!({"tcpSocket": {"port": 80, "host": "db"}}));
        assert_eq!(describe_probe(&tcp), format!("tcp-socket db:80 {ZEROS}"));
        let exec = probe(json!({"exec": {"command": ["cat", "/tmp/x"]}, "periodSeconds": 3}));
        assert_eq!(
            describe_probe(&exec),
            "exec [cat /tmp/x] delay=0s timeout=0s period=3s #success=0 #failure=0"
        );
    }

    #[test]
    fn resource_field_values_round_up_in_divisor_units() {
        let c: Container = serde_json::from_value(json!({"name": "a", "resources": {
            "limits": {"cpu": "250m", "memory": "64Mi"}}}))
        .unwrap();
        let mi = Some(Quantity("1Mi".to_owned()));
        assert_eq!(
            container_resource_value(&c, "limits.cpu", &None).as_deref(),
            Some("1")
        );
        assert_eq!(
            container_resource_value(&c, "limits.memory", &mi).as_deref(),
            Some("64")
        );
        assert_eq!(
            container_resource_value(&c, "requests.cpu", &None).as_deref(),
            Some("0")
        );
        assert_eq!(container_resource_value(&c, "limits.gpu", &None), None);
    }
}
