//! Authorization, as the API server's `--authorization-mode=RBAC` with its privileged group:
//!
//! - [`request_info`]: what a request asks to do (verb, group, resource, subresource,
//!   namespace, name, or a non-resource path), from its method, path and query;
//! - [`authorize`]: `system:masters` may do everything (the admin kubeconfig's user is in
//!   it), then RBAC ([`rbac`]: the rules of the bindings naming the user, [`rules`]: whether
//!   a rule allows the request). Nothing else allows: a ServiceAccount gets what it is
//!   bound to and no more;
//! - [`middleware`]: the axum layer after authentication that answers a denied request with
//!   the API server's 403 `Status`, and [`impersonation`] (`Impersonate-User`/`-Group`) before
//!   it;
//! - [`bootstrap`]: the default ClusterRoles and ClusterRoleBindings reconciled into the
//!   store when `serve` starts, and [`aggregation`]: the controller that fills ClusterRoles
//!   with an `aggregationRule`;
//! - [`escalation`]: creating a role or binding needs the permissions it grants (or the
//!   `escalate`/`bind` verbs).
//!
//! What it does not do: the Node authorizer (the node agent inside `serve` reads and writes
//! the store directly, not through the API), webhooks, ABAC.

pub(crate) mod aggregation;
pub(crate) mod bootstrap;
pub(crate) mod cache;
pub(crate) mod escalation;
pub(crate) mod impersonation;
pub(crate) mod middleware;
pub(crate) mod rbac;
pub(crate) mod request_info;
pub(crate) mod rules;

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::PolicyRule;
use podvisor_store::Store;

pub(crate) use crate::auth::UserInfo;
use crate::status::ApiError;
use request_info::RequestInfo;

/// The group whose members may do everything (`user.SystemPrivilegedGroup`).
pub(crate) const MASTERS: &str = "system:masters";

/// What the authorizer decides on (`authorizer.Attributes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// The Kubernetes verb, or the lower-case HTTP method of a non-resource request.
    pub verb: String,
    /// Whether a resource is asked for (else `path` is).
    pub is_resource_request: bool,
    /// The path of a non-resource request.
    pub path: String,
    /// `""` for the core group.
    pub api_group: String,
    /// The API version (only for messages).
    pub api_version: String,
    /// `""` for cluster scope.
    pub namespace: String,
    /// The plural resource.
    pub resource: String,
    /// The subresource.
    pub subresource: String,
    /// The object's name, when known.
    pub name: String,
}

impl Attributes {
    /// The attributes of a request `user` sent.
    pub(crate) fn of_request(user: UserInfo, info: RequestInfo) -> Attributes {
        Attributes {
            user,
            verb: info.verb,
            is_resource_request: info.is_resource_request,
            path: info.path,
            api_group: info.api_group,
            api_version: info.api_version,
            namespace: info.namespace,
            resource: info.resource,
            subresource: info.subresource,
            name: info.name,
        }
    }

    /// A resource request's attributes.
    #[allow(clippy::too_many_arguments)] // the attributes themselves
    pub(crate) fn resource(
        user: UserInfo,
        verb: &str,
        api_group: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> Attributes {
        Attributes {
            user,
            verb: verb.to_owned(),
            is_resource_request: true,
            path: String::new(),
            api_group: api_group.to_owned(),
            api_version: String::new(),
            namespace: namespace.to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            name: name.to_owned(),
        }
    }

    /// A non-resource request's attributes.
    pub(crate) fn non_resource(user: UserInfo, verb: &str, path: &str) -> Attributes {
        Attributes {
            is_resource_request: false,
            path: path.to_owned(),
            ..Attributes::resource(user, verb, "", "", "", "", "")
        }
    }
}

/// An authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Allowed (else no authorizer allowed it: denied).
    pub allowed: bool,
    /// Why: the binding that allowed it, or what could not be evaluated.
    pub reason: String,
}

/// Whether `user` is in `system:masters`.
pub(crate) fn is_master(user: &UserInfo) -> bool {
    user.groups.iter().any(|g| g == MASTERS)
}

/// The authorizer over one store: the authorization chain and the rule resolver, with the
/// RBAC objects cached ([`cache`]).
#[derive(Clone)]
pub(crate) struct Authorizer {
    store: Store,
    cache: Arc<cache::RbacCache>,
}

impl Authorizer {
    /// The authorizer of `store`'s RBAC objects.
    pub(crate) fn new(store: Store) -> Authorizer {
        Authorizer {
            store,
            cache: Arc::default(),
        }
    }

    /// The RBAC objects as they are now.
    pub(crate) fn snapshot(&self) -> Arc<cache::Snapshot> {
        self.cache.snapshot(&self.store)
    }

    /// The authorization chain: `system:masters`, then RBAC.
    pub(crate) fn authorize(&self, attrs: &Attributes) -> Decision {
        if is_master(&attrs.user) {
            return Decision {
                allowed: true,
                reason: String::new(),
            };
        }
        let snapshot = self.snapshot();
        let mut errors = Vec::new();
        let mut allowed_by = None;
        rbac::visit_rules_for(
            &snapshot,
            &attrs.user,
            &attrs.namespace,
            &mut errors,
            |source, rule| {
                if rules::rule_allows(attrs, rule) {
                    allowed_by = Some(format!("RBAC: allowed by {source}"));
                    return false;
                }
                true
            },
        );
        match allowed_by {
            Some(reason) => Decision {
                allowed: true,
                reason,
            },
            None => Decision {
                allowed: false,
                reason: if errors.is_empty() {
                    String::new()
                } else {
                    format!("RBAC: {}", aggregate(&errors))
                },
            },
        }
    }

    /// `RulesFor`: every RBAC rule `user` holds in `namespace`, and what could not be read.
    pub(crate) fn rules_for(
        &self,
        user: &UserInfo,
        namespace: &str,
    ) -> (Vec<PolicyRule>, Vec<String>) {
        rbac::rules_for(&self.snapshot(), user, namespace)
    }
}

/// `utilerrors.NewAggregate(errs).Error()`: one error as itself, several in brackets.
pub(crate) fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The API server's 403 for a denied request (`responsewriters.ForbiddenStatusError`):
/// `pods is forbidden: User "u" cannot create resource "pods" in API group "" in the
/// namespace "default"`, or `forbidden: User "u" cannot get path "/foo"`.
pub(crate) fn forbidden(attrs: &Attributes, reason: &str) -> ApiError {
    let user = rules::go_quote(&attrs.user.username);
    let mut message = if attrs.is_resource_request {
        let resource = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        let scope = if attrs.namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!("in the namespace {}", rules::go_quote(&attrs.namespace))
        };
        format!(
            "User {user} cannot {} resource {} in API group {} {scope}",
            attrs.verb,
            rules::go_quote(&resource),
            rules::go_quote(&attrs.api_group),
        )
    } else {
        format!(
            "User {user} cannot {} path {}",
            attrs.verb,
            rules::go_quote(&attrs.path)
        )
    };
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    let (group, resource) = if attrs.is_resource_request {
        (attrs.api_group.as_str(), attrs.resource.as_str())
    } else {
        ("", "")
    };
    ApiError::forbidden_in_group(group, resource, &attrs.name, &message)
}
