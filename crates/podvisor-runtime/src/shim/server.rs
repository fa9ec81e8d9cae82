//! The shim process (being built).

/// Entry point of `podvisor shim ARGS...`; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    eprintln!("podvisor shim: not built yet ({} args)", args.len());
    2
}
