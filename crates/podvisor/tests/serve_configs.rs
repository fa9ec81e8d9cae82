//! ConfigMaps and Secrets as pods use them under `podvisor serve`, driven by the real kubectl:
//! `env[].valueFrom` and `envFrom` (with a prefix), a start blocked on a missing ConfigMap
//! (`CreateContainerConfigError`, `configmap "x" not found`) that goes on by itself once the
//! ConfigMap is created.

use crate::serve_common::ServeCtx;
use std::time::{Duration, Instant};

fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<String>) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn jsonpath(ctx: &ServeCtx, pod: &str, path: &str) -> String {
    let out = ctx.kubectl(&["get", "pod", pod, "-o", &format!("jsonpath={path}")]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn pod(name: &str, marker: &str, env: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'env | sort > /tmp/{marker}-{name}.env; : {marker}']
{env}"#
    )
}

#[test]
#[ignore = "needs root"]
fn env_from_configmaps_and_secrets() {
    let mut ctx = ServeCtx::new("cfgenv");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    ctx.kubectl_ok(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=fast",
        "--from-literal=level=3",
    ]);
    ctx.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "--from-literal=password=s3cret",
    ]);
    let env = r#"    envFrom:
    - prefix: CFG_
      configMapRef: {name: settings}
    - secretRef: {name: creds}
    - configMapRef: {name: absent, optional: true}
    env:
    - name: MODE
      valueFrom: {configMapKeyRef: {name: settings, key: mode}}
    - name: PASS
      valueFrom: {secretKeyRef: {name: creds, key: password}}
    - name: NONE
      valueFrom: {configMapKeyRef: {name: settings, key: nope, optional: true}}
    - name: BOTH
      value: $(MODE)-$(CFG_level)
"#;
    let file = ctx.manifest("envpod", &pod("envpod", &m, env));
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    wait_for("envpod to succeed", Duration::from_secs(30), || {
        (jsonpath(&ctx, "envpod", "{.status.phase}") == "Succeeded").then_some(String::new())
    });
    let env = std::fs::read_to_string(format!("/tmp/{m}-envpod.env")).unwrap();
    let _ = std::fs::remove_file(format!("/tmp/{m}-envpod.env"));
    for line in [
        "CFG_mode=fast",
        "CFG_level=3",
        "password=s3cret",
        "MODE=fast",
        "PASS=s3cret",
        "BOTH=fast-3",
    ] {
        assert!(
            env.lines().any(|l| l == line),
            "{line} missing from:\n{env}"
        );
    }
    assert!(!env.contains("NONE="), "{env}");
    // The secret's value is in no event and no log line of serve.
    let events = ctx.kubectl_ok(&["get", "events", "-o", "json"]);
    assert!(!events.contains("s3cret"));
    assert!(ctx.grep_logs("s3cret").is_empty());
}

#[test]
#[ignore = "needs root"]
fn a_missing_configmap_blocks_the_start_until_it_exists() {
    let mut ctx = ServeCtx::new("cfgwait");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    let env = "    env:\n    - name: MODE\n      valueFrom: {configMapKeyRef: {name: later, key: mode}}\n";
    let file = ctx.manifest("waiter", &pod("waiter", &m, env));
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let reason = wait_for(
        "CreateContainerConfigError",
        Duration::from_secs(30),
        || {
            let r = jsonpath(
                &ctx,
                "waiter",
                "{.status.containerStatuses[0].state.waiting.reason}",
            );
            (r == "CreateContainerConfigError").then_some(r)
        },
    );
    assert_eq!(reason, "CreateContainerConfigError");
    assert_eq!(
        jsonpath(
            &ctx,
            "waiter",
            "{.status.containerStatuses[0].state.waiting.message}"
        ),
        "configmap \"later\" not found"
    );
    let events = ctx.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=Failed",
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert!(
        events.contains("Error: configmap \"later\" not found"),
        "{events}"
    );
    ctx.kubectl_ok(&["create", "configmap", "later", "--from-literal=mode=now"]);
    wait_for(
        "the pod to run once the ConfigMap exists",
        Duration::from_secs(40),
        || (jsonpath(&ctx, "waiter", "{.status.phase}") == "Succeeded").then_some(String::new()),
    );
    let env = std::fs::read_to_string(format!("/tmp/{m}-waiter.env")).unwrap();
    let _ = std::fs::remove_file(format!("/tmp/{m}-waiter.env"));
    assert!(env.lines().any(|l| l == "MODE=now"), "{env}");
}

