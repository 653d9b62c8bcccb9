//! Pack files: append-only containers of chunks and objects.
//!
//! A pack is a 16-byte header, a run of entries (a 48-byte entry header followed by the
//! stored bytes), and a footer that indexes the pack's own entries. See `docs/FORMAT.md`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result, StoreError};
use crate::id::{Id, ID_LEN};
use crate::kind::Kind;

/// First bytes of every pack file.
pub const PACK_MAGIC: &[u8; 8] = b"LIFEOSPK";
/// Pack format version written by this code (2: entries may be deltas, codec 2; 3: entries
/// may be blocks, kind 9).
pub const PACK_VERSION: u32 = 3;
/// The oldest pack format version this code reads.
pub const PACK_VERSION_MIN: u32 = 1;
/// Length of the pack header.
pub const PACK_HEADER_LEN: u64 = 16;
/// Length of an entry header.
pub const ENTRY_HEADER_LEN: usize = 48;
/// Last bytes of every complete pack file.
pub const FOOTER_MAGIC: &[u8; 8] = b"LIFEOSPF";
/// Length of the fixed footer trailer (count, checksum, magic).
pub const FOOTER_TRAILER_LEN: u64 = 28;
/// Length of one footer table row (id, offset, kind).
pub const FOOTER_ROW_LEN: usize = ID_LEN + 5;
/// The most deltas a read follows from an entry down to a whole one; a longer chain is an
/// error (writers never make one).
pub const MAX_DELTA_DEPTH: u8 = 10;
/// Largest raw size of a single entry.
pub const MAX_ENTRY_LEN: u64 = 1 << 30;

/// How an entry's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Codec {
    /// Stored as is (compression did not shrink it).
    Raw = 0,
    /// zstd frame.
    Zstd = 1,
    /// A delta: the 32-byte id of a base entry, then a zstd frame compressed with the
    /// base's raw bytes as its prefix. A base may be a delta itself, up to
    /// [`MAX_DELTA_DEPTH`] links down to a whole entry.
    Delta = 2,
}

/// A decoded entry header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryHeader {
    /// The entry's id.
    pub id: Id,
    /// What it is.
    pub kind: Kind,
    /// How it is stored.
    pub codec: Codec,
    /// Length after decompression.
    pub raw_len: u32,
    /// Length in the pack.
    pub stored_len: u32,
}

impl EntryHeader {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; ENTRY_HEADER_LEN] {
        let mut h = [0u8; ENTRY_HEADER_LEN];
        h[..ID_LEN].copy_from_slice(&self.id.0);
        h[32] = self.kind as u8;
        h[33] = self.codec as u8;
        h[36..40].copy_from_slice(&self.raw_len.to_le_bytes());
        h[40..44].copy_from_slice(&self.stored_len.to_le_bytes());
        let check = blake3::hash(&h[..44]);
        h[44..48].copy_from_slice(&check.as_bytes()[..4]);
        h
    }

    /// Decodes and checks a header.
    pub fn decode(h: &[u8; ENTRY_HEADER_LEN]) -> std::result::Result<EntryHeader, String> {
        let check = blake3::hash(&h[..44]);
        if h[44..48] != check.as_bytes()[..4] {
            return Err("entry header checksum mismatch".into());
        }
        let kind = Kind::from_u8(h[32]).ok_or_else(|| format!("unknown entry kind {}", h[32]))?;
        let codec = match h[33] {
            0 => Codec::Raw,
            1 => Codec::Zstd,
            2 => Codec::Delta,
            c => return Err(format!("unknown codec {c}")),
        };
        if h[34] != 0 || h[35] != 0 {
            return Err("reserved header bytes are not zero".into());
        }
        let raw_len = u32::from_le_bytes(h[36..40].try_into().expect("4 bytes"));
        let stored_len = u32::from_le_bytes(h[40..44].try_into().expect("4 bytes"));
        if u64::from(raw_len) > MAX_ENTRY_LEN || (codec == Codec::Raw && raw_len != stored_len) {
            return Err(format!(
                "implausible lengths raw {raw_len} stored {stored_len}"
            ));
        }
        Ok(EntryHeader {
            id: Id::from_slice(&h[..ID_LEN]).expect("32 bytes"),
            kind,
            codec,
            raw_len,
            stored_len,
        })
    }
}

/// Compresses `raw` with zstd at `level` through a reusable compressor; returns the codec
/// and the bytes to store (the raw bytes when compression does not shrink them).
pub fn compress<'a>(
    compressor: &mut zstd::bulk::Compressor<'static>,
    raw: &'a [u8],
) -> (Codec, std::borrow::Cow<'a, [u8]>) {
    if raw.len() < 64 {
        return (Codec::Raw, raw.into());
    }
    match compressor.compress(raw) {
        Ok(c) if c.len() < raw.len() => (Codec::Zstd, c.into()),
        _ => (Codec::Raw, raw.into()),
    }
}

