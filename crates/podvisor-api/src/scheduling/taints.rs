//! Taints and tolerations (`k8s.io/api/core/v1` `Toleration.ToleratesTaint`,
//! `component-helpers/scheduling/corev1`, `pkg/controller/tainteviction`,
//! `plugin/pkg/admission/defaulttolerationseconds`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{PodSpec, Taint, Toleration};

/// The taint a cordon stands for (`spec.unschedulable`).
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// The node lifecycle controller's taint of a node whose `Ready` condition is False.
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The node lifecycle controller's taint of a node whose `Ready` condition is Unknown.
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// `NoSchedule`: new pods are not scheduled onto the node unless they tolerate the taint.
pub const NO_SCHEDULE: &str = "NoSchedule";
/// `NoExecute`: as `NoSchedule`, and pods that do not tolerate it are evicted.
pub const NO_EXECUTE: &str = "NoExecute";
/// `DefaultTolerationSeconds`' default for both tolerations it adds.
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// `Toleration.ToleratesTaint`: an empty effect matches every effect, an empty key (with
/// `Exists`) every key; `Equal` (the default operator) compares values, `Exists` ignores them;
/// any other operator tolerates nothing (`Gt`/`Lt` are behind a gate that is off in 1.35).
#[must_use]
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("") {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        "Exists" => true,
        _ => false,
    }
}

/// `TolerationsTolerateTaint`: whether any of `tolerations` tolerates `taint`.
#[must_use]
pub fn tolerations_tolerate(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// `FindMatchingUntoleratedTaint`: the first taint `considered` picks that no toleration
/// tolerates.
pub fn find_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    considered: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| considered(t))
        .find(|t| !tolerations_tolerate(tolerations, t))
}

/// `DoNotScheduleTaintsFilterFunc`: the effects the scheduler's filter honours
/// (`PreferNoSchedule` is only a score).
#[must_use]
pub fn is_do_not_schedule(taint: &Taint) -> bool {
    taint.effect == NO_SCHEDULE || taint.effect == NO_EXECUTE
}

/// What the taint-eviction controller does with a pod on a node with `NoExecute` taints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Some taint is not tolerated: the pod is deleted now.
    Now,
    /// Every taint is tolerated, the shortest `tolerationSeconds` of the tolerations used
    /// is this long: the pod is deleted once it has passed.
    After(Duration),
    /// Every taint is tolerated for ever (no `tolerationSeconds`): nothing is done.
    Never,
}

/// The taint-eviction controller's decision (`processPodOnNode` over
/// `GetMatchingTolerations` and `getMinTolerationTime`) for a pod with `tolerations` on a
/// node with `taints`; only the `NoExecute` taints count. `None`: the node has none (any
/// scheduled deletion is cancelled).
#[must_use]
pub fn no_execute_eviction(taints: &[Taint], tolerations: &[Toleration]) -> Option<Eviction> {
    let no_execute: Vec<&Taint> = taints.iter().filter(|t| t.effect == NO_EXECUTE).collect();
    if no_execute.is_empty() {
        return None;
    }
    // Per taint, the first toleration that tolerates it.
    let mut used = Vec::with_capacity(no_execute.len());
    for taint in no_execute {
        match tolerations.iter().find(|t| tolerates(t, taint)) {
            Some(t) => used.push(t),
            None => return Some(Eviction::Now),
        }
    }
    let mut shortest: Option<i64> = None;
    for t in used {
        if let Some(seconds) = t.toleration_seconds {
            if seconds <= 0 {
                return Some(Eviction::Now);
            }
            shortest = Some(shortest.map_or(seconds, |s| s.min(seconds)));
        }
    }
    Some(shortest.map_or(Eviction::Never, |s| {
        Eviction::After(Duration::from_secs(s.unsigned_abs()))
    }))
}

