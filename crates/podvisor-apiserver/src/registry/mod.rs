//! The generic REST registry, as `k8s.io/apiserver`'s `registry/generic`: one set of handlers
//! (create with `generateName`, update, patch — JSON, merge, strategic, server-side apply —,
//! delete, deletecollection, the optional `status` subresource; reads are [`crate::objects`]'s
//! get, list and watch) driven by a per-kind [`Strategy`]: how a request object is decoded
//! and defaulted, validated on create and on update, what a main write and a status write
//! keep, whether the kind takes writes at all, and a hook before each write
//! ([`Strategy::before_write`], where RBAC's escalation check plugs in).
//!
//! The kinds' rules stay in `podvisor_api` (validation) and in each kind's module here
//! (`config.rs`, `rbac.rs`, `service.rs`, `node.rs`, `namespace.rs`, `event.rs`); `rest.rs` routes a request to the
//! handlers of `write.rs` and `delete.rs`.

use podvisor_api::ValidationErrors;
use podvisor_api::config::decode_object;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::db::{self, Resource};
use crate::patch::{ListStrategy, plain_lists};
use crate::req::Req;
use crate::status::{ApiError, ApiResult};

mod config;
pub(crate) mod delete;
pub(crate) mod event;
mod group_routes;
mod namespace;
mod node;
mod rbac;
pub(crate) mod rest;
mod service;
pub(crate) mod write;

pub(crate) use group_routes::group_routes;
pub(crate) use service::{endpoint_address, reconcile_kubernetes_service};

/// A check run before an object is written (`old` is `None` on create), after validation:
/// an `Err` refuses the write.
pub(crate) type BeforeWrite = fn(req: &Req, new: &Value, old: Option<&Value>) -> ApiResult<()>;

/// A validating admission plugin on a kind's creates and updates (`new`, the stored `old` on
/// an update): refuses, or returns warnings for the client (PodSecurity on namespaces).
pub(crate) type Admit = fn(req: &Req, new: &Value, old: Option<&Value>) -> ApiResult<Vec<String>>;

/// A decoder: a request object in, the object to store and its unknown fields' paths out
/// (`Err`: the object does not decode as the kind).
pub(crate) type Decode = fn(Value) -> Result<(Value, Vec<String>), String>;

/// What the registry knows of one kind.
pub(crate) struct Strategy {
    /// The kind, its plural and scope (the store key and URLs).
    pub res: Resource,
    /// Discovery's `singularName`.
    pub singular: &'static str,
    /// Discovery's `shortNames`.
    pub short_names: &'static [&'static str],
    /// Decodes a request object (typed, so unknown fields are found) and applies the kind's
    /// defaulting and `PrepareForCreate`/`PrepareForUpdate`: the object to store and the
    /// unknown fields' paths.
    pub decode: Decode,
    /// Validation on create.
    pub validate: fn(&Value) -> ApiResult<()>,
    /// Validation on update, against the stored object.
    pub validate_update: fn(&Value, &Value) -> ApiResult<()>,
    /// The part of a request object its field manager owns (a Secret's `stringData` is
    /// owned as the `data` keys it writes).
    pub managed_source: fn(&Value) -> Value,
    /// How lists merge (strategic merge, apply).
    pub lists: ListStrategy,
    /// Whether the kind has a `status` subresource: a main write keeps the stored status, a
    /// status write changes only the status.
    pub status: bool,
    /// Whether a delete answers with the deleted object (else a `Status`).
    pub delete_returns_object: bool,
    /// Runs before every create and update (none: nothing to check).
    pub before_write: Option<BeforeWrite>,
    /// Validating admission after the kind's validation (none: nothing to admit).
    pub admit: Option<Admit>,
    /// Why the kind takes no writes, when it takes none (read-only kinds).
    pub read_only: Option<&'static str>,
    /// `PrepareForUpdate` beyond the status rule: what an update keeps of the stored object
    /// (`new`, `old`).
    pub prepare_update: Option<fn(&mut Value, &Value)>,
    /// Runs once a created object is stored (not on a dry run): the objects a controller
    /// makes with it at once.
    pub after_create: Option<fn(&Req, &Value) -> ApiResult<()>>,
}

/// The rules of a typed kind: its defaulting and validation over `k8s-openapi`'s type.
pub(crate) trait Rules: DeserializeOwned + Serialize {
    /// Defaulting and preparation of a decoded object (a Secret's `stringData` merged).
    fn prepare(&mut self) {}
    /// Validation on create.
    fn validate(&self) -> Result<(), ValidationErrors>;
    /// Validation on update.
    fn validate_update(&self, old: &Self) -> Result<(), ValidationErrors>;
}

fn decode_typed<T: Rules>(value: Value) -> Result<(Value, Vec<String>), String> {
    let (mut obj, unknown) = decode_object::<T>(value)?;
    obj.prepare();
    let value = serde_json::to_value(&obj).map_err(|e| e.to_string())?;
    Ok((value, unknown))
}

