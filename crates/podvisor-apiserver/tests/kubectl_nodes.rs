//! Nodes and Leases through the real kubectl: a Node registered and reported the way the node
//! agent does it (create, then `nodes/status`), `get nodes` (the server's table, `-o wide`),
//! `describe node` (capacity, conditions, the node's pods by field selector), `cordon` and
//! `uncordon`, labels and taints, `explain`, and `coordination.k8s.io/v1` Leases.

use crate::common;

use common::TestServer;
use serde_json::{Value, json};

fn node_status() -> Value {
    let cond = |t: &str, s: &str, reason: &str, message: &str| {
        json!({"type": t, "status": s, "reason": reason, "message": message,
               "lastHeartbeatTime": "2026-01-01T00:00:00Z",
               "lastTransitionTime": "2026-01-01T00:00:00Z"})
    };
    json!({
        "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110", "ephemeral-storage": "10Gi"},
        "allocatable": {"cpu": "2", "memory": "3996Mi", "pods": "110", "ephemeral-storage": "9Gi"},
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [{"type": "InternalIP", "address": "192.0.2.10"}, {"type": "Hostname", "address": "worker-1"}],
        "nodeInfo": {
            "machineID": "m", "systemUUID": "", "bootID": "b", "kernelVersion": "6.1.0-test",
            "osImage": "Test Linux 1", "containerRuntimeVersion": "podvisor://0.1.0",
            "kubeletVersion": "v1.35.0-podvisor", "kubeProxyVersion": "",
            "operatingSystem": "linux", "architecture": "amd64",
        },
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 6443}},
    })
}

fn register(s: &TestServer) {
    s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: worker-1\n  labels:\n    kubernetes.io/hostname: worker-1\n",
    );
    let (code, node) = s.json("GET", "/api/v1/nodes/worker-1", None);
    assert_eq!(code, 200, "{node}");
    let mut node = node;
    node["status"] = node_status();
    let (code, body) = s.json("PUT", "/api/v1/nodes/worker-1/status", Some(&node));
    assert_eq!(code, 200, "{body}");
}

#[test]
fn get_nodes_wide_describe_cordon_uncordon() {
    let s = TestServer::start();
    register(&s);
    let out = s.kubectl_ok(&["get", "nodes"]);
    let lines: Vec<&str> = out.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{out}"
    );
    // The test server's own node (`NODE`) is listed too.
    let row: Vec<&str> = lines
        .iter()
        .find(|l| l.starts_with("worker-1"))
        .unwrap_or_else(|| panic!("no worker-1 row: {out}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], ["worker-1", "Ready", "<none>"], "{out}");
    assert_eq!(row[4], "v1.35.0-podvisor", "{out}");

    let out = s.kubectl_ok(&["get", "no", "-o", "wide"]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header[5..],
        [
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME"
        ],
        "{out}"
    );
    assert!(
        out.contains("192.0.2.10")
            && out.contains("Test Linux 1")
            && out.contains("6.1.0-test")
            && out.contains("podvisor://0.1.0"),
        "{out}"
    );

    // A write of the main resource keeps the status; one of the status keeps the spec.
    s.kubectl_ok(&[
        "label",
        "node",
        "worker-1",
        "node-role.kubernetes.io/worker=",
    ]);
    s.kubectl_ok(&["taint", "node", "worker-1", "dedicated=gpu:NoSchedule"]);
    s.kubectl_ok(&["cordon", "worker-1"]);
    let out = s.kubectl_ok(&["get", "nodes"]);
    assert!(
        out.contains("Ready,SchedulingDisabled") && out.contains("worker"),
        "{out}"
    );
    let cordoned = s.kubectl_ok(&[
        "get",
        "nodes",
        "--field-selector",
        "spec.unschedulable=true",
        "-o",
        "name",
    ]);
    assert_eq!(cordoned.trim(), "node/worker-1");
    let node: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "node", "worker-1", "-o", "json"])).unwrap();
    assert_eq!(
        node["status"]["nodeInfo"]["kernelVersion"], "6.1.0-test",
        "{node}"
    );
    assert_eq!(node["spec"]["taints"][0]["key"], "dedicated", "{node}");

    // A pod on the node shows in describe (kubectl lists them by `spec.nodeName`).
    s.create(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: on-node\nspec:\n  nodeName: worker-1\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests:\n        cpu: 250m\n        memory: 64Mi\n",
    );
    let out = s.kubectl_ok(&["describe", "node", "worker-1"]);
    for want in [
        "Capacity:",
        "Allocatable:",
        "Conditions:",
        "KubeletReady",
        "kubelet is posting ready status",
        "Addresses:",
        "InternalIP:  192.0.2.10",
        "System Info:",
        "Kernel Version:             6.1.0-test",
        "Non-terminated Pods:          (1 in total)",
        "on-node",
        "Allocated resources:",
        "250m (12%)",
        "Unschedulable:      true",
        "dedicated=gpu:NoSchedule",
    ] {
        assert!(out.contains(want), "describe lacks {want:?}:\n{out}");
    }

    s.kubectl_ok(&["uncordon", "worker-1"]);
    let out = s.kubectl_ok(&["get", "nodes", "--no-headers"]);
    assert!(
        out.contains(" Ready ") && !out.contains("SchedulingDisabled"),
        "{out}"
    );
    let none = s.kubectl_ok(&[
        "get",
        "nodes",
        "--field-selector",
        "spec.unschedulable=true",
        "-o",
        "name",
    ]);
    assert_eq!(none.trim(), "");
    let node: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "node", "worker-1", "-o", "json"])).unwrap();
    assert_eq!(
        node["status"]["conditions"][3]["reason"], "KubeletReady",
        "{node}"
    );
    // A taint with an unknown effect is refused, naming the field.
    let r = s.kubectl(&[
        "patch",
        "node",
        "worker-1",
        "--type=merge",
        "-p",
        r#"{"spec":{"taints":[{"key":"k","effect":"Sometimes"}]}}"#,
    ]);
    assert!(
        !r.ok
            && r.stderr
                .contains("spec.taints[0].effect: Unsupported value: \"Sometimes\""),
        "{}",
        r.stderr
    );
}

