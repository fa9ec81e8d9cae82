//! process (in progress)
