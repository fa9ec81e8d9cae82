//! RBAC's pure rules: whether a `PolicyRule` allows a request (`rbac.go`'s `RuleAllows`),
//! whether a binding's subject is a user (`appliesToUser`), and whether one set of rules
//! covers another (`validation.Covers`, for escalation checks and policy reconciliation).

use k8s_openapi::api::rbac::v1::{PolicyRule, Subject};

use super::{Attributes, UserInfo};

/// `*`: every verb, group, resource or URL.
const ALL: &str = "*";

fn slice(v: Option<&Vec<String>>) -> &[String] {
    v.map_or(&[], Vec::as_slice)
}

fn has(set: &[String], item: &str) -> bool {
    set.iter().any(|s| s == item)
}

fn has_all(set: &[String], items: &[String]) -> bool {
    items.iter().all(|i| has(set, i))
}

/// `VerbMatches`.
pub(crate) fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == ALL || v == verb)
}

/// `APIGroupMatches`.
pub(crate) fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    slice(rule.api_groups.as_ref())
        .iter()
        .any(|g| g == ALL || g == group)
}

/// `ResourceMatches`: `combined` is `resource` or `resource/subresource`; a rule's
/// `*/subresource` matches that subresource of every resource.
pub(crate) fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    slice(rule.resources.as_ref()).iter().any(|r| {
        r == ALL
            || r == combined
            || (!subresource.is_empty()
                && r.len() == subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(subresource))
    })
}

/// `ResourceNameMatches`: no names allow every name.
pub(crate) fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    let names = slice(rule.resource_names.as_ref());
    names.is_empty() || has(names, name)
}

/// `NonResourceURLMatches`: exact, `*`, or a prefix ending in `*`.
pub(crate) fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    slice(rule.non_resource_urls.as_ref())
        .iter()
        .any(|u| url_matches(u, path))
}

fn url_matches(rule_url: &str, path: &str) -> bool {
    rule_url == ALL
        || rule_url == path
        || rule_url
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix))
}

/// `RuleAllows`: whether `rule` allows the request.
pub(crate) fn rule_allows(attrs: &Attributes, rule: &PolicyRule) -> bool {
    if attrs.is_resource_request {
        let combined = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        verb_matches(rule, &attrs.verb)
            && api_group_matches(rule, &attrs.api_group)
            && resource_matches(rule, &combined, &attrs.subresource)
            && resource_name_matches(rule, &attrs.name)
    } else {
        verb_matches(rule, &attrs.verb) && non_resource_url_matches(rule, &attrs.path)
    }
}

/// Whether `subject` of a binding in `binding_namespace` (`""` for a ClusterRoleBinding)
/// is `user` (`appliesToUser`): a User by name, a Group the user is in, a ServiceAccount by
/// its user name (its namespace defaults to the binding's).
pub(crate) fn applies_to_user(user: &UserInfo, subject: &Subject, binding_namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => user.username == subject.name,
        "Group" => user.groups.contains(&subject.name),
        "ServiceAccount" => {
            let ns = subject
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            !ns.is_empty()
                && user.username == format!("system:serviceaccount:{ns}:{}", subject.name)
        }
        _ => false,
    }
}

/// How a subject is named in an allowed decision's reason (`describeSubject`).
pub(crate) fn describe_subject(subject: &Subject, binding_namespace: &str) -> String {
    if subject.kind == "ServiceAccount" {
        let ns = subject
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_namespace);
        format!(
            "{} {}",
            subject.kind,
            go_quote(&format!("{}/{ns}", subject.name))
        )
    } else {
        format!("{} {}", subject.kind, go_quote(&subject.name))
    }
}

pub(crate) fn go_quote(s: &str) -> String {
    podvisor_api::validation::go_quote(s)
}

