//! ServiceAccounts under `podvisor serve`, with the real kubectl and the Python client:
//! the `default` account and `kube-root-ca.crt` in every namespace (new ones included), the
//! ServiceAccount admission plugin (`serviceAccountName` defaulted, an unknown account
//! forbidden, the `kube-api-access-*` projected volume mounted in every container unless
//! `automountServiceAccountToken: false`), `kubectl create token` whose token the API
//! accepts, and a process-runtime pod whose `config.load_incluster_config()` lists the pods
//! of its namespace with the mounted token, which stops working once the pod is gone.

use crate::python_client::{has_kubernetes_client, python};
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

fn jsonpath(ctx: &ServeCtx, kind_name: &[&str], path: &str) -> String {
    let mut args = vec!["get"];
    args.extend_from_slice(kind_name);
    let p = format!("jsonpath={path}");
    args.extend_from_slice(&["-o", &p]);
    String::from_utf8_lossy(&ctx.kubectl(&args).stdout).into_owned()
}

#[test]
#[ignore = "needs root"]
fn default_accounts_admission_and_kubectl_create_token() {
    let mut ctx = ServeCtx::new("sakubectl");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    let all = ctx.kubectl_ok(&["get", "serviceaccounts", "-A"]);
    for ns in ["default", "kube-system"] {
        assert!(
            all.lines()
                .any(|l| l.split_whitespace().take(3).collect::<Vec<_>>() == [ns, "default", "0"]),
            "{all}"
        );
    }
    let ca = jsonpath(&ctx, &["configmap", "kube-root-ca.crt"], "{.data.ca\\.crt}");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    ctx.kubectl_ok(&["create", "namespace", "team"]);
    assert_eq!(
        jsonpath(&ctx, &["sa", "default", "-n", "team"], "{.metadata.name}"),
        "default"
    );
    assert_eq!(
        jsonpath(
            &ctx,
            &["cm", "kube-root-ca.crt", "-n", "team"],
            "{.data.ca\\.crt}"
        ),
        ca
    );
    // CRUD of accounts like any namespaced kind.
    ctx.kubectl_ok(&["create", "serviceaccount", "robot"]);
    let described = ctx.kubectl_ok(&["describe", "sa", "robot"]);
    assert!(
        described.contains("Name:") && described.contains("robot"),
        "{described}"
    );

    // `kubectl create token`: a token the API accepts, for this account only.
    let token = ctx.kubectl_ok(&["create", "token", "robot", "--duration=15m"]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "{token}");
    // Under RBAC the account reads pods once a binding lets it.
    let denied = ctx.kubectl(&["--token", token, "get", "pods"]);
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains(
            "pods is forbidden: User \"system:serviceaccount:default:robot\" cannot list resource \"pods\""
        ),
        "{denied:?}"
    );
    ctx.grant_view("default", "robot");
    let as_robot = ctx.kubectl(&["--token", token, "get", "pods"]);
    assert!(as_robot.status.success(), "{as_robot:?}");
    let whoami = ctx.kubectl_ok(&[
        "--token",
        token,
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
    ]);
    assert_eq!(
        whoami,
        "system:serviceaccount:default:robot [\"system:serviceaccounts\",\"system:serviceaccounts:default\",\"system:authenticated\"]"
    );
    let forged = format!("{}x", token);
    let refused = ctx.kubectl(&["--token", &forged, "get", "pods"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Unauthorized"),
        "{refused:?}"
    );
    let short = ctx.kubectl(&["create", "token", "robot", "--duration=5m"]);
    assert!(
        String::from_utf8_lossy(&short.stderr)
            .contains("may not specify a duration less than 10 minutes"),
        "{short:?}"
    );
    let missing = ctx.kubectl(&["create", "token", "nobody"]);
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("serviceaccounts \"nobody\" not found"),
        "{missing:?}"
    );

    // Admission: an unknown account is forbidden with the plugin's words.
    let pod = |name: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{extra}  restartPolicy: Never\n  initContainers:\n  - {{name: init, image: busybox, command: [sh, -c, 'ls /var/run/secrets/kubernetes.io/serviceaccount > /tmp/{m}-{name}-init; : {m}']}}\n  containers:\n  - {{name: app, image: busybox, command: [sh, -c, 'cat /var/run/secrets/kubernetes.io/serviceaccount/namespace > /tmp/{m}-{name}; : {m}']}}\n"
        )
    };
    let file = ctx.manifest("nosa", &pod("nosa", "  serviceAccountName: nope\n"));
    let out = ctx.kubectl(&["create", "-f", file.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "pods \"nosa\" is forbidden: error looking up service account default/nope: serviceaccount \"nope\" not found"
        ),
        "{out:?}"
    );
    // Defaulted account, the projected volume in both containers, files in the pod.
    let file = ctx.manifest("withsa", &pod("withsa", ""));
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    assert_eq!(
        jsonpath(&ctx, &["pod", "withsa"], "{.spec.serviceAccountName}"),
        "default"
    );
    let volume = jsonpath(&ctx, &["pod", "withsa"], "{.spec.volumes[0].name}");
    assert!(volume.starts_with("kube-api-access-"), "{volume}");
    assert_eq!(
        jsonpath(
            &ctx,
            &["pod", "withsa"],
            "{.spec.containers[0].volumeMounts[0].mountPath} {.spec.initContainers[0].volumeMounts[0].name}"
        ),
        format!("/var/run/secrets/kubernetes.io/serviceaccount {volume}")
    );
    assert_eq!(
        jsonpath(
            &ctx,
            &["pod", "withsa"],
            "{.spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds}"
        ),
        "3607"
    );
    wait_for("withsa to succeed", Duration::from_secs(40), || {
        (jsonpath(&ctx, &["pod", "withsa"], "{.status.phase}") == "Succeeded")
            .then_some(String::new())
    });
    let read = |f: &str| std::fs::read_to_string(format!("/tmp/{m}-{f}")).unwrap_or_default();
    assert_eq!(read("withsa"), "default");
    assert_eq!(
        read("withsa-init").split_whitespace().collect::<Vec<_>>(),
        ["ca.crt", "namespace", "token"]
    );
    // `automountServiceAccountToken: false` mounts nothing.
    let file = ctx.manifest(
        "nomount",
        &pod("nomount", "  automountServiceAccountToken: false\n"),
    );
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    assert_eq!(jsonpath(&ctx, &["pod", "nomount"], "{.spec.volumes}"), "");
    for f in ["withsa", "withsa-init", "nomount", "nomount-init"] {
        let _ = std::fs::remove_file(format!("/tmp/{m}-{f}"));
    }
}

