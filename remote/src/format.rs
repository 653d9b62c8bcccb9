//! What a remote holds, byte for byte (`docs/FORMAT.md` section 19): the remote's config,
//! the objects of a remote pack, a pack's index and an operation head. On an encrypted
//! remote every one of them except the config is sealed (`lifeos_store::crypt`), for the
//! place it is kept, so nothing but sizes and counts can be read without the key.

use crate::crypt::{Keys, SEALED_HEAD, TAG_LEN};
use lifeos_store::codec::{Reader, Writer};
use lifeos_store::pack::verify_content;
use lifeos_store::{Id, Kind, StoredAs};

use crate::RemoteError;

/// The key of a remote's config.
pub const CONFIG_KEY: &str = "config";
/// The folder of key slots.
pub const KEYS_DIR: &str = "keys/";
/// The folder of packs.
pub const PACKS_DIR: &str = "packs/";
/// The folder of pack indexes (one per pack, same name).
pub const INDEX_DIR: &str = "index/";
/// The folder of operation heads.
pub const HEADS_DIR: &str = "heads/";
/// The first bytes of every remote pack.
pub const PACK_MAGIC: &[u8; 8] = b"LFRPACK1";
/// Type tag of a pack index (an object-header encoding, 1.5).
pub const INDEX_TAG: u8 = 0xC2;
/// Version of the pack index encoding.
pub const INDEX_VERSION: u8 = 1;
/// Version of the remote layout (the config's `format`).
pub const LAYOUT_VERSION: u32 = 1;

// The most bytes each file of a remote can hold. A server may be hostile: a file larger
// than lifeos ever writes is refused before more of it is read (FORMAT 19.1).

/// A remote's config (a few lines of TOML).
pub const CONFIG_MAX: u64 = 64 << 10;
/// A key slot (parameters, salt and a wrapped key: about 100 bytes).
pub const KEY_SLOT_MAX: u64 = 4 << 10;
/// An operation head (a sealed operation id: at most 72 bytes).
pub const HEAD_MAX: u64 = 4 << 10;
/// A lock object (a line naming a host, a process and a time).
pub const LOCK_MAX: u64 = 4 << 10;
/// A pack's index: a pack of at most 8 MiB holds at most a few hundred thousand objects,
/// about 60 bytes of index each.
pub const INDEX_MAX: u64 = 64 << 20;
/// A whole pack read at once (`fsck --remote --read-data`).
pub const PACK_READ_MAX: u64 = 1 << 30;
/// Key slots tried when a remote is unlocked: a remote keeps one per passphrase.
pub const KEY_SLOTS_MAX: usize = 16;
/// The most Argon2id work (KiB of memory times passes, summed over the slots tried) an
/// unlock spends before it gives up: 4 GiB-passes, about twenty slots of the default
/// 64 MiB and 3 passes. A wrong passphrase tries every slot, so this bounds what a
/// server's slots can cost.
pub const KDF_WORK_MAX: u64 = 4 << 20;

/// The remote's config (`config`, TOML): the only file an encrypted remote keeps in the
/// clear.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteConfig {
    /// The layout version, [`LAYOUT_VERSION`].
    pub format: u32,
    /// Whether everything is sealed.
    pub encrypted: bool,
    /// For an encrypted remote: the name (18.1) of the all-zero id under its master key,
    /// in hex, so a key slot holding another master key (one left by a device that lost
    /// a race to create the remote) is never used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_check: Option<String>,
}

impl RemoteConfig {
    /// Encodes the config.
    pub fn encode(&self) -> Vec<u8> {
        toml::to_string(self)
            .expect("a remote config serialises")
            .into_bytes()
    }

    /// Reads a config, refusing a layout this lifeos does not know.
    pub fn decode(bytes: &[u8]) -> Result<RemoteConfig, RemoteError> {
        let damaged = |reason: String| RemoteError::Damaged {
            what: CONFIG_KEY.into(),
            reason,
        };
        let text = std::str::from_utf8(bytes).map_err(|e| damaged(e.to_string()))?;
        let config: RemoteConfig = toml::from_str(text).map_err(|e| damaged(e.to_string()))?;
        if config.format != LAYOUT_VERSION {
            return Err(damaged(format!(
                "the remote's layout is version {}, this lifeos reads version {LAYOUT_VERSION}; upgrade lifeos",
                config.format
            )));
        }
        if config.encrypted != config.key_check.is_some() {
            return Err(damaged(
                "an encrypted remote names its key check, a plain one does not".into(),
            ));
        }
        Ok(config)
    }

    /// The key check of a master key's `keys`.
    pub fn key_check_of(keys: &Keys) -> String {
        keys.name(&Id([0; 32])).to_hex()
    }
}

