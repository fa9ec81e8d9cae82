//! The kubelet recorder's `EventCorrelator` (client-go `tools/record/events_cache.go`) for the
//! events the node agent records: similar events aggregated into one `(combined from similar
//! events): ...` event, and a token bucket per source and involved object that drops spam.
//! The third part, counting repeats of an identical event, is the store-backed count
//! aggregation of [`super::Recorder::record`]; the correlator only remembers the repeats the spam
//! filter dropped, which upstream counts in its cache and so adds to the next write.
//!
//! Pure: the caller passes `now` (the agent's clock), so a virtual clock drives it in tests.
//! Upstream keeps one correlator per recorder, keyed by source and involved object; the node
//! agent keeps one per pod (every key holds the pod's UID), dropped when the pod goes. The
//! LRU bounds of upstream (4096 entries) are not needed at that size.

use std::collections::{HashMap, HashSet};

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

/// `defaultAggregateMaxEvents`: the number of distinct messages of similar events within
/// [`AGGREGATE_INTERVAL`] at which an event is replaced by the aggregate (upstream's
/// `localKeys.Len() < maxEvents` lets 9 through: the 10th distinct message is combined).
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// `defaultAggregateIntervalInSeconds`: a similar event more than this after the last one
/// starts a new aggregation record.
pub const AGGREGATE_INTERVAL: SignedDuration = SignedDuration::from_secs(600);
/// `EventAggregatorByReasonMessageFunc`'s prefix.
pub const AGGREGATE_PREFIX: &str = "(combined from similar events): ";
/// `defaultSpamBurst`: events a source may send about an object at once.
pub const SPAM_BURST: u32 = 25;
/// `1 / defaultSpamQPS`: one token comes back every 300 s.
pub const SPAM_REFILL: SignedDuration = SignedDuration::from_secs(300);

/// `getEventKey`: the fields that make two events the same event (counted, not repeated).
pub(crate) const EVENT_KEY: [&str; 11] = [
    "/source/component",
    "/source/host",
    "/involvedObject/kind",
    "/involvedObject/namespace",
    "/involvedObject/name",
    "/involvedObject/fieldPath",
    "/involvedObject/uid",
    "/involvedObject/apiVersion",
    "/type",
    "/reason",
    "/message",
];

/// `EventAggregatorByReasonFunc`'s aggregate key: similar events differ at most in their
/// message and `fieldPath` (the container).
pub(crate) const AGGREGATE_KEY: [&str; 11] = [
    "/source/component",
    "/source/host",
    "/involvedObject/kind",
    "/involvedObject/namespace",
    "/involvedObject/name",
    "/involvedObject/uid",
    "/involvedObject/apiVersion",
    "/type",
    "/reason",
    "/reportingComponent",
    "/reportingInstance",
];

/// `getSpamKey`: source and involved object (not the container).
const SPAM_KEY: [&str; 7] = [
    "/source/component",
    "/source/host",
    "/involvedObject/kind",
    "/involvedObject/namespace",
    "/involvedObject/name",
    "/involvedObject/uid",
    "/involvedObject/apiVersion",
];

/// The fields at `ptrs` of an Event, joined (a missing field is empty, as Go's zero value).
pub(crate) fn key(event: &Value, ptrs: &[&str]) -> String {
    let mut out = String::new();
    for p in ptrs {
        out.push_str(event.pointer(p).and_then(Value::as_str).unwrap_or(""));
        out.push('\0');
    }
    out
}

/// What to write after correlation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Occurrences {
    /// The event is the aggregate of similar events (its message was rewritten): it is
    /// counted under the aggregate key, not its own.
    pub(crate) aggregate: bool,
    /// How many occurrences the write adds to `count`: this one and those the spam filter
    /// dropped since the last write of the same event.
    pub(crate) count: i64,
    /// When the first of them happened (`firstTimestamp` if the write creates the Event).
    pub(crate) first: Timestamp,
}

/// `aggregateRecord`: the distinct messages of similar events and when the last came.
#[derive(Debug)]
struct Similar {
    messages: HashSet<String>,
    last: Timestamp,
}

/// A token bucket (`flowcontrol.NewTokenBucketRateLimiter(1/300, 25)`), in nanoseconds of
/// refill so it is exact: a token is [`SPAM_REFILL`] of credit.
#[derive(Debug)]
struct Bucket {
    credit: i128,
    last: Timestamp,
}

impl Bucket {
    fn full(now: Timestamp) -> Self {
        Self {
            credit: SPAM_REFILL.as_nanos() * i128::from(SPAM_BURST),
            last: now,
        }
    }

    /// `TryAccept`: takes a token if there is one.
    fn try_accept(&mut self, now: Timestamp) -> bool {
        let token = SPAM_REFILL.as_nanos();
        let elapsed = now.duration_since(self.last).as_nanos().max(0);
        self.credit = (self.credit + elapsed).min(token * i128::from(SPAM_BURST));
        self.last = self.last.max(now);
        if self.credit < token {
            return false;
        }
        self.credit -= token;
        true
    }
}

