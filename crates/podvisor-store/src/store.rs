//! [`Store`]: objects in redb, the resourceVersion counter, and watch registration.

use crate::error::{Result, StoreError, db};
use crate::key::{self, Key};
use crate::object;
mod reopen;

use crate::watch::{Bounds, EventType, Hub, Owed, Record, Watch, WatchEvent, WatchFrom};
use redb::{
    Database, DatabaseError, Durability, ReadableDatabase, ReadableTable, StorageError,
    TableDefinition,
};
use reopen::Failure;
use serde_json::Value;
use std::collections::VecDeque;
use std::fmt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

/// Objects by encoded key (`kind/namespace/name`), as JSON bytes.
const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
/// Store-wide counters.
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// The latest committed resourceVersion.
const RV_KEY: &str = "resourceVersion";
/// The layout version of the tables above.
const SCHEMA_KEY: &str = "schema";
const SCHEMA: u64 = 1;

/// Tuning for [`Store::open_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// How many recent events are kept in memory for [`WatchFrom::After`]; older versions are
    /// [`StoreError::Gone`]. Default 10 000.
    pub history: usize,
    /// At most this many bytes of JSON are kept in that history (the oldest events go first;
    /// the newest always stays). Default 16 MiB.
    pub history_bytes: usize,
    /// How many events a watcher may fall behind before it is closed. Default 1024.
    pub watch_buffer: usize,
    /// How many bytes of JSON a watcher may hold unread before it is closed (one event always
    /// fits): a watcher behind on large objects is closed before its 1024 events are 1024 of
    /// them. Default 16 MiB.
    pub watch_buffer_bytes: usize,
    /// The database's page cache. Default 32 MiB (the library's own default is 1 GiB, which
    /// a long run with many events fills).
    pub cache_bytes: usize,
    /// Take an existing zero-length file for a new, empty store. Default `false`: such a file
    /// is [`StoreError::EmptyFile`] (a store truncated to nothing must not silently forget
    /// every pod it held).
    pub reset_empty: bool,
    /// After an I/O failure (a full disk), the store tries to reopen its file at most this
    /// often, on the next read, write or [`Store::check_writable`]. Default 1 s.
    pub reopen_interval: Duration,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            history: 10_000,
            history_bytes: 16 << 20,
            watch_buffer: 1024,
            watch_buffer_bytes: 16 << 20,
            cache_bytes: 32 << 20,
            reset_empty: false,
            reopen_interval: Duration::from_secs(1),
        }
    }
}

/// Preconditions for [`Store::update`] and [`Store::delete`]; `None` (or an empty string)
/// means no condition.
#[derive(Default, Clone, Debug)]
pub struct Preconditions {
    /// The object's `metadata.uid` must be this.
    pub uid: Option<String>,
    /// The object's `metadata.resourceVersion` must be this.
    pub resource_version: Option<String>,
}

/// The object store: a redb file, one resourceVersion counter, and watch streams.
///
/// Cheap to clone (an `Arc` inside); every clone is the same store. One process may open a
/// database file once at a time.
///
/// All methods are synchronous. Reads take a redb snapshot and never wait for writers. Writes
/// are serialized and each returns only after its transaction has been committed and fsynced,
/// so a write blocks its thread for about one fsync (see the crate docs for numbers); calling
/// them from async code costs a worker thread that long, or use `tokio::task::spawn_blocking`
/// with a clone.
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
}

struct Shared {
    /// The open database; `None` while a reopen after an I/O failure has not succeeded.
    /// Readers clone the `Arc` and use it without a lock; a reopen swaps it under the
    /// writer lock.
    db: RwLock<Option<Arc<Database>>>,
    /// Set by an I/O failure, cleared by the reopen that follows it (see [`Failure`]).
    failure: Mutex<Option<Failure>>,
    options: StoreOptions,
    path: PathBuf,
    /// Held for the whole of each write (read, commit, publish) and while a watcher registers,
    /// which is what makes list + watch exact.
    writer: Mutex<Hub>,
    /// The latest committed and published resourceVersion.
    rv: AtomicU64,
}

/// What a write decided to do, given the current object.
enum Outcome {
    /// Nothing changes; return this object and consume no resourceVersion.
    Unchanged(Value),
    /// Store this object (with the new resourceVersion already set).
    Put(EventType, Value),
    /// Remove the object; this is its last state, with the new resourceVersion set.
    Delete(Value),
}

