//! In-cluster clients in `oci` pods (issue 10): a pod on the pod network reaches podvisor's
//! API at the CNI bridge's gateway, with the `KUBERNETES_SERVICE_*`/`KUBERNETES_PORT*`
//! variables the kubelet gives every container (`getServiceEnvVarMap`: the master service's
//! always) and the `kube-api-access-*` projected volume (token, `ca.crt`, namespace). The
//! clients are real and find the API themselves, with no kubeconfig: the static kubectl
//! bind-mounted from the host (client-go's `InClusterConfig`), and the Python client's
//! `load_incluster_config` (the image's Debian python3 with the test venv's packages
//! mounted read-only). Without a token (`automountServiceAccountToken: false`, and
//! `enableServiceLinks: false`, which leaves the master service's variables) the variables
//! are there and kubectl falls back to `localhost:8080`, as it does in a cluster.
//!
//! Needs root, runc, the CNI plugins, busybox-static, kubectl and, for the Python test, the
//! Python `kubernetes` client (`scripts/install-test-deps`).

use crate::python_client::{has_kubernetes_client, python};
use crate::serve_common::ServeCtx;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The host's address on podvisor's own pod network (`10.244.0.0/16`, the bridge `pv0`).
const GATEWAY: &str = "10.244.0.1";

