//! `push` and `fetch`: moving objects and operation heads between a repository and a
//! remote.

use std::collections::{HashMap, HashSet};

use lifeos_store::fsutil::random_hex;
use lifeos_store::{Id, Kind, Transaction};
use lifeos_vcs::maintenance::Reachable;
use lifeos_vcs::Repo;

use crate::format::{self, IndexRow, Opened, Place, INDEX_DIR, PACKS_DIR, PACK_MAGIC};
use crate::{Remote, RemoteError, Result};

/// A remote pack holds at most this many bytes, unless one object is larger (it then goes
/// alone). Kept at 8 MiB: SeaweedFS splits an upload past 8 MiB into several chunks and
/// then hashes it twice (docs/DECISIONS.md, "Remote packs of at most 8 MiB").
const PACK_MAX: usize = 8 << 20;

/// An object's place in a push's order: whether it is a file chunk (chunks go last),
/// where it lies here (pack and offset; none if it is not here), and its id.
type SendOrder = (bool, Option<(std::sync::Arc<str>, u32)>, Id);

/// Packs uploaded at once.
const UPLOADERS: usize = 4;

/// Neighbouring objects of one pack closer than this are read with one ranged read.
const READ_GAP: u64 = 256 << 10;

/// A ranged read covers at most this many bytes (unless one object is larger): a whole
/// pack, so a fetch of everything reads each pack with one request: SeaweedFS served the
/// peer workload's packs in 1.35 s and 0.84-0.86 CPU-s whole, in 2.17-2.26 s and
/// 1.01-1.07 CPU-s in halves (docs/DECISIONS.md, "Whole packs per read").
const READ_MAX: u64 = PACK_MAX as u64;

/// Ranged reads in flight at once. With the two arrivals waiting to be stored and the
/// one being stored, at most `READERS + 3` reads of up to [`READ_MAX`] bytes are held:
/// 48 MiB, within a clone's memory budget of 100 MB.
const READERS: usize = 3;

/// A run of objects of one pack read with one ranged read.
struct ReadRange<'c> {
    key: String,
    start: u64,
    end: u64,
    objects: Vec<(&'c Id, &'c Place)>,
}

/// A ranged read's bytes, its objects opened and checked in place, ready to store.
struct Arrival<'c> {
    bytes: Vec<u8>,
    objects: Vec<(&'c Id, &'c Place, Opened)>,
}

/// The ranged reads that fetch `want`: per pack, runs of objects with gaps under
/// [`READ_GAP`], each run at most [`READ_MAX`] bytes.
fn read_ranges<'c>(want: Vec<(&'c Id, &'c Place)>) -> Vec<ReadRange<'c>> {
    let mut by_pack: HashMap<&str, Vec<(&Id, &Place)>> = HashMap::new();
    for (id, p) in want {
        by_pack.entry(p.pack.as_str()).or_default().push((id, p));
    }
    let mut packs: Vec<_> = by_pack.into_iter().collect();
    packs.sort_by(|a, b| a.0.cmp(b.0));
    let mut ranges = Vec::new();
    for (pack, mut objects) in packs {
        objects.sort_by_key(|(_, p)| p.offset);
        let mut current: Option<ReadRange<'c>> = None;
        for (id, p) in objects {
            let end = p.offset + u64::from(p.len);
            if let Some(r) = current.as_mut() {
                if p.offset <= r.end + READ_GAP && end - r.start <= READ_MAX {
                    r.end = r.end.max(end);
                    r.objects.push((id, p));
                    continue;
                }
            }
            ranges.extend(current.take());
            current = Some(ReadRange {
                key: format!("{PACKS_DIR}{pack}"),
                start: p.offset,
                end,
                objects: vec![(id, p)],
            });
        }
        ranges.extend(current);
    }
    ranges
}

/// Reports how a transfer goes: the bytes it will move, then the bytes moved.
pub trait Progress {
    /// The total, once known.
    fn total(&self, bytes: u64);
    /// `bytes` more were moved.
    fn advance(&self, bytes: u64);
}

