//! The registry's writes: create (`generateName`, the system metadata), and the optimistic
//! update loop behind PUT, PATCH (JSON, merge, strategic) and server-side apply, for the main
//! resource or its `status` subresource.

use axum::http::StatusCode;
use axum::response::Response;
use podvisor_api::FieldValidation;
use podvisor_api::validation::go_quote;
use serde_json::{Value, json};

use super::Strategy;
use crate::db;
use crate::managed;
use crate::meta::{check_name, check_namespace, pinned_rv, resource_type_meta, same_object};
use crate::objects::respond;
use crate::patch::{PatchType, apply_patch, strategic_merge};
use crate::req::Req;
use crate::request::{
    content_type, duplicate_fields, flag, name_suffix, new_uid, now, parse_body, time_text,
};
use crate::status::{ApiError, ApiResult};

/// How many times a write is retried when the object changed underneath it.
const MAX_RETRIES: usize = 5;

/// Which part of an object a write changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The main resource (of a kind with a status subresource: everything but `status`).
    Main,
    /// The `status` subresource: only `status`.
    Status,
}

impl Part {
    fn subresource(self) -> Option<&'static str> {
        match self {
            Part::Main => None,
            Part::Status => Some("status"),
        }
    }
}

/// Decodes a request object under `fieldValidation`: the object to store and the warnings to
/// send (unknown and duplicate fields are an error under `Strict`).
fn decode(
    s: &Strategy,
    value: &Value,
    duplicates: &[String],
    fv: FieldValidation,
    prefix: &str,
) -> ApiResult<(Value, Vec<String>)> {
    let (obj, unknown) =
        (s.decode)(value.clone()).map_err(|e| ApiError::bad_request(format!("{prefix}{e}")))?;
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
        FieldValidation::Ignore => Ok((obj, Vec::new())),
        _ => Ok((obj, problems)),
    }
}

/// How strict-decoding messages of creates and updates start (patches name no type).
fn prefix(s: &Strategy) -> String {
    let version = db::api_version(s.res);
    format!(
        "{0} in version \"{1}\" cannot be handled as a {0}: ",
        s.res.kind,
        version.rsplit('/').next().unwrap_or(version)
    )
}

fn meta_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata was made an object")
}

/// Sets (namespaced kinds) or clears (cluster-scoped kinds, as `BeforeCreate` does) the
/// object's namespace.
fn set_namespace(s: &Strategy, obj: &mut Value, ns: &str) {
    let meta = meta_mut(obj);
    if s.res.namespaced {
        meta.insert("namespace".to_owned(), json!(ns));
    } else {
        meta.remove("namespace");
    }
}

/// `POST` of a collection.
pub(crate) fn create(req: &Req, s: &Strategy, ns: &str, body: &[u8]) -> ApiResult<Response> {
    create_value(
        req,
        s,
        ns,
        parse_body(body)?,
        &duplicate_fields(body),
        "Update",
    )
}

fn create_value(
    req: &Req,
    s: &Strategy,
    ns: &str,
    mut value: Value,
    duplicates: &[String],
    operation: &str,
) -> ApiResult<Response> {
    let fv = req.params.field_validation()?;
    let dry_run = req.params.dry_run()?;
    resource_type_meta(&mut value, s.res)?;
    if s.res.namespaced {
        check_namespace(&value, ns)?;
    }
    // What the client sent is what its manager owns (not a generated name).
    let as_sent = value.clone();
    // The name is generated first, so the kind's preparation sees it (a namespace's label).
    let sent = meta_mut(&mut value);
    let mut name = sent
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if name.is_empty()
        && let Some(g) = sent
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
    {
        name = format!("{g}{}", name_suffix());
        sent.insert("name".to_owned(), json!(name));
    }
    let (mut obj, mut warnings) = decode(s, &value, duplicates, fv, &prefix(s))?;
    let store = req.state.store();
    let meta = meta_mut(&mut obj);
    if meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    meta.insert("uid".to_owned(), json!(new_uid()));
    meta.insert("creationTimestamp".to_owned(), json!(time_text(now())));
    for k in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "selfLink",
        "managedFields",
    ] {
        meta.remove(k);
    }
    set_namespace(s, &mut obj, ns);
    if s.res.namespaced {
        crate::namespace_controller::admit_create(store, s.res.plural, &name, ns)?;
    }
    (s.validate)(&obj)?;
    if let Some(admit) = s.admit {
        warnings.extend(admit(req, &obj, None)?);
    }
    if let Some(check) = s.before_write {
        check(req, &obj, None)?;
    }
    // What the client sent is managed (as the kind owns it).
    let known = managed::known_only(&(s.managed_source)(&as_sent), &obj, s.lists);
    let manager = managed::manager_name(&req.params, &req.headers);
    managed::record(
        &mut obj,
        &manager,
        operation,
        None,
        managed::fields_v1(&known, false, s.lists),
        now(),
    );
    let stored = if dry_run {
        obj
    } else {
        let stored = db::create(store, s.res, ns, &name, obj)?;
        if let Some(after) = s.after_create {
            after(req, &stored)?;
        }
        stored
    };
    Ok(respond(req, s.res, StatusCode::CREATED, &stored, &warnings))
}

