//! Pods: create (admission: defaulting, name generation, validation, PodSecurity; then the
//! scheduler's binding), update
//! and patch (spec mutability, M11), server-side apply; delete and the status subresource
//! live in the submodules.

use axum::http::StatusCode;
use axum::response::Response;
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podvisor_api::validation::go_quote;
use podvisor_api::{
    DecodeError, FieldValidation, apply_defaults, drop_disabled_fields, validate_pod_update,
    validate_pod_with_gates,
};
use podvisor_store::Preconditions;
use serde_json::{Value, json};

use crate::db::{self, PODS};
use crate::managed;
use crate::meta::{check_name, check_namespace, pinned_rv, same_object, type_meta};
use crate::objects::respond;
use crate::patch::{PatchType, apply_patch, pod_lists, strategic_merge};
use crate::req::Req;
use crate::request::{content_type, duplicate_fields, name_suffix, new_uid, now, parse_body};
use crate::scheduler;
use crate::status::{ApiError, ApiResult};

mod delete;
pub(crate) mod ephemeral;
pub(crate) mod resize;
pub(crate) mod status;

pub(crate) use delete::{delete, delete_collection, delete_gracefully};

/// How many times a write is retried when the object changed underneath it.
const MAX_RETRIES: usize = 5;

/// Decodes a Pod under `fieldValidation`; returns it and the `Warning`s to send.
/// `duplicates` are the keys the request body repeated ([`duplicate_fields`]): like unknown
/// fields, an error under `Strict`, warnings under `Warn` (the last value counts).
/// `prefix` starts strict-decoding messages (creates and updates name the type, patches
/// do not).
pub(crate) fn decode_pod(
    value: &Value,
    duplicates: &[String],
    fv: FieldValidation,
    prefix: &str,
) -> ApiResult<(Pod, Vec<String>)> {
    let mut problems: Vec<String> = duplicates
        .iter()
        .map(|f| format!("duplicate field {}", go_quote(f)))
        .collect();
    let pod = match podvisor_api::decode_pods_with(&value.to_string(), "request", fv) {
        Ok(mut pods) if pods.len() == 1 => {
            let d = pods.remove(0);
            problems.extend(
                d.unknown_fields
                    .iter()
                    .map(|f| format!("unknown field {}", go_quote(f))),
            );
            d.pod
        }
        Ok(_) => return Err(ApiError::bad_request("expected exactly one Pod")),
        Err(DecodeError::UnknownFields { fields, .. }) => {
            problems.extend(
                fields
                    .iter()
                    .map(|f| format!("unknown field {}", go_quote(f))),
            );
            return Err(strict_error(prefix, &problems));
        }
        Err(DecodeError::Shape { path, message, .. }) => {
            let field = if path.is_empty() {
                String::new()
            } else {
                format!("{}: ", podvisor_api::decode::path_text(&path))
            };
            return Err(ApiError::bad_request(format!("{prefix}{field}{message}")));
        }
        Err(e) => return Err(ApiError::bad_request(e.to_string())),
    };
    match fv {
        FieldValidation::Strict if !problems.is_empty() => Err(strict_error(prefix, &problems)),
        FieldValidation::Ignore => Ok((pod, Vec::new())),
        _ => Ok((pod, problems)),
    }
}

/// `runtime.NewStrictDecodingError`: every problem, in one message.
fn strict_error(prefix: &str, problems: &[String]) -> ApiError {
    ApiError::bad_request(format!(
        "{prefix}strict decoding error: {}",
        problems.join(", ")
    ))
}

const CREATE_PREFIX: &str = "Pod in version \"v1\" cannot be handled as a Pod: ";

/// A stored Pod, typed.
pub(crate) fn pod_of(obj: &Value) -> ApiResult<Pod> {
    serde_json::from_value(obj.clone())
        .map_err(|e| ApiError::internal(format!("stored pod does not decode: {e}")))
}

/// A Pod as stored.
pub(crate) fn value_of(pod: &Pod) -> Value {
    serde_json::to_value(pod).unwrap_or(Value::Null)
}