/// A [`Progress`] that reports nothing.
pub struct Quiet;

impl Progress for Quiet {
    fn total(&self, _: u64) {}
    fn advance(&self, _: u64) {}
}

/// What `push` did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PushReport {
    /// Objects uploaded.
    pub objects: u64,
    /// Bytes uploaded in packs (as stored on the remote).
    pub bytes: u64,
    /// Packs uploaded.
    pub packs: u64,
    /// Objects the remote had already.
    pub present: u64,
    /// Operation heads published.
    pub heads_added: u64,
    /// Remote heads removed because a published head descends from them.
    pub heads_removed: u64,
    /// The operation heads the remote now holds from this push: what a later fetch
    /// expects to find there, or descendants of it.
    pub heads: Vec<Id>,
}

/// What `fetch` did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FetchReport {
    /// Objects downloaded.
    pub objects: u64,
    /// Bytes downloaded.
    pub bytes: u64,
    /// Remote operation heads that were new here.
    pub new_heads: Vec<Id>,
    /// The operation that merged them into the local log, if any.
    pub merged: Option<Id>,
    /// The newest remote head (where `pull` and `clone` move the folder).
    pub newest_remote: Option<Id>,
    /// Heads that did not open or decode (left out; the others were fetched).
    pub damaged_heads: Vec<String>,
    /// An operation this repository pushed that the remote's heads no longer reach: the
    /// server dropped or rolled back heads (or a backup was restored over it).
    pub hidden: Option<Id>,
}

/// A remote pack being filled.
struct PackOut {
    bytes: Vec<u8>,
    rows: Vec<IndexRow>,
}

impl PackOut {
    /// A pack filled in one of `spare`'s buffers, or a new one.
    fn new(spare: &Spare) -> PackOut {
        // Room for the object that does not fit, appended before it is moved to the next
        // pack: without it, the last object of every pack doubled the buffer. (An
        // object over 1 MiB, such as a large manifest, still grows it.)
        let mut bytes = spare
            .lock()
            .ok()
            .and_then(|mut s| s.pop())
            .unwrap_or_else(|| Vec::with_capacity(PACK_MAX + (1 << 20)));
        bytes.extend_from_slice(PACK_MAGIC);
        PackOut {
            bytes,
            rows: Vec::new(),
        }
    }
}

/// Buffers done with (a pack uploaded, a read stored), filled again by the next pack or
/// read: so many megabytes are not allocated, faulted in and unmapped each time.
type Spare = std::sync::Mutex<Vec<Vec<u8>>>;

/// What a push is to send, found before the remote is opened (so the walk can run while
/// the passphrase's key is derived): the local operation heads, merged into one first, and
/// everything they reach. It holds the repository lock shared until the push ends, so a
/// local gc waits rather than removing what the push reads.
pub struct PushPlan<'r> {
    repo: &'r Repo,
    _lock: Transaction<'r>,
    heads: Vec<Id>,
    reach: Reachable<HashSet<Id>>,
}

