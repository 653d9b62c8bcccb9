//! git's annotated tags, kept as their own objects (FORMAT 7.7).

use lifeos_store::codec::{DecodeError, Reader, Writer};
use lifeos_store::{Id, Kind};

/// Git tag format version.
pub const GIT_TAG_VERSION: u8 = 1;

/// A git annotated tag: the tag object's bytes, and the lifeos object it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitTag {
    /// The lifeos id of the tagged commit or tag.
    pub target: Id,
    /// Whether `target` is another tag (else a commit).
    pub target_is_tag: bool,
    /// The git tag object, byte for byte (its `object` line names the target's SHA-1).
    pub raw: Vec<u8>,
}

impl GitTag {
    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_header(Kind::GitTag as u8, GIT_TAG_VERSION);
        w.id(&self.target)
            .u8(u8::from(self.target_is_tag))
            .bytes(&self.raw);
        w.finish()
    }

    /// Decodes a git tag.
    pub fn decode(bytes: &[u8]) -> Result<GitTag, DecodeError> {
        const W: &str = "git tag";
        let mut r = Reader::new(bytes);
        r.header(W, Kind::GitTag as u8, GIT_TAG_VERSION)?;
        let target = r.id(W)?;
        let target_is_tag = match r.u8(W)? {
            0 => false,
            1 => true,
            x => return Err(DecodeError::new(W, format!("bad target flag {x}"))),
        };
        let raw = r.bytes(W)?.to_vec();
        r.finish(W)?;
        Ok(GitTag {
            target,
            target_is_tag,
            raw,
        })
    }
}
