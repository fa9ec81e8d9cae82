//! podvisor-api's integration tests, linked as one test binary (one per file would mean
//! seven links on a 2-core machine). Each file is a module named after it.

mod common;

#[path = "decode.rs"]
mod decode;
#[path = "defaults.rs"]
mod defaults;
#[path = "examples.rs"]
mod examples;
#[path = "feature_gates.rs"]
mod feature_gates;
#[path = "pod_rules.rs"]
mod pod_rules;
#[path = "pod_security.rs"]
mod pod_security;
#[path = "updates.rs"]
mod updates;
#[path = "validation_containers.rs"]
mod validation_containers;
#[path = "validation_pod.rs"]
mod validation_pod;
