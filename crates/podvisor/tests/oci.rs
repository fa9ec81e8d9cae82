//! The `oci` runtime class end to end (issue 8), through `podvisor serve --runtime oci` and the
//! real kubectl: an image loaded into the store (`scripts/busybox-image` + `podvisor image
//! load`), pods in OCI containers with their own network on the CNI bridge, two containers
//! talking over localhost, a readiness probe to the pod IP, a pod reaching another by its IP,
//! `kubectl exec` inside the container's root, `kubectl cp`, `kubectl run -i --rm` (attach to
//! the container's stdin), ENTRYPOINT/CMD/command/args, image events and
//! `imageID`, `serve` killed and restarted with the pods running (same containers), and
//! nothing left after the pods are deleted (no veth, no mount, no runc state).
//!
//! The OCI runtime is the one `PODVISOR_OCI_EXECUTOR` names (`--oci-executor`: `youki`,
//! the default, `runc-run` or `runc`; `scripts/test` runs this file with `runc-run` too).
//!
//! Needs root, runc, the CNI plugins and busybox-static (`scripts/install-test-deps`).

use crate::serve_common::ServeCtx;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) fn wait_for(
    ctx: &ServeCtx,
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> bool,
) {
    let start = Instant::now();
    while !check() {
        if start.elapsed() >= limit {
            let pods = ctx.kubectl(&["get", "pods", "-A", "-o", "wide"]);
            let events = ctx.kubectl(&["get", "events", "-A"]);
            panic!(
                "timed out waiting for {what}:\n{}{}{}",
                String::from_utf8_lossy(&pods.stdout),
                String::from_utf8_lossy(&events.stdout),
                ctx.last_logs(1)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The OCI tests run one at a time: each checks the host for what its pods left behind.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The pod addresses host-local holds for sandboxes of `uids` (its files name the CNI
/// container ID, the pod UID's hex digits, on their first line). Other pods on the shared
/// bridge (another `serve` on this machine) do not count.
fn addresses_held(uids: &[String]) -> Vec<String> {
    let ids: Vec<String> = uids
        .iter()
        .map(|u| u.chars().filter(char::is_ascii_hexdigit).collect())
        .collect();
    std::fs::read_dir("/var/lib/cni/networks/podvisor")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_to_string(e.path())
                        .is_ok_and(|t| ids.iter().any(|id| t.lines().next() == Some(id)))
                })
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `--oci-executor` from `PODVISOR_OCI_EXECUTOR`, else serve's default (`youki`).
fn executor() -> String {
    std::env::var("PODVISOR_OCI_EXECUTOR")
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "youki".to_owned())
}

fn youki() -> bool {
    executor() == "youki"
}

/// `serve` with `args` and the executor under test.
pub(crate) fn start(ctx: &mut ServeCtx, args: &[&str]) {
    let executor = executor();
    let mut args = args.to_vec();
    args.extend(["--oci-executor", &executor]);
    ctx.start(&args);
}

/// The OCI runtime's state directory under serve's (`runc`, or `youki` for the embedded
/// one).
fn runtime_state(ctx: &ServeCtx) -> std::path::PathBuf {
    ctx.state().join(if youki() { "youki" } else { "runc" })
}

pub(crate) fn jsonpath(ctx: &ServeCtx, pod: &str, path: &str) -> String {
    ctx.kubectl_ok(&["get", "pod", pod, "-o", &format!("jsonpath={path}")])
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn oci_pods_run_images_with_their_own_network() {
    let _one = one_at_a_time();
    let mut ctx = ServeCtx::new("oc");
    load_busybox(&ctx, &[]);
    start(&mut ctx, &["--runtime", "oci", "--warm-sandboxes", "2"]);
    // The pods below must find the pool filled (on a loaded machine it fills after the API
    // answers).
    wait_for(&ctx, "the pool filled", Duration::from_secs(30), || {
        std::fs::read_dir(
            ctx.state()
                .join("pods")
                .join(podvisor_runtime::sandbox::pool::POOL_DIR),
        )
        .is_ok_and(|d| d.count() == 2)
    });
    let m = ctx.marker.clone();
    let host_port = std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let manifest = ctx.manifest(
        "pods",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: server
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'mkdir -p /www && echo hello-from-web > /www/index.html && exec httpd -f -p 8080 -h /www; : {m}']
    readinessProbe:
      httpGet: {{path: /index.html, port: 8080}}
      periodSeconds: 1
  - name: client
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'until wget -q -O- http://localhost:8080/index.html; do sleep 0.2; done; exec sleep 1000; : {m}']
---
apiVersion: v1
kind: Pod
metadata:
  name: peer
spec:
  containers:
  - name: app
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    args: [sleep, '1000']
---
apiVersion: v1
kind: Pod
metadata:
  name: shared
spec:
  shareProcessNamespace: true
  containers:
  - name: a
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    args: [sleep, '1001']
  - name: b
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    args: [sleep, '1002']
---
apiVersion: v1
kind: Pod
metadata:
  name: hostns
spec:
  hostPID: true
  hostIPC: true
  containers:
  - name: app
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    args: [sleep, '1003']
---
apiVersion: v1
kind: Pod
metadata:
  name: hostnet
spec:
  hostNetwork: true
  containers:
  - name: app
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    args: [sleep, '1004']
---
apiVersion: v1
kind: Pod
metadata:
  name: hp
spec:
  containers:
  - name: server
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'mkdir -p /www && echo hello-via-hostport > /www/index.html && exec httpd -f -p 8081 -h /www; : {m}']
    ports:
    - {{containerPort: 8081, hostPort: {host_port}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: cmd
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:latest
    imagePullPolicy: IfNotPresent
"#
        ),
    );
    ctx.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    wait_for(
        &ctx,
        "web Ready, peer Running",
        Duration::from_secs(60),
        || {
            let out = ctx.kubectl_ok(&["get", "pods", "--no-headers"]);
            out.lines()
                .any(|l| l.starts_with("web ") && l.contains("2/2") && l.contains("Running"))
                && out
                    .lines()
                    .any(|l| l.starts_with("peer ") && l.contains("1/1") && l.contains("Running"))
        },
    );

    // Sandboxes made ahead: a pod that can take one did (its CNI attachment is the pool's),
    // and its host name is still its own.
    let pooled = ["web", "peer"].iter().any(|pod| {
        let uid = jsonpath(&ctx, pod, "{.metadata.uid}");
        std::fs::read_to_string(ctx.state().join("pods").join(uid).join("network.json"))
            .is_ok_and(|n| n.contains("\"cni_id\":\"pool"))
    });
    assert!(pooled, "no pod took a warm sandbox");
    // A shim started ahead (a spare) served one of them, and every pod's shim shows its pod's
    // directory on its command line, as the node finds it by.
    let mut spare_served = false;
    for pod in ["web", "peer"] {
        let pod_dir = ctx
            .state()
            .join("pods")
            .join(jsonpath(&ctx, pod, "{.metadata.uid}"));
        let shim_dir = pod_dir.join("shim");
        let pid = std::fs::read_to_string(shim_dir.join("shim.pid")).unwrap();
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).unwrap();
        let args: Vec<String> = String::from_utf8_lossy(&cmdline)
            .split('\0')
            .map(str::to_owned)
            .collect();
        assert!(
            args.windows(2)
                .any(|w| w[0] == "--pod-dir" && Path::new(&w[1]) == pod_dir),
            "{pod}'s shim: {args:?}"
        );
        spare_served |= std::fs::read_to_string(shim_dir.join("shim.log"))
            .unwrap_or_default()
            .contains("started ahead of its pod");
    }
    assert!(spare_served, "no pod's shim was a spare");
    // A shim's mount namespace holds no other pod's mounts and none of the warm pool's: a
    // copy there would keep their namespaces alive after the pool and the pods let go.
    let uids: Vec<String> = ["web", "peer"]
        .iter()
        .map(|pod| jsonpath(&ctx, pod, "{.metadata.uid}"))
        .collect();
    for (i, uid) in uids.iter().enumerate() {
        let pid = std::fs::read_to_string(ctx.state().join("pods").join(uid).join("shim/shim.pid"))
            .unwrap();
        let foreign = || -> Vec<String> {
            std::fs::read_to_string(format!("/proc/{}/mountinfo", pid.trim()))
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("/sandbox-pool/") || l.contains(&uids[1 - i]))
                .map(str::to_owned)
                .collect()
        };
        let what = format!("the shim of {uid} to drop {:?}", foreign());
        wait_for(&ctx, &what, Duration::from_secs(10), || {
            foreign().is_empty()
        });
        // Its own stay: the pod's network namespace, where its next container starts.
        let table = std::fs::read_to_string(format!("/proc/{}/mountinfo", pid.trim())).unwrap();
        assert!(
            table
                .lines()
                .any(|l| l.contains(uid.as_str()) && l.contains("/ns/net ")),
            "the shim of {uid} lost its pod's network namespace: {table}"
        );
    }
    let serve = ctx.serve_pid().unwrap();
    let spares = || -> Vec<i32> {
        podvisor_testkit::all_processes()
            .into_iter()
            .filter(|p| p.ppid == serve && p.cmdline.contains("shim --spare"))
            .map(|p| p.pid)
            .collect()
    };
    wait_for(
        &ctx,
        "a spare shim waits for the next pod",
        Duration::from_secs(10),
        || spares().len() == 1,
    );
    let spare_shim = spares()[0];

    // Its own address on the bridge, its own host name and root.
    let web_ip = jsonpath(&ctx, "web", "{.status.podIP}");
    assert!(web_ip.starts_with("10.244."), "podIP {web_ip:?}");
    assert_ne!(jsonpath(&ctx, "peer", "{.status.podIP}"), web_ip);
    let hostname = ctx.kubectl_ok(&["exec", "web", "-c", "server", "--", "cat", "/etc/hostname"]);
    assert_eq!(hostname.trim(), "web");
    let root = ctx.kubectl_ok(&["exec", "web", "-c", "server", "--", "ls", "/"]);
    assert!(root.contains("www") && !root.contains("boot"), "{root}");
    // Two containers of a pod on localhost; a pod reaching another by its IP.
    let logs = ctx.kubectl_ok(&["logs", "web", "-c", "client"]);
    assert!(logs.contains("hello-from-web"), "{logs}");
    let fetched = ctx.kubectl_ok(&[
        "exec",
        "peer",
        "--",
        "wget",
        "-q",
        "-O-",
        &format!("http://{web_ip}:8080/index.html"),
    ]);
    assert_eq!(fetched.trim(), "hello-from-web");
    // A hostPort (the `portmap` plugin, which pods without one are attached without: it does
    // nothing for them) reaches its pod on the bridge's address, and is gone with the pod.
    wait_for(&ctx, "hp running", Duration::from_secs(60), || {
        ctx.kubectl_ok(&["get", "pod", "hp", "--no-headers"])
            .contains("Running")
    });
    let via_host_port = || -> std::io::Result<String> {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([10, 244, 0, 1], host_port)),
            Duration::from_secs(2),
        )?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        c.write_all(b"GET /index.html HTTP/1.0\r\n\r\n")?;
        let mut out = String::new();
        c.read_to_string(&mut out)?;
        Ok(out)
    };
    wait_for(
        &ctx,
        "the hostPort answers",
        Duration::from_secs(10),
        || via_host_port().is_ok_and(|r| r.contains("hello-via-hostport")),
    );
    ctx.kubectl_ok(&["delete", "pod", "hp", "--grace-period=0"]);
    assert!(
        !via_host_port().is_ok_and(|r| r.contains("hello-via-hostport")),
        "the hostPort still answers after its pod is gone"
    );
    // `kubectl cp` through the container's own `tar`.
    let copied = ctx.path("copied-hostname");
    ctx.kubectl_ok(&["cp", "peer:/etc/hostname", copied.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&copied).unwrap().trim(), "peer");
    // `kubectl run -i --rm`: the container's own stdin, then the pod deleted.
    let mut run = ctx.kubectl_command(&[
        "run",
        "once",
        "-i",
        "--rm",
        "--restart=Never",
        "--image=busybox:latest",
        "--image-pull-policy=IfNotPresent",
        "--command",
        "--",
        "sh",
        "-c",
        "read l; echo got $l",
    ]);
    run.stdin(std::process::Stdio::piped());
    let mut child = run.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"hello\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("got hello\n"),
        "{out:?}"
    );
    // `args` alone replace the image's CMD; neither runs CMD (`sh`, which ends at once).
    let peer_args = ctx.kubectl_ok(&["exec", "peer", "--", "cat", "/proc/1/cmdline"]);
    assert_eq!(peer_args, "sleep\u{0}1000\u{0}");
    wait_for(&ctx, "cmd completes", Duration::from_secs(30), || {
        ctx.kubectl_ok(&["get", "pod", "cmd", "--no-headers"])
            .contains("Completed")
    });
    // The image's events and the status' imageID.
    let events = ctx.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=peer",
    ]);
    assert!(
        events.contains("Container image \"busybox:latest\" already present on machine"),
        "{events}"
    );
    let image_id = jsonpath(&ctx, "peer", "{.status.containerStatuses[0].imageID}");
    assert!(image_id.starts_with("sha256:"), "imageID {image_id:?}");
    // `image: busybox` means `Always`: offline, the failed pull says the image is here and
    // what would use it (issue 33).
    ctx.kubectl_ok(&[
        "run",
        "always",
        "--restart=Never",
        "--image=busybox",
        "--command",
        "--",
        "true",
    ]);
    wait_for(
        &ctx,
        "the Always pull to fail",
        Duration::from_secs(60),
        || {
            ctx.kubectl_ok(&[
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=always,reason=Failed",
            ])
            .contains("the image is present on this node, but imagePullPolicy Always")
        },
    );
    ctx.kubectl_ok(&["delete", "pod", "always", "--grace-period=0", "--force"]);

    // The namespaces a pod shares (kubelet `NamespacesForPod`): `shareProcessNamespace` puts
    // both containers in one PID namespace whose PID 1 is the shim's holder; `hostPID` and
    // `hostIPC` are the host's; `hostNetwork` keeps a private IPC namespace.
    wait_for(
        &ctx,
        "the namespace pods run",
        Duration::from_secs(60),
        || {
            let out = ctx.kubectl_ok(&["get", "pods", "--no-headers"]);
            ["shared ", "hostns ", "hostnet "].iter().all(|p| {
                out.lines()
                    .any(|l| l.starts_with(p) && l.contains("Running") && !l.contains("0/"))
            })
        },
    );
    let init = ctx.kubectl_ok(&["exec", "shared", "-c", "b", "--", "cat", "/proc/1/cmdline"]);
    assert_eq!(init, "podvisor\u{0}shim\u{0}--pid-holder\u{0}");
    let ps = ctx.kubectl_ok(&["exec", "shared", "-c", "b", "--", "ps", "-o", "args"]);
    assert!(
        ps.contains("sleep 1001") && ps.contains("sleep 1002"),
        "the pod's processes: {ps}"
    );
    let own = ctx.kubectl_ok(&["exec", "peer", "--", "ps", "-o", "args"]);
    assert!(
        !own.contains("sleep 1001"),
        "a private PID namespace: {own}"
    );
    // `ls -l` (the image has no `readlink`): `... /proc/self/ns/pid -> pid:[4026531836]`.
    let ns = |pod: &str, kind: &str| {
        let out = ctx.kubectl_ok(&[
            "exec",
            pod,
            "--",
            "ls",
            "-l",
            &format!("/proc/self/ns/{kind}"),
        ]);
        out.rsplit("-> ")
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let host_ns = |kind: &str| {
        std::fs::read_link(format!("/proc/self/ns/{kind}"))
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(ns("hostns", "pid"), host_ns("pid"));
    assert_eq!(ns("hostns", "ipc"), host_ns("ipc"));
    assert_ne!(ns("hostns", "net"), host_ns("net"));
    assert_eq!(ns("hostnet", "net"), host_ns("net"));
    assert_ne!(ns("hostnet", "ipc"), host_ns("ipc"));
    assert_ne!(ns("hostnet", "pid"), host_ns("pid"));
    let holders = pid_holders();
    assert!(!holders.is_empty(), "no PID namespace holder runs");

    // serve killed and started again: the containers go on (same IDs, no restart).
    let ids = |ctx: &ServeCtx| jsonpath(ctx, "web", "{.status.containerStatuses[*].containerID}");
    let before = ids(&ctx);
    // ... and with image garbage collection at every second down to an empty disk: an image
    // no container uses goes, the one the pods use stays.
    let spare = ctx.path("spare-layout");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/busybox-image");
    let made = Command::new(script)
        .arg(&spare)
        .arg("spare:1")
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let loaded = image(&ctx, &["load", spare.to_str().unwrap()]);
    assert!(loaded.status.success(), "{loaded:?}");
    assert!(image_names(&ctx).contains("spare"));
    ctx.kill9();
    // The spare goes with the serve that started it, even one killed (its pipe closes).
    wait_for(
        &ctx,
        "the spare shim gone with its serve",
        Duration::from_secs(10),
        || {
            !Path::new(&format!("/proc/{spare_shim}")).exists()
                || std::fs::read_to_string(format!("/proc/{spare_shim}/stat"))
                    .is_ok_and(|s| s.contains(") Z "))
        },
    );
    start(
        &mut ctx,
        &[
            "--runtime",
            "oci",
            "--image-gc-high-threshold",
            "1",
            "--image-gc-low-threshold",
            "0",
            "--minimum-image-ttl-duration",
            "0s",
            "--image-gc-period",
            "1s",
        ],
    );
    wait_for(
        &ctx,
        "the unused image collected",
        Duration::from_secs(30),
        || !image_names(&ctx).contains("spare"),
    );
    assert!(
        image_names(&ctx).contains("busybox"),
        "the image in use was collected"
    );
    wait_for(&ctx, "web Ready again", Duration::from_secs(30), || {
        ctx.kubectl_ok(&["get", "pod", "web", "--no-headers"])
            .contains("2/2")
    });
    assert_eq!(ids(&ctx), before);
    assert_eq!(
        jsonpath(&ctx, "web", "{.status.containerStatuses[*].restartCount}"),
        "0 0"
    );
    let fetched = ctx.kubectl_ok(&[
        "exec",
        "peer",
        "--",
        "wget",
        "-q",
        "-O-",
        &format!("http://{web_ip}:8080/index.html"),
    ]);
    assert_eq!(fetched.trim(), "hello-from-web");

    // A sandbox lost while serve was down (its shim killed): the pod gets a new one, and
    // runc's state of the old container is deleted.
    let old_peer = jsonpath(&ctx, "peer", "{.status.containerStatuses[0].containerID}");
    let old_peer = old_peer.rsplit("://").next().unwrap().to_owned();
    let uid = jsonpath(&ctx, "peer", "{.metadata.uid}");
    ctx.kill9();
    let shim_pid =
        std::fs::read_to_string(ctx.state().join("pods").join(&uid).join("shim/shim.pid")).unwrap();
    let killed = Command::new("kill")
        .args(["-9", shim_pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(
        runc_ids(&ctx).contains(&old_peer),
        "runc knows the container"
    );
    start(&mut ctx, &["--runtime", "oci"]);
    wait_for(&ctx, "peer restarted", Duration::from_secs(60), || {
        jsonpath(&ctx, "peer", "{.status.containerStatuses[0].restartCount}") == "1"
            && jsonpath(&ctx, "peer", "{.status.containerStatuses[0].ready}") == "true"
    });
    assert!(
        !runc_ids(&ctx).contains(&old_peer),
        "runc state of the lost container is left"
    );

    // The pod subnet is masqueraded by one node-wide chain, installed once however many
    // times serve started.
    let nat = Command::new("iptables")
        .args(["-w", "-t", "nat", "-S"])
        .output()
        .unwrap();
    let nat = String::from_utf8_lossy(&nat.stdout);
    let jumps = nat
        .lines()
        .filter(|l| l.starts_with("-A POSTROUTING -s 10.244.0.0/16") && l.contains("PODVISOR-MASQ"))
        .count();
    assert_eq!(jumps, 1, "{nat}");
    assert!(
        nat.contains("-A PODVISOR-MASQ") && nat.contains("-j MASQUERADE"),
        "{nat}"
    );

    // Nothing is left of deleted pods.
    let uids: Vec<String> = ctx
        .kubectl_ok(&["get", "pods", "-o", "jsonpath={.items[*].metadata.uid}"])
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert!(
        !addresses_held(&uids).is_empty(),
        "host-local records the pods' addresses"
    );
    ctx.kubectl_ok(&["delete", "pods", "--all", "--grace-period=1"]);
    wait_for(&ctx, "the pods are gone", Duration::from_secs(60), || {
        ctx.kubectl_ok(&["get", "pods", "--no-headers"])
            .trim()
            .is_empty()
    });
    assert_eq!(
        addresses_held(&uids),
        Vec::<String>::new(),
        "pod addresses left"
    );
    // Nothing but the pods directory's own mount (`sandbox::pods_mount`), which goes when the
    // agent stops with no pod left (checked below).
    let left = ctx.pod_mounts();
    assert!(left.is_empty(), "mounts left: {left:?}");
    let runc_state: Vec<_> = std::fs::read_dir(runtime_state(&ctx))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(runc_state.is_empty(), "runc state left: {runc_state:?}");
    // (The warm pool's directory is no pod's.)
    let pods_left: Vec<_> = std::fs::read_dir(ctx.state().join("pods"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name())
                .filter(|n| n != podvisor_runtime::sandbox::pool::POOL_DIR)
                .collect()
        })
        .unwrap_or_default();
    assert!(pods_left.is_empty(), "pod directories left: {pods_left:?}");
    // The OCI runtime made each pod's cgroup in every v1 hierarchy (cpu, cpuset, pids, ...):
    // none is left in any.
    let cgroups_left: Vec<_> = podvisor_runtime::cgroup::hierarchy_roots()
        .iter()
        .flat_map(|root| uids.iter().map(move |uid| root.join("podvisor").join(uid)))
        .filter(|dir| dir.exists())
        .collect();
    assert!(
        cgroups_left.is_empty(),
        "pod cgroups left: {cgroups_left:?}"
    );
    // A serve started with warm sandboxes and stopped releases them (those of the serve
    // killed above went at the next start).
    ctx.stop(Duration::from_secs(30));
    start(&mut ctx, &["--runtime", "oci", "--warm-sandboxes", "2"]);
    wait_for(&ctx, "the pool filled", Duration::from_secs(30), || {
        std::fs::read_dir(
            ctx.state()
                .join("pods")
                .join(podvisor_runtime::sandbox::pool::POOL_DIR),
        )
        .is_ok_and(|d| d.count() == 2)
    });
    let serve_pid = ctx.serve_pid().unwrap();
    assert_eq!(ctx.stop(Duration::from_secs(30)), Some(0));
    let pool_left: Vec<_> = std::fs::read_dir(
        ctx.state()
            .join("pods")
            .join(podvisor_runtime::sandbox::pool::POOL_DIR),
    )
    .map(|d| d.flatten().map(|e| e.file_name()).collect())
    .unwrap_or_default();
    assert!(pool_left.is_empty(), "pooled sandboxes left: {pool_left:?}");
    // With no pod left, the pods directory's own mount (`sandbox::pods_mount`) went too: the
    // host's mount table is as it was.
    let mounted = podvisor_testkit::mount_points_under(&ctx.state().join("pods"));
    assert!(mounted.is_empty(), "mounts left: {mounted:?}");
    let pool_addresses: Vec<String> = std::fs::read_dir("/var/lib/cni/networks/podvisor")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_to_string(e.path())
                        .is_ok_and(|t| t.starts_with(&format!("pool{serve_pid:x}")))
                })
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        pool_addresses.is_empty(),
        "pool addresses left: {pool_addresses:?}"
    );
    let left: Vec<_> = holders
        .iter()
        .filter(|pid| Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    assert!(left.is_empty(), "PID namespace holders left: {left:?}");
}

