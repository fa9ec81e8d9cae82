//! The OpenAPI documents through the real kubectl: `kubectl explain` from the published
//! schemas (core/v1 and events.k8s.io/v1), and a multi-document file with kinds podvisor
//! does not serve, which applies what it can and names what it cannot.

use crate::common;

use common::TestServer;

#[test]
fn kubectl_explain_reads_the_published_schemas() {
    let s = TestServer::start();
    let out = s.kubectl_ok(&["explain", "pod.spec.containers.livenessProbe"]);
    assert!(out.contains("FIELD: livenessProbe <Probe>"), "{out}");
    assert!(out.contains("failureThreshold\t<integer>"), "{out}");
    let out = s.kubectl_ok(&["explain", "configmap.data"]);
    assert!(out.contains("FIELD: data <map[string]string>"), "{out}");
    let out = s.kubectl_ok(&["explain", "events.note", "--api-version=events.k8s.io/v1"]);
    assert!(out.contains("GROUP:      events.k8s.io"), "{out}");
    assert!(out.contains("FIELD: note <string>"), "{out}");
    let r = s.kubectl(&["explain", "pod.spec.nonsense"]);
    assert!(!r.ok);
    assert!(
        r.stderr.contains("field \"nonsense\" does not exist"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_file_with_unserved_kinds_applies_what_it_can() {
    let s = TestServer::start();
    let file = s.dir.path().join("multi.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: dep}\nspec:\n  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x}}\n    spec: {containers: [{name: c, image: busybox}]}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: busybox, command: [sleep, '60']}]}\n",
    )
    .unwrap();
    let r = s.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    assert!(!r.ok, "the Deployment cannot be applied");
    assert!(r.stdout.contains("configmap/cfg created"), "{}", r.stdout);
    assert!(r.stdout.contains("pod/p created"), "{}", r.stdout);
    assert!(
        r.stderr
            .contains("no matches for kind \"Deployment\" in version \"apps/v1\""),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("openapi"), "{}", r.stderr);
    let r = s.kubectl(&["create", "-f", file.to_str().unwrap()]);
    assert!(
        r.stderr
            .contains("no matches for kind \"Deployment\" in version \"apps/v1\""),
        "{}",
        r.stderr
    );
}
