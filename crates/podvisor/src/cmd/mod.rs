//! One module per subcommand.

pub mod run;
pub mod simulate;
pub mod validate;
