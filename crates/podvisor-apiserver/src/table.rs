//! Server-side printing: `meta.k8s.io/v1` `Table` responses, the columns and cells the API
//! server's printers (`pkg/printers/internalversion/printers.go`) produce, which is what
//! `kubectl get` shows.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podvisor_lifecycle::kubectl::{pod_row, translate_timestamp_since};
use serde_json::{Value, json};

use crate::db::Resource;

/// `includeObject`: what each row carries in `object`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum IncludeObject {
    /// Nothing.
    None,
    /// A `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the query parameter (unknown values fall back to the default).
    pub(crate) fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

pub(crate) const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub(crate) const AGE_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

const CONFIGMAP_DATA_DOC: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
const SECRET_TYPE_DOC: &str = "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types";
const SECRET_DATA_DOC: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";

pub(crate) fn column(name: &str, format: &str, priority: u8, description: &str) -> Value {
    json!({"name": name, "type": "string", "format": format, "description": description, "priority": priority})
}

fn columns(res: Resource) -> Vec<Value> {
    if let Some(columns) = crate::printers::columns(res.kind) {
        return columns;
    }
    match res.kind {
        "Pod" => vec![
            column("Name", "name", 0, NAME_DOC),
            column(
                "Ready",
                "",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            column(
                "Status",
                "",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            column(
                "Restarts",
                "",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            column("Age", "", 0, AGE_DOC),
            column(
                "IP",
                "",
                1,
                "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            column(
                "Node",
                "",
                1,
                "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
            ),
            column(
                "Nominated Node",
                "",
                1,
                "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
            ),
            column(
                "Readiness Gates",
                "",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
            ),
        ],
        "Event" => vec![
            column(
                "Last Seen",
                "",
                0,
                "The time at which the most recent occurrence of this event was recorded.",
            ),
            column(
                "Type",
                "",
                0,
                "Type of this event (Normal, Warning), new types could be added in the future",
            ),
            column(
                "Reason",
                "",
                0,
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            column("Object", "", 0, "The object that this event is about."),
            column(
                "Subobject",
                "",
                1,
                "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].",
            ),
            column(
                "Source",
                "",
                1,
                "The component reporting this event. Should be a short machine understandable string.",
            ),
            column(
                "Message",
                "",
                0,
                "A human-readable description of the status of this operation.",
            ),
            column(
                "First Seen",
                "",
                1,
                "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
            ),
            column(
                "Count",
                "",
                1,
                "The number of times this event has occurred.",
            ),
            column("Name", "name", 1, NAME_DOC),
        ],
        "ConfigMap" => vec![
            column("Name", "name", 0, NAME_DOC),
            column("Data", "", 0, CONFIGMAP_DATA_DOC),
            column("Age", "", 0, AGE_DOC),
        ],
        "ServiceAccount" => vec![
            column("Name", "name", 0, NAME_DOC),
            column(
                "Secrets",
                "",
                0,
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret",
            ),
            column("Age", "", 0, AGE_DOC),
        ],
        "Secret" => vec![
            column("Name", "name", 0, NAME_DOC),
            column("Type", "", 0, SECRET_TYPE_DOC),
            column("Data", "", 0, SECRET_DATA_DOC),
            column("Age", "", 0, AGE_DOC),
        ],
        "Node" => vec![
            column("Name", "name", 0, NAME_DOC),
            column("Status", "", 0, "The status of the node"),
            column("Roles", "", 0, "The roles of the node"),
            column("Age", "", 0, AGE_DOC),
            column("Version", "", 0, "Kubelet Version reported by the node."),
            column(
                "Internal-IP",
                "",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses",
            ),
            column(
                "External-IP",
                "",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses",
            ),
            column(
                "OS-Image",
                "",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            column(
                "Kernel-Version",
                "",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            column(
                "Container-Runtime",
                "",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        "Lease" => vec![
            column("Name", "name", 0, NAME_DOC),
            column("Holder", "", 0, "The holder of the lease"),
            column("Age", "", 0, AGE_DOC),
        ],
        _ => vec![
            column("Name", "name", 0, NAME_DOC),
            column("Status", "", 0, "The status of the namespace"),
            column("Age", "", 0, AGE_DOC),
        ],
    }
}

fn time_of(obj: &Value, ptr: &str) -> Option<Time> {
    obj.pointer(ptr)
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<Timestamp>().ok())
        .map(Time)
}

fn str_of<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// The cells and row conditions of one object.
fn cells(res: Resource, obj: &Value, now: Timestamp) -> (Vec<Value>, Option<Value>) {
    if let Some(cells) = crate::printers::cells(res.kind, obj, now) {
        return (cells, None);
    }
    match res.kind {
        "Pod" => {
            let pod: Pod = serde_json::from_value(obj.clone()).unwrap_or_default();
            let row = pod_row(&pod, now);
            let conditions = match str_of(obj, "/status/phase") {
                "Succeeded" => Some(
                    json!([{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}]),
                ),
                "Failed" => Some(
                    json!([{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]),
                ),
                _ => None,
            };
            (
                vec![
                    json!(row.name),
                    json!(row.ready),
                    json!(row.status),
                    json!(row.restarts),
                    json!(row.age),
                    json!(row.ip),
                    json!(row.node),
                    json!(row.nominated_node),
                    json!(row.readiness_gates),
                ],
                conditions,
            )
        }
        "Event" => (event_cells(obj, now), None),
        "Node" => (node_cells(obj, now), None),
        "Lease" => (
            vec![
                json!(str_of(obj, "/metadata/name")),
                json!(str_of(obj, "/spec/holderIdentity")),
                json!(translate_timestamp_since(
                    time_of(obj, "/metadata/creationTimestamp").as_ref(),
                    now
                )),
            ],
            None,
        ),
        "ServiceAccount" => (
            vec![
                json!(str_of(obj, "/metadata/name")),
                json!(
                    obj.pointer("/secrets")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len)
                ),
                json!(translate_timestamp_since(
                    time_of(obj, "/metadata/creationTimestamp").as_ref(),
                    now
                )),
            ],
            None,
        ),
        "ConfigMap" | "Secret" => {
            let count = |p: &str| {
                obj.pointer(p)
                    .and_then(Value::as_object)
                    .map_or(0, serde_json::Map::len)
            };
            let age = json!(translate_timestamp_since(
                time_of(obj, "/metadata/creationTimestamp").as_ref(),
                now
            ));
            let name = json!(str_of(obj, "/metadata/name"));
            let cells = if res.kind == "Secret" {
                vec![
                    name,
                    json!(str_of(obj, "/type")),
                    json!(count("/data")),
                    age,
                ]
            } else {
                vec![name, json!(count("/data") + count("/binaryData")), age]
            };
            (cells, None)
        }
        _ => (
            vec![
                json!(str_of(obj, "/metadata/name")),
                json!(str_of(obj, "/status/phase")),
                json!(translate_timestamp_since(
                    time_of(obj, "/metadata/creationTimestamp").as_ref(),
                    now
                )),
            ],
            None,
        ),
    }
}

/// `printNode` with `Wide: true`: the status from the `Ready` condition (and
/// `SchedulingDisabled` when cordoned), the roles from the `node-role.kubernetes.io/<role>`
/// and `kubernetes.io/role` labels.
fn node_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let none = |s: &str| {
        if s.is_empty() {
            "<none>".to_owned()
        } else {
            s.to_owned()
        }
    };
    let ready = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    let mut status: Vec<&str> = vec![match ready.and_then(|c| c["status"].as_str()) {
        Some("True") => "Ready",
        Some("False") => "NotReady",
        _ => "Unknown",
    }];
    if obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<String> = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| {
                    if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                        Some(role.to_owned())
                    } else if k == "kubernetes.io/role" {
                        v.as_str().map(str::to_owned)
                    } else {
                        None
                    }
                })
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    let address = |t: &str| {
        obj.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| x["type"] == t))
            .and_then(|x| x["address"].as_str())
            .unwrap_or("")
            .to_owned()
    };
    vec![
        json!(str_of(obj, "/metadata/name")),
        json!(status.join(",")),
        json!(if roles.is_empty() {
            "<none>".to_owned()
        } else {
            roles.join(",")
        }),
        json!(translate_timestamp_since(
            time_of(obj, "/metadata/creationTimestamp").as_ref(),
            now
        )),
        json!(str_of(obj, "/status/nodeInfo/kubeletVersion")),
        json!(none(&address("InternalIP"))),
        json!(none(&address("ExternalIP"))),
        json!(none(str_of(obj, "/status/nodeInfo/osImage"))),
        json!(none(str_of(obj, "/status/nodeInfo/kernelVersion"))),
        json!(none(str_of(
            obj,
            "/status/nodeInfo/containerRuntimeVersion"
        ))),
    ]
}

/// `printEvent` with `Wide: true`.
fn event_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let first = time_of(obj, "/firstTimestamp");
    let first_text = match &first {
        Some(t) => translate_timestamp_since(Some(t), now),
        None => translate_timestamp_since(time_of(obj, "/eventTime").as_ref(), now),
    };
    let mut last_text = match time_of(obj, "/lastTimestamp") {
        Some(t) => translate_timestamp_since(Some(&t), now),
        None => first_text.clone(),
    };
    let mut count = obj.get("count").and_then(Value::as_i64).unwrap_or(0);
    if let Some(series) = obj.get("series").filter(|s| s.is_object()) {
        last_text = translate_timestamp_since(time_of(series, "/lastObservedTime").as_ref(), now);
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = str_of(obj, "/involvedObject/kind").to_lowercase();
    let name = str_of(obj, "/involvedObject/name");
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    let first_non_empty = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_owned()
        } else {
            a.to_owned()
        }
    };
    let component = first_non_empty(
        str_of(obj, "/source/component"),
        str_of(obj, "/reportingComponent"),
    );
    let host = first_non_empty(
        str_of(obj, "/source/host"),
        str_of(obj, "/reportingInstance"),
    );
    let source = if host.is_empty() {
        component
    } else {
        format!("{component}, {host}")
    };
    vec![
        json!(last_text),
        json!(str_of(obj, "/type")),
        json!(str_of(obj, "/reason")),
        json!(target),
        json!(str_of(obj, "/involvedObject/fieldPath")),
        json!(source),
        json!(str_of(obj, "/message").trim()),
        json!(first_text),
        json!(count),
        json!(str_of(obj, "/metadata/name")),
    ]
}

