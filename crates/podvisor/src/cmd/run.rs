//! `podvisor run FILE... [--output text|json]` (being built).

use std::path::PathBuf;

/// Arguments of `podvisor run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Pod manifests (YAML or JSON).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// Runs the pods in the foreground.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    anyhow::bail!("podvisor run is not built yet ({} files)", args.files.len())
}
