//! Decoding: JSON and multi-document YAML, kind checks, kubectl-style
//! strict field validation, and syntax errors that say where.

use podvisor_api::{
    DecodeError, DocumentRef, FieldValidation, decode_pods, decode_pods_lenient, decode_pods_with,
};

const POD_A: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: app\n    image: busybox\n";

#[test]
fn decodes_single_yaml_document() {
    let pods = decode_pods(POD_A, "a.yaml").unwrap();
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0].metadata.name.as_deref(), Some("a"));
    assert_eq!(pods[0].spec.as_ref().unwrap().containers[0].name, "app");
}

#[test]
fn decodes_multi_document_yaml_and_skips_empty_documents() {
    let text = format!(
        "---\n# leading comment only\n---\n{POD_A}---\n\n---\n{}\n...\n",
        POD_A.replace("name: a", "name: b")
    );
    let pods = decode_pods(&text, "two.yaml").unwrap();
    let names: Vec<_> = pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn decodes_json_and_json_streams() {
    let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}"#;
    assert_eq!(decode_pods(json, "p.json").unwrap().len(), 1);
    let stream = format!("{json}\n{json}");
    assert_eq!(decode_pods(&stream, "p.json").unwrap().len(), 2);
}

#[test]
fn decodes_a_v1_list_of_pods() {
    let list = r#"{"apiVersion":"v1","kind":"List","items":[
        {"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i"}]}},
        {"apiVersion":"v1","kind":"Pod","metadata":{"name":"y"},"spec":{"containers":[{"name":"c","image":"i"}]}}]}"#;
    let pods = decode_pods_lenient(list, "list.json").unwrap();
    assert_eq!(pods.len(), 2);
    assert_eq!(pods[1].item, Some(1));
    assert_eq!(pods[1].pod.metadata.name.as_deref(), Some("y"));
}

#[test]
fn numbers_become_quantities() {
    let text =
        POD_A.to_owned() + "    resources:\n      limits:\n        cpu: 1\n        memory: 64Mi\n";
    let pods = decode_pods(&text, "q.yaml").unwrap();
    let limits = pods[0].spec.as_ref().unwrap().containers[0]
        .resources
        .as_ref()
        .unwrap()
        .limits
        .clone()
        .unwrap();
    assert_eq!(limits["cpu"].0, "1");
    assert_eq!(limits["memory"].0, "64Mi");
}

#[test]
fn wrong_kind_names_the_document_and_what_was_found() {
    let text = format!("{POD_A}---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n");
    let err = decode_pods(&text, "mixed.yaml").unwrap_err();
    assert_eq!(
        err,
        DecodeError::WrongKind {
            source_name: "mixed.yaml".into(),
            at: DocumentRef {
                document: 2,
                item: None
            },
            api_version: Some("apps/v1".into()),
            kind: Some("Deployment".into()),
        }
    );
    assert_eq!(
        err.to_string(),
        "mixed.yaml: document 2: expected apiVersion \"v1\" and kind \"Pod\", found apiVersion \"apps/v1\" and kind \"Deployment\""
    );
    let missing = decode_pods("metadata:\n  name: x\n", "m.yaml").unwrap_err();
    assert_eq!(
        missing.to_string(),
        "m.yaml: document 1: expected apiVersion \"v1\" and kind \"Pod\", found apiVersion (none) and kind (none)"
    );
}

#[test]
fn unknown_fields_are_strict_errors_with_indexed_paths() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labelz: {}\nspec:\n  containers:\n  - name: ok\n    image: busybox\n  - name: app\n    imagee: busybox\n    ports:\n    - containerPort: 80\n      hostPot: 80\n";
    let err = decode_pods(text, "typo.yaml").unwrap_err();
    let DecodeError::UnknownFields { fields, at, .. } = &err else {
        panic!("expected unknown fields, got {err}");
    };
    assert_eq!(at.document, 1);
    assert_eq!(
        fields,
        &[
            "metadata.labelz",
            "spec.containers[1].imagee",
            "spec.containers[1].ports[0].hostPot"
        ]
    );
    assert_eq!(
        err.to_string(),
        "typo.yaml: document 1: strict decoding error: unknown field \"metadata.labelz\", unknown field \"spec.containers[1].imagee\", unknown field \"spec.containers[1].ports[0].hostPot\""
    );
}

#[test]
fn lenient_and_ignore_modes_keep_the_pod() {
    let text = POD_A.replace(
        "    image: busybox\n",
        "    image: busybox\n    imagee: typo\n",
    );
    let warned = decode_pods_lenient(&text, "w.yaml").unwrap();
    assert_eq!(warned[0].unknown_fields, ["spec.containers[0].imagee"]);
    let ignored = decode_pods_with(&text, "w.yaml", FieldValidation::Ignore).unwrap();
    assert!(ignored[0].unknown_fields.is_empty());
    assert_eq!(ignored[0].pod, warned[0].pod);
}

#[test]
fn yaml_syntax_error_names_source_document_and_line() {
    let text = format!("{POD_A}---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n");
    let err = decode_pods(&text, "bad.yaml").unwrap_err();
    let DecodeError::Syntax {
        source_name,
        document,
        line,
        json,
        ..
    } = &err
    else {
        panic!("expected a syntax error, got {err}");
    };
    assert_eq!(source_name, "bad.yaml");
    assert_eq!(*document, 2);
    assert!(!json);
    // The broken flow sequence starts on line 13 of the whole file and the
    // parser notices at or after it.
    let line = line.expect("a line number");
    assert!((13..=14).contains(&line), "line {line}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("bad.yaml: document 2: YAML syntax error at line "),
        "{msg}"
    );
}

