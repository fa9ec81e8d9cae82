//! `podvisor describe pod [NAME] [-n NS]`: `kubectl describe pod` against the running
//! `podvisor serve`: the pod and the events about it (`involvedObject` name, namespace and
//! uid, as kubectl asks), printed by `podvisor_lifecycle::kubectl::describe_pod_in` in the
//! local time zone. Without a name every pod of the namespace is described. Exit status 0, or
//! 1 after an error printed like kubectl's.

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;
use podvisor_lifecycle::kubectl::describe_pod_in;
use serde_json::Value;

use crate::client::api::{pod_names, pod_path, pods_path};
use crate::client::{Client, ConnArgs, block_on, query_escape, report};

/// Arguments of `podvisor describe`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The resource type, `pod` (or `pod/NAME`).
    pub resource: String,
    /// The pods to describe (default: every pod of the namespace).
    pub names: Vec<String>,
    /// The namespace (default: the kubeconfig context's, else `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// Runs `describe`; returns the exit code.
///
/// # Errors
///
/// None: failures are printed like kubectl's and give exit code 1.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    let result = pod_names(&args.resource, &args.names).and_then(|names| {
        let client = args.conn.client()?;
        block_on(describe(&client, args, &names))?
    });
    Ok(result.unwrap_or_else(|e| report(&e)))
}

async fn describe(client: &Client, args: &Args, names: &[String]) -> anyhow::Result<i32> {
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let zone = TimeZone::try_system().unwrap_or(TimeZone::UTC);
    let pods: Vec<Value> = if names.is_empty() {
        let list = client.get(&pods_path(Some(&namespace))).await?;
        let items = list
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if items.is_empty() {
            eprintln!("No resources found in {namespace} namespace.");
        }
        items
    } else {
        let mut pods = Vec::new();
        for name in names {
            pods.push(client.get(&pod_path(&namespace, name)).await?);
        }
        pods
    };
    for (i, pod) in pods.into_iter().enumerate() {
        let pod: Pod = serde_json::from_value(pod)?;
        // kubectl ignores a failed event search and describes the pod without events.
        let events = events_of(client, &pod).await.unwrap_or_default();
        let text = describe_pod_in(&pod, &events, Timestamp::now(), &zone);
        if i == 0 {
            print!("{text}");
        } else {
            print!("\n\n{text}");
        }
    }
    Ok(0)
}

/// The events whose `involvedObject` is this pod, following `continue` tokens.
async fn events_of(client: &Client, pod: &Pod) -> anyhow::Result<Vec<Event>> {
    let meta = &pod.metadata;
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let mut selector = vec![
        format!(
            "involvedObject.name={}",
            meta.name.as_deref().unwrap_or_default()
        ),
        format!("involvedObject.namespace={namespace}"),
    ];
    if let Some(uid) = meta.uid.as_deref().filter(|u| !u.is_empty()) {
        selector.push(format!("involvedObject.uid={uid}"));
    }
    let base = format!(
        "/api/v1/namespaces/{}/events?fieldSelector={}&limit=500",
        query_escape(namespace),
        query_escape(&selector.join(","))
    );
    let mut events = Vec::new();
    let mut next = String::new();
    loop {
        let path = if next.is_empty() {
            base.clone()
        } else {
            format!("{base}&continue={}", query_escape(&next))
        };
        let list = client.get(&path).await?;
        for item in list
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            events.push(serde_json::from_value(item.clone())?);
        }
        next = list
            .pointer("/metadata/continue")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if next.is_empty() {
            return Ok(events);
        }
    }
}