impl<'r> PushPlan<'r> {
    /// Walks what `repo`'s operation heads reach; refuses a repository with problems
    /// (except, in a lazy clone, file chunks it has not read yet).
    pub fn new(repo: &'r Repo) -> Result<PushPlan<'r>> {
        PushPlan::new_until(repo, &std::sync::atomic::AtomicBool::new(false))
    }

    /// Like [`PushPlan::new`], with a walk that stops soon after `stop` is set (see
    /// [`Repo::reachable_from_until`]): a push whose remote fails to open (a wrong
    /// passphrase) says so without waiting for the walk.
    pub fn new_until(repo: &'r Repo, stop: &std::sync::atomic::AtomicBool) -> Result<PushPlan<'r>> {
        let store = repo.store();
        // Several local heads are merged first, so one head is published.
        repo.head()?;
        let lock = store.transaction()?;
        let heads = repo.op_heads()?;
        let mut problems = Vec::new();
        let reach =
            repo.reachable_from_until::<HashSet<Id>>(heads.clone(), true, &mut problems, stop)?;
        // A lazy clone lacks chunks by design: reading them fetches them.
        problems.retain(|p| !(store.has_source() && p.code == "missing-object"));
        if let Some(p) = problems.first() {
            return Err(RemoteError::Refused(format!(
                "this repository has {} problems (the first: {}); run `lifeos fsck` before pushing",
                problems.len(),
                p.detail
            )));
        }
        Ok(PushPlan {
            repo,
            _lock: lock,
            heads,
            reach,
        })
    }
}

impl Remote {
    /// Uploads every object of `plan` that the remote lacks, in packs each followed by
    /// its index, then publishes the local operation heads (create-if-absent) and
    /// removes the remote heads they descend from. A push stopped part way leaves packs
    /// no head refers to; the next push sends only what is still missing.
    pub fn push(&self, plan: PushPlan<'_>, progress: &dyn Progress) -> Result<PushReport> {
        let _announced = self.push_lock()?;
        let PushPlan {
            repo, heads, reach, ..
        } = &plan;
        let store = repo.store();
        let catalog = self.catalog()?;
        // Everything but file chunks goes first, in packs of its own, so that a lazy
        // clone reads the history in a few whole packs. Chunks follow in the order they
        // lie here, so that reading them here goes through each pack once, front to back.
        let mut missing: Vec<SendOrder> = Vec::new();
        for id in reach.ids.iter().filter(|id| !catalog.contains_key(*id)) {
            let at = store.locate(id)?;
            let chunk = at.as_ref().is_some_and(|l| l.kind == Kind::Chunk);
            missing.push((chunk, at.map(|l| (l.pack, l.offset)), *id));
        }
        missing.sort_unstable();
        let mut report = PushReport {
            present: (reach.ids.len() - missing.len()) as u64,
            ..PushReport::default()
        };
        let keys = self.keys.as_ref();
        // Packs are uploaded by threads of their own, several at once, while the next
        // one is filled.
        let (to_upload, uploads) = std::sync::mpsc::sync_channel::<PackOut>(0);
        // An uploader that fails drops the receiver, so the filling loop's next send fails
        // and it stops instead of waiting for uploaders that are gone.
        let uploads = std::sync::Mutex::new(Some(uploads));
        let spare = Spare::default();
        let sent = std::thread::scope(|scope| -> Result<PushReport> {
            let uploaders: Vec<_> = (0..UPLOADERS)
                .map(|_| {
                    let (uploads, spare) = (&uploads, &spare);
                    scope.spawn(move || -> Result<PushReport> {
                        let mut sent = PushReport::default();
                        loop {
                            let next = match uploads.lock().expect("upload queue lock").as_ref() {
                                Some(queue) => queue.recv(),
                                None => return Ok(sent),
                            };
                            let Ok(out) = next else {
                                return Ok(sent);
                            };
                            if let Err(e) = self.send_pack(out, &mut sent, spare) {
                                uploads.lock().expect("upload queue lock").take();
                                return Err(e);
                            }
                        }
                    })
                })
                .collect();
            let filled = (|| -> Result<()> {
                let mut out = PackOut::new(&spare);
                let mut chunks = false;
                for (chunk, _, id) in &missing {
                    if *chunk && !chunks && !out.rows.is_empty() {
                        // The history's last pack ends where the chunks begin.
                        if to_upload
                            .send(std::mem::replace(&mut out, PackOut::new(&spare)))
                            .is_err()
                        {
                            // The uploader stopped; its error is reported below.
                            return Ok(());
                        }
                    }
                    chunks = *chunk;
                    let (kind, raw, stored) = store.read_entry_stored(id)?;
                    let start = out.bytes.len();
                    format::encode_object_into(keys, id, kind, &raw, &stored, &mut out.bytes);
                    let len = out.bytes.len() - start;
                    if !out.rows.is_empty() && out.bytes.len() > PACK_MAX {
                        // It does not fit: it starts the next pack.
                        let mut next = PackOut::new(&spare);
                        next.bytes.extend_from_slice(&out.bytes[start..]);
                        out.bytes.truncate(start);
                        if to_upload.send(std::mem::replace(&mut out, next)).is_err() {
                            // The uploader stopped; its error is reported below.
                            return Ok(());
                        }
                    }
                    out.rows.push(IndexRow {
                        id: *id,
                        kind,
                        offset: (out.bytes.len() - len) as u64,
                        len: len as u32,
                    });
                    progress.advance(len as u64);
                }
                if !out.rows.is_empty() {
                    let _ = to_upload.send(out);
                }
                Ok(())
            })();
            drop(to_upload);
            let mut sent = PushReport::default();
            let mut failed = None;
            for u in uploaders {
                match u.join().expect("an uploading thread does not panic") {
                    Ok(s) => {
                        sent.objects += s.objects;
                        sent.bytes += s.bytes;
                        sent.packs += s.packs;
                    }
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
            }
            filled?;
            match failed {
                Some(e) => Err(e),
                None => Ok(sent),
            }
        })?;
        report.objects = sent.objects;
        report.bytes = sent.bytes;
        report.packs = sent.packs;
        // Every object is on the remote: the heads can now refer to them.
        let remote_heads = self.heads()?.good;
        let on_remote: HashSet<Id> = remote_heads.iter().map(|(_, id)| *id).collect();
        for h in heads {
            if !on_remote.contains(h)
                && self
                    .backend
                    .create(&format::head_key(keys, h), &format::encode_head(keys, h))?
            {
                report.heads_added += 1;
            }
        }
        let ours: HashSet<Id> = reach.ops.iter().copied().collect();
        for (key, id) in remote_heads {
            if ours.contains(&id) && !heads.contains(&id) {
                self.backend.delete(&key)?;
                report.heads_removed += 1;
            }
        }
        report.heads = heads.clone();
        Ok(report)
    }

    /// Sends one pack, then its index (so an index never names a pack that is not
    /// whole), and caches the index. The pack's buffer goes to `spare` once sent.
    fn send_pack(&self, mut out: PackOut, report: &mut PushReport, spare: &Spare) -> Result<()> {
        let name = random_hex(16);
        let (objects, bytes) = (out.rows.len() as u64, out.bytes.len() as u64);
        self.backend
            .put(&format!("{PACKS_DIR}{name}"), &mut out.bytes)?;
        if out.bytes.capacity() > 0 {
            if let Ok(mut s) = spare.lock() {
                s.push(out.bytes);
            }
        }
        let mut index = format::encode_index(self.keys.as_ref(), &name, &out.rows);
        if let Some(dir) = &self.cache {
            self.save_cached(&dir.join(&name), &index)?;
        }
        self.backend
            .put(&format!("{INDEX_DIR}{name}"), &mut index)?;
        report.packs += 1;
        report.objects += objects;
        report.bytes += bytes;
        Ok(())
    }

    /// Reads one range into `bytes` and opens and checks each object in it, where it
    /// lies.
    fn read_range<'c>(&self, r: &ReadRange<'c>, mut bytes: Vec<u8>) -> Result<Arrival<'c>> {
        self.backend.get_range(&r.key, r.start..r.end, &mut bytes)?;
        let mut objects = Vec::with_capacity(r.objects.len());
        for &(id, p) in &r.objects {
            let from = (p.offset - r.start) as usize;
            let blob =
                bytes
                    .get_mut(from..from + p.len as usize)
                    .ok_or_else(|| RemoteError::Damaged {
                        what: r.key.clone(),
                        reason: format!("it ends before object {id}"),
                    })?;
            let opened =
                format::open_object(self.keys.as_ref(), id, p.kind, blob).map_err(|e| {
                    RemoteError::Damaged {
                        what: r.key.clone(),
                        reason: format!("{e}; nothing of it was kept"),
                    }
                })?;
            objects.push((id, p, opened.shifted(from)));
        }
        Ok(Arrival { bytes, objects })
    }

    /// Reads `want` with [`READERS`] ranged reads at a time (neighbours together, see
    /// [`read_ranges`]) and hands each object to `each` as it arrives, opened and checked:
    /// its id, its place, its bytes and, if it was kept compressed, its zstd frame. The
    /// first error, of a read or of `each`, stops the reads and is returned.
    fn read_objects<'c>(
        &self,
        want: Vec<(&'c Id, &'c Place)>,
        mut each: impl FnMut(&Id, &Place, &[u8], Option<&[u8]>) -> Result<()>,
    ) -> Result<()> {
        let ranges = read_ranges(want);
        let next = std::sync::atomic::AtomicUsize::new(0);
        // Each arrival is one read's bytes (up to READ_MAX, unless one object is larger)
        // and the objects in it that zstd inflated: two wait to be handed over, so at most
        // READERS + 3 reads are held at once (their buffers are kept between reads).
        let (found, arrivals) = std::sync::mpsc::sync_channel::<Result<Arrival>>(2);
        // Handed-over arrivals' buffers, read into again.
        let spare = Spare::default();
        std::thread::scope(|scope| -> Result<()> {
            for _ in 0..READERS {
                let found = found.clone();
                let (ranges, next, spare) = (&ranges, &next, &spare);
                scope.spawn(move || loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(range) = ranges.get(i) else {
                        return;
                    };
                    let buf = spare.lock().map(|mut s| s.pop()).ok().flatten();
                    let item = self.read_range(range, buf.unwrap_or_default());
                    let failed = item.is_err();
                    if found.send(item).is_err() || failed {
                        return;
                    }
                });
            }
            drop(found);
            // The first error stops the readers (their sends fail once this loop has
            // returned).
            for item in arrivals {
                let a = item?;
                for (id, place, opened) in &a.objects {
                    match opened {
                        Opened::Raw(r) => each(id, place, &a.bytes[r.clone()], None)?,
                        Opened::Zstd { raw, frame } => {
                            each(id, place, raw, Some(&a.bytes[frame.clone()]))?
                        }
                    }
                }
                if let Ok(mut s) = spare.lock() {
                    s.push(a.bytes);
                }
            }
            Ok(())
        })
    }

    /// Downloads what the repository lacks (with `all_data`, every object; without, all
    /// but file chunks, which a lazy clone reads when needed), checks that the remote's
    /// new operations reach nothing missing, and merges them into the local operation
    /// log (the folder stays where it is). Nothing is merged if anything fails. `pushed`
    /// is the operation this repository last pushed there: the report says if the
    /// remote's heads no longer reach it.
    pub fn fetch(
        &self,
        repo: &Repo,
        name: &str,
        all_data: bool,
        pushed: Option<Id>,
        progress: &dyn Progress,
    ) -> Result<FetchReport> {
        let store = repo.store();
        let read = self.heads()?;
        let remote_heads: Vec<Id> = read.good.into_iter().map(|(_, id)| id).collect();
        let catalog = self.catalog()?;
        let mut want: Vec<(&Id, &Place)> = Vec::new();
        for (id, place) in &catalog {
            if (all_data || place.kind != Kind::Chunk) && !store.contains(id)? {
                want.push((id, place));
            }
        }
        let mut report = FetchReport {
            damaged_heads: read.damaged,
            ..FetchReport::default()
        };
        progress.total(want.iter().map(|(_, p)| u64::from(p.len)).sum());
        let mut tx = store.transaction()?;
        // Checked objects are stored as they come.
        self.read_objects(want, |id, place, raw, frame| {
            tx.write_as(*id, place.kind, raw, frame)?;
            report.objects += 1;
            report.bytes += u64::from(place.len);
            progress.advance(u64::from(place.len));
            Ok(())
        })?;
        // Held until the merge is published: nothing refers to the objects before it.
        let committed = tx.commit()?;
        let known = repo.op_ancestry(&repo.op_heads()?)?;
        report.new_heads = remote_heads
            .iter()
            .filter(|h| !known.contains(h))
            .copied()
            .collect();
        report.new_heads.sort();
        report.newest_remote = repo.newest_op(&remote_heads).ok().flatten();
        // Heads are removed only by a push whose own head descends from them: what this
        // repository pushed is reached from the remote's heads, unless the server
        // dropped or rolled them back.
        if let Some(p) = pushed.filter(|p| !remote_heads.contains(p)) {
            let reached = repo
                .op_ancestry(&remote_heads)
                .map(|a| a.contains(&p))
                // Not knowable (the remote's history is incomplete, refused below).
                .unwrap_or(true);
            if !reached {
                report.hidden = Some(p);
            }
        }
        if report.new_heads.is_empty() {
            drop(committed);
            return Ok(report);
        }
        let mut problems = Vec::new();
        repo.reachable_from::<HashSet<Id>>(report.new_heads.clone(), all_data, &mut problems)?;
        // Without all data, a file's chunk is read from the remote when needed: missing
        // here is fine if the remote has it.
        problems.retain(|p| {
            all_data
                || !(p.code == "missing-object"
                    && p.object.is_some_and(|o| catalog.contains_key(&o)))
        });
        if let Some(p) = problems.first() {
            return Err(RemoteError::Incomplete(format!(
                "{} problems, the first: {}",
                problems.len(),
                p.detail
            )));
        }
        let merged = repo.merge_fetched(
            store.transaction()?,
            &report.new_heads,
            &format!("fetch from {name}"),
        )?;
        drop(committed);
        report.merged = Some(merged);
        Ok(report)
    }
}