/// Which operation a precondition guards: Kubernetes words their conflicts differently.
#[derive(Clone, Copy)]
enum Op {
    Update,
    Delete,
}

impl Store {
    /// Opens (creating if needed, with its parent directories) the database at `path` with
    /// default options. A fresh database gets the namespaces `default` and `kube-system`.
    pub fn open(path: &Path) -> Result<Store> {
        Store::open_with(path, StoreOptions::default())
    }

    /// [`Store::open`] with explicit options.
    pub fn open_with(path: &Path, options: StoreOptions) -> Result<Store> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                StoreError::Db(format!("creating directory {}: {e}", parent.display()))
            })?;
        }
        let database = open_database(path, options.reset_empty, options.cache_bytes)?;
        let rv = guarded(path, || init(&database))?;
        Ok(Store {
            shared: Arc::new(Shared {
                db: RwLock::new(Some(Arc::new(database))),
                failure: Mutex::new(None),
                options,
                path: path.to_path_buf(),
                writer: Mutex::new(Hub::new(
                    rv,
                    Bounds {
                        history: options.history,
                        history_bytes: options.history_bytes,
                        buffer: options.watch_buffer,
                        buffer_bytes: options.watch_buffer_bytes,
                    },
                )),
                rv: AtomicU64::new(rv),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The latest committed resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.rv.load(Ordering::Acquire)
    }

    /// The oldest resourceVersion a [`WatchFrom::After`] can currently start from; older ones
    /// are [`StoreError::Gone`].
    pub fn oldest_watchable(&self) -> u64 {
        self.lock().history_start()
    }

    /// How many events, and how many bytes of JSON, the watch history holds now (bounded by
    /// [`StoreOptions::history`] and [`StoreOptions::history_bytes`]).
    pub fn history_size(&self) -> (usize, usize) {
        self.lock().history_size()
    }

    /// How many watchers are registered (closed ones are pruned on the next write).
    pub fn watcher_count(&self) -> usize {
        self.lock().watchers()
    }

    /// The object at `key`, if any.
    pub fn get(&self, key: &Key) -> Result<Option<Value>> {
        key.validate()?;
        self.checked(|| {
            let txn = self
                .reader()?
                .begin_read()
                .map_err(db("beginning a read"))?;
            let table = txn.open_table(OBJECTS).map_err(db("opening objects"))?;
            let found = table
                .get(key.encode().as_str())
                .map_err(db("reading an object"))?;
            found.map(|v| decode(key, v.value())).transpose()
        })
    }

    /// Every object of `kind` (in `namespace`, if given), sorted by (namespace, name), and the
    /// resourceVersion of the snapshot they were read from. A watch from
    /// [`WatchFrom::After`] that version continues exactly where this list ends.
    pub fn list(&self, kind: &str, namespace: Option<&str>) -> Result<(Vec<Value>, u64)> {
        let (mut items, rv) = self.list_filtered(kind, namespace, |_| true)?;
        // Keys sort as strings, where "a-b/" comes before "a/"; the API wants tuple order.
        let name_of = |obj: &Value, field: &str| {
            obj.pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        items.sort_by_cached_key(|obj| (name_of(obj, "namespace"), name_of(obj, "name")));
        Ok((items, rv))
    }

    /// Like [`Store::list`], but keeps only the objects `keep` accepts, deciding as it reads
    /// (in key order, not sorted): a scan of many objects holds one decoded object at a
    /// time plus what is kept, not all of them.
    pub fn list_filtered(
        &self,
        kind: &str,
        namespace: Option<&str>,
        mut keep: impl FnMut(&Value) -> bool,
    ) -> Result<(Vec<Value>, u64)> {
        check_filter(kind, namespace)?;
        self.checked(|| self.list_snapshot(kind, namespace, &mut keep))
    }

    fn list_snapshot(
        &self,
        kind: &str,
        namespace: Option<&str>,
        keep: &mut impl FnMut(&Value) -> bool,
    ) -> Result<(Vec<Value>, u64)> {
        let txn = self
            .reader()?
            .begin_read()
            .map_err(db("beginning a read"))?;
        let meta = txn.open_table(META).map_err(db("opening meta"))?;
        let rv = meta
            .get(RV_KEY)
            .map_err(db("reading the resourceVersion"))?
            .map_or(0, |v| v.value());
        let table = txn.open_table(OBJECTS).map_err(db("opening objects"))?;
        let (start, end) = key::prefix_range(kind, namespace);
        let mut items = Vec::new();
        for entry in table
            .range(start.as_str()..end.as_str())
            .map_err(db("listing objects"))?
        {
            let (k, v) = entry.map_err(db("listing objects"))?;
            let key = Key::decode(k.value())
                .ok_or_else(|| StoreError::Db(format!("malformed key {:?}", k.value())))?;
            let obj = decode(&key, v.value())?;
            if keep(&obj) {
                items.push(obj);
            }
        }
        Ok((items, rv))
    }

    /// Stores a new object, setting `metadata.resourceVersion` to the new resourceVersion.
    /// [`StoreError::AlreadyExists`] if `key` is taken.
    pub fn create(&self, key: &Key, obj: Value) -> Result<Value> {
        self.transaction(|t| t.create(key, obj))
    }

    /// Replaces an object, setting `metadata.resourceVersion` to the new resourceVersion.
    /// [`StoreError::NotFound`], or [`StoreError::Conflict`] when a precondition fails.
    ///
    /// As in Kubernetes, an update that changes nothing (apart from `resourceVersion`) writes
    /// nothing: it returns the stored object, consumes no resourceVersion and sends no event.
    /// An update that leaves no finalizer on an object whose deletion is due (a
    /// `deletionTimestamp` with no or a zero grace period) removes it: the `Deleted` event
    /// carries the updated object.
    pub fn update(&self, key: &Key, obj: Value, precondition: Preconditions) -> Result<Value> {
        self.transaction(|t| t.update(key, obj, precondition))
    }

    /// Atomically replaces an object with `f(current)`, in one write transaction (no other
    /// write can come between the read and the write). An `Err` from `f` is returned and
    /// nothing is written; an unchanged result writes nothing, as in [`Store::update`].
    /// [`StoreError::NotFound`] if there is no object.
    ///
    /// `f` runs under the store's writer lock: it must not call the store's write methods or
    /// [`Store::watch`] (that would deadlock); reads are fine.
    pub fn update_with<F>(&self, key: &Key, f: F) -> Result<Value>
    where
        F: FnOnce(Value) -> Result<Value>,
    {
        self.transaction(|t| t.update_with(key, f))
    }

    /// Removes an object and returns its last state with the deletion's resourceVersion in
    /// `metadata.resourceVersion` (the object the `Deleted` event carries).
    /// [`StoreError::NotFound`], or [`StoreError::Conflict`] when a precondition fails.
    ///
    /// As the API server's store does, an object with `metadata.finalizers` is only marked:
    /// it gets a `deletionTimestamp` (now, unless it has one) and `deletionGracePeriodSeconds:
    /// 0`, and stays until an update removes its last finalizer (see [`Store::update`]).
    /// Marking an already marked object changes nothing.
    pub fn delete(&self, key: &Key, precondition: Preconditions) -> Result<Value> {
        self.transaction(|t| t.delete(key, precondition))
    }

    /// Watches the objects of `kind` (in `namespace`, if given) from `since`.
    ///
    /// Events arrive in resourceVersion order, each exactly once. [`StoreError::Gone`] when
    /// `since` is [`WatchFrom::After`] a version older than [`Store::oldest_watchable`] (the
    /// history holds the last [`StoreOptions::history`] events and starts empty when the store
    /// is opened): the client must list again. A version newer than
    /// [`Store::resource_version`] is waited for (the first event is the first write after
    /// it), as the API server's watch cache does. See [`Watch`] for when a stream ends.
    pub fn watch(&self, kind: &str, namespace: Option<&str>, since: WatchFrom) -> Result<Watch> {
        check_filter(kind, namespace)?;
        match since {
            WatchFrom::Now => {
                let mut hub = self.lock();
                let rv = self.resource_version();
                Ok(hub.subscribe(kind, namespace, rv, VecDeque::new()))
            }
            WatchFrom::After(requested) => {
                let mut hub = self.lock();
                let oldest = hub.history_start();
                // A version the store has not reached yet is waited for, as the API server's
                // watch cache does: the watch sends what comes after it.
                if requested < oldest {
                    return Err(StoreError::Gone { requested, oldest });
                }
                Ok(hub.subscribe(kind, namespace, requested, VecDeque::new()))
            }
            WatchFrom::Any => {
                // List without the lock so writers keep going; the history bridges the gap
                // unless more than `history` writes happened meanwhile, in which case list
                // again under the lock.
                let (objects, rv) = self.list(kind, namespace)?;
                let mut hub = self.lock();
                if rv >= hub.history_start() {
                    return Ok(hub.subscribe(kind, namespace, rv, added(objects, rv)));
                }
                let (objects, rv) = self.list(kind, namespace)?;
                Ok(hub.subscribe(kind, namespace, rv, added(objects, rv)))
            }
        }
    }

    /// The writer lock. A panic while it was held (only possible in an `update_with` closure,
    /// before anything was committed) leaves the hub consistent, so poisoning is ignored.
    fn lock(&self) -> MutexGuard<'_, Hub> {
        self.shared
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Several writes in one transaction, committed with one fsync: `f` makes them through
    /// the [`Txn`], each taking the next resourceVersion and giving its own watch event, as
    /// separate writes would. They are published together once committed. When `f` returns
    /// `Err`, or a write failed in the database, none of them is committed; a write that
    /// `f` saw refused (a precondition, a missing object) wrote nothing, and the others are
    /// committed. A transaction that wrote nothing commits nothing.
    ///
    /// `f` runs under the store's writer lock: it must not call the store's write methods or
    /// [`Store::watch`] (that would deadlock); reads are fine, and see what it wrote only
    /// through [`Txn::get`].
    pub fn transaction<T>(&self, f: impl FnOnce(&mut Txn) -> Result<T>) -> Result<T> {
        let mut hub = self.lock();
        let database = self.writer(&mut hub)?;
        self.checked(|| Store::commit(&database, &mut hub, &self.shared.rv, f))
    }

    /// [`Store::transaction`] on `database`, under the writer lock.
    fn commit<T>(
        database: &Database,
        hub: &mut Hub,
        shared_rv: &AtomicU64,
        f: impl FnOnce(&mut Txn) -> Result<T>,
    ) -> Result<T> {
        let mut txn = database.begin_write().map_err(db("beginning a write"))?;
        txn.set_durability(Durability::Immediate)
            .map_err(db("setting durability"))?;
        let rv = txn
            .open_table(META)
            .map_err(db("opening meta"))?
            .get(RV_KEY)
            .map_err(db("reading the resourceVersion"))?
            .map_or(0, |v| v.value());
        let mut t = Txn {
            txn,
            rv,
            written: Vec::new(),
            failed: None,
        };
        let result = f(&mut t);
        let Txn {
            txn,
            rv,
            written,
            failed,
        } = t;
        let value = match (result, failed) {
            (Ok(value), None) if !written.is_empty() => value,
            (Ok(value), None) => {
                txn.abort().map_err(db("aborting a write"))?;
                return Ok(value);
            }
            (Err(e), _) | (Ok(_), Some(e)) => {
                txn.abort().map_err(db("aborting a write"))?;
                return Err(e);
            }
        };
        txn.open_table(META)
            .map_err(db("opening meta"))?
            .insert(RV_KEY, rv)
            .map_err(db("writing the resourceVersion"))?;
        txn.commit().map_err(db("committing a write"))?;
        shared_rv.store(rv, Ordering::Release);
        for record in written {
            hub.publish(record);
        }
        Ok(value)
    }
}

/// The writes of one [`Store::transaction`]: the store's write methods, each with the same
/// rules as [`Store`]'s of the same name, and reads that see them.
pub struct Txn {
    txn: redb::WriteTransaction,
    /// The resourceVersion of the latest write (the store's, before the first).
    rv: u64,
    /// What each write publishes once the transaction is committed, in order.
    written: Vec<Record>,
    /// A failure of the database itself: the transaction cannot be committed.
    failed: Option<StoreError>,
}

impl Txn {
    /// The object at `key` as this transaction leaves it so far, if any.
    pub fn get(&self, key: &Key) -> Result<Option<Value>> {
        key.validate()?;
        let table = self
            .txn
            .open_table(OBJECTS)
            .map_err(db("opening objects"))?;
        let found = table
            .get(key.encode().as_str())
            .map_err(db("reading an object"))?;
        found.map(|v| decode(key, v.value())).transpose()
    }

    /// Every object of `kind` (in `namespace`, if given) as this transaction leaves it so
    /// far, in key order: what a decision taken in the transaction must see (the scheduler
    /// counts the pods bound to a node in the same transaction as its binding).
    pub fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Value>> {
        check_filter(kind, namespace)?;
        let table = self
            .txn
            .open_table(OBJECTS)
            .map_err(db("opening objects"))?;
        let (start, end) = key::prefix_range(kind, namespace);
        let mut items = Vec::new();
        for entry in table
            .range(start.as_str()..end.as_str())
            .map_err(db("listing objects"))?
        {
            let (k, v) = entry.map_err(db("listing objects"))?;
            let key = Key::decode(k.value())
                .ok_or_else(|| StoreError::Db(format!("malformed key {:?}", k.value())))?;
            items.push(decode(&key, v.value())?);
        }
        Ok(items)
    }

    /// [`Store::create`] in this transaction.
    pub fn create(&mut self, key: &Key, mut obj: Value) -> Result<Value> {
        object::check(key, &obj)?;
        self.write(key, |current, rv| {
            if current.is_some() {
                return Err(StoreError::AlreadyExists(key.clone()));
            }
            object::set_resource_version(&mut obj, rv);
            Ok(Outcome::Put(EventType::Added, obj))
        })
    }

    /// [`Store::update`] in this transaction.
    pub fn update(&mut self, key: &Key, obj: Value, precondition: Preconditions) -> Result<Value> {
        object::check(key, &obj)?;
        self.write(key, |current, rv| {
            let current = current.ok_or_else(|| StoreError::NotFound(key.clone()))?;
            check_preconditions(key, &current, &precondition, Op::Update)?;
            Ok(modified(current, obj, rv))
        })
    }

    /// [`Store::update_with`] in this transaction.
    pub fn update_with<F>(&mut self, key: &Key, f: F) -> Result<Value>
    where
        F: FnOnce(Value) -> Result<Value>,
    {
        self.write(key, |current, rv| {
            let current = current.ok_or_else(|| StoreError::NotFound(key.clone()))?;
            let obj = f(current.clone())?;
            object::check(key, &obj)?;
            Ok(modified(current, obj, rv))
        })
    }

    /// [`Store::delete`] in this transaction.
    pub fn delete(&mut self, key: &Key, precondition: Preconditions) -> Result<Value> {
        self.write(key, |current, rv| {
            let mut current = current.ok_or_else(|| StoreError::NotFound(key.clone()))?;
            check_preconditions(key, &current, &precondition, Op::Delete)?;
            if object::has_finalizers(&current) {
                let mut marked = current.clone();
                object::mark_deleted(&mut marked);
                return Ok(modified(current, marked, rv));
            }
            object::set_resource_version(&mut current, rv);
            Ok(Outcome::Delete(current))
        })
    }

    /// One write: read the current object, let `decide` choose the outcome given the next
    /// resourceVersion, and put it in the transaction. An `Err` from `decide` writes nothing;
    /// a failure of the database ([`StoreError::Db`], [`StoreError::Io`]) also fails the
    /// transaction.
    fn write(
        &mut self,
        key: &Key,
        decide: impl FnOnce(Option<Value>, &str) -> Result<Outcome>,
    ) -> Result<Value> {
        key.validate()?;
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let written = self.put(key, decide);
        if let Err(e @ (StoreError::Db(_) | StoreError::Io { .. })) = &written {
            self.failed = Some(e.clone());
        }
        written
    }

    fn put(
        &mut self,
        key: &Key,
        decide: impl FnOnce(Option<Value>, &str) -> Result<Outcome>,
    ) -> Result<Value> {
        let encoded = key.encode();
        let mut objects = self
            .txn
            .open_table(OBJECTS)
            .map_err(db("opening objects"))?;
        let previous_json: Option<Arc<[u8]>> = objects
            .get(encoded.as_str())
            .map_err(db("reading an object"))?
            .map(|v| Arc::from(v.value()));
        let current = previous_json
            .as_deref()
            .map(|v| decode(key, v))
            .transpose()?;
        let rv = self.rv + 1;
        let (type_, object) = match decide(current, &rv.to_string())? {
            Outcome::Unchanged(current) => return Ok(current),
            Outcome::Put(type_, obj) => (type_, obj),
            Outcome::Delete(obj) => (EventType::Deleted, obj),
        };
        let json = serde_json::to_vec(&object)
            .map_err(|e| StoreError::Invalid(format!("encoding {key}: {e}")))?;
        if type_ == EventType::Deleted {
            objects
                .remove(encoded.as_str())
                .map_err(db("removing an object"))?;
        } else {
            objects
                .insert(encoded.as_str(), json.as_slice())
                .map_err(db("writing an object"))?;
        }
        self.rv = rv;
        self.written
            .push(Record::new(key.clone(), type_, rv, json, previous_json));
        Ok(object)
    }
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.shared.path)
            .field("resource_version", &self.resource_version())
            .finish_non_exhaustive()
    }
}

/// Opens (or creates) the database file, private to its owner, and checks every page of it:
/// a damaged file is [`StoreError::Damaged`] here rather than a failure (or a panic inside
/// the database library) on some later read.
fn open_database(path: &Path, reset_empty: bool, cache_bytes: usize) -> Result<Database> {
    match std::fs::metadata(path) {
        Ok(m) if m.len() == 0 && !reset_empty => {
            return Err(StoreError::EmptyFile {
                path: path.to_path_buf(),
            });
        }
        Ok(_) => make_private(path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Created here with mode 0600 rather than by redb with the umask's 0644: the store
            // holds every pod spec (environment values included).
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| StoreError::Db(format!("creating {}: {e}", path.display())))?;
        }
        Err(e) => return Err(StoreError::Db(format!("reading {}: {e}", path.display()))),
    }
    let damaged = |detail: String| StoreError::Damaged {
        path: path.to_path_buf(),
        detail: one_line(&detail),
    };
    guarded(path, || {
        let mut database = Database::builder()
            .set_cache_size(cache_bytes)
            .create(path)
            .map_err(|e| match e {
                // A file shorter than its header says is damaged, not an IO failure.
                DatabaseError::Storage(StorageError::Io(io))
                    if !matches!(
                        io.kind(),
                        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData
                    ) =>
                {
                    StoreError::Db(format!("opening {}: {io}", path.display()))
                }
                e @ DatabaseError::DatabaseAlreadyOpen => {
                    StoreError::Db(format!("opening {}: {e}", path.display()))
                }
                e => damaged(e.to_string()),
            })?;
        // Every page's checksum, once per start (a few ms for thousands of objects).
        database
            .check_integrity()
            .map_err(|e| damaged(e.to_string()))?;
        Ok(database)
    })
}

