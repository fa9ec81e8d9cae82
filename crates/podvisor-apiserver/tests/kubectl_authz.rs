//! RBAC through the real kubectl: a ServiceAccount token gets nothing it is not bound to
//! (the API server's 403 texts), a RoleBinding grants exactly its role, `kubectl auth can-i`
//! (with `--as` and `--list`) and the access reviews answer from the authorizer,
//! impersonation needs the `impersonate` verb, the health and version endpoints stay open to
//! anonymous clients, and the bootstrap policy with its aggregated roles is in place.
//!
//! Most roles and bindings are written into the store here (their REST is the registry's,
//! tested in `kubectl_rbac.rs`); escalation prevention goes through kubectl.

use crate::common;

use std::time::{Duration, Instant};

use common::TestServer;
use podvisor_store::Key;
use serde_json::{Value, json};

const SA: &str = "system:serviceaccount:default:default";

fn token(s: &TestServer) -> String {
    s.kubectl_ok(&["create", "token", "default"])
        .trim()
        .to_owned()
}

fn as_sa(s: &TestServer, token: &str, args: &[&str]) -> common::Run {
    let mut all = vec!["--token", token];
    all.extend_from_slice(args);
    s.kubectl(&all)
}

fn put(s: &TestServer, key: Key, obj: Value) {
    s.state.store().create(&key, obj).unwrap();
}

fn pod_reader(s: &TestServer) {
    put(
        s,
        Key::new("roles", "default", "pod-reader"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "pod-reader", "namespace": "default", "uid": "r1"},
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}),
    );
    put(
        s,
        Key::new("rolebindings", "default", "read-pods"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "read-pods", "namespace": "default", "uid": "b1"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "default"}]}),
    );
}

const PRIVILEGED: &str = "apiVersion: v1
kind: Pod
metadata: {name: escape}
spec:
  containers:
  - name: c
    image: busybox
    securityContext: {privileged: true}
    volumeMounts: [{name: host, mountPath: /host}]
  volumes: [{name: host, hostPath: {path: /}}]
";

