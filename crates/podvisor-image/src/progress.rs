//! Progress of pulls and loads, for a terminal bar or a log line.

use crate::digest::Digest;

/// Told what a pull or load does, as it does it. Every method has an empty default.
pub trait Progress: Send + Sync {
    /// A blob download starts (`offset` > 0 when a partial download is resumed).
    fn blob_started(&self, _digest: &Digest, _size: u64, _offset: u64) {}
    /// `bytes` more of a blob arrived.
    fn blob_bytes(&self, _digest: &Digest, _bytes: u64) {}
    /// A blob is complete and verified (or was already stored).
    fn blob_done(&self, _digest: &Digest, _cached: bool) {}
    /// A layer is unpacked (or was already).
    fn layer_unpacked(&self, _diff_id: &Digest, _cached: bool) {}
}

/// Reports nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}
