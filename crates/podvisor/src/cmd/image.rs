//! `podvisor image pull|load|ls|rm|inspect`: the image store under `<state-dir>/images`
//! (`podvisor_image`), as `crictl pull|images|rmi|inspecti` and `ctr image import` do.
//! Exit status 0, 1 when an image could not be pulled, loaded or removed, 2 for bad usage.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Context;
use podvisor_image::{Digest, ImageStore, Progress, PullOptions, Reference, RegistryConfig};

/// Arguments of `podvisor image`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    /// The state directory (default: as `serve`'s); images live in its `images/`.
    #[arg(long, global = true)]
    state_dir: Option<PathBuf>,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Pull an image from its registry.
    Pull {
        /// The image (`busybox`, `host:5000/app:1.0`, `name@sha256:…`).
        image: String,
        /// Registry credentials: a Docker `config.json` (`auths`).
        #[arg(long)]
        registry_config: Option<PathBuf>,
        /// Talk plain HTTP to the registry (default: only to registries on this machine).
        #[arg(long)]
        plain_http: bool,
        /// No progress output.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Load images from a `docker save` archive or an OCI layout (tar or directory).
    Load {
        /// The archive or layout directory (as `podman load FILE` or `ctr image import FILE`).
        #[arg(
            value_name = "FILE",
            required_unless_present = "input",
            conflicts_with = "input"
        )]
        file: Option<PathBuf>,
        /// The archive or layout directory, as `docker load -i`.
        #[arg(long, short = 'i', value_name = "FILE")]
        input: Option<PathBuf>,
    },
    /// List images.
    #[command(alias = "list", alias = "images")]
    Ls {
        /// Only the image ids.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Remove images (every tag of each) and the content no other image uses.
    #[command(alias = "rmi", alias = "remove")]
    Rm {
        /// Images by name or id.
        #[arg(required = true)]
        images: Vec<String>,
    },
    /// Print what the store knows of an image, as JSON.
    Inspect {
        /// The image by name or id.
        image: String,
    },
}

/// Runs `podvisor image …`.
///
/// # Errors
///
/// The store cannot be opened, or the input is unusable.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    let state_dir = match &args.state_dir {
        Some(d) => d.clone(),
        None => super::serve::default_state_dir()?,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&state_dir)
        .with_context(|| format!("creating state directory {}", state_dir.display()))?;
    let store = ImageStore::open(state_dir.join("images"))?;
    match &args.command {
        Command::Pull {
            image,
            registry_config,
            plain_http,
            quiet,
        } => pull(
            &store,
            image,
            registry_config.as_deref(),
            *plain_http,
            *quiet,
        ),
        Command::Load { file, input } => {
            let Some(input) = file.as_ref().or(input.as_ref()) else {
                anyhow::bail!("image load needs the archive or layout: podvisor image load FILE");
            };
            let progress = LineProgress::new(!std::io::stderr().is_terminal());
            match store.load(input, &progress) {
                Ok(images) => {
                    for i in images {
                        let names = if i.repo_tags.is_empty() {
                            i.id.to_string()
                        } else {
                            i.repo_tags.join(", ")
                        };
                        println!("Loaded image: {names}");
                    }
                    Ok(0)
                }
                Err(e) => {
                    eprintln!("error: loading {}: {e}", input.display());
                    Ok(1)
                }
            }
        }
        Command::Ls { quiet } => {
            let images = store.list()?;
            if *quiet {
                for i in images {
                    println!("{}", i.id);
                }
                return Ok(0);
            }
            let mut rows = vec![[
                "IMAGE".to_owned(),
                "TAG".to_owned(),
                "IMAGE ID".to_owned(),
                "SIZE".to_owned(),
            ]];
            for i in &images {
                let size = human_size(i.size);
                if i.repo_tags.is_empty() {
                    let name = i
                        .repo_digests
                        .first()
                        .and_then(|d| d.split('@').next())
                        .unwrap_or("<none>");
                    rows.push([
                        name.to_owned(),
                        "<none>".to_owned(),
                        i.id.short().to_owned(),
                        size.clone(),
                    ]);
                }
                for t in &i.repo_tags {
                    let (name, tag) = t.rsplit_once(':').unwrap_or((t, ""));
                    rows.push([
                        name.to_owned(),
                        tag.to_owned(),
                        i.id.short().to_owned(),
                        size.clone(),
                    ]);
                }
            }
            print_table(&rows);
            Ok(0)
        }
        Command::Rm { images } => {
            let mut code = 0;
            for name in images {
                match store.remove(name) {
                    Ok(r) => {
                        for t in &r.repo_tags {
                            println!("Deleted: {t}");
                        }
                        println!("Deleted: {} ({} freed)", r.id, human_size(r.freed));
                    }
                    Err(e) => {
                        eprintln!("error: removing {name}: {e}");
                        code = 1;
                    }
                }
            }
            Ok(code)
        }
        Command::Inspect { image } => match store.inspect(image) {
            Ok(v) => {
                println!("{}", serde_json::to_string_pretty(&v)?);
                Ok(0)
            }
            Err(e) => {
                eprintln!("error: {e}");
                Ok(1)
            }
        },
    }
}

