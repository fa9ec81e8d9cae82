//! podvisor's image store: what the OCI runtime runs containers from.
//!
//! - [`Reference`]: image names parsed and normalised as Kubernetes and containerd do
//!   (`busybox` → `docker.io/library/busybox:latest`); a bad one is the kubelet's
//!   `InvalidImageName`. The API server's `imagePullPolicy` default is
//!   `podvisor_api::defaults::default_pull_policy` (not repeated here).
//! - [`ImageStore`]: a content-addressed store under `<state-dir>/images` — verified blobs by
//!   digest, an index of images by id (config digest) with their tags and repo digests, and
//!   layers unpacked once per diff id into directories overlayfs takes as lower dirs
//!   ([`Image::layers`], bottom first).
//! - [`ImageStore::pull`] from registries (anonymous, Basic, Bearer tokens; credentials from a
//!   Docker `config.json`: [`RegistryConfig`]); [`ImageStore::load`] of `docker save` and
//!   OCI-layout archives; [`ImageStore::gc`] by disk use, as the kubelet's image GC.
//!
//! - [`PullRecords`]: the kubelet's image pull records (which credentials each image the node
//!   pulled was pulled with) and [`pull_records::verify::must_attempt_pull`], its
//!   `MustAttemptImagePull` under 1.35's default `NeverVerifyPreloadedImages`.
//!
//! It does not decide when to pull (pull policy, back-off, events: the runtime and the core
//! do), mount anything, or run containers.

mod auth;
mod digest;
mod error;
mod events;
mod fsutil;
mod load;
mod manifest;
mod progress;
mod pull;
pub mod pull_records;
mod reference;
mod store;
mod unpack;

/// The OCI image types [`Image::config`] is made of (the version this crate uses).
pub use oci_spec;

pub use auth::{Credentials, Mirror, RegistryConfig};
pub use digest::{Digest, chain_id};
pub use error::{Error, Result};
pub use events::pulled_message;
pub use manifest::MachinePlatform;
pub use progress::{NoProgress, Progress};
pub use pull::{PullOptions, PullReport};
pub use pull_records::{PullCredentials, PullRecords, PullSecret, PulledRecord};
pub use reference::{DEFAULT_DOMAIN, DEFAULT_TAG, Reference, ReferenceError};
pub use store::{GcReport, Image, ImageId, ImageStore, Removed};
