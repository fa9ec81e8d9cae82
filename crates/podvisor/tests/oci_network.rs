//! Issue 30, items 3, 10 and 11: what a restart of `serve` keeps of a running pod.
//!
//! - Each `oci` sandbox is released with the network it was attached with, whatever the CNI
//!   configuration is by then; its address survives restarts; new pods get podvisor's own
//!   network whatever other tools drop into `/etc/cni/net.d`, and a named configuration
//!   directory (`--cni-conf-dir`) is read as containerd reads it, a change logged.
//! - A pod keeps the runtime class it started with: `serve` restarted with another
//!   `--runtime` re-adopts a host-process pod as one.
//!
//! Needs root, the CNI plugins and busybox-static (`scripts/install-test-deps`).

use crate::oci::{jsonpath, load_busybox, one_at_a_time, start, wait_for};
use crate::serve_common::ServeCtx;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// A foreign network's conflist: a bridge `bridge` with host-local addresses from `subnet`,
/// kept in `data_dir`.
fn bridge_conflist(name: &str, bridge: &str, subnet: &str, data_dir: &Path) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [{
            "type": "bridge",
            "bridge": bridge,
            "isGateway": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": subnet}]],
                "dataDir": data_dir,
            }
        }]
    })
    .to_string()
}

/// Files put somewhere for the length of a test and the bridges its networks may make, all
/// removed on drop (also when the test fails).
struct Cleanup {
    files: Vec<PathBuf>,
    bridges: Vec<String>,
    /// Directories made for the files, innermost first: removed when empty.
    dirs: Vec<PathBuf>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for file in &self.files {
            let _ = std::fs::remove_file(file);
        }
        for dir in &self.dirs {
            let _ = std::fs::remove_dir(dir);
        }
        for bridge in &self.bridges {
            let _ = Command::new("ip").args(["link", "del", bridge]).output();
        }
    }
}

/// A number of this test process's for names and subnets no other test on the machine uses.
fn tag() -> u32 {
    std::process::id() % 200 + 20
}

/// The CNI container ID each running pod's sandbox was attached with (its `network.json`).
fn cni_ids(ctx: &ServeCtx, pods: &[&str]) -> Vec<String> {
    pods.iter()
        .map(|pod| {
            let uid = jsonpath(ctx, pod, "{.metadata.uid}");
            let record = ctx.state().join("pods").join(uid).join("network.json");
            let text = std::fs::read_to_string(&record)
                .unwrap_or_else(|e| panic!("{}: {e}", record.display()));
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            v["cni_id"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// The addresses host-local holds in `data_dir` for the CNI container IDs `ids` (each file
/// names its holder on its first line).
fn held_in(data_dir: &Path, ids: &[String]) -> Vec<String> {
    walk(data_dir)
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(p)
                .is_ok_and(|t| ids.iter().any(|id| t.lines().next() == Some(id.as_str())))
        })
        .map(|p| p.display().to_string())
        .collect()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| {
            let p = e.path();
            if p.is_dir() { walk(&p) } else { vec![p] }
        })
        .collect()
}

fn pod(name: &str, marker: &str, extra: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'sleep 1000; : {marker}']
{extra}"#
    )
}

fn running(ctx: &ServeCtx, pods: &[&str]) -> bool {
    pods.iter()
        .all(|p| !jsonpath(ctx, p, "{.status.containerStatuses[0].state.running}").is_empty())
}

fn ip(ctx: &ServeCtx, pod: &str) -> String {
    jsonpath(ctx, pod, "{.status.podIP}")
}

fn restarts(ctx: &ServeCtx, pod: &str) -> String {
    jsonpath(ctx, pod, "{.status.containerStatuses[0].restartCount}")
}

fn delete_all(ctx: &ServeCtx, pods: &[&str]) {
    let mut args = vec!["delete", "pod", "--wait=false"];
    args.extend(pods);
    ctx.kubectl_ok(&args);
    wait_for(ctx, "the pods gone", WAIT, || {
        ctx.kubectl_ok(&["get", "pods", "-o", "name"])
            .trim()
            .is_empty()
    });
}

/// No release of a network failed in any run of serve.
fn no_failed_release(ctx: &ServeCtx) {
    let mut failed = ctx.grep_logs("releasing the network of sandbox");
    failed.extend(ctx.grep_logs("releasing pooled sandbox"));
    assert!(failed.is_empty(), "releases failed:\n{}", failed.join("\n"));
}

/// Waits until the addresses of `ids` in `data_dir` are released.
fn released(ctx: &ServeCtx, data_dir: &Path, ids: &[String]) {
    wait_for(ctx, "the pods' addresses released", WAIT, || {
        held_in(data_dir, ids).is_empty()
    });
}

/// Waits until `n` sandboxes are ready in the warm pool.
fn pool_ready(ctx: &ServeCtx, n: usize) {
    let pool = ctx
        .state()
        .join("pods")
        .join(podvisor_runtime::sandbox::pool::POOL_DIR);
    wait_for(ctx, "the warm pool filled", WAIT, || {
        std::fs::read_dir(&pool).is_ok_and(|d| d.count() == n)
    });
}

