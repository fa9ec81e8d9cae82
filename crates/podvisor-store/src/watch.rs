//! Watch streams: the in-memory history of recent events and the fan-out to watchers.
//!
//! The [`Hub`] lives inside the store's writer lock. A write publishes its event only after its
//! transaction has committed (and been fsynced), and watchers register under the same lock, so
//! every watcher sees each event exactly once, in resourceVersion order, and a watch started
//! after a list's resourceVersion continues exactly where the list's snapshot ended.
//!
//! Writers never wait for watchers: each watcher has a bounded channel, and a watcher whose
//! channel is full when an event arrives is dropped. Its stream ends after the events already
//! buffered ([`Watch::overflowed`] then says why); the client resumes with a new watch from the
//! last resourceVersion it saw, or lists again if that is gone (410), which is what Kubernetes
//! clients do when the API server closes a slow watch.
//!
//! An event is shared, never copied per watcher: the history and every watcher's channel hold
//! the same [`Record`] (the object's JSON as the store wrote it), and each watcher decodes it
//! when it reads it, outside the writer lock (the API server's watch cache shares one event
//! among its watchers too). A watcher's channel is bounded by count and by the bytes of JSON
//! it holds unread ([`StoreOptions::watch_buffer_bytes`](crate::StoreOptions)): a watcher that
//! falls behind on large objects is closed before it holds more than that, whatever the count.

use crate::key::Key;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::mpsc;

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFrom {
    /// Only events committed after the watch is created.
    Now,
    /// Kubernetes' `resourceVersion=0` (and unset): a synthetic `Added` for every current
    /// object (sorted by namespace and name, each carrying the object's own resourceVersion),
    /// then live events.
    Any,
    /// Every event with a resourceVersion greater than this one, replayed from the history,
    /// then live events. [`StoreError::Gone`](crate::StoreError::Gone) when the history no
    /// longer reaches back that far, or when the resourceVersion is newer than the store's.
    After(u64),
}

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// The object was created (or, for [`WatchFrom::Any`], exists).
    Added,
    /// The object was updated.
    Modified,
    /// The object was deleted.
    Deleted,
}

impl EventType {
    /// The Kubernetes watch event type: `ADDED`, `MODIFIED` or `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change to one object.
#[derive(Clone, Debug)]
pub struct WatchEvent {
    /// What happened.
    pub type_: EventType,
    /// The object after the change; for `Deleted`, the last state of the object with the
    /// deletion's resourceVersion in `metadata.resourceVersion`.
    pub object: Value,
    /// The resourceVersion of the change (equal to `object.metadata.resourceVersion`).
    pub resource_version: u64,
    /// The object before the change, as stored (etcd's `prevKV`): none for `Added`; for
    /// `Deleted`, the object as it was before the deletion. Decode with
    /// [`WatchEvent::previous`].
    pub previous_json: Option<Arc<[u8]>>,
}

impl WatchEvent {
    /// The object before the change (none for `Added`, and for the synthetic `Added`s of a
    /// [`WatchFrom::Any`] watch).
    pub fn previous(&self) -> Option<Value> {
        self.previous_json
            .as_deref()
            .map(|json| serde_json::from_slice(json).expect("the store holds JSON it serialized"))
    }
}

/// A stream of [`WatchEvent`]s from [`Store::watch`](crate::Store::watch).
///
/// Ends (`next` returns `None`) when the store is dropped or when this watcher fell more than
/// its buffer behind ([`Watch::overflowed`]). Dropping it unsubscribes.
#[derive(Debug)]
pub struct Watch {
    /// Events owed before the live ones: replayed history or synthetic `Added`s.
    backlog: VecDeque<Owed>,
    rx: mpsc::Receiver<Arc<Record>>,
    /// The bytes of JSON in `rx` not read yet (the hub adds, reading subtracts).
    unread: Arc<AtomicUsize>,
    overflowed: Arc<AtomicBool>,
}

impl Watch {
    /// The next event; `None` when the stream has ended.
    pub async fn next(&mut self) -> Option<WatchEvent> {
        if let Some(owed) = self.backlog.pop_front() {
            return Some(owed.into_event());
        }
        let record = self.rx.recv().await?;
        Some(self.read(&record))
    }

