//! Diagnostics through `tracing`: the agent's modules import `debug!` and `warning!` from here
//! (`warning!` is `tracing::warn!`), and the binary installs the subscriber (stderr, the level
//! from `--log-level`). Each pod worker runs inside a `pod` span naming its pod.

pub(crate) use tracing::{debug, warn as warning};
