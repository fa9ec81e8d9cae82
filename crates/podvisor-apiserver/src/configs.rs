//! ConfigMaps, Secrets and ServiceAccounts: create (name generation, system metadata, Secret defaulting and
//! `stringData` merged into `data`, validation), update and patch (JSON, merge, strategic,
//! server-side apply; `immutable` and the Secret type enforced), delete and deletecollection.
//! The rules are `podvisor_api::config` and `podvisor_api::validation`'s; this module is the
//! REST strategy around them (`pkg/registry/core/{configmap,secret}`).

use axum::http::StatusCode;
use axum::response::Response;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use podvisor_api::FieldValidation;
use podvisor_api::config::{decode_object, prepare_secret};
use podvisor_api::validation::{
    go_quote, validate_config_map, validate_config_map_update, validate_secret,
    validate_secret_update, validate_service_account, validate_service_account_update,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::db::{self, CONFIGMAPS, Resource, SECRETS, SERVICEACCOUNTS};
use crate::managed;
use crate::meta::{check_name, check_namespace, pinned_rv, type_meta};
use crate::objects::respond;
use crate::patch::{PatchType, apply_patch, plain_lists, strategic_merge};
use crate::req::Req;
use crate::request::{content_type, duplicate_fields, name_suffix, new_uid, now, parse_body};
use crate::selectors::Selection;
use crate::status::{ApiError, ApiResult, json_response};

/// How many times a write is retried when the object changed underneath it.
const MAX_RETRIES: usize = 5;

/// A decoded ConfigMap, Secret or ServiceAccount.
enum Typed {
    ConfigMap(ConfigMap),
    Secret(Secret),
    ServiceAccount(ServiceAccount),
}

impl Typed {
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Typed::ConfigMap(c) => &mut c.metadata,
            Typed::Secret(s) => &mut s.metadata,
            Typed::ServiceAccount(s) => &mut s.metadata,
        }
    }

    fn value(&self) -> Value {
        match self {
            Typed::ConfigMap(c) => serde_json::to_value(c),
            Typed::Secret(s) => serde_json::to_value(s),
            Typed::ServiceAccount(s) => serde_json::to_value(s),
        }
        .unwrap_or(Value::Null)
    }

    /// Validation on create.
    fn validate(&self) -> ApiResult<()> {
        match self {
            Typed::ConfigMap(c) => validate_config_map(c),
            Typed::Secret(s) => validate_secret(s),
            Typed::ServiceAccount(s) => validate_service_account(s),
        }
        .map_err(|e| ApiError::invalid(&e))
    }

    /// Validation on update against the stored object.
    fn validate_update(&self, old: &Value) -> ApiResult<()> {
        let stored = |e: serde_json::Error| {
            ApiError::internal(format!("stored object does not decode: {e}"))
        };
        match self {
            Typed::ConfigMap(c) => {
                let old: ConfigMap = serde_json::from_value(old.clone()).map_err(stored)?;
                validate_config_map_update(c, &old)
            }
            Typed::Secret(s) => {
                let old: Secret = serde_json::from_value(old.clone()).map_err(stored)?;
                validate_secret_update(s, &old)
            }
            Typed::ServiceAccount(s) => {
                let old: ServiceAccount = serde_json::from_value(old.clone()).map_err(stored)?;
                validate_service_account_update(s, &old)
            }
        }
        .map_err(|e| ApiError::invalid(&e))
    }
}

/// Decodes a request object of `res`'s kind under `fieldValidation`; a Secret is prepared
/// (type defaulted, `stringData` merged). Returns it and the warnings to send.
fn decode(
    res: Resource,
    value: &Value,
    duplicates: &[String],
    fv: FieldValidation,
    prefix: &str,
) -> ApiResult<(Typed, Vec<String>)> {
    let shape = |e: String| ApiError::bad_request(format!("{prefix}{e}"));
    let (typed, unknown) = if res.kind == "Secret" {
        let (mut s, unknown) = decode_object::<Secret>(value.clone()).map_err(shape)?;
        prepare_secret(&mut s);
        (Typed::Secret(s), unknown)
    } else if res.kind == "ServiceAccount" {
        let (s, unknown) = decode_object::<ServiceAccount>(value.clone()).map_err(shape)?;
        (Typed::ServiceAccount(s), unknown)
    } else {
        let (c, unknown) = decode_object::<ConfigMap>(value.clone()).map_err(shape)?;
        (Typed::ConfigMap(c), unknown)
    };
    let problems: Vec<String> = duplicates
        .iter()
        .map(|f| format!("duplicate field {}", go_quote(f)))
        .chain(
            unknown
                .iter()
                .map(|f| format!("unknown field {}", go_quote(f))),
        )
        .collect();
    match fv {
        FieldValidation::Strict if !problems.is_empty() => Err(ApiError::bad_request(format!(
            "{prefix}strict decoding error: {}",
            problems.join(", ")
        ))),
        FieldValidation::Ignore => Ok((typed, Vec::new())),
        _ => Ok((typed, problems)),
    }
}

