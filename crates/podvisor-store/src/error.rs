//! The store's errors.

use crate::key::Key;

/// A `Result` with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What can go wrong in the store.
///
/// The messages of `NotFound`, `AlreadyExists`, `Conflict` and `Gone` are the Kubernetes API
/// server's, so the API layer can put them into a `Status` unchanged.
#[derive(Debug, Clone, thiserror::Error)]
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
    /// The store file is another user's (refused before it is opened or narrowed).
    #[error(transparent)]
    NotOwned(#[from] crate::NotOwned),
    /// The database failed (an undecodable stored value, a schema it does not know).
    #[error("database: {0}")]
    Db(String),
    /// Reading or writing the database file failed (`No space left on device`, an I/O
    /// error). The database library refuses every later transaction after one, so the store
    /// closes the file and opens it again by itself (see [`crate::Store`]); until that
    /// succeeds, reads and writes fail with this error, naming the first failure.
    #[error(
        "the store {p} failed {context}: {cause}; it reopens itself once the cause is gone{hint}",
        p = .path.display(),
        hint = if *.no_space { " (free space on its filesystem)" } else { "" }
    )]
    Io {
        /// The database file.
        path: std::path::PathBuf,
        /// What was being done (`committing a write`).
        context: &'static str,
        /// The operating system's error.
        cause: String,
        /// The filesystem is full (`ENOSPC`, `EDQUOT`).
        no_space: bool,
    },
    /// The database file is damaged (truncated, overwritten, extended): it cannot be opened.
    #[error(
        "the store {p} is damaged ({detail}): restore it from a backup, or move it aside \
         (mv {p} {p}.damaged) to start with an empty store (every pod it held is forgotten)",
        p = .path.display()
    )]
    Damaged {
        /// The database file.
        path: std::path::PathBuf,
        /// What the database library said.
        detail: String,
    },
    /// The database file exists and is empty (zero bytes): not a store this podvisor wrote,
    /// so it is not silently taken for a new one.
    #[error(
        "the store {} is an empty file (0 bytes), not a database: restore it from a backup, \
         or remove it to start with an empty store (every pod it held is forgotten)",
        .path.display()
    )]
    EmptyFile {
        /// The database file.
        path: std::path::PathBuf,
    },
}

/// The `cause` of a [`StoreError::Io`] made of the library's "a previous I/O error occurred"
/// before the store knew the first one.
pub(crate) const EARLIER_IO: &str = "an earlier I/O error closed the database";

/// Wraps a database error with what was being done, for `map_err`: an I/O failure (or the
/// library's refusal after one) is [`StoreError::Io`], whose path the store fills in.
pub(crate) fn db<E: Into<redb::Error>>(context: &'static str) -> impl FnOnce(E) -> StoreError {
    move |e| match e.into() {
        redb::Error::Io(io) => StoreError::Io {
            path: std::path::PathBuf::new(),
            context,
            no_space: matches!(
                io.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ),
            cause: io.to_string(),
        },
        redb::Error::PreviousIo | redb::Error::DatabaseClosed => StoreError::Io {
            path: std::path::PathBuf::new(),
            context,
            no_space: false,
            cause: EARLIER_IO.to_owned(),
        },
        e => StoreError::Db(format!("{context}: {e}")),
    }
}