/// The `RuntimeClass` admission plugin: a pod naming a class the node does not have is
/// refused (`process` and `oci` are podvisor's; the kubelet's handler is the class's name).
fn runtime_class_admission(pod: &Pod) -> ApiResult<()> {
    let Some(name) = pod
        .spec
        .as_ref()
        .and_then(|s| s.runtime_class_name.as_deref())
    else {
        return Ok(());
    };
    if podvisor_runtime::process::RuntimeClass::from_name(name).is_some() {
        return Ok(());
    }
    Err(ApiError::forbidden(
        "pods",
        pod.metadata.name.as_deref().unwrap_or_default(),
        &format!(
            "pod rejected: RuntimeClass {} not found",
            podvisor_api::gotext::quote(name)
        ),
    ))
}

/// Admission of a new pod: name generation, system metadata, defaults, the initial status
/// (with `PodScheduled=False` `SchedulingGated` when gated), validation. Binding is the
/// scheduler's, after the create.
fn admit_new(
    store: Option<&podvisor_store::Store>,
    ns: &str,
    mut pod: Pod,
    gates: podvisor_api::FeatureGates,
) -> ApiResult<Pod> {
    let now = now();
    let meta = &mut pod.metadata;
    meta.namespace = Some(ns.to_owned());
    if meta.name.as_deref().unwrap_or("").is_empty()
        && let Some(g) = meta.generate_name.as_deref().filter(|g| !g.is_empty())
    {
        meta.name = Some(format!("{g}{}", name_suffix()));
    }
    if meta
        .resource_version
        .as_deref()
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    meta.uid = Some(new_uid());
    meta.creation_timestamp = Some(Time(now));
    meta.generation = Some(1);
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.self_link = None;
    meta.managed_fields = None;
    apply_defaults(&mut pod);
    drop_disabled_fields(&mut pod, None);
    runtime_class_admission(&pod)?;
    // The ServiceAccount admission plugin, when service accounts are served.
    if let Some(store) = store {
        crate::serviceaccounts::admit(store, ns, &mut pod)?;
    }
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    // The DefaultTolerationSeconds admission plugin.
    podvisor_api::scheduling::taints::add_default_toleration_seconds(spec);
    // No binding here: the scheduler binds after the create (`scheduler::schedule`).
    let status = PodStatus {
        phase: Some("Pending".to_owned()),
        qos_class: Some(podvisor_api::pod::qos_class(spec).as_str().to_owned()),
        ..PodStatus::default()
    };
    pod.status = Some(status);
    podvisor_api::pod::apply_scheduling_gated_condition(&mut pod, now);
    validate_pod_with_gates(&pod, gates).map_err(|e| ApiError::invalid(&e))?;
    Ok(pod)
}

/// Creates a pod from a request object; `operation` is the managed-fields operation.
fn create_value(
    req: &Req,
    ns: &str,
    mut value: Value,
    duplicates: &[String],
    operation: &str,
) -> ApiResult<Response> {
    let fv = req.params.field_validation()?;
    let dry_run = req.params.dry_run()?;
    type_meta(&mut value, "Pod")?;
    check_namespace(&value, ns)?;
    let (pod, mut warnings) = decode_pod(&value, duplicates, fv, CREATE_PREFIX)?;
    let store = req.state.store();
    crate::namespace_controller::admit_create(
        store,
        PODS.plural,
        pod.metadata.name.as_deref().unwrap_or(""),
        ns,
    )?;
    let known = managed::known_only(&value, &value_of(&pod), pod_lists);
    let pod = admit_new(
        req.state.root_ca().map(|_| store),
        ns,
        pod,
        req.state.feature_gates(),
    )?;
    warnings.extend(crate::pod_security::admit_pod_create(store, ns, &pod)?);
    let name = pod.metadata.name.clone().unwrap_or_default();
    let mut obj = value_of(&pod);
    let manager = managed::manager_name(&req.params, &req.headers);
    let fields = managed::fields_v1(&known, false, pod_lists);
    managed::record(&mut obj, &manager, operation, None, fields, now());
    let stored = if dry_run {
        obj
    } else {
        // The response is the pod as created (unbound, as the API server answers); the
        // scheduler's binding is the next write, committed with it.
        store
            .transaction(|t| {
                let stored = t.create(&db::key(PODS, ns, &name), obj)?;
                scheduler::schedule(t, req.state.node_name(), &stored);
                Ok(stored)
            })
            .map_err(|e| db::api_error(PODS, &name, e))?
    };
    Ok(respond(req, PODS, StatusCode::CREATED, &stored, &warnings))
}