fn prefix(res: Resource) -> String {
    format!(
        "{0} in version \"v1\" cannot be handled as a {0}: ",
        res.kind
    )
}

/// `POST /api/v1/namespaces/{ns}/{configmaps,secrets}`.
pub(crate) fn create(req: &Req, res: Resource, ns: &str, body: &[u8]) -> ApiResult<Response> {
    create_value(
        req,
        res,
        ns,
        parse_body(body)?,
        &duplicate_fields(body),
        "Update",
    )
}

fn create_value(
    req: &Req,
    res: Resource,
    ns: &str,
    mut value: Value,
    duplicates: &[String],
    operation: &str,
) -> ApiResult<Response> {
    let fv = req.params.field_validation()?;
    let dry_run = req.params.dry_run()?;
    type_meta(&mut value, res.kind)?;
    check_namespace(&value, ns)?;
    let (mut typed, warnings) = decode(res, &value, duplicates, fv, &prefix(res))?;
    let store = req.state.store();
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    crate::namespace_controller::admit_create(store, res.plural, name, ns)?;
    let meta = typed.meta_mut();
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
    meta.creation_timestamp = Some(Time(now()));
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.generation = None;
    meta.self_link = None;
    meta.managed_fields = None;
    let name = meta.name.clone().unwrap_or_default();
    typed.validate()?;
    let mut obj = typed.value();
    // What the client sent is managed, but never `stringData` (it is not stored).
    let known = managed::known_only(&without_string_data(&value), &obj, plain_lists);
    let manager = managed::manager_name(&req.params, &req.headers);
    managed::record(
        &mut obj,
        &manager,
        operation,
        None,
        managed::fields_v1(&known, false, plain_lists),
        now(),
    );
    let stored = if dry_run {
        obj
    } else {
        db::create(store, res, ns, &name, obj)?
    };
    Ok(respond(req, res, StatusCode::CREATED, &stored, &warnings))
}

fn without_string_data(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut()
        && let Some(strings) = m.remove("stringData").and_then(|s| s.as_object().cloned())
        && let Some(d) = m.entry("data").or_insert_with(|| json!({})).as_object_mut()
    {
        for k in strings.keys() {
            d.insert(k.clone(), json!(""));
        }
    }
    v
}

/// Compares ignoring managed fields and the resourceVersion (a no-op write writes nothing).
fn same_object(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
            m.remove("resourceVersion");
        }
        v
    };
    strip(a) == strip(b)
}