#[test]
#[ignore = "needs root"]
fn configmap_and_secret_volumes_follow_their_objects() {
    let mut ctx = ServeCtx::new("cfgvol");
    ctx.start(&["--sync-frequency", "1s"]);
    let m = ctx.marker.clone();
    ctx.kubectl_ok(&[
        "create",
        "configmap",
        "site",
        "--from-literal=index.html=v1",
        "--from-literal=other=x",
    ]);
    ctx.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "keys",
        "--from-literal=token=t0p",
    ]);
    let out = format!("/tmp/{m}-vol");
    std::fs::create_dir_all(&out).unwrap();
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: vols
spec:
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'while true; do cat /site/index.html > {out}/live.tmp; mv {out}/live.tmp {out}/live; cat /pinned > {out}/pinned; stat -c "%a" /keys/..data/token /site/..data/index.html > {out}/modes; mount | grep " /keys " > {out}/keys-mount; ls /items > {out}/items; sleep 0.2; done; : {m}']
    volumeMounts:
    - {{name: site, mountPath: /site}}
    - {{name: site, mountPath: /pinned, subPath: index.html}}
    - {{name: keys, mountPath: /keys}}
    - {{name: items, mountPath: /items}}
  volumes:
  - name: site
    configMap: {{name: site}}
  - name: keys
    secret: {{secretName: keys, defaultMode: 0400}}
  - name: items
    configMap:
      name: site
      items: [{{key: other, path: renamed}}]
"#
    );
    let file = ctx.manifest("vols", &manifest);
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let read = |f: &str| std::fs::read_to_string(format!("{out}/{f}")).unwrap_or_default();
    wait_for("the volumes to be read", Duration::from_secs(30), || {
        (read("live") == "v1").then_some(String::new())
    });
    assert_eq!(read("pinned"), "v1");
    assert_eq!(
        read("modes").split_whitespace().collect::<Vec<_>>(),
        ["400", "644"]
    );
    assert!(
        read("keys-mount").contains("tmpfs"),
        "{}",
        read("keys-mount")
    );
    assert_eq!(read("items").trim(), "renamed");
    ctx.kubectl_ok(&[
        "patch",
        "configmap",
        "site",
        "-p",
        r#"{"data":{"index.html":"v2"}}"#,
    ]);
    wait_for(
        "the update to reach the running pod",
        Duration::from_secs(20),
        || (read("live") == "v2").then_some(String::new()),
    );
    // A subPath mount keeps what it bound.
    assert_eq!(read("pinned"), "v1");
    ctx.kubectl_ok(&["delete", "pod", "vols", "--grace-period=1"]);
    // The secret's tmpfs goes with the pod.
    let left = ctx.pod_mounts();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
#[ignore = "needs root"]
fn a_missing_volume_object_is_a_failed_mount_until_it_exists() {
    let mut ctx = ServeCtx::new("cfgmnt");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: mnt}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'cat /cfg/k > /tmp/{m}-mnt; : {m}']\n    volumeMounts: [{{name: cfg, mountPath: /cfg}}]\n  volumes:\n  - name: cfg\n    configMap: {{name: later}}\n"
    );
    let file = ctx.manifest("mnt", &manifest);
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let msg = wait_for("FailedMount", Duration::from_secs(30), || {
        let out = ctx.kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            "reason=FailedMount",
            "-o",
            "jsonpath={.items[*].message}",
        ]);
        (!out.is_empty()).then_some(out)
    });
    assert!(
        msg.contains("MountVolume.SetUp failed for volume \"cfg\" : configmap \"later\" not found"),
        "{msg}"
    );
    assert_eq!(
        jsonpath(
            &ctx,
            "mnt",
            "{.status.containerStatuses[0].state.waiting.reason}"
        ),
        "ContainerCreating"
    );
    ctx.kubectl_ok(&["create", "configmap", "later", "--from-literal=k=here"]);
    wait_for(
        "the pod to run once the ConfigMap exists",
        Duration::from_secs(40),
        || (jsonpath(&ctx, "mnt", "{.status.phase}") == "Succeeded").then_some(String::new()),
    );
    assert_eq!(
        std::fs::read_to_string(format!("/tmp/{m}-mnt")).unwrap(),
        "here"
    );
    let _ = std::fs::remove_file(format!("/tmp/{m}-mnt"));
    // A pod still waiting for its volume can be deleted.
    let file = ctx.manifest(
        "stuck",
        &manifest
            .replace("name: mnt", "name: stuck")
            .replace("name: later", "name: never"),
    );
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    std::thread::sleep(Duration::from_secs(2));
    ctx.kubectl_ok(&["delete", "pod", "stuck", "--timeout=30s"]);
}
