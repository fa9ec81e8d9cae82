//! From a manifest's text to the pods `lint` checks: bare Pods and workloads' pod templates,
//! each decoded strictly, defaulted and validated.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::decode::{DecodeError, DocumentRef, FieldValidation, decode_one, parse_documents};
use crate::validation::{FieldError, Path};

/// One pod to lint: a bare Pod or a workload's pod template.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The input's name.
    pub source: String,
    /// Where in the input.
    pub at: DocumentRef,
    /// The object's kind: `Pod`, `Deployment`, `CronJob`, …
    pub kind: String,
    /// The object's name (`generateName` for a Pod without one).
    pub name: String,
    /// What comes before the pod's own paths: `""` for a Pod, `spec.template.` for a
    /// Deployment, `spec.jobTemplate.spec.template.` for a CronJob.
    pub prefix: String,
    /// The pod, defaulted as the API server defaults it (a template's pod is named after its
    /// workload).
    pub pod: Pod,
    /// How many pods of it run: 1 for a Pod or DaemonSet (one node), `spec.replicas` (default 1)
    /// for the others, a Job's `parallelism` (default 1).
    pub replicas: u32,
    /// Why the API server would refuse it (empty: valid).
    pub problems: Vec<Problem>,
}

/// A decoding or validation error of a target, with the path in the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Field path in the object (`spec.template.spec.containers[0].name`).
    pub path: String,
    /// The API server's words, e.g. `spec.containers[0].name: Required value`.
    pub message: String,
}

/// An object that holds no pod to lint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The input's name.
    pub source: String,
    /// Where in the input.
    pub at: DocumentRef,
    /// Its `apiVersion` (empty if none).
    pub api_version: String,
    /// Its `kind` (empty if none).
    pub kind: String,
    /// Its `metadata.name` (empty if none).
    pub name: String,
    /// Why it was skipped.
    pub note: String,
}

/// A document (or `List` item) of the input.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// A pod to lint.
    Target(Box<Target>),
    /// An object without a pod.
    Skipped(Skipped),
}

/// Where a workload keeps its pod template.
struct Workload {
    /// JSON keys from the object to the template.
    template: &'static [&'static str],
    /// The template's path with a trailing dot.
    prefix: &'static str,
    /// JSON keys to the replica count (`replicas`, `parallelism`), if any.
    replicas: Option<&'static [&'static str]>,
    /// Whether it is a Job (restartPolicy `OnFailure`/`Never`) rather than a long-running
    /// controller (`Always`).
    job: bool,
}

const TEMPLATE: &[&str] = &["spec", "template"];
const REPLICAS: &[&str] = &["spec", "replicas"];

fn workload(api_version: &str, kind: &str) -> Option<Workload> {
    let long_running = |replicas| Workload {
        template: TEMPLATE,
        prefix: "spec.template.",
        replicas,
        job: false,
    };
    match (api_version, kind) {
        ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet")
        | ("v1", "ReplicationController") => Some(long_running(Some(REPLICAS))),
        ("apps/v1", "DaemonSet") => Some(long_running(None)),
        ("batch/v1", "Job") => Some(Workload {
            template: TEMPLATE,
            prefix: "spec.template.",
            replicas: Some(&["spec", "parallelism"]),
            job: true,
        }),
        ("batch/v1", "CronJob") => Some(Workload {
            template: &["spec", "jobTemplate", "spec", "template"],
            prefix: "spec.jobTemplate.spec.template.",
            replicas: Some(&["spec", "jobTemplate", "spec", "parallelism"]),
            job: true,
        }),
        _ => None,
    }
}

const WORKLOAD_KINDS: [&str; 7] = [
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "ReplicationController",
    "Job",
    "CronJob",
];

fn get<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(v, |v, k| v.get(k))
}

