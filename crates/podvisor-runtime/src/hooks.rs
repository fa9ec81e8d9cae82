//! hooks (in progress)