#[test]
fn yaml_bad_indentation_is_a_syntax_error() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n   labels: x\n";
    let err = decode_pods(text, "indent.yaml").unwrap_err();
    assert!(
        matches!(err, DecodeError::Syntax { line: Some(_), .. }),
        "{err}"
    );
}

#[test]
fn json_syntax_error_names_line_and_column() {
    let text = "{\"apiVersion\": \"v1\",\n \"kind\": \"Pod\",,\n}";
    let err = decode_pods(text, "bad.json").unwrap_err();
    let DecodeError::Syntax {
        line, column, json, ..
    } = &err
    else {
        panic!("expected a syntax error, got {err}");
    };
    assert!(json);
    assert_eq!(*line, Some(2));
    assert_eq!(*column, Some(16));
    assert_eq!(
        err.to_string(),
        "bad.json: document 1: JSON syntax error at line 2 column 16: key must be a string"
    );
}

#[test]
fn wrong_types_are_shape_errors() {
    let text = POD_A.to_owned() + "    ports:\n    - containerPort: http\n";
    let err = decode_pods(&text, "t.yaml").unwrap_err();
    assert!(matches!(err, DecodeError::Shape { .. }), "{err}");
    let line = text.lines().count();
    assert_eq!(
        err.to_string(),
        format!(
            "t.yaml: document 1, line {line}: spec.containers[0].ports[0].containerPort: \
             invalid type: string \"http\", expected i32"
        )
    );
}

/// A type error names the field as kubectl does, and its line in the whole input (issue 33):
/// `command: [true]` in the second document's second init container's probe.
#[test]
fn a_type_error_names_the_field_and_its_line() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: \
                [{name: a, image: b}]\n---\n# the second\napiVersion: v1\nkind: Pod\n\
                metadata:\n  name: b\nspec:\n  containers:\n  - name: a\n    image: b\n  \
                initContainers:\n  - name: one\n    image: b\n  - name: two\n    image: b\n    \
                readinessProbe:\n      exec:\n        command:\n        - true\n";
    let err = decode_pods(text, "pod.yaml").unwrap_err();
    assert_eq!(
        err.to_string(),
        "pod.yaml: document 2, line 24: spec.initContainers[1].readinessProbe.exec.command[0]: \
         invalid type: boolean `true`, expected a string"
    );
    // JSON input: the field without a line.
    let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},
        "spec":{"containers":[{"name":"a","image":"b","command":[true]}]}}"#;
    let err = decode_pods(json, "pod.json").unwrap_err();
    assert_eq!(
        err.to_string(),
        "pod.json: document 1: spec.containers[0].command[0]: invalid type: boolean `true`, \
         expected a string"
    );
}

#[test]
fn empty_input_is_an_error() {
    assert_eq!(
        decode_pods("# nothing\n---\n", "e.yaml")
            .unwrap_err()
            .to_string(),
        "e.yaml: no objects found"
    );
}

#[test]
fn duplicate_yaml_keys_are_syntax_errors() {
    let text = "apiVersion: v1\nkind: Pod\nkind: Pod\n";
    let err = decode_pods(text, "dup.yaml").unwrap_err();
    assert_eq!(
        err.to_string(),
        "dup.yaml: document 1: YAML syntax error at line 3 column 1: duplicate mapping key: kind"
    );
}

/// `podvisor run` makes pods of workloads as `podman kube play` does (issue 33): a
/// Deployment's template `replicas` times, named `<name>-<pod-template-hash>-<suffix>` with the
/// `pod-template-hash` label; a StatefulSet's by ordinal; one for a DaemonSet and a Job; each
/// with a line that says so. A Job whose template may restart `Always` is refused.
#[test]
fn run_expands_workloads_into_their_pods() {
    let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  \
                replicas: 3\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: \
                {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: nginx}]\n\
                ---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  \
                replicas: 2\n  selector: {matchLabels: {app: db}}\n  template:\n    metadata: \
                {labels: {app: db}}\n    spec:\n      containers: [{name: db, image: redis}]\n\
                ---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: once}\nspec:\n  \
                template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: \
                job, image: busybox, command: [date]}]\n";
    let m = podvisor_api::decode_manifest(text, "app.yaml").unwrap();
    let names: Vec<&str> = m
        .pods
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");
    let hash = m.pods[0].metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    for p in &m.pods[..3] {
        let labels = p.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app"], "web");
        assert_eq!(labels["pod-template-hash"], hash, "one template, one hash");
        let name = p.metadata.name.as_deref().unwrap();
        assert!(name.starts_with(&format!("web-{hash}-")), "{name}");
    }
    assert_ne!(names[0], names[1]);
    assert_eq!(&names[3..5], ["db-0", "db-1"]);
    assert!(names[5].starts_with("once-"), "{names:?}");
    assert_eq!(
        m.pods[5].metadata.labels.as_ref().unwrap()["job-name"],
        "once"
    );
    assert_eq!(m.expanded.len(), 3);
    assert!(
        m.expanded[0].starts_with("app.yaml: Deployment/web: running 3 replicas of its template;"),
        "{:?}",
        m.expanded
    );
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    \
               spec:\n      containers: [{name: job, image: busybox, command: [date]}]\n";
    let err = podvisor_api::decode_manifest(job, "job.yaml").unwrap_err();
    assert_eq!(
        err.to_string(),
        "job.yaml: document 1: Job/j: spec.template.spec.restartPolicy: Required value: valid \
         values: \"OnFailure\", \"Never\""
    );
}