/// The containers runc has state of (`runc --root <state>/runc list`; youki's: its state
/// directory's entries, one per container).
fn runc_ids(ctx: &ServeCtx) -> String {
    if youki() {
        return std::fs::read_dir(runtime_state(ctx))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned() + "\n")
                    .collect()
            })
            .unwrap_or_default();
    }
    let out = Command::new("runc")
        .arg("--root")
        .arg(ctx.state().join("runc"))
        .args(["list", "-q"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Checks the tools the oci runtime needs, then makes the busybox image
/// (`scripts/busybox-image ARGS`) and loads it into `ctx`'s store (before `serve` starts).
pub(crate) fn load_busybox(ctx: &ServeCtx, image_args: &[&str]) {
    for tool in ["/usr/sbin/runc", "/usr/lib/cni/bridge", "/bin/busybox"] {
        assert!(
            Path::new(tool).exists(),
            "{tool} is missing: run scripts/install-test-deps as root"
        );
    }
    let layout = ctx.path("busybox-layout");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/busybox-image");
    let made = Command::new(script)
        .args(image_args)
        .arg(&layout)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let loaded = image(ctx, &["load", "-i", layout.to_str().unwrap()]);
    assert!(loaded.status.success(), "{loaded:?}");
}

/// `podvisor image ARGS --state-dir <serve's>`.
pub(crate) fn image(ctx: &ServeCtx, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_podvisor"))
        .arg("image")
        .args(args)
        .arg("--state-dir")
        .arg(ctx.state())
        .output()
        .unwrap()
}

/// What `podvisor image ls` lists.
fn image_names(ctx: &ServeCtx) -> String {
    let out = image(ctx, &["ls"]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The processes that are PID namespace holders (`podvisor shim --pid-holder`).
fn pid_holders() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.ends_with(b"shim\0--pid-holder\0"))
        })
        .collect()
}