/// `POST /api/v1/namespaces/{ns}/pods`.
pub(crate) fn create(req: &Req, ns: &str, body: &[u8]) -> ApiResult<Response> {
    create_value(
        req,
        ns,
        parse_body(body)?,
        &duplicate_fields(body),
        "Update",
    )
}

/// What an update writes and records.
pub(crate) struct Write<'a> {
    /// Managed-fields operation: `Update` or `Apply`.
    pub operation: &'a str,
    /// What the request set (the object, the patch, the applied configuration): the fields
    /// of it that the decoded pod kept are recorded. `None` records none (a JSON patch).
    pub source: Option<Value>,
    /// Which part of the pod the request may change.
    pub subresource: Subresource,
}

/// The pod itself or one of its subresources that write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subresource {
    /// The pod (spec mutability, M11).
    Pod,
    /// `pods/status`: only status changes are taken.
    Status,
    /// `pods/ephemeralcontainers`: only `spec.ephemeralContainers` changes are taken.
    EphemeralContainers,
    /// `pods/resize`: only containers' resources and resize policies are taken.
    Resize,
}

impl Subresource {
    /// Its name in `managedFields[].subresource`.
    fn name(self) -> Option<&'static str> {
        match self {
            Subresource::Pod => None,
            Subresource::Status => Some("status"),
            Subresource::EphemeralContainers => Some("ephemeralcontainers"),
            Subresource::Resize => Some("resize"),
        }
    }
}

/// Spec update admission (`BeforeUpdate` + `PrepareForUpdate` + `ValidatePodUpdate`).
fn admit_update(ns: &str, old: &Pod, mut new: Pod) -> ApiResult<Pod> {
    new.metadata.namespace = Some(ns.to_owned());
    apply_defaults(&mut new);
    drop_disabled_fields(&mut new, Some(old));
    new.status = old.status.clone();
    let (n, o) = (&mut new.metadata, &old.metadata);
    if n.uid.as_deref().unwrap_or("").is_empty() {
        n.uid = o.uid.clone();
    }
    n.creation_timestamp = o.creation_timestamp.clone();
    n.deletion_timestamp = o.deletion_timestamp.clone();
    n.deletion_grace_period_seconds = o.deletion_grace_period_seconds;
    n.resource_version = o.resource_version.clone();
    n.managed_fields = o.managed_fields.clone();
    n.generation = o.generation;
    if n.generate_name.is_none() {
        n.generate_name = o.generate_name.clone();
    }
    if new.spec != old.spec {
        new.metadata.generation = Some(old.metadata.generation.unwrap_or(0) + 1);
    }
    validate_pod_update(old, &new).map_err(|e| ApiError::invalid(&e))?;
    Ok(new)
}

