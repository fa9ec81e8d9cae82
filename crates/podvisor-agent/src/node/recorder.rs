//! The kubelet's event recorder for one pod, beside its status writer: every event the pod
//! worker emits goes through the pod's [`EventCorrelator`] (similar events combined, spam
//! dropped), then is written with count aggregation: a repeat of the same event (same involved
//! object, type, reason and message, or the same aggregate) increments `count` and moves
//! `lastTimestamp` on the stored Event instead of creating another.

mod correlator;

pub use correlator::{
    AGGREGATE_INTERVAL, AGGREGATE_MAX_EVENTS, AGGREGATE_PREFIX, EventCorrelator, SPAM_BURST,
    SPAM_REFILL,
};
use correlator::{AGGREGATE_KEY, EVENT_KEY, Occurrences, key};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use podvisor_lifecycle::Event;
use podvisor_lifecycle::event_object::{event_object, time_text};
use podvisor_store::{Key, Store, StoreError};
use serde_json::{Value, json};

/// The recorder of one pod's events on node `host` (the kubelet keys every correlation by the
/// involved object: nothing is shared between pods).
#[derive(Debug)]
pub struct Recorder {
    host: String,
    correlator: EventCorrelator,
    /// Events the store could not take (a full disk), oldest first, each with its tries:
    /// written again by [`Recorder::retry`], as client-go's recorder tries an event up to
    /// [`MAX_TRIES_PER_EVENT`] times.
    pending: std::collections::VecDeque<(Value, Timestamp, Occurrences, u32)>,
    /// The name of the stored Event of each event key written (client-go's `eventCache`, an
    /// LRU of the event's name by its key): a repeat bumps that Event, a new key gets a new
    /// name made of the time.
    names: Names,
}

/// Event names by key hash, the oldest forgotten past [`MAX_NAMES`].
#[derive(Debug, Default)]
struct Names {
    by_key: std::collections::HashMap<u64, String>,
    order: std::collections::VecDeque<u64>,
}

/// How many event keys a pod's recorder remembers the name of.
const MAX_NAMES: usize = 512;

impl Names {
    fn get(&self, hash: u64) -> Option<&str> {
        self.by_key.get(&hash).map(String::as_str)
    }

    fn insert(&mut self, hash: u64, name: String) {
        if self.by_key.insert(hash, name).is_none() {
            self.order.push_back(hash);
            if self.order.len() > MAX_NAMES
                && let Some(old) = self.order.pop_front()
            {
                self.by_key.remove(&old);
            }
        }
    }
}

/// client-go's `maxTriesPerEvent`.
pub const MAX_TRIES_PER_EVENT: u32 = 12;
/// At most this many events wait for the store per pod; older ones are dropped.
const MAX_PENDING: usize = 100;

impl Recorder {
    /// A recorder for the kubelet of node `host`.
    #[must_use]
    pub fn new(host: &str) -> Recorder {
        Recorder {
            host: host.to_owned(),
            correlator: EventCorrelator::new(),
            pending: std::collections::VecDeque::new(),
            names: Names::default(),
        }
    }

    /// Whether events wait for the store to take writes again.
    #[must_use]
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes the events the store could not take, oldest first, until one fails again; an
    /// event that failed `MAX_TRIES_PER_EVENT` times is dropped.
    pub fn retry(&mut self, store: &Store) {
        while let Some((fresh, now, seen, tries)) = self.pending.pop_front() {
            match write_event(store, &mut self.names, fresh.clone(), now, seen) {
                Err(StoreError::Io { .. }) if tries + 1 < MAX_TRIES_PER_EVENT => {
                    self.pending.push_front((fresh, now, seen, tries + 1));
                    return;
                }
                _ => {}
            }
        }
    }

    /// Records `event` about `pod` as the kubelet's recorder does: `source {component: kubelet,
    /// host}`, through the correlator (the 10th distinct message of similar events within 10
    /// minutes becomes the aggregate; past a burst of 25 events about the pod one is let through
    /// every 5 minutes), then with count aggregation. Returns the stored Event, or `None` when
    /// the spam filter dropped it.
    ///
    /// # Errors
    ///
    /// The store's errors.
    pub fn record(
        &mut self,
        store: &Store,
        pod: &Pod,
        event: &Event,
        now: Timestamp,
    ) -> Result<Option<Value>, StoreError> {
        let mut fresh = event_object("kubelet", &self.host, pod, event, now);
        fresh["metadata"]["uid"] = json!(podvisor_api::meta::new_uid());
        let Some(seen) = self.correlator.correlate(&mut fresh, now) else {
            return Ok(None);
        };
        if self.has_pending() {
            // Behind events that wait: keep their order.
            self.retry(store);
        }
        if self.has_pending() {
            self.keep(fresh, now, seen);
            return Ok(None);
        }
        match write_event(store, &mut self.names, fresh.clone(), now, seen) {
            Err(e @ StoreError::Io { .. }) => {
                self.keep(fresh, now, seen);
                Err(e)
            }
            other => other.map(Some),
        }
    }

    fn keep(&mut self, fresh: Value, now: Timestamp, seen: Occurrences) {
        if self.pending.len() == MAX_PENDING {
            self.pending.pop_front();
        }
        self.pending.push_back((fresh, now, seen, 1));
    }
}

