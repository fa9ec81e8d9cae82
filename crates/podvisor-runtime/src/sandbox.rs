//! Pod sandbox building blocks for runtimes that isolate a pod's network: the pod's
//! namespaces held without a pause process ([`netns`]), CNI plugin invocation and the default
//! bridge network ([`cni`]), and the `/etc/hosts`, `/etc/resolv.conf` and `/etc/hostname` the
//! kubelet gives a pod ([`etc_files`]).
//!
//! Each piece stands alone and knows nothing of the others, of shims or of OCI: a backend
//! creates the namespaces, runs the pod's network through CNI into `net_path()`, writes the
//! files with the pod IPs it got, and points its containers at them (namespace paths in the
//! OCI spec, bind mounts of the files). Tear-down is the reverse: CNI `DEL`, then removal of
//! the namespaces and files. Nothing here decides when; the lifecycle core does.

pub mod cni;
pub mod etc_files;
pub mod netns;
pub mod pods_mount;
pub mod pool;
