//! Filesystem-path checks used by volume mounts and volume sources.

use super::field::{FieldError, Path};

/// No `..` element (`validatePathNoBacksteps`); one error is enough.
pub(crate) fn validate_no_backsteps(target: &str, path: &Path) -> Vec<FieldError> {
    if target.split('/').any(|p| p == "..") {
        vec![FieldError::invalid(path, target, "must not contain '..'")]
    } else {
        Vec::new()
    }
}

/// Relative and without `..` (`validateLocalDescendingPath`).
pub(crate) fn validate_local_descending_path(target: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if target.starts_with('/') {
        errs.push(FieldError::invalid(path, target, "must be a relative path"));
    }
    errs.extend(validate_no_backsteps(target, path));
    errs
}

/// Relative, without `..`, not starting with `..` (`ValidateLocalNonReservedPath`).
pub(crate) fn validate_local_non_reserved_path(target: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = validate_local_descending_path(target, path);
    if target.starts_with("..") && !target.starts_with("../") {
        errs.push(FieldError::invalid(
            path,
            target,
            "must not start with '..'",
        ));
    }
    errs
}