/// The optimistic update loop shared by PUT, PATCH and apply, for the pod and its status:
/// read, compute the new pod from the current object, admit, write with the read
/// resourceVersion as precondition; retried when the object changed underneath, unless
/// the client pinned a resourceVersion.
pub(crate) fn update_loop(
    req: &Req,
    ns: &str,
    name: &str,
    client_rv: Option<u64>,
    write: &Write<'_>,
    mut compute: impl FnMut(&Value) -> ApiResult<(Pod, Vec<String>)>,
) -> ApiResult<Response> {
    let store = req.state.store();
    let dry_run = req.params.dry_run()?;
    let manager = managed::manager_name(&req.params, &req.headers);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let old_value = db::get(store, PODS, ns, name)?;
        let old_rv = db::object_rv(&old_value);
        if client_rv.is_some() && client_rv != old_rv {
            return Err(ApiError::stale(PODS.plural, name));
        }
        let old = pod_of(&old_value)?;
        let (new, mut warnings) = compute(&old_value)?;
        let fields = write.source.as_ref().map_or_else(
            || json!({}),
            |source| {
                let known = managed::known_only(source, &value_of(&new), pod_lists);
                match write.subresource {
                    Subresource::Pod | Subresource::Resize => {
                        managed::fields_v1(&known, false, pod_lists)
                    }
                    Subresource::Status => managed::fields_v1(&known, true, pod_lists),
                    Subresource::EphemeralContainers => ephemeral::fields_v1(&known, pod_lists),
                }
            },
        );
        let new = match write.subresource {
            Subresource::Pod => admit_update(ns, &old, new)?,
            Subresource::Status => status::admit_status(&old, new)?,
            Subresource::EphemeralContainers => ephemeral::admit(&old, new)?,
            Subresource::Resize => resize::admit_resize(&old, new)?,
        };
        // PodSecurity: the pod and its ephemeral containers, not status or resize writes.
        if matches!(
            write.subresource,
            Subresource::Pod | Subresource::EphemeralContainers
        ) {
            warnings.extend(crate::pod_security::admit_pod_update(
                store, ns, &old, &new,
            )?);
        }
        let mut new_value = value_of(&new);
        if same_object(&new_value, &old_value) {
            return Ok(respond(req, PODS, StatusCode::OK, &old_value, &warnings));
        }
        let subresource = write.subresource.name();
        managed::record(
            &mut new_value,
            &manager,
            write.operation,
            subresource,
            fields,
            now(),
        );
        if dry_run {
            return Ok(respond(req, PODS, StatusCode::OK, &new_value, &warnings));
        }
        let precondition = Preconditions {
            uid: None,
            resource_version: old_rv.map(|v| v.to_string()),
        };
        let updated = store
            .transaction(|t| {
                let stored = t.update(&db::key(PODS, ns, name), new_value, precondition)?;
                // The update that removed the last scheduling gate: the scheduler binds in
                // the same commit.
                if write.subresource == Subresource::Pod {
                    scheduler::schedule(t, req.state.node_name(), &stored);
                }
                Ok(stored)
            })
            .map_err(|e| db::api_error(PODS, name, e));
        match updated {
            Ok(stored) => return Ok(respond(req, PODS, StatusCode::OK, &stored, &warnings)),
            Err(e) if e.code == 409 && client_rv.is_none() && attempt < MAX_RETRIES => {}
            Err(e) => return Err(e),
        }
    }
}

/// `PUT /api/v1/namespaces/{ns}/pods/{name}`.
pub(crate) fn update(req: &Req, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    let fv = req.params.field_validation()?;
    let mut value = parse_body(body)?;
    type_meta(&mut value, "Pod")?;
    check_namespace(&value, ns)?;
    check_name(&value, name)?;
    let client_rv = pinned_rv(&value)?;
    let (pod, warnings) = decode_pod(&value, &duplicate_fields(body), fv, CREATE_PREFIX)?;
    let write = Write {
        operation: "Update",
        source: Some(value.clone()),
        subresource: Subresource::Pod,
    };
    update_loop(req, ns, name, client_rv, &write, |_| {
        Ok((pod.clone(), warnings.clone()))
    })
}

/// Applies a patch body to the current object and decodes the result.
/// `PUT .../pods/{name}/{status|resize|ephemeralcontainers}`: a Pod of which `subresource`'s
/// part is taken ([`update_loop`] admits it per subresource).
pub(crate) fn update_subresource(
    req: &Req,
    ns: &str,
    name: &str,
    body: &[u8],
    subresource: Subresource,
) -> ApiResult<Response> {
    let fv = req.params.field_validation()?;
    let mut value = parse_body(body)?;
    type_meta(&mut value, "Pod")?;
    check_namespace(&value, ns)?;
    check_name(&value, name)?;
    let client_rv = pinned_rv(&value)?;
    let (pod, warnings) = decode_pod(&value, &duplicate_fields(body), fv, CREATE_PREFIX)?;
    let write = Write {
        operation: "Update",
        source: Some(value.clone()),
        subresource,
    };
    update_loop(req, ns, name, client_rv, &write, |_| {
        Ok((pod.clone(), warnings.clone()))
    })
}

