//! What a request asks to do, from its method, path and query alone: the API server's
//! `RequestInfoResolver` (`k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`). The
//! authorizer decides on these attributes, never on the handler that serves the path.

/// The parsed request: a resource request (`/api/v1/namespaces/default/pods/web/log`) or a
/// non-resource one (`/healthz`, `/version`, `/apis`, `/openapi/v3`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RequestInfo {
    /// Whether the path names an API resource (`/api/<v>/...`, `/apis/<g>/<v>/...`).
    pub is_resource_request: bool,
    /// The URL path.
    pub path: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`); for a non-resource request the lower-case HTTP method.
    pub verb: String,
    /// `""` for the core group.
    pub api_group: String,
    /// `v1`.
    pub api_version: String,
    /// The namespace (`""` for cluster-scoped requests).
    pub namespace: String,
    /// The plural resource: `pods`.
    pub resource: String,
    /// `status`, `log`, `exec`, ...
    pub subresource: String,
    /// The object's name, when the path (or a `metadata.name=` field selector of a list or
    /// watch) names one.
    pub name: String,
}

/// Verbs written into the path (`/api/v1/watch/pods`).
const SPECIAL_VERBS: [&str; 2] = ["proxy", "watch"];
/// Subresources of a namespace itself (`/api/v1/namespaces/x/status`), not namespaced
/// resources.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// Resolves a request. `upgrade_websocket` says the request asks to switch to WebSockets:
/// `pods/exec`, `pods/attach` and `pods/portforward` opened with `GET` are then authorized
/// as `create`, as 1.35's `AuthorizePodWebsocketUpgradeCreatePermission` (on by default)
/// does, so `get` on them never runs a command.
pub(crate) fn resolve(
    method: &str,
    path: &str,
    query: &str,
    upgrade_websocket: bool,
) -> RequestInfo {
    let mut info = RequestInfo {
        path: path.to_owned(),
        verb: method.to_ascii_lowercase(),
        ..RequestInfo::default()
    };
    let trimmed = path.trim_matches('/');
    let mut parts: Vec<&str> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').collect()
    };
    if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
        return info;
    }
    let groupless = parts[0] == "api";
    parts.remove(0);
    if !groupless {
        if parts.len() < 3 {
            return info;
        }
        info.api_group = parts.remove(0).to_owned();
    }
    info.is_resource_request = true;
    info.api_version = parts.remove(0).to_owned();

    if SPECIAL_VERBS.contains(&parts[0]) {
        if parts.len() < 2 {
            // Upstream reports an error and keeps what it knows; the handler answers 404.
            info.verb = parts[0].to_owned();
            return info;
        }
        info.verb = parts.remove(0).to_owned();
    } else {
        info.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_owned();
    }

    if parts[0] == "namespaces" && parts.len() > 1 {
        info.namespace = parts[1].to_owned();
        if parts.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&parts[2]) {
            parts.drain(..2);
        }
    }

    if parts.len() >= 3 && info.verb != "proxy" {
        info.subresource = parts[2].to_owned();
    }
    if parts.len() >= 2 {
        info.name = parts[1].to_owned();
    }
    info.resource = parts[0].to_owned();

    if info.name.is_empty() && info.verb == "get" {
        let query = parse_query(query);
        let watch = query
            .iter()
            .find(|(k, _)| k == "watch")
            .is_some_and(|(_, v)| !matches!(v.to_ascii_lowercase().as_str(), "false" | "0"));
        info.verb = if watch { "watch" } else { "list" }.to_owned();
        if let Some((_, selector)) = query.iter().find(|(k, _)| k == "fieldSelector")
            && let Some(name) = exact_name(selector)
        {
            info.name = name;
        }
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".to_owned();
    }
    if upgrade_websocket
        && info.verb == "get"
        && info.resource == "pods"
        && matches!(info.subresource.as_str(), "exec" | "attach" | "portforward")
    {
        info.verb = "create".to_owned();
    }
    info
}

fn parse_query(query: &str) -> Vec<(String, String)> {
    let uri = format!("/?{query}");
    uri.parse::<axum::http::Uri>()
        .ok()
        .and_then(|u| axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&u).ok())
        .map(|q| q.0)
        .unwrap_or_default()
}

/// The name a field selector pins (`metadata.name=web`, `metadata.name==web`), if it is a
/// valid path segment (`fields.Selector.RequiresExactMatch` and `IsValidPathSegmentName`).
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let value = term
            .trim()
            .strip_prefix("metadata.name")?
            .trim_start()
            .strip_prefix('=')?;
        let value = value.strip_prefix('=').unwrap_or(value).trim();
        let valid = !matches!(value, "" | "." | "..") && !value.contains(['/', '%']);
        valid.then(|| value.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(method: &str, path: &str, query: &str) -> RequestInfo {
        resolve(method, path, query, false)
    }

    fn attrs(i: &RequestInfo) -> (&str, &str, &str, &str, &str, &str) {
        (
            &i.verb,
            &i.api_group,
            &i.namespace,
            &i.resource,
            &i.subresource,
            &i.name,
        )
    }

    #[test]
    fn resource_paths_as_upstream_resolves_them() {
        let cases = [
            (
                "GET",
                "/api/v1/namespaces",
                "",
                ("list", "", "", "namespaces", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/other",
                "",
                ("get", "", "other", "namespaces", "", "other"),
            ),
            (
                "GET",
                "/api/v1/namespaces/other/pods",
                "",
                ("list", "", "other", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/other/pods/foo",
                "",
                ("get", "", "other", "pods", "", "foo"),
            ),
            (
                "HEAD",
                "/api/v1/namespaces/other/pods/foo",
                "",
                ("get", "", "other", "pods", "", "foo"),
            ),
            ("GET", "/api/v1/pods", "", ("list", "", "", "pods", "", "")),
            (
                "GET",
                "/api/v1/namespaces/other/pods/foo/log",
                "",
                ("get", "", "other", "pods", "log", "foo"),
            ),
            (
                "GET",
                "/api/v1/watch/pods",
                "",
                ("watch", "", "", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/pods",
                "watch=true",
                ("watch", "", "", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/pods",
                "watch=1",
                ("watch", "", "", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/pods",
                "watch=false",
                ("list", "", "", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/pods",
                "watch=0",
                ("list", "", "", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/watch/namespaces/other/pods",
                "",
                ("watch", "", "other", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/other/pods",
                "fieldSelector=metadata.name%3Dweb&watch=1",
                ("watch", "", "other", "pods", "", "web"),
            ),
            (
                "GET",
                "/api/v1/namespaces/other/pods",
                "fieldSelector=metadata.name%3D%3Dweb",
                ("list", "", "other", "pods", "", "web"),
            ),
            (
                "GET",
                "/api/v1/namespaces/other/pods",
                "fieldSelector=spec.nodeName%3Dn",
                ("list", "", "other", "pods", "", ""),
            ),
            (
                "POST",
                "/api/v1/namespaces/other/pods",
                "",
                ("create", "", "other", "pods", "", ""),
            ),
            (
                "PUT",
                "/api/v1/namespaces/other/pods/foo",
                "",
                ("update", "", "other", "pods", "", "foo"),
            ),
            (
                "PATCH",
                "/api/v1/namespaces/other/pods/foo/status",
                "",
                ("patch", "", "other", "pods", "status", "foo"),
            ),
            (
                "DELETE",
                "/api/v1/namespaces/other/pods/foo",
                "",
                ("delete", "", "other", "pods", "", "foo"),
            ),
            (
                "DELETE",
                "/api/v1/namespaces/other/pods",
                "",
                ("deletecollection", "", "other", "pods", "", ""),
            ),
            (
                "PUT",
                "/api/v1/namespaces/other/finalize",
                "",
                ("update", "", "other", "namespaces", "finalize", "other"),
            ),
            (
                "GET",
                "/api/v1/namespaces/other/status",
                "",
                ("get", "", "other", "namespaces", "status", "other"),
            ),
            (
                "POST",
                "/api/v1/namespaces/default/serviceaccounts/robot/token",
                "",
                ("create", "", "default", "serviceaccounts", "token", "robot"),
            ),
            (
                "GET",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                "",
                (
                    "list",
                    "rbac.authorization.k8s.io",
                    "",
                    "clusterroles",
                    "",
                    "",
                ),
            ),
            (
                "GET",
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n",
                "",
                (
                    "get",
                    "coordination.k8s.io",
                    "kube-node-lease",
                    "leases",
                    "",
                    "n",
                ),
            ),
            (
                "GET",
                "/api/v1/nodes/n/proxy/logs/x",
                "",
                ("get", "", "", "nodes", "proxy", "n"),
            ),
            (
                "GET",
                "/api/v1/proxy/nodes/n/logs",
                "",
                ("proxy", "", "", "nodes", "", "n"),
            ),
        ];
        for (method, path, query, want) in cases {
            assert_eq!(
                attrs(&r(method, path, query)),
                want,
                "{method} {path}?{query}"
            );
            assert!(r(method, path, query).is_resource_request, "{path}");
        }
    }

    #[test]
    fn non_resource_paths_keep_the_http_verb() {
        for (method, path) in [
            ("GET", "/"),
            ("GET", "/healthz"),
            ("GET", "/version"),
            ("GET", "/api"),
            ("GET", "/api/v1"),
            ("GET", "/apis"),
            ("GET", "/apis/rbac.authorization.k8s.io"),
            ("GET", "/apis/rbac.authorization.k8s.io/v1"),
            ("GET", "/openapi/v3/api/v1"),
            ("POST", "/foo"),
        ] {
            let i = r(method, path, "");
            assert!(!i.is_resource_request, "{path}");
            assert_eq!(i.verb, method.to_ascii_lowercase());
            assert_eq!(i.path, path);
        }
    }

    #[test]
    fn websocket_exec_needs_create() {
        let i = resolve(
            "GET",
            "/api/v1/namespaces/d/pods/p/exec",
            "command=sh",
            true,
        );
        assert_eq!(i.verb, "create");
        let i = resolve("GET", "/api/v1/namespaces/d/pods/p/log", "", true);
        assert_eq!(i.verb, "get");
    }
}