/// Compresses `raw` as a delta against `base` (zstd with the base as its prefix) at
/// `level`; returns the stored bytes (the base's id, then the frame), or `None` when that
/// would not be shorter than `limit` bytes.
pub fn compress_delta(
    level: i32,
    raw: &[u8],
    base_id: &Id,
    base: &[u8],
    limit: usize,
) -> Option<Vec<u8>> {
    use zstd::zstd_safe::{CCtx, CParameter, ResetDirective};
    let mut frame = Vec::with_capacity(zstd::zstd_safe::compress_bound(raw.len()));
    let compressed = if base.starts_with(&ZSTD_DICT_MAGIC) {
        // As in `decompress_delta`: referenced as a prefix, never read as a dictionary.
        let mut cctx = CCtx::create();
        cctx.set_parameter(CParameter::CompressionLevel(level))
            .ok()?;
        cctx.ref_prefix(base).ok()?;
        cctx.compress2(&mut frame, raw)
    } else {
        CCTX.with(|c| {
            let mut cctx = c.borrow_mut();
            cctx.set_parameter(CParameter::CompressionLevel(level))?;
            cctx.load_dictionary(base)?;
            let n = cctx.compress2(&mut frame, raw);
            cctx.reset(ResetDirective::SessionAndParameters)?;
            n
        })
    };
    compressed.ok()?;
    let mut out = Vec::with_capacity(ID_LEN + frame.len());
    out.extend_from_slice(&base_id.0);
    out.extend_from_slice(&frame);
    (out.len() < limit).then_some(out)
}

thread_local! {
    /// A compression context per thread: creating one costs more than compressing a small
    /// delta.
    static CCTX: std::cell::RefCell<zstd::zstd_safe::CCtx<'static>> =
        std::cell::RefCell::new(zstd::zstd_safe::CCtx::create());
    /// A decompression context per thread, for the same reason.
    static DCTX: std::cell::RefCell<zstd::zstd_safe::DCtx<'static>> =
        std::cell::RefCell::new(zstd::zstd_safe::DCtx::create());
}

/// The first bytes of a zstd dictionary (`ZSTD_MAGIC_DICTIONARY`, little-endian).
const ZSTD_DICT_MAGIC: [u8; 4] = 0xEC30_A437u32.to_le_bytes();

/// Decompresses a frame compressed with `base` as its prefix into `out`. A base loaded
/// as a dictionary is the same thing as a prefix when zstd takes it as raw content, which
/// it does unless the base starts with the dictionary magic: such a base gets a context
/// of its own with the base referenced as a prefix.
fn decompress_delta(
    out: &mut Vec<u8>,
    frame: &[u8],
    base: &[u8],
) -> std::result::Result<usize, zstd::zstd_safe::ErrorCode> {
    if base.starts_with(&ZSTD_DICT_MAGIC) {
        let mut dctx = zstd::zstd_safe::DCtx::create();
        dctx.ref_prefix(base)?;
        return dctx.decompress(out, frame);
    }
    DCTX.with(|d| {
        let mut dctx = d.borrow_mut();
        dctx.load_dictionary(base)?;
        let n = dctx.decompress(out, frame);
        dctx.reset(zstd::zstd_safe::ResetDirective::SessionAndParameters)?;
        n
    })
}

/// Decompresses one zstd frame that holds at most `max` bytes, with the thread's
/// context, into a buffer of the size the frame's header gives (`max` when it gives
/// none).
pub fn inflate(frame: &[u8], max: usize) -> std::result::Result<Vec<u8>, String> {
    let size = match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(n)) if n > max as u64 => {
            return Err(format!("its frame holds {n} bytes, more than {max}"));
        }
        Ok(Some(n)) => n as usize,
        Ok(None) => max,
        Err(_) => return Err("it is not a zstd frame".into()),
    };
    let mut raw = Vec::with_capacity(size);
    DCTX.with(|d| d.borrow_mut().decompress(&mut raw, frame))
        .map_err(|e| format!("zstd: {}", zstd::zstd_safe::get_error_name(e)))?;
    Ok(raw)
}

/// The base a delta entry's stored bytes name (`None` when they are too short).
pub fn delta_base(stored: &[u8]) -> Option<Id> {
    stored.get(..ID_LEN).and_then(Id::from_slice)
}

