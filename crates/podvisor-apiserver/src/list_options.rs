//! The version options of a list or watch — `resourceVersion`, `resourceVersionMatch`,
//! `sendInitialEvents`, `continue` — defaulted and validated as the API server's
//! `ListResource` handler does before storage sees them (`handlers/get.go`):
//! `SetListOptionsDefaults` with the `WatchList` gate on (its default in 1.35), then
//! `ValidateListOptions` (`apis/meta/internalversion/validation`). An invalid set is a 422
//! `ListOptions.meta.k8s.io "" is invalid: ...` naming the field.
//!
//! What the options then mean is the caller's: `watch.rs` sends the initial state as `ADDED`
//! events when `sendInitialEvents` is true (the defaulted legacy watch of `resourceVersion`
//! unset or `"0"` included), and from "now" without them when it is false; `objects.rs` serves a
//! list's `resourceVersionMatch`.

use podvisor_api::ValidationErrors;
use podvisor_api::validation::{FieldError, Path};

use crate::request::{Params, flag};
use crate::status::{ApiError, ApiResult};

/// `resourceVersionMatch=NotOlderThan`.
pub(crate) const NOT_OLDER_THAN: &str = "NotOlderThan";
/// `resourceVersionMatch=Exact`.
pub(crate) const EXACT: &str = "Exact";

/// The version options of one request, defaulted and valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListOptions {
    /// `resourceVersionMatch`, empty when unset.
    pub version_match: String,
    /// `sendInitialEvents` (a watch's only; set on a legacy watch by the defaulting).
    pub send_initial_events: Option<bool>,
}

impl ListOptions {
    /// The options of a request whose `watch` parameter is `watch`: defaulted, then validated.
    pub(crate) fn from_params(params: &Params, watch: bool) -> ApiResult<ListOptions> {
        let send_initial_events = params.send_initial_events.as_ref().map(|v| flag(Some(v)));
        let opts = defaulted(
            watch,
            params.resource_version.as_deref().unwrap_or(""),
            params.resource_version_match.as_deref().unwrap_or(""),
            send_initial_events,
        );
        let errors = validate(
            watch,
            params.resource_version.as_deref().unwrap_or(""),
            params.continue_token.as_deref().unwrap_or(""),
            &opts,
        );
        if errors.is_empty() {
            return Ok(opts);
        }
        let mut err = ApiError::invalid(&ValidationErrors::new("ListOptions", "", errors));
        // errors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, ...).
        err.message = err
            .message
            .replacen("ListOptions", "ListOptions.meta.k8s.io", 1);
        if let Some(details) = err.details.as_mut() {
            details["group"] = "meta.k8s.io".into();
        }
        Err(err)
    }
}

/// `SetListOptionsDefaults` with the `WatchList` gate on: a watch of `resourceVersion` unset or
/// `"0"` that names neither `sendInitialEvents` nor `resourceVersionMatch` is a streaming
/// one, `sendInitialEvents=true` and `NotOlderThan`.
fn defaulted(
    watch: bool,
    resource_version: &str,
    version_match: &str,
    send_initial_events: Option<bool>,
) -> ListOptions {
    let legacy = resource_version.is_empty() || resource_version == "0";
    if watch && legacy && send_initial_events.is_none() && version_match.is_empty() {
        return ListOptions {
            version_match: NOT_OLDER_THAN.to_owned(),
            send_initial_events: Some(true),
        };
    }
    ListOptions {
        version_match: version_match.to_owned(),
        send_initial_events,
    }
}