/// The optimistic update loop of PUT, PATCH and apply: read, compute from the current
/// object, keep the system metadata, validate the update, write under the read version.
fn update_loop(
    req: &Req,
    res: Resource,
    ns: &str,
    name: &str,
    client_rv: Option<u64>,
    (operation, source): (&str, Option<&Value>),
    mut compute: impl FnMut(&Value) -> ApiResult<(Typed, Vec<String>)>,
) -> ApiResult<Response> {
    let store = req.state.store();
    let dry_run = req.params.dry_run()?;
    let manager = managed::manager_name(&req.params, &req.headers);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let old = db::get(store, res, ns, name)?;
        let old_rv = db::object_rv(&old);
        if client_rv.is_some() && client_rv != old_rv {
            return Err(ApiError::stale(res.plural, name));
        }
        let (mut typed, warnings) = compute(&old)?;
        let old_meta: ObjectMeta =
            serde_json::from_value(old["metadata"].clone()).unwrap_or_default();
        let meta = typed.meta_mut();
        meta.namespace = Some(ns.to_owned());
        if meta.uid.as_deref().unwrap_or("").is_empty() {
            meta.uid.clone_from(&old_meta.uid);
        }
        meta.creation_timestamp
            .clone_from(&old_meta.creation_timestamp);
        meta.deletion_timestamp
            .clone_from(&old_meta.deletion_timestamp);
        meta.deletion_grace_period_seconds = old_meta.deletion_grace_period_seconds;
        meta.resource_version.clone_from(&old_meta.resource_version);
        // managedFields a client sends are taken as they are (kubectl replaces them with a
        // JSON patch when it moves an object from client-side to server-side apply).
        if meta.managed_fields.is_none() {
            meta.managed_fields.clone_from(&old_meta.managed_fields);
        }
        meta.generation = old_meta.generation;
        if meta.generate_name.is_none() {
            meta.generate_name.clone_from(&old_meta.generate_name);
        }
        typed.validate_update(&old)?;
        let mut new = typed.value();
        if same_object(&new, &old) {
            return Ok(respond(req, res, StatusCode::OK, &old, &warnings));
        }
        let fields = source.map_or_else(
            || json!({}),
            |s| {
                let known = managed::known_only(&without_string_data(s), &new, plain_lists);
                managed::fields_v1(&known, false, plain_lists)
            },
        );
        managed::record(&mut new, &manager, operation, None, fields, now());
        if dry_run {
            return Ok(respond(req, res, StatusCode::OK, &new, &warnings));
        }
        match db::update(store, res, ns, name, new, old_rv) {
            Ok(stored) => return Ok(respond(req, res, StatusCode::OK, &stored, &warnings)),
            Err(e) if e.code == 409 && client_rv.is_none() && attempt < MAX_RETRIES => {}
            Err(e) => return Err(e),
        }
    }
}

/// `PUT /api/v1/namespaces/{ns}/{configmaps,secrets}/{name}`.
pub(crate) fn update(
    req: &Req,
    res: Resource,
    ns: &str,
    name: &str,
    body: &[u8],
) -> ApiResult<Response> {
    let fv = req.params.field_validation()?;
    let mut value = parse_body(body)?;
    type_meta(&mut value, res.kind)?;
    check_namespace(&value, ns)?;
    check_name(&value, name)?;
    let client_rv = pinned_rv(&value)?;
    let duplicates = duplicate_fields(body);
    update_loop(
        req,
        res,
        ns,
        name,
        client_rv,
        ("Update", Some(&value)),
        |_| decode(res, &value, &duplicates, fv, &prefix(res)),
    )
}

/// `PATCH /api/v1/namespaces/{ns}/{configmaps,secrets}/{name}`.
pub(crate) fn patch(
    req: &Req,
    res: Resource,
    ns: &str,
    name: &str,
    body: &[u8],
) -> ApiResult<Response> {
    let patch_type = PatchType::from_content_type(&content_type(&req.headers))?;
    if patch_type == PatchType::Apply {
        return apply(req, res, ns, name, body);
    }
    let fv = req.params.field_validation()?;
    let source = match patch_type {
        PatchType::Json => None,
        _ => Some(parse_body(body)?),
    };
    let duplicates = match patch_type {
        PatchType::Json => Vec::new(),
        _ => duplicate_fields(body),
    };
    update_loop(
        req,
        res,
        ns,
        name,
        None,
        ("Update", source.as_ref()),
        |current| {
            let patched = apply_patch(current, patch_type, body, plain_lists)?;
            if patched.pointer("/metadata/resourceVersion")
                != current.pointer("/metadata/resourceVersion")
            {
                return Err(ApiError::stale(res.plural, name));
            }
            decode(res, &patched, &duplicates, fv, "")
        },
    )
}

