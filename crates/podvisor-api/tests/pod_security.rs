//! Pod Security Admission's checks and decisions, pinned with the cases of upstream's
//! `policy/check_*_test.go` (a pod, the expected reason and detail) and
//! `admission/admission_test.go`'s messages.

use std::collections::BTreeMap;

use podvisor_api::k8s_openapi::api::core::v1::Pod;
use podvisor_api::pod_security::{
    Level, LevelVersion, Version, evaluate_pod_admission, is_significant_pod_update,
    namespace_update_warnings, policy_to_evaluate, run_check, validate_namespace_labels,
};
use serde_json::{Value, json};

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).expect("test pod decodes")
}

/// Runs check `id` at `version` on a pod given as `{metadata?, spec}`; `None` when allowed.
fn refusal(id: &str, version: Version, v: Value) -> Option<(String, String)> {
    let p = pod(v);
    let r = run_check(id, version, &p.metadata, p.spec.as_ref().unwrap())
        .unwrap_or_else(|| panic!("check {id} exists at {version}"));
    (!r.allowed).then_some((r.forbidden_reason, r.forbidden_detail))
}

fn refused(id: &str, v: Value) -> (String, String) {
    refusal(id, Version::Latest, v).expect("refused")
}

fn c(name: &str, sc: Value) -> Value {
    json!({"name": name, "image": "busybox", "securityContext": sc})
}

#[test]
fn host_namespaces() {
    let (reason, detail) = refused(
        "hostNamespaces",
        json!({"spec": {"hostNetwork": true, "hostPID": true, "hostIPC": true, "containers": []}}),
    );
    assert_eq!(reason, "host namespaces");
    assert_eq!(detail, "hostNetwork=true, hostPID=true, hostIPC=true");
}

#[test]
fn privileged() {
    let (reason, detail) = refused(
        "privileged",
        json!({"spec": {"containers": [
            {"name": "a", "image": "x"},
            c("b", json!({})),
            c("c", json!({"privileged": false})),
            c("d", json!({"privileged": true})),
            c("e", json!({"privileged": true})),
        ]}}),
    );
    assert_eq!(reason, "privileged");
    assert_eq!(
        detail,
        r#"containers "d", "e" must not set securityContext.privileged=true"#
    );
}

#[test]
fn capabilities_baseline_and_restricted() {
    let spec = json!({"spec": {"containers": [
        c("a", json!({"capabilities": {"add": ["FOO", "BAR"]}})),
        c("b", json!({"capabilities": {"add": ["BAR", "BAZ"]}})),
        c("c", json!({"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"], "drop": ["ALL", "FOO"]}})),
    ]}});
    let (reason, detail) = refused("capabilities_baseline", spec.clone());
    assert_eq!(reason, "non-default capabilities");
    assert_eq!(
        detail,
        r#"containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add"#
    );
    let (reason, detail) = refused("capabilities_restricted", spec);
    assert_eq!(reason, "unrestricted capabilities");
    assert_eq!(
        detail,
        r#"containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add"#
    );
    let (_, detail) = refused(
        "capabilities_restricted",
        json!({"spec": {"containers": [{"name": "a", "image": "x"}]}}),
    );
    assert_eq!(
        detail,
        r#"container "a" must set securityContext.capabilities.drop=["ALL"]"#
    );
    // Windows pods are not checked from 1.25 on; before, they were.
    let windows =
        json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "a", "image": "x"}]}});
    assert_eq!(
        refusal("capabilities_restricted", Version::Latest, windows.clone()),
        None
    );
    assert!(refusal("capabilities_restricted", Version::V1(24), windows).is_some());
}