/// Verifies and decodes the stored bytes of an entry into its raw bytes. `base` gives the
/// raw bytes of a delta's base entry. Stored bytes given owned become the raw bytes of an
/// uncompressed entry without a copy; given borrowed, they stay the caller's (a push
/// keeps a zstd frame to send as it is).
pub fn decode_entry<'s>(
    header: &EntryHeader,
    stored: impl Into<std::borrow::Cow<'s, [u8]>>,
    base: &mut dyn FnMut(&Id) -> std::result::Result<Vec<u8>, String>,
) -> std::result::Result<Vec<u8>, String> {
    let stored = stored.into();
    let zstd_err = |what: &str, code| format!("{what}: {}", zstd::zstd_safe::get_error_name(code));
    let raw = match header.codec {
        Codec::Raw => stored.into_owned(),
        Codec::Delta => {
            let base_id = delta_base(&stored).ok_or("delta shorter than its base id")?;
            let base_raw = base(&base_id).map_err(|e| format!("delta base {base_id}: {e}"))?;
            let mut raw = Vec::with_capacity(header.raw_len as usize);
            decompress_delta(&mut raw, &stored[ID_LEN..], &base_raw)
                .map_err(|e| zstd_err("delta frame does not decompress", e))?;
            raw
        }
        Codec::Zstd => {
            // The thread's context: creating one for each entry cost a cold read of a
            // few small objects more than decompressing them.
            let mut raw = Vec::with_capacity(header.raw_len as usize);
            DCTX.with(|d| d.borrow_mut().decompress(&mut raw, &stored))
                .map_err(|e| zstd_err("zstd frame does not decompress", e))?;
            raw
        }
    };
    if raw.len() != header.raw_len as usize {
        return Err(format!(
            "decompressed to {} bytes, header says {}",
            raw.len(),
            header.raw_len
        ));
    }
    verify_content(header.kind, &header.id, &raw)?;
    Ok(raw)
}

/// Checks raw bytes against their id: the BLAKE3 hash for every kind except a manifest,
/// whose id is the hash of the file it describes and which carries its own checksum.
pub fn verify_content(kind: Kind, id: &Id, raw: &[u8]) -> std::result::Result<(), String> {
    match kind {
        Kind::Manifest => crate::manifest::Manifest::decode(raw)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        _ => {
            let actual = Id::hash(raw);
            if actual != *id {
                return Err(format!("content hashes to {}", actual.short(16)));
            }
            Ok(())
        }
    }
}

/// A pack being written in the repository's `tmp/` directory.
pub struct PackWriter {
    tmp_path: PathBuf,
    out: BufWriter<File>,
    offset: u64,
    entries: Vec<FooterRow>,
    /// The members of the blocks appended: indexed, but not listed in the footer.
    members: Vec<FooterRow>,
}

/// One row of a pack's footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FooterRow {
    /// The entry's id.
    pub id: Id,
    /// Offset of its header.
    pub offset: u32,
    /// Its kind.
    pub kind: Kind,
}

impl PartialOrd for Kind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Kind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (*self as u8).cmp(&(*other as u8))
    }
}

/// A finished, durable pack.
#[derive(Debug, Clone)]
pub struct PackInfo {
    /// The pack's name (32 hex digits), its file being `packs/<name>.pack`.
    pub name: String,
    /// Entries sorted by id, with the members of its blocks (each at its block's offset):
    /// what the index lists for the pack.
    pub entries: Vec<FooterRow>,
    /// Total file size.
    pub size: u64,
}

