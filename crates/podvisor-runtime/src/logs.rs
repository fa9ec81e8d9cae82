//! logs (in progress)