/// Seals `plain` for `context` with `keys`, or keeps it as it is on a plain remote.
pub fn seal(keys: Option<&Keys>, context: &[u8], plain: Vec<u8>) -> Vec<u8> {
    match keys {
        Some(k) => k.seal(context, &plain),
        None => plain,
    }
}

/// Opens what [`seal`] made.
pub fn open(
    keys: Option<&Keys>,
    context: &[u8],
    stored: Vec<u8>,
    what: &str,
) -> Result<Vec<u8>, RemoteError> {
    match keys {
        Some(k) => Ok(k.open(context, &stored, what)?),
        None => Ok(stored),
    }
}

fn object_context(id: &Id) -> Vec<u8> {
    [b"lifeos object ".as_slice(), &id.0].concat()
}

/// An object as a remote pack holds it: its kind, a codec byte (0 raw, 1 zstd) and its
/// bytes, sealed for its id on an encrypted remote. `stored` says how the local store
/// keeps it: a zstd frame is reused and an object zstd could not shrink is not tried
/// again; anything else is compressed here.
pub fn encode_object(
    keys: Option<&Keys>,
    id: &Id,
    kind: Kind,
    raw: &[u8],
    stored: &StoredAs,
) -> Vec<u8> {
    let mut out = Vec::new();
    encode_object_into(keys, id, kind, raw, stored, &mut out);
    out
}

/// [`encode_object`], appended to `out` (a pack being filled) and sealed where it lies:
/// the object's bytes are copied once (when `out` has room for them).
pub fn encode_object_into(
    keys: Option<&Keys>,
    id: &Id,
    kind: Kind,
    raw: &[u8],
    stored: &StoredAs,
    out: &mut Vec<u8>,
) {
    let packed: Option<std::borrow::Cow<'_, [u8]>> = match stored {
        StoredAs::Zstd(frame) => Some(frame.as_slice().into()),
        StoredAs::Raw => None,
        StoredAs::Other => zstd::bulk::compress(raw, 3)
            .ok()
            .filter(|z| z.len() < raw.len())
            .map(Into::into),
    };
    let (codec, body) = match &packed {
        Some(z) => (1, &z[..]),
        None => (0, raw),
    };
    let start = out.len();
    let head = if keys.is_some() { SEALED_HEAD } else { 0 };
    out.reserve(head + 2 + body.len() + TAG_LEN);
    out.resize(start + head, 0);
    out.extend_from_slice(&[kind as u8, codec]);
    out.extend_from_slice(body);
    if let Some(k) = keys {
        k.seal_in_place(&object_context(id), out, start);
    }
}

/// Reads an object written by [`encode_object`] and checks it against its id and kind:
/// bytes that are not the object asked for are never returned.
pub fn decode_object(
    keys: Option<&Keys>,
    id: &Id,
    kind: Kind,
    stored: Vec<u8>,
) -> Result<Vec<u8>, RemoteError> {
    decode_object_parts(keys, id, kind, stored).map(|(raw, _)| raw)
}

/// Like [`decode_object`], also returning the zstd frame the raw bytes came from, if they
/// came from one (so the local store can keep it as it is).
pub fn decode_object_parts(
    keys: Option<&Keys>,
    id: &Id,
    kind: Kind,
    mut stored: Vec<u8>,
) -> Result<(Vec<u8>, Option<Vec<u8>>), RemoteError> {
    match open_object(keys, id, kind, &mut stored)? {
        Opened::Raw(r) => {
            stored.truncate(r.end);
            stored.drain(..r.start);
            Ok((stored, None))
        }
        Opened::Zstd { raw, frame } => Ok((raw, Some(stored[frame].to_vec()))),
    }
}

/// An object opened where it lies (see [`open_object`]).
#[derive(Debug)]
pub enum Opened {
    /// Kept raw: its bytes are this range of the blob.
    Raw(std::ops::Range<usize>),
    /// Kept as the zstd frame at `frame` in the blob, which decompressed to `raw`.
    Zstd {
        /// The object's bytes.
        raw: Vec<u8>,
        /// Where the frame is in the blob.
        frame: std::ops::Range<usize>,
    },
}

impl Opened {
    /// The same, for a blob that starts `by` bytes into a larger buffer.
    pub fn shifted(self, by: usize) -> Opened {
        match self {
            Opened::Raw(r) => Opened::Raw(r.start + by..r.end + by),
            Opened::Zstd { raw, frame } => Opened::Zstd {
                raw,
                frame: frame.start + by..frame.end + by,
            },
        }
    }
}