/// FNV-1a, 64 bits: a stable name for the aggregation key.
fn fnv64(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Whether the stored Event `a` is the one `b` is counted in: the same event (`getEventKey`:
/// source, involved object, type, reason, message), or for an aggregate the aggregate of the
/// same similar events (the aggregate key; its message is the latest combined one).
fn same_event(a: &Value, b: &Value, aggregate: bool) -> bool {
    if !aggregate {
        return key(a, &EVENT_KEY) == key(b, &EVENT_KEY);
    }
    key(a, &AGGREGATE_KEY) == key(b, &AGGREGATE_KEY)
        && a["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(AGGREGATE_PREFIX))
}

/// Writes `fresh` (made by [`event_object`] at `now`) with its correlated occurrences: adds them
/// to the `count` of the stored Event it is counted in (found by the name `names` remembers
/// for its key), or creates it named as client-go's recorder names events,
/// `<pod>.<unix nanoseconds in hex>`, so names sort in time.
fn write_event(
    store: &Store,
    names: &mut Names,
    mut fresh: Value,
    now: Timestamp,
    seen: Occurrences,
) -> Result<Value, StoreError> {
    let s = |p: &str| {
        fresh
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (ns, pod_name, host) = (
        s("/metadata/namespace"),
        s("/involvedObject/name"),
        s("/source/host"),
    );
    let hash = if seen.aggregate {
        // One aggregate per similar events, whatever its container and latest message.
        fnv64(&[
            &s("/involvedObject/uid"),
            "",
            &s("/type"),
            &s("/reason"),
            AGGREGATE_PREFIX,
            &host,
        ])
    } else {
        fnv64(&[
            &s("/involvedObject/uid"),
            &s("/involvedObject/fieldPath"),
            &s("/type"),
            &s("/reason"),
            &s("/message"),
            &host,
        ])
    };
    let stamp = time_text(now);
    fresh["count"] = json!(seen.count);
    fresh["firstTimestamp"] = json!(time_text(seen.first));
    if let Some(name) = names.get(hash).map(str::to_owned) {
        let key = Key::new("events", &ns, &name);
        if let Some(existing) = store.get(&key)?
            && same_event(&existing, &fresh, seen.aggregate)
        {
            let bumped = store.update_with(&key, |mut current| {
                let count = current.get("count").and_then(Value::as_i64).unwrap_or(1);
                current["count"] = json!(count + seen.count);
                current["lastTimestamp"] = json!(stamp);
                // An aggregate shows the latest message combined.
                current["message"] = fresh["message"].clone();
                if let Some(rv) = fresh.pointer("/involvedObject/resourceVersion") {
                    current["involvedObject"]["resourceVersion"] = rv.clone();
                }
                Ok(current)
            });
            match bumped {
                // Deleted meanwhile (expired, or by a user): created again below.
                Err(StoreError::NotFound(_)) => {}
                other => return other,
            }
        }
    }
    // Nanosecond names of one pod's events made in the same nanosecond would collide: the
    // next nanoseconds are tried.
    let nanos = now.as_nanosecond();
    for step in 0..8 {
        let name = format!("{pod_name}.{:x}", nanos + step);
        fresh["metadata"]["name"] = json!(name);
        match store.create(&Key::new("events", &ns, &name), fresh.clone()) {
            Err(StoreError::AlreadyExists(_)) => continue,
            Ok(created) => {
                names.insert(hash, name);
                return Ok(created);
            }
            other => return other,
        }
    }
    Err(StoreError::Conflict {
        key: Key::new("events", &ns, format!("{pod_name}.{nanos:x}")),
        message: "the event kept changing; please try again".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use podvisor_lifecycle::{ContainerKind, EventType};

    fn event(reason: &'static str, message: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason,
            message: message.to_owned(),
            container: Some((ContainerKind::Regular, "app".to_owned())),
        }
    }

    fn store(name: &str) -> Store {
        let d =
            std::env::temp_dir().join(format!("podvisor-recorder-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Store::open(&d.join("store.redb")).unwrap()
    }

    fn pod() -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "default",
            "uid": "u-1"}}))
        .unwrap()
    }

    /// Events are named `<pod>.<nanoseconds in hex>` as client-go's recorder names them, so
    /// `kubectl describe`'s same-second events sort in the order they happened; a repeat
    /// bumps the count of the Event its key was first written as.
    #[test]
    fn events_are_named_by_their_time_and_repeats_bump_the_first() {
        let store = store("names");
        let mut rec = Recorder::new("node-1");
        let t0 = Timestamp::from_second(1_767_225_600).unwrap();
        let at = |ms: i64| t0 + jiff::SignedDuration::from_millis(ms);
        let pulled = rec
            .record(&store, &pod(), &event("Pulled", "pulled"), at(0))
            .unwrap();
        let created = rec
            .record(&store, &pod(), &event("Created", "created"), at(1))
            .unwrap();
        let started = rec
            .record(&store, &pod(), &event("Started", "started"), at(2))
            .unwrap();
        let names: Vec<String> = [&pulled, &created, &started]
            .iter()
            .map(|e| {
                e.as_ref().unwrap()["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(names[0], format!("web.{:x}", at(0).as_nanosecond()));
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, names, "names sort in time");
        let again = rec
            .record(&store, &pod(), &event("Pulled", "pulled"), at(5))
            .unwrap();
        let again = again.unwrap();
        assert_eq!(again["metadata"]["name"], json!(names[0]));
        assert_eq!(again["count"], json!(2));
        // Deleted meanwhile: the repeat is a new Event, named by its own time.
        store
            .delete(
                &Key::new("events", "default", &names[0]),
                podvisor_store::Preconditions::default(),
            )
            .unwrap();
        let fresh = rec
            .record(&store, &pod(), &event("Pulled", "pulled"), at(9))
            .unwrap();
        assert_eq!(
            fresh.unwrap()["metadata"]["name"],
            json!(format!("web.{:x}", at(9).as_nanosecond()))
        );
    }
}
