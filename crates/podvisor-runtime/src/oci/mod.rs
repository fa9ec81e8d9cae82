//! The building blocks of the `oci` runtime backend: real images in real containers, with the
//! per-pod shim still the parent, subreaper and log writer of every container process.
//!
//! - [`spec`]: a container's OCI runtime spec, built purely from the pod, the container, the
//!   image config and what the node prepared (mounts, namespaces, cgroup path), with the
//!   kubelet's and containerd's rules and messages.
//! - [`user`]: the image's user database read inside the root, and the user a container runs
//!   as.
//! - [`rootfs`]: a container's root filesystem: an overlay of the image's layer directories
//!   and a writable upper directory (a copy where overlayfs is missing), and `subPath` sources
//!   prepared so that no container can swap them.
//! - [`executor`]: [`executor::OciExecutor`], the narrow seam to the OCI runtime, and
//!   [`executor::Runc`], which drives runc's command line, Debian's `runc` or podvisor's own
//!   `podvisor youki` (youki's libcontainer; [`executor::RuncMode::Youki`]), so
//!   that the container's init process becomes a child of the calling subreaper.
//! - [`ahead`]: youki's helper started ahead of the container it will run, called over a
//!   socket instead of spawned.
//!
//! Nothing here decides when a container starts or stops, and nothing here knows the shim's
//! protocol: the backend assembles these pieces.

pub mod ahead;
pub mod executor;
pub mod launch;
pub mod rootfs;
pub mod spec;
pub mod user;