/// Occurrences the spam filter dropped, not yet written.
#[derive(Debug)]
struct Dropped {
    count: i64,
    first: Timestamp,
}

/// The kubelet recorder's event correlator for one pod's events (client-go's
/// `EventCorrelator`), to pass to `Recorder::record` with every event of
/// that pod.
#[derive(Debug, Default)]
pub struct EventCorrelator {
    /// By aggregate key.
    similar: HashMap<String, Similar>,
    /// By spam key.
    buckets: HashMap<String, Bucket>,
    /// By the key the event is counted under (its event key, or the aggregate key).
    dropped: HashMap<String, Dropped>,
}

impl EventCorrelator {
    /// A correlator that has seen nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// `EventCorrelate` on the Event about to be written, at `now`: aggregates (rewriting
    /// `event`'s message when it becomes the aggregate), counts, then filters. `None` when
    /// the spam filter drops it; the aggregation and the count have seen it all the same,
    /// as upstream's caches have.
    pub(crate) fn correlate(&mut self, event: &mut Value, now: Timestamp) -> Option<Occurrences> {
        // EventAggregate.
        let aggregate_key = key(event, &AGGREGATE_KEY);
        let message = event["message"].as_str().unwrap_or("").to_owned();
        let record = self
            .similar
            .entry(aggregate_key.clone())
            .or_insert_with(|| Similar {
                messages: HashSet::new(),
                last: now,
            });
        if now.duration_since(record.last) > AGGREGATE_INTERVAL {
            record.messages.clear();
        }
        record.messages.insert(message.clone());
        record.last = now;
        let aggregate = record.messages.len() >= AGGREGATE_MAX_EVENTS;
        let counted_as = if aggregate {
            // Upstream pops any message to stay below the limit; the one just added is the
            // deterministic choice: the earlier messages keep their own events and every
            // other message in the window goes to the aggregate.
            record.messages.remove(&message);
            event["message"] = json!(format!("{AGGREGATE_PREFIX}{message}"));
            format!("aggregate\0{aggregate_key}")
        } else {
            key(event, &EVENT_KEY)
        };

        // eventObserve: this occurrence and the dropped ones before it.
        let (count, first) = match self.dropped.remove(&counted_as) {
            Some(d) => (d.count + 1, d.first),
            None => (1, now),
        };

        // EventSourceObjectSpamFilter.
        let accepted = self
            .buckets
            .entry(key(event, &SPAM_KEY))
            .or_insert_with(|| Bucket::full(now))
            .try_accept(now);
        if !accepted {
            self.dropped.insert(counted_as, Dropped { count, first });
            return None;
        }
        Some(Occurrences {
            aggregate,
            count,
            first,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> Timestamp {
        "2025-01-01T00:00:00Z".parse().unwrap()
    }

    fn at(secs: i64) -> Timestamp {
        t0() + SignedDuration::from_secs(secs)
    }

    fn event(reason: &str, container: &str, message: &str) -> Value {
        json!({
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web",
                "uid": "u1", "apiVersion": "v1", "fieldPath": format!("spec.containers{{{container}}}")},
            "reason": reason,
            "message": message,
            "source": {"component": "kubelet", "host": "node-1"},
            "type": "Warning",
            "reportingComponent": "kubelet",
            "reportingInstance": "node-1",
        })
    }

    /// Correlates `e` at `now`; the (possibly rewritten) message and the outcome.
    fn run(c: &mut EventCorrelator, mut e: Value, now: Timestamp) -> (String, Option<Occurrences>) {
        let out = c.correlate(&mut e, now);
        (e["message"].as_str().unwrap().to_owned(), out)
    }

    #[test]
    fn the_tenth_distinct_message_within_ten_minutes_is_the_aggregate_then_it_counts() {
        let mut c = EventCorrelator::new();
        for i in 0..9 {
            let (msg, out) = run(&mut c, event("Unhealthy", "app", &format!("m{i}")), at(i));
            assert_eq!(msg, format!("m{i}"));
            assert!(!out.unwrap().aggregate);
        }
        // Upstream's `similar-events-should-aggregate-event`: nine then the tenth.
        let (msg, out) = run(&mut c, event("Unhealthy", "app", "m9"), at(9));
        assert_eq!(msg, "(combined from similar events): m9");
        assert_eq!(
            out,
            Some(Occurrences {
                aggregate: true,
                count: 1,
                first: at(9)
            })
        );
        // The 11th similar event (`similar-events-many-times-should-count-the-aggregate`).
        let (msg, out) = run(&mut c, event("Unhealthy", "other", "m10"), at(10));
        assert_eq!(msg, "(combined from similar events): m10");
        assert!(out.unwrap().aggregate);
        // One of the nine earlier messages is still its own event.
        let (msg, out) = run(&mut c, event("Unhealthy", "app", "m3"), at(11));
        assert_eq!(msg, "m3");
        assert!(!out.unwrap().aggregate);
    }

    #[test]
    fn identical_events_are_never_aggregated() {
        let mut c = EventCorrelator::new();
        for i in 0..20 {
            let (msg, out) = run(&mut c, event("BackOff", "app", "same"), at(i));
            assert_eq!(msg, "same");
            assert!(!out.unwrap().aggregate);
        }
    }

    #[test]
    fn other_reasons_and_types_are_not_similar() {
        let mut c = EventCorrelator::new();
        for i in 0..9 {
            run(&mut c, event("Unhealthy", "app", &format!("m{i}")), at(i));
        }
        let (msg, _) = run(&mut c, event("Killing", "app", "k"), at(9));
        assert_eq!(msg, "k");
        let mut normal = event("Unhealthy", "app", "n");
        normal["type"] = json!("Normal");
        let (msg, _) = run(&mut c, normal, at(10));
        assert_eq!(msg, "n");
    }

    #[test]
    fn the_window_runs_from_the_last_similar_event() {
        let mut c = EventCorrelator::new();
        // Nine messages, each 599 s after the previous: all within the window of the last.
        for i in 0..9 {
            run(
                &mut c,
                event("Unhealthy", "app", &format!("m{i}")),
                at(i * 599),
            );
        }
        let (msg, _) = run(&mut c, event("Unhealthy", "app", "m9"), at(9 * 599));
        assert!(msg.starts_with(AGGREGATE_PREFIX), "{msg}");

        // Exactly 600 s later is still within (`interval > maxInterval` expires).
        let mut c = EventCorrelator::new();
        for i in 0..9 {
            run(&mut c, event("Unhealthy", "app", &format!("m{i}")), at(i));
        }
        let (msg, _) = run(&mut c, event("Unhealthy", "app", "m9"), at(8 + 600));
        assert!(msg.starts_with(AGGREGATE_PREFIX), "{msg}");

        // 601 s later: a fresh record, the event is its own again.
        let mut c = EventCorrelator::new();
        for i in 0..9 {
            run(&mut c, event("Unhealthy", "app", &format!("m{i}")), at(i));
        }
        let (msg, out) = run(&mut c, event("Unhealthy", "app", "m9"), at(8 + 601));
        assert_eq!(msg, "m9");
        assert!(!out.unwrap().aggregate);
    }

    #[test]
    fn the_spam_filter_drops_the_26th_event_about_an_object_and_refills_every_300_s() {
        let mut c = EventCorrelator::new();
        // 25 at once, whatever the container or reason: the bucket is per pod.
        for i in 0..25 {
            let container = if i % 2 == 0 { "a" } else { "b" };
            let (_, out) = run(&mut c, event("BackOff", container, "same"), at(0));
            assert!(out.is_some(), "event {i}");
        }
        assert_eq!(run(&mut c, event("BackOff", "a", "same"), at(0)).1, None);
        assert_eq!(run(&mut c, event("Started", "a", "s"), at(299)).1, None);
        // A token back after 300 s: one event, and the dropped repeats of it count.
        let (_, out) = run(&mut c, event("BackOff", "a", "same"), at(300));
        assert_eq!(
            out,
            Some(Occurrences {
                aggregate: false,
                count: 2,
                first: at(0)
            })
        );
        assert_eq!(run(&mut c, event("BackOff", "a", "same"), at(301)).1, None);
        // The dropped `Started` was its first occurrence: created with its time.
        let (_, out) = run(&mut c, event("Started", "a", "s"), at(600));
        assert_eq!(
            out,
            Some(Occurrences {
                aggregate: false,
                count: 2,
                first: at(299)
            })
        );
        // The bucket refills to 25, not more.
        for i in 0..25 {
            assert!(
                run(&mut c, event("X", "a", "x"), at(100_000)).1.is_some(),
                "{i}"
            );
        }
        assert_eq!(run(&mut c, event("X", "a", "x"), at(100_000)).1, None);
    }

    #[test]
    fn the_spam_filter_is_per_source_and_object() {
        let mut c = EventCorrelator::new();
        for _ in 0..25 {
            run(&mut c, event("BackOff", "a", "same"), at(0));
        }
        let mut other = event("BackOff", "a", "same");
        other["involvedObject"]["uid"] = json!("u2");
        assert!(run(&mut c, other, at(0)).1.is_some());
        let mut scheduler = event("BackOff", "a", "same");
        scheduler["source"]["component"] = json!("default-scheduler");
        assert!(run(&mut c, scheduler, at(0)).1.is_some());
    }
}
