//! Diagnostics on stderr until the project adopts `tracing`: `debug!` prints only when
//! `PODVISOR_DEBUG` is set (to anything but `0` or empty), `warning!` always prints (the engine's
//! own failures must be visible).

use std::sync::OnceLock;

/// Whether `PODVISOR_DEBUG` asks for debug lines.
pub(crate) fn debug_enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| {
        std::env::var_os("PODVISOR_DEBUG").is_some_and(|v| !v.is_empty() && v != "0")
    })
}

/// A debug line, shown with `PODVISOR_DEBUG=1`.
macro_rules! debug {
    ($($arg:tt)*) => {
        if $crate::log::debug_enabled() {
            eprintln!("podvisor-agent: {}", format_args!($($arg)*))
        }
    };
}

/// A warning about the engine itself (not the workload), always shown.
macro_rules! warning {
    ($($arg:tt)*) => {
        eprintln!("podvisor-agent: warning: {}", format_args!($($arg)*))
    };
}

pub(crate) use {debug, warning};
