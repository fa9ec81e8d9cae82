//! The `Table` columns and cells of the registry's newer kinds, as the API server prints them:
//! RBAC's roles with the default table convertor (`NAME`, `CREATED AT`), its bindings, the
//! Service and the EndpointSlice with `pkg/printers/internalversion/printers.go`'s printers.
//! [`crate::table`] builds the tables and asks here for these kinds.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podvisor_lifecycle::kubectl::translate_timestamp_since;
use serde_json::{Value, json};

use crate::table::{AGE_DOC, NAME_DOC, column};

const CREATED_AT_DOC: &str = AGE_DOC;

fn str_of<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn age(obj: &Value, now: Timestamp) -> Value {
    let created = str_of(obj, "/metadata/creationTimestamp")
        .parse::<Timestamp>()
        .ok()
        .map(Time);
    json!(translate_timestamp_since(created.as_ref(), now))
}

fn items<'a>(obj: &'a Value, ptr: &str) -> &'a [Value] {
    obj.pointer(ptr)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The columns of `kind`, when it is one of these.
pub(crate) fn columns(kind: &str) -> Option<Vec<Value>> {
    let binding = |what: &str, role_ref: &str| {
        vec![
            column("Name", "name", 0, NAME_DOC),
            column("Role", "", 0, role_ref),
            column("Age", "", 0, AGE_DOC),
            column("Users", "", 1, &format!("Users in the {what}")),
            column("Groups", "", 1, &format!("Groups in the {what}")),
            column(
                "ServiceAccounts",
                "",
                1,
                &format!("ServiceAccounts in the {what}"),
            ),
        ]
    };
    Some(match kind {
        "Role" | "ClusterRole" => {
            let mut created = column("Created At", "", 0, CREATED_AT_DOC);
            created["type"] = json!("date");
            vec![column("Name", "name", 0, NAME_DOC), created]
        }
        "RoleBinding" => binding(
            "roleBinding",
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
        ),
        "ClusterRoleBinding" => binding(
            "clusterRoleBinding",
            "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
        ),
        "Service" => vec![
            column("Name", "name", 0, NAME_DOC),
            column("Type", "", 0, "type determines how the Service is exposed."),
            column(
                "Cluster-IP",
                "",
                0,
                "clusterIP is the IP address of the service and is usually assigned randomly.",
            ),
            column(
                "External-IP",
                "",
                0,
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            ),
            column(
                "Port(s)",
                "",
                0,
                "The list of ports that are exposed by this service.",
            ),
            column("Age", "", 0, AGE_DOC),
            column(
                "Selector",
                "",
                1,
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ],
        "EndpointSlice" => vec![
            column("Name", "name", 0, NAME_DOC),
            column(
                "AddressType",
                "",
                0,
                "addressType specifies the type of address carried by this EndpointSlice.",
            ),
            column(
                "Ports",
                "",
                0,
                "ports specifies the list of network ports exposed by each endpoint in this slice.",
            ),
            column(
                "Endpoints",
                "",
                0,
                "endpoints is a list of unique endpoints in this slice.",
            ),
            column("Age", "", 0, AGE_DOC),
        ],
        _ => return None,
    })
}

/// `rbac.SubjectsStrings`: the users, groups and service accounts (`namespace/name`) bound.
fn subjects(obj: &Value) -> [String; 3] {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for s in items(obj, "/subjects") {
        let name = str_of(s, "/name").to_owned();
        match str_of(s, "/kind") {
            "User" => users.push(name),
            "Group" => groups.push(name),
            "ServiceAccount" => sas.push(format!("{}/{name}", str_of(s, "/namespace"))),
            _ => {}
        }
    }
    [users.join(", "), groups.join(", "), sas.join(", ")]
}

/// `listWithMoreString`: at most three, then how many more.
fn at_most_three(list: Vec<String>) -> String {
    let count = list.len();
    let shown = list.into_iter().take(3).collect::<Vec<_>>().join(",");
    if count > 3 {
        format!("{shown} + {} more...", count - 3)
    } else if shown.is_empty() {
        "<unset>".to_owned()
    } else {
        shown
    }
}

fn service_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let cluster_ip = items(obj, "/spec/clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let external: Vec<&str> = items(obj, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external = if external.is_empty() {
        "<none>".to_owned()
    } else {
        external.join(",")
    };
    let ports: Vec<String> = items(obj, "/spec/ports")
        .iter()
        .map(|p| {
            let (port, proto) = (&p["port"], str_of(p, "/protocol"));
            match p["nodePort"].as_i64().filter(|n| *n > 0) {
                Some(node) => format!("{port}:{node}/{proto}"),
                None => format!("{port}/{proto}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_owned()
    } else {
        ports.join(",")
    };
    let selector: Vec<String> = obj
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    let selector = if selector.is_empty() {
        "<none>".to_owned()
    } else {
        selector.join(",")
    };
    vec![
        json!(str_of(obj, "/metadata/name")),
        json!(str_of(obj, "/spec/type")),
        json!(cluster_ip),
        json!(external),
        json!(ports),
        age(obj, now),
        json!(selector),
    ]
}

fn endpoint_slice_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let ports = items(obj, "/ports")
        .iter()
        .map(|p| match (p["port"].as_i64(), p["name"].as_str()) {
            (Some(n), _) => n.to_string(),
            (None, Some(name)) => name.to_owned(),
            (None, None) => "*".to_owned(),
        })
        .collect();
    let addresses = items(obj, "/endpoints")
        .iter()
        .flat_map(|e| items(e, "/addresses"))
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    vec![
        json!(str_of(obj, "/metadata/name")),
        json!(str_of(obj, "/addressType")),
        json!(at_most_three(ports)),
        json!(at_most_three(addresses)),
        age(obj, now),
    ]
}

/// The cells of one object of `kind`, when it is one of these.
pub(crate) fn cells(kind: &str, obj: &Value, now: Timestamp) -> Option<Vec<Value>> {
    let name = json!(str_of(obj, "/metadata/name"));
    Some(match kind {
        "Role" | "ClusterRole" => vec![name, json!(str_of(obj, "/metadata/creationTimestamp"))],
        "RoleBinding" | "ClusterRoleBinding" => {
            let role = format!(
                "{}/{}",
                str_of(obj, "/roleRef/kind"),
                str_of(obj, "/roleRef/name")
            );
            let [users, groups, sas] = subjects(obj);
            vec![
                name,
                json!(role),
                age(obj, now),
                json!(users),
                json!(groups),
                json!(sas),
            ]
        }
        "Service" => service_cells(obj, now),
        "EndpointSlice" => endpoint_slice_cells(obj, now),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_print_their_role_and_subjects() {
        let b = json!({
            "metadata": {"name": "b", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
                {"kind": "Group", "name": "devs"},
                {"kind": "ServiceAccount", "name": "default", "namespace": "ci"}
            ]
        });
        let now: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let cells = cells("RoleBinding", &b, now).unwrap();
        assert_eq!(
            cells,
            [
                json!("b"),
                json!("ClusterRole/view"),
                json!("5m"),
                json!("alice, bob"),
                json!("devs"),
                json!("ci/default")
            ]
        );
        assert_eq!(columns("RoleBinding").unwrap().len(), cells.len());
        let role = cells_of_role();
        assert_eq!(role, [json!("r"), json!("2026-01-01T00:00:00Z")]);
    }

    fn cells_of_role() -> Vec<Value> {
        let r = json!({"metadata": {"name": "r", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        cells("ClusterRole", &r, Timestamp::UNIX_EPOCH).unwrap()
    }

    #[test]
    fn services_and_slices_print_ports_and_addresses() {
        let svc = json!({"metadata": {"name": "kubernetes"}, "spec": {"type": "ClusterIP",
            "clusterIPs": ["10.96.0.1"], "ports": [{"port": 443, "protocol": "TCP"}]}});
        let c = cells("Service", &svc, Timestamp::UNIX_EPOCH).unwrap();
        assert_eq!(
            &c[..5],
            [
                json!("kubernetes"),
                json!("ClusterIP"),
                json!("10.96.0.1"),
                json!("<none>"),
                json!("443/TCP")
            ]
        );
        let slice = json!({"metadata": {"name": "kubernetes"}, "addressType": "IPv4",
            "ports": [{"name": "https", "port": 6443}],
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3", "10.0.0.4"]}]});
        let c = cells("EndpointSlice", &slice, Timestamp::UNIX_EPOCH).unwrap();
        assert_eq!(c[2], json!("6443"));
        assert_eq!(c[3], json!("10.0.0.1,10.0.0.2,10.0.0.3 + 1 more..."));
    }
}
