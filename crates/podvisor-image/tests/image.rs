//! podvisor-image's tests, one binary: references, credentials, safe unpacking (tar-slip,
//! symlink and hard-link escapes, whiteouts through a real overlay mount), archive loads,
//! pulls from a real `docker-registry` (anonymous, basic auth, a corrupted blob, a
//! multi-platform index, resumed downloads, concurrent pulls), garbage collection and the
//! image pull records.
//! Images are built here (busybox-static as an OCI layout) and pushed with `skopeo`.
//! Tests that need root are `#[ignore]`d and fail, not skip, without it.

#[path = "support/mod.rs"]
mod support;

#[path = "image/gc.rs"]
mod gc;
#[path = "image/load.rs"]
mod load;
#[path = "image/pull.rs"]
mod pull;
#[path = "image/pull_records.rs"]
mod pull_records;
#[path = "image/reference.rs"]
mod reference;
#[path = "image/unpack.rs"]
mod unpack;
