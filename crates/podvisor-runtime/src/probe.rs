//! probe (in progress)