/// `kubectl debug --target` in the `oci` class (A14; the kubelet's `TARGET` PID namespace): the
/// debugger, a runc container of its own image, joins the PID namespace of the target's
/// init process, so `ps` shows the app (as PID 1) and itself; without `--target` it has its
/// own. `kubectl debug -it` gives a shell on a terminal; `kubectl logs -c` and
/// `ephemeralContainerStatuses` follow; deleting the pod stops it.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn oci_kubectl_debug_joins_the_target_pid_namespace() {
    let _one = one_at_a_time();
    let mut ctx = ServeCtx::new("od");
    load_busybox(&ctx, &[]);
    start(&mut ctx, &["--runtime", "oci"]);
    let m = ctx.marker.clone();
    let manifest = ctx.manifest(
        "app",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: app
spec:
  containers:
  - name: app
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'exec sleep 1003; : {m}']
"#
        ),
    );
    ctx.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    wait_for(&ctx, "the app runs", Duration::from_secs(60), || {
        ctx.kubectl_ok(&["get", "pod", "app", "--no-headers"])
            .contains("Running")
    });
    let status = |name: &str, field: &str| {
        jsonpath(
            &ctx,
            "app",
            &format!("{{.status.ephemeralContainerStatuses[?(@.name==\"{name}\")]{field}}}"),
        )
    };
    for (name, target) in [("targeted", true), ("alone", false)] {
        let mut args = vec![
            "debug",
            "app",
            "--image=busybox:latest",
            "--image-pull-policy=IfNotPresent",
            "-c",
            name,
        ];
        if target {
            args.push("--target=app");
        }
        args.extend(["--", "ps", "-o", "pid,args"]);
        ctx.kubectl_ok(&args);
        wait_for(&ctx, "the debugger ends", Duration::from_secs(60), || {
            status(name, ".state.terminated.exitCode") == "0"
        });
        let ps = ctx.kubectl_ok(&["logs", "app", "-c", name]);
        if target {
            assert!(
                ps.lines().any(|l| l.trim() == "1 sleep 1003"),
                "the target's PID namespace: {ps}"
            );
        } else {
            assert!(
                !ps.contains("sleep 1003"),
                "a PID namespace of its own: {ps}"
            );
        }
        assert!(ps.contains("ps -o pid,args"), "{ps}");
    }
    // `kubectl debug -it` (a terminal through `script`, kubectl needs one for -t).
    if Path::new("/usr/bin/script").exists() {
        let line = format!(
            "stty rows 23 cols 71; {} --kubeconfig {} --cache-dir {} debug -it app --image=busybox:latest --image-pull-policy=IfNotPresent --target=app -c shell -- sh",
            serve_common_kubectl().display(),
            ctx.kubeconfig().display(),
            ctx.dir.join("cache-it").display()
        );
        let mut child = Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_for(&ctx, "the shell runs", Duration::from_secs(60), || {
            !status("shell", ".state.running.startedAt").is_empty()
        });
        std::thread::sleep(Duration::from_secs(2));
        let mut keys = child.stdin.take().unwrap();
        use std::io::Write;
        keys.write_all(b"stty size; ps -o args | grep -c 'sleep 1003'; exit 5\r")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        drop(keys);
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(shown.contains("23 71\r\n"), "{shown:?}");
        wait_for(&ctx, "the shell ends", Duration::from_secs(30), || {
            status("shell", ".state.terminated.exitCode") == "5"
        });
    }
    assert_eq!(status("targeted", ".restartCount"), "0");
    assert_eq!(
        jsonpath(&ctx, "app", "{.status.containerStatuses[0].ready}"),
        "true"
    );
    ctx.kubectl_ok(&["delete", "pod", "app", "--grace-period=1"]);
    wait_for(&ctx, "the pod is gone", Duration::from_secs(60), || {
        ctx.kubectl_ok(&["get", "pods", "--no-headers"])
            .trim()
            .is_empty()
    });
    let runc_state: Vec<_> = std::fs::read_dir(runtime_state(&ctx))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(runc_state.is_empty(), "runc state left: {runc_state:?}");
}

