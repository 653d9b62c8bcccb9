//! The global object index: immutable, sorted index layers, each covering a set of packs.
//!
//! Every transaction adds one layer for the packs it wrote; layers are merged geometrically
//! so there are never many. Small layers are held in memory; large ones stay on disk and
//! are searched with one positioned read per lookup (a fanout table narrows the range), so
//! memory stays small at tens of millions of chunks.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{IoContext, Result, StoreError};
use crate::id::{Id, ID_LEN};
use crate::kind::Kind;
use crate::pack::read_exact_at;

/// First bytes of every index layer.
pub const INDEX_MAGIC: &[u8; 8] = b"LIFEOSIX";
/// Index format version written by this code.
pub const INDEX_VERSION: u32 = 1;
const HEADER_LEN: u64 = 32;
const PACK_NAME_LEN: usize = 16;
/// Length of one index row: id, pack number (24 bits), kind, offset.
pub const ROW_LEN: usize = ID_LEN + 8;
/// Layers up to this size are loaded into memory.
pub(crate) const MEMORY_LAYER_MAX: u64 = 4 << 20;

/// Where an object is stored, and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The pack's name.
    pub pack: Arc<str>,
    /// Offset of the entry header in the pack.
    pub offset: u32,
    /// The entry's kind.
    pub kind: Kind,
}

enum Rows {
    Memory(Vec<u8>),
    Disk { file: File, rows_at: u64 },
}

/// One index layer file.
pub struct Layer {
    /// The layer's name (file `index/<name>.idx`).
    pub name: String,
    /// Its path.
    pub path: PathBuf,
    /// Names of the packs it covers.
    pub packs: Vec<Arc<str>>,
    /// Number of rows.
    pub count: u64,
    bits: u8,
    fanout: Vec<u32>,
    rows: Rows,
    /// Whether the whole layer's checksum has been verified (at open for memory layers;
    /// on demand for large ones, the first time a read through them fails).
    verified: std::sync::atomic::AtomicBool,
}

fn damaged(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::DamagedFile {
        file: path.into(),
        reason: reason.into(),
    }
}

fn fanout_bits(count: u64) -> u8 {
    if count > 65_536 {
        16
    } else {
        8
    }
}

fn bucket(id: &Id, bits: u8) -> usize {
    if bits == 16 {
        usize::from(u16::from_be_bytes([id.0[0], id.0[1]]))
    } else {
        usize::from(id.0[0])
    }
}