/// Applies `pod` and waits until it runs: by then the agent has published the status of
/// every pod it re-adopted.
fn apply_and_run(ctx: &ServeCtx, name: &str, pod: &str) {
    let manifest = ctx.manifest(name, pod);
    ctx.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    wait_for(ctx, &format!("{name} running"), WAIT, || {
        running(ctx, &[name])
    });
}

/// podvisor's own network (no `--cni-conf-dir`) with a foreign bridge conflist dropped into
/// `/etc/cni/net.d` between two restarts, as podman's package does: the running pods keep
/// their addresses through restarts, new pods stay on podvisor's network and take warm
/// sandboxes, and every release succeeds with no address left held.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn oci_pods_stay_on_podvisors_network_when_a_foreign_cni_config_appears() {
    let _one = one_at_a_time();
    let mut ctx = ServeCtx::new("nf");
    load_busybox(&ctx, &[]);
    let args = ["--runtime", "oci", "--warm-sandboxes", "2"];
    start(&mut ctx, &args);
    let m = ctx.marker.clone();
    let host_port = std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let manifest = ctx.manifest(
        "first",
        &[
            pod("pooled", &m, ""),
            pod(
                "ported",
                &m,
                &format!("    ports:\n    - {{containerPort: 80, hostPort: {host_port}}}\n"),
            ),
        ]
        .join("---\n"),
    );
    ctx.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    let first = ["pooled", "ported"];
    wait_for(&ctx, "the first pods running", WAIT, || {
        running(&ctx, &first)
    });
    let ips: Vec<String> = first.iter().map(|p| ip(&ctx, p)).collect();
    for ip in &ips {
        assert!(
            ip.starts_with("10.244."),
            "not on podvisor's network: {ips:?}"
        );
    }
    let mut ids = cni_ids(&ctx, &first);
    assert_eq!(ctx.stop(Duration::from_secs(30)), Some(0));

    // Another tool's network appears in /etc/cni/net.d (first in lexical order).
    let n = tag();
    let conflist = PathBuf::from(format!("/etc/cni/net.d/00-{m}.conflist"));
    let mut foreign = Cleanup {
        files: vec![conflist.clone()],
        bridges: vec![format!("pvf{n}")],
        dirs: Vec::new(),
    };
    // The directories too, when this test made them.
    for dir in ["/etc/cni", "/etc/cni/net.d"] {
        if !Path::new(dir).exists() {
            std::fs::create_dir(dir).unwrap();
            foreign.dirs.insert(0, PathBuf::from(dir));
        }
    }
    std::fs::write(
        &conflist,
        bridge_conflist(
            &format!("foreign{n}"),
            &format!("pvf{n}"),
            &format!("10.93.{n}.0/24"),
            &ctx.path("foreign-ipam"),
        ),
    )
    .unwrap();
    start(&mut ctx, &args);
    // A network is chosen at start: the file goes at once, so that another serve started on
    // this machine meanwhile (another test) hardly has a chance to see it.
    let _ = std::fs::remove_file(&conflist);

    pool_ready(&ctx, 2);
    apply_and_run(&ctx, "later", &pod("later", &m, ""));
    for (pod, ip) in first.iter().zip(&ips) {
        assert_eq!(&self::ip(&ctx, pod), ip, "{pod} lost its address");
        assert_eq!(restarts(&ctx, pod), "0", "{pod} restarted");
    }
    let later_ip = ip(&ctx, "later");
    assert!(
        later_ip.starts_with("10.244."),
        "a new pod left podvisor's network: {later_ip}\n{}",
        ctx.last_logs(1)
    );
    let later_uid = jsonpath(&ctx, "later", "{.metadata.uid}");
    assert!(
        ctx.state()
            .join("pods")
            .join(&later_uid)
            .join(podvisor_runtime::sandbox::pool::ADOPTED)
            .is_dir(),
        "the new pod took no warm sandbox"
    );
    ids.extend(cni_ids(&ctx, &["later"]));

    // Killed and started again: the addresses are still the pods'.
    ctx.kill9();
    start(&mut ctx, &args);
    apply_and_run(&ctx, "last", &pod("last", &m, ""));
    for (pod, ip) in first.iter().zip(&ips).chain([(&"later", &later_ip)]) {
        assert_eq!(&self::ip(&ctx, pod), ip, "{pod} lost its address");
    }
    ids.extend(cni_ids(&ctx, &["last"]));

    delete_all(&ctx, &["pooled", "ported", "later", "last"]);
    released(&ctx, Path::new("/var/lib/cni/networks/podvisor"), &ids);
    no_failed_release(&ctx);
    drop(foreign);
    assert!(!conflist.exists());
}

