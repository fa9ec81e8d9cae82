//! cgroup (in progress)