impl Layer {
    /// Opens a layer, checking its header and size (and, for memory layers, its checksum).
    pub fn open(path: &Path) -> Result<Layer> {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| damaged(path, "bad file name"))?
            .to_string();
        let file = File::open(path).io("opening", path)?;
        let len = file.metadata().io("reading", path)?.len();
        let mut h = [0u8; HEADER_LEN as usize];
        read_exact_at(&file, path, &mut h, 0)?;
        if &h[..8] != INDEX_MAGIC {
            return Err(damaged(path, "not a lifeos index (bad magic)"));
        }
        let version = u32::from_le_bytes(h[8..12].try_into().expect("4"));
        if version != INDEX_VERSION {
            return Err(damaged(
                path,
                format!("index format version {version} is not supported"),
            ));
        }
        let bits = h[12];
        if bits != 8 && bits != 16 {
            return Err(damaged(path, format!("fanout width {bits}")));
        }
        let count = u64::from_le_bytes(h[16..24].try_into().expect("8"));
        let npacks = u32::from_le_bytes(h[24..28].try_into().expect("4")) as u64;
        let rows_at = HEADER_LEN + npacks * PACK_NAME_LEN as u64;
        let fanout_at = rows_at.checked_add(
            count
                .checked_mul(ROW_LEN as u64)
                .ok_or_else(|| damaged(path, "row count overflows"))?,
        );
        let fanout_len = (1u64 << bits) * 4;
        let expect = fanout_at.map(|f| f + fanout_len + ID_LEN as u64);
        if expect != Some(len) {
            return Err(damaged(
                path,
                format!(
                    "truncated or padded: {len} bytes, header implies {}",
                    expect.unwrap_or(u64::MAX)
                ),
            ));
        }
        let fanout_at = fanout_at.expect("checked");
        let mut packs_raw = vec![0u8; (npacks as usize) * PACK_NAME_LEN];
        read_exact_at(&file, path, &mut packs_raw, HEADER_LEN)?;
        let packs = packs_raw
            .chunks_exact(PACK_NAME_LEN)
            .map(|p| Arc::<str>::from(hex::encode(p)))
            .collect();
        let mut fanout_raw = vec![0u8; fanout_len as usize];
        read_exact_at(&file, path, &mut fanout_raw, fanout_at)?;
        let fanout: Vec<u32> = fanout_raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4")))
            .collect();
        if fanout.windows(2).any(|w| w[0] > w[1])
            || u64::from(*fanout.last().expect("non-empty")) != count
        {
            return Err(damaged(path, "fanout table is inconsistent"));
        }
        let memory = len <= MEMORY_LAYER_MAX;
        let rows = if memory {
            let mut all = vec![0u8; len as usize];
            read_exact_at(&file, path, &mut all, 0)?;
            let (body, sum) = all.split_at(all.len() - ID_LEN);
            if blake3::hash(body).as_bytes() != sum {
                return Err(damaged(path, "checksum mismatch"));
            }
            Rows::Memory(all[rows_at as usize..fanout_at as usize].to_vec())
        } else {
            Rows::Disk { file, rows_at }
        };
        Ok(Layer {
            name,
            path: path.into(),
            packs,
            count,
            bits,
            fanout,
            rows,
            verified: memory.into(),
        })
    }

    /// Verifies the layer's checksum once (streaming over a large layer); later calls
    /// return at once.
    pub fn ensure_verified(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        if self.verified.load(Ordering::Acquire) {
            return Ok(());
        }
        self.verify_checksum()?;
        self.verified.store(true, Ordering::Release);
        Ok(())
    }

    fn decode_row(&self, row: &[u8]) -> Result<(Id, Location)> {
        let id = Id::from_slice(&row[..ID_LEN]).expect("32 bytes");
        let pack_no = u32::from_le_bytes([row[32], row[33], row[34], 0]) as usize;
        let kind = Kind::from_u8(row[35]).ok_or_else(|| {
            damaged(
                &self.path,
                format!("row for {} has kind {}", id.short(16), row[35]),
            )
        })?;
        let offset = u32::from_le_bytes(row[36..40].try_into().expect("4"));
        let pack = self
            .packs
            .get(pack_no)
            .ok_or_else(|| {
                damaged(
                    &self.path,
                    format!("row for {} names pack #{pack_no}", id.short(16)),
                )
            })?
            .clone();
        Ok((id, Location { pack, offset, kind }))
    }

    /// Finds `id` in this layer.
    pub fn lookup(&self, id: &Id) -> Result<Option<Location>> {
        let b = bucket(id, self.bits);
        let lo = if b == 0 {
            0
        } else {
            self.fanout[b - 1] as usize
        };
        let hi = self.fanout[b] as usize;
        if lo >= hi {
            return Ok(None);
        }
        let disk_buf;
        let rows: &[u8] = match &self.rows {
            Rows::Memory(all) => &all[lo * ROW_LEN..hi * ROW_LEN],
            Rows::Disk { file, rows_at } => {
                let mut buf = vec![0u8; (hi - lo) * ROW_LEN];
                read_exact_at(file, &self.path, &mut buf, rows_at + (lo * ROW_LEN) as u64)?;
                disk_buf = buf;
                &disk_buf
            }
        };
        let n = rows.len() / ROW_LEN;
        let (mut a, mut z) = (0usize, n);
        while a < z {
            let mid = (a + z) / 2;
            let row = &rows[mid * ROW_LEN..(mid + 1) * ROW_LEN];
            match row[..ID_LEN].cmp(&id.0[..]) {
                std::cmp::Ordering::Less => a = mid + 1,
                std::cmp::Ordering::Greater => z = mid,
                std::cmp::Ordering::Equal => return self.decode_row(row).map(|(_, l)| Some(l)),
            }
        }
        Ok(None)
    }

    /// Streams every row in id order.
    pub fn rows(&self) -> Result<LayerRows<'_>> {
        let reader: Box<dyn Read + '_> = match &self.rows {
            Rows::Memory(all) => Box::new(&all[..]),
            Rows::Disk { file, rows_at } => {
                let mut f = file.try_clone().io("opening", &self.path)?;
                std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(*rows_at))
                    .io("reading", &self.path)?;
                Box::new(BufReader::with_capacity(1 << 20, f).take(self.count * ROW_LEN as u64))
            }
        };
        Ok(LayerRows {
            layer: self,
            reader,
            left: self.count,
        })
    }

    /// Verifies the layer's checksum by reading it whole (streaming).
    pub fn verify_checksum(&self) -> Result<()> {
        let file = File::open(&self.path).io("opening", &self.path)?;
        let len = file.metadata().io("reading", &self.path)?.len();
        let mut hasher = blake3::Hasher::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut off = 0u64;
        let body = len - ID_LEN as u64;
        while off < body {
            let n = ((body - off) as usize).min(buf.len());
            read_exact_at(&file, &self.path, &mut buf[..n], off)?;
            hasher.update(&buf[..n]);
            off += n as u64;
        }
        let mut sum = [0u8; ID_LEN];
        file.read_exact_at(&mut sum, body)
            .io("reading", &self.path)?;
        if hasher.finalize().as_bytes() != &sum {
            return Err(damaged(&self.path, "checksum mismatch"));
        }
        Ok(())
    }
}