/// `PATCH .../pods/{name}/{status|resize|ephemeralcontainers}` (JSON, merge and strategic
/// patches; apply is treated as a strategic merge of what is applied).
pub(crate) fn patch_subresource(
    req: &Req,
    ns: &str,
    name: &str,
    body: &[u8],
    subresource: Subresource,
) -> ApiResult<Response> {
    let patch_type = PatchType::from_content_type(&content_type(&req.headers))?;
    let source = match patch_type {
        PatchType::Json => None,
        _ => Some(parse_body(body)?),
    };
    let write = Write {
        operation: if patch_type == PatchType::Apply {
            "Apply"
        } else {
            "Update"
        },
        source,
        subresource,
    };
    update_loop(req, ns, name, None, &write, |current| {
        patched_pod(req, current, patch_type, body)
    })
}

pub(crate) fn patched_pod(
    req: &Req,
    current: &Value,
    patch_type: PatchType,
    body: &[u8],
) -> ApiResult<(Pod, Vec<String>)> {
    let fv = req.params.field_validation()?;
    let patched = apply_patch(current, patch_type, body, pod_lists)?;
    if patched.pointer("/metadata/resourceVersion") != current.pointer("/metadata/resourceVersion")
    {
        let name = current
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(ApiError::stale(PODS.plural, name));
    }
    // Keys a merge or strategic patch repeats are strict-decoding errors too (the API
    // server's patcher decodes the patch with `UnmarshalStrict`).
    let duplicates = match patch_type {
        PatchType::Json => Vec::new(),
        _ => duplicate_fields(body),
    };
    decode_pod(&patched, &duplicates, fv, "")
}

/// `PATCH /api/v1/namespaces/{ns}/pods/{name}`.
pub(crate) fn patch(req: &Req, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    let patch_type = PatchType::from_content_type(&content_type(&req.headers))?;
    if patch_type == PatchType::Apply {
        return apply(req, ns, name, body);
    }
    let source = match patch_type {
        PatchType::Json => None,
        _ => Some(parse_body(body)?),
    };
    let write = Write {
        operation: "Update",
        source,
        subresource: Subresource::Pod,
    };
    update_loop(req, ns, name, None, &write, |current| {
        patched_pod(req, current, patch_type, body)
    })
}

/// Server-side apply: create the pod from the applied configuration, or merge it into the
/// live object (as a strategic merge; fields the manager no longer applies are kept).
fn apply(req: &Req, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    if req.params.field_manager.as_deref().unwrap_or("").is_empty() {
        return Err(ApiError::bad_request(
            "PATCH request with apply patch must specify fieldManager",
        ));
    }
    let mut applied = parse_body(body)?;
    type_meta(&mut applied, "Pod")?;
    check_namespace(&applied, ns)?;
    check_name(&applied, name)?;
    if db::try_get(req.state.store(), PODS, ns, name)?.is_none() {
        return create_value(req, ns, applied, &duplicate_fields(body), "Apply");
    }
    let fv = req.params.field_validation()?;
    let mut intent = applied.clone();
    if let Some(m) = intent.as_object_mut() {
        m.remove("status");
    }
    if let Some(meta) = intent.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    let applied_fields = managed::fields_v1(&applied, false, pod_lists);
    let duplicates = duplicate_fields(body);
    let write = Write {
        operation: "Apply",
        source: Some(applied),
        subresource: Subresource::Pod,
    };
    let manager = managed::manager_name(&req.params, &req.headers);
    let force = crate::request::flag(req.params.force.as_ref());
    let applied_config = write.source.clone().unwrap_or_default();
    update_loop(req, ns, name, None, &write, |current| {
        let take_over = managed::conflicts(
            current,
            &manager,
            &applied_config,
            &applied_fields,
            force,
            pod_lists,
        )?;
        let mut merged = current.clone();
        if take_over {
            managed::take_over(&mut merged, &manager, &applied_fields);
        }
        managed::prune(&mut merged, &manager, &applied_fields);
        strategic_merge(&mut merged, &intent, pod_lists)?;
        decode_pod(&merged, &duplicates, fv, "")
    })
}