/// A kind with a status subresource: a main write keeps the stored `status`, a status write
/// takes only `status` from `new` (`PrepareForUpdate` of both strategies).
fn keep_part(old: &Value, new: Value, part: Part) -> Value {
    let (mut out, status_from) = match part {
        Part::Main => (new, old.clone()),
        Part::Status => (old.clone(), new),
    };
    match status_from.get("status") {
        Some(st) => out["status"] = st.clone(),
        None => {
            if let Some(o) = out.as_object_mut() {
                o.remove("status");
            }
        }
    }
    out
}

/// The system metadata an update keeps from the stored object.
fn keep_system_metadata(s: &Strategy, new: &mut Value, old: &Value, ns: &str) {
    set_namespace(s, new, ns);
    let old_meta = old["metadata"].as_object().cloned().unwrap_or_default();
    let meta = meta_mut(new);
    let mut keep = |k: &str, only_if_absent: bool| {
        let absent = meta
            .get(k)
            .is_none_or(|v| v.is_null() || v.as_str() == Some(""));
        if only_if_absent && !absent {
            return;
        }
        match old_meta.get(k) {
            Some(v) => {
                meta.insert(k.to_owned(), v.clone());
            }
            None => {
                meta.remove(k);
            }
        }
    };
    keep("uid", true);
    keep("creationTimestamp", false);
    keep("deletionTimestamp", false);
    keep("deletionGracePeriodSeconds", false);
    keep("resourceVersion", false);
    keep("generation", false);
    keep("generateName", true);
    // managedFields a client sends are taken as they are (kubectl replaces them with a JSON
    // patch when it moves an object from client-side to server-side apply).
    keep("managedFields", true);
}

/// What an update does: its managed-fields operation, the request object its manager owns
/// (none for a JSON patch), and which part it writes.
struct Write<'a> {
    operation: &'a str,
    source: Option<&'a Value>,
    part: Part,
}