fn serve_common_kubectl() -> std::path::PathBuf {
    crate::serve_common::kubectl_binary()
}

/// The parent pid of `pid` (field 4 of `/proc/<pid>/stat`, after the parenthesised name).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A pod's PID namespace holder (`shareProcessNamespace`) dies with its shim: the shim
/// SIGKILLed while serve is down (no chance to kill it itself, no agent to clean up), the
/// kernel kills the holder (`PR_SET_PDEATHSIG`),
/// so no orphan `podvisor shim --pid-holder` is left holding a namespace, and with it the
/// pod's processes in that namespace. The holder outlived the connection that started it
/// (the death signal follows the shim's holders' thread, not that connection's), and with
/// serve back the pod comes back with a new shim and a new holder.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn oci_pid_holder_dies_with_its_shim() {
    let _one = one_at_a_time();
    let mut ctx = ServeCtx::new("oh");
    load_busybox(&ctx, &[]);
    start(&mut ctx, &["--runtime", "oci"]);
    let m = ctx.marker.clone();
    let manifest = ctx.manifest(
        "shared",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: shared
spec:
  shareProcessNamespace: true
  containers:
  - name: a
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'exec sleep 1004; : {m}']
"#
        ),
    );
    ctx.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    wait_for(&ctx, "the pod runs", Duration::from_secs(60), || {
        ctx.kubectl_ok(&["get", "pod", "shared", "--no-headers"])
            .contains("Running")
    });
    // This serve's holder: the one whose parent is a shim of this test's state directory.
    let state = ctx.state().to_string_lossy().into_owned();
    let ours = || -> Vec<(u32, u32)> {
        pid_holders()
            .into_iter()
            .filter_map(|holder| {
                let shim = parent_of(holder)?;
                let cmdline = std::fs::read(format!("/proc/{shim}/cmdline")).ok()?;
                String::from_utf8_lossy(&cmdline)
                    .contains(&state)
                    .then_some((holder, shim))
            })
            .collect()
    };
    let first = ours();
    assert_eq!(first.len(), 1, "one holder for the pod: {first:?}");
    let (holder, shim) = first[0];
    // The start's connection has ended by now; the holder lives on.
    std::thread::sleep(Duration::from_millis(500));
    assert!(pid_holders().contains(&holder), "the holder died early");
    // serve down first: nothing of the agent's (which kills a dead shim's process group
    // when it sees it) may do the kernel's work.
    ctx.kill9();
    let killed = Command::new("kill")
        .args(["-KILL", &shim.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    wait_for(
        &ctx,
        "the holder gone with its shim",
        Duration::from_secs(10),
        || !pid_holders().contains(&holder),
    );
    start(&mut ctx, &["--runtime", "oci"]);
    wait_for(
        &ctx,
        "the pod back with a new shim and holder",
        Duration::from_secs(90),
        || {
            let now = ours();
            now.len() == 1 && now[0].1 != shim
        },
    );
    ctx.kubectl_ok(&["delete", "pod", "shared", "--grace-period=1"]);
    wait_for(&ctx, "the pod is gone", Duration::from_secs(60), || {
        ctx.kubectl_ok(&["get", "pods", "--no-headers"])
            .trim()
            .is_empty()
    });
    assert!(ours().is_empty(), "holders left: {:?}", ours());
}

/// R18: an exec probe that times out is killed with everything it started, under every executor:
/// a killed `runc exec` leaves its process running (re-parented to the shim), which the shim
/// then kills through its pid file; youki's exec dies with its helper. So probes that time
/// out every second never pile up.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn r18_oci_exec_probes_that_time_out_leave_no_process_behind() {
    let _one = one_at_a_time();
    let mut ctx = ServeCtx::new("oet");
    load_busybox(&ctx, &[]);
    start(&mut ctx, &["--runtime", "oci"]);
    // A duration no other test uses: the probe's processes are found by it.
    let seconds = 40_000 + std::process::id() % 9_999;
    let manifest = ctx.manifest(
        "slow",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: slow
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'exec sleep 1004; : {m}']
    readinessProbe:
      exec: {{command: [sleep, '{seconds}']}}
      timeoutSeconds: 1
      periodSeconds: 1
"#,
            m = ctx.marker
        ),
    );
    ctx.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    let probe_processes = || {
        podvisor_testkit::procs::all_processes()
            .into_iter()
            .filter(|p| !p.is_zombie() && p.cmdline == format!("sleep {seconds}"))
            .count()
    };
    wait_for(
        &ctx,
        "three probe timeouts",
        Duration::from_secs(60),
        || {
            let events =
                ctx.kubectl_ok(&["get", "events", "--field-selector=involvedObject.name=slow"]);
            events.contains("Readiness probe errored") || events.contains("Unhealthy")
        },
    );
    std::thread::sleep(Duration::from_secs(5));
    // At most the probe in flight.
    let running = probe_processes();
    assert!(running <= 1, "{running} timed-out probes still run");
    ctx.kubectl_ok(&["delete", "pod", "slow", "--wait=true"]);
    assert_eq!(probe_processes(), 0);
    assert_eq!(ctx.stop(Duration::from_secs(10)), Some(0));
}

