//! podvisor-api: Pod manifests as the Kubernetes API server sees them.
//!
//! What it does:
//! - [`decode`]: turns JSON or multi-document YAML text into
//!   [`k8s_openapi::api::core::v1::Pod`]s, rejecting (or reporting) unknown
//!   fields by path like kubectl's strict field validation;
//! - [`defaults`]: applies the API server's defaulting
//!   (`pkg/apis/core/v1/defaults.go`);
//! - [`gates`]: drops the fields of feature gates that are off by default
//!   (`dropDisabledFields`), before validation;
//! - [`feature_gates`]: the gates `--feature-gates` may turn on (KEP-5532's
//!   `RestartAllContainersOnContainerExits`), threaded to validation and the lifecycle core;
//! - [`resources`]: a pod's aggregate container requests and limits, as
//!   pod-level resources (V15) use them;
//! - [`validation`]: validates a Pod on create, on update (spec
//!   mutability) and on status update, returning *every* error with
//!   Kubernetes' field paths and messages, and formats them the way kubectl
//!   prints an `Invalid` status (`The Pod "web" is invalid: ...`);
//! - [`pod`]: the pod rules several crates share (sidecar test, `ContainerShouldRestart`, QoS,
//!   the kubelet's condition types); [`gotext`]: Go's `%q` and duration text; [`meta`]: object
//!   identities (UUIDs, `generateName` suffixes);
//! - [`pod_security`]: Pod Security Admission's levels, checks and decisions (pure; the API
//!   server reads the namespace and pods);
//! - [`scheduling`]: kube-scheduler's filters, taints and tolerations, and the
//!   `DefaultTolerationSeconds` admission rule;
//! - [`lint`]: `podvisor lint`'s rules, lifecycle mistakes the API server accepts (pods and
//!   workloads' pod templates).
//!
//! What it does not do: any IO (callers read files and stdin; the one exception is the
//! kernel's random generator behind [`meta`]), any lifecycle decision, or admission beyond
//! validation (no quota or service-account plugins; Pod Security's decisions are pure functions in
//! [`pod_security`], applied by the API server).
//!
//! Typical use:
//!
//! ```
//! use podvisor_api::{apply_defaults, decode_pods, drop_disabled_fields, validate_pod};
//!
//! let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: app, image: busybox, command: [sleep, '1']}\n";
//! let mut pods = decode_pods(text, "web.yaml").unwrap();
//! apply_defaults(&mut pods[0]);
//! drop_disabled_fields(&mut pods[0], None);
//! assert!(validate_pod(&pods[0]).is_ok());
//! ```

pub use k8s_openapi;

pub mod config;
pub mod decode;
pub mod defaults;
pub mod feature_gates;
pub mod gates;
pub mod gotext;
pub mod lint;
pub mod meta;
pub mod pod;
pub mod pod_security;
pub mod quantity;
pub mod references;
pub mod resources;
pub mod scheduling;
pub mod validation;

pub use decode::{
    DecodeError, DecodedPod, DocumentRef, FieldValidation, Manifest, decode_manifest, decode_pods,
    decode_pods_lenient, decode_pods_with,
};
pub use defaults::apply_defaults;
pub use feature_gates::{Feature, FeatureGateError, FeatureGates, missing_gate_hint};
pub use gates::drop_disabled_fields;
pub use validation::{
    ErrorKind, FieldError, ValidationErrors, drop_non_resize_updates,
    validate_ephemeral_containers_update, validate_pod, validate_pod_resize, validate_pod_update,
    validate_pod_with_gates, validate_static_pod_references, validate_status_update,
};