/// The optimistic update loop of PUT, PATCH and apply: read, compute from the current
/// object, keep the system metadata (and the part not written), validate, write under the
/// read version.
fn update_loop(
    req: &Req,
    s: &Strategy,
    (ns, name): (&str, &str),
    client_rv: Option<u64>,
    write: &Write<'_>,
    mut compute: impl FnMut(&Value) -> ApiResult<(Value, Vec<String>)>,
) -> ApiResult<Response> {
    let store = req.state.store();
    let dry_run = req.params.dry_run()?;
    let manager = managed::manager_name(&req.params, &req.headers);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let old = db::get(store, s.res, ns, name)?;
        let old_rv = db::object_rv(&old);
        if client_rv.is_some() && client_rv != old_rv {
            return Err(ApiError::stale(&s.qualified_plural(), name));
        }
        let (new, mut warnings) = compute(&old)?;
        let mut new = if s.status {
            keep_part(&old, new, write.part)
        } else {
            new
        };
        if let Some(prepare) = s.prepare_update {
            prepare(&mut new, &old);
        }
        keep_system_metadata(s, &mut new, &old, ns);
        (s.validate_update)(&new, &old)?;
        if same_object(&new, &old) {
            return Ok(respond(req, s.res, StatusCode::OK, &old, &warnings));
        }
        if let Some(admit) = s.admit {
            warnings.extend(admit(req, &new, Some(&old))?);
        }
        if let Some(check) = s.before_write {
            check(req, &new, Some(&old))?;
        }
        let status_only = write.part == Part::Status;
        let fields = write.source.map_or_else(
            || json!({}),
            |src| {
                let known = managed::known_only(&(s.managed_source)(src), &new, s.lists);
                managed::fields_v1(&known, status_only, s.lists)
            },
        );
        managed::record(
            &mut new,
            &manager,
            write.operation,
            write.part.subresource(),
            fields,
            now(),
        );
        if dry_run {
            return Ok(respond(req, s.res, StatusCode::OK, &new, &warnings));
        }
        match db::update(store, s.res, ns, name, new, old_rv) {
            Ok(stored) => return Ok(respond(req, s.res, StatusCode::OK, &stored, &warnings)),
            Err(e) if e.code == 409 && client_rv.is_none() && attempt < MAX_RETRIES => {}
            Err(e) => return Err(e),
        }
    }
}

/// `PUT` of an object or its status.
pub(crate) fn update(
    req: &Req,
    s: &Strategy,
    (ns, name): (&str, &str),
    part: Part,
    body: &[u8],
) -> ApiResult<Response> {
    let fv = req.params.field_validation()?;
    let mut value = parse_body(body)?;
    resource_type_meta(&mut value, s.res)?;
    if s.res.namespaced {
        check_namespace(&value, ns)?;
    }
    check_name(&value, name)?;
    let client_rv = pinned_rv(&value)?;
    let duplicates = duplicate_fields(body);
    let (obj, warnings) = decode(s, &value, &duplicates, fv, &prefix(s))?;
    let write = Write {
        operation: "Update",
        source: Some(&value),
        part,
    };
    update_loop(req, s, (ns, name), client_rv, &write, |_| {
        Ok((obj.clone(), warnings.clone()))
    })
}

/// `PATCH` of an object or its status; an apply patch of a missing object creates it.
pub(crate) fn patch(
    req: &Req,
    s: &Strategy,
    (ns, name): (&str, &str),
    part: Part,
    body: &[u8],
) -> ApiResult<Response> {
    let patch_type = PatchType::from_content_type(&content_type(&req.headers))?;
    if patch_type == PatchType::Apply {
        return apply(req, s, (ns, name), part, body);
    }
    let fv = req.params.field_validation()?;
    let (source, duplicates) = match patch_type {
        PatchType::Json => (None, Vec::new()),
        _ => (Some(parse_body(body)?), duplicate_fields(body)),
    };
    let write = Write {
        operation: "Update",
        source: source.as_ref(),
        part,
    };
    update_loop(req, s, (ns, name), None, &write, |current| {
        let patched = apply_patch(current, patch_type, body, s.lists)?;
        if patched.pointer("/metadata/resourceVersion")
            != current.pointer("/metadata/resourceVersion")
        {
            return Err(ApiError::stale(&s.qualified_plural(), name));
        }
        decode(s, &patched, &duplicates, fv, "")
    })
}

