//! podvisor-lifecycle's integration tests, linked as one test binary (one per file would mean
//! ten links on a 2-core machine). Each file is a module named after it; `tests/common` holds
//! the pod builders and `Harness`, the crate's one PodMachine driver (`sim::Driver`) answering
//! nothing.

mod common;

#[path = "kubectl_describe.rs"]
mod kubectl_describe;
#[path = "kubectl_get.rs"]
mod kubectl_get;
#[path = "proptest_machine.rs"]
mod proptest_machine;
#[path = "recovery.rs"]
mod recovery;
#[path = "rules_actions.rs"]
mod rules_actions;
#[path = "rules_ephemeral.rs"]
mod rules_ephemeral;
#[path = "rules_images.rs"]
mod rules_images;
#[path = "rules_probes_hooks_termination.rs"]
mod rules_probes_hooks_termination;
#[path = "rules_resize.rs"]
mod rules_resize;
#[path = "rules_restart_all.rs"]
mod rules_restart_all;
#[path = "rules_sandbox.rs"]
mod rules_sandbox;
#[path = "status_conditions.rs"]
mod status_conditions;
#[path = "status_phase.rs"]
mod status_phase;
#[path = "stories.rs"]
mod stories;
#[path = "timeline.rs"]
mod timeline;
