//! `podvisor delete pod NAME... [--grace-period N] [--force] [--wait=false] [-n NS]`:
//! `kubectl delete pod` against the running `podvisor serve`. Prints `pod "NAME" deleted`
//! (`force deleted` with `--force`) once the server accepted the deletion, then, like kubectl,
//! waits until the pods are gone (their containers stopped within the grace period) unless
//! `--wait=false`. Exit status 0, or 1 if any deletion failed.

use std::time::Duration;

use hyper::Method;
use serde_json::{Value, json};

use crate::client::api::{pod_names, pod_path};
use crate::client::{ApiError, Body, Client, ConnArgs, JSON, block_on, report};

/// How often a deleted pod is looked for while waiting.
const POLL: Duration = Duration::from_millis(200);

/// Arguments of `podvisor delete`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The resource type, `pod` (or `pod/NAME`).
    pub resource: String,
    /// The pods to delete.
    pub names: Vec<String>,
    /// Seconds the pods get to stop (-1: each pod's own terminationGracePeriodSeconds; 0 is
    /// taken as 1 unless --force).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub grace_period: i64,
    /// Remove the pods from the API at once, without waiting for their containers to stop.
    #[arg(long)]
    pub force: bool,
    /// Wait until the pods are gone.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          default_missing_value = "true", require_equals = true)]
    pub wait: bool,
    /// The namespace (default: the kubeconfig context's, else `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// Runs `delete`; returns the exit code.
///
/// # Errors
///
/// None: failures are printed like kubectl's and give exit code 1.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    let result = pod_names(&args.resource, &args.names).and_then(|names| {
        if names.is_empty() {
            anyhow::bail!("resource(s) were provided, but no name was specified");
        }
        let client = args.conn.client()?;
        block_on(delete(&client, args, &names))
    });
    Ok(result.unwrap_or_else(|e| report(&e)))
}

/// kubectl's grace period rules: unset stays unset; 0 means 1 unless forced; forced means 0.
fn grace_period(requested: i64, force: bool) -> Option<i64> {
    match (requested, force) {
        (0, false) => Some(1),
        (g, true) if g < 0 => Some(0),
        (g, _) if g < 0 => None,
        (g, _) => Some(g),
    }
}

async fn delete(client: &Client, args: &Args, names: &[String]) -> i32 {
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let grace = grace_period(args.grace_period, args.force);
    if args.force {
        eprintln!(
            "Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely."
        );
    }
    let mut options =
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"});
    if let Some(g) = grace {
        options["gracePeriodSeconds"] = json!(g);
    }
    let mut code = 0;
    let mut deleted = Vec::new();
    for name in names {
        let path = pod_path(&namespace, name);
        match client
            .call(Method::DELETE, &path, JSON, Some(Body::json(&options)))
            .await
        {
            Ok(answer) => {
                let verb = if args.force {
                    "force deleted"
                } else {
                    "deleted"
                };
                println!("pod {name:?} {verb}");
                // The pod the deletion applies to; a newer pod of the same name is not waited for.
                let uid = answer
                    .pointer("/metadata/uid")
                    .or_else(|| answer.pointer("/details/uid"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                deleted.push((path, uid));
            }
            Err(e) => code = report(&e),
        }
    }
    if args.wait {
        for (path, uid) in deleted {
            if let Err(e) = wait_gone(client, &path, uid.as_deref()).await {
                code = report(&e);
            }
        }
    }
    code
}

/// Polls until the pod at `path` is gone (or replaced by one with another uid).
async fn wait_gone(client: &Client, path: &str, uid: Option<&str>) -> anyhow::Result<()> {
    loop {
        match client.get(path).await {
            Err(e)
                if e.downcast_ref::<ApiError>()
                    .is_some_and(ApiError::is_not_found) =>
            {
                return Ok(());
            }
            Err(e) => return Err(e),
            Ok(pod) => {
                let now = pod.pointer("/metadata/uid").and_then(Value::as_str);
                if uid.is_some() && now != uid {
                    return Ok(());
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::grace_period;

    #[test]
    fn grace_periods_as_kubectl_resolves_them() {
        assert_eq!(grace_period(-1, false), None);
        assert_eq!(grace_period(0, false), Some(1));
        assert_eq!(grace_period(5, false), Some(5));
        assert_eq!(grace_period(-1, true), Some(0));
        assert_eq!(grace_period(0, true), Some(0));
        assert_eq!(grace_period(3, true), Some(3));
    }
}
