//! `podvisor get pods [NAME] [-n NS | -A] [-w] [-o wide|json|yaml|name]`: `kubectl get pods`
//! against the running `podvisor serve`.
//!
//! The table comes from the server (`as=Table`, what kubectl shows) when it offers one, else
//! each row is computed here with `podvisor_lifecycle::kubectl::pod_row` (the same rules).
//! `-w` prints the current pods, then one line per change (columns keep their widths, as
//! kubectl's do). Exit status 0, or 1 after an error printed like kubectl's.

use hyper::Method;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use podvisor_lifecycle::kubectl::{
    header_cells, line_with_widths, pod_row, remember_widths, row_cells, table_text,
};
use serde_json::Value;

use crate::client::api::{
    as_list, json_text, pod_names, pod_path, pods_path, with_kind, yaml_text,
};
use crate::client::{
    ApiError, Client, ConnArgs, JSON, TABLE_ACCEPT, block_on, query_escape, report,
};

/// Output formats of `get`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The table with IP, NODE, NOMINATED NODE and READINESS GATES.
    Wide,
    /// The objects as JSON (a `List` for several).
    Json,
    /// The objects as YAML (a `List` for several).
    Yaml,
    /// `pod/NAME` per pod.
    Name,
}

/// Arguments of `podvisor get`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The resource type, `pods` (or `pod/NAME`).
    pub resource: String,
    /// Only this pod.
    pub name: Option<String>,
    /// The namespace (default: the kubeconfig context's, else `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Pods of every namespace (adds a NAMESPACE column).
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// After listing, watch for changes and print each one.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// Output format (default: the table).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// Runs `get`; returns the exit code.
///
/// # Errors
///
/// None: failures are printed like kubectl's and give exit code 1.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    let rest: Vec<String> = args.name.iter().cloned().collect();
    let result = pod_names(&args.resource, &rest).and_then(|names| {
        if names.len() > 1 {
            anyhow::bail!("only one pod name is supported");
        }
        let client = args.conn.client()?;
        block_on(get(&client, args, names.into_iter().next()))?
    });
    Ok(result.unwrap_or_else(|e| report(&e)))
}

/// Where the rows go: the namespace column and table flavour.
struct Shape {
    wide: bool,
    all_namespaces: bool,
}

impl Shape {
    fn header(&self) -> Vec<String> {
        let mut h = header_cells(self.wide);
        if self.all_namespaces {
            h.insert(0, "NAMESPACE".to_owned());
        }
        h
    }

    /// A row computed here from the pod object.
    fn row(&self, pod: &Value, now: Timestamp) -> anyhow::Result<Vec<String>> {
        let typed: Pod = serde_json::from_value(pod.clone())?;
        let mut cells = row_cells(&pod_row(&typed, now), self.wide);
        if self.all_namespaces {
            cells.insert(0, typed.metadata.namespace.unwrap_or_default());
        }
        Ok(cells)
    }
}

async fn get(client: &Client, args: &Args, name: Option<String>) -> anyhow::Result<i32> {
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let shape = Shape {
        wide: args.output == Some(Output::Wide),
        all_namespaces: args.all_namespaces,
    };
    if args.watch {
        return watch(client, args, &shape, &namespace, name.as_deref()).await;
    }
    let path = match (&name, args.all_namespaces) {
        (Some(n), _) => pod_path(&namespace, n),
        (None, true) => pods_path(None),
        (None, false) => pods_path(Some(&namespace)),
    };
    match args.output {
        None | Some(Output::Wide) => {
            let answer = client.call(Method::GET, &path, TABLE_ACCEPT, None).await?;
            let lines = if answer.get("kind").and_then(Value::as_str) == Some("Table") {
                server_table(&answer, &shape)
            } else {
                let now = Timestamp::now();
                let mut lines = vec![shape.header()];
                for pod in objects(&answer) {
                    lines.push(shape.row(pod, now)?);
                }
                lines
            };
            if lines.len() <= 1 {
                no_resources(args.all_namespaces, &namespace);
            } else {
                print!("{}", table_text(&lines));
            }
        }
        Some(format) => {
            let answer = client.get(&path).await?;
            let is_list = answer.get("items").is_some();
            if format == Output::Name {
                if is_list && objects(&answer).is_empty() {
                    no_resources(args.all_namespaces, &namespace);
                }
                for pod in objects(&answer) {
                    println!("pod/{}", object_name(pod));
                }
            } else {
                let shown = if is_list {
                    as_list(&answer, "Pod")
                } else {
                    with_kind(answer, "Pod")
                };
                print_object(&shown, format, false)?;
            }
        }
    }
    Ok(0)
}

/// kubectl's message for an empty list (on stderr).
fn no_resources(all_namespaces: bool, namespace: &str) {
    if all_namespaces {
        eprintln!("No resources found");
    } else {
        eprintln!("No resources found in {namespace} namespace.");
    }
}

/// The pods of a list answer, or the one pod of a single answer.
fn objects(answer: &Value) -> Vec<&Value> {
    match answer.get("items") {
        Some(items) => items.as_array().into_iter().flatten().collect(),
        None => vec![answer],
    }
}