/// Server-side apply: create from the applied configuration, or merge it into the live
/// object, removing what this manager applied before and no longer applies.
fn apply(req: &Req, res: Resource, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    if req.params.field_manager.as_deref().unwrap_or("").is_empty() {
        return Err(ApiError::bad_request(
            "PATCH request with apply patch must specify fieldManager",
        ));
    }
    let mut applied = parse_body(body)?;
    type_meta(&mut applied, res.kind)?;
    check_namespace(&applied, ns)?;
    check_name(&applied, name)?;
    let duplicates = duplicate_fields(body);
    if db::try_get(req.state.store(), res, ns, name)?.is_none() {
        return create_value(req, res, ns, applied, &duplicates, "Apply");
    }
    let fv = req.params.field_validation()?;
    let mut intent = applied.clone();
    if let Some(meta) = intent.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    let applied_fields = managed::fields_v1(&without_string_data(&applied), false, plain_lists);
    let manager = managed::manager_name(&req.params, &req.headers);
    let force = crate::request::flag(req.params.force.as_ref());
    update_loop(
        req,
        res,
        ns,
        name,
        None,
        ("Apply", Some(&applied)),
        |current| {
            let config = without_string_data(&applied);
            let take_over = managed::conflicts(
                current,
                &manager,
                &config,
                &applied_fields,
                force,
                plain_lists,
            )?;
            let mut merged = current.clone();
            if take_over {
                managed::take_over(&mut merged, &manager, &applied_fields);
            }
            managed::prune(&mut merged, &manager, &applied_fields);
            strategic_merge(&mut merged, &intent, plain_lists)?;
            decode(res, &merged, &duplicates, fv, "")
        },
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Preconditions {
    uid: Option<String>,
    resource_version: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct DeleteOptions {
    preconditions: Option<Preconditions>,
}

fn delete_options(body: &[u8]) -> ApiResult<DeleteOptions> {
    match crate::request::delete_options_body(body)? {
        None => Ok(DeleteOptions::default()),
        Some(v) => serde_json::from_value(v)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}"))),
    }
}

fn delete_one(
    req: &Req,
    res: Resource,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<Value> {
    let store = req.state.store();
    let current = db::get(store, res, ns, name)?;
    let pre = opts.preconditions.as_ref();
    if let Some(uid) = pre.and_then(|p| p.uid.as_deref())
        && current.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid)
    {
        return Err(ApiError::conflict(
            res.kind,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                current
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ),
        ));
    }
    let rv = match pre.and_then(|p| p.resource_version.as_deref()) {
        Some(rv) => Some(db::parse_rv(rv)?),
        None => db::object_rv(&current),
    };
    if req.params.dry_run()? {
        return Ok(current);
    }
    db::delete(store, res, ns, name, None, rv)
}

/// The `Status` a delete of these kinds returns (their stores do not return the object).
fn deleted_status(res: Resource, obj: &Value) -> Value {
    let meta = &obj["metadata"];
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": meta["name"], "kind": res.plural, "uid": meta["uid"]},
    })
}

/// `DELETE /api/v1/namespaces/{ns}/{configmaps,secrets}/{name}`.
pub(crate) fn delete(
    req: &Req,
    res: Resource,
    ns: &str,
    name: &str,
    body: &[u8],
) -> ApiResult<Response> {
    let opts = delete_options(body)?;
    let obj = delete_one(req, res, ns, name, &opts)?;
    // An object with finalizers is only marked, and returned as it now is.
    if obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
        && db::try_get(req.state.store(), res, ns, name)?.is_some()
    {
        return Ok(respond(req, res, StatusCode::OK, &obj, &[]));
    }
    Ok(json_response(StatusCode::OK, &deleted_status(res, &obj)))
}

/// `DELETE /api/v1/namespaces/{ns}/{configmaps,secrets}` (deletecollection): the list of
/// what was deleted.
pub(crate) fn delete_collection(
    req: &Req,
    res: Resource,
    ns: &str,
    body: &[u8],
) -> ApiResult<Response> {
    let opts = delete_options(body)?;
    let selection = Selection::parse(
        res,
        req.params.label_selector.as_deref(),
        req.params.field_selector.as_deref(),
    )?;
    let (items, rv) = db::list(req.state.store(), res, Some(ns))?;
    let mut out = Vec::new();
    for obj in items.iter().filter(|o| selection.matches(o)) {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        match delete_one(req, res, ns, name, &opts) {
            Ok(v) => out.push(v),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({"kind": format!("{}List", res.kind), "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}, "items": out}),
    ))
}

/// The kind behind a collection name, if it is one of these.
pub(crate) fn resource(plural: &str) -> Option<Resource> {
    match plural {
        "configmaps" => Some(CONFIGMAPS),
        "secrets" => Some(SECRETS),
        "serviceaccounts" => Some(SERVICEACCOUNTS),
        _ => None,
    }
}