impl PackWriter {
    /// Starts a pack at `tmp_path` (created exclusively).
    pub fn create(tmp_path: PathBuf) -> Result<PackWriter> {
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&tmp_path)
            .io("creating", &tmp_path)?;
        let mut out = BufWriter::with_capacity(crate::WRITE_BUFFER, file);
        let mut header = [0u8; PACK_HEADER_LEN as usize];
        header[..8].copy_from_slice(PACK_MAGIC);
        header[8..12].copy_from_slice(&PACK_VERSION.to_le_bytes());
        out.write_all(&header).io("writing", &tmp_path)?;
        Ok(PackWriter {
            tmp_path,
            out,
            offset: PACK_HEADER_LEN,
            entries: Vec::new(),
            members: Vec::new(),
        })
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.offset
    }

    /// Whether no entry was written.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether an entry of `stored_len` bytes still fits the 32-bit offsets.
    pub fn fits(&self, stored_len: usize) -> bool {
        self.offset + (ENTRY_HEADER_LEN + stored_len) as u64 + FOOTER_TRAILER_LEN
            < u64::from(u32::MAX) / 2
    }

    /// Appends an entry; returns its offset.
    pub fn append(&mut self, header: &EntryHeader, stored: &[u8]) -> Result<u32> {
        debug_assert_eq!(header.stored_len as usize, stored.len());
        let offset = u32::try_from(self.offset).map_err(|_| StoreError::TooLarge(self.offset))?;
        self.out
            .write_all(&header.encode())
            .io("writing", &self.tmp_path)?;
        self.out.write_all(stored).io("writing", &self.tmp_path)?;
        self.offset += (ENTRY_HEADER_LEN + stored.len()) as u64;
        self.entries.push(FooterRow {
            id: header.id,
            offset,
            kind: header.kind,
        });
        Ok(offset)
    }

    /// Appends a block entry whose members are `members` (ids and kinds); returns its
    /// offset.
    pub fn append_block(
        &mut self,
        header: &EntryHeader,
        stored: &[u8],
        members: &[(Id, Kind)],
    ) -> Result<u32> {
        debug_assert_eq!(header.kind, Kind::Block);
        let offset = self.append(header, stored)?;
        self.members.extend(
            members
                .iter()
                .map(|&(id, kind)| FooterRow { id, offset, kind }),
        );
        Ok(offset)
    }

    /// Gives up the pack and removes its temporary file.
    pub fn abandon(self) {
        let PackWriter { tmp_path, out, .. } = self;
        drop(out);
        let _ = std::fs::remove_file(tmp_path);
    }

    /// Writes the footer and makes the pack durable where it is, in the temporary folder.
    /// Nothing else can see it there; [`FinishedPack::install`] moves it into `packs/`
    /// when its transaction commits. Returns it with the rows the index lists for it:
    /// its entries sorted by id, with the members of its blocks (each at its block's
    /// offset).
    pub fn finish(mut self) -> Result<(FinishedPack, Vec<FooterRow>)> {
        self.entries.sort_unstable();
        self.entries.dedup_by_key(|e| e.id);
        let mut table = Vec::with_capacity(self.entries.len() * FOOTER_ROW_LEN);
        for row in &self.entries {
            table.extend_from_slice(&row.id.0);
            table.extend_from_slice(&row.offset.to_le_bytes());
            table.push(row.kind as u8);
        }
        let digest = blake3::hash(&table);
        let mut trailer = Vec::with_capacity(FOOTER_TRAILER_LEN as usize);
        trailer.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        trailer.extend_from_slice(&digest.as_bytes()[..16]);
        trailer.extend_from_slice(FOOTER_MAGIC);
        self.out.write_all(&table).io("writing", &self.tmp_path)?;
        self.out.write_all(&trailer).io("writing", &self.tmp_path)?;
        let mut entries = self.entries;
        if !self.members.is_empty() {
            entries.append(&mut self.members);
            entries.sort_unstable();
            entries.dedup_by_key(|e| e.id);
        }
        let file = self
            .out
            .into_inner()
            .map_err(|e| e.into_error())
            .io("writing", &self.tmp_path)?;
        file.sync_all().io("syncing", &self.tmp_path)?;
        drop(file);
        Ok((
            FinishedPack {
                tmp_path: self.tmp_path,
                name: digest.to_hex()[..32].to_string(),
            },
            entries,
        ))
    }
}

/// A complete, durable pack still in the temporary folder, invisible to every reader and
/// writer until it is installed.
#[derive(Debug)]
pub struct FinishedPack {
    tmp_path: PathBuf,
    /// The pack's name (32 hex digits), its file being `packs/<name>.pack` once installed.
    pub name: String,
}

impl FinishedPack {
    /// Moves the pack into `packs_dir` under its name (the caller fsyncs the folder).
    pub fn install(self, packs_dir: &Path) -> Result<()> {
        let dest = packs_dir.join(format!("{}.pack", self.name));
        std::fs::rename(&self.tmp_path, &dest).io("renaming into place", &dest)
    }

    /// Removes the temporary file of a pack that will not be installed.
    pub fn discard(self) {
        let _ = std::fs::remove_file(self.tmp_path);
    }
}

/// Reads the header at `offset` of an open pack and checks it names `expect`.
pub fn read_header(file: &File, path: &Path, offset: u64) -> Result<EntryHeader> {
    let mut h = [0u8; ENTRY_HEADER_LEN];
    read_exact_at(file, path, &mut h, offset)?;
    EntryHeader::decode(&h).map_err(|reason| StoreError::DamagedFile {
        file: path.into(),
        reason: format!("entry at offset {offset}: {reason}"),
    })
}

