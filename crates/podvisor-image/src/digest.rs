//! Content digests (`sha256:<hex>`): parsing, hashing, and the store's paths for them.

use std::fmt;
use std::io::Read;

use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};

/// A verified-form `sha256:<64 lowercase hex>` digest. Other algorithms are refused: the
/// store only keeps content it has checked.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

impl Digest {
    /// Parses `sha256:<64 hex>`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidDigest`] for anything else.
    pub fn parse(text: &str) -> Result<Digest> {
        let Some((algo, hex)) = text.split_once(':') else {
            return Err(Error::InvalidDigest {
                digest: text.to_owned(),
                reason: "no algorithm",
            });
        };
        if algo != "sha256" {
            return Err(Error::InvalidDigest {
                digest: text.to_owned(),
                reason: "only sha256 digests are supported",
            });
        }
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(Error::InvalidDigest {
                digest: text.to_owned(),
                reason: "sha256 needs 64 lowercase hex digits",
            });
        }
        Ok(Digest(text.to_owned()))
    }

    /// The digest of `data`.
    #[must_use]
    pub fn of(data: &[u8]) -> Digest {
        Digest::from_hasher(Sha256::new_with_prefix(data))
    }

    pub(crate) fn from_hasher(h: Sha256) -> Digest {
        Digest(format!("sha256:{}", hex(&h.finalize())))
    }

    /// The hex part.
    #[must_use]
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    /// `sha256:<hex>`.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 hex digits, as `ctr`/`crictl` print ids.
    #[must_use]
    pub fn short(&self) -> &str {
        &self.hex()[..12]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Digest {
    type Error = Error;
    fn try_from(s: String) -> Result<Digest> {
        Digest::parse(&s)
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.0
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A reader that hashes what passes through it and counts it.
pub(crate) struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Reads the rest (a tar's trailing padding), then returns the digest and byte count.
    pub(crate) fn finish(mut self) -> std::io::Result<(Digest, u64)> {
        std::io::copy(&mut self, &mut std::io::sink())?;
        Ok((Digest::from_hasher(self.hasher), self.count))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// The OCI chain id of a stack of diff ids (bottom first): `ChainID(L0) = DiffID(L0)`,
/// `ChainID(L0..Ln) = sha256(ChainID(L0..Ln-1) + " " + DiffID(Ln))`.
#[must_use]
pub fn chain_id(diff_ids: &[Digest]) -> Option<Digest> {
    let mut iter = diff_ids.iter();
    let mut chain = iter.next()?.clone();
    for d in iter {
        chain = Digest::of(format!("{chain} {d}").as_bytes());
    }
    Some(chain)
}
