//! What a pod worker published that its status writer has not written yet, coalesced: the
//! kubelet's status manager keeps only the newest status of a pod (`podStatuses[uid]`) and
//! writes that, so a burst of statuses (a thousand containers exiting) while a write is in
//! flight is one write of the newest, never a queue of full copies of the pod.
//!
//! Nothing the lifecycle promises is lost: the first status after a quiet moment is written at
//! once (the writer takes it as soon as it arrives), the newest is always written after it, the
//! events are all kept, in order, and the final pod ([`PodUpdate::Terminated`]) is never
//! replaced. The node's history keeps the superseded statuses too, up to
//! [`HISTORY_PENDING`] a write (beyond that the last one held is replaced by the newer).

use crate::history::Transition;
use crate::{PodUpdate, TimedEvent};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

/// The most statuses held for the node's history between two writes; each is a full status
/// (a thousand containers' worth for a large pod).
pub(crate) const HISTORY_PENDING: usize = 8;

/// The updates not written yet (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// The newest status published.
    pub(crate) status: Option<Box<Pod>>,
    /// The final pod: the last update of the worker.
    pub(crate) terminated: Option<Box<Pod>>,
    /// Every event published, in order.
    pub(crate) events: Vec<TimedEvent>,
    /// The statuses for the node's history, oldest first (at most [`HISTORY_PENDING`]).
    pub(crate) transitions: Vec<Transition>,
    /// How many statuses were replaced by a newer one before they were written.
    pub(crate) replaced: usize,
}

impl Pending {
    /// Takes one update; `now` stamps its history transition (none without a history).
    pub(crate) fn add(&mut self, update: PodUpdate, now: Option<Timestamp>) {
        let transition = match update {
            PodUpdate::Event(event) => {
                self.events.push(event);
                return;
            }
            PodUpdate::Status(pod) => {
                let transition = now.map(|now| Transition::of(&pod, now));
                if self.status.replace(pod).is_some() {
                    self.replaced += 1;
                }
                transition
            }
            PodUpdate::Terminated(pod) => {
                let transition = now.map(|now| Transition::of(&pod, now));
                self.terminated = Some(pod);
                transition
            }
        };
        if let Some(transition) = transition {
            if self.transitions.len() < HISTORY_PENDING {
                self.transitions.push(transition);
            } else if let Some(last) = self.transitions.last_mut() {
                *last = transition;
            }
        }
    }

    /// Whether nothing waits to be written.
    pub(crate) fn is_empty(&self) -> bool {
        self.status.is_none() && self.terminated.is_none() && self.events.is_empty()
    }

    /// The status to write: the final pod's if the worker has finished, else the newest.
    #[cfg(test)]
    pub(crate) fn newest(&self) -> Option<&Pod> {
        self.terminated.as_deref().or(self.status.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podvisor_lifecycle::{Event, EventType};
    use serde_json::json;

    fn pod(phase: &str, exited: usize) -> PodUpdate {
        let statuses: Vec<_> = (0..3)
            .map(|i| {
                let state = if i < exited {
                    json!({"terminated": {"exitCode": 0, "reason": "Completed"}})
                } else {
                    json!({"running": {}})
                };
                json!({"name": format!("c{i}"), "image": "busybox", "imageID": "",
                    "ready": false, "restartCount": 0, "state": state})
            })
            .collect();
        PodUpdate::Status(Box::new(
            serde_json::from_value(json!({"metadata": {"name": "p", "uid": "u-1"},
                "status": {"phase": phase, "containerStatuses": statuses}}))
            .unwrap(),
        ))
    }

    fn exited(pod: &Pod) -> usize {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map_or(0, |cs| {
                cs.iter()
                    .filter(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
                    .count()
            })
    }

    fn event(reason: &str) -> PodUpdate {
        PodUpdate::Event(TimedEvent {
            time: Timestamp::UNIX_EPOCH,
            event: Event {
                type_: EventType::Normal,
                reason: "Killing",
                message: reason.to_owned(),
                container: None,
            },
        })
    }

    /// A burst of statuses while a write is in flight is one status, the newest; every event
    /// stays, in order.
    #[test]
    fn a_burst_of_statuses_is_the_newest_and_every_event() {
        let mut pending = Pending::default();
        assert!(pending.is_empty());
        for n in 0..=3 {
            pending.add(pod("Running", n), None);
            pending.add(event(&format!("Killing{n}")), None);
        }
        assert!(!pending.is_empty());
        assert_eq!(exited(pending.newest().unwrap()), 3);
        assert_eq!(pending.replaced, 3);
        let reasons: Vec<_> = pending
            .events
            .iter()
            .map(|e| e.event.message.as_str())
            .collect();
        assert_eq!(reasons, ["Killing0", "Killing1", "Killing2", "Killing3"]);
        assert!(pending.transitions.is_empty(), "no history, no transitions");
    }

    /// The final pod is what is written, whatever status came with it.
    #[test]
    fn the_final_pod_wins() {
        let mut pending = Pending::default();
        pending.add(pod("Running", 2), None);
        let PodUpdate::Status(last) = pod("Succeeded", 3) else {
            unreachable!()
        };
        pending.add(PodUpdate::Terminated(last), None);
        let newest = pending.newest().unwrap();
        assert_eq!(
            newest.status.as_ref().unwrap().phase.as_deref(),
            Some("Succeeded")
        );
    }

    /// The history keeps the superseded statuses, the first ones of a burst and its newest,
    /// never more than [`HISTORY_PENDING`].
    #[test]
    fn the_history_keeps_a_bounded_share_of_a_burst_and_its_newest() {
        let mut pending = Pending::default();
        let now = Timestamp::UNIX_EPOCH;
        for n in 0..20 {
            pending.add(pod("Running", n % 4), Some(now));
        }
        assert_eq!(pending.transitions.len(), HISTORY_PENDING);
        let last = pending.transitions.last().unwrap();
        let newest = pending.newest().unwrap();
        assert_eq!(Some(&last.status), newest.status.as_ref());
        // 19 % 4 = 3 containers exited in the newest; the first held is the first published.
        let first = &pending.transitions[0].status;
        assert!(
            first.container_statuses.as_ref().unwrap()[0]
                .state
                .as_ref()
                .unwrap()
                .running
                .is_some()
        );
    }
}