/// Opens the object `blob` holds (decrypting it in place on an encrypted remote) and
/// checks it against its id and kind, as [`decode_object`] does, without copying it.
pub fn open_object(
    keys: Option<&Keys>,
    id: &Id,
    kind: Kind,
    blob: &mut [u8],
) -> Result<Opened, RemoteError> {
    let what = format!("object {}", id.to_hex());
    let plain = match keys {
        Some(k) => k.open_in_place(&object_context(id), blob, &what)?,
        None => 0..blob.len(),
    };
    let damaged = |reason: String| RemoteError::Damaged {
        what: what.clone(),
        reason,
    };
    let (k, codec) = match &blob[plain.clone()] {
        [k, codec, ..] => (*k, *codec),
        _ => return Err(damaged("shorter than its two header bytes".into())),
    };
    if Kind::from_u8(k) != Some(kind) {
        return Err(damaged(format!(
            "it is kind {k}, the index says {}",
            kind.name()
        )));
    }
    let body = plain.start + 2..plain.end;
    let opened = match codec {
        0 => Opened::Raw(body),
        1 => Opened::Zstd {
            raw: lifeos_store::pack::inflate(
                &blob[body.clone()],
                lifeos_store::pack::MAX_ENTRY_LEN as usize,
            )
            .map_err(damaged)?,
            frame: body,
        },
        c => return Err(damaged(format!("unknown codec {c}"))),
    };
    let raw = match &opened {
        Opened::Raw(r) => &blob[r.clone()],
        Opened::Zstd { raw, .. } => raw,
    };
    verify_content(kind, id, raw).map_err(damaged)?;
    Ok(opened)
}

/// Where an object is on the remote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The pack's name.
    pub pack: String,
    /// What the object is.
    pub kind: Kind,
    /// Its first byte in the pack.
    pub offset: u64,
    /// Its length in the pack.
    pub len: u32,
}

/// One row of a pack index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexRow {
    /// The object's id.
    pub id: Id,
    /// What it is.
    pub kind: Kind,
    /// Its first byte in the pack.
    pub offset: u64,
    /// Its length in the pack.
    pub len: u32,
}

fn index_context(pack: &str) -> Vec<u8> {
    format!("lifeos index {pack}").into_bytes()
}

/// A pack's index: the pack's name, then each object's id, kind, offset and length.
pub fn encode_index(keys: Option<&Keys>, pack: &str, rows: &[IndexRow]) -> Vec<u8> {
    let mut w = Writer::with_header(INDEX_TAG, INDEX_VERSION);
    w.bytes(pack.as_bytes()).uint(rows.len() as u64);
    for r in rows {
        w.id(&r.id)
            .u8(r.kind as u8)
            .uint(r.offset)
            .uint(u64::from(r.len));
    }
    seal(keys, &index_context(pack), w.finish())
}

/// Reads the index of pack `pack`.
pub fn decode_index(
    keys: Option<&Keys>,
    pack: &str,
    stored: Vec<u8>,
) -> Result<Vec<IndexRow>, RemoteError> {
    const W: &str = "remote pack index";
    let what = format!("{INDEX_DIR}{pack}");
    let plain = open(keys, &index_context(pack), stored, &what)?;
    let damaged = |reason: String| RemoteError::Damaged {
        what: what.clone(),
        reason,
    };
    let decode = || -> Result<Vec<IndexRow>, lifeos_store::codec::DecodeError> {
        let mut r = Reader::new(&plain);
        r.header(W, INDEX_TAG, INDEX_VERSION)?;
        let named = r.bytes(W)?;
        if named != pack.as_bytes() {
            return Err(lifeos_store::codec::DecodeError::new(
                W,
                "it is the index of another pack",
            ));
        }
        let n = r.count(W)?;
        let mut rows = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            let id = r.id(W)?;
            let k = r.u8(W)?;
            let kind = Kind::from_u8(k)
                .filter(|k| *k != Kind::Block)
                .ok_or_else(|| lifeos_store::codec::DecodeError::new(W, format!("kind {k}")))?;
            let offset = r.uint(W)?;
            let len = u32::try_from(r.uint(W)?)
                .map_err(|_| lifeos_store::codec::DecodeError::new(W, "length over 4 GiB"))?;
            // Every range is computed as offset + length: one past what a pack can be is
            // damage, never an overflow.
            if offset > PACK_READ_MAX {
                return Err(lifeos_store::codec::DecodeError::new(
                    W,
                    format!("object {id} at offset {offset}, past where a pack ends"),
                ));
            }
            rows.push(IndexRow {
                id,
                kind,
                offset,
                len,
            });
        }
        r.finish(W)?;
        Ok(rows)
    };
    decode().map_err(|e| damaged(e.to_string()))
}

const HEAD_CONTEXT: &[u8] = b"lifeos head";

/// The key of operation head `op`: its name under the remote's keys, or its id.
pub fn head_key(keys: Option<&Keys>, op: &Id) -> String {
    let name = keys.map_or(*op, |k| k.name(op));
    format!("{HEADS_DIR}{}", name.to_hex())
}