#[test]
fn host_path_volumes_and_restricted_volumes() {
    let (reason, detail) = refused(
        "hostPathVolumes",
        json!({"spec": {"containers": [], "volumes": [
            {"name": "a", "hostPath": {"path": "/a"}},
            {"name": "b", "hostPath": {"path": "/b"}},
            {"name": "c", "emptyDir": {}},
        ]}}),
    );
    assert_eq!(reason, "hostPath volumes");
    assert_eq!(detail, r#"volumes "a", "b""#);
    let (reason, detail) = refused(
        "restrictedVolumes",
        json!({"spec": {"containers": [], "volumes": [
            {"name": "a1", "emptyDir": {}},
            {"name": "a2", "secret": {"secretName": "s"}},
            {"name": "a3", "projected": {"sources": []}},
            {"name": "a4", "image": {"reference": "x"}},
            {"name": "b1", "hostPath": {"path": "/"}},
            {"name": "b2", "nfs": {"server": "s", "path": "/"}},
            {"name": "b3", "gitRepo": {"repository": "r"}},
            {"name": "c1"},
        ]}}),
    );
    assert_eq!(reason, "restricted volume types");
    assert_eq!(
        detail,
        r#"volumes "b1", "b2", "b3", "c1" use restricted volume types "gitRepo", "hostPath", "nfs", "unknown""#
    );
    let (_, detail) = refused(
        "restrictedVolumes",
        json!({"spec": {"containers": [], "volumes": [{"name": "b1", "hostPath": {"path": "/"}}]}}),
    );
    assert_eq!(
        detail,
        r#"volume "b1" uses restricted volume type "hostPath""#
    );
}

#[test]
fn host_ports() {
    let ports = |p: &[i32]| -> Value {
        p.iter()
            .map(|hp| json!({"containerPort": 80, "hostPort": hp}))
            .collect()
    };
    let (reason, detail) = refused(
        "hostPorts",
        json!({"spec": {"containers": [
            {"name": "a", "image": "x", "ports": [{"containerPort": 80}]},
            {"name": "b", "image": "x", "ports": ports(&[20])},
        ]}}),
    );
    assert_eq!(reason, "hostPort");
    assert_eq!(detail, r#"container "b" uses hostPort 20"#);
    let (_, detail) = refused(
        "hostPorts",
        json!({"spec": {"containers": [
            {"name": "a", "image": "x"},
            {"name": "b", "image": "x", "ports": ports(&[10, 20])},
            {"name": "c", "image": "x", "ports": ports(&[30])},
        ]}}),
    );
    assert_eq!(detail, r#"containers "b", "c" use hostPorts 10, 20, 30"#);
}

#[test]
fn host_probes_and_host_lifecycle() {
    let v = json!({"spec": {"containers": [{
        "name": "a", "image": "x",
        "livenessProbe": {"httpGet": {"host": "localhost", "port": 80}},
        "readinessProbe": {"tcpSocket": {"host": "127.0.0.1", "port": 80}},
        "startupProbe": {"httpGet": {"host": "::1", "port": 80}},
    }]}});
    let (reason, detail) = refused("hostProbesAndHostLifecycle", v.clone());
    assert_eq!(reason, "probe or lifecycle host");
    assert_eq!(
        detail,
        r#"container "a" uses probe or lifecycle hosts "127.0.0.1", "::1", "localhost""#
    );
    // The check exists from 1.34.
    let p = pod(v);
    assert!(
        run_check(
            "hostProbesAndHostLifecycle",
            Version::V1(33),
            &p.metadata,
            p.spec.as_ref().unwrap()
        )
        .is_none()
    );
    let (_, detail) = refused(
        "hostProbesAndHostLifecycle",
        json!({"spec": {"containers": [
            {"name": "invalid2", "image": "x", "lifecycle": {"preStop": {"httpGet": {"host": "b.com", "port": 80}}}},
            {"name": "invalid1", "image": "x", "lifecycle": {"postStart": {"tcpSocket": {"host": "a.com", "port": 80}}}},
            {"name": "valid", "image": "x", "livenessProbe": {"httpGet": {"port": 80}}},
        ]}}),
    );
    assert_eq!(
        detail,
        r#"containers "invalid1", "invalid2" use probe or lifecycle hosts "a.com", "b.com""#
    );
}

#[test]
fn proc_mount() {
    let v = json!({"spec": {"hostUsers": false, "containers": [
        {"name": "a", "image": "x"},
        c("b", json!({})),
        c("c", json!({"procMount": "Default"})),
        c("d", json!({"procMount": "Unmasked"})),
        c("e", json!({"procMount": "other"})),
    ]}});
    // 1.35's baseline allows any procMount in a user namespace; restricted still refuses.
    assert_eq!(refusal("procMount", Version::Latest, v.clone()), None);
    let (reason, detail) = refusal("procMount", Version::V1(34), v.clone()).unwrap();
    assert_eq!(reason, "procMount");
    assert_eq!(
        detail,
        r#"containers "d", "e" must not set securityContext.procMount to "Unmasked", "other""#
    );
    let (_, restricted) = refused("procMount_restricted", v);
    assert_eq!(restricted, detail);
}

#[test]
fn se_linux_options() {
    let v = json!({"spec": {
        "securityContext": {"seLinuxOptions": {"type": "foo", "user": "bar", "role": "baz"}},
        "containers": [
            c("a", json!({"seLinuxOptions": {"type": "container_t"}})),
            c("b", json!({"seLinuxOptions": {"type": "container_init_t"}})),
            c("c", json!({"seLinuxOptions": {"type": "container_kvm_t"}})),
            c("d", json!({"seLinuxOptions": {"type": "container_engine_t"}})),
            c("e", json!({"seLinuxOptions": {"type": "bar"}})),
            c("f", json!({"seLinuxOptions": {"user": "bar"}})),
            c("g", json!({"seLinuxOptions": {"role": "baz"}})),
        ],
    }});
    let (reason, detail) = refused("seLinuxOptions", v.clone());
    assert_eq!(reason, "seLinuxOptions");
    assert_eq!(
        detail,
        r#"pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set"#
    );
    // Before 1.31, container_engine_t was not allowed.
    let (_, old) = refusal("seLinuxOptions", Version::V1(30), v).unwrap();
    assert_eq!(
        old,
        r#"pod and containers "d", "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "container_engine_t", "foo"; user may not be set; role may not be set"#
    );
    let (_, detail) = refused(
        "seLinuxOptions",
        json!({"spec": {"securityContext": {"seLinuxOptions": {"user": "bad"}}, "containers": []}}),
    );
    assert_eq!(
        detail,
        "pod set forbidden securityContext.seLinuxOptions: user may not be set"
    );
}

#[test]
fn seccomp_profile_baseline() {
    let (reason, detail) = refused(
        "seccompProfile_baseline",
        json!({"spec": {
            "securityContext": {"seccompProfile": {"type": "Unconfined"}},
            "containers": [
                c("a", json!({})),
                c("b", json!({"seccompProfile": {"type": "RuntimeDefault"}})),
                c("c", json!({"seccompProfile": {"type": "Unconfined"}})),
                c("d", json!({"seccompProfile": {"type": "Unconfined"}})),
            ],
        }}),
    );
    assert_eq!(reason, "seccompProfile");
    assert_eq!(
        detail,
        r#"pod and containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined""#
    );
    // Before 1.19, the alpha annotations.
    let (_, detail) = refusal(
        "seccompProfile_baseline",
        Version::V1(18),
        json!({
            "metadata": {"annotations": {
                "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
                "container.seccomp.security.alpha.kubernetes.io/a": "unconfined",
                "container.seccomp.security.alpha.kubernetes.io/b": "unknown",
                "container.seccomp.security.alpha.kubernetes.io/c": "runtime/default",
            }},
            "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}, {"name": "c", "image": "x"}]},
        }),
    )
    .unwrap();
    assert_eq!(
        detail,
        r#"forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", container.seccomp.security.alpha.kubernetes.io/b="unknown", seccomp.security.alpha.kubernetes.io/pod="unconfined""#
    );
}

#[test]
fn seccomp_profile_restricted() {
    let (reason, detail) = refused(
        "seccompProfile_restricted",
        json!({"spec": {"containers": [{"name": "a", "image": "x"}]}}),
    );
    assert_eq!(reason, "seccompProfile");
    assert_eq!(
        detail,
        r#"pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#
    );
    assert_eq!(
        refusal(
            "seccompProfile_restricted",
            Version::Latest,
            json!({"spec": {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, "containers": [{"name": "a", "image": "x"}]}}),
        ),
        None
    );
}

#[test]
fn sysctls() {
    let v = json!({"spec": {"securityContext": {"sysctls": [
        {"name": "a", "value": "a"},
        {"name": "net.ipv4.tcp_rmem", "value": "1 2 3"},
        {"name": "b", "value": "b"},
        {"name": "kernel.shm_rmid_forced", "value": "0"},
    ]}, "containers": []}});
    let (reason, detail) = refused("sysctls", v.clone());
    assert_eq!(reason, "forbidden sysctls");
    assert_eq!(detail, "a, b");
    let (_, detail) = refusal("sysctls", Version::V1(31), v).unwrap();
    assert_eq!(detail, "a, net.ipv4.tcp_rmem, b");
}

#[test]
fn windows_host_process() {
    let (reason, detail) = refused(
        "windowsHostProcess",
        json!({"spec": {
            "securityContext": {"windowsOptions": {"hostProcess": true}},
            "containers": [
                c("a", json!({"windowsOptions": {"hostProcess": true}})),
                c("b", json!({"windowsOptions": {"hostProcess": true}})),
                c("c", json!({"windowsOptions": {"hostProcess": false}})),
            ],
        }}),
    );
    assert_eq!(reason, "hostProcess");
    assert_eq!(
        detail,
        r#"pod and containers "a", "b" must not set securityContext.windowsOptions.hostProcess=true"#
    );
}

#[test]
fn app_armor_profile() {
    let (reason, detail) = refused(
        "appArmorProfile",
        json!({"spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}, "containers": []}}),
    );
    assert_eq!(reason, "forbidden AppArmor profile");
    assert_eq!(
        detail,
        r#"pod must not set AppArmor profile type to "Unconfined""#
    );
    let (reason, detail) = refused(
        "appArmorProfile",
        json!({
            "metadata": {"annotations": {
                "container.apparmor.security.beta.kubernetes.io/": "bogus",
                "container.apparmor.security.beta.kubernetes.io/a": "",
                "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
                "container.apparmor.security.beta.kubernetes.io/c": "localhost/",
                "container.apparmor.security.beta.kubernetes.io/d": "localhost/foo",
                "container.apparmor.security.beta.kubernetes.io/e": "unconfined",
                "container.apparmor.security.beta.kubernetes.io/f": "unknown",
            }},
            "spec": {"containers": []},
        }),
    );
    assert_eq!(reason, "forbidden AppArmor profiles");
    assert_eq!(
        detail,
        r#"annotations must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/="bogus"", "container.apparmor.security.beta.kubernetes.io/e="unconfined"", "container.apparmor.security.beta.kubernetes.io/f="unknown"""#
    );
}

#[test]
fn allow_privilege_escalation_run_as_non_root_run_as_user() {
    let (reason, detail) = refused(
        "allowPrivilegeEscalation",
        json!({"spec": {"containers": [
            {"name": "a", "image": "x"},
            c("b", json!({})),
            c("c", json!({"allowPrivilegeEscalation": true})),
            c("d", json!({"allowPrivilegeEscalation": false})),
        ]}}),
    );
    assert_eq!(reason, "allowPrivilegeEscalation != false");
    assert_eq!(
        detail,
        r#"containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false"#
    );
    let (reason, detail) = refused(
        "runAsNonRoot",
        json!({"spec": {"containers": [
            {"name": "a", "image": "x"},
            c("b", json!({"runAsNonRoot": true})),
        ]}}),
    );
    assert_eq!(reason, "runAsNonRoot != true");
    assert_eq!(
        detail,
        r#"pod or container "a" must set securityContext.runAsNonRoot=true"#
    );
    let (_, detail) = refused(
        "runAsNonRoot",
        json!({"spec": {"securityContext": {"runAsNonRoot": true}, "containers": [
            {"name": "a", "image": "x"},
            c("c", json!({"runAsNonRoot": false})),
            c("d", json!({"runAsNonRoot": false})),
        ]}}),
    );
    assert_eq!(
        detail,
        r#"containers "c", "d" must not set securityContext.runAsNonRoot=false"#
    );
    let (reason, detail) = refused(
        "runAsUser",
        json!({"spec": {"securityContext": {"runAsUser": 0}, "containers": [
            c("c", json!({"runAsUser": 0})),
            c("d", json!({"runAsUser": 0})),
            c("e", json!({"runAsUser": 1000})),
        ]}}),
    );
    assert_eq!(reason, "runAsUser=0");
    assert_eq!(
        detail,
        r#"pod and containers "c", "d" must not set runAsUser=0"#
    );
    // 1.35 relaxes both in a user namespace.
    let userns = json!({"spec": {"hostUsers": false, "securityContext": {"runAsUser": 0}, "containers": [{"name": "a", "image": "x"}]}});
    assert_eq!(refusal("runAsUser", Version::Latest, userns.clone()), None);
    assert_eq!(
        refusal("runAsNonRoot", Version::Latest, userns.clone()),
        None
    );
    assert!(refusal("runAsUser", Version::V1(34), userns).is_some());
}

#[test]
fn ephemeral_containers_are_checked() {
    let (_, detail) = refused(
        "privileged",
        json!({"spec": {"containers": [{"name": "a", "image": "x"}],
            "ephemeralContainers": [{"name": "debugger", "image": "x", "securityContext": {"privileged": true}}]}}),
    );
    assert_eq!(
        detail,
        r#"container "debugger" must not set securityContext.privileged=true"#
    );
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (format!("pod-security.kubernetes.io/{k}"), (*v).to_owned()))
        .collect()
}

fn busybox() -> Pod {
    pod(
        json!({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    )
}

fn admit(l: &BTreeMap<String, String>, p: &Pod) -> podvisor_api::pod_security::Decision {
    evaluate_pod_admission(Some(l), &p.metadata, p.spec.as_ref().unwrap())
}

#[test]
fn enforce_restricted_refuses_a_plain_pod_with_upstreams_text() {
    let d = admit(&labels(&[("enforce", "restricted")]), &busybox());
    assert_eq!(
        d.forbidden.as_deref(),
        Some(
            r#"violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
        )
    );
    // Refused: no warning; the audit annotation names the enforced policy.
    assert!(d.warnings.is_empty());
    assert_eq!(
        d.audit_annotations["pod-security.kubernetes.io/enforce-policy"],
        "restricted:latest"
    );
}

#[test]
fn warn_and_audit_do_not_refuse() {
    let l = labels(&[
        ("warn", "baseline"),
        ("warn-version", "v1.30"),
        ("audit", "restricted"),
    ]);
    let p = pod(
        json!({"metadata": {"name": "x"}, "spec": {"hostPID": true, "containers": [{"name": "c", "image": "busybox"}]}}),
    );
    let d = admit(&l, &p);
    assert_eq!(d.forbidden, None);
    assert_eq!(
        d.warnings,
        [r#"would violate PodSecurity "baseline:v1.30": host namespaces (hostPID=true)"#]
    );
    assert!(
        d.audit_annotations["pod-security.kubernetes.io/audit-violations"]
            .starts_with(r#"would violate PodSecurity "restricted:latest": host namespaces (hostPID=true), allowPrivilegeEscalation != false"#)
    );
    // Unlabelled: privileged, nothing evaluated.
    let d = evaluate_pod_admission(None, &p.metadata, p.spec.as_ref().unwrap());
    assert_eq!(d.forbidden, None);
    assert!(d.warnings.is_empty());
    assert_eq!(
        d.audit_annotations["pod-security.kubernetes.io/enforce-policy"],
        "privileged:latest"
    );
}

#[test]
fn policy_from_labels() {
    let (p, errs) = policy_to_evaluate(Some(&labels(&[
        ("enforce", "baseline"),
        ("enforce-version", "v1.25"),
    ])));
    assert!(errs.is_empty());
    let baseline_125 = LevelVersion {
        level: Level::Baseline,
        version: Version::V1(25),
    };
    assert_eq!(p.enforce, baseline_125);
    // Warn follows a stricter enforce level and its version.
    assert_eq!(p.warn, baseline_125);
    assert_eq!(p.audit, LevelVersion::PRIVILEGED_LATEST);
    let (p, errs) = policy_to_evaluate(Some(&labels(&[
        ("enforce", "strict"),
        ("warn-version", "v1.09"),
        ("audit", "x"),
    ])));
    // A bad enforce level fails closed, a bad audit level open.
    assert_eq!(p.enforce.level, Level::Restricted);
    assert_eq!(p.audit.level, Level::Privileged);
    let texts: Vec<String> = errs.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted"#,
            r#"metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: "x": must be one of privileged, baseline, restricted"#,
            r#"metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "v1.09": must be "latest" or "v1.x""#,
        ]
    );
    for ok in ["latest", "v1.0", "v1.35", "v1.100", "v1.5000000000"] {
        assert!(Version::parse(ok).is_ok(), "{ok}");
    }
    for bad in [
        "v1",
        "v1.",
        "v2.0",
        "1.25",
        "v1.01",
        "v1.-1",
        "v1.+1",
        "Latest",
        "v1.99999999999999999999",
    ] {
        assert!(Version::parse(bad).is_err(), "{bad}");
    }
    assert!(validate_namespace_labels(Some(&labels(&[("warn", "restricted")]))).is_ok());
    assert!(validate_namespace_labels(Some(&labels(&[("warn", "nope")]))).is_err());
}

#[test]
fn a_stricter_enforce_level_warns_about_existing_pods() {
    let named = |name: &str, v: Value| {
        let mut p = pod(v);
        p.metadata.name = Some(name.to_owned());
        p
    };
    let plain = json!({"spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let host =
        json!({"spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "busybox"}]}});
    let pods = vec![
        named("web-2", plain.clone()),
        named("web-1", plain.clone()),
        named("web-3", plain),
        named("net", host),
    ];
    let old = labels(&[]);
    let new = labels(&[("enforce", "restricted")]);
    let warnings = namespace_update_warnings("team", Some(&old), Some(&new), &pods).unwrap();
    assert_eq!(
        warnings,
        [
            r#"existing pods in namespace "team" violate the new PodSecurity enforce level "restricted:latest""#,
            "net: host namespaces, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile",
            "web-1 (and 2 other pods): allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile",
        ]
    );
    // A laxer level, or the same one, evaluates nothing.
    let baseline = labels(&[("enforce", "baseline")]);
    assert!(
        namespace_update_warnings("team", Some(&new), Some(&baseline), &pods)
            .unwrap()
            .is_empty()
    );
    assert!(
        namespace_update_warnings("team", Some(&new), Some(&new), &pods)
            .unwrap()
            .is_empty()
    );
    // Bad labels are refused, unless the namespace had the same errors.
    let bad = labels(&[("enforce", "bogus")]);
    assert!(namespace_update_warnings("team", Some(&old), Some(&bad), &pods).is_err());
    assert!(namespace_update_warnings("team", Some(&bad), Some(&bad), &pods).is_ok());
}

#[test]
fn only_image_and_container_changes_are_significant_updates() {
    let old = busybox();
    let mut new = old.clone();
    new.metadata.labels = Some(BTreeMap::from([("a".to_owned(), "b".to_owned())]));
    assert!(!is_significant_pod_update(&new, &old));
    new.spec.as_mut().unwrap().containers[0].image = Some("busybox:1.36".to_owned());
    assert!(is_significant_pod_update(&new, &old));
    let mut debug = old.clone();
    debug.spec.as_mut().unwrap().ephemeral_containers = Some(vec![
        serde_json::from_value(json!({"name": "d", "image": "busybox"})).unwrap(),
    ]);
    assert!(is_significant_pod_update(&debug, &old));
    assert!(!is_significant_pod_update(&debug, &debug.clone()));
}