/// The `object` of a row.
fn row_object(obj: &Value, include: IncludeObject, beta: bool) -> Option<Value> {
    match include {
        IncludeObject::None => None,
        IncludeObject::Object => Some(obj.clone()),
        IncludeObject::Metadata => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": if beta { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        })),
    }
}

/// How to build a table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableOptions {
    /// What each row carries.
    pub include: IncludeObject,
    /// `meta.k8s.io/v1beta1` instead of `v1`.
    pub beta: bool,
    /// Whether to send `columnDefinitions` (watch events after the first omit them).
    pub with_columns: bool,
}

/// A `Table` of `objects`; `resource_version` goes into the list metadata.
pub(crate) fn table(
    res: Resource,
    objects: &[Value],
    resource_version: Option<&str>,
    opts: TableOptions,
    now: Timestamp,
) -> Value {
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let (cells, conditions) = cells(res, obj, now);
            let mut row = json!({"cells": cells});
            if let Some(c) = conditions {
                row["conditions"] = c;
            }
            if let Some(o) = row_object(obj, opts.include, opts.beta) {
                row["object"] = o;
            }
            row
        })
        .collect();
    let mut metadata = json!({});
    if let Some(rv) = resource_version {
        metadata["resourceVersion"] = json!(rv);
    }
    json!({
        "kind": "Table",
        "apiVersion": if opts.beta { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
        "metadata": metadata,
        "columnDefinitions": if opts.with_columns { Value::Array(columns(res)) } else { Value::Null },
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{EVENTS, PODS};

    #[test]
    fn pod_table_has_kubectl_columns_and_cells() {
        let now: Timestamp = "2025-01-01T00:10:00Z".parse().unwrap();
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2025-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}]},
            "status": {"phase": "Pending"}
        });
        let opts = TableOptions {
            include: IncludeObject::Metadata,
            beta: false,
            with_columns: true,
        };
        let t = table(PODS, &[pod], Some("7"), opts, now);
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "web", "0/1", "Pending", "0", "10m", "<none>", "n1", "<none>", "<none>"
            ])
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn event_cells_follow_print_event() {
        let now: Timestamp = "2025-01-01T00:10:00Z".parse().unwrap();
        let ev = json!({
            "metadata": {"name": "web.1"},
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
            "reason": "Started", "message": "Started container app ", "type": "Normal",
            "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2025-01-01T00:00:00Z", "lastTimestamp": "2025-01-01T00:09:00Z", "count": 3
        });
        assert_eq!(
            event_cells(&ev, now),
            vec![
                json!("60s"),
                json!("Normal"),
                json!("Started"),
                json!("pod/web"),
                json!("spec.containers{app}"),
                json!("kubelet, n1"),
                json!("Started container app"),
                json!("10m"),
                json!(3),
                json!("web.1")
            ]
        );
        let _ = EVENTS;
    }
}