/// A lazy clone's source of missing objects: its remote, opened when first needed.
pub(crate) struct LazySource {
    pub(crate) open: Box<dyn Fn() -> Result<Remote> + Send + Sync>,
    pub(crate) remote: std::sync::OnceLock<(Remote, HashMap<Id, Place>)>,
}

impl LazySource {
    fn remote(&self) -> Result<&(Remote, HashMap<Id, Place>)> {
        if let Some(r) = self.remote.get() {
            return Ok(r);
        }
        let remote = (self.open)()?;
        let catalog = remote.catalog()?;
        Ok(self.remote.get_or_init(|| (remote, catalog)))
    }
}

impl lifeos_store::ObjectSource for LazySource {
    fn fetch(
        &self,
        ids: &[Id],
        found: &mut dyn FnMut(lifeos_store::Fetched<'_>) -> lifeos_store::Result<()>,
    ) -> lifeos_store::Result<()> {
        let to_store = |e: RemoteError| match e {
            RemoteError::Store(s) => s,
            other => lifeos_store::StoreError::Remote {
                location: "the remote this lazy clone reads from".into(),
                reason: other.to_string(),
            },
        };
        let (remote, catalog) = self.remote().map_err(to_store)?;
        let want = ids
            .iter()
            .filter_map(|id| catalog.get(id).map(|place| (id, place)))
            .collect();
        remote
            .read_objects(want, |id, place, raw, frame| {
                let kind = place.kind;
                Ok(found(lifeos_store::Fetched {
                    id,
                    kind,
                    raw,
                    frame,
                })?)
            })
            .map_err(to_store)
    }
}

/// Makes the remote `open` returns the place `repo`'s store fetches missing objects
/// from (a lazy clone). It is opened, and its indexes read, when first needed.
pub fn serve_lazily(repo: &Repo, open: Box<dyn Fn() -> Result<Remote> + Send + Sync>) {
    repo.store().set_source(Box::new(LazySource {
        open,
        remote: std::sync::OnceLock::new(),
    }));
}
