//! Namespaces (`pkg/registry/core/namespace`): created `Active` with the `kubernetes`
//! finalizer, always labelled `kubernetes.io/metadata.name: <name>`; a main write keeps the
//! stored finalizers and status. A delete is not the registry's: it marks the namespace
//! `Terminating` for [`crate::namespace_controller`] (`namespaces.rs`). A new namespace gets
//! its `default` ServiceAccount and `kube-root-ca.crt` at once.

use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec, NamespaceStatus};
use podvisor_api::ValidationErrors;
use podvisor_api::validation::{validate_namespace, validate_namespace_update};
use serde_json::Value;

use super::{Rules, Strategy};
use crate::db::NAMESPACES;
use crate::req::Req;
use crate::status::ApiResult;

/// The label every namespace carries with its own name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

pub(super) static NAMESPACE: Strategy = Strategy {
    short_names: &["ns"],
    status: true,
    delete_returns_object: true,
    prepare_update: Some(keep_finalizers),
    after_create: Some(namespace_objects),
    admit: Some(pod_security),
    ..Strategy::typed::<Namespace>(NAMESPACES, "namespace")
};

impl Rules for Namespace {
    /// `PrepareForCreate` and `Canonicalize`: the name label, the `kubernetes` finalizer, an
    /// `Active` status (a main write then keeps the stored finalizers and status).
    fn prepare(&mut self) {
        if let Some(name) = self.metadata.name.clone().filter(|n| !n.is_empty()) {
            self.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(NAME_LABEL.to_owned(), name);
        }
        let spec = self.spec.get_or_insert_with(NamespaceSpec::default);
        let finalizers = spec.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == "kubernetes") {
            finalizers.push("kubernetes".to_owned());
        }
        self.status = Some(NamespaceStatus {
            phase: Some("Active".to_owned()),
            ..NamespaceStatus::default()
        });
    }
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_namespace(self)
    }
    fn validate_update(&self, old: &Self) -> Result<(), ValidationErrors> {
        validate_namespace_update(self, old)
    }
}

/// `PrepareForUpdate`: the finalizers change only through `namespaces/finalize`.
fn keep_finalizers(new: &mut Value, old: &Value) {
    match old.pointer("/spec/finalizers") {
        Some(f) => new["spec"]["finalizers"] = f.clone(),
        None => {
            if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("finalizers");
            }
        }
    }
}

/// The ServiceAccount controller's and the root CA publisher's objects of a new namespace.
fn namespace_objects(req: &Req, ns: &Value) -> ApiResult<()> {
    let name = ns
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match req.state.root_ca() {
        Some(ca) => crate::serviceaccounts::ensure_namespace_objects(req.state.store(), name, ca),
        None => Ok(()),
    }
}

/// PodSecurity's namespace half: the policy labels are checked (422), and a stricter enforce
/// level returns the warnings for the namespace's existing pods.
fn pod_security(req: &Req, new: &Value, old: Option<&Value>) -> ApiResult<Vec<String>> {
    let name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match old {
        None => crate::pod_security::admit_namespace_create(name, new).map(|()| Vec::new()),
        Some(old) => crate::pod_security::admit_namespace_update(req.state.store(), name, old, new),
    }
}
