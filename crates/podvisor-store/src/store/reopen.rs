//! The store after an I/O failure (a full disk): redb refuses every transaction after one
//! ("Previous I/O error occurred. Please close and re-open the database"), so the store
//! remembers the first failure, answers it, and closes and opens its file again once that can
//! work, at most every [`crate::StoreOptions::reopen_interval`], proving the reopened file takes a
//! write before it clears the failure.

use super::{META, Store, guarded, init, open_database};
use crate::error::{EARLIER_IO, Result, StoreError, db};
use crate::watch::Hub;
use redb::{Database, Durability, ReadableTable};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::Instant;
use tracing::{debug, warn as warning};

/// A counter written to prove the file takes writes again after an I/O failure.
const PROBE_KEY: &str = "writeProbe";

/// The store's state after an I/O failure: the database library refuses every transaction
/// after one ("Previous I/O error occurred. Please close and re-open the database"), so the
/// store closes the file and opens it again, at most every [`StoreOptions::reopen_interval`].
pub(super) struct Failure {
    /// The first failure, what every operation answers until the store is reopened.
    pub(super) error: StoreError,
    /// The last reopen attempt (or the failure itself).
    pub(super) attempted: Instant,
}

impl Store {
    /// Whether the store can write now: `Ok` unless an I/O failure (a full disk) left it
    /// unable to, in which case it first tries to reopen the file and write a probe
    /// (at most every `StoreOptions::reopen_interval`); the error names the failure. The
    /// API server's `/readyz` asks this. Costs nothing while the store is healthy.
    pub fn check_writable(&self) -> Result<()> {
        if self.failure().is_none() {
            return Ok(());
        }
        let mut hub = self.lock();
        self.writer(&mut hub).map(drop)
    }

    /// The failure that keeps the store from writing, if any (no IO, no reopen attempt).
    pub fn failure(&self) -> Option<StoreError> {
        self.failure_lock().as_ref().map(|f| f.error.clone())
    }

    pub(super) fn failure_lock(&self) -> MutexGuard<'_, Option<Failure>> {
        self.shared
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one operation on the database, recording an I/O failure it met (the first one
    /// is what later operations report until the store is reopened).
    pub(super) fn checked<T>(&self, op: impl FnOnce() -> Result<T>) -> Result<T> {
        op().map_err(|e| self.note(e))
    }

    pub(super) fn note(&self, e: StoreError) -> StoreError {
        let StoreError::Io {
            context,
            cause,
            no_space,
            ..
        } = e
        else {
            return e;
        };
        let mut failure = self.failure_lock();
        if let Some(f) = failure.as_ref()
            && cause == EARLIER_IO
        {
            return f.error.clone();
        }
        let error = StoreError::Io {
            path: self.shared.path.clone(),
            context,
            cause,
            no_space,
        };
        if failure.is_none() {
            warning!(store = %self.shared.path.display(), error = %error, "the store cannot read or write; it will reopen its file");
            *failure = Some(Failure {
                error: error.clone(),
                attempted: Instant::now(),
            });
        }
        error
    }

    /// The database for a read: after an I/O failure, reopened first if a reopen is due and
    /// no write holds the writer lock (a read under it, in an `update_with` closure or a
    /// watch's list, must not wait for itself).
    pub(super) fn reader(&self) -> Result<Arc<Database>> {
        if self
            .failure_lock()
            .as_ref()
            .is_some_and(|f| f.attempted.elapsed() >= self.shared.options.reopen_interval)
        {
            let hub = match self.shared.writer.try_lock() {
                Ok(hub) => Some(hub),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            if let Some(mut hub) = hub {
                return self.writer(&mut hub);
            }
        }
        self.current()
    }

    pub(super) fn current(&self) -> Result<Arc<Database>> {
        let db = self
            .shared
            .db
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        match db.as_ref() {
            Some(db) => Ok(Arc::clone(db)),
            None => Err(self
                .failure()
                .unwrap_or_else(|| StoreError::Db("the database is closed".to_owned()))),
        }
    }

    /// The database for a write, under the writer lock (`_hub` proves it is held): after an
    /// I/O failure, the file is closed and opened again (with the library's recovery) and a
    /// probe is written; the failure is cleared once that succeeds. While a reopen is not
    /// due, or fails, the error is the first failure's.
    pub(super) fn writer(&self, _hub: &mut Hub) -> Result<Arc<Database>> {
        let mut failure = self.failure_lock();
        let Some(f) = failure.as_mut() else {
            drop(failure);
            return self.current();
        };
        if f.attempted.elapsed() < self.shared.options.reopen_interval {
            return Err(f.error.clone());
        }
        f.attempted = Instant::now();
        // A full filesystem would fail the reopen (the library's recovery writes) and leave
        // no handle at all; the failed one still answers reads from its cache meanwhile.
        if matches!(f.error, StoreError::Io { no_space: true, .. }) && !has_room(&self.shared.path)
        {
            return Err(f.error.clone());
        }
        // The old handle goes first: the library holds a lock on the file while it is open
        // (a reader still holding a clone makes this attempt fail; the next one succeeds).
        *self
            .shared
            .db
            .write()
            .unwrap_or_else(PoisonError::into_inner) = None;
        let path = &self.shared.path;
        let reopened = open_database(path, false, self.shared.options.cache_bytes)
            .and_then(|database| guarded(path, || init(&database)).map(|rv| (database, rv)))
            .and_then(|(database, rv)| {
                probe(&database)?;
                Ok((database, rv))
            });
        match reopened {
            Ok((database, rv)) => {
                let database = Arc::new(database);
                *self
                    .shared
                    .db
                    .write()
                    .unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&database));
                let was = failure.take().map(|f| f.error);
                // A commit whose fsync failed may still have reached the file.
                self.shared.rv.fetch_max(rv, Ordering::AcqRel);
                warning!(store = %path.display(), after = ?was.map(|e| e.to_string()), "the store was reopened and writes again");
                Ok(database)
            }
            Err(e) => {
                debug!(store = %path.display(), error = %e, "reopening the store failed; it will try again");
                Err(f.error.clone())
            }
        }
    }
}

/// Room for the reopen after a full disk: at least [`REOPEN_ROOM`] available on the file's
/// filesystem (unknown counts as room).
fn has_room(path: &Path) -> bool {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    rustix::fs::statvfs(dir).map_or(true, |s| s.f_bavail * s.f_frsize >= REOPEN_ROOM)
}

/// What a reopen after `ENOSPC` waits for: the recovery rewrites a few pages and the probe
/// commits one transaction.
const REOPEN_ROOM: u64 = 1 << 20;

/// Writes the store's probe (a counter in `meta`, no resourceVersion) and commits it with an
/// fsync: the proof that a reopened file takes writes again.
pub(super) fn probe(database: &Database) -> Result<()> {
    let mut txn = database.begin_write().map_err(db("beginning a write"))?;
    txn.set_durability(Durability::Immediate)
        .map_err(db("setting durability"))?;
    {
        let mut meta = txn.open_table(META).map_err(db("opening meta"))?;
        let n = meta
            .get(PROBE_KEY)
            .map_err(db("reading the write probe"))?
            .map_or(0, |v| v.value());
        meta.insert(PROBE_KEY, n.wrapping_add(1))
            .map_err(db("writing the write probe"))?;
    }
    txn.commit().map_err(db("committing the write probe"))
}