/// Reads `buf.len()` bytes at `offset`, reporting a short file as a truncated pack.
pub fn read_exact_at(file: &File, path: &Path, buf: &mut [u8], offset: u64) -> Result<()> {
    file.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            StoreError::DamagedFile {
                file: path.into(),
                reason: format!(
                    "truncated: {} bytes at offset {offset} are past its end",
                    buf.len()
                ),
            }
        } else {
            StoreError::Io {
                action: "reading",
                path: path.into(),
                source: e,
            }
        }
    })
}

/// Reads the header at `offset` of a pack where the index says `id` is: the header of
/// `id` itself or of a block holding it. A damaged header is a corrupt `id`.
pub fn read_header_of(
    file: &File,
    path: &Path,
    pack: &str,
    offset: u64,
    id: &Id,
) -> Result<EntryHeader> {
    let header = read_header(file, path, offset).map_err(|e| as_corrupt(e, id, pack))?;
    if header.id != *id && header.kind != Kind::Block {
        return Err(StoreError::Corrupt {
            id: *id,
            pack: pack.into(),
            reason: format!("offset {offset} holds {} instead", header.id.short(16)),
        });
    }
    Ok(header)
}

/// A pack that cannot be read where an entry should be is a corrupt entry.
fn as_corrupt(e: StoreError, id: &Id, pack: &str) -> StoreError {
    match e {
        StoreError::DamagedFile { reason, .. } => StoreError::Corrupt {
            id: *id,
            pack: pack.into(),
            reason,
        },
        other => other,
    }
}

/// Reads and verifies the entry `id` whose header (at `offset`) is `header`; `base` gives
/// the raw bytes of a delta's base. A block's header with a member's id is an error (the
/// member is read through [`read_block`]).
pub fn read_entry(
    file: &File,
    path: &Path,
    pack: &str,
    offset: u64,
    header: &EntryHeader,
    id: &Id,
    base: &mut dyn FnMut(&Id) -> std::result::Result<Vec<u8>, String>,
) -> Result<Vec<u8>> {
    if header.id != *id {
        return Err(StoreError::Corrupt {
            id: *id,
            pack: pack.into(),
            reason: format!(
                "offset {offset} holds {} {}; a block member is read through its block",
                header.kind.name(),
                header.id.short(16)
            ),
        });
    }
    let mut stored = vec![0u8; header.stored_len as usize];
    read_exact_at(file, path, &mut stored, offset + ENTRY_HEADER_LEN as u64)
        .map_err(|e| as_corrupt(e, id, pack))?;
    decode_entry(header, stored, base).map_err(|reason| StoreError::Corrupt {
        id: *id,
        pack: pack.into(),
        reason,
    })
}

/// Reads, verifies and decodes the block entry at `offset` (its header is `header`).
pub fn read_block(
    file: &File,
    path: &Path,
    offset: u64,
    header: &EntryHeader,
) -> Result<crate::block::Block> {
    let mut stored = vec![0u8; header.stored_len as usize];
    read_exact_at(file, path, &mut stored, offset + ENTRY_HEADER_LEN as u64)?;
    decode_block(path, offset, header, stored)
}

/// Verifies and decodes the stored bytes of the block entry at `offset` of `path`.
pub fn decode_block(
    path: &Path,
    offset: u64,
    header: &EntryHeader,
    stored: Vec<u8>,
) -> Result<crate::block::Block> {
    let damaged = |reason: String| StoreError::DamagedFile {
        file: path.into(),
        reason: format!("block {} at offset {offset}: {reason}", header.id.short(16)),
    };
    let raw = decode_entry(header, stored, &mut |_| {
        Err("a block is never a delta".into())
    })
    .map_err(damaged)?;
    crate::block::Block::decode(raw).map_err(damaged)
}

/// Where the entries of a pack and the members of its blocks are, as the index lists
/// them: the footer's rows, plus one row per block member at its block's offset (found
/// by reading the block). Fails if the footer is damaged; a block that cannot be read is
/// left out (its own row stays) and why is returned beside the rows.
pub fn read_rows(file: &File, path: &Path) -> Result<(Vec<FooterRow>, Vec<StoreError>)> {
    let mut rows = read_footer(file, path)?;
    let blocks: Vec<FooterRow> = rows
        .iter()
        .filter(|r| r.kind == Kind::Block)
        .copied()
        .collect();
    let mut damaged = Vec::new();
    for b in &blocks {
        match block_rows(file, path, u64::from(b.offset)) {
            Ok(members) => rows.extend(members),
            Err(e) => damaged.push(e),
        }
    }
    if !blocks.is_empty() {
        rows.sort_unstable();
        rows.dedup_by_key(|r| r.id);
    }
    Ok((rows, damaged))
}