#[test]
#[ignore = "needs root"]
fn python_in_cluster_config_lists_the_pods_of_its_namespace() {
    let python = python();
    assert!(
        has_kubernetes_client(&python),
        "the Python kubernetes client is not installed for {} (scripts/install-test-deps)",
        python.display()
    );
    let mut ctx = ServeCtx::new("saincluster");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    let out = format!("/tmp/{m}-incluster");
    let script = ctx.path("incluster.py");
    std::fs::write(
        &script,
        format!(
            r#"import os, sys
from kubernetes import client, config
config.load_incluster_config()
ns = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
names = sorted(p.metadata.name for p in client.CoreV1Api().list_namespaced_pod(ns).items)
token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read()
with open("{out}.token", "w") as f:
    f.write(token)
with open("{out}.tmp", "w") as f:
    f.write(os.environ["KUBERNETES_SERVICE_HOST"] + " " + ns + " " + ",".join(names))
os.rename("{out}.tmp", "{out}")
"#
        ),
    )
    .unwrap();
    ctx.kubectl_ok(&["create", "namespace", "apps"]);
    ctx.grant_view("apps", "default");
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: lister, namespace: apps}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: busybox\n    command: [{}, {}, {m}]\n",
        python.display(),
        script.display()
    );
    let file = ctx.manifest("lister", &manifest);
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let phase = wait_for("the lister to finish", Duration::from_secs(90), || {
        let p = jsonpath(&ctx, &["pod", "lister", "-n", "apps"], "{.status.phase}");
        matches!(p.as_str(), "Succeeded" | "Failed").then_some(p)
    });
    let logs = ctx.kubectl(&["logs", "-n", "apps", "lister"]);
    assert_eq!(
        phase,
        "Succeeded",
        "{}",
        String::from_utf8_lossy(&logs.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "127.0.0.1 apps lister"
    );
    // The pod's token is bound to it: accepted while it exists, refused once it is gone.
    let token = std::fs::read_to_string(format!("{out}.token")).unwrap();
    let as_pod = ctx.kubectl(&["--token", &token, "get", "pods", "-n", "apps"]);
    assert!(as_pod.status.success(), "{as_pod:?}");
    ctx.kubectl_ok(&["delete", "pod", "-n", "apps", "lister"]);
    let refused = ctx.kubectl(&["--token", &token, "get", "pods", "-n", "apps"]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Unauthorized"),
        "{refused:?}"
    );
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(format!("{out}.token"));
}
