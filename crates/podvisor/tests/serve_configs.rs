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
