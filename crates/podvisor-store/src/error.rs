//! The store's errors.

use crate::key::Key;

/// A `Result` with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What can go wrong in the store.
///
/// The messages of `NotFound`, `AlreadyExists`, `Conflict` and `Gone` are the Kubernetes API
/// server's, so the API layer can put them into a `Status` unchanged.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No object has this key (404).
    #[error("{} \"{}\" not found", .0.kind, .0.name)]
    NotFound(Key),
    /// `create` found an object with this key (409, reason AlreadyExists).
    #[error("{} \"{}\" already exists", .0.kind, .0.name)]
    AlreadyExists(Key),
    /// A precondition (uid or resourceVersion) did not hold (409, reason Conflict).
    #[error("Operation cannot be fulfilled on {} \"{}\": {message}", .key.kind, .key.name)]
    Conflict {
        /// The object's key.
        key: Key,
        /// Why, as the Kubernetes API server words it.
        message: String,
    },
    /// A watch asked for a resourceVersion the store no longer (or not yet) has history for
    /// (410); the client must list again.
    #[error("too old resource version: {requested} ({oldest})")]
    Gone {
        /// The resourceVersion the watch asked to start after.
        requested: u64,
        /// The oldest resourceVersion a watch can currently start after.
        oldest: u64,
    },
    /// The request cannot be stored: a malformed key or an object that is not a JSON object or
    /// whose metadata disagrees with its key.
    #[error("invalid: {0}")]
    Invalid(String),
    /// The database failed (IO, corruption, an undecodable stored value).
    #[error("database: {0}")]
    Db(String),
}

/// Wraps a database error with what was being done, for `map_err`.
pub(crate) fn db<E: std::fmt::Display>(context: &'static str) -> impl FnOnce(E) -> StoreError {
    move |e| StoreError::Db(format!("{context}: {e}"))
}