/// Server-side apply: create from the applied configuration, or merge it into the live
/// object, removing what this manager applied before and no longer applies.
fn apply(
    req: &Req,
    s: &Strategy,
    (ns, name): (&str, &str),
    part: Part,
    body: &[u8],
) -> ApiResult<Response> {
    if req.params.field_manager.as_deref().unwrap_or("").is_empty() {
        return Err(ApiError::bad_request(
            "PATCH request with apply patch must specify fieldManager",
        ));
    }
    let mut applied = parse_body(body)?;
    resource_type_meta(&mut applied, s.res)?;
    if s.res.namespaced {
        check_namespace(&applied, ns)?;
    }
    check_name(&applied, name)?;
    let duplicates = duplicate_fields(body);
    if part == Part::Main && db::try_get(req.state.store(), s.res, ns, name)?.is_none() {
        if s.status
            && let Some(m) = applied.as_object_mut()
        {
            m.remove("status");
        }
        return create_value(req, s, ns, applied, &duplicates, "Apply");
    }
    let fv = req.params.field_validation()?;
    let mut intent = applied.clone();
    if let Some(meta) = intent.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    let config = (s.managed_source)(&applied);
    let applied_fields = managed::fields_v1(&config, part == Part::Status, s.lists);
    let manager = managed::manager_name(&req.params, &req.headers);
    let force = flag(req.params.force.as_ref());
    let write = Write {
        operation: "Apply",
        source: Some(&applied),
        part,
    };
    update_loop(req, s, (ns, name), None, &write, |current| {
        let take_over =
            managed::conflicts(current, &manager, &config, &applied_fields, force, s.lists)?;
        let mut merged = current.clone();
        if take_over {
            managed::take_over(&mut merged, &manager, &applied_fields);
        }
        managed::prune(&mut merged, &manager, &applied_fields);
        strategic_merge(&mut merged, &intent, s.lists)?;
        decode(s, &merged, &duplicates, fv, "")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn main_writes_keep_status_and_status_writes_keep_the_rest() {
        let old = json!({"metadata": {"name": "n"}, "spec": {}, "status": {"phase": "Running"}});
        let new = json!({"metadata": {"name": "n", "labels": {"a": "b"}},
            "spec": {"unschedulable": true}, "status": {"phase": "Gone"}});
        let main = keep_part(&old, new.clone(), Part::Main);
        assert_eq!(main["spec"]["unschedulable"], json!(true));
        assert_eq!(main["status"]["phase"], json!("Running"));
        assert_eq!(main["metadata"]["labels"]["a"], json!("b"));
        let status = keep_part(&old, new, Part::Status);
        assert_eq!(status["spec"], json!({}));
        assert_eq!(status["status"]["phase"], json!("Gone"));
        assert!(status["metadata"].get("labels").is_none());
    }
}

#[cfg(test)]
mod hook_tests {
    use k8s_openapi::api::rbac::v1::ClusterRole;

    use super::*;
    use crate::ApiState;
    use crate::db::CLUSTERROLES;
    use crate::registry::Strategy;

    /// Refuses any ClusterRole that grants `escalate`, and says what it saw on updates.
    fn refuse_escalate(_: &Req, new: &Value, old: Option<&Value>) -> ApiResult<()> {
        let grants = new.to_string().contains("escalate");
        match (grants, old) {
            (true, None) => Err(ApiError::forbidden_message("create refused by the hook")),
            (true, Some(_)) => Err(ApiError::forbidden_message("update refused by the hook")),
            (false, _) => Ok(()),
        }
    }

    static CHECKED: Strategy = Strategy {
        before_write: Some(refuse_escalate),
        ..Strategy::typed::<ClusterRole>(CLUSTERROLES, "clusterrole")
    };

    fn req(dir: &std::path::Path) -> Req {
        let store = podvisor_store::Store::open(&dir.join("db")).unwrap();
        Req {
            state: ApiState::new(store, dir.join("logs"), "node".to_owned()),
            params: crate::request::Params::default(),
            headers: axum::http::HeaderMap::new(),
            user: None,
        }
    }

    fn role(verb: &str) -> Vec<u8> {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": [verb]}]})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn before_write_runs_on_create_and_update_and_its_refusal_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let req = req(dir.path());
        let refused = create(&req, &CHECKED, "", &role("escalate")).unwrap_err();
        assert_eq!(refused.message, "create refused by the hook");
        assert!(
            db::try_get(req.state.store(), CLUSTERROLES, "", "r")
                .unwrap()
                .is_none()
        );
        create(&req, &CHECKED, "", &role("get")).unwrap();
        let refused = update(&req, &CHECKED, ("", "r"), Part::Main, &role("escalate")).unwrap_err();
        assert_eq!(refused.message, "update refused by the hook");
        let stored = db::get(req.state.store(), CLUSTERROLES, "", "r").unwrap();
        assert_eq!(stored["rules"][0]["verbs"], json!(["get"]));
    }
}