fn object_name(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Prints one object as JSON or YAML; YAML documents after the first are separated by `---`.
fn print_object(v: &Value, format: Output, separate: bool) -> anyhow::Result<()> {
    match format {
        Output::Json => print!("{}", json_text(v)),
        Output::Yaml => {
            if separate {
                println!("---");
            }
            print!("{}", yaml_text(v));
        }
        Output::Name => println!("pod/{}", object_name(v)),
        Output::Wide => {}
    }
    Ok(())
}

/// A `meta.k8s.io` `Table` as kubectl prints it: the priority-0 columns (all with `-o wide`),
/// upper-cased headers, the row's namespace first with `-A`.
fn server_table(table: &Value, shape: &Shape) -> Vec<Vec<String>> {
    let columns: Vec<&Value> = table
        .get("columnDefinitions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let shown: Vec<usize> = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| shape.wide || c.get("priority").and_then(Value::as_i64).unwrap_or(0) == 0)
        .map(|(i, _)| i)
        .collect();
    let mut header: Vec<String> = shown
        .iter()
        .map(|&i| {
            columns[i]
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_uppercase()
        })
        .collect();
    if shape.all_namespaces {
        header.insert(0, "NAMESPACE".to_owned());
    }
    let mut lines = vec![header];
    for row in table
        .get("rows")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let cells = row.get("cells").and_then(Value::as_array);
        let mut line: Vec<String> = shown
            .iter()
            .map(|&i| {
                cells
                    .and_then(|c| c.get(i))
                    .map(cell_text)
                    .unwrap_or_default()
            })
            .collect();
        if shape.all_namespaces {
            let ns = row
                .pointer("/object/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            line.insert(0, ns.to_owned());
        }
        lines.push(line);
    }
    lines
}

/// A table cell as kubectl's table printer writes it: strings up to the first line break
/// (then `...`), other values in their plain form, nothing for null.
fn cell_text(cell: &Value) -> String {
    match cell {
        Value::Null => String::new(),
        Value::String(s) => match s.find(['\n', '\r', '\x0c']) {
            Some(i) => format!("{}...", &s[..i]),
            None => s.clone(),
        },
        other => other.to_string(),
    }
}

/// `-w`: the current pods, then every change, until the server ends the watch.
async fn watch(
    client: &Client,
    args: &Args,
    shape: &Shape,
    namespace: &str,
    name: Option<&str>,
) -> anyhow::Result<i32> {
    let ns = (!args.all_namespaces).then_some(namespace);
    let base = pods_path(ns);
    let selector = name
        .map(|n| {
            format!(
                "fieldSelector={}",
                query_escape(&format!("metadata.name={n}"))
            )
        })
        .unwrap_or_default();
    // A single pod must exist, as kubectl checks before watching.
    if let Some(n) = name {
        client.get(&pod_path(namespace, n)).await?;
    }
    let list_path = if selector.is_empty() {
        base.clone()
    } else {
        format!("{base}?{selector}")
    };
    let list = client.get(&list_path).await?;
    let version = list
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut printer = WatchPrinter {
        shape,
        output: args.output,
        widths: Vec::new(),
        printed: 0,
    };
    // The listed pods are laid out together, as kubectl prints its first table.
    printer.print(&objects(&list))?;
    let mut query = format!("watch=1&resourceVersion={}", query_escape(&version));
    if !selector.is_empty() {
        query = format!("{query}&{selector}");
    }
    let mut stream = client.stream(&format!("{base}?{query}"), JSON).await?;
    while let Some(line) = stream.line().await? {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let event: Value = serde_json::from_slice(&line)?;
        let object = event.get("object").cloned().unwrap_or(Value::Null);
        match event.get("type").and_then(Value::as_str) {
            Some("ERROR") => {
                let body = serde_json::to_vec(&object)?;
                let code = object.get("code").and_then(Value::as_u64).unwrap_or(500);
                let code = hyper::StatusCode::from_u16(u16::try_from(code).unwrap_or(500))
                    .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
                return Err(ApiError::from_response(code, &body).into());
            }
            Some("BOOKMARK") => {}
            _ => printer.print(&[&object])?,
        }
    }
    Ok(0)
}

/// Prints watched pods one at a time.
struct WatchPrinter<'a> {
    shape: &'a Shape,
    output: Option<Output>,
    widths: Vec<usize>,
    printed: usize,
}

impl WatchPrinter<'_> {
    /// Prints `pods` as one block: the header first if nothing was printed yet, and column
    /// widths that only grow (`tabwriter.RememberWidths`).
    fn print(&mut self, pods: &[&Value]) -> anyhow::Result<()> {
        use std::io::Write;
        match self.output {
            None | Some(Output::Wide) => {
                let now = Timestamp::now();
                let mut lines = Vec::new();
                if self.printed == 0 && !pods.is_empty() {
                    lines.push(self.shape.header());
                }
                for pod in pods {
                    lines.push(self.shape.row(pod, now)?);
                }
                for line in &lines {
                    remember_widths(&mut self.widths, line);
                }
                let text: String = lines
                    .iter()
                    .map(|l| line_with_widths(l, &self.widths))
                    .collect();
                print!("{text}");
                self.printed += pods.len();
            }
            Some(format) => {
                for pod in pods {
                    let shown = with_kind((*pod).clone(), "Pod");
                    print_object(&shown, format, self.printed > 0)?;
                    self.printed += 1;
                }
            }
        }
        let _ = std::io::stdout().flush();
        Ok(())
    }
}