/// An operation head's contents: the operation's id, sealed.
pub fn encode_head(keys: Option<&Keys>, op: &Id) -> Vec<u8> {
    seal(keys, HEAD_CONTEXT, op.0.to_vec())
}

/// Reads the head at `key`, checking that its key is the name of the id it holds.
pub fn decode_head(keys: Option<&Keys>, key: &str, stored: Vec<u8>) -> Result<Id, RemoteError> {
    let plain = open(keys, HEAD_CONTEXT, stored, key)?;
    let id = <[u8; 32]>::try_from(plain.as_slice())
        .map(Id)
        .map_err(|_| RemoteError::Damaged {
            what: key.into(),
            reason: format!("{} bytes, not an operation id", plain.len()),
        })?;
    if head_key(keys, &id) != key {
        return Err(RemoteError::Damaged {
            what: key.into(),
            reason: "it holds another operation than its name says".into(),
        });
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypt::MasterKey;

    #[test]
    fn objects_round_trip_and_refuse_other_ids_and_kinds() {
        let keys = MasterKey::generate().keys();
        for k in [None, Some(&keys)] {
            let raw = b"a tree's bytes, repeated, repeated, repeated, repeated".to_vec();
            let id = Id::hash(&raw);
            let stored = encode_object(k, &id, Kind::Tree, &raw, &StoredAs::Other);
            assert_eq!(
                decode_object(k, &id, Kind::Tree, stored.clone()).unwrap(),
                raw
            );
            assert!(decode_object(k, &id, Kind::Commit, stored.clone()).is_err());
            let other = Id::hash(b"other");
            assert!(decode_object(k, &other, Kind::Tree, stored.clone()).is_err());
            let mut bad = stored;
            let last = bad.len() - 1;
            bad[last] ^= 1;
            assert!(decode_object(k, &id, Kind::Tree, bad).is_err());

            // Appended to a pack after other objects, raw and compressed, each opens in
            // place to its own bytes.
            let chunk = b"incompressible enough".to_vec();
            let chunk_id = Id::hash(&chunk);
            let mut pack = PACK_MAGIC.to_vec();
            encode_object_into(k, &id, Kind::Tree, &raw, &StoredAs::Other, &mut pack);
            let split = pack.len();
            encode_object_into(k, &chunk_id, Kind::Chunk, &chunk, &StoredAs::Raw, &mut pack);
            let (first, second) = pack.split_at_mut(split);
            match open_object(k, &id, Kind::Tree, &mut first[PACK_MAGIC.len()..]).unwrap() {
                Opened::Zstd { raw: r, .. } => assert_eq!(r, raw),
                other => panic!("expected a zstd frame, got {other:?}"),
            }
            match open_object(k, &chunk_id, Kind::Chunk, second).unwrap() {
                Opened::Raw(r) => assert_eq!(&second[r], chunk.as_slice()),
                other => panic!("expected raw bytes, got {other:?}"),
            }
        }
    }

    #[test]
    fn sealed_objects_hide_their_bytes() {
        let keys = MasterKey::generate().keys();
        let raw = b"The budget meeting moved to Friday afternoon.".to_vec();
        let id = Id::hash(&raw);
        let stored = encode_object(Some(&keys), &id, Kind::Chunk, &raw, &StoredAs::Other);
        assert!(!stored.windows(6).any(|w| w == b"budget"));
        assert!(!stored.windows(32).any(|w| w == id.0));
    }

    #[test]
    fn indexes_and_heads_round_trip() {
        let keys = MasterKey::generate().keys();
        let rows = vec![IndexRow {
            id: Id::hash(b"x"),
            kind: Kind::Chunk,
            offset: 8,
            len: 99,
        }];
        for k in [None, Some(&keys)] {
            let stored = encode_index(k, "ab12", &rows);
            assert_eq!(decode_index(k, "ab12", stored.clone()).unwrap(), rows);
            assert!(decode_index(k, "cd34", stored).is_err());
            let op = Id::hash(b"op");
            let key = head_key(k, &op);
            assert_eq!(decode_head(k, &key, encode_head(k, &op)).unwrap(), op);
            let other = head_key(k, &Id::hash(b"other"));
            assert!(decode_head(k, &other, encode_head(k, &op)).is_err());
        }
    }

    #[test]
    fn a_config_of_a_later_layout_is_refused() {
        let c = RemoteConfig {
            format: 2,
            encrypted: false,
            key_check: None,
        };
        let err = RemoteConfig::decode(&c.encode()).unwrap_err().to_string();
        assert!(err.contains("upgrade lifeos"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn hostile_indexes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = decode_index(None, "p", bytes.clone());
            let _ = decode_head(None, "heads/x", bytes.clone());
            let _ = decode_object(None, &Id::hash(b"x"), Kind::Tree, bytes);
        }
    }
}