/// Runs `f`, turning a panic inside the database library (it asserts on some malformed files
/// instead of returning an error) into [`StoreError::Damaged`], without the panic message on
/// stderr: the error says what happened and what to do.
fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    quiet_panics::install();
    let outcome = quiet_panics::QUIET.with(|quiet| {
        quiet.set(true);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        quiet.set(false);
        outcome
    });
    outcome.unwrap_or_else(|panic| {
        let detail = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "the database library failed".to_owned());
        Err(StoreError::Damaged {
            path: path.to_path_buf(),
            detail: one_line(&detail),
        })
    })
}

/// The database library's account of a damaged file on one line (redb's runs over several),
/// so the refusal is one line as every other start-up error.
fn one_line(detail: &str) -> String {
    detail.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A panic hook that stays silent on a thread inside [`guarded`] and hands every other panic
/// to the hook that was installed before.
mod quiet_panics {
    use std::cell::Cell;
    use std::sync::Once;

    thread_local! {
        pub(super) static QUIET: Cell<bool> = const { Cell::new(false) };
    }

    pub(super) fn install() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if !QUIET.with(Cell::get) {
                    previous(info);
                }
            }));
        });
    }
}

/// Mode 0600 on an existing store (older podvisors left it 0644).
fn make_private(path: &Path) -> Result<()> {
    crate::require_owned(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| StoreError::Db(format!("setting the mode of {}: {e}", path.display())))
}

