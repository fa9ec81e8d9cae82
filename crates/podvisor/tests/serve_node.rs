//! The node's own objects under `podvisor serve`, through the real kubectl: the Node the
//! agent registers (`get nodes`, `-o wide`, `describe node` with the node's pods), its Lease
//! in `kube-node-lease` renewed every 10 s, a cordon that the agent's status reports keep,
//! and every bound pod's `spec.nodeName` naming that Node.

use crate::serve_common::ServeCtx;
use serde_json::Value;
use std::time::{Duration, Instant};

fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn json(ctx: &ServeCtx, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&ctx.kubectl_ok(&all)).unwrap()
}

#[test]
#[ignore = "needs root"]
fn node_and_lease_are_registered_reported_and_renewed() {
    let mut ctx = ServeCtx::new("node");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: sleeper\nspec:\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'sleep 300; : {m}']\n    resources:\n      requests:\n        cpu: 100m\n        memory: 32Mi\n"
    );
    let path = ctx.manifest("sleeper.yaml", &manifest);
    ctx.kubectl_ok(&["apply", "-f", path.to_str().unwrap()]);

    // One Node, Ready, and the pod's spec.nodeName is its name.
    let nodes = wait_for("the Node", Duration::from_secs(60), || {
        let v = json(&ctx, &["get", "nodes"]);
        let ready = v["items"][0]["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
        ready.then_some(v)
    });
    assert_eq!(nodes["items"].as_array().unwrap().len(), 1, "{nodes}");
    let node = &nodes["items"][0];
    let name = node["metadata"]["name"].as_str().unwrap().to_owned();
    let bound = wait_for("the pod bound", Duration::from_secs(60), || {
        let p = json(&ctx, &["get", "pod", "sleeper"]);
        p["spec"]["nodeName"].as_str().map(str::to_owned)
    });
    assert_eq!(bound, name);
    assert_eq!(
        node["metadata"]["labels"]["kubernetes.io/hostname"],
        name.as_str()
    );
    assert_eq!(node["metadata"]["labels"]["kubernetes.io/os"], "linux");
    let cap = &node["status"]["capacity"];
    assert!(
        cap["cpu"].as_str().unwrap().parse::<u32>().unwrap() >= 1,
        "{cap}"
    );
    assert_eq!(cap["pods"], "110");
    assert!(cap["memory"].as_str().unwrap().ends_with('i'), "{cap}");
    let info = &node["status"]["nodeInfo"];
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(info["kernelVersion"], kernel.trim());
    assert_eq!(info["kubeletVersion"], "v1.35.0-podvisor");
    assert!(
        info["containerRuntimeVersion"]
            .as_str()
            .unwrap()
            .starts_with("podvisor://")
    );

    let out = ctx.kubectl_ok(&["get", "nodes", "-o", "wide"]);
    assert!(
        out.contains("KERNEL-VERSION") && out.contains(kernel.trim()),
        "{out}"
    );
    wait_for("the pod running", Duration::from_secs(60), || {
        let p = json(&ctx, &["get", "pod", "sleeper"]);
        (p["status"]["phase"] == "Running").then_some(())
    });
    let out = ctx.kubectl_ok(&["describe", "node", &name]);
    for want in [
        "Capacity:",
        "Allocatable:",
        "KubeletReady",
        "KubeletHasSufficientMemory",
        "System Info:",
        "Non-terminated Pods:",
        "sleeper",
        "Allocated resources:",
        "HolderIdentity:",
        // The kubelet's events about the node (involvedObject.uid is the node's name).
        "Starting kubelet.",
        "status is now: NodeReady",
    ] {
        assert!(out.contains(want), "describe lacks {want:?}:\n{out}");
    }

    // The Lease: held by the node, owned by its Node, renewed every 10 s.
    let lease = json(&ctx, &["get", "lease", "-n", "kube-node-lease", &name]);
    assert_eq!(lease["spec"]["holderIdentity"], name.as_str());
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
    assert_eq!(lease["metadata"]["ownerReferences"][0]["kind"], "Node");
    assert_eq!(
        lease["metadata"]["ownerReferences"][0]["uid"],
        node["metadata"]["uid"]
    );
    let first = lease["spec"]["renewTime"].as_str().unwrap().to_owned();

    // A cordon stays through the agent's status reports.
    ctx.kubectl_ok(&["cordon", &name]);
    let renewed = wait_for("the lease renewed", Duration::from_secs(45), || {
        let l = json(&ctx, &["get", "lease", "-n", "kube-node-lease", &name]);
        let t = l["spec"]["renewTime"].as_str().unwrap().to_owned();
        (t > first).then_some(t)
    });
    let a: jiff::Timestamp = first.parse().unwrap();
    let b: jiff::Timestamp = renewed.parse().unwrap();
    let gap = b.duration_since(a).as_secs_f64();
    assert!((5.0..=30.0).contains(&gap), "renewed after {gap} s");
    let out = ctx.kubectl_ok(&["get", "nodes"]);
    assert!(out.contains("Ready,SchedulingDisabled"), "{out}");
    ctx.kubectl_ok(&["uncordon", &name]);
    let out = ctx.kubectl_ok(&["get", "nodes", "--no-headers"]);
    assert!(!out.contains("SchedulingDisabled"), "{out}");

    // A restart keeps the Node (same uid) and its Lease.
    ctx.stop(Duration::from_secs(30));
    ctx.start(&[]);
    let again = json(&ctx, &["get", "node", &name]);
    assert_eq!(again["metadata"]["uid"], node["metadata"]["uid"]);
    ctx.kubectl_ok(&["delete", "pod", "sleeper", "--grace-period=1"]);
}
