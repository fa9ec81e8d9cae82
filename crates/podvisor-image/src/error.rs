//! The image store's errors: what was being done, to what, and why.

use std::path::PathBuf;

use crate::reference::ReferenceError;

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the image store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The image reference does not parse (the kubelet's `InvalidImageName`).
    #[error(transparent)]
    InvalidReference(#[from] ReferenceError),
    /// A file operation of the store failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done (`writing blob`, `opening layer`, ...).
        what: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// Content did not hash to the digest it was asked for.
    #[error("{what} {digest}: digest mismatch (content hashes to {actual})")]
    DigestMismatch {
        /// `blob`, `manifest`, `layer diff`...
        what: &'static str,
        /// The digest that was expected.
        digest: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// Content had another size than its descriptor says.
    #[error("blob {digest}: size mismatch (descriptor says {expected} bytes, got {actual})")]
    SizeMismatch {
        /// The blob's digest.
        digest: String,
        /// The size in the descriptor.
        expected: u64,
        /// The size that arrived (or at least this much).
        actual: u64,
    },
    /// A digest string that is not `sha256:<64 hex>` (or another algorithm we do not verify).
    #[error("invalid digest {digest:?}: {reason}")]
    InvalidDigest {
        /// The text.
        digest: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The registry refused or failed a request.
    #[error("pulling {reference}: {message}")]
    Registry {
        /// The image reference being pulled.
        reference: String,
        /// The registry's (or the transport's) error.
        message: String,
    },
    /// A multi-platform index has nothing for this machine.
    #[error("{reference}: no image for platform {platform} in the index (it has {available})")]
    NoMatchingPlatform {
        /// The image reference.
        reference: String,
        /// This machine's platform (`linux/amd64`).
        platform: String,
        /// The platforms the index lists.
        available: String,
    },
    /// A manifest, index or configuration that cannot be used.
    #[error("{what} {digest}: {reason}")]
    BadContent {
        /// `manifest`, `index`, `image config`.
        what: &'static str,
        /// Its digest.
        digest: String,
        /// What is wrong.
        reason: String,
    },
    /// A layer entry that is refused (path escape, link out of the layer, ...): nothing of
    /// the layer is kept.
    #[error("layer {layer}: refused entry {entry:?}: {reason}")]
    UnsafeLayer {
        /// The layer's digest.
        layer: String,
        /// The entry's path in the tar.
        entry: String,
        /// Why.
        reason: String,
    },
    /// A layer that is not a readable tar stream.
    #[error("layer {layer}: {reason}")]
    BadLayer {
        /// The layer's digest.
        layer: String,
        /// What went wrong reading or writing it.
        reason: String,
    },
    /// An archive given to `load` that is neither a `docker save` nor an OCI layout, or broken.
    #[error("archive {}: {reason}", path.display())]
    BadArchive {
        /// The archive.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A registry credentials file that cannot be used.
    #[error("registry config {}: {reason}", path.display())]
    RegistryConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A manifest's descriptor that does not describe the blob it names (`image load`
    /// refuses the manifest before it stores anything of it).
    #[error(
        "manifest {manifest}: {what} descriptor {digest}: size says {expected} bytes, the blob has {actual}"
    )]
    DescriptorSize {
        /// The manifest's digest.
        manifest: String,
        /// `config`.
        what: &'static str,
        /// The descriptor's digest.
        digest: String,
        /// The descriptor's `size`.
        expected: u64,
        /// The blob's size.
        actual: u64,
    },
    /// An image pull record (`pull-records/`) that cannot be read or written.
    #[error("image pull record {}: {reason}", path.display())]
    BadPullRecord {
        /// The record's file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// No image by that name or id in the store.
    #[error("image {0:?} not found")]
    NotFound(String),
    /// The store's index file is unreadable.
    #[error("image index {}: {reason}", path.display())]
    BadIndex {
        /// The index file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl Error {
    /// An [`Error::Io`] builder for `map_err`.
    pub(crate) fn io(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { what, path, source }
    }
}
