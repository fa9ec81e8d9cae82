//! `podvisor logs NAME [-c C] [-f] [-p] [--tail N] [--timestamps] [-n NS]`: `kubectl logs`
//! against the running `podvisor serve` (`pods/{name}/log`). Without `-c` the container is
//! chosen as kubectl does: the `kubectl.kubernetes.io/default-container` annotation, else the
//! first container, saying so on stderr when the pod has others. Exit status 0, or 1 after an
//! error printed like kubectl's.

use std::io::Write;

use serde_json::Value;

use crate::client::api::{pod_names, pod_path};
use crate::client::{ApiError, Client, ConnArgs, block_on, query_escape, report};

const DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";

/// Arguments of `podvisor logs`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The pod (`NAME` or `pod/NAME`).
    pub pod: String,
    /// The container (default: as kubectl picks it).
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    /// Keep streaming new output.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// The previous (terminated) instance of the container.
    #[arg(short = 'p', long)]
    pub previous: bool,
    /// Only the last N lines (-1: all).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub tail: i64,
    /// Prefix each line with its RFC 3339 timestamp.
    #[arg(long)]
    pub timestamps: bool,
    /// The namespace (default: the kubeconfig context's, else `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// Runs `logs`; returns the exit code.
///
/// # Errors
///
/// None: failures are printed like kubectl's and give exit code 1.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    let (resource, rest) = if args.pod.contains('/') {
        (args.pod.clone(), Vec::new())
    } else {
        ("pods".to_owned(), vec![args.pod.clone()])
    };
    let result = pod_names(&resource, &rest).and_then(|names| {
        let name = names.into_iter().next().unwrap_or_default();
        let client = args.conn.client()?;
        block_on(logs(&client, args, &name))?
    });
    Ok(result.unwrap_or_else(|e| report(&e)))
}

async fn logs(client: &Client, args: &Args, name: &str) -> anyhow::Result<i32> {
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    // kubectl looks the pod up first, whatever the flags.
    let pod = match client.get(&pod_path(&namespace, name)).await {
        Ok(pod) => pod,
        Err(e)
            if e.downcast_ref::<ApiError>()
                .is_some_and(ApiError::is_not_found) =>
        {
            anyhow::bail!(
                "error from server (NotFound): pods {name:?} not found in namespace {namespace:?}"
            )
        }
        Err(e) => return Err(e),
    };
    let container = match &args.container {
        Some(c) => c.clone(),
        None => default_container(&pod)?,
    };
    let mut query = vec![format!("container={}", query_escape(&container))];
    if args.follow {
        query.push("follow=true".to_owned());
    }
    if args.previous {
        query.push("previous=true".to_owned());
    }
    if args.tail >= 0 {
        query.push(format!("tailLines={}", args.tail));
    }
    if args.timestamps {
        query.push("timestamps=true".to_owned());
    }
    let path = format!("{}/log?{}", pod_path(&namespace, name), query.join("&"));
    let mut stream = client.stream(&path, "*/*").await?;
    let mut out = std::io::stdout().lock();
    while let Some(chunk) = stream.chunk().await? {
        // A closed stdout (e.g. piped into `head`) ends the command quietly.
        if out.write_all(&chunk).and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    Ok(0)
}

/// kubectl's `FindOrDefaultContainerByName` with no name given.
fn default_container(pod: &Value) -> anyhow::Result<String> {
    let names = |key: &str| -> Vec<String> {
        pod.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect()
    };
    let (containers, init, ephemeral) = (
        names("containers"),
        names("initContainers"),
        names("ephemeralContainers"),
    );
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(wanted) = pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(DEFAULT_CONTAINER))
        .and_then(Value::as_str)
        .filter(|w| !w.is_empty())
    {
        if containers
            .iter()
            .chain(&init)
            .chain(&ephemeral)
            .any(|c| c == wanted)
        {
            return Ok(wanted.to_owned());
        }
        eprintln!("Default container name {wanted:?} not found in pod {pod_name}");
    }
    let first = containers
        .first()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("pod {pod_name} has no containers"))?;
    if containers.len() > 1 || !init.is_empty() || !ephemeral.is_empty() {
        let all: Vec<String> = containers
            .iter()
            .cloned()
            .chain(init.iter().map(|c| format!("{c} (init)")))
            .chain(ephemeral.iter().map(|c| format!("{c} (ephem)")))
            .collect();
        eprintln!("Defaulted container {first:?} out of: {}", all.join(", "));
    }
    Ok(first)
}