/// One row per member of the block at `offset`.
pub fn block_rows(file: &File, path: &Path, offset: u64) -> Result<Vec<FooterRow>> {
    let header = read_header(file, path, offset)?;
    if header.kind != Kind::Block {
        return Err(StoreError::DamagedFile {
            file: path.into(),
            reason: format!(
                "offset {offset} holds a {}, not a block",
                header.kind.name()
            ),
        });
    }
    let block = read_block(file, path, offset, &header)?;
    Ok(block
        .members()
        .map(|(id, kind, _)| FooterRow {
            id,
            offset: offset as u32,
            kind,
        })
        .collect())
}

/// Reads a pack's footer table; fails if the footer is missing or damaged.
pub fn read_footer(file: &File, path: &Path) -> Result<Vec<FooterRow>> {
    let damaged = |reason: String| StoreError::DamagedFile {
        file: path.into(),
        reason,
    };
    let len = file.metadata().io("reading", path)?.len();
    if len < PACK_HEADER_LEN + FOOTER_TRAILER_LEN {
        return Err(damaged(format!("truncated: only {len} bytes")));
    }
    let mut header = [0u8; PACK_HEADER_LEN as usize];
    read_exact_at(file, path, &mut header, 0)?;
    if &header[..8] != PACK_MAGIC {
        return Err(damaged("not a lifeos pack (bad magic)".into()));
    }
    let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    if !(PACK_VERSION_MIN..=PACK_VERSION).contains(&version) {
        return Err(damaged(format!(
            "pack format version {version} is not supported"
        )));
    }
    let mut trailer = [0u8; FOOTER_TRAILER_LEN as usize];
    read_exact_at(file, path, &mut trailer, len - FOOTER_TRAILER_LEN)?;
    if &trailer[20..28] != FOOTER_MAGIC {
        return Err(damaged(
            "footer is missing (truncated or unfinished pack)".into(),
        ));
    }
    let count = u32::from_le_bytes(trailer[..4].try_into().expect("4 bytes")) as u64;
    let table_len = count * FOOTER_ROW_LEN as u64;
    if table_len + FOOTER_TRAILER_LEN + PACK_HEADER_LEN > len {
        return Err(damaged(format!(
            "footer claims {count} entries, more than fit"
        )));
    }
    let mut table = vec![0u8; table_len as usize];
    read_exact_at(file, path, &mut table, len - FOOTER_TRAILER_LEN - table_len)?;
    if blake3::hash(&table).as_bytes()[..16] != trailer[4..20] {
        return Err(damaged("footer checksum mismatch".into()));
    }
    let entries_end = len - FOOTER_TRAILER_LEN - table_len;
    let mut out = Vec::with_capacity(count as usize);
    for row in table.chunks_exact(FOOTER_ROW_LEN) {
        let id = Id::from_slice(&row[..ID_LEN]).expect("32 bytes");
        let off = u32::from_le_bytes(row[ID_LEN..ID_LEN + 4].try_into().expect("4 bytes"));
        if u64::from(off) < PACK_HEADER_LEN
            || u64::from(off) + ENTRY_HEADER_LEN as u64 > entries_end
        {
            return Err(damaged(format!(
                "footer offset {off} of {} is out of range",
                id.short(16)
            )));
        }
        let kind = Kind::from_u8(row[ID_LEN + 4]).ok_or_else(|| {
            damaged(format!(
                "footer kind {} of {}",
                row[ID_LEN + 4],
                id.short(16)
            ))
        })?;
        out.push(FooterRow {
            id,
            offset: off,
            kind,
        });
    }
    Ok(out)
}

/// An entry header found by [`scan`], with its offset.
pub type ScannedEntry = (EntryHeader, u64);

/// Walks the entry headers of a pack from the start, for salvage and checking. Stops at the
/// footer or at the first unreadable header; returns the entries found and, if the walk
/// stopped early, why.
pub fn scan(file: &File, path: &Path) -> Result<(Vec<ScannedEntry>, Option<String>)> {
    let len = file.metadata().io("reading", path)?.len();
    let entries_end = match read_footer(file, path) {
        Ok(t) => len - FOOTER_TRAILER_LEN - (t.len() * FOOTER_ROW_LEN) as u64,
        Err(_) => len,
    };
    let mut out = Vec::new();
    let mut off = PACK_HEADER_LEN;
    while off < entries_end {
        if off + ENTRY_HEADER_LEN as u64 > entries_end {
            return Ok((out, Some(format!("truncated entry header at offset {off}"))));
        }
        let header = match read_header(file, path, off) {
            Ok(h) => h,
            Err(e) => return Ok((out, Some(e.to_string()))),
        };
        let next = off + ENTRY_HEADER_LEN as u64 + u64::from(header.stored_len);
        if next > entries_end {
            return Ok((
                out,
                Some(format!(
                    "entry {} at offset {off} is truncated",
                    header.id.short(16)
                )),
            ));
        }
        out.push((header, off));
        off = next;
    }
    Ok((out, None))
}