/// Creates the tables and, on a fresh database, the initial namespaces; returns the latest
/// resourceVersion.
fn init(database: &Database) -> Result<u64> {
    let mut txn = database.begin_write().map_err(db("beginning a write"))?;
    txn.set_durability(Durability::Immediate)
        .map_err(db("setting durability"))?;
    let (rv, fresh) = {
        let mut meta = txn.open_table(META).map_err(db("opening meta"))?;
        let mut objects = txn.open_table(OBJECTS).map_err(db("opening objects"))?;
        let schema = meta
            .get(SCHEMA_KEY)
            .map_err(db("reading the schema version"))?
            .map(|v| v.value());
        if let Some(schema) = schema.filter(|s| *s != SCHEMA) {
            return Err(StoreError::Db(format!(
                "unsupported schema version {schema} (this podvisor knows {SCHEMA})"
            )));
        }
        let existing = meta
            .get(RV_KEY)
            .map_err(db("reading the resourceVersion"))?
            .map(|v| v.value());
        match existing {
            Some(rv) => (rv, false),
            None => {
                let mut rv = 0;
                for name in object::INITIAL_NAMESPACES {
                    rv += 1;
                    let key = Key::cluster("namespaces", name);
                    let mut obj = object::namespace(name);
                    object::set_resource_version(&mut obj, &rv.to_string());
                    let bytes = serde_json::to_vec(&obj)
                        .map_err(|e| StoreError::Invalid(format!("encoding {key}: {e}")))?;
                    objects
                        .insert(key.encode().as_str(), bytes.as_slice())
                        .map_err(db("writing an object"))?;
                }
                meta.insert(RV_KEY, rv)
                    .map_err(db("writing the resourceVersion"))?;
                meta.insert(SCHEMA_KEY, SCHEMA)
                    .map_err(db("writing the schema version"))?;
                (rv, true)
            }
        }
    };
    if fresh {
        txn.commit()
            .map_err(db("committing the initial namespaces"))?;
    } else {
        txn.abort().map_err(db("aborting a write"))?;
    }
    Ok(rv)
}

