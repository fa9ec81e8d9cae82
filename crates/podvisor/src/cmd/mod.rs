//! One module per subcommand.

pub mod apply;
pub mod container_log_args;
pub mod dashboard;
pub mod dashboard_pod;
pub mod delete;
pub mod describe;
pub mod get;
pub mod image;
pub mod lint;
pub mod logs;
pub mod run;
pub mod run_logs;
mod run_print;
pub mod run_text;
pub mod runtime_args;
pub mod serve;
mod serve_objects;
pub mod simulate;
pub mod state_lock;
pub mod validate;

/// The value parser of every `--feature-gates` flag: kube's `A=true,B=false` syntax.
pub(crate) fn parse_feature_gates(
    text: &str,
) -> Result<podvisor_api::FeatureGates, podvisor_api::FeatureGateError> {
    podvisor_api::FeatureGates::parse(text)
}