    /// The next event if one is ready, without waiting; `None` both when none is ready yet and
    /// when the stream has ended.
    pub fn try_next(&mut self) -> Option<WatchEvent> {
        match self.backlog.pop_front() {
            Some(owed) => Some(owed.into_event()),
            None => {
                let record = self.rx.try_recv().ok()?;
                Some(self.read(&record))
            }
        }
    }

    fn read(&self, record: &Record) -> WatchEvent {
        self.unread.fetch_sub(record.bytes(), Ordering::AcqRel);
        record.event()
    }

    /// The bytes of JSON of the live events this watcher has not read yet.
    pub fn unread_bytes(&self) -> usize {
        self.unread.load(Ordering::Acquire)
    }

    /// True once the store dropped this watcher because its buffer was full; the stream ends
    /// after the buffered events.
    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }
}

/// A registered watcher, as the hub sees it.
struct Watcher {
    kind: String,
    namespace: Option<String>,
    /// Events at or below this version were owed through the backlog (a guard: the writer
    /// lock already makes every live event newer).
    after: u64,
    tx: mpsc::Sender<Arc<Record>>,
    /// The bytes of JSON sent and not read yet.
    unread: Arc<AtomicUsize>,
    overflowed: Arc<AtomicBool>,
}

impl Watcher {
    fn matches(&self, key: &Key) -> bool {
        matches_filter(&self.kind, self.namespace.as_deref(), key)
    }
}

fn matches_filter(kind: &str, namespace: Option<&str>, key: &Key) -> bool {
    key.kind == kind && namespace.is_none_or(|ns| key.namespace == ns)
}

/// A committed event, in the history and in the channel of every watcher it matches (one
/// copy, shared). The object is kept as the JSON the store wrote (a fraction of the memory of
/// a `Value`, which matters for 10 000 pods' worth of status updates) and decoded only when a
/// watcher reads it, outside the writer lock.
pub(crate) struct Record {
    key: Key,
    type_: EventType,
    resource_version: u64,
    json: Box<[u8]>,
    previous_json: Option<Arc<[u8]>>,
}

/// An event a [`Watch`] owes before its live ones.
#[derive(Debug)]
pub(crate) enum Owed {
    /// A synthetic `Added` of a [`WatchFrom::Any`] watch.
    Event(WatchEvent),
    /// An event replayed from the history.
    Replayed(Arc<Record>),
}

impl Owed {
    fn into_event(self) -> WatchEvent {
        match self {
            Owed::Event(event) => event,
            Owed::Replayed(record) => record.event(),
        }
    }
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("key", &self.key)
            .field("type_", &self.type_)
            .field("resource_version", &self.resource_version)
            .finish_non_exhaustive()
    }
}

impl Record {
    /// The event of a committed write: `json` is the object after it (for a deletion, the
    /// last state with the deletion's resourceVersion), `previous_json` the object before.
    pub(crate) fn new(
        key: Key,
        type_: EventType,
        resource_version: u64,
        json: Vec<u8>,
        previous_json: Option<Arc<[u8]>>,
    ) -> Record {
        Record {
            key,
            type_,
            resource_version,
            json: json.into_boxed_slice(),
            previous_json,
        }
    }

    /// The bytes of JSON it holds.
    fn bytes(&self) -> usize {
        self.json.len() + self.previous_json.as_ref().map_or(0, |p| p.len())
    }

    fn event(&self) -> WatchEvent {
        WatchEvent {
            type_: self.type_,
            object: serde_json::from_slice(&self.json)
                .expect("the history holds JSON the store serialized"),
            resource_version: self.resource_version,
            previous_json: self.previous_json.clone(),
        }
    }
}

/// The history of recent events and the live watchers. Only touched under the writer lock.
pub(crate) struct Hub {
    history: VecDeque<Arc<Record>>,
    capacity: usize,
    /// The most bytes of JSON the history holds (beyond its newest event).
    max_bytes: usize,
    /// The bytes of JSON the history holds.
    bytes: usize,
    /// The history holds every event with a resourceVersion greater than this.
    history_start: u64,
    watchers: Vec<Watcher>,
    /// How many events a watcher may hold unread.
    buffer: usize,
    /// How many bytes of JSON a watcher may hold unread (beyond one event).
    buffer_bytes: usize,
}

