//! Pod Security Admission under `podvisor serve`, through the real kubectl: namespaces
//! labelled `pod-security.kubernetes.io/enforce|warn` refuse or warn about pods with the API
//! server's text, an unlabelled namespace is `privileged`, a stricter enforce label warns
//! about the running pods that violate it, and a bad label value is refused.

use crate::serve_common::ServeCtx;
use std::time::{Duration, Instant};

fn wait_phase(ctx: &ServeCtx, ns: &str, pod: &str, phase: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = ctx.kubectl(&[
            "-n",
            ns,
            "get",
            "pod",
            pod,
            "-o",
            "jsonpath={.status.phase}",
        ]);
        if String::from_utf8_lossy(&out.stdout) == phase {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {ns}/{pod} to be {phase}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The escape of issue 31: a privileged container with the host's root mounted.
fn privileged_host_root(name: &str, marker: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: c
    image: busybox
    command: [sleep, "300"]
    args: ["{marker}"]
    securityContext:
      privileged: true
    volumeMounts:
    - {{name: root, mountPath: /host}}
  volumes:
  - name: root
    hostPath: {{path: /}}
"#
    )
}

fn plain(name: &str, marker: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: c
    image: busybox
    command: [sleep, "300"]
    args: ["{marker}"]
"#
    )
}

/// A pod the restricted level admits.
fn compliant(name: &str, marker: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  securityContext:
    runAsNonRoot: true
    runAsUser: 65534
    seccompProfile: {{type: RuntimeDefault}}
  containers:
  - name: c
    image: busybox
    command: [sleep, "300"]
    args: ["{marker}"]
    securityContext:
      allowPrivilegeEscalation: false
      capabilities: {{drop: [ALL]}}
"#
    )
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const RESTRICTED_PLAIN: &str = r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#;

#[test]
#[ignore = "needs root"]
fn enforce_refuses_with_the_api_servers_text_and_admits_compliant_pods() {
    let mut ctx = ServeCtx::new("psaenf");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    ctx.kubectl_ok(&["create", "namespace", "base"]);
    ctx.kubectl_ok(&[
        "label",
        "namespace",
        "base",
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    let escape = ctx.manifest("escape", &privileged_host_root("escape", &m));
    let out = ctx.kubectl(&["-n", "base", "create", "-f", escape.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            r#"Error from server (Forbidden): error when creating "#
        ) && stderr(&out).contains(
            r#"pods "escape" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "root"), privileged (container "c" must not set securityContext.privileged=true)"#
        ),
        "{}",
        stderr(&out)
    );

    ctx.kubectl_ok(&["create", "namespace", "strict"]);
    ctx.kubectl_ok(&[
        "label",
        "namespace",
        "strict",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    let busybox = ctx.manifest("busybox", &plain("busybox", &m));
    let out = ctx.kubectl(&["-n", "strict", "create", "-f", busybox.to_str().unwrap()]);
    assert!(!out.status.success());
    let expected = format!(
        r#"pods "busybox" is forbidden: violates PodSecurity "restricted:latest": {RESTRICTED_PLAIN}"#
    );
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
    let ok = ctx.manifest("ok", &compliant("ok", &m));
    let out = ctx.kubectl(&["-n", "strict", "create", "-f", ok.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Warning"), "{}", stderr(&out));
    wait_phase(&ctx, "strict", "ok", "Running");
}

#[test]
#[ignore = "needs root"]
fn warn_creates_the_pod_with_a_warning_and_unlabelled_namespaces_are_privileged() {
    let mut ctx = ServeCtx::new("psawarn");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    ctx.kubectl_ok(&["create", "namespace", "warned"]);
    ctx.kubectl_ok(&[
        "label",
        "namespace",
        "warned",
        "pod-security.kubernetes.io/warn=restricted",
    ]);
    let busybox = ctx.manifest("busybox", &plain("busybox", &m));
    let out = ctx.kubectl(&["-n", "warned", "create", "-f", busybox.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let expected =
        format!(r#"Warning: would violate PodSecurity "restricted:latest": {RESTRICTED_PLAIN}"#);
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("pod/busybox created"));
    wait_phase(&ctx, "warned", "busybox", "Running");

    // Unlabelled: privileged, the escape's pod is admitted and runs.
    let escape = ctx.manifest("escape", &privileged_host_root("escape", &m));
    let out = ctx.kubectl(&["create", "-f", escape.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("PodSecurity"), "{}", stderr(&out));
    wait_phase(&ctx, "default", "escape", "Running");
}

#[test]
#[ignore = "needs root"]
fn a_stricter_enforce_label_warns_about_running_pods_and_bad_values_are_refused() {
    let mut ctx = ServeCtx::new("psalabel");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    ctx.kubectl_ok(&["create", "namespace", "team"]);
    let web = ctx.manifest("web", &plain("web", &m));
    ctx.kubectl_ok(&["-n", "team", "create", "-f", web.to_str().unwrap()]);
    wait_phase(&ctx, "team", "web", "Running");

    let out = ctx.kubectl(&[
        "label",
        "namespace",
        "team",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("namespace/team labeled"));
    assert_eq!(
        stderr(&out),
        "Warning: existing pods in namespace \"team\" violate the new PodSecurity enforce level \"restricted:latest\"\n\
         Warning: web: allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile\n"
    );
    // The running pod is left alone; an update that changes its image is evaluated and
    // refused, one that changes its labels is not evaluated.
    wait_phase(&ctx, "team", "web", "Running");
    let out = ctx.kubectl(&["-n", "team", "set", "image", "pod/web", "c=busybox:1.36"]);
    assert!(!out.status.success());
    let expected = format!(
        r#"pods "web" is forbidden: violates PodSecurity "restricted:latest": {RESTRICTED_PLAIN}"#
    );
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
    ctx.kubectl_ok(&["-n", "team", "label", "pod", "web", "tier=web"]);

    let out = ctx.kubectl(&[
        "label",
        "namespace",
        "team",
        "pod-security.kubernetes.io/warn=bogus",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"The Namespace "team" is invalid: metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "bogus": must be one of privileged, baseline, restricted"#),
        "{}",
        stderr(&out)
    );
    let bad = ctx.manifest(
        "badns",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bad\n  labels:\n    pod-security.kubernetes.io/enforce-version: v1.x\n",
    );
    let out = ctx.kubectl(&["create", "-f", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"Namespace "bad" is invalid: metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "v1.x": must be "latest" or "v1.x""#),
        "{}",
        stderr(&out)
    );
}
