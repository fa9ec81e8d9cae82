//! What the real-process tests of the runtime share: the root check and the shim binary.

use std::path::{Path, PathBuf};

/// Checks that the test runs as root (cgroups and mount namespaces need it). The tests that
/// call it are `#[ignore]`d, so only a run as root with `--include-ignored` gets here; anything
/// else fails: a skip must never count as a pass.
pub fn require_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "needs root: this test is #[ignore]d unless run as root with --include-ignored (the process runtime needs cgroups and mount namespaces)"
    );
}

/// The shim: `$PODVISOR_BIN`, else `target/<profile>/podvisor` next to this test's `deps/`
/// directory, built with `cargo build -p podvisor` when missing.
pub fn shim_exe() -> PathBuf {
    if let Some(bin) = std::env::var_os("PODVISOR_BIN") {
        return PathBuf::from(bin);
    }
    // target/<profile>/deps/<test>-<hash> → target/<profile>/podvisor
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = profile_dir.join("podvisor");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "--quiet", "-p", "podvisor", "--bin", "podvisor"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("running cargo build -p podvisor");
        assert!(status.success(), "cargo build -p podvisor failed");
    }
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p podvisor`",
        bin.display()
    );
    bin
}