fn typed<T: Rules>(value: &Value) -> ApiResult<T> {
    serde_json::from_value(value.clone())
        .map_err(|e| ApiError::internal(format!("the object does not decode: {e}")))
}

fn validate_typed<T: Rules>(value: &Value) -> ApiResult<()> {
    typed::<T>(value)?
        .validate()
        .map_err(|e| ApiError::invalid(&e))
}

fn validate_update_typed<T: Rules>(new: &Value, old: &Value) -> ApiResult<()> {
    typed::<T>(new)?
        .validate_update(&typed::<T>(old)?)
        .map_err(|e| ApiError::invalid(&e))
}

/// A read-only kind's decoder (for the reads' types; no write reaches it).
fn decode_plain<T: DeserializeOwned + Serialize>(
    value: Value,
) -> Result<(Value, Vec<String>), String> {
    let (obj, unknown) = decode_object::<T>(value)?;
    let value = serde_json::to_value(&obj).map_err(|e| e.to_string())?;
    Ok((value, unknown))
}

/// Writes to a read-only kind are refused before they are decoded, so its validation is
/// never reached; were it reached, nothing is written.
fn never_written(_: &Value) -> ApiResult<()> {
    Err(ApiError::internal("a write reached a read-only kind"))
}

fn never_updated(_: &Value, _: &Value) -> ApiResult<()> {
    Err(ApiError::internal("a write reached a read-only kind"))
}

fn as_sent(value: &Value) -> Value {
    value.clone()
}

impl Strategy {
    /// The strategy of a typed kind with the defaults: no status subresource, writable,
    /// nothing checked before writes, a delete answered with a `Status`.
    pub(crate) const fn typed<T: Rules>(res: Resource, singular: &'static str) -> Strategy {
        Strategy {
            res,
            singular,
            short_names: &[],
            decode: decode_typed::<T>,
            validate: validate_typed::<T>,
            validate_update: validate_update_typed::<T>,
            managed_source: as_sent,
            lists: plain_lists,
            status: false,
            delete_returns_object: false,
            before_write: None,
            admit: None,
            read_only: None,
            prepare_update: None,
            after_create: None,
        }
    }

    /// The strategy of a kind served read-only (`why`: the refusal's reason): get, list,
    /// watch and tables only.
    pub(crate) const fn read_only<T>(
        res: Resource,
        singular: &'static str,
        why: &'static str,
    ) -> Strategy
    where
        T: DeserializeOwned + Serialize,
    {
        Strategy {
            res,
            singular,
            short_names: &[],
            decode: decode_plain::<T>,
            validate: never_written,
            validate_update: never_updated,
            managed_source: as_sent,
            lists: plain_lists,
            status: false,
            delete_returns_object: false,
            before_write: None,
            admit: None,
            read_only: Some(why),
            prepare_update: None,
            after_create: None,
        }
    }

    /// The API group (`""` for core).
    pub(crate) fn group(&self) -> &'static str {
        group_of(self.res)
    }

    /// The name errors use: `roles.rbac.authorization.k8s.io`, `configmaps`.
    pub(crate) fn qualified_plural(&self) -> String {
        db::qualified(self.res)
    }

    /// The verbs discovery lists.
    pub(crate) fn verbs(&self) -> &'static [&'static str] {
        if self.read_only.is_some() {
            &["get", "list", "watch"]
        } else {
            &crate::discovery::ALL_VERBS
        }
    }
}

fn group_of(res: Resource) -> &'static str {
    db::api_version(res)
        .rsplit_once('/')
        .map_or("", |(group, _)| group)
}

/// Every kind the registry serves.
static KINDS: [&Strategy; 13] = [
    &config::CONFIGMAP,
    &config::SECRET,
    &config::SERVICEACCOUNT,
    &rbac::ROLE,
    &rbac::CLUSTERROLE,
    &rbac::ROLEBINDING,
    &rbac::CLUSTERROLEBINDING,
    &service::SERVICE,
    &service::ENDPOINTSLICE,
    &node::NODE,
    &node::LEASE,
    &namespace::NAMESPACE,
    &event::EVENT,
];

/// The kind served as `plural` in `group` (`""`: core `v1`).
pub(crate) fn lookup(group: &str, plural: &str) -> Option<&'static Strategy> {
    KINDS
        .iter()
        .copied()
        .find(|s| s.res.plural == plural && s.group() == group)
}

/// The kinds of one API group, for discovery and OpenAPI.
pub(crate) fn group_kinds(group: &str) -> impl Iterator<Item = &'static Strategy> + '_ {
    KINDS.iter().copied().filter(move |s| s.group() == group)
}

/// The groups (other than core) the registry serves, in a fixed order.
pub(crate) const GROUPS: [&str; 3] = [
    "coordination.k8s.io",
    "rbac.authorization.k8s.io",
    "discovery.k8s.io",
];
