//! The `pods/status` subresource: only `status` (plus labels and annotations, as the API
//! server's status strategy allows) changes; the QoS class is kept; transitions are
//! checked by `validate_status_update` (V13). Conditions of readiness gates set by clients
//! are accepted like any other condition.

use k8s_openapi::api::core::v1::Pod;
use podvisor_api::validate_status_update;

use crate::status::{ApiError, ApiResult};

/// `podStatusStrategy.PrepareForUpdate` + `ValidatePodStatusUpdate`: the old pod with the
/// new status, labels and annotations.
pub(crate) fn admit_status(old: &Pod, new: Pod) -> ApiResult<Pod> {
    let mut out = old.clone();
    let qos = old.status.as_ref().and_then(|s| s.qos_class.clone());
    out.status = new.status;
    if let Some(s) = out.status.as_mut() {
        s.qos_class = qos;
    }
    out.metadata.labels = new.metadata.labels;
    out.metadata.annotations = new.metadata.annotations;
    preserve_old_observed_generation(&mut out, old);
    validate_status_update(old, &out).map_err(|e| ApiError::invalid(&e))?;
    Ok(out)
}

/// `preserveOldObservedGeneration` (D10): a status write that leaves `observedGeneration`
/// unset (or 0) — in the status or on a condition — keeps the old value (conditions matched
/// by type, in order).
fn preserve_old_observed_generation(new: &mut Pod, old: &Pod) {
    let Some(status) = new.status.as_mut() else {
        return;
    };
    let old_status = old.status.as_ref();
    if status.observed_generation.unwrap_or(0) == 0 {
        status.observed_generation = old_status.and_then(|s| s.observed_generation);
    }
    let mut old_generations: Vec<(&str, Option<i64>)> = old_status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| (c.type_.as_str(), c.observed_generation))
        .collect();
    for c in status.conditions.iter_mut().flatten() {
        let old = old_generations
            .iter()
            .position(|(t, _)| *t == c.type_)
            .map(|i| old_generations.remove(i).1);
        if c.observed_generation.unwrap_or(0) == 0 {
            c.observed_generation = old.flatten();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

    fn with_status(generation: Option<i64>, conditions: &[(&str, Option<i64>)]) -> Pod {
        Pod {
            status: Some(PodStatus {
                observed_generation: generation,
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, g)| PodCondition {
                            type_: (*t).to_owned(),
                            status: "True".to_owned(),
                            observed_generation: *g,
                            ..PodCondition::default()
                        })
                        .collect(),
                ),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    /// D10: a writer that does not know `observedGeneration` does not clear it.
    #[test]
    fn d10_a_status_write_without_observed_generation_keeps_the_old_values() {
        let old = with_status(
            Some(3),
            &[("Ready", Some(3)), ("example.com/gate", Some(2))],
        );
        let mut new = with_status(None, &[("example.com/gate", None), ("Ready", Some(4))]);
        preserve_old_observed_generation(&mut new, &old);
        let status = new.status.unwrap();
        assert_eq!(status.observed_generation, Some(3));
        let got: Vec<_> = status
            .conditions
            .unwrap()
            .iter()
            .map(|c| (c.type_.clone(), c.observed_generation))
            .collect();
        assert_eq!(
            got,
            [
                ("example.com/gate".to_owned(), Some(2)),
                ("Ready".to_owned(), Some(4))
            ]
        );
    }
}