fn wait_for(ctx: &ServeCtx, what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < limit,
            "timed out waiting for {what}:\n{}",
            ctx.last_logs(1)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A `serve --runtime oci` with the busybox image (`scripts/busybox-image ARGS`) loaded.
pub(crate) fn serve_with_image(tag: &str, image_args: &[&str]) -> ServeCtx {
    let mut ctx = ServeCtx::new(tag);
    crate::oci::load_busybox(&ctx, image_args);
    ctx.start(&["--runtime", "oci"]);
    ctx.kubectl_ok(&["create", "namespace", "apps"]);
    ctx.grant_view("apps", "default");
    ctx
}

/// The API's port, from the kubeconfig serve wrote (`server: https://127.0.0.1:PORT`).
pub(crate) fn api_port(ctx: &ServeCtx) -> String {
    let kubeconfig = std::fs::read_to_string(ctx.kubeconfig()).unwrap();
    kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://127.0.0.1:"))
        .expect("the kubeconfig's server")
        .to_owned()
}

/// Runs `pods` (a manifest) in namespace `apps` and waits until every one of `names` has
/// finished; their logs, by name.
pub(crate) fn run_to_completion(ctx: &ServeCtx, manifest: &str, names: &[&str]) -> Vec<String> {
    let file = ctx.manifest("pods", manifest);
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    wait_for(ctx, "the pods to finish", Duration::from_secs(120), || {
        names.iter().all(|name| {
            let phase = ctx.kubectl_ok(&[
                "get",
                "pod",
                "-n",
                "apps",
                name,
                "-o",
                "jsonpath={.status.phase}",
            ]);
            matches!(phase.as_str(), "Succeeded" | "Failed")
        })
    });
    names
        .iter()
        .map(|name| {
            let phase = ctx.kubectl_ok(&[
                "get",
                "pod",
                "-n",
                "apps",
                name,
                "-o",
                "jsonpath={.status.phase}",
            ]);
            let logs = ctx.kubectl_ok(&["logs", "-n", "apps", name]);
            assert_eq!(phase, "Succeeded", "{name}:\n{logs}");
            logs
        })
        .collect()
}

/// The lines of `logs` between `BEGIN what` and `END what`.
pub(crate) fn section<'a>(logs: &'a str, what: &str) -> Vec<&'a str> {
    logs.lines()
        .skip_while(|l| *l != format!("BEGIN {what}"))
        .skip(1)
        .take_while(|l| *l != format!("END {what}"))
        .collect()
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn oci_pods_run_kubectl_with_in_cluster_config() {
    let ctx = serve_with_image("ickube", &[]);
    let m = ctx.marker.clone();
    let port = api_port(&ctx);
    let said =
        format!("podvisor: pods on the pod network reach the API at https://{GATEWAY}:{port}");
    assert_eq!(ctx.grep_logs(&said).len(), 1, "{}", ctx.last_logs(1));
    // The static kubectl, from the host's file: `kubectl()` may name a symbolic link.
    let kubectl = std::fs::canonicalize(podvisor_testkit::kubectl()).unwrap();
    let kubectl = kubectl.display().to_string();
    let script = format!(
        r#"set -e
echo BEGIN env; env | grep ^KUBERNETES_ | sort; echo END env
echo BEGIN ca; cat /var/run/secrets/kubernetes.io/serviceaccount/ca.crt; echo END ca
echo BEGIN pods; /kubectl get pods -o name; echo END pods
echo BEGIN whoami; /kubectl auth whoami -o jsonpath='{{.status.userInfo.username}}{{"\n"}}'; echo END whoami
: {m}"#
    );
    let no_token = format!(
        r#"echo BEGIN env; env | grep ^KUBERNETES_SERVICE_HOST; echo END env
ls /var/run/secrets/kubernetes.io/serviceaccount 2>/dev/null || echo no-token
echo BEGIN pods; /kubectl get pods 2>&1 && exit 1; echo kubectl-failed; echo END pods
: {m}"#
    );
    let pod = |name: &str, extra: &str, script: &str| kubectl_pod(name, &kubectl, extra, script);
    let manifest = [
        pod("incluster", "", &script),
        // The master service's variables do not depend on `enableServiceLinks`.
        pod(
            "notoken",
            "  automountServiceAccountToken: false\n  enableServiceLinks: false\n",
            &no_token,
        ),
        pod("hostnet", "  hostNetwork: true\n", &script),
    ]
    .concat();
    let logs = run_to_completion(&ctx, &manifest, &["incluster", "notoken", "hostnet"]);

    // On the pod network: the gateway, the API's port, the service-link variables.
    let env = section(&logs[0], "env");
    let want = [
        format!("KUBERNETES_PORT=tcp://{GATEWAY}:{port}"),
        format!("KUBERNETES_PORT_{port}_TCP=tcp://{GATEWAY}:{port}"),
        format!("KUBERNETES_PORT_{port}_TCP_ADDR={GATEWAY}"),
        format!("KUBERNETES_PORT_{port}_TCP_PORT={port}"),
        format!("KUBERNETES_PORT_{port}_TCP_PROTO=tcp"),
        format!("KUBERNETES_SERVICE_HOST={GATEWAY}"),
        format!("KUBERNETES_SERVICE_PORT={port}"),
        format!("KUBERNETES_SERVICE_PORT_HTTPS={port}"),
    ];
    assert_eq!(env, want, "{}", logs[0]);
    // The projected `ca.crt` is serve's CA, which signed the certificate kubectl checked.
    let ca = std::fs::read_to_string(ctx.state().join("pki/ca.crt")).unwrap();
    assert_eq!(section(&logs[0], "ca"), ca.lines().collect::<Vec<_>>());
    // kubectl found the API, the token and the namespace by itself.
    assert!(
        section(&logs[0], "pods").contains(&"pod/incluster"),
        "{}",
        logs[0]
    );
    assert_eq!(
        section(&logs[0], "whoami"),
        ["system:serviceaccount:apps:default"],
        "{}",
        logs[0]
    );

    // No token (and no service links): the variables all the same, and kubectl's usual
    // fallback.
    assert_eq!(
        section(&logs[1], "env"),
        [format!("KUBERNETES_SERVICE_HOST={GATEWAY}")],
        "{}",
        logs[1]
    );
    assert!(logs[1].contains("no-token\n"), "{}", logs[1]);
    let refused = section(&logs[1], "pods").join("\n");
    assert!(
        refused.contains(
            "The connection to the server localhost:8080 was refused - did you specify the \
             right host or port?"
        ) && refused.ends_with("kubectl-failed"),
        "{}",
        logs[1]
    );

    // An oci pod on the host's network keeps loopback, as process pods do.
    let env = section(&logs[2], "env");
    assert!(
        env.contains(&"KUBERNETES_SERVICE_HOST=127.0.0.1"),
        "{}",
        logs[2]
    );
    assert!(
        section(&logs[2], "pods").contains(&"pod/hostnet"),
        "{}",
        logs[2]
    );
    assert_eq!(
        section(&logs[2], "whoami"),
        ["system:serviceaccount:apps:default"]
    );
}

/// The directory the Python `kubernetes` package is installed in (its `site-packages`).
fn site_packages(python: &Path) -> PathBuf {
    let out = Command::new(python)
        .args([
            "-c",
            "import kubernetes, os; print(os.path.dirname(os.path.dirname(kubernetes.__file__)))",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The host directories holding the shared libraries the packages' extension modules load
/// (`ldd` of each `.so`: libgcc_s, libstdc++, ..., which the image's python3 does not need).
fn library_dirs(dir: &Path, found: &mut std::collections::BTreeSet<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            library_dirs(&path, found);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "so") {
            let out = Command::new("ldd").arg(&path).output().unwrap();
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                if let Some((_, lib)) = line.split_once("=> ")
                    && let Some(lib) = lib.split_whitespace().next()
                    && let Some(parent) = Path::new(lib).parent()
                    && lib.starts_with('/')
                {
                    found.insert(parent.to_owned());
                }
            }
        }
    }
}

