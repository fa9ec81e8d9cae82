//! RBAC under `podvisor serve` (issue 31, the container escape): a uid-65534 `oci` pod
//! reads its ServiceAccount token and, with the host's static kubectl and in-cluster
//! configuration, tries to create a privileged pod mounting the host's `/` through the API
//! at the pod network's gateway. The API server refuses with its 403 text and nothing runs.
//! A Role and RoleBinding (made with kubectl) then let the same account list pods and
//! nothing else; `kubectl auth can-i --list --as` says so; the admin kubeconfig still does
//! everything.
//!
//! Needs root, runc, the CNI plugins, busybox-static and kubectl.

use crate::oci_incluster::{run_to_completion, section};
use crate::serve_common::ServeCtx;

const SA: &str = "system:serviceaccount:apps:default";

fn script(m: &str) -> String {
    let escape = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"escape"}},"spec":{{"restartPolicy":"Never","containers":[{{"name":"c","image":"busybox:latest","imagePullPolicy":"IfNotPresent","command":["touch","/host/tmp/{m}-escaped"],"securityContext":{{"privileged":true}},"volumeMounts":[{{"name":"host","mountPath":"/host"}}]}}],"volumes":[{{"name":"host","hostPath":{{"path":"/"}}}}]}}}}"#
    );
    format!(
        r"echo BEGIN uid; id -u; echo END uid
echo BEGIN create; echo '{escape}' | /kubectl create -f - 2>&1; echo END create
echo BEGIN pods; /kubectl get pods -o name 2>&1; echo END pods
echo BEGIN secrets; /kubectl get secrets 2>&1; echo END secrets
: {m}"
    )
}

/// A busybox pod running `script` as uid 65534 with the host's kubectl at `/kubectl`.
fn pod(name: &str, kubectl: &str, script: &str) -> String {
    crate::oci_incluster::kubectl_pod(
        name,
        kubectl,
        "  securityContext: {runAsUser: 65534, runAsGroup: 65534}\n",
        script,
    )
}

fn forbidden(verb: &str, resource: &str) -> String {
    format!(
        "{resource} is forbidden: User \"{SA}\" cannot {verb} resource \"{resource}\" in API group \"\" in the namespace \"apps\""
    )
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a_pods_token_cannot_create_a_privileged_pod_and_a_binding_grants_only_its_role() {
    let mut ctx = ServeCtx::new("rbacesc");
    crate::oci::load_busybox(&ctx, &[]);
    ctx.start(&["--runtime", "oci"]);
    ctx.kubectl_ok(&["create", "namespace", "apps"]);
    let m = ctx.marker.clone();
    let escaped = std::path::PathBuf::from(format!("/tmp/{m}-escaped"));
    let kubectl = std::fs::canonicalize(podvisor_testkit::kubectl()).unwrap();
    let kubectl = kubectl.display().to_string();

    // The escape, from inside an unprivileged container on the pod network.
    let logs = run_to_completion(&ctx, &pod("intruder", &kubectl, &script(&m)), &["intruder"]);
    let logs = &logs[0];
    assert_eq!(section(logs, "uid"), ["65534"], "{logs}");
    let create = section(logs, "create").join("\n");
    assert!(
        create.contains(&format!(
            "Error from server (Forbidden): error when creating \"STDIN\": {}",
            forbidden("create", "pods")
        )),
        "{logs}"
    );
    assert!(
        section(logs, "pods")
            .join("\n")
            .contains(&forbidden("list", "pods")),
        "{logs}"
    );
    let missing = ctx.kubectl(&["get", "pod", "escape", "-n", "apps"]);
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("pods \"escape\" not found"),
        "{missing:?}"
    );
    assert!(!escaped.exists());

    // A Role that reads pods, bound to the account: pods are listed, nothing else is allowed.
    ctx.kubectl_ok(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list,watch",
        "--resource=pods",
        "-n",
        "apps",
    ]);
    ctx.kubectl_ok(&[
        "create",
        "rolebinding",
        "read-pods",
        "--role=pod-reader",
        "--serviceaccount=apps:default",
        "-n",
        "apps",
    ]);
    let list = ctx.kubectl_ok(&[
        "auth",
        "can-i",
        "--list",
        &format!("--as={SA}"),
        "-n",
        "apps",
    ]);
    assert!(
        list.lines()
            .any(|l| l.starts_with("pods ") && l.ends_with("[get list watch]")),
        "{list}"
    );
    assert!(!list.lines().any(|l| l.starts_with("secrets")), "{list}");
    let logs = run_to_completion(&ctx, &pod("reader", &kubectl, &script(&m)), &["reader"]);
    let logs = &logs[0];
    let pods = section(logs, "pods");
    assert!(
        pods.contains(&"pod/intruder") && pods.contains(&"pod/reader"),
        "{logs}"
    );
    assert!(
        section(logs, "create")
            .join("\n")
            .contains(&forbidden("create", "pods")),
        "{logs}"
    );
    assert!(
        section(logs, "secrets")
            .join("\n")
            .contains(&forbidden("list", "secrets")),
        "{logs}"
    );
    assert!(!escaped.exists());

    // The admin kubeconfig (system:masters) may do everything.
    assert_eq!(ctx.kubectl_ok(&["auth", "can-i", "*", "*"]).trim(), "yes");
    ctx.kubectl_ok(&["delete", "pod", "--all", "-n", "apps", "--wait=false"]);
    let _ = std::fs::remove_file(&escaped);
}
