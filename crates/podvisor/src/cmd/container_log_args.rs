//! The container log manager's flags of `serve` and `run`, with the kubelet's names,
//! defaults and checks: `--container-log-max-size`, `--container-log-max-files`,
//! `--container-log-monitor-interval`, `--container-log-max-workers`.

use std::sync::Arc;
#[cfg(test)]
use std::time::Duration;

use anyhow::bail;
use podvisor_lifecycle::sim::script::parse_duration;
use podvisor_runtime::Runtime;
use podvisor_runtime::logs::manager::{
    ContainerLogManager, LogManagerConfig, MIN_MONITOR_INTERVAL,
};
use podvisor_runtime::logs::rotation::LogRotatePolicy;

/// How containers' log files rotate.
#[derive(clap::Args, Debug, Clone)]
pub struct ContainerLogArgs {
    /// A running container's log file is rotated once it is this large (a quantity: 10Mi,
    /// 512Ki; a negative one turns rotation off), as the kubelet's `--container-log-max-size`.
    #[arg(long, default_value = "10Mi", allow_hyphen_values = true)]
    pub container_log_max_size: String,
    /// The most log files a container keeps, the current one included (older rotated files
    /// are gzip-compressed), as the kubelet's `--container-log-max-files` (at least 2).
    #[arg(long, default_value_t = 5)]
    pub container_log_max_files: i64,
    /// How often the logs are looked at, as the kubelet's `--container-log-monitor-interval`
    /// (at least 3s).
    #[arg(long, default_value = "10s")]
    pub container_log_monitor_interval: String,
    /// How many logs are rotated at once, as the kubelet's `--container-log-max-workers`.
    #[arg(long, default_value_t = 1)]
    pub container_log_max_workers: i64,
}

impl ContainerLogArgs {
    /// The manager's configuration, checked as the kubelet checks its own (`None`: rotation
    /// turned off by a negative size).
    ///
    /// # Errors
    ///
    /// A value the kubelet refuses, named by its flag.
    pub fn config(&self) -> anyhow::Result<Option<LogManagerConfig>> {
        let size = &self.container_log_max_size;
        let Some(quantity) = podvisor_api::quantity::Quantity::parse(size) else {
            bail!(
                "--container-log-max-size: failed to parse container log max size {size:?}: \
                 {}",
                podvisor_api::quantity::QUANTITY_SYNTAX_MSG
            );
        };
        if self.container_log_max_workers < 1 {
            bail!(
                "--container-log-max-workers: containerLogMaxWorkers must be greater than or equal to 1"
            );
        }
        let interval = parse_duration(&self.container_log_monitor_interval)
            .map_err(|e| anyhow::anyhow!("--container-log-monitor-interval: {e}"))?;
        if interval < MIN_MONITOR_INTERVAL {
            bail!(
                "--container-log-monitor-interval: containerLogMonitorInterval must be a \
                 positive time duration greater than or equal to 3s"
            );
        }
        let files = self.container_log_max_files;
        let size = quantity.value();
        // A negative count is named as given (the policy's own check sees counts only).
        let policy = usize::try_from(files)
            .map_err(|_| anyhow::anyhow!("invalid MaxFiles {files}, must be > 1"))
            .and_then(|files| {
                LogRotatePolicy::new(size.max(0).unsigned_abs(), files).map_err(Into::into)
            })
            .map_err(|e| anyhow::anyhow!("--container-log-max-files: {e}"))?;
        if size < 0 {
            return Ok(None);
        }
        Ok(Some(LogManagerConfig {
            policy,
            monitor_interval: interval,
            max_workers: usize::try_from(self.container_log_max_workers).unwrap_or(1),
        }))
    }

    /// Starts the container log manager over `runtime` (none when rotation is off); abort
    /// the task to stop it.
    ///
    /// # Errors
    ///
    /// As [`ContainerLogArgs::config`].
    pub fn spawn<R: Runtime>(
        &self,
        runtime: Arc<R>,
    ) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
        Ok(self
            .config()?
            .map(|config| tokio::spawn(ContainerLogManager::new(runtime, config).run())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(size: &str, files: i64, interval: &str, workers: i64) -> ContainerLogArgs {
        ContainerLogArgs {
            container_log_max_size: size.into(),
            container_log_max_files: files,
            container_log_monitor_interval: interval.into(),
            container_log_max_workers: workers,
        }
    }

    #[test]
    fn the_kubelets_defaults_and_checks() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            logs: ContainerLogArgs,
        }
        let config = Cli::parse_from(["x"]).logs.config().unwrap().unwrap();
        assert_eq!(config, LogManagerConfig::default());
        assert_eq!(config.policy.max_size, 10 * 1024 * 1024);
        assert_eq!(config.policy.max_files, 5);
        assert_eq!(config.monitor_interval, Duration::from_secs(10));
        assert_eq!(config.max_workers, 1);
        let off = Cli::parse_from(["x", "--container-log-max-size", "-1"]).logs;
        assert_eq!(off.config().unwrap(), None);
        let small = args("4Ki", 2, "3s", 2).config().unwrap().unwrap();
        assert_eq!((small.policy.max_size, small.policy.max_files), (4096, 2));

        let err = |a: ContainerLogArgs| a.config().unwrap_err().to_string();
        assert_eq!(
            err(args("10Mi", 1, "10s", 1)),
            "--container-log-max-files: invalid MaxFiles 1, must be > 1"
        );
        assert_eq!(
            err(args("10Mi", -3, "10s", 1)),
            "--container-log-max-files: invalid MaxFiles -3, must be > 1"
        );
        assert!(err(args("ten", 5, "10s", 1)).starts_with("--container-log-max-size: "));
        assert_eq!(
            err(args("10Mi", 5, "2s", 1)),
            "--container-log-monitor-interval: containerLogMonitorInterval must be a positive \
             time duration greater than or equal to 3s"
        );
        assert_eq!(
            err(args("10Mi", 5, "10s", 0)),
            "--container-log-max-workers: containerLogMaxWorkers must be greater than or equal \
             to 1"
        );
    }
}