/// `major.minor` of a Python interpreter.
fn python_version(python: &Path) -> String {
    let out = Command::new(python)
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn oci_pods_run_the_python_client_with_in_cluster_config() {
    let python = python();
    assert!(
        has_kubernetes_client(&python),
        "the Python kubernetes client is not installed for {} (scripts/install-test-deps)",
        python.display()
    );
    // The image's python3 is Debian's: the packages must be of the same version.
    let (host, image) = (
        python_version(&python),
        python_version(Path::new("/usr/bin/python3")),
    );
    assert_eq!(
        host,
        image,
        "the kubernetes client of {} is for Python {host}, the image's /usr/bin/python3 is {image}",
        python.display()
    );
    let packages = site_packages(&python);
    let mut libs = std::collections::BTreeSet::new();
    library_dirs(&packages, &mut libs);
    let ctx = serve_with_image("icpy", &["--with-python"]);
    let m = ctx.marker.clone();
    let port = api_port(&ctx);
    let script = r#"
import os
from kubernetes import client, config
config.load_incluster_config()
c = client.Configuration.get_default_copy()
ns = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
pods = client.CoreV1Api().list_namespaced_pod(ns).items
print("RESULT host", c.host)
print("RESULT ca", c.ssl_ca_cert, c.verify_ssl)
print("RESULT pods", ",".join(sorted(p.metadata.name for p in pods)))
"#;
    let no_token = r#"
from kubernetes import config
try:
    config.load_incluster_config()
except config.ConfigException as e:
    print("RESULT refused", e)
"#;
    let (mut volumes, mut mounts, mut library_path) = (String::new(), String::new(), Vec::new());
    for (i, dir) in libs.iter().enumerate() {
        volumes.push_str(&format!(
            "  - {{name: lib{i}, hostPath: {{path: {}, type: Directory}}}}\n",
            dir.display()
        ));
        mounts.push_str(&format!(
            "    - {{name: lib{i}, mountPath: /hostlib/{i}, readOnly: true}}\n"
        ));
        library_path.push(format!("/hostlib/{i}"));
    }
    let library_path = library_path.join(":");
    let pod = |name: &str, extra: &str, script: &str| {
        format!(
            r"---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: apps}}
spec:
  restartPolicy: Never
{extra}  volumes:
  - name: packages
    hostPath: {{path: {packages}, type: Directory}}
{volumes}  containers:
  - name: app
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    env:
    - {{name: PYTHONPATH, value: /packages}}
    - {{name: PYTHONDONTWRITEBYTECODE, value: '1'}}
    - {{name: LD_LIBRARY_PATH, value: '{library_path}'}}
    volumeMounts:
    - {{name: packages, mountPath: /packages, readOnly: true}}
{mounts}    command: [/usr/bin/python3, -c, {script:?}, {m}]
",
            packages = packages.display()
        )
    };
    let manifest = [
        pod("pylister", "", script),
        pod(
            "pynotoken",
            "  automountServiceAccountToken: false\n",
            no_token,
        ),
    ]
    .concat();
    let logs = run_to_completion(&ctx, &manifest, &["pylister", "pynotoken"]);
    let result = |logs: &str| -> Vec<String> {
        logs.lines()
            .filter_map(|l| l.strip_prefix("RESULT "))
            .map(str::to_owned)
            .collect()
    };
    let lines = result(&logs[0]);
    assert_eq!(
        lines,
        [
            format!("host https://{GATEWAY}:{port}"),
            "ca /var/run/secrets/kubernetes.io/serviceaccount/ca.crt True".to_owned(),
            "pods pylister,pynotoken".to_owned(),
        ],
        "{}",
        logs[0]
    );
    assert_eq!(
        result(&logs[1]),
        ["refused Service token file does not exist."],
        "{}",
        logs[1]
    );
}

/// A pod in `apps` running `script` under `sh -c` in busybox, with the host's `kubectl` binary
/// mounted at `/kubectl`; `extra` is more of its spec (indented two spaces, each line ending
/// in a newline).
pub(crate) fn kubectl_pod(name: &str, kubectl: &str, extra: &str, script: &str) -> String {
    format!(
        r"---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: apps}}
spec:
  restartPolicy: Never
{extra}  volumes:
  - name: kubectl
    hostPath: {{path: {kubectl}, type: File}}
  containers:
  - name: app
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    volumeMounts:
    - {{name: kubectl, mountPath: /kubectl, readOnly: true}}
    command: [sh, -c, {script:?}]
"
    )
}
