//! Impersonation (`WithImpersonation`, `Impersonate-User`, `Impersonate-Group`,
//! `Impersonate-Uid`, `Impersonate-Extra-*`): the requester must be allowed the
//! `impersonate` verb on each `users`, `serviceaccounts`, `groups`, `uids` and
//! `userextras/<key>` it asks for; the request then goes on as the impersonated user.
//! `kubectl --as` and `--as-group` send these headers.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{Attributes, UserInfo, forbidden};
use crate::ApiState;
use crate::status::ApiError;

/// `system:authenticated`.
pub(crate) const AUTHENTICATED: &str = "system:authenticated";
/// `system:unauthenticated`.
pub(crate) const UNAUTHENTICATED: &str = "system:unauthenticated";
/// `system:anonymous`.
pub(crate) const ANONYMOUS: &str = "system:anonymous";

/// What a request asks to be impersonated as.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Requested {
    user: Option<String>,
    groups: Vec<String>,
    uid: Option<String>,
    extras: Vec<(String, String)>,
}

impl Requested {
    fn is_empty(&self) -> bool {
        self.user.is_none()
            && self.groups.is_empty()
            && self.uid.is_none()
            && self.extras.is_empty()
    }
}

fn requested(headers: &HeaderMap) -> Requested {
    let text = |v: &axum::http::HeaderValue| v.to_str().ok().map(str::to_owned);
    let mut r = Requested {
        user: headers.get("impersonate-user").and_then(text),
        groups: headers
            .get_all("impersonate-group")
            .iter()
            .filter_map(text)
            .collect(),
        uid: headers.get("impersonate-uid").and_then(text),
        extras: Vec::new(),
    };
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix("impersonate-extra-")
            && let Some(v) = text(value)
        {
            r.extras.push((key.to_owned(), v));
        }
    }
    r
}

/// The groups of a ServiceAccount user name (`system:serviceaccount:<ns>:<name>`).
fn service_account(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// The checks the requester must pass, one per impersonated value.
fn checks(requester: &UserInfo, wanted: &Requested, username: &str) -> Vec<Attributes> {
    let impersonate = |group: &str, resource: &str, sub: &str, ns: &str, name: &str| {
        Attributes::resource(
            requester.clone(),
            "impersonate",
            group,
            resource,
            sub,
            ns,
            name,
        )
    };
    let mut out = Vec::new();
    if wanted.user.is_some() {
        out.push(match service_account(username) {
            Some((ns, name)) => impersonate("", "serviceaccounts", "", ns, name),
            None => impersonate("", "users", "", "", username),
        });
    }
    for g in &wanted.groups {
        out.push(impersonate("", "groups", "", "", g));
    }
    if let Some(uid) = &wanted.uid {
        out.push(impersonate("authentication.k8s.io", "uids", "", "", uid));
    }
    for (key, value) in &wanted.extras {
        out.push(impersonate(
            "authentication.k8s.io",
            "userextras",
            key,
            "",
            value,
        ));
    }
    out
}

/// The user a request goes on as: the asked groups (a ServiceAccount's own when none are
/// asked), with `system:authenticated` unless it is anonymous or a group says otherwise.
pub(crate) fn impersonated_user(username: &str, groups: &[String]) -> UserInfo {
    let mut groups = groups.to_vec();
    if groups.is_empty()
        && let Some((ns, _)) = service_account(username)
    {
        groups = vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{ns}"),
        ];
    }
    if username != ANONYMOUS
        && !groups
            .iter()
            .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED)
    {
        groups.push(AUTHENTICATED.to_owned());
    }
    UserInfo {
        username: username.to_owned(),
        groups,
    }
}

/// The middleware: replaces the authenticated user by the impersonated one when allowed.
pub(crate) async fn impersonate(
    State(state): State<ApiState>,
    mut request: Request,
    next: Next,
) -> Response {
    let wanted = requested(request.headers());
    if wanted.is_empty() {
        return next.run(request).await;
    }
    let Some(requester) = request.extensions().get::<UserInfo>().cloned() else {
        return ApiError::unauthorized().into_response();
    };
    let Some(username) = wanted.user.clone() else {
        return ApiError::internal(
            "requested impersonation of groups, a uid or extras without impersonating a user",
        )
        .into_response();
    };
    for attrs in checks(&requester, &wanted, &username) {
        let decision = state.authorizer().authorize(&attrs);
        if !decision.allowed {
            return forbidden(&attrs, &decision.reason).into_response();
        }
    }
    request
        .extensions_mut()
        .insert(impersonated_user(&username, &wanted.groups));
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impersonated_groups_as_upstream_fills_them() {
        let sa = impersonated_user("system:serviceaccount:default:default", &[]);
        assert_eq!(
            sa.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:default",
                "system:authenticated"
            ]
        );
        let bob = impersonated_user("bob", &["devs".to_owned()]);
        assert_eq!(bob.groups, ["devs", "system:authenticated"]);
        let anon = impersonated_user(ANONYMOUS, &[UNAUTHENTICATED.to_owned()]);
        assert_eq!(anon.groups, [UNAUTHENTICATED]);
    }

    #[test]
    fn a_service_account_is_impersonated_through_its_object() {
        let admin = UserInfo::admin();
        let wanted = Requested {
            user: Some("system:serviceaccount:team:robot".into()),
            groups: vec!["g".into()],
            ..Requested::default()
        };
        let c = checks(&admin, &wanted, "system:serviceaccount:team:robot");
        assert_eq!(
            (
                c[0].resource.as_str(),
                c[0].namespace.as_str(),
                c[0].name.as_str()
            ),
            ("serviceaccounts", "team", "robot")
        );
        assert_eq!(
            (c[1].resource.as_str(), c[1].name.as_str()),
            ("groups", "g")
        );
        let c = checks(
            &admin,
            &Requested {
                user: Some("bob".into()),
                ..Requested::default()
            },
            "bob",
        );
        assert_eq!(
            (c[0].resource.as_str(), c[0].name.as_str()),
            ("users", "bob")
        );
    }
}