/// Iterator over a layer's rows.
pub struct LayerRows<'a> {
    layer: &'a Layer,
    reader: Box<dyn Read + 'a>,
    left: u64,
}

impl Iterator for LayerRows<'_> {
    type Item = Result<(Id, Location)>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let mut row = [0u8; ROW_LEN];
        if let Err(e) = self.reader.read_exact(&mut row) {
            self.left = 0;
            return Some(Err(e).io("reading", &self.layer.path));
        }
        Some(self.layer.decode_row(&row))
    }
}

/// Writes a layer from rows sorted by id (duplicates skipped), durably, into `dir`, using
/// temporary files in `tmp` whose names start with `prefix` (the writer's session, so
/// that other processes know they are in use). Returns the new layer's name.
pub fn write_layer(
    dir: &Path,
    tmp: &Path,
    prefix: &str,
    packs: &[Arc<str>],
    count_hint: u64,
    rows: impl Iterator<Item = Result<(Id, Location)>>,
) -> Result<String> {
    if packs.len() >= 1 << 24 {
        return Err(damaged(dir, "more than 2^24 packs in one index layer"));
    }
    let pack_no: HashMap<&str, u32> = packs
        .iter()
        .enumerate()
        .map(|(i, p)| (&**p, i as u32))
        .collect();
    let tmp_path = tmp.join(format!(
        "{prefix}-index-{}.tmp",
        crate::fsutil::random_hex(8)
    ));
    let file = File::options()
        .write(true)
        .create_new(true)
        .open(&tmp_path)
        .io("creating", &tmp_path)?;
    let result = (|| {
        let mut out = HashingWriter {
            inner: BufWriter::with_capacity(crate::WRITE_BUFFER, file),
            hasher: blake3::Hasher::new(),
        };
        // The row count is only known at the end; rows are streamed, so the header is
        // written with the hint and rewritten if needed.
        let bits = fanout_bits(count_hint);
        let mut header = [0u8; HEADER_LEN as usize];
        header[..8].copy_from_slice(INDEX_MAGIC);
        header[8..12].copy_from_slice(&INDEX_VERSION.to_le_bytes());
        header[12] = bits;
        header[24..28].copy_from_slice(&(packs.len() as u32).to_le_bytes());
        // Rows go to a temporary spill so that the header (with the final count) comes first.
        let mut spill = tempfile_in(tmp, prefix)?;
        let mut fanout = vec![0u32; 1 << bits];
        let mut count = 0u64;
        let mut last: Option<Id> = None;
        {
            let mut w = BufWriter::with_capacity(crate::WRITE_BUFFER, &mut spill.0);
            for row in rows {
                let (id, loc) = row?;
                if last == Some(id) {
                    continue;
                }
                if last.is_some_and(|l| l > id) {
                    return Err(damaged(&tmp_path, "rows are not sorted"));
                }
                last = Some(id);
                let no = *pack_no
                    .get(&*loc.pack)
                    .ok_or_else(|| damaged(&tmp_path, "row names an unlisted pack"))?;
                w.write_all(&id.0).io("writing", &spill.1)?;
                w.write_all(&no.to_le_bytes()[..3])
                    .io("writing", &spill.1)?;
                w.write_all(&[loc.kind as u8]).io("writing", &spill.1)?;
                w.write_all(&loc.offset.to_le_bytes())
                    .io("writing", &spill.1)?;
                fanout[bucket(&id, bits)] += 1;
                count += 1;
            }
            w.flush().io("writing", &spill.1)?;
        }
        header[16..24].copy_from_slice(&count.to_le_bytes());
        out.write_all(&header).io("writing", &tmp_path)?;
        for p in packs {
            let mut raw = [0u8; PACK_NAME_LEN];
            hex::decode_to_slice(&**p, &mut raw)
                .map_err(|_| damaged(&tmp_path, format!("bad pack name {p}")))?;
            out.write_all(&raw).io("writing", &tmp_path)?;
        }
        std::io::Seek::seek(&mut spill.0, std::io::SeekFrom::Start(0)).io("reading", &spill.1)?;
        std::io::copy(
            &mut BufReader::with_capacity(1 << 20, &mut spill.0),
            &mut out,
        )
        .io("writing", &tmp_path)?;
        let mut acc = 0u32;
        for f in &fanout {
            acc += f;
            out.write_all(&acc.to_le_bytes()).io("writing", &tmp_path)?;
        }
        let sum = out.hasher.finalize();
        let mut inner = out.inner;
        inner.write_all(sum.as_bytes()).io("writing", &tmp_path)?;
        let file = inner
            .into_inner()
            .map_err(|e| e.into_error())
            .io("writing", &tmp_path)?;
        file.sync_all().io("syncing", &tmp_path)?;
        let _ = std::fs::remove_file(&spill.1);
        let name = sum.to_hex()[..32].to_string();
        let dest = dir.join(format!("{name}.idx"));
        std::fs::rename(&tmp_path, &dest).io("renaming into place", &dest)?;
        crate::fsutil::sync_dir(dir)?;
        Ok(name)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp_path);
        for e in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
            if e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{prefix}-spill-"))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    result
}

fn tempfile_in(dir: &Path, prefix: &str) -> Result<(File, PathBuf)> {
    let path = dir.join(format!(
        "{prefix}-spill-{}.tmp",
        crate::fsutil::random_hex(8)
    ));
    let f = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .io("creating", &path)?;
    Ok((f, path))
}

struct HashingWriter<W: Write> {
    inner: W,
    hasher: blake3::Hasher,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Rows gathered in memory before they are sorted and spilled: 20 MiB.
const SORT_RUN_ROWS: usize = 512 * 1024;

/// The rows of many packs, sorted by id into one layer in bounded memory: rows are
/// gathered in runs of [`SORT_RUN_ROWS`], each sorted and spilled to a temporary file
/// once full, and the runs are merged as the layer is written. A layer of ten million
/// rows holds one run of 20 MiB, not every row.
pub(crate) struct RowSorter {
    /// Rows a run holds before it is spilled.
    run_rows: usize,
    tmp: PathBuf,
    prefix: String,
    packs: Vec<Arc<str>>,
    run: Vec<[u8; ROW_LEN]>,
    spills: Vec<Arc<SpillRun>>,
}

/// One sorted run of rows spilled to a temporary file, which can also be asked whether
/// it holds an id: a transaction that has written millions of entries keeps their ids
/// here rather than in memory (see [`crate::Transaction`]). What it keeps in memory is a
/// Bloom filter of 16 bits per row and where each value of an id's first two bytes
/// starts: an absent id costs no read 99.9% of the time, a present one reads the few rows
/// of its bucket. The file is removed when the last holder drops it.
pub(crate) struct SpillRun {
    file: File,
    path: PathBuf,
    rows: u64,
    /// `starts[b]..starts[b + 1]` are the rows whose id begins with the two bytes `b`.
    starts: Vec<u32>,
    bloom: Vec<u64>,
}

/// Bits of a run's Bloom filter per row, and probes per id: about 0.05% false positives.
const BLOOM_BITS_PER_ROW: usize = 16;
const BLOOM_PROBES: u64 = 11;

impl SpillRun {
    /// The filter's bit positions for `id`, from bytes of the id the fanout does not use
    /// (double hashing). Ids are BLAKE3 digests; if some were not uniform the filter would
    /// only answer "maybe" more often, never wrongly "no".
    fn probes(id: &Id, bits: u64) -> impl Iterator<Item = u64> {
        let h1 = u64::from_le_bytes(id.0[16..24].try_into().expect("8 bytes"));
        let h2 = u64::from_le_bytes(id.0[24..32].try_into().expect("8 bytes")) | 1;
        (0..BLOOM_PROBES).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % bits)
    }

    /// Builds the lookup structures of `rows` (sorted) written to `file`.
    fn new(file: File, path: PathBuf, rows: &[[u8; ROW_LEN]]) -> SpillRun {
        let words = (rows.len() * BLOOM_BITS_PER_ROW).div_ceil(64).max(1);
        let mut bloom = vec![0u64; words];
        let bits = words as u64 * 64;
        let mut starts = vec![0u32; (1 << 16) + 1];
        for row in rows {
            let id = Id::from_slice(&row[..ID_LEN]).expect("32 bytes");
            for bit in Self::probes(&id, bits) {
                bloom[(bit / 64) as usize] |= 1 << (bit % 64);
            }
            starts[usize::from(u16::from_be_bytes([row[0], row[1]])) + 1] += 1;
        }
        for b in 1..starts.len() {
            starts[b] += starts[b - 1];
        }
        SpillRun {
            file,
            path,
            rows: rows.len() as u64,
            starts,
            bloom,
        }
    }

    /// Whether the run holds a row for `id`.
    pub(crate) fn contains(&self, id: &Id) -> Result<bool> {
        let bits = self.bloom.len() as u64 * 64;
        if !Self::probes(id, bits)
            .all(|bit| self.bloom[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
        {
            return Ok(false);
        }
        let b = usize::from(u16::from_be_bytes([id.0[0], id.0[1]]));
        let (lo, hi) = (self.starts[b] as usize, self.starts[b + 1] as usize);
        let mut buf = vec![0u8; (hi - lo) * ROW_LEN];
        read_exact_at(&self.file, &self.path, &mut buf, (lo * ROW_LEN) as u64)?;
        Ok(buf.chunks_exact(ROW_LEN).any(|r| r[..ID_LEN] == id.0))
    }

    /// Calls `f` with every id of the run, in order.
    pub(crate) fn for_each_id(&self, mut f: impl FnMut(&Id)) -> Result<()> {
        let mut buf = vec![0u8; 8192 * ROW_LEN];
        let mut at = 0u64;
        while at < self.rows {
            let n = (self.rows - at).min(8192) as usize;
            read_exact_at(
                &self.file,
                &self.path,
                &mut buf[..n * ROW_LEN],
                at * ROW_LEN as u64,
            )?;
            for row in buf[..n * ROW_LEN].chunks_exact(ROW_LEN) {
                f(&Id::from_slice(&row[..ID_LEN]).expect("32 bytes"));
            }
            at += n as u64;
        }
        Ok(())
    }
}

impl Drop for SpillRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl RowSorter {
    /// Spills every `rows` rows instead of [`SORT_RUN_ROWS`], for tests of what spills.
    #[cfg(test)]
    pub(crate) fn set_run_rows(&mut self, rows: usize) {
        self.run_rows = rows;
    }

    /// A sorter spilling into `tmp` with files named after the writer's session `prefix`.
    pub(crate) fn new(tmp: &Path, prefix: &str) -> RowSorter {
        RowSorter {
            run_rows: SORT_RUN_ROWS,
            tmp: tmp.into(),
            prefix: prefix.into(),
            packs: Vec::new(),
            run: Vec::new(),
            spills: Vec::new(),
        }
    }

    /// Adds the rows of pack `name`.
    pub(crate) fn add_pack(&mut self, name: &str, rows: &[crate::pack::FooterRow]) -> Result<()> {
        let no = self.packs.len() as u32;
        if no >= 1 << 24 {
            return Err(damaged(
                &self.tmp,
                "more than 2^24 packs in one index layer",
            ));
        }
        self.packs.push(Arc::from(name));
        for r in rows {
            let mut row = [0u8; ROW_LEN];
            row[..ID_LEN].copy_from_slice(&r.id.0);
            // Big-endian: rows sort by id, then by the order their packs were added.
            row[32..35].copy_from_slice(&no.to_be_bytes()[1..]);
            row[35] = r.kind as u8;
            row[36..40].copy_from_slice(&r.offset.to_le_bytes());
            self.run.push(row);
            if self.run.len() >= self.run_rows {
                self.spill()?;
            }
        }
        Ok(())
    }

    /// Whether no pack was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.packs.is_empty()
    }

    /// The runs spilled so far, oldest first.
    pub(crate) fn spilled(&self) -> &[Arc<SpillRun>] {
        &self.spills
    }

    /// Sorts the rows gathered and writes them to a spill file.
    fn spill(&mut self) -> Result<()> {
        self.run.sort_unstable();
        let (mut file, path) = tempfile_in(&self.tmp, &self.prefix)?;
        let written = (|| {
            let mut w = BufWriter::with_capacity(crate::WRITE_BUFFER, &file);
            for row in &self.run {
                w.write_all(row)?;
            }
            w.flush()?;
            drop(w);
            std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0)).map(drop)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&path);
            return Err(e).io("writing", &path);
        }
        self.spills
            .push(Arc::new(SpillRun::new(file, path, &self.run)));
        self.run.clear();
        Ok(())
    }

    /// Writes the layer into `dir`; returns its name.
    pub(crate) fn write(mut self, dir: &Path) -> Result<String> {
        let decode = |packs: &[Arc<str>], row: &[u8; ROW_LEN]| {
            let id = Id::from_slice(&row[..ID_LEN]).expect("32 bytes");
            let pack = packs[u32::from_be_bytes([0, row[32], row[33], row[34]]) as usize].clone();
            let kind = Kind::from_u8(row[35]).expect("written from a kind");
            let offset = u32::from_le_bytes(row[36..40].try_into().expect("4"));
            (id, Location { pack, offset, kind })
        };
        if self.spills.is_empty() {
            self.run.sort_unstable();
            let run = std::mem::take(&mut self.run);
            let packs = std::mem::take(&mut self.packs);
            return write_layer(
                dir,
                &self.tmp,
                &self.prefix,
                &packs,
                run.len() as u64,
                run.iter().map(|r| Ok(decode(&packs, r))),
            );
        }
        if !self.run.is_empty() {
            self.spill()?;
        }
        let count = self.spills.iter().map(|r| r.rows).sum();
        let mut readers: Vec<(BufReader<&File>, &Path)> = self
            .spills
            .iter()
            .map(|r| {
                (
                    BufReader::with_capacity(256 << 10, &r.file),
                    r.path.as_path(),
                )
            })
            .collect();
        let mut next_row = |i: usize| -> Result<Option<[u8; ROW_LEN]>> {
            let (r, path) = &mut readers[i];
            let mut row = [0u8; ROW_LEN];
            match r.read_exact(&mut row) {
                Ok(()) => Ok(Some(row)),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
                Err(e) => Err(e).io("reading", *path),
            }
        };
        let mut heap = BinaryHeap::new();
        for i in 0..self.spills.len() {
            if let Some(row) = next_row(i)? {
                heap.push(Reverse((row, i)));
            }
        }
        let packs = &self.packs;
        let rows = std::iter::from_fn(|| {
            let Reverse((row, i)) = heap.pop()?;
            match next_row(i) {
                Ok(Some(next)) => heap.push(Reverse((next, i))),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
            Some(Ok(decode(packs, &row)))
        });
        write_layer(dir, &self.tmp, &self.prefix, packs, count, rows)
    }
}

/// Merges the rows of several layers in id order (k-way, streaming).
pub fn merged_rows<'a>(
    layers: &'a [&'a Layer],
) -> Result<impl Iterator<Item = Result<(Id, Location)>> + 'a> {
    let mut iters: Vec<LayerRows<'a>> = layers.iter().map(|l| l.rows()).collect::<Result<_>>()?;
    let mut heap = BinaryHeap::new();
    let mut pending: Vec<Option<Location>> = vec![None; iters.len()];
    let mut first_err = None;
    for (i, it) in iters.iter_mut().enumerate() {
        match it.next() {
            Some(Ok((id, loc))) => {
                pending[i] = Some(loc);
                heap.push(Reverse((id, i)));
            }
            Some(Err(e)) => first_err = Some(e),
            None => {}
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok(std::iter::from_fn(move || {
        let Reverse((id, i)) = heap.pop()?;
        let loc = pending[i].take().expect("pending row");
        match iters[i].next() {
            Some(Ok((nid, nloc))) => {
                pending[i] = Some(nloc);
                heap.push(Reverse((nid, i)));
            }
            Some(Err(e)) => return Some(Err(e)),
            None => {}
        }
        Some(Ok((id, loc)))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows_for(n: u32, pack: &Arc<str>) -> Vec<(Id, Location)> {
        let mut v: Vec<_> = (0..n)
            .map(|i| {
                (
                    Id::hash(&i.to_le_bytes()),
                    Location {
                        pack: pack.clone(),
                        offset: i,
                        kind: Kind::Chunk,
                    },
                )
            })
            .collect();
        v.sort_by_key(|r| r.0);
        v
    }

    #[test]
    fn write_open_lookup_and_merge() {
        let dir = tempfile::tempdir().unwrap();
        let p1: Arc<str> = "00112233445566778899aabbccddeeff".into();
        let p2: Arc<str> = "ffeeddccbbaa99887766554433221100".into();
        let a = rows_for(1000, &p1);
        let b: Vec<_> = rows_for(70_000, &p2)
            .into_iter()
            .filter(|r| !a.iter().any(|x| x.0 == r.0))
            .collect();
        let na = write_layer(
            dir.path(),
            dir.path(),
            "t",
            std::slice::from_ref(&p1),
            1000,
            a.clone().into_iter().map(Ok),
        )
        .unwrap();
        let nb = write_layer(
            dir.path(),
            dir.path(),
            "t",
            std::slice::from_ref(&p2),
            b.len() as u64,
            b.clone().into_iter().map(Ok),
        )
        .unwrap();
        let la = Layer::open(&dir.path().join(format!("{na}.idx"))).unwrap();
        let lb = Layer::open(&dir.path().join(format!("{nb}.idx"))).unwrap();
        assert_eq!(la.lookup(&a[17].0).unwrap(), Some(a[17].1.clone()));
        assert_eq!(lb.lookup(&b[60_000].0).unwrap(), Some(b[60_000].1.clone()));
        assert_eq!(la.lookup(&Id::hash(b"absent")).unwrap(), None);
        let layers = [&la, &lb];
        let merged: Vec<_> = merged_rows(&layers)
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(merged.len(), a.len() + b.len());
        assert!(merged.windows(2).all(|w| w[0].0 < w[1].0));
        let nm = write_layer(
            dir.path(),
            dir.path(),
            "t",
            &[p1, p2],
            merged.len() as u64,
            merged.into_iter().map(Ok),
        )
        .unwrap();
        let lm = Layer::open(&dir.path().join(format!("{nm}.idx"))).unwrap();
        lm.verify_checksum().unwrap();
        assert_eq!(lm.lookup(&a[3].0).unwrap(), Some(a[3].1.clone()));
        assert_eq!(lm.lookup(&b[5].0).unwrap(), Some(b[5].1.clone()));
    }

    /// Rows of 300 packs, sorted in runs of 100 spilled to files: the layer holds
    /// every id once, at the first pack that holds it (as the in-memory sort keeps), and
    /// the spill files are gone after.
    #[test]
    fn a_sorter_spilling_runs_writes_what_sorting_in_memory_writes() {
        let dir = tempfile::tempdir().unwrap();
        // 300 packs: pack numbers above 255 must still sort after the ones added first.
        let names: Vec<String> = (0..300u32).map(|p| format!("{p:032x}")).collect();
        let packs: Vec<Vec<crate::pack::FooterRow>> = (0..300u32)
            .map(|p| {
                // Packs 0 and 1 share ids 500..800; pack 2 shares 0..50 with pack 0; pack
                // 256 (whose number's low byte is 0) shares 1000..1100 with pack 1 and
                // 3000..3010 with pack 257; the others hold ids of their own.
                let ids = match p {
                    0 => 0..800u32,
                    1 => 500..1700,
                    2 => 0..50,
                    256 => 1000..1100,
                    257 => 3000..3010,
                    258 => 3000..3020,
                    _ => 10_000 + p * 10..10_000 + p * 10 + 5,
                };
                ids.map(|i| crate::pack::FooterRow {
                    id: Id::hash(&i.to_le_bytes()),
                    offset: i * 10 + p,
                    kind: Kind::Chunk,
                })
                .collect()
            })
            .collect();
        let mut expected: std::collections::BTreeMap<Id, (usize, u32)> = Default::default();
        for (p, rows) in packs.iter().enumerate() {
            for r in rows {
                expected.entry(r.id).or_insert((p, r.offset));
            }
        }
        for run_rows in [100, SORT_RUN_ROWS] {
            let mut sorter = RowSorter::new(dir.path(), "t");
            sorter.run_rows = run_rows;
            for (name, rows) in names.iter().zip(&packs) {
                sorter.add_pack(name, rows).unwrap();
            }
            let name = sorter.write(dir.path()).unwrap();
            let layer = Layer::open(&dir.path().join(format!("{name}.idx"))).unwrap();
            layer.verify_checksum().unwrap();
            let got: Vec<(Id, (usize, u32))> = layer
                .rows()
                .unwrap()
                .map(|r| {
                    let (id, loc) = r.unwrap();
                    let p = names.iter().position(|n| **n == *loc.pack).unwrap();
                    (id, (p, loc.offset))
                })
                .collect();
            assert_eq!(got, expected.clone().into_iter().collect::<Vec<_>>());
            let left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| !n.ends_with(".idx"))
                .collect();
            assert!(left.is_empty(), "{left:?}");
        }
    }

    /// The runs a sorter spills answer for every id they hold and for none other, and give
    /// back their ids in order; their files go with the last holder.
    #[test]
    fn spilled_runs_answer_for_their_ids_only() {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<Id> = (0..1000u32).map(|i| Id::hash(&i.to_le_bytes())).collect();
        let rows: Vec<crate::pack::FooterRow> = ids
            .iter()
            .map(|id| crate::pack::FooterRow {
                id: *id,
                offset: 7,
                kind: Kind::Chunk,
            })
            .collect();
        let mut sorter = RowSorter::new(dir.path(), "t");
        sorter.run_rows = 300;
        sorter.add_pack(&"0".repeat(32), &rows).unwrap();
        let runs: Vec<Arc<SpillRun>> = sorter.spilled().to_vec();
        assert_eq!(runs.len(), 3);
        for (r, run) in runs.iter().enumerate() {
            let mut held = ids[r * 300..(r + 1) * 300].to_vec();
            held.sort();
            let mut got = Vec::new();
            run.for_each_id(|id| got.push(*id)).unwrap();
            assert_eq!(got, held);
            for id in &ids {
                assert_eq!(run.contains(id).unwrap(), held.binary_search(id).is_ok());
            }
            for i in 0..10_000u32 {
                assert!(!run.contains(&Id::hash(&(i + 5000).to_le_bytes())).unwrap());
            }
        }
        drop(sorter);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
        drop(runs);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    proptest::proptest! {
        /// A damaged layer (header, pack names, rows, fanout or checksum) is refused or
        /// answers lookups with an error or a location, never a panic.
        #[test]
        fn damaged_layers_never_panic(
            edits in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>(), proptest::prelude::any::<u8>()), 1..6),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let p: Arc<str> = "00112233445566778899aabbccddeeff".into();
            let rows = rows_for(300, &p);
            let name = write_layer(dir.path(), dir.path(), "t", std::slice::from_ref(&p), 300, rows.clone().into_iter().map(Ok)).unwrap();
            let path = dir.path().join(format!("{name}.idx"));
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(&path, crate::mutate::mutate(&bytes, &edits)).unwrap();
            if let Ok(layer) = Layer::open(&path) {
                let _ = layer.verify_checksum();
                let _ = layer.ensure_verified();
                for (id, _) in rows.iter().step_by(37) {
                    let _ = layer.lookup(id);
                }
                let _ = layer.lookup(&Id([0xff; 32]));
                if let Ok(all) = layer.rows() {
                    for r in all.take(400) {
                        let _ = r;
                    }
                }
            }
        }
    }

    #[test]
    fn truncated_layer_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p: Arc<str> = "00112233445566778899aabbccddeeff".into();
        let n = write_layer(
            dir.path(),
            dir.path(),
            "t",
            std::slice::from_ref(&p),
            10,
            rows_for(10, &p).into_iter().map(Ok),
        )
        .unwrap();
        let path = dir.path().join(format!("{n}.idx"));
        let len = std::fs::metadata(&path).unwrap().len();
        let f = File::options().write(true).open(&path).unwrap();
        f.set_len(len - 7).unwrap();
        let err = Layer::open(&path).err().expect("must fail");
        assert!(err.to_string().contains("truncated"), "{err}");
    }
}
