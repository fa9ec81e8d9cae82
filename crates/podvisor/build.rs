//! Links the `podvisor` binary as a position-dependent executable (`-no-pie`).
//!
//! The binary is executed far more often than a daemon usually is: every pod's shim, and
//! every OCI runtime call (`podvisor youki run`, `exec` for each exec probe, `kill`, `delete`)
//! is a fresh exec of it. As a position-independent executable, each of those execs first
//! applies ~58,000 relative relocations, which writes to (and so copies) the whole megabyte of
//! `.data.rel.ro`: ~0.9 ms of every exec here. Linked at a fixed address, those pointers are
//! resolved by the linker and the pages stay shared, clean page cache. The shared libraries,
//! the stack and the heap are still placed at random; only the executable's own image is not
//! (as in Go's default build mode on linux/amd64).

fn main() {
    println!("cargo:rustc-link-arg-bins=-no-pie");
    println!("cargo:rerun-if-changed=build.rs");
}