/// Splits a rule into rules of one verb, group, resource (and name) or one verb and URL
/// (`BreakdownRule`).
pub(crate) fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &str| Some(vec![s.to_owned()]);
    let mut out = Vec::new();
    for group in slice(rule.api_groups.as_ref()) {
        for resource in slice(rule.resources.as_ref()) {
            for verb in &rule.verbs {
                let names = slice(rule.resource_names.as_ref());
                if names.is_empty() {
                    out.push(PolicyRule {
                        api_groups: one(group),
                        resources: one(resource),
                        verbs: vec![verb.clone()],
                        ..PolicyRule::default()
                    });
                }
                for name in names {
                    out.push(PolicyRule {
                        api_groups: one(group),
                        resources: one(resource),
                        resource_names: one(name),
                        verbs: vec![verb.clone()],
                        ..PolicyRule::default()
                    });
                }
            }
        }
    }
    for url in slice(rule.non_resource_urls.as_ref()) {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: vec![verb.clone()],
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn resources_cover(owner: &[String], servant: &[String]) -> bool {
    if has(owner, ALL) || has_all(owner, servant) {
        return true;
    }
    servant.iter().all(|path| {
        has(owner, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

fn urls_cover(owner: &[String], servant: &[String]) -> bool {
    if has(owner, ALL) || has_all(owner, servant) {
        return true;
    }
    servant
        .iter()
        .all(|s| owner.iter().any(|o| url_matches(o, s)))
}

/// `ruleCovers`: whether `owner` grants everything `servant` does.
fn rule_covers(owner: &PolicyRule, servant: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, ALL) || has_all(&owner.verbs, &servant.verbs);
    let owner_groups = slice(owner.api_groups.as_ref());
    let groups =
        has(owner_groups, ALL) || has_all(owner_groups, slice(servant.api_groups.as_ref()));
    let resources = resources_cover(
        slice(owner.resources.as_ref()),
        slice(servant.resources.as_ref()),
    );
    let urls = urls_cover(
        slice(owner.non_resource_urls.as_ref()),
        slice(servant.non_resource_urls.as_ref()),
    );
    let owner_names = slice(owner.resource_names.as_ref());
    let servant_names = slice(servant.resource_names.as_ref());
    let names = if servant_names.is_empty() {
        owner_names.is_empty()
    } else {
        owner_names.is_empty() || has_all(owner_names, servant_names)
    };
    verbs && groups && resources && names && urls
}

/// `Covers`: whether `owner` grants every permission of `servant`, and the pieces of
/// `servant` (one verb and resource each) it does not.
pub(crate) fn covers(owner: &[PolicyRule], servant: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let mut missing = Vec::new();
    for rule in servant {
        for piece in breakdown(rule) {
            if !owner.iter().any(|o| rule_covers(o, &piece)) {
                missing.push(piece);
            }
        }
    }
    (missing.is_empty(), missing)
}

/// `CompactRules`: pieces of one group and resource (no names) joined into one rule with
/// their verbs, in order of first appearance.
pub(crate) fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for rule in rules {
        let simple = rule.resource_names.as_ref().is_none_or(Vec::is_empty)
            && rule.non_resource_urls.as_ref().is_none_or(Vec::is_empty)
            && slice(rule.api_groups.as_ref()).len() == 1
            && slice(rule.resources.as_ref()).len() == 1;
        let same = |o: &PolicyRule| {
            o.api_groups == rule.api_groups
                && o.resources == rule.resources
                && o.resource_names.as_ref().is_none_or(Vec::is_empty)
                && o.non_resource_urls.as_ref().is_none_or(Vec::is_empty)
        };
        match out.iter_mut().find(|o| simple && same(o)) {
            Some(existing) => {
                for verb in rule.verbs {
                    if !existing.verbs.contains(&verb) {
                        existing.verbs.push(verb);
                    }
                }
            }
            None => out.push(rule),
        }
    }
    out
}

fn go_strings(v: &[String]) -> String {
    let quoted: Vec<String> = v.iter().map(|s| go_quote(s)).collect();
    format!("[{}]", quoted.join(" "))
}

/// `CompactString`: `{APIGroups:[""], Resources:["pods"], Verbs:["create"]}`.
pub(crate) fn compact_string(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (label, values) in [
        ("APIGroups", slice(rule.api_groups.as_ref())),
        ("Resources", slice(rule.resources.as_ref())),
        ("NonResourceURLs", slice(rule.non_resource_urls.as_ref())),
        ("ResourceNames", slice(rule.resource_names.as_ref())),
        ("Verbs", rule.verbs.as_slice()),
    ] {
        if !values.is_empty() {
            parts.push(format!("{label}:{}", go_strings(values)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |s: &[&str]| (!s.is_empty()).then(|| s.iter().map(|x| (*x).to_owned()).collect());
        PolicyRule {
            verbs: verbs.iter().map(|x| (*x).to_owned()).collect(),
            api_groups: v(groups),
            resources: v(resources),
            resource_names: v(names),
            non_resource_urls: None,
        }
    }

    fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|x| (*x).to_owned()).collect(),
            non_resource_urls: Some(urls.iter().map(|x| (*x).to_owned()).collect()),
            ..PolicyRule::default()
        }
    }

    fn attrs(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            user: UserInfo {
                username: "u".into(),
                groups: vec![],
            },
            verb: verb.into(),
            is_resource_request: true,
            path: String::new(),
            api_group: group.into(),
            api_version: "v1".into(),
            namespace: "default".into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
        }
    }

    fn path(verb: &str, path: &str) -> Attributes {
        Attributes {
            is_resource_request: false,
            path: path.into(),
            ..attrs(verb, "", "", "", "")
        }
    }

    #[test]
    fn rule_matching_as_rbac_matches() {
        let pods_read = rule(&["get", "list", "watch"], &[""], &["pods"], &[]);
        assert!(rule_allows(&attrs("list", "", "pods", "", ""), &pods_read));
        assert!(!rule_allows(
            &attrs("create", "", "pods", "", ""),
            &pods_read
        ));
        assert!(!rule_allows(
            &attrs("list", "apps", "pods", "", ""),
            &pods_read
        ));
        // A subresource is its own resource.
        assert!(!rule_allows(
            &attrs("get", "", "pods", "log", "p"),
            &pods_read
        ));
        let log = rule(&["get"], &[""], &["pods/log"], &[]);
        assert!(rule_allows(&attrs("get", "", "pods", "log", "p"), &log));
        // `*/sub` is that subresource of everything; `*` everything.
        let any_status = rule(&["get"], &[""], &["*/status"], &[]);
        assert!(rule_allows(
            &attrs("get", "", "pods", "status", "p"),
            &any_status
        ));
        assert!(!rule_allows(
            &attrs("get", "", "pods", "", "p"),
            &any_status
        ));
        let all = rule(&["*"], &["*"], &["*"], &[]);
        assert!(rule_allows(
            &attrs("escalate", "rbac.authorization.k8s.io", "roles", "", "r"),
            &all
        ));
        // Names limit a rule to those objects (and a list names none).
        let named = rule(&["get", "list"], &[""], &["configmaps"], &["one"]);
        assert!(rule_allows(
            &attrs("get", "", "configmaps", "", "one"),
            &named
        ));
        assert!(!rule_allows(
            &attrs("get", "", "configmaps", "", "two"),
            &named
        ));
        assert!(!rule_allows(
            &attrs("list", "", "configmaps", "", ""),
            &named
        ));
        // Resource rules never allow paths, URL rules never resources.
        assert!(!rule_allows(&path("get", "/healthz"), &all));
        let health = url_rule(&["get"], &["/healthz", "/apis/*"]);
        assert!(rule_allows(&path("get", "/healthz"), &health));
        assert!(rule_allows(&path("get", "/apis/apps/v1"), &health));
        assert!(!rule_allows(&path("get", "/api"), &health));
        assert!(!rule_allows(&path("post", "/healthz"), &health));
        assert!(!rule_allows(&attrs("get", "", "pods", "", ""), &health));
    }

    #[test]
    fn subjects() {
        let user = UserInfo {
            username: "system:serviceaccount:team:robot".into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:authenticated".into(),
            ],
        };
        let subject = |kind: &str, name: &str, ns: Option<&str>| Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: ns.map(Into::into),
            api_group: None,
        };
        assert!(applies_to_user(
            &user,
            &subject("ServiceAccount", "robot", None),
            "team"
        ));
        assert!(!applies_to_user(
            &user,
            &subject("ServiceAccount", "robot", None),
            "other"
        ));
        assert!(!applies_to_user(
            &user,
            &subject("ServiceAccount", "robot", None),
            ""
        ));
        assert!(applies_to_user(
            &user,
            &subject("ServiceAccount", "robot", Some("team")),
            ""
        ));
        assert!(applies_to_user(
            &user,
            &subject("Group", "system:serviceaccounts", None),
            ""
        ));
        assert!(!applies_to_user(
            &user,
            &subject("Group", "system:masters", None),
            ""
        ));
        assert!(applies_to_user(
            &user,
            &subject("User", "system:serviceaccount:team:robot", None),
            ""
        ));
        assert_eq!(
            describe_subject(&subject("ServiceAccount", "robot", None), "team"),
            "ServiceAccount \"robot/team\""
        );
    }

    #[test]
    fn covers_finds_each_missing_piece() {
        let owner = vec![
            rule(&["get", "list"], &[""], &["pods", "pods/log"], &[]),
            rule(&["get"], &[""], &["*/status"], &[]),
            url_rule(&["get"], &["/apis/*"]),
        ];
        assert!(covers(&owner, &[rule(&["get"], &[""], &["pods"], &["p"])]).0);
        assert!(covers(&owner, &[rule(&["get"], &[""], &["nodes/status"], &[])]).0);
        assert!(covers(&owner, &[url_rule(&["get"], &["/apis/apps"])]).0);
        let (ok, missing) = covers(
            &owner,
            &[rule(
                &["get", "create", "delete"],
                &[""],
                &["pods", "secrets"],
                &[],
            )],
        );
        assert!(!ok);
        let compacted: Vec<String> = compact(missing).iter().map(compact_string).collect();
        assert_eq!(
            compacted,
            [
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["create" "delete"]}"#,
                r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get" "create" "delete"]}"#,
            ]
        );
        // A named owner rule does not cover every name.
        let named = vec![rule(&["get"], &[""], &["pods"], &["p"])];
        assert!(!covers(&named, &[rule(&["get"], &[""], &["pods"], &[])]).0);
        let all = vec![rule(&["*"], &["*"], &["*"], &[]), url_rule(&["*"], &["*"])];
        assert!(covers(&all, &owner).0);
    }
}
