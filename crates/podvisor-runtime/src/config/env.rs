//! The container environment (`makeEnvironmentVariables`): `env` and `envFrom`, the downward
//! API (`fieldRef`, `resourceFieldRef`), and the runtime's `PATH`/`HOSTNAME` defaults.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector};

use super::objects::not_found;
use super::quantity::Quantity;
use super::{BuildOptions, DEFAULT_IP, DEFAULT_PATH, NodeAllocatable, expand};

/// The environment the kubelet gives a container (`makeEnvironmentVariables`): `envFrom`
/// sources first, then `env` in order, each `value` expanded against the variables defined
/// before it. Names appear once, at their first position, with their last value.
pub(super) fn make_environment(
    pod: &Pod,
    container: &Container,
    opts: &BuildOptions,
) -> Result<Vec<(String, String)>, String> {
    let mut env = Env::default();
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let objects = &opts.objects;
    // `envFrom` first, every key (with its prefix) as it is: 1.35's kubelet skips no name
    // (`RelaxedEnvironmentVariableValidation`), and `env` below overrides.
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or_default();
        if let Some(cm) = &from.config_map_ref {
            match objects.config_maps.get(&cm.name) {
                Some(data) => {
                    for (k, v) in &data.data {
                        env.set(&format!("{prefix}{k}"), v.clone());
                    }
                }
                None if cm.optional.unwrap_or(false) => {}
                None => return Err(not_found("configmap", &cm.name)),
            }
        } else if let Some(secret) = &from.secret_ref {
            match objects.secrets.get(&secret.name) {
                Some(data) => {
                    for (k, v) in &data.data {
                        env.set(
                            &format!("{prefix}{k}"),
                            String::from_utf8_lossy(v).into_owned(),
                        );
                    }
                }
                None if secret.optional.unwrap_or(false) => {}
                None => return Err(not_found("secret", &secret.name)),
            }
        }
    }
    // The master service's variables (`FromServices`): `$(VAR)` references in `env` may name
    // them (the kubelet's `MappingFuncFor(tmpEnv, serviceEnv)`), and they are added below.
    let service_env = objects
        .api_service
        .as_ref()
        .map(|(host, port)| kubernetes_service_env(host, *port))
        .unwrap_or_default();
    for var in container.env.iter().flatten() {
        let value = var.value.as_deref().unwrap_or_default();
        let runtime_value = if !value.is_empty() {
            expand(value, |name| {
                env.get(name).map(str::to_owned).or_else(|| {
                    service_env
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                })
            })
        } else if let Some(from) = &var.value_from {
            if let Some(field) = &from.field_ref {
                field_ref_value(pod, field.api_version.as_deref(), &field.field_path)?
            } else if let Some(resource) = &from.resource_field_ref {
                resource_field_value(pod, container, resource, &opts.node_allocatable)?
            } else if let Some(cm) = &from.config_map_key_ref {
                let optional = cm.optional.unwrap_or(false);
                let Some(data) = objects.config_maps.get(&cm.name) else {
                    if optional {
                        continue;
                    }
                    return Err(not_found("configmap", &cm.name));
                };
                match data.data.get(&cm.key) {
                    Some(v) => v.clone(),
                    None if optional => continue,
                    None => {
                        return Err(format!(
                            "couldn't find key {} in ConfigMap {ns}/{}",
                            cm.key, cm.name
                        ));
                    }
                }
            } else if let Some(secret) = &from.secret_key_ref {
                let optional = secret.optional.unwrap_or(false);
                let Some(data) = objects.secrets.get(&secret.name) else {
                    if optional {
                        continue;
                    }
                    return Err(not_found("secret", &secret.name));
                };
                match data.data.get(&secret.key) {
                    Some(v) => String::from_utf8_lossy(v).into_owned(),
                    None if optional => continue,
                    None => {
                        return Err(format!(
                            "couldn't find key {} in Secret {ns}/{}",
                            secret.key, secret.name
                        ));
                    }
                }
            } else if let Some(file) = &from.file_key_ref {
                if file.optional.unwrap_or(false) {
                    continue;
                }
                return Err(format!(
                    "environment variable {:?}: fileKeyRef is not supported by the process \
                     runtime yet",
                    var.name
                ));
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        env.set(&var.name, runtime_value);
    }
    // The master service's variables, whatever `enableServiceLinks` says; the container's own
    // definitions win.
    for (name, value) in service_env {
        if env.get(&name).is_none() {
            env.set(&name, value);
        }
    }
    Ok(env.vars)
}

/// `FromServices` for the `kubernetes` Service (one port named `https`, TCP).
fn kubernetes_service_env(host: &str, port: u16) -> Vec<(String, String)> {
    let url = format!("tcp://{host}:{port}");
    vec![
        ("KUBERNETES_SERVICE_HOST".to_owned(), host.to_owned()),
        ("KUBERNETES_SERVICE_PORT".to_owned(), port.to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".to_owned(), port.to_string()),
        ("KUBERNETES_PORT".to_owned(), url.clone()),
        (format!("KUBERNETES_PORT_{port}_TCP"), url),
        (
            format!("KUBERNETES_PORT_{port}_TCP_PROTO"),
            "tcp".to_owned(),
        ),
        (format!("KUBERNETES_PORT_{port}_TCP_PORT"), port.to_string()),
        (format!("KUBERNETES_PORT_{port}_TCP_ADDR"), host.to_owned()),
    ]
}

/// An ordered environment: first position wins, last value wins.
#[derive(Default)]
struct Env {
    vars: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl Env {
    fn get(&self, name: &str) -> Option<&str> {
        self.index.get(name).map(|i| self.vars[*i].1.as_str())
    }

    fn set(&mut self, name: &str, value: String) {
        match self.index.get(name) {
            Some(i) => self.vars[*i].1 = value,
            None => {
                self.index.insert(name.to_owned(), self.vars.len());
                self.vars.push((name.to_owned(), value));
            }
        }
    }
}

/// See [`super::merge_environment`].
pub(super) fn merge(
    base: Vec<(String, String)>,
    overrides: impl IntoIterator<Item = (String, String)>,
) -> Vec<(String, String)> {
    let mut env = Env::default();
    for (name, value) in base.into_iter().chain(overrides) {
        env.set(&name, value);
    }
    env.vars
}

/// Adds `PATH` and `HOSTNAME` in front unless the container defines them, as containerd's
/// default spec and CRI plugin do (the process runtime shares the host's UTS namespace, whose
/// hostname is the node name).
pub(super) fn with_runtime_defaults(
    pod: &Pod,
    tty: bool,
    env: Vec<(String, String)>,
) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(env.len() + 3);
    let defined = |name: &str| env.iter().any(|(k, _)| k == name);
    if !defined("PATH") {
        out.push(("PATH".to_owned(), DEFAULT_PATH.to_owned()));
    }
    // containerd's `WithTTY`: a container on a terminal gets `TERM=xterm` unless it sets one.
    if tty && !defined("TERM") {
        out.push(("TERM".to_owned(), "xterm".to_owned()));
    }
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default();
    if !node_name.is_empty() && !defined("HOSTNAME") {
        out.push(("HOSTNAME".to_owned(), node_name.to_owned()));
    }
    out.extend(env);
    out
}

/// The downward API for environment variables (`podFieldSelectorRuntimeValue`).
pub(super) fn field_ref_value(
    pod: &Pod,
    api_version: Option<&str>,
    path: &str,
) -> Result<String, String> {
    let version = api_version.unwrap_or("v1");
    if version != "v1" {
        return Err(format!("unsupported pod version: {version}"));
    }
    if let Some((field, key)) = split_subscript(path) {
        let map = match field {
            "metadata.annotations" => &pod.metadata.annotations,
            "metadata.labels" => &pod.metadata.labels,
            _ => return Err(format!("field label does not support subscript: {path}")),
        };
        return Ok(map
            .as_ref()
            .and_then(|m| m.get(key))
            .cloned()
            .unwrap_or_default());
    }
    let spec = pod.spec.as_ref();
    Ok(match path {
        "metadata.name" => pod.metadata.name.clone().unwrap_or_default(),
        "metadata.namespace" => pod.metadata.namespace.clone().unwrap_or_default(),
        "metadata.uid" => pod.metadata.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(pod.metadata.labels.as_ref()),
        "metadata.annotations" => format_map(pod.metadata.annotations.as_ref()),
        "spec.nodeName" | "spec.host" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "spec.terminationGracePeriodSeconds" => spec
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30)
            .to_string(),
        "status.podIP" => pod_ips(pod).swap_remove(0),
        "status.podIPs" => pod_ips(pod).join(","),
        "status.hostIP" => host_ips(pod).swap_remove(0),
        "status.hostIPs" => host_ips(pod).join(","),
        // Accepted by the label conversion but not extractable, as in the kubelet.
        "spec.restartPolicy" | "spec.schedulerName" | "status.phase" => {
            return Err(format!("unsupported fieldPath: {path}"));
        }
        _ => return Err(format!("field label not supported: {path}")),
    })
}

/// `fieldpath.SplitMaybeSubscriptedPath`: `metadata.labels['key']` → (`metadata.labels`, `key`).
fn split_subscript(path: &str) -> Option<(&str, &str)> {
    let s = path.strip_suffix("']")?;
    let (field, key) = s.split_once("['")?;
    (!field.is_empty()).then_some((field, key))
}

/// `fieldpath.FormatMap`: `key="value"` lines sorted by key, Go-quoted values.
fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

use podvisor_api::gotext::quote as go_quote;

/// The pod's IPs: `status.podIPs`, else `status.podIP`, else loopback.
fn pod_ips(pod: &Pod) -> Vec<String> {
    let status = pod.status.as_ref();
    let mut ips: Vec<String> = status
        .and_then(|s| s.pod_ips.as_ref())
        .into_iter()
        .flatten()
        .map(|ip| ip.ip.clone())
        .filter(|ip| !ip.is_empty())
        .collect();
    if ips.is_empty() {
        ips.push(
            status
                .and_then(|s| s.pod_ip.clone())
                .filter(|ip| !ip.is_empty())
                .unwrap_or_else(|| DEFAULT_IP.to_owned()),
        );
    }
    ips
}

/// The host's IPs: `status.hostIPs`, else `status.hostIP`, else loopback.
fn host_ips(pod: &Pod) -> Vec<String> {
    let status = pod.status.as_ref();
    let mut ips: Vec<String> = status
        .and_then(|s| s.host_ips.as_ref())
        .into_iter()
        .flatten()
        .map(|ip| ip.ip.clone())
        .filter(|ip| !ip.is_empty())
        .collect();
    if ips.is_empty() {
        ips.push(
            status
                .and_then(|s| s.host_ip.clone())
                .filter(|ip| !ip.is_empty())
                .unwrap_or_else(|| DEFAULT_IP.to_owned()),
        );
    }
    ips
}

/// `resourceFieldRef` (`containerResourceRuntimeValue` after `defaultPodLimitsForDownwardAPI`):
/// the value divided by the divisor, rounded up, computed in `float64` like the kubelet.
pub(super) fn resource_field_value(
    pod: &Pod,
    container: &Container,
    sel: &ResourceFieldSelector,
    node: &NodeAllocatable,
) -> Result<String, String> {
    let spec = pod.spec.as_ref();
    // Only the pod's regular containers (and the container itself) get node-allocatable
    // defaults for unset limits; a named init container is read as written.
    let (target, defaulted) = match sel.container_name.as_deref().filter(|n| !n.is_empty()) {
        None => (container, true),
        Some(name) => {
            if let Some(c) = spec.and_then(|s| s.containers.iter().find(|c| c.name == name)) {
                (c, true)
            } else if let Some(c) = spec
                .and_then(|s| s.init_containers.as_ref())
                .and_then(|v| v.iter().find(|c| c.name == name))
            {
                (c, false)
            } else {
                return Err(format!("container {name} not found"));
            }
        }
    };
    let divisor = match sel.divisor.as_ref() {
        Some(d) => parse_quantity(&d.0, "divisor")?,
        None => Quantity::default(),
    };
    let divisor = if divisor.is_zero() {
        Quantity::from_units(1)
    } else {
        divisor
    };
    let read = |list: &str, name: &str| -> Result<Quantity, String> {
        let written = match list {
            "limits" => limit(target, name),
            _ => request(target, name),
        };
        let mut q = match written {
            Some(text) => parse_quantity(&text, &format!("resources.{list}.{name}"))?,
            None => Quantity::default(),
        };
        if list == "limits" && defaulted && q.is_zero() {
            let allocatable = match name {
                "cpu" => node
                    .cpu_millis
                    .map(|m| Quantity::from_millis(i64::try_from(m).unwrap_or(i64::MAX))),
                "memory" => node.memory_bytes.map(units),
                "ephemeral-storage" => node.ephemeral_storage_bytes.map(units),
                _ => None,
            };
            if let Some(a) = allocatable {
                q = a;
            }
        }
        Ok(q)
    };
    let ceil_div = |a: i64, b: i64| -> String {
        // float64 division as the kubelet computes it (out-of-range results saturate here; Go's
        // conversion leaves them undefined).
        let v = (a as f64 / b as f64).ceil() as i64;
        v.to_string()
    };
    let (list, name) = sel
        .resource
        .split_once('.')
        .filter(|(l, _)| *l == "limits" || *l == "requests")
        .ok_or_else(|| format!("unsupported container resource : {}", sel.resource))?;
    match name {
        "cpu" => Ok(ceil_div(
            read(list, name)?.milli_value(),
            divisor.milli_value(),
        )),
        "memory" | "ephemeral-storage" => Ok(ceil_div(read(list, name)?.value(), divisor.value())),
        n if n.starts_with("hugepages-") => {
            Ok(ceil_div(read(list, name)?.value(), divisor.value()))
        }
        _ => Err(format!("unsupported container resource : {}", sel.resource)),
    }
}

fn units(bytes: u64) -> Quantity {
    Quantity::from_units(i64::try_from(bytes).unwrap_or(i64::MAX))
}

pub(super) fn limit(container: &Container, name: &str) -> Option<String> {
    let r = container.resources.as_ref()?;
    r.limits.as_ref()?.get(name).map(|q| q.0.clone())
}

fn request(container: &Container, name: &str) -> Option<String> {
    let r = container.resources.as_ref()?;
    r.requests.as_ref()?.get(name).map(|q| q.0.clone())
}

pub(super) fn parse_quantity(text: &str, what: &str) -> Result<Quantity, String> {
    Quantity::parse(text).ok_or_else(|| format!("invalid quantity {text:?} in {what}"))
}