fn str_at(v: &Value, keys: &[&str]) -> String {
    get(v, keys)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Splits `text` into its objects (documents, and items of `v1` `List`s) and turns each into a
/// [`Target`] or a [`Skipped`] object.
///
/// # Errors
///
/// Only for input that cannot be read as objects at all: a YAML or JSON syntax error, or no
/// document ([`DecodeError::Syntax`], [`DecodeError::Empty`]). Errors inside one object are its
/// target's [`Target::problems`].
pub fn decode_targets(text: &str, source: &str) -> Result<Vec<Entry>, DecodeError> {
    decode_targets_with_gates(text, source, crate::FeatureGates::default())
}

/// [`decode_targets`], validating with `gates` on (the API server's `--feature-gates`).
///
/// # Errors
///
/// As [`decode_targets`].
pub fn decode_targets_with_gates(
    text: &str,
    source: &str,
    gates: crate::FeatureGates,
) -> Result<Vec<Entry>, DecodeError> {
    Ok(objects(text, source)?
        .into_iter()
        .map(|(value, at)| entry(value, source, at, gates))
        .collect())
}

/// The pods of `text` as `podvisor simulate` runs them: every Pod, and the pod template of every
/// workload (named after it), not defaulted; and a note for each other object, which is skipped
/// (`Service/api holds no pod template`), as `lint` skips it.
///
/// # Errors
///
/// The first syntax, unknown-field or shape error; a document with the kind of a Pod or
/// workload but another `apiVersion` is [`DecodeError::WrongKind`].
pub fn pods_and_templates(
    text: &str,
    source: &str,
) -> Result<(Vec<Pod>, Vec<String>), DecodeError> {
    let mut pods = Vec::new();
    let mut skipped = Vec::new();
    let with_line = |e| crate::decode::with_line(e, text);
    for (value, at) in objects(text, source)? {
        let api_version = str_at(&value, &["apiVersion"]);
        let kind = str_at(&value, &["kind"]);
        if let Some(w) = workload(&api_version, &kind) {
            pods.push(template_pod(&value, &w, source, at).map_err(with_line)?);
        } else if kind == "Pod" || kind.is_empty() || WORKLOAD_KINDS.contains(&kind.as_str()) {
            pods.push(
                decode_one(value, source, at, FieldValidation::Strict)
                    .map_err(with_line)?
                    .pod,
            );
        } else {
            skipped.push(format!(
                "{source}: {at}: {kind}/{} holds no pod template: skipped",
                str_at(&value, &["metadata", "name"])
            ));
        }
    }
    Ok((pods, skipped))
}

fn objects(text: &str, source: &str) -> Result<Vec<(Value, DocumentRef)>, DecodeError> {
    let documents = parse_documents(text, source)?;
    if documents.is_empty() {
        return Err(DecodeError::Empty {
            source_name: source.to_owned(),
        });
    }
    let mut out = Vec::new();
    for (i, doc) in documents.into_iter().enumerate() {
        let document = i + 1;
        if str_at(&doc, &["apiVersion"]) == "v1" && str_at(&doc, &["kind"]) == "List" {
            let items = doc.get("items").and_then(Value::as_array).cloned();
            for (j, item) in items.into_iter().flatten().enumerate() {
                out.push((
                    item,
                    DocumentRef {
                        document,
                        item: Some(j),
                    },
                ));
            }
        } else {
            out.push((
                doc,
                DocumentRef {
                    document,
                    item: None,
                },
            ));
        }
    }
    Ok(out)
}

/// A workload's template as a Pod named after the workload (strict decoding; paths in errors
/// are the object's, `spec.template.spec…`).
fn template_pod(
    value: &Value,
    w: &Workload,
    source: &str,
    at: DocumentRef,
) -> Result<Pod, DecodeError> {
    let template = get(value, w.template).cloned().unwrap_or(Value::Null);
    let mut metadata = template.get("metadata").cloned().unwrap_or(json!({}));
    if let Some(m) = metadata.as_object_mut() {
        // The controller names the pods after the workload; a template's own name is ignored.
        m.insert(
            "name".to_owned(),
            json!(str_at(value, &["metadata", "name"])),
        );
        if let Some(ns) = get(value, &["metadata", "namespace"]) {
            m.insert("namespace".to_owned(), ns.clone());
        }
    }
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or(Value::Null),
    });
    let prefix = |p: &str| format!("{}{p}", w.prefix);
    decode_one(pod, source, at, FieldValidation::Strict)
        .map(|d| d.pod)
        .map_err(|e| match e {
            DecodeError::UnknownFields {
                source_name,
                at,
                fields,
            } => DecodeError::UnknownFields {
                source_name,
                at,
                fields: fields.iter().map(|f| prefix(f)).collect(),
            },
            DecodeError::Shape {
                source_name,
                at,
                path,
                line,
                message,
            } => DecodeError::Shape {
                source_name,
                at,
                // The pod's `spec.x` is the template's `<prefix>x`.
                path: crate::decode::parse_path(w.prefix)
                    .into_iter()
                    .chain(path)
                    .collect(),
                line,
                message,
            },
            other => other,
        })
}

