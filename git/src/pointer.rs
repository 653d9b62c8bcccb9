//! The pointer git stores in place of a file the filter keeps in lifeos
//! (docs/format: the git filter).

use lifeos_store::Id;

use crate::objects::{git_hash, GitKind};
use crate::repo::sha1_bytes;

/// The `version` line of a lifeos pointer (git-lfs's pointer grammar, lifeos's spec).
pub const POINTER_VERSION: &str = "https://lifeos.dev/spec/pointer/v1";

/// The longest pointer; anything longer is content.
pub(crate) const POINTER_MAX: usize = 1024;

/// A pointer: what git stores in place of a filtered file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pointer {
    /// The content's lifeos id (its BLAKE3).
    pub id: Id,
    /// Its length in bytes.
    pub size: u64,
}

impl Pointer {
    /// The pointer's text, as git stores it.
    pub fn text(&self) -> String {
        format!(
            "version {POINTER_VERSION}\noid blake3:{}\nsize {}\n",
            self.id.to_hex(),
            self.size
        )
    }

    /// Parses a pointer; only the exact text [`Pointer::text`] writes is one.
    pub fn parse(bytes: &[u8]) -> Option<Pointer> {
        if bytes.len() > POINTER_MAX {
            return None;
        }
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.strip_suffix('\n')?.split('\n');
        if lines.next()? != format!("version {POINTER_VERSION}") {
            return None;
        }
        let id = Id::from_hex(lines.next()?.strip_prefix("oid blake3:")?)?;
        let size = lines.next()?.strip_prefix("size ")?.parse().ok()?;
        let p = Pointer { id, size };
        (p.text().as_bytes() == bytes).then_some(p)
    }

    /// The SHA-1 of the git blob holding this pointer.
    pub fn git_sha1(&self) -> [u8; 20] {
        sha1_bytes(&git_hash(GitKind::Blob, self.text().as_bytes()))
    }
}