/// `ValidateListOptions` with the `WatchList` gate on, every error in upstream's order.
fn validate(
    watch: bool,
    resource_version: &str,
    continue_token: &str,
    opts: &ListOptions,
) -> Vec<FieldError> {
    let rvm = Path::new("resourceVersionMatch");
    let matched = opts.version_match.as_str();
    let mut errs = Vec::new();
    if watch {
        if opts.send_initial_events.is_some() && matched != NOT_OLDER_THAN {
            errs.push(FieldError::forbidden(
                &rvm,
                format!(
                    "sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"
                ),
            ));
        }
        if !matched.is_empty() {
            if opts.send_initial_events.is_none() {
                errs.push(FieldError::forbidden(
                    &rvm,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if matched != NOT_OLDER_THAN {
                errs.push(FieldError::not_supported(&rvm, matched, &[NOT_OLDER_THAN]));
            }
            if !continue_token.is_empty() {
                errs.push(FieldError::forbidden(
                    &rvm,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        return errs;
    }
    if !matched.is_empty() {
        if resource_version.is_empty() {
            errs.push(FieldError::forbidden(
                &rvm,
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !continue_token.is_empty() {
            errs.push(FieldError::forbidden(
                &rvm,
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if matched != EXACT && matched != NOT_OLDER_THAN {
            errs.push(FieldError::not_supported(
                &rvm,
                matched,
                &[EXACT, NOT_OLDER_THAN, ""],
            ));
        }
        if matched == EXACT && resource_version == "0" {
            errs.push(FieldError::forbidden(
                &rvm,
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if opts.send_initial_events.is_some() {
        errs.push(FieldError::forbidden(
            &Path::new("sendInitialEvents"),
            "sendInitialEvents is forbidden for list",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defaulted and validated, the errors as the API server words them.
    fn errors(watch: bool, rv: &str, matched: &str, send: Option<bool>, cont: &str) -> Vec<String> {
        let opts = defaulted(watch, rv, matched, send);
        validate(watch, rv, cont, &opts)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_legacy_watch_is_defaulted_to_a_streaming_one() {
        for rv in ["", "0"] {
            assert_eq!(
                defaulted(true, rv, "", None),
                ListOptions {
                    version_match: "NotOlderThan".into(),
                    send_initial_events: Some(true)
                }
            );
        }
        // Not a legacy watch, a list, or options already named: left as they are.
        assert_eq!(defaulted(true, "12", "", None).send_initial_events, None);
        assert_eq!(defaulted(false, "", "", None).send_initial_events, None);
        assert_eq!(
            defaulted(true, "0", "NotOlderThan", Some(false)).send_initial_events,
            Some(false)
        );
    }

    /// `TestValidateListOptions`' watch rows (WatchList on).
    #[test]
    fn watch_options_follow_validate_watch_options() {
        assert!(errors(true, "", "", None, "").is_empty());
        assert!(errors(true, "12", "", None, "").is_empty());
        assert!(errors(true, "", "NotOlderThan", Some(true), "").is_empty());
        assert!(errors(true, "", "NotOlderThan", Some(false), "").is_empty());
        assert_eq!(
            errors(true, "12", "NotOlderThan", None, ""),
            [
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
            ]
        );
        assert_eq!(
            errors(true, "12", "", Some(true), ""),
            [
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            ]
        );
        assert_eq!(
            errors(true, "12", "Exact", Some(true), ""),
            [
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                "resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"",
            ]
        );
        assert_eq!(
            errors(true, "12", "NotOlderThan", Some(true), "abc"),
            [
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"
            ]
        );
    }

    #[test]
    fn list_options_follow_validate_list_options() {
        assert!(errors(false, "0", "NotOlderThan", None, "").is_empty());
        assert!(errors(false, "12", "Exact", None, "").is_empty());
        assert_eq!(
            errors(false, "", "NotOlderThan", None, ""),
            [
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
            ]
        );
        assert_eq!(
            errors(false, "12", "Exact", None, "abc"),
            [
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"
            ]
        );
        assert_eq!(
            errors(false, "12", "Newest", None, ""),
            [
                "resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\""
            ]
        );
        assert_eq!(
            errors(false, "0", "Exact", None, ""),
            [
                "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
            ]
        );
        assert_eq!(
            errors(false, "", "", Some(true), ""),
            ["sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"]
        );
    }
}