/// Reads the header and stored (still compressed) bytes of the entry at `offset`.
pub fn read_stored(file: &File, path: &Path, offset: u32) -> Result<(EntryHeader, Vec<u8>)> {
    let h = read_header(file, path, u64::from(offset))?;
    let stored = read_stored_after(file, path, offset, &h)?;
    Ok((h, stored))
}

/// Reads the stored (still compressed) bytes of the entry at `offset` whose header, read
/// already, is `h`.
pub fn read_stored_after(
    file: &File,
    path: &Path,
    offset: u32,
    h: &EntryHeader,
) -> Result<Vec<u8>> {
    let mut stored = vec![0u8; h.stored_len as usize];
    read_exact_at(
        file,
        path,
        &mut stored,
        u64::from(offset) + ENTRY_HEADER_LEN as u64,
    )?;
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::{mutate, Edit};
    use proptest::prelude::*;

    /// A valid pack of a few entries (compressed, stored raw, and empty), as bytes.
    fn valid_pack() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let mut w = PackWriter::create(dir.path().join("p.tmp")).unwrap();
        let mut z = zstd::bulk::Compressor::new(3).unwrap();
        let entries: [(Kind, Vec<u8>); 4] = [
            (
                Kind::Chunk,
                b"hello hello hello hello hello hello".repeat(20),
            ),
            (Kind::Chunk, (0..=255u8).collect()),
            (Kind::Tree, b"tree bytes".to_vec()),
            (Kind::Chunk, Vec::new()),
        ];
        for (kind, raw) in &entries {
            let (h, stored) = crate::store::encode_entry(&mut z, Id::hash(raw), *kind, raw);
            w.append(&h, &stored).unwrap();
        }
        // A delta against the first entry.
        let mut raw = entries[0].1.clone();
        raw.extend_from_slice(b" and a little more");
        let (h, stored) = delta_entry(&raw, &entries[0].1).unwrap();
        w.append(&h, &stored).unwrap();
        // A block of two members.
        let mut b = crate::block::BlockBuilder::default();
        for raw in [b"a member, a member ".repeat(9), b"another".to_vec()] {
            b.push(Kind::Commit, Id::hash(&raw), &raw);
        }
        let (raw, members) = b.take();
        let (h, stored) = crate::store::encode_entry(&mut z, Id::hash(&raw), Kind::Block, &raw);
        w.append_block(&h, &stored, &members).unwrap();
        let (done, _) = w.finish().unwrap();
        let name = done.name.clone();
        done.install(dir.path()).unwrap();
        std::fs::read(dir.path().join(format!("{name}.pack"))).unwrap()
    }

    /// Delta bases from the same pack (found by a scan), themselves read without bases.
    fn bases<'a>(
        f: &'a File,
        path: &'a Path,
    ) -> impl FnMut(&Id) -> std::result::Result<Vec<u8>, String> + 'a {
        move |b: &Id| {
            let (found, _) = scan(f, path).map_err(|e| e.to_string())?;
            let (h, off) = found
                .iter()
                .find(|(h, _)| h.id == *b)
                .ok_or("base not in the pack")?;
            read_entry(f, path, "p", *off, h, b, &mut |_| {
                Err("a base of a base".into())
            })
            .map_err(|e| e.to_string())
        }
    }

    /// `raw` as a delta chunk entry against `base`, if that is shorter.
    fn delta_entry(raw: &[u8], base: &[u8]) -> Option<(EntryHeader, Vec<u8>)> {
        let stored = compress_delta(3, raw, &Id::hash(base), base, raw.len().max(64))?;
        let h = EntryHeader {
            id: Id::hash(raw),
            kind: Kind::Chunk,
            codec: Codec::Delta,
            raw_len: raw.len() as u32,
            stored_len: stored.len() as u32,
        };
        Some((h, stored))
    }

    /// Reads an entry of pack `f`, its delta bases from the same pack.
    fn read_with_bases(f: &File, path: &Path, off: u64, id: &Id) -> Result<(Kind, Vec<u8>)> {
        let h = read_header_of(f, path, "p", off, id)?;
        Ok((
            h.kind,
            read_entry(f, path, "p", off, &h, id, &mut bases(f, path))?,
        ))
    }

    fn check_pack(bytes: &[u8]) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.pack");
        std::fs::write(&path, bytes).unwrap();
        let f = File::open(&path).unwrap();
        if let Ok((rows, _)) = read_rows(&f, &path) {
            for r in rows.iter().take(64) {
                let _ = read_with_bases(&f, &path, u64::from(r.offset), &r.id);
                let _ = read_stored(&f, &path, r.offset);
            }
        }
        if let Ok((found, _)) = scan(&f, &path) {
            for (h, off) in found.iter().take(64) {
                // What a verified read returns is exactly what was stored under that id.
                if let Ok((kind, raw)) = read_with_bases(&f, &path, *off, &h.id) {
                    assert_eq!(kind, h.kind);
                    assert!(verify_content(kind, &h.id, &raw).is_ok());
                }
            }
        }
    }

    #[test]
    fn a_valid_pack_reads_back() {
        let bytes = valid_pack();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.pack");
        std::fs::write(&path, &bytes).unwrap();
        let f = File::open(&path).unwrap();
        let rows = read_footer(&f, &path).unwrap();
        assert_eq!(rows.len(), 6);
        for r in &rows {
            read_with_bases(&f, &path, u64::from(r.offset), &r.id).unwrap();
        }
        // The index lists the block's members too, at the block's offset.
        let (indexed, damaged) = read_rows(&f, &path).unwrap();
        assert!(damaged.is_empty());
        assert_eq!(indexed.len(), 8);
        let block = rows.iter().find(|r| r.kind == Kind::Block).unwrap();
        let (h, _) = read_stored(&f, &path, block.offset).unwrap();
        let members = read_block(&f, &path, u64::from(block.offset), &h).unwrap();
        for m in indexed.iter().filter(|r| r.kind == Kind::Commit) {
            assert_eq!(m.offset, block.offset);
            let (kind, raw) = members.get(&m.id).unwrap();
            assert_eq!((kind, Id::hash(raw)), (Kind::Commit, m.id));
        }
        // Without its base a delta is an error naming the base, not wrong bytes.
        let (found, _) = scan(&f, &path).unwrap();
        let (h, off) = found.iter().find(|(h, _)| h.codec == Codec::Delta).unwrap();
        let err = read_entry(&f, &path, "p", *off, h, &h.id, &mut |_| {
            Err("missing".into())
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("delta base") && err.contains("missing"),
            "{err}"
        );
    }

    proptest! {
        /// A damaged pack (footer, headers or compressed data) is an error, never a panic
        /// and never the wrong bytes.
        #[test]
        fn damaged_packs_never_panic(edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6)) {
            let edits: Vec<Edit> = edits;
            check_pack(&mutate(&valid_pack(), &edits));
        }

        /// A delta decodes to exactly its raw bytes, given its base, whatever the edits
        /// between them.
        #[test]
        fn deltas_round_trip(
            base in proptest::collection::vec(any::<u8>(), 0..4000),
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..8),
        ) {
            let edits: Vec<Edit> = edits;
            let raw = mutate(&base, &edits);
            let base_id = Id::hash(&base);
            if let Some((h, stored)) = delta_entry(&raw, &base) {
                prop_assert_eq!(delta_base(&stored), Some(base_id));
                let back = decode_entry(&h, stored, &mut |b| {
                    if *b == base_id { Ok(base.clone()) } else { Err("unknown base".into()) }
                });
                prop_assert_eq!(back, Ok(raw));
            }
        }

        /// The same with a base zstd would take for a dictionary if it were not told
        /// otherwise.
        #[test]
        fn deltas_against_a_base_that_looks_like_a_dictionary_round_trip(
            base in proptest::collection::vec(any::<u8>(), 100..2000),
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..8),
        ) {
            let edits: Vec<Edit> = edits;
            let mut base = base;
            base[..4].copy_from_slice(&ZSTD_DICT_MAGIC);
            let raw = mutate(&base, &edits);
            if let Some((h, stored)) = delta_entry(&raw, &base) {
                let back = decode_entry(&h, stored, &mut |_| Ok(base.clone()));
                prop_assert_eq!(back, Ok(raw));
            }
        }

        /// One damaged entry (header and stored bytes), decoded directly.
        #[test]
        fn damaged_entries_never_panic(edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6)) {
            let bytes = valid_pack();
            let entry = &bytes[PACK_HEADER_LEN as usize..];
            let m = mutate(entry, &edits);
            if m.len() >= ENTRY_HEADER_LEN {
                let h: [u8; ENTRY_HEADER_LEN] = m[..ENTRY_HEADER_LEN].try_into().unwrap();
                if let Ok(header) = EntryHeader::decode(&h) {
                    let base = b"hello hello hello hello hello hello".repeat(20);
                    let _ = decode_entry(&header, m[ENTRY_HEADER_LEN..].to_vec(), &mut |_| Ok(base.clone()));
                }
            }
        }
    }
}