/// A named configuration directory (`--cni-conf-dir`, a cluster's network add-on's) whose
/// network changes between two restarts: the running pod keeps the network and address it
/// was attached with and is released from it, new pods get the new network, and the change
/// is in the log.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn oci_pods_keep_the_network_they_were_attached_with_when_the_conf_dir_changes() {
    let _one = one_at_a_time();
    let mut ctx = ServeCtx::new("nd");
    load_busybox(&ctx, &[]);
    let n = tag();
    let _bridges = Cleanup {
        files: Vec::new(),
        bridges: vec![format!("pva{n}"), format!("pvb{n}")],
        dirs: Vec::new(),
    };
    let (conf, ipam) = (ctx.path("net.d"), ctx.path("ipam"));
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("10-a.conflist"),
        bridge_conflist(
            &format!("neta{n}"),
            &format!("pva{n}"),
            &format!("10.92.{n}.0/24"),
            &ipam,
        ),
    )
    .unwrap();
    let args = ["--runtime", "oci", "--cni-conf-dir", conf.to_str().unwrap()];
    start(&mut ctx, &args);
    let m = ctx.marker.clone();
    apply_and_run(&ctx, "on-a", &pod("on-a", &m, ""));
    let a_ip = ip(&ctx, "on-a");
    assert!(a_ip.starts_with(&format!("10.92.{n}.")), "{a_ip}");
    let mut ids = cni_ids(&ctx, &["on-a"]);
    assert_eq!(ctx.stop(Duration::from_secs(30)), Some(0));

    // The add-on is replaced: its network comes first now.
    std::fs::write(
        conf.join("05-b.conflist"),
        bridge_conflist(
            &format!("netb{n}"),
            &format!("pvb{n}"),
            &format!("10.91.{n}.0/24"),
            &ipam,
        ),
    )
    .unwrap();
    start(&mut ctx, &args);
    let told = ctx.grep_logs("the network of new pods is now");
    assert_eq!(
        told.len(),
        1,
        "the change is logged once:\n{}",
        ctx.last_logs(2)
    );
    assert!(told[0].contains(&format!("netb{n}")), "{told:?}");
    apply_and_run(&ctx, "on-b", &pod("on-b", &m, ""));
    assert_eq!(ip(&ctx, "on-a"), a_ip);
    assert_eq!(restarts(&ctx, "on-a"), "0");
    let b_ip = ip(&ctx, "on-b");
    assert!(b_ip.starts_with(&format!("10.91.{n}.")), "{b_ip}");
    ids.extend(cni_ids(&ctx, &["on-b"]));

    // Started again with nothing changed: nothing more is said.
    assert_eq!(ctx.stop(Duration::from_secs(30)), Some(0));
    start(&mut ctx, &args);
    assert_eq!(ctx.grep_logs("the network of new pods is now").len(), 1);
    assert_eq!(ip(&ctx, "on-a"), a_ip);

    delete_all(&ctx, &["on-a", "on-b"]);
    released(&ctx, &ipam, &ids);
    no_failed_release(&ctx);
}

/// `serve` restarted with another `--runtime`: the default applies to new pods only. A pod
/// that started as host processes stays one (127.0.0.1, the same container, no restart), an
/// `oci` pod keeps its sandbox, and a new pod gets the new default.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a_restart_with_another_runtime_keeps_each_pod_in_its_class() {
    let _one = one_at_a_time();
    let mut ctx = ServeCtx::new("nr");
    load_busybox(&ctx, &[]);
    start(&mut ctx, &["--runtime", "process"]);
    let m = ctx.marker.clone();
    apply_and_run(&ctx, "host", &pod("host", &m, ""));
    assert_eq!(ip(&ctx, "host"), "127.0.0.1");
    let id = |ctx: &ServeCtx, pod: &str| {
        jsonpath(ctx, pod, "{.status.containerStatuses[0].containerID}")
    };
    let host_id = id(&ctx, "host");
    assert_eq!(ctx.stop(Duration::from_secs(30)), Some(0));

    start(&mut ctx, &["--runtime", "oci"]);
    apply_and_run(&ctx, "image", &pod("image", &m, ""));
    let image_ip = ip(&ctx, "image");
    assert!(image_ip.starts_with("10.244."), "{image_ip}");
    let check_host = |ctx: &ServeCtx| {
        assert_eq!(ip(ctx, "host"), "127.0.0.1", "{}", ctx.last_logs(1));
        assert_eq!(id(ctx, "host"), host_id);
        assert_eq!(restarts(ctx, "host"), "0");
        assert!(running(ctx, &["host"]));
    };
    check_host(&ctx);
    let image_id = id(&ctx, "image");

    // And back: the oci pod stays one.
    ctx.kill9();
    start(&mut ctx, &["--runtime", "process"]);
    apply_and_run(&ctx, "probe", &pod("probe", &m, ""));
    assert_eq!(ip(&ctx, "probe"), "127.0.0.1");
    check_host(&ctx);
    assert_eq!(ip(&ctx, "image"), image_ip);
    assert_eq!(id(&ctx, "image"), image_id);
    assert_eq!(restarts(&ctx, "image"), "0");

    delete_all(&ctx, &["host", "image", "probe"]);
    no_failed_release(&ctx);
}