fn pull(
    store: &ImageStore,
    image: &str,
    registry_config: Option<&std::path::Path>,
    plain_http: bool,
    quiet: bool,
) -> anyhow::Result<i32> {
    let reference = match Reference::parse(image) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: InvalidImageName: {e}");
            return Ok(2);
        }
    };
    let config = registry_config.map(RegistryConfig::load).transpose()?;
    let options = PullOptions {
        plain_http: plain_http.then_some(true),
        ..PullOptions::for_reference(config.as_ref(), &reference)
    };
    let terminal = std::io::stderr().is_terminal();
    let progress = LineProgress::new(!terminal);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let started = Instant::now();
    let quiet_progress = podvisor_image::NoProgress;
    let p: &dyn Progress = if quiet { &quiet_progress } else { &progress };
    let result = runtime.block_on(store.pull(&reference, &options, p));
    if terminal && !quiet {
        eprint!("\r\x1b[K");
    }
    match result {
        Ok(report) => {
            let elapsed = started.elapsed();
            println!(
                "{}",
                podvisor_image::pulled_message(image, report.duration, elapsed, report.image.size)
            );
            println!(
                "Image ID: {}  ({} downloaded, {} of {} layers fetched, {}/s)",
                report.image.id,
                human_size(report.downloaded),
                report.layers_fetched,
                report.image.layers.len(),
                human_size(
                    (report.downloaded as f64 / report.duration.as_secs_f64().max(1e-3)) as u64
                ),
            );
            if let Some(d) = &report.image.repo_digest {
                println!("Digest: {d}");
            }
            Ok(0)
        }
        Err(e) => {
            eprintln!("error: ErrImagePull: {e}");
            Ok(1)
        }
    }
}

/// Progress on stderr: one line rewritten in place on a terminal, one line per finished
/// blob otherwise.
struct LineProgress {
    plain: bool,
    state: Mutex<(u64, u64, Instant)>,
}

impl LineProgress {
    fn new(plain: bool) -> LineProgress {
        LineProgress {
            plain,
            state: Mutex::new((0, 0, Instant::now())),
        }
    }
}

impl Progress for LineProgress {
    fn blob_started(&self, _digest: &Digest, size: u64, offset: u64) {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.1 += size.saturating_sub(offset);
    }

    fn blob_bytes(&self, _digest: &Digest, bytes: u64) {
        if self.plain {
            return;
        }
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.0 += bytes;
        if s.2.elapsed().as_millis() >= 100 {
            s.2 = Instant::now();
            eprint!(
                "\r\x1b[KDownloading {} / {}",
                human_size(s.0),
                human_size(s.1)
            );
            let _ = std::io::stderr().flush();
        }
    }

    fn blob_done(&self, digest: &Digest, cached: bool) {
        if self.plain {
            eprintln!("{} {}", if cached { "exists" } else { "fetched" }, digest);
        } else if !cached {
            let s = self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            eprint!(
                "\r\x1b[KDownloading {} / {}, unpacking",
                human_size(s.0),
                human_size(s.1)
            );
            let _ = std::io::stderr().flush();
        }
    }

    fn layer_unpacked(&self, diff_id: &Digest, cached: bool) {
        if self.plain {
            eprintln!(
                "{} layer {}",
                if cached { "have" } else { "unpacked" },
                diff_id
            );
        }
    }
}

fn human_size(n: u64) -> String {
    // crictl's units (decimal).
    let n = n as f64;
    if n >= 1e9 {
        format!("{:.3}GB", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.3}MB", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.3}kB", n / 1e3)
    } else {
        format!("{n}B")
    }
}

fn print_table(rows: &[[String; 4]]) {
    let widths: Vec<usize> = (0..4)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        println!("{}", line.join("   ").trim_end());
    }
}

use std::os::unix::fs::DirBuilderExt;