fn check_filter(kind: &str, namespace: Option<&str>) -> Result<()> {
    key::check_kind(kind)?;
    namespace.map_or(Ok(()), |ns| key::check_part("namespace", ns))
}

fn decode(key: &Key, bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Db(format!("decoding {key}: {e}")))
}

/// The outcome of replacing `current` with `obj`: unchanged if they differ only in
/// resourceVersion, else `obj` with the new one.
fn modified(current: Value, mut obj: Value, rv: &str) -> Outcome {
    let old = object::resource_version(&current)
        .unwrap_or_default()
        .to_string();
    object::set_resource_version(&mut obj, &old);
    if obj == current {
        return Outcome::Unchanged(current);
    }
    object::set_resource_version(&mut obj, rv);
    if object::deletion_due(&current) && !object::has_finalizers(&obj) {
        return Outcome::Delete(obj);
    }
    Outcome::Put(EventType::Modified, obj)
}

fn check_preconditions(key: &Key, current: &Value, pre: &Preconditions, op: Op) -> Result<()> {
    let conflict = |message: String| StoreError::Conflict {
        key: key.clone(),
        message,
    };
    if let Some(want) = pre.uid.as_deref().filter(|u| !u.is_empty()) {
        let have = object::uid(current).unwrap_or_default();
        if want != have {
            return Err(conflict(format!(
                "Precondition failed: UID in precondition: {want}, UID in object meta: {have}"
            )));
        }
    }
    if let Some(want) = pre.resource_version.as_deref().filter(|v| !v.is_empty()) {
        let have = object::resource_version(current).unwrap_or_default();
        if want != have {
            return Err(conflict(match op {
                Op::Update => "the object has been modified; please apply your changes to the \
                               latest version and try again"
                    .to_string(),
                Op::Delete => format!(
                    "Precondition failed: ResourceVersion in precondition: {want}, \
                     ResourceVersion in object meta: {have}"
                ),
            }));
        }
    }
    Ok(())
}

/// The synthetic `Added` events of a [`WatchFrom::Any`] watch.
fn added(objects: Vec<Value>, snapshot: u64) -> VecDeque<Owed> {
    objects
        .into_iter()
        .map(|object| {
            Owed::Event(WatchEvent {
                type_: EventType::Added,
                resource_version: object::resource_version(&object)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(snapshot),
                object,
                previous_json: None,
            })
        })
        .collect()
}