/// The bounds of a [`Hub`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    /// Events in the history.
    pub(crate) history: usize,
    /// Bytes of JSON in the history.
    pub(crate) history_bytes: usize,
    /// Events a watcher may hold unread.
    pub(crate) buffer: usize,
    /// Bytes of JSON a watcher may hold unread.
    pub(crate) buffer_bytes: usize,
}

impl Hub {
    /// An empty hub whose history starts at `rv` (the store's resourceVersion when opened).
    pub(crate) fn new(rv: u64, bounds: Bounds) -> Hub {
        Hub {
            history: VecDeque::with_capacity(bounds.history.min(1024)),
            capacity: bounds.history.max(1),
            max_bytes: bounds.history_bytes,
            bytes: 0,
            history_start: rv,
            watchers: Vec::new(),
            buffer: bounds.buffer.max(1),
            buffer_bytes: bounds.buffer_bytes,
        }
    }

    /// How many events, and how many bytes of JSON, the history holds.
    pub(crate) fn history_size(&self) -> (usize, usize) {
        (self.history.len(), self.bytes)
    }

    /// The oldest resourceVersion a watch can start after.
    pub(crate) fn history_start(&self) -> u64 {
        self.history_start
    }

    /// The number of live watchers.
    pub(crate) fn watchers(&self) -> usize {
        self.watchers.len()
    }

    /// Records a committed event and hands it to every matching watcher (the same shared
    /// record), dropping watchers that are gone, or full by count or by bytes. Never blocks.
    pub(crate) fn publish(&mut self, record: Record) {
        let record = Arc::new(record);
        let size = record.bytes();
        let buffer_bytes = self.buffer_bytes;
        self.watchers.retain(|w| {
            if w.tx.is_closed() {
                return false;
            }
            if !w.matches(&record.key) || record.resource_version <= w.after {
                return true;
            }
            // Only the hub adds (under the writer lock) and readers subtract, so this is at
            // most what the watcher holds.
            let unread = w.unread.load(Ordering::Acquire);
            if unread > 0 && unread + size > buffer_bytes {
                w.overflowed.store(true, Ordering::Release);
                return false;
            }
            // Counted before it is sent: the reader subtracts once it has it.
            w.unread.fetch_add(size, Ordering::AcqRel);
            match w.tx.try_send(Arc::clone(&record)) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    w.unread.fetch_sub(size, Ordering::AcqRel);
                    w.overflowed.store(true, Ordering::Release);
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        self.bytes += size;
        self.history.push_back(record);
        // Bounded by count and by bytes (a few large objects must not hold the memory that
        // many small ones would); the newest event always stays.
        while self.history.len() > 1
            && (self.history.len() > self.capacity || self.bytes > self.max_bytes)
            && let Some(oldest) = self.history.pop_front()
        {
            self.bytes -= oldest.bytes();
            self.history_start = oldest.resource_version;
        }
    }

    /// Registers a watcher that gets `backlog` first, then the events of `key`s matching
    /// (`kind`, `namespace`) with a resourceVersion greater than `after`, which the caller has
    /// checked is at least [`Hub::history_start`] and at most the latest published version.
    pub(crate) fn subscribe(
        &mut self,
        kind: &str,
        namespace: Option<&str>,
        after: u64,
        mut backlog: VecDeque<Owed>,
    ) -> Watch {
        debug_assert!(after >= self.history_start);
        // The history is in version order; cloning `Arc`s keeps the time under the lock short.
        let first = self
            .history
            .partition_point(|r| r.resource_version <= after);
        backlog.extend(
            self.history
                .range(first..)
                .filter(|r| matches_filter(kind, namespace, &r.key))
                .map(|r| Owed::Replayed(r.clone())),
        );
        let (tx, rx) = mpsc::channel(self.buffer);
        let overflowed = Arc::new(AtomicBool::new(false));
        let unread = Arc::new(AtomicUsize::new(0));
        self.watchers.push(Watcher {
            kind: kind.to_string(),
            namespace: namespace.map(str::to_string),
            after,
            tx,
            unread: Arc::clone(&unread),
            overflowed: overflowed.clone(),
        });
        Watch {
            backlog,
            rx,
            unread,
            overflowed,
        }
    }
}
