//! Where a pod may run: kube-scheduler's filters and the taint and toleration rules the
//! scheduler, the taint-eviction controller and admission share, as Kubernetes keeps them in
//! `component-helpers/scheduling/corev1` and `pkg/scheduler/framework/plugins`.
//!
//! - [`taints`]: `ToleratesTaint`, `FindMatchingUntoleratedTaint`, the taint-eviction
//!   controller's `GetMatchingTolerations` and `getMinTolerationTime`, and the
//!   `DefaultTolerationSeconds` admission plugin;
//! - [`affinity`]: `nodeSelector` and required node affinity
//!   (`GetRequiredNodeAffinity(pod).Match(node)`);
//! - [`fit`]: a pod's requests as the scheduler counts them (`PodRequests`) and
//!   NodeResourcesFit's check against a node's allocatable minus its pods';
//! - [`ports`]: NodePorts' host port conflicts;
//! - [`filters`]: the filters in kube-scheduler's order over one node and its pods, and the
//!   `FitError` text of a pod that fits no node.
//!
//! Pure: no IO, no clock.

pub mod affinity;
pub mod filters;
pub mod fit;
pub mod ports;
pub mod taints;

pub use filters::{Code, NodeInfo, Rejection, fit_error_message, run_filters};