fn entry(value: Value, source: &str, at: DocumentRef, gates: crate::FeatureGates) -> Entry {
    let api_version = str_at(&value, &["apiVersion"]);
    let kind = str_at(&value, &["kind"]);
    let name = str_at(&value, &["metadata", "name"]);
    let skipped = |note: String| {
        Entry::Skipped(Skipped {
            source: source.to_owned(),
            at,
            api_version: api_version.clone(),
            kind: kind.clone(),
            name: name.clone(),
            note,
        })
    };
    let mut target = Target {
        source: source.to_owned(),
        at,
        kind: kind.clone(),
        name: name.clone(),
        prefix: String::new(),
        pod: Pod::default(),
        replicas: 1,
        problems: Vec::new(),
    };
    let w = workload(&api_version, &kind);
    let decoded = if api_version == "v1" && kind == "Pod" {
        decode_one(value.clone(), source, at, FieldValidation::Strict).map(|d| d.pod)
    } else if let Some(w) = &w {
        target.prefix = w.prefix.to_owned();
        target.replicas = w
            .replicas
            .and_then(|keys| get(&value, keys))
            .and_then(Value::as_u64)
            .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX));
        if get(&value, w.template).is_none() {
            target.problems.push(Problem {
                path: w.prefix.trim_end_matches('.').to_owned(),
                message: format!("{}: Required value", w.prefix.trim_end_matches('.')),
            });
            return Entry::Target(Box::new(target));
        }
        template_pod(&value, w, source, at)
    } else if WORKLOAD_KINDS.contains(&kind.as_str()) || kind == "Pod" {
        return skipped(format!(
            "apiVersion {api_version:?} of kind {kind} is not served by Kubernetes 1.35: not linted"
        ));
    } else {
        return skipped(format!(
            "{} holds no pod template: not linted",
            if kind.is_empty() {
                "an object without a kind"
            } else {
                &kind
            }
        ));
    };
    match decoded {
        Ok(pod) => {
            target.pod = pod;
            check(&mut target, &value, w.as_ref(), gates);
        }
        Err(DecodeError::UnknownFields { fields, .. }) => {
            target.problems = fields
                .into_iter()
                .map(|f| Problem {
                    message: format!(
                        "strict decoding error: unknown field {}",
                        crate::validation::go_quote(&f)
                    ),
                    path: f,
                })
                .collect();
        }
        Err(DecodeError::Shape { path, message, .. }) if !path.is_empty() => {
            let path = crate::decode::path_text(&path);
            target.problems.push(Problem {
                message: format!("{path}: {message}"),
                path,
            });
        }
        Err(e) => target.problems.push(Problem {
            path: target.prefix.trim_end_matches('.').to_owned(),
            message: match e {
                DecodeError::Shape { message, .. } => message,
                other => other.to_string(),
            },
        }),
    }
    Entry::Target(Box::new(target))
}

/// The workload's `restartPolicy` rule (`ValidatePodTemplateSpecForReplicaSet`,
/// `validateJobSpec`) on the template as written.
fn restart_policy_errors(value: &Value, w: &Workload) -> Vec<FieldError> {
    let written = get(value, w.template)
        .and_then(|t| get(t, &["spec", "restartPolicy"]))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let path = Path::new(&format!("{}spec", w.prefix)).child("restartPolicy");
    if w.job {
        // The template was defaulted to `Always` when empty: both are refused the same way.
        if written.is_empty() || written == "Always" {
            return vec![FieldError::required(
                &path,
                "valid values: \"OnFailure\", \"Never\"",
            )];
        } else if written != "OnFailure" && written != "Never" {
            return vec![FieldError::not_supported(
                &path,
                written,
                &["OnFailure", "Never"],
            )];
        }
    } else if !written.is_empty() && written != "Always" {
        return vec![FieldError::not_supported(&path, written, &["Always"])];
    }
    Vec::new()
}

