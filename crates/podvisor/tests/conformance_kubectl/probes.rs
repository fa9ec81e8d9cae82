//! Translations of the upstream e2e tests on probes (scenarios 28-45) that the
//! document does not spell out, in its form (manifests under `tests/conformance/`).

#[allow(unused_imports)]
use super::harness::*;
#[allow(unused_imports)]
use crate::conformance_support::*;
#[allow(unused_imports)]
use serde_json::Value;
#[allow(unused_imports)]
use std::time::{Duration, Instant};

pub(crate) const SCENARIOS: &[(&str, ScenarioFn)] = &[];