/// youki's helper started ahead (`podvisor youki ahead`) carries out the call it is sent as
/// `podvisor youki <arguments>` would, with the call's standard I/O (its error reaches the
/// caller's pipe and its log, its exit status is the command's), exits 0, doing nothing,
/// when its socket ends with no call, and is killed by its handle. No root needed: the call
/// is a `state` of nothing.
#[test]
fn youki_helper_started_ahead_runs_its_call_with_the_calls_stdio() {
    use podvisor_runtime::oci::ahead::Ahead;
    use std::io::Read;
    use std::os::fd::AsFd;
    let dir = std::env::temp_dir().join(format!("pv-ahead-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let helper = std::path::Path::new(env!("CARGO_BIN_EXE_podvisor"));
    let ahead = Ahead::spawn(helper, "/usr/bin:/bin").unwrap();
    // Called at once: the call waits in the socket while the helper starts.
    let (mut errors, errors_w) = std::io::pipe().unwrap();
    let null = std::fs::File::open("/dev/null").unwrap();
    let log = dir.join("state.json");
    let args = state_of_nothing(&dir, &log);
    let ns = std::fs::File::open("/proc/self/ns/mnt").unwrap();
    ahead
        .call(
            &args,
            [null.as_fd(), null.as_fd(), errors_w.as_fd()],
            ns.as_fd(),
        )
        .unwrap();
    drop(errors_w);
    let status = ahead.wait().unwrap();
    let mut stderr = String::new();
    errors.read_to_string(&mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("podvisor youki state") && stderr.contains("\"nope\" does not exist"),
        "{stderr}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains(r#""level":"error""#) && logged.contains("does not exist"),
        "{logged}"
    );
    // Let go uncalled.
    let idle = Ahead::spawn(helper, "/usr/bin:/bin").unwrap();
    let mut child = idle.let_go();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    // Killed (through its pidfd).
    let mut killed = Ahead::spawn(helper, "/usr/bin:/bin").unwrap();
    killed.kill();
    let status = killed.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A helper started ahead runs its call in the caller's mount namespace (a spare shim starts
/// it before it makes its own): called from a thread with a mount namespace of its own, the
/// helper writes its log into a tmpfs mounted only there, and nothing into the directory
/// beneath it.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn youki_helper_started_ahead_joins_its_callers_mount_namespace() {
    use podvisor_runtime::oci::ahead::Ahead;
    use std::os::fd::AsFd;
    let dir = std::env::temp_dir().join(format!("pv-ahead-ns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let helper = std::path::Path::new(env!("CARGO_BIN_EXE_podvisor"));
    // Started here, in the test's namespace.
    let ahead = Ahead::spawn(helper, "/usr/bin:/bin").unwrap();
    let log = dir.join("state.json");
    let inside = {
        let (dir, log) = (dir.clone(), log.clone());
        std::thread::spawn(move || -> String {
            // SAFETY: this thread only; it shares nothing with the others from here on.
            #[allow(unsafe_code)]
            unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }.unwrap();
            rustix::mount::mount_change(
                "/",
                rustix::mount::MountPropagationFlags::PRIVATE
                    | rustix::mount::MountPropagationFlags::REC,
            )
            .unwrap();
            rustix::mount::mount(
                "tmpfs",
                &dir,
                "tmpfs",
                rustix::mount::MountFlags::empty(),
                None,
            )
            .unwrap();
            let ns = std::fs::File::open("/proc/thread-self/ns/mnt").unwrap();
            let null = std::fs::File::open("/dev/null").unwrap();
            let args = state_of_nothing(&dir, &log);
            ahead
                .call(
                    &args,
                    [null.as_fd(), null.as_fd(), null.as_fd()],
                    ns.as_fd(),
                )
                .unwrap();
            assert_eq!(ahead.wait().unwrap().code(), Some(1));
            std::fs::read_to_string(&log).unwrap_or_default()
        })
        .join()
        .unwrap()
    };
    assert!(
        inside.contains("does not exist"),
        "log in the tmpfs: {inside:?}"
    );
    assert!(
        !log.exists(),
        "the helper wrote outside its caller's namespace"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A helper call (what follows `podvisor youki`) that fails the same way everywhere, without
/// root: the `state` of container `nope`, under `<dir>/youki`, its error logged to `log`.
fn state_of_nothing(dir: &std::path::Path, log: &std::path::Path) -> Vec<std::ffi::OsString> {
    vec![
        "--root".into(),
        dir.join("youki").into(),
        "--log".into(),
        log.into(),
        "--log-format".into(),
        "json".into(),
        "state".into(),
        "nope".into(),
    ]
}