/// The pods `podvisor run` makes of a workload, as `podman kube play` does: its pod template
/// `replicas` times for a Deployment, ReplicaSet, StatefulSet or ReplicationController, once
/// for a DaemonSet (one node), a Job or a CronJob (one run of its job, now). Pods are named
/// as their controllers name them (`web-6c9f8d7b5d-x2k4q`, `db-0`, `backup-x2k4q`), with the
/// labels the controllers add. `None` when `value` is no workload.
pub(crate) fn workload_pods(
    value: &Value,
    source: &str,
    at: DocumentRef,
) -> Option<Result<(Vec<Pod>, String), DecodeError>> {
    let api_version = str_at(value, &["apiVersion"]);
    let kind = str_at(value, &["kind"]);
    let w = workload(&api_version, &kind)?;
    Some(expand(value, &w, &kind, source, at))
}

fn expand(
    value: &Value,
    w: &Workload,
    kind: &str,
    source: &str,
    at: DocumentRef,
) -> Result<(Vec<Pod>, String), DecodeError> {
    let name = str_at(value, &["metadata", "name"]);
    let refuse = |message: String| DecodeError::Workload {
        source_name: source.to_owned(),
        at,
        message,
    };
    if get(value, w.template).is_none() {
        return Err(refuse(format!(
            "{kind}/{name}: {}: Required value",
            w.prefix.trim_end_matches('.')
        )));
    }
    if let Some(e) = restart_policy_errors(value, w).into_iter().next() {
        return Err(refuse(format!("{kind}/{name}: {e}")));
    }
    let template = template_pod(value, w, source, at)?;
    let count = match kind {
        "Deployment" | "ReplicaSet" | "StatefulSet" | "ReplicationController" => w
            .replicas
            .and_then(|keys| get(value, keys))
            .and_then(Value::as_u64)
            .unwrap_or(1),
        _ => 1,
    };
    // The Deployment controller's `pod-template-hash`: stable for one template.
    let template_hash = {
        let text = get(value, w.template)
            .map(Value::to_string)
            .unwrap_or_default();
        let mut h: u32 = 0x811c_9dc5;
        for b in text.bytes() {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut out = String::new();
        let mut n = u64::from(h) * 977;
        for _ in 0..10 {
            out.push(char::from(ALPHABET[(n % 27) as usize]));
            n = n / 27 + u64::from(h);
        }
        out
    };
    let mut pods = Vec::new();
    for i in 0..count {
        let mut pod = template.clone();
        let labels = pod.metadata.labels.get_or_insert_with(Default::default);
        let pod_name = match kind {
            "Deployment" => {
                labels.insert("pod-template-hash".to_owned(), template_hash.clone());
                format!("{name}-{template_hash}-{}", crate::meta::name_suffix())
            }
            "StatefulSet" => {
                labels.insert(
                    "statefulset.kubernetes.io/pod-name".to_owned(),
                    format!("{name}-{i}"),
                );
                labels.insert("apps.kubernetes.io/pod-index".to_owned(), i.to_string());
                format!("{name}-{i}")
            }
            "Job" | "CronJob" => {
                labels.insert("batch.kubernetes.io/job-name".to_owned(), name.clone());
                labels.insert("job-name".to_owned(), name.clone());
                format!("{name}-{}", crate::meta::name_suffix())
            }
            _ => format!("{name}-{}", crate::meta::name_suffix()),
        };
        pod.metadata.name = Some(pod_name);
        pods.push(pod);
    }
    let what = match kind {
        "DaemonSet" => "one pod (one node)".to_owned(),
        "Job" => "one pod of its template".to_owned(),
        "CronJob" => "one pod of its job, now (its schedule is not followed)".to_owned(),
        _ if count == 1 => "1 replica of its template".to_owned(),
        _ => format!("{count} replicas of its template"),
    };
    let note = format!(
        "{source}: {kind}/{name}: running {what}; rollouts, scaling, restarts of deleted pods and \
         Services need a Kubernetes control plane (podvisor as a node of a cluster)"
    );
    Ok((pods, note))
}

/// Defaults and validates the target's pod as the API server would, plus the workload's
/// `restartPolicy` rule (`ValidatePodTemplateSpecForReplicaSet`, `validateJobSpec`).
fn check(target: &mut Target, value: &Value, w: Option<&Workload>, gates: crate::FeatureGates) {
    if target.name.is_empty() {
        target.name = target
            .pod
            .metadata
            .generate_name
            .clone()
            .unwrap_or_default();
    }
    crate::apply_defaults(&mut target.pod);
    crate::drop_disabled_fields(&mut target.pod, None);
    let mut errors: Vec<FieldError> = match crate::validate_pod_with_gates(&target.pod, gates) {
        Ok(()) => Vec::new(),
        Err(e) => e.errors,
    };
    for e in &mut errors {
        e.path = target.full_path(&e.path);
    }
    if let Some(w) = w {
        errors.extend(restart_policy_errors(value, w));
    }
    target.problems = errors
        .into_iter()
        .map(|e| Problem {
            path: e.path.clone(),
            message: e.to_string(),
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(yaml: &str) -> Vec<Entry> {
        decode_targets(yaml, "t.yaml").unwrap()
    }

    fn target(e: &Entry) -> &Target {
        match e {
            Entry::Target(t) => t,
            Entry::Skipped(s) => panic!("skipped: {s:?}"),
        }
    }

    const CRONJOB: &str = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly, namespace: ops}\nspec:\n  schedule: '0 3 * * *'\n  jobTemplate:\n    spec:\n      parallelism: 4\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n          - {name: run, image: busybox, command: [date]}\n";

    #[test]
    fn a_cronjob_template_is_a_named_defaulted_pod_with_its_parallelism() {
        let e = entries(CRONJOB);
        let t = target(&e[0]);
        assert!(t.problems.is_empty(), "{:?}", t.problems);
        assert_eq!(t.prefix, "spec.jobTemplate.spec.template.");
        assert_eq!(t.replicas, 4);
        assert_eq!(t.pod.metadata.name.as_deref(), Some("nightly"));
        assert_eq!(t.pod.metadata.namespace.as_deref(), Some("ops"));
        let spec = t.pod.spec.as_ref().unwrap();
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
    }

    #[test]
    fn template_errors_carry_the_workload_path() {
        let unknown = CRONJOB.replace("command: [date]", "command: [date], imagee: x");
        let e = entries(&unknown);
        assert_eq!(
            target(&e[0]).problems[0].path,
            "spec.jobTemplate.spec.template.spec.containers[0].imagee"
        );
        let invalid = CRONJOB.replace("name: run,", "name: Run_1,");
        let e = entries(&invalid);
        let p = &target(&e[0]).problems[0];
        assert_eq!(
            p.path,
            "spec.jobTemplate.spec.template.spec.containers[0].name"
        );
        assert!(
            p.message.starts_with(
                "spec.jobTemplate.spec.template.spec.containers[0].name: Invalid value: \"Run_1\""
            ),
            "{p:?}"
        );
        let always = CRONJOB.replace("OnFailure", "Always");
        let e = entries(&always);
        assert_eq!(
            target(&e[0]).problems[0].message,
            "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
        );
    }

    #[test]
    fn a_deployment_template_must_restart_always() {
        let d = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      restartPolicy: Never\n      containers:\n      - {name: web, image: nginx}\n";
        let e = entries(d);
        assert_eq!(
            target(&e[0]).problems[0].message,
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
        );
        assert_eq!(target(&e[0]).replicas, 1);
    }

    #[test]
    fn other_kinds_and_old_api_versions_are_skipped_with_a_note() {
        let e = entries(
            "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n---\napiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: old}\n",
        );
        let notes: Vec<&str> = e
            .iter()
            .map(|e| match e {
                Entry::Skipped(s) => s.note.as_str(),
                Entry::Target(_) => panic!("not a target"),
            })
            .collect();
        assert_eq!(
            notes,
            [
                "Service holds no pod template: not linted",
                "apiVersion \"extensions/v1beta1\" of kind Deployment is not served by Kubernetes 1.35: not linted",
            ]
        );
    }

    #[test]
    fn simulate_gets_pods_and_templates_and_notes_the_rest() {
        let text =
            format!("{CRONJOB}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n");
        let (pods, skipped) = pods_and_templates(&text, "t.yaml").unwrap();
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].metadata.name.as_deref(), Some("nightly"));
        assert_eq!(
            skipped,
            ["t.yaml: document 2: ConfigMap/c holds no pod template: skipped"]
        );
    }
}
