//! `podvisor serve` with its state directory on a small tmpfs, through the real kubectl: a pod
//! whose logs fill the filesystem gets the Node `DiskPressure` (and its taint) and is evicted
//! as the kubelet's eviction manager does it (`Evicted`, its message, `DisruptionTarget`, the
//! event) and a new pod is rejected while the pressure lasts; a filesystem filled to the last byte makes writes fail with an error naming the
//! cause and `/readyz` fail, and once space is freed the store reopens itself and takes writes
//! again, without a restart.

use crate::serve_common::ServeCtx;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

fn wait_for<T>(ctx: &ServeCtx, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            ctx.last_logs(1)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn get_json(ctx: &ServeCtx, args: &[&str]) -> Option<Value> {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = ctx.kubectl(&all);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Mounts a tmpfs of `size` on `dir` (the test's state directory; `ServeCtx` detaches what is
/// mounted under its directory when it is dropped).
fn mount_tmpfs(dir: &Path, size: &str) {
    let data = std::ffi::CString::new(format!("size={size},mode=0755")).unwrap();
    rustix::mount::mount(
        "tmpfs",
        dir,
        "tmpfs",
        rustix::mount::MountFlags::empty(),
        Some(data.as_c_str()),
    )
    .unwrap();
}

/// Writes `path` until the filesystem is full.
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 << 10];
    loop {
        match file.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    // What is left is less than a chunk: take it too.
    while file.write_all(&[0u8; 512]).is_ok() {}
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a_full_state_dir_evicts_the_pod_filling_it_fails_writes_clearly_and_the_store_recovers() {
    let mut ctx = ServeCtx::new("disk");
    mount_tmpfs(&ctx.state(), "48m");
    ctx.start(&[
        "--eviction-hard=nodefs.available<10%",
        "--eviction-monitoring-interval",
        "200ms",
        "--eviction-pressure-transition-period",
        "60s",
    ]);
    let node = wait_for(&ctx, "the Node", || {
        let nodes = get_json(&ctx, &["get", "nodes"])?;
        nodes["items"][0]["metadata"]["name"]
            .as_str()
            .map(str::to_owned)
    });

    // A pod looping on echo fills the state directory's filesystem with its log.
    let m = &ctx.marker;
    let line = "x".repeat(400);
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: filler\nspec:\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'while true; do echo {line}; done; : {m}']\n"
    );
    let path = ctx.manifest("filler", &manifest);
    ctx.kubectl_ok(&["apply", "-f", path.to_str().unwrap()]);

    // The eviction manager: DiskPressure on the Node, with the taint, and the pod evicted as
    // the kubelet evicts it for nodefs.available<10%.
    let pressured = wait_for(&ctx, "DiskPressure True on the Node", || {
        let n = get_json(&ctx, &["get", "node", &node])?;
        (condition(&n, "DiskPressure")?["status"] == "True").then_some(n)
    });
    assert_eq!(
        condition(&pressured, "DiskPressure").unwrap()["reason"],
        "KubeletHasDiskPressure"
    );
    let evicted = wait_for(&ctx, "the pod evicted", || {
        let p = get_json(&ctx, &["get", "pod", "filler"])?;
        (p["status"]["reason"] == "Evicted" && p["status"]["phase"] == "Failed").then_some(p)
    });
    let message = evicted["status"]["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("The node was low on resource: ephemeral-storage. Threshold quantity: "),
        "{message}"
    );
    assert!(
        message.contains("Container app was using ",)
            && message.ends_with(", request is 0, has larger consumption of ephemeral-storage. "),
        "{message}"
    );
    let target = condition(&evicted, "DisruptionTarget").expect("a DisruptionTarget condition");
    assert_eq!(target["status"], "True");
    assert_eq!(target["reason"], "TerminationByKubelet");
    assert_eq!(target["message"], message);
    let event = wait_for(&ctx, "the Evicted event", || {
        let events = get_json(&ctx, &["get", "events"])?;
        events["items"]
            .as_array()?
            .iter()
            .find(|e| e["reason"] == "Evicted" && e["involvedObject"]["name"] == "filler")
            .cloned()
    });
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["message"], message);
    let tainted = get_json(&ctx, &["get", "node", &node]).unwrap();
    assert!(
        tainted["spec"]["taints"]
            .as_array()
            .is_some_and(|ts| ts.iter().any(|t| {
                t["key"] == "node.kubernetes.io/disk-pressure" && t["effect"] == "NoSchedule"
            })),
        "{tainted}"
    );

    // Under DiskPressure a new pod is rejected by the eviction manager's admission. (The
    // scheduler keeps pods off the tainted node: this one tolerates the taint, so it is
    // bound and it is the kubelet's admission that refuses it.)
    let late = ctx.manifest(
        "late",
        &format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: late\nspec:\n  tolerations:\n  - {{key: node.kubernetes.io/disk-pressure, operator: Exists, effect: NoSchedule}}\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'sleep 300; : {m}']\n"),
    );
    ctx.kubectl_ok(&["apply", "-f", late.to_str().unwrap()]);
    let rejected = wait_for(&ctx, "the new pod rejected", || {
        let p = get_json(&ctx, &["get", "pod", "late"])?;
        (p["status"]["phase"] == "Failed").then_some(p)
    });
    assert_eq!(rejected["status"]["reason"], "Evicted");
    assert_eq!(
        rejected["status"]["message"],
        "Pod was rejected: The node had condition: [DiskPressure]. "
    );

    // The filesystem filled to the last byte: a write fails with an error naming the cause,
    // and /readyz fails while the store cannot write.
    let filler = ctx.state().join("filler");
    fill(&filler);
    let data = ctx.path("data");
    std::fs::write(&data, "y".repeat(256 << 10)).unwrap();
    let from_file = format!("--from-file=data={}", data.display());
    let failure = (0..200)
        .find_map(|i| {
            let out = ctx.kubectl(&["create", "configmap", &format!("cm-{i}"), &from_file]);
            (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
        })
        .expect("a write on a full filesystem fails");
    assert!(
        failure.contains("No space left on device") && !failure.contains("Previous I/O"),
        "{failure}"
    );
    let ready = ctx.kubectl(&["get", "--raw", "/readyz"]);
    let said = String::from_utf8_lossy(&ready.stderr);
    assert!(
        !ready.status.success(),
        "/readyz answered ok on a full disk"
    );
    assert!(said.contains("store failed"), "{said}");

    // Space freed: the store reopens by itself, /readyz is ok again, writes succeed, and the
    // pod that filled the disk can be deleted.
    std::fs::remove_file(&filler).unwrap();
    wait_for(&ctx, "/readyz ok again", || {
        let out = ctx.kubectl(&["get", "--raw", "/readyz"]);
        (out.status.success() && out.stdout == b"ok").then_some(())
    });
    ctx.kubectl_ok(&["create", "configmap", "after", "--from-literal=a=b"]);
    ctx.kubectl_ok(&["delete", "pod", "filler", "--wait=true", "--timeout=30s"]);
    assert!(
        !ctx.grep_logs("the store was reopened and writes again")
            .is_empty(),
        "{}",
        ctx.last_logs(1)
    );
}
