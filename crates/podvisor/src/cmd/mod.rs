//! One module per subcommand.

pub mod simulate;
pub mod validate;