#[test]
fn a_service_account_token_gets_only_what_its_bindings_grant() {
    let s = TestServer::start();
    let t = token(&s);
    // The escape of issue 31: a pod's token creating a privileged pod.
    let mut create = vec!["--token", t.as_str()];
    create.extend_from_slice(&["create", "-f", "-"]);
    let r = s.kubectl_stdin(&create, PRIVILEGED);
    assert!(!r.ok);
    assert!(
        r.stderr.contains(&format!(
            "pods is forbidden: User \"{SA}\" cannot create resource \"pods\" in API group \"\" in the namespace \"default\""
        )),
        "{r:?}"
    );
    let r = as_sa(&s, &t, &["get", "pods"]);
    assert!(
        r.stderr.contains(&format!(
            "pods is forbidden: User \"{SA}\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        )),
        "{r:?}"
    );
    let r = as_sa(&s, &t, &["get", "nodes"]);
    assert!(
        r.stderr.contains(&format!(
            "nodes is forbidden: User \"{SA}\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        )),
        "{r:?}"
    );
    let r = as_sa(&s, &t, &["get", "--raw", "/foo"]);
    assert!(
        r.stderr.contains(&format!(
            "forbidden: User \"{SA}\" cannot get path \"/foo\""
        )),
        "{r:?}"
    );
    // Discovery and the self reviews are every authenticated user's.
    assert!(as_sa(&s, &t, &["auth", "whoami", "-o", "name"]).ok);
    assert_eq!(
        as_sa(&s, &t, &["auth", "can-i", "list", "pods"])
            .stdout
            .trim(),
        "no"
    );

    // A RoleBinding lets the same token read pods, and nothing else.
    pod_reader(&s);
    s.create(&common::pod_yaml("web"));
    let listed = as_sa(&s, &t, &["get", "pods", "-o", "name"]);
    assert!(listed.ok, "{listed:?}");
    assert_eq!(listed.stdout.trim(), "pod/web");
    assert!(as_sa(&s, &t, &["get", "pod", "web"]).ok);
    let r = s.kubectl_stdin(&create, PRIVILEGED);
    assert!(r.stderr.contains("pods is forbidden"), "{r:?}");
    let r = as_sa(&s, &t, &["get", "secrets"]);
    assert!(
        r.stderr.contains(&format!(
            "secrets is forbidden: User \"{SA}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""
        )),
        "{r:?}"
    );
    let r = as_sa(&s, &t, &["get", "pods", "-n", "kube-system"]);
    assert!(
        r.stderr.contains("in the namespace \"kube-system\""),
        "{r:?}"
    );
    let r = as_sa(&s, &t, &["logs", "web"]);
    assert!(
        r.stderr.contains("cannot get resource \"pods/log\""),
        "{r:?}"
    );

    // `kubectl auth can-i` as the account, by token and by impersonation.
    assert_eq!(
        as_sa(&s, &t, &["auth", "can-i", "list", "pods"])
            .stdout
            .trim(),
        "yes"
    );
    let as_flag = format!("--as={SA}");
    assert_eq!(
        s.kubectl(&["auth", "can-i", "watch", "pods", &as_flag])
            .stdout
            .trim(),
        "yes"
    );
    let no = s.kubectl(&["auth", "can-i", "create", "pods", &as_flag]);
    assert!(!no.ok);
    assert_eq!(no.stdout.trim(), "no");
    let list = s.kubectl_ok(&["auth", "can-i", "--list", &as_flag]);
    let pods_row = list
        .lines()
        .find(|l| l.starts_with("pods "))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(pods_row.ends_with("[get list watch]"), "{list}");
    assert!(
        list.lines()
            .any(|l| l.starts_with("selfsubjectaccessreviews.authorization.k8s.io")),
        "{list}"
    );
    assert!(!list.lines().any(|l| l.starts_with("*.*")), "{list}");
    // Groups by `--as-group`: the masters' group is everything.
    assert_eq!(
        s.kubectl(&[
            "auth",
            "can-i",
            "create",
            "pods",
            "--as=bob",
            "--as-group=system:masters"
        ])
        .stdout
        .trim(),
        "yes"
    );

    // Impersonation needs `impersonate`.
    let r = as_sa(
        &s,
        &t,
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods",
            "--as=bob",
        ],
    );
    assert!(
        r.stderr.contains(&format!(
            "users \"bob\" is forbidden: User \"{SA}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        )),
        "{r:?}"
    );
    // `edit` lets it impersonate the namespace's accounts (not users), as upstream's role.
    s.kubectl_ok(&[
        "create",
        "rolebinding",
        "sa-edit",
        "--clusterrole=edit",
        "--serviceaccount=default:default",
    ]);
    let who = as_sa(
        &s,
        &t,
        &[
            "auth",
            "whoami",
            "--as=system:serviceaccount:default:robot",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ],
    );
    assert_eq!(
        who.stdout,
        "system:serviceaccount:default:robot [\"system:serviceaccounts\",\"system:serviceaccounts:default\",\"system:authenticated\"]",
        "{who:?}"
    );
    let r = as_sa(&s, &t, &["get", "--raw", "/api", "--as=bob"]);
    assert!(
        r.stderr.contains("cannot impersonate resource \"users\""),
        "{r:?}"
    );
}

#[test]
fn access_reviews_answer_from_rbac() {
    let s = TestServer::start();
    pod_reader(&s);
    let review = |user: &str, verb: &str, resource: &str| {
        s.json(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            Some(&json!({"spec": {"user": user, "groups": ["system:authenticated"],
                "resourceAttributes": {"namespace": "default", "verb": verb, "resource": resource}}})),
        )
    };
    let (code, yes) = review(SA, "list", "pods");
    assert_eq!(code, 201, "{yes}");
    assert_eq!(yes["status"]["allowed"], true);
    assert_eq!(
        yes["status"]["reason"],
        "RBAC: allowed by RoleBinding \"read-pods/default\" of Role \"pod-reader\" to ServiceAccount \"default/default\""
    );
    let (_, no) = review(SA, "delete", "pods");
    assert_eq!(no["status"]["allowed"], false);
    let (code, invalid) = s.json(
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        Some(&json!({"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}})),
    );
    assert_eq!(code, 422, "{invalid}");
    assert!(
        invalid["message"]
            .as_str()
            .unwrap()
            .contains("at least one of user or group must be specified"),
        "{invalid}"
    );
    // The namespaced review asks about its own namespace only.
    let local = |ns: &str, attr_ns: &str| {
        s.json(
            "POST",
            &format!("/apis/authorization.k8s.io/v1/namespaces/{ns}/localsubjectaccessreviews"),
            Some(&json!({"spec": {"user": SA, "resourceAttributes":
                {"namespace": attr_ns, "verb": "get", "resource": "pods"}}})),
        )
    };
    let (code, allowed) = local("default", "default");
    assert_eq!(
        (code, &allowed["status"]["allowed"]),
        (201, &json!(true)),
        "{allowed}"
    );
    assert_eq!(allowed["metadata"]["namespace"], "default");
    let (code, mismatch) = local("default", "other");
    assert_eq!(code, 422, "{mismatch}");
    assert!(
        mismatch["message"]
            .as_str()
            .unwrap()
            .contains("spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace"),
        "{mismatch}"
    );
    // A binding to a missing role is said in the reason.
    s.state
        .store()
        .create(
            &Key::new("rolebindings", "default", "dangling"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "dangling", "namespace": "default", "uid": "b2"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gone"},
                   "subjects": [{"kind": "User", "name": "carol"}]}),
        )
        .unwrap();
    let (_, dangling) = review("carol", "get", "pods");
    assert_eq!(
        dangling["status"]["reason"],
        "RBAC: role.rbac.authorization.k8s.io \"gone\" not found"
    );
    // The non-resource attributes, and the anonymous user's public paths.
    let (_, health) = s.json(
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        Some(
            &json!({"spec": {"user": "system:anonymous", "groups": ["system:unauthenticated"],
            "nonResourceAttributes": {"path": "/healthz", "verb": "get"}}}),
        ),
    );
    assert_eq!(health["status"]["allowed"], true, "{health}");
}

#[test]
fn anonymous_clients_reach_health_and_version_only() {
    let s = TestServer::start();
    let code = |path: &str| {
        s.rt.block_on(async { s.raw("GET", path, &[], None, false).await.0.status.as_u16() })
    };
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        assert_eq!(code(path), 200, "{path}");
    }
    for path in ["/api", "/apis", "/api/v1/namespaces/default/pods"] {
        assert_eq!(code(path), 401, "{path}");
    }
    // Without the public-info binding, the anonymous user gets the API server's 403.
    s.kubectl_ok(&["get", "--raw", "/version"]);
    s.state
        .store()
        .delete(
            &Key::cluster("clusterrolebindings", "system:public-info-viewer"),
            podvisor_store::Preconditions::default(),
        )
        .unwrap();
    let (parts, body) = s.rt.block_on(async {
        use http_body_util::BodyExt;
        let (p, b) = s.raw("GET", "/version", &[], None, false).await;
        (p, b.collect().await.unwrap().to_bytes())
    });
    assert_eq!(parts.status.as_u16(), 403);
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        status["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/version\""
    );
}

#[test]
fn bootstrap_policy_and_aggregated_roles() {
    let s = TestServer::start();
    let store = s.state.store();
    let get = |name: &str| {
        store
            .get(&Key::cluster("clusterroles", name))
            .unwrap()
            .unwrap_or_else(|| panic!("no clusterrole {name}"))
    };
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:basic-user",
        "system:discovery",
        "system:public-info-viewer",
    ] {
        let role = get(name);
        assert_eq!(
            role["metadata"]["labels"]["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
        assert_eq!(
            role["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
            "true"
        );
    }
    let binding = store
        .get(&Key::cluster("clusterrolebindings", "cluster-admin"))
        .unwrap()
        .unwrap();
    assert_eq!(binding["subjects"][0]["name"], "system:masters");
    // `view` aggregates `system:aggregate-to-view`; `edit` has view's rules and its own.
    let has = |role: &Value, resource: &str, verb: &str| {
        role["rules"].as_array().unwrap().iter().any(|r| {
            r["resources"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|x| x == resource))
                && r["verbs"].as_array().unwrap().iter().any(|v| v == verb)
        })
    };
    let view = get("view");
    assert!(has(&view, "pods", "list"), "{view}");
    assert!(!has(&view, "secrets", "get"), "{view}");
    let edit = get("edit");
    assert!(
        has(&edit, "pods", "list") && has(&edit, "pods", "create") && has(&edit, "secrets", "get")
    );
    assert!(has(&get("admin"), "rolebindings", "create"));

    // A new ClusterRole labelled for `view` is aggregated into view, edit and admin.
    store
        .create(
            &Key::cluster("clusterroles", "widgets-view"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "widgets-view", "uid": "w1",
                                "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
                   "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}]}),
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(has(&get("view"), "widgets", "get") && has(&get("admin"), "widgets", "get")) {
        assert!(
            Instant::now() < deadline,
            "widgets never aggregated: {}",
            get("view")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The admin kubeconfig may do everything.
    assert_eq!(s.kubectl_ok(&["auth", "can-i", "*", "*"]).trim(), "yes");
}

#[test]
fn nobody_grants_what_they_do_not_hold() {
    let s = TestServer::start();
    // alice administers namespace `default` (the `admin` ClusterRole, bound there).
    s.kubectl_ok(&[
        "create",
        "rolebinding",
        "alice-admin",
        "--clusterrole=admin",
        "--user=alice",
    ]);
    let as_alice = |args: &[&str]| {
        let mut all = args.to_vec();
        all.push("--as=alice");
        s.kubectl(&all)
    };
    // What alice holds she may grant, in her namespace.
    let ok = as_alice(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list",
        "--resource=pods",
    ]);
    assert!(ok.ok, "{ok:?}");
    let ok = as_alice(&[
        "create",
        "rolebinding",
        "bob-view",
        "--clusterrole=view",
        "--user=bob",
    ]);
    assert!(ok.ok, "{ok:?}");
    // Not what she lacks: nodes, or a cluster-wide role, or cluster-admin.
    let r = as_alice(&[
        "create",
        "role",
        "nodes",
        "--verb=get,list",
        "--resource=nodes",
    ]);
    assert!(
        r.stderr.contains(
            "roles.rbac.authorization.k8s.io \"nodes\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\" \"list\"]}"
        ),
        "{r:?}"
    );
    let r = as_alice(&[
        "create",
        "rolebinding",
        "bob-root",
        "--clusterrole=cluster-admin",
        "--user=bob",
    ]);
    assert!(
        r.stderr.contains(
            "rolebindings.rbac.authorization.k8s.io \"bob-root\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:"
        ),
        "{r:?}"
    );
    assert!(!s.kubectl(&["get", "rolebinding", "bob-root"]).ok);
    // Widening her own role is an escalation too.
    let r = as_alice(&[
        "patch",
        "role",
        "pod-reader",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["nodes"],"verbs":["get"]}}]"#,
    ]);
    assert!(
        r.stderr
            .contains("is attempting to grant RBAC permissions not currently held"),
        "{r:?}"
    );
    // `escalate` and `bind` let her: granted by the admin kubeconfig (system:masters).
    s.kubectl_ok(&[
        "create",
        "clusterrole",
        "granter",
        "--verb=escalate,bind",
        "--resource=roles,clusterroles",
    ]);
    s.kubectl_ok(&[
        "create",
        "rolebinding",
        "alice-granter",
        "--clusterrole=granter",
        "--user=alice",
    ]);
    let ok = as_alice(&["create", "role", "nodes", "--verb=get", "--resource=nodes"]);
    assert!(ok.ok, "{ok:?}");
    let ok = as_alice(&[
        "create",
        "rolebinding",
        "bob-root",
        "--clusterrole=cluster-admin",
        "--user=bob",
    ]);
    assert!(ok.ok, "{ok:?}");
    // A ClusterRole with an aggregationRule needs everything, even of one who may create them.
    s.kubectl_ok(&[
        "create",
        "clusterrole",
        "cr-writer",
        "--verb=create",
        "--resource=clusterroles",
    ]);
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "alice-cr-writer",
        "--clusterrole=cr-writer",
        "--user=alice",
    ]);
    let aggregated = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: gather}\naggregationRule:\n  clusterRoleSelectors: [{matchLabels: {team: a}}]\n";
    let r = s.kubectl_stdin(
        &["create", "-f", "-", "--as=alice", "--as-group=granters"],
        aggregated,
    );
    assert!(
        r.stderr.contains(
            "clusterroles.rbac.authorization.k8s.io \"gather\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
        ),
        "{r:?}"
    );
    let r = s.kubectl_stdin(&["create", "-f", "-"], aggregated);
    assert!(r.ok, "{r:?}");
}