#[test]
fn explain_node_and_lease() {
    let s = TestServer::start();
    let out = s.kubectl_ok(&["explain", "node.spec.unschedulable"]);
    assert!(
        out.contains("KIND:") && out.contains("Node") && out.contains("unschedulable"),
        "{out}"
    );
    let out = s.kubectl_ok(&["explain", "lease.spec.renewTime"]);
    assert!(
        out.contains("coordination.k8s.io") && out.contains("renewTime"),
        "{out}"
    );
}

#[test]
fn leases_create_get_renew_delete() {
    let s = TestServer::start();
    s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: worker-1\nspec:\n  holderIdentity: worker-1\n  leaseDurationSeconds: 40\n  renewTime: \"2026-01-01T00:00:00.000000Z\"\n",
    );
    let out = s.kubectl_ok(&["get", "lease"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["NAME", "HOLDER", "AGE"],
        "{out}"
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>()[..2],
        ["worker-1", "worker-1"],
        "{out}"
    );
    s.kubectl_ok(&[
        "patch",
        "lease",
        "worker-1",
        "--type=merge",
        "-p",
        r#"{"spec":{"renewTime":"2026-01-01T00:00:10.000000Z"}}"#,
    ]);
    let list: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "leases", "-A", "-o", "json"])).unwrap();
    assert_eq!(list["apiVersion"], "v1", "kubectl's list wrapper: {list}");
    assert_eq!(list["items"][0]["apiVersion"], "coordination.k8s.io/v1");
    assert_eq!(
        list["items"][0]["spec"]["renewTime"],
        "2026-01-01T00:00:10.000000Z"
    );
    let (code, body) = s.json(
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        None,
    );
    assert_eq!(
        (code, body["kind"].clone(), body["apiVersion"].clone()),
        (200, json!("LeaseList"), json!("coordination.k8s.io/v1"))
    );
    // A lease duration must be positive.
    let r = s.kubectl(&[
        "patch",
        "lease",
        "worker-1",
        "--type=merge",
        "-p",
        r#"{"spec":{"leaseDurationSeconds":0}}"#,
    ]);
    assert!(
        !r.ok && r.stderr.contains("spec.leaseDurationSeconds"),
        "{}",
        r.stderr
    );
    s.kubectl_ok(&["delete", "lease", "worker-1"]);
    assert_eq!(s.kubectl_ok(&["get", "lease", "-o", "name"]).trim(), "");
}