/// The `DefaultTolerationSeconds` admission plugin (on a pod's create): a pod that does not
/// tolerate `node.kubernetes.io/not-ready:NoExecute` (a toleration with that key or no key,
/// and `NoExecute` or no effect) gets `{key: not-ready, operator: Exists, effect: NoExecute,
/// tolerationSeconds: 300}`; the same for `node.kubernetes.io/unreachable`.
pub fn add_default_toleration_seconds(spec: &mut PodSpec) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let covers = |key: &str| {
        tolerations.iter().any(|t| {
            let k = t.key.as_deref().unwrap_or("");
            let e = t.effect.as_deref().unwrap_or("");
            (k == key || k.is_empty()) && (e == NO_EXECUTE || e.is_empty())
        })
    };
    let missing: Vec<&str> = [TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE]
        .into_iter()
        .filter(|key| !covers(key))
        .collect();
    for key in missing {
        tolerations.push(Toleration {
            key: Some(key.to_owned()),
            operator: Some("Exists".to_owned()),
            effect: Some(NO_EXECUTE.to_owned()),
            toleration_seconds: Some(DEFAULT_TOLERATION_SECONDS),
            value: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.to_owned(),
            value: (!value.is_empty()).then(|| value.to_owned()),
            effect: effect.to_owned(),
            time_added: None,
        }
    }

    fn toleration(key: &str, op: &str, value: &str, effect: &str, secs: Option<i64>) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Toleration {
            key: opt(key),
            operator: opt(op),
            value: opt(value),
            effect: opt(effect),
            toleration_seconds: secs,
        }
    }

    /// `TestTolerationToleratesTaint` (k8s.io/api/core/v1), its table.
    #[test]
    fn toleration_tolerates_taint_as_upstream() {
        let cases = [
            // Empty effect matches every effect.
            (
                toleration("foo", "Exists", "", "", None),
                taint("foo", "", "NoExecute"),
                true,
            ),
            (
                toleration("foo", "Equal", "bar", "", None),
                taint("foo", "bar", "NoSchedule"),
                true,
            ),
            // Effects differ.
            (
                toleration("foo", "Exists", "", "NoExecute", None),
                taint("foo", "", "NoSchedule"),
                false,
            ),
            // Keys differ.
            (
                toleration("foo", "Exists", "", "NoSchedule", None),
                taint("bar", "", "NoSchedule"),
                false,
            ),
            // Equal needs the same value; the default operator is Equal.
            (
                toleration("foo", "Equal", "bar", "NoSchedule", None),
                taint("foo", "baz", "NoSchedule"),
                false,
            ),
            (
                toleration("foo", "", "bar", "NoSchedule", None),
                taint("foo", "bar", "NoSchedule"),
                true,
            ),
            (
                toleration("foo", "", "", "NoSchedule", None),
                taint("foo", "", "NoSchedule"),
                true,
            ),
            // Exists with an empty key tolerates everything.
            (
                toleration("", "Exists", "", "", None),
                taint("any", "thing", "NoExecute"),
                true,
            ),
            // An unknown operator tolerates nothing.
            (
                toleration("foo", "Gt", "1", "NoSchedule", None),
                taint("foo", "2", "NoSchedule"),
                false,
            ),
        ];
        for (i, (t, tt, want)) in cases.iter().enumerate() {
            assert_eq!(tolerates(t, tt), *want, "case {i}: {t:?} / {tt:?}");
        }
    }

    #[test]
    fn the_first_untolerated_do_not_schedule_taint_is_found() {
        let taints = [
            taint("soft", "", "PreferNoSchedule"),
            taint("a", "1", "NoSchedule"),
            taint("b", "2", "NoExecute"),
        ];
        let tol = [toleration("a", "Equal", "1", "NoSchedule", None)];
        let found = find_untolerated_taint(&taints, &tol, is_do_not_schedule);
        assert_eq!(found.map(|t| t.key.as_str()), Some("b"));
        let all = [toleration("", "Exists", "", "", None)];
        assert_eq!(
            find_untolerated_taint(&taints, &all, is_do_not_schedule),
            None
        );
    }

    /// `TestGetMinTolerationTime` and `processPodOnNode`'s cases.
    #[test]
    fn no_execute_eviction_follows_the_taint_manager() {
        let ne = taint("k", "v", "NoExecute");
        let ns = taint("k", "v", "NoSchedule");
        assert_eq!(no_execute_eviction(std::slice::from_ref(&ns), &[]), None);
        assert_eq!(
            no_execute_eviction(std::slice::from_ref(&ne), &[]),
            Some(Eviction::Now)
        );
        let forever = toleration("k", "Exists", "", "NoExecute", None);
        assert_eq!(
            no_execute_eviction(std::slice::from_ref(&ne), std::slice::from_ref(&forever)),
            Some(Eviction::Never)
        );
        let two = toleration("k", "Equal", "v", "NoExecute", Some(2));
        assert_eq!(
            no_execute_eviction(&[ne.clone(), ns], std::slice::from_ref(&two)),
            Some(Eviction::After(Duration::from_secs(2)))
        );
        // The first matching toleration is the one used (a forever toleration listed first
        // wins over a shorter one after it).
        assert_eq!(
            no_execute_eviction(std::slice::from_ref(&ne), &[forever, two.clone()]),
            Some(Eviction::Never)
        );
        let other = taint("o", "", "NoExecute");
        let five = toleration("o", "Exists", "", "", Some(5));
        assert_eq!(
            no_execute_eviction(&[ne.clone(), other.clone()], &[five.clone(), two]),
            Some(Eviction::After(Duration::from_secs(2)))
        );
        // Not every taint tolerated: now.
        assert_eq!(
            no_execute_eviction(
                &[ne.clone(), other],
                &[toleration("k", "Exists", "", "", None)]
            ),
            Some(Eviction::Now)
        );
        // A non-positive tolerationSeconds: now.
        let zero = toleration("k", "Exists", "", "", Some(0));
        assert_eq!(no_execute_eviction(&[ne], &[zero]), Some(Eviction::Now));
    }

    /// `TestForgivenessAdmission`'s cases.
    #[test]
    fn default_toleration_seconds_as_the_admission_plugin() {
        let mut spec = PodSpec::default();
        add_default_toleration_seconds(&mut spec);
        let got = spec.tolerations.clone().unwrap();
        assert_eq!(
            got,
            vec![
                toleration(TAINT_NODE_NOT_READY, "Exists", "", "NoExecute", Some(300)),
                toleration(TAINT_NODE_UNREACHABLE, "Exists", "", "NoExecute", Some(300)),
            ]
        );
        // Added once only.
        add_default_toleration_seconds(&mut spec);
        assert_eq!(spec.tolerations.as_ref().unwrap().len(), 2);
        // A pod's own toleration of not-ready (any effect) is kept; unreachable is added.
        let mut spec = PodSpec {
            tolerations: Some(vec![toleration(
                TAINT_NODE_NOT_READY,
                "Exists",
                "",
                "",
                Some(60),
            )]),
            ..PodSpec::default()
        };
        add_default_toleration_seconds(&mut spec);
        let got = spec.tolerations.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].key.as_deref(), Some(TAINT_NODE_UNREACHABLE));
        // A NoSchedule toleration of not-ready does not count.
        let mut spec = PodSpec {
            tolerations: Some(vec![toleration(
                TAINT_NODE_NOT_READY,
                "Exists",
                "",
                "NoSchedule",
                None,
            )]),
            ..PodSpec::default()
        };
        add_default_toleration_seconds(&mut spec);
        assert_eq!(spec.tolerations.unwrap().len(), 3);
        // Tolerating everything covers both.
        let mut spec = PodSpec {
            tolerations: Some(vec![toleration("", "Exists", "", "", None)]),
            ..PodSpec::default()
        };
        add_default_toleration_seconds(&mut spec);
        assert_eq!(spec.tolerations.unwrap().len(), 1);
    }
}
