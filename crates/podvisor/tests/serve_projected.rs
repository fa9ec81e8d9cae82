//! `downwardAPI` and `projected` volumes under `podvisor serve`, driven by the real kubectl:
//! the downward API's fields and resources as files, labels and annotations that follow
//! `kubectl label`/`annotate` in the running pod, a projection of a ConfigMap, a Secret and the
//! downward API into one directory, the pod's `fsGroup` on every file as the kubelet's
//! `SetVolumeOwnership` sets it, and a missing source that holds the start with `FailedMount`.

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

#[test]
#[ignore = "needs root"]
fn downward_api_and_projected_volumes_follow_the_pod() {
    let mut ctx = ServeCtx::new("dapivol");
    ctx.start(&["--sync-frequency", "30s"]);
    let m = ctx.marker.clone();
    ctx.kubectl_ok(&["create", "configmap", "site", "--from-literal=a=cm-a"]);
    ctx.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "keys",
        "--from-literal=k=sec-k",
    ]);
    let out = format!("/tmp/{m}-dapi");
    std::fs::create_dir_all(&out).unwrap();
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: dapi
  labels: {{app: web, tier: front}}
  annotations: {{note: hello}}
spec:
  securityContext: {{fsGroup: 3456}}
  containers:
  - name: app
    image: busybox
    resources: {{limits: {{memory: 64Mi}}, requests: {{cpu: 250m}}}}
    command: [sh, -c, 'while true; do cat /info/labels > {out}/labels.tmp; mv {out}/labels.tmp {out}/labels; cat /info/annotations > {out}/ann; cat /info/name /info/mem /info/cpu > {out}/values; cat /all/cm/a /all/k /all/ns > {out}/all; stat -c "%a %g" /info/..data/name /info/..data/cpu /info/..data/. /all/..data/k > {out}/modes; mount | grep " /info " > {out}/mount; sleep 0.2; done; : {m}']
    volumeMounts:
    - {{name: info, mountPath: /info}}
    - {{name: all, mountPath: /all}}
  volumes:
  - name: info
    downwardAPI:
      items:
      - {{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}
      - {{path: annotations, fieldRef: {{fieldPath: "metadata.annotations['note']"}}}}
      - {{path: name, fieldRef: {{fieldPath: metadata.name}}}}
      - {{path: mem, resourceFieldRef: {{containerName: app, resource: limits.memory, divisor: 1Mi}}}}
      - {{path: cpu, mode: 0400, resourceFieldRef: {{containerName: app, resource: requests.cpu, divisor: 1m}}}}
  - name: all
    projected:
      defaultMode: 0600
      sources:
      - configMap: {{name: site, items: [{{key: a, path: cm/a}}]}}
      - secret: {{name: keys}}
      - downwardAPI: {{items: [{{path: ns, fieldRef: {{fieldPath: metadata.namespace}}}}]}}
"#
    );
    let file = ctx.manifest("dapi", &manifest);
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let read = |f: &str| std::fs::read_to_string(format!("{out}/{f}")).unwrap_or_default();
    wait_for("the volumes to be read", Duration::from_secs(40), || {
        (!read("modes").is_empty() && !read("all").is_empty()).then_some(String::new())
    });
    assert_eq!(read("labels"), "app=\"web\"\ntier=\"front\"");
    assert_eq!(read("ann"), "hello");
    assert_eq!(read("values"), "dapi64250");
    assert_eq!(read("all"), "cm-asec-kdefault");
    // SetVolumeOwnership of a read-only volume: the group, g+r on files, g+rx and setgid on
    // directories (0400 becomes 0440; 0600 becomes 0640).
    assert_eq!(
        read("modes").lines().collect::<Vec<_>>(),
        ["644 3456", "440 3456", "2755 3456", "640 3456"]
    );
    assert!(read("mount").contains("tmpfs"), "{}", read("mount"));
    // Labels reach the running pod without waiting for the 30 s sync period.
    let changed = Instant::now();
    ctx.kubectl_ok(&[
        "label",
        "pod",
        "dapi",
        "--overwrite",
        "tier=back",
        "extra=1",
    ]);
    wait_for("the new labels in the pod", Duration::from_secs(20), || {
        (read("labels") == "app=\"web\"\nextra=\"1\"\ntier=\"back\"").then_some(String::new())
    });
    eprintln!("labels reached the pod after {:?}", changed.elapsed());
    ctx.kubectl_ok(&["annotate", "pod", "dapi", "--overwrite", "note=bye"]);
    wait_for(
        "the new annotation in the pod",
        Duration::from_secs(20),
        || (read("ann") == "bye").then_some(String::new()),
    );
    ctx.kubectl_ok(&["delete", "pod", "dapi", "--grace-period=1"]);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
#[ignore = "needs root"]
fn a_missing_projected_source_is_a_failed_mount() {
    let mut ctx = ServeCtx::new("projmnt");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: pmnt}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'cat /p/x /p/y > /tmp/{m}-pmnt; : {m}']\n    volumeMounts: [{{name: p, mountPath: /p}}]\n  volumes:\n  - name: p\n    projected:\n      sources:\n      - configMap: {{name: later, items: [{{key: x, path: x}}]}}\n      - secret: {{name: absent, optional: true}}\n      - secret: {{name: gone}}\n"
    );
    let file = ctx.manifest("pmnt", &manifest);
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
        msg.contains(
            "MountVolume.SetUp failed for volume \"p\" : [configmap \"later\" not found, secret \"gone\" not found]"
        ),
        "{msg}"
    );
    ctx.kubectl_ok(&["create", "configmap", "later", "--from-literal=x=X"]);
    ctx.kubectl_ok(&["create", "secret", "generic", "gone", "--from-literal=y=Y"]);
    wait_for(
        "the pod to run once its sources exist",
        Duration::from_secs(40),
        || {
            let out = ctx.kubectl(&["get", "pod", "pmnt", "-o", "jsonpath={.status.phase}"]);
            (String::from_utf8_lossy(&out.stdout) == "Succeeded").then_some(String::new())
        },
    );
    assert_eq!(
        std::fs::read_to_string(format!("/tmp/{m}-pmnt")).unwrap(),
        "XY"
    );
    let _ = std::fs::remove_file(format!("/tmp/{m}-pmnt"));
}
