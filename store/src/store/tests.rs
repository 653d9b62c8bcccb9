//! The store's unit tests.

use super::maintain::SMALL_PACKS_TRIGGER;
use super::*;
use crate::config::Packs;
use crate::test_data::noise;

fn small_packs() -> StoreConfig {
    StoreConfig {
        packs: Packs {
            target_size: 1 << 20,
            ..Packs::default()
        },
        ..StoreConfig::default()
    }
}

fn tmp_files(dir: &Path) -> Vec<String> {
    list_dir(&dir.join(TMP_DIR))
        .unwrap()
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(String::from))
        .filter(|n| !n.ends_with(".lock") && !n.ends_with(".locking"))
        .collect()
}

/// A transaction whose finished packs' rows have spilled out of memory still writes
/// no id twice: the ids are answered from the spilled runs (or from memory, for the
/// packs not yet finished), and the layer lists each once.
#[test]
fn a_transaction_writes_no_id_twice_once_its_ids_spilled() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::init(dir.path(), small_packs()).unwrap();
    // 1 KiB that zstd cannot shrink: about a thousand to a pack.
    let chunks: Vec<Vec<u8>> = (0..6000).map(|i| noise(1024, i)).collect();
    let mut tx = store.transaction().unwrap();
    tx.sink.rows.set_run_rows(200);
    for c in &chunks {
        assert_ne!(
            tx.write_delta(Id::hash(c), Kind::Chunk, c, None).unwrap(),
            Written::Existing
        );
    }
    // The packs closed so far are finished in the background; wait for them.
    for h in std::mem::take(&mut tx.sink.finishing) {
        tx.sink.take_finished(h).unwrap();
    }
    assert!(tx.sink.rows.spilled().len() >= 20, "the rows spilled");
    let recent = tx.claimed.lock().unwrap().recent.len();
    assert!(recent <= 1300, "{recent} ids still held in memory");
    for c in chunks.iter().rev() {
        assert!(tx.contains(&Id::hash(c)).unwrap());
        assert_eq!(
            tx.write_delta(Id::hash(c), Kind::Chunk, c, None).unwrap(),
            Written::Existing
        );
    }
    assert!(!tx.contains(&Id::hash(b"never written")).unwrap());
    drop(tx.commit().unwrap());
    let mut rows = 0;
    for name in store.pack_names().unwrap() {
        let path = store.pack_file_path(&name);
        rows += pack::read_footer(&File::open(&path).unwrap(), &path)
            .unwrap()
            .len();
    }
    assert_eq!(rows, chunks.len());
    assert_eq!(store.stats().unwrap().chunks, chunks.len() as u64);
    for c in &chunks {
        assert_eq!(&store.read_object(&Id::hash(c), Kind::Chunk).unwrap(), c);
    }
    assert_eq!(tmp_files(dir.path()), Vec::<String>::new());
}

/// What a remote brings compressed is stored as it came and read back as the same
/// frame, and an object zstd cannot shrink is reported as kept raw.
#[test]
fn entries_are_read_and_written_with_their_stored_form() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
    let text = b"a line of a note, and the same line again. ".repeat(50);
    let random = noise(10_000, 9);
    let mut tx = store.transaction().unwrap();
    let text_id = tx.write_object(Kind::Chunk, &text).unwrap();
    let random_id = tx.write_object(Kind::Chunk, &random).unwrap();
    drop(tx.commit().unwrap());
    let (kind, raw, how) = store.read_entry_stored(&text_id).unwrap();
    assert_eq!((kind, &raw), (Kind::Chunk, &text));
    let StoredAs::Zstd(frame) = how else {
        panic!("a compressible chunk is a zstd frame: {how:?}");
    };
    assert_eq!(zstd::bulk::decompress(&frame, text.len()).unwrap(), text);
    let (_, raw, how) = store.read_entry_stored(&random_id).unwrap();
    assert_eq!((raw, how), (random.clone(), StoredAs::Raw));

    let other = tempfile::tempdir().unwrap();
    let copy = Store::init(other.path(), StoreConfig::default()).unwrap();
    let mut tx = copy.transaction().unwrap();
    tx.write_as(text_id, Kind::Chunk, &text, Some(&frame))
        .unwrap();
    tx.write_as(random_id, Kind::Chunk, &random, None).unwrap();
    drop(tx.commit().unwrap());
    assert_eq!(copy.read_object(&text_id, Kind::Chunk).unwrap(), text);
    assert_eq!(copy.read_object(&random_id, Kind::Chunk).unwrap(), random);
    assert_eq!(
        copy.read_entry_stored(&text_id).unwrap().2,
        StoredAs::Zstd(frame)
    );
}

/// What a push sends is read with `read_entry_stored`: a damaged byte in an entry,
/// kept raw or as a zstd frame, is an error naming the object, never bytes to send.
#[test]
fn a_damaged_entry_read_in_its_stored_form_is_an_error() {
    let text = b"a line of a note, and the same line again. ".repeat(50);
    let random = noise(10_000, 9);
    for (what, data) in [("zstd", &text), ("raw", &random)] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
        let mut tx = store.transaction().unwrap();
        let id = tx.write_object(Kind::Chunk, data).unwrap();
        drop(tx.commit().unwrap());
        let loc = store.locate(&id).unwrap().unwrap();
        let path = store.pack_file_path(&loc.pack);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = loc.offset as usize + pack::ENTRY_HEADER_LEN + 40;
        bytes[at] ^= 0x55;
        std::fs::write(&path, &bytes).unwrap();
        let err = Store::open(dir.path())
            .unwrap()
            .read_entry_stored(&id)
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Corrupt { .. }) && err.to_string().contains(&id.short(16)),
            "{what}: {err}"
        );
    }
}

/// An aborted transaction deleted packs it had already moved into `packs/`, though
/// another writer could have taken their chunks as stored; that writer's commit then
/// named missing chunks.
#[test]
fn an_aborted_transaction_never_removes_what_another_writer_relies_on() {
    let dir = tempfile::tempdir().unwrap();
    let a_store = Store::init(dir.path(), small_packs()).unwrap();
    let b_store = Store::open(dir.path()).unwrap();
    let data = noise(6 << 20, 7);
    let mut a = a_store.transaction().unwrap();
    a.store_bytes(&data).unwrap();
    // Give A's background writers time to close its full packs.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut b = b_store.transaction().unwrap();
    let id = b.store_bytes(&data).unwrap();
    let committed = b.commit().unwrap();
    drop(a);
    drop(committed);
    let fresh = Store::open(dir.path()).unwrap();
    let mut out = Vec::new();
    fresh.read_file(&id, &mut out).unwrap();
    assert!(out == data);
    assert!(
        tmp_files(dir.path()).is_empty(),
        "{:?}",
        tmp_files(dir.path())
    );
}

#[test]
fn a_dropped_transaction_leaves_no_pack_behind() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::init(dir.path(), small_packs()).unwrap();
    let mut tx = store.transaction().unwrap();
    let id = tx.store_bytes(&noise(5 << 20, 1)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(store.pack_names().unwrap().is_empty());
    drop(tx);
    assert!(store.pack_names().unwrap().is_empty());
    assert!(tmp_files(dir.path()).is_empty());
    assert!(!store.contains(&id).unwrap());
}

/// The repository lock was dropped when a transaction committed, before the caller
/// published the operation naming its objects; a `gc` in between removed them.
#[test]
fn a_committed_transaction_keeps_gc_out_until_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
    let mut tx = store.transaction().unwrap();
    tx.store_bytes(b"precious").unwrap();
    let committed = tx.commit().unwrap();
    assert!(committed.layer.is_some());
    let got_lock = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = got_lock.clone();
    let path = dir.path().to_path_buf();
    let gc = std::thread::spawn(move || {
        let other = Store::open(&path).unwrap();
        let _lock = other.gc_lock().unwrap();
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!got_lock.load(std::sync::atomic::Ordering::SeqCst));
    drop(committed);
    gc.join().unwrap();
    assert!(got_lock.load(std::sync::atomic::Ordering::SeqCst));
}

/// A store whose one index layer is over 4 MiB (110,000 objects), with `damage` done
/// to the layer file's bytes; the object ids, sorted as the layer's rows are, and the
/// layer's name.
fn large_layer(
    damage: impl Fn(&mut [u8], &dyn Fn(usize) -> usize),
) -> (tempfile::TempDir, Vec<Id>, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
    let mut tx = store.transaction().unwrap();
    let mut ids: Vec<Id> = (0..110_000u32)
        .map(|i| tx.write_object(Kind::Tree, &i.to_le_bytes()).unwrap())
        .collect();
    let layer = tx.commit().unwrap().layer.unwrap();
    let path = dir.path().join(INDEX_DIR).join(format!("{layer}.idx"));
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() as u64 > crate::index::MEMORY_LAYER_MAX);
    ids.sort();
    // Rows start after the 32-byte header and one 16-byte pack name; each is 40 bytes:
    // id, pack number (3 bytes), kind, offset.
    damage(&mut bytes, &|i| 32 + 16 + i * crate::index::ROW_LEN);
    std::fs::write(&path, &bytes).unwrap();
    (dir, ids, layer)
}

/// A layer over 4 MiB is never read whole, so its checksum was never checked: a
/// damaged row sent reads to the wrong place and the pack was blamed.
#[test]
fn a_damaged_offset_in_a_large_layer_falls_back_to_the_pack_footers() {
    let (dir, ids, layer) = large_layer(|b, row| b[row(1000) + 36] ^= 0x40);
    let fresh = Store::open(dir.path()).unwrap();
    for i in [1000usize, 3000] {
        let raw = fresh.read_object(&ids[i], Kind::Tree).unwrap();
        assert_eq!(Id::hash(&raw), ids[i]);
    }
    let warnings = fresh.warnings().join("\n");
    assert!(
        warnings.contains(&layer) && warnings.contains("checksum"),
        "{warnings}"
    );
    // Missing objects are still reported missing, not corrupt.
    assert!(matches!(
        fresh.read_object(&Id::hash(b"never stored"), Kind::Tree),
        Err(StoreError::Missing(_))
    ));
}

/// A row whose kind or pack number is out of range made lookups fail with "damaged
/// file", which the reads and the existence checks of writers did not recover from.
#[test]
fn a_damaged_kind_or_pack_number_in_a_large_layer_is_recovered_from() {
    let (dir, ids, _) = large_layer(|b, row| {
        b[row(2000) + 35] = 0x7f;
        b[row(4000) + 34] = 0xff;
    });
    let fresh = Store::open(dir.path()).unwrap();
    assert!(fresh.contains(&ids[2000]).unwrap());
    let raw = fresh.read_object(&ids[4000], Kind::Tree).unwrap();
    assert_eq!(Id::hash(&raw), ids[4000]);
    let raw = fresh.read_object(&ids[2000], Kind::Tree).unwrap();
    assert_eq!(Id::hash(&raw), ids[2000]);
    // A writer's existence check works on the recovered index too.
    let other = Store::open(dir.path()).unwrap();
    let tx = other.transaction().unwrap();
    assert!(tx.contains(&ids[2000]).unwrap());
    drop(tx);
}

/// `n` distinct trees of about 500 bytes, alike enough to compress together.
fn similar_trees(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut t = b"entry name ".repeat(40);
            t.extend_from_slice(&i.to_le_bytes());
            t
        })
        .collect()
}

/// Objects written in blocks read back exactly, from a reopened store and from packs
/// no index layer covers (whose blocks are read to find their members), and a large
/// object goes to an entry of its own.
#[test]
fn grouped_objects_read_back_from_the_index_and_from_the_packs_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
    let trees = similar_trees(3000);
    let chunk = noise(1000, 3);
    let large = noise(crate::block::BLOCK_MEMBER_MAX + 1, 4);
    let mut tx = store.transaction().unwrap();
    for t in &trees {
        assert_eq!(tx.write_grouped(Kind::Tree, t).unwrap().1, Written::Whole);
        // What a transaction wrote in a block is read back before it commits.
        assert_eq!(&tx.read_object(&Id::hash(t), Kind::Tree).unwrap(), t);
    }
    assert_eq!(
        tx.write_grouped(Kind::Tree, &trees[0]).unwrap().1,
        Written::Existing
    );
    let (chunk_id, _) = tx.write_grouped(Kind::Chunk, &chunk).unwrap();
    let (large_id, _) = tx.write_grouped(Kind::Chunk, &large).unwrap();
    drop(tx.commit().unwrap());

    let check = |s: &Store| {
        for t in &trees {
            assert_eq!(&s.read_object(&Id::hash(t), Kind::Tree).unwrap(), t);
        }
        let mut out = Vec::new();
        s.read_file(&chunk_id, &mut out).unwrap();
        assert_eq!(out, chunk);
        assert_eq!(s.file_chunks(&chunk_id).unwrap().chunks[0].len, 1000);
        out.clear();
        s.read_file(&large_id, &mut out).unwrap();
        assert_eq!(out, large);
        let st = s.stats().unwrap();
        assert_eq!((st.objects, st.chunks), (3000, 2));
    };
    let fresh = Store::open(dir.path()).unwrap();
    check(&fresh);
    // 1.3 MB of trees took two blocks and the small chunk one, listed in the footer
    // without their members; the large chunk is an entry of its own.
    let name = &fresh.pack_names().unwrap()[0];
    let path = fresh.pack_file_path(name);
    let file = File::open(&path).unwrap();
    let footer = pack::read_footer(&file, &path).unwrap();
    let blocks = footer.iter().filter(|r| r.kind == Kind::Block).count();
    assert_eq!((footer.len(), blocks), (4, 3), "{footer:?}");
    assert!(fresh.stats().unwrap().pack_bytes < 100_000);

    for layer in list_dir(&dir.path().join(INDEX_DIR)).unwrap() {
        std::fs::remove_file(layer).unwrap();
    }
    check(&Store::open(dir.path()).unwrap());
}

/// A block whose stored bytes are damaged fails every read of its members with an
/// error naming the member and the block, and fsck reports it.
#[test]
fn a_damaged_block_is_an_error_never_wrong_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
    let trees = similar_trees(10);
    let mut tx = store.transaction().unwrap();
    for t in &trees {
        tx.write_grouped(Kind::Tree, t).unwrap();
    }
    drop(tx.commit().unwrap());
    let path = store.pack_file_path(&store.pack_names().unwrap()[0]);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = pack::PACK_HEADER_LEN as usize + pack::ENTRY_HEADER_LEN + 20;
    bytes[at] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let fresh = Store::open(dir.path()).unwrap();
    let id = Id::hash(&trees[3]);
    let err = fresh.read_object(&id, Kind::Tree).unwrap_err().to_string();
    assert!(
        err.contains(&id.short(16)) && err.contains("block"),
        "{err}"
    );
    let report = fresh.check_packs(&|_| {}).unwrap();
    assert!(
        report.problems.iter().any(|p| p.code == "corrupt-object"),
        "{:?}",
        report.problems
    );
}

/// Many small transactions' blocks are consolidated into one pack with their members
/// still indexed.
#[test]
fn consolidation_copies_blocks_with_their_members() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
    let trees = similar_trees(200);
    for part in trees.chunks(10) {
        let mut tx = store.transaction().unwrap();
        for t in part {
            tx.write_grouped(Kind::Tree, t).unwrap();
        }
        drop(tx.commit().unwrap());
    }
    store.maintain().unwrap();
    assert_eq!(store.pack_names().unwrap().len(), 1);
    let fresh = Store::open(dir.path()).unwrap();
    for t in &trees {
        assert_eq!(&fresh.read_object(&Id::hash(t), Kind::Tree).unwrap(), t);
    }
    assert!(fresh.check_packs(&|_| {}).unwrap().problems.is_empty());
}

/// Found timing 10,000 entity edits: maintenance after each small transaction merged
/// the layers before 16 of them covered only small packs, so consolidation never ran,
/// a pack per operation piled up and every publish stat'ed all of them.
#[test]
fn small_packs_are_consolidated_even_when_merging_folded_their_layers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::init(dir.path(), StoreConfig::default()).unwrap();
    let mut written = Vec::new();
    for i in 0..100u32 {
        let mut tx = store.transaction().unwrap();
        let raw = format!("object {i}").into_bytes();
        tx.write_object(Kind::Tree, &raw).unwrap();
        drop(tx.commit().unwrap());
        store.maintain().unwrap();
        written.push(raw);
        let packs = store.pack_names().unwrap().len();
        assert!(
            packs <= SMALL_PACKS_TRIGGER,
            "{packs} packs after {} transactions",
            i + 1
        );
    }
    let fresh = Store::open(dir.path()).unwrap();
    for raw in &written {
        assert_eq!(&fresh.read_object(&Id::hash(raw), Kind::Tree).unwrap(), raw);
    }
}

/// Found as a failing `entity set` among six run at once: two processes maintaining
/// the index together merged layers one of them was consolidating away, keeping for
/// an id the row naming a pack the other had just removed, and the object could no
/// longer be read though its bytes were still in a pack.
#[test]
fn concurrent_maintainers_never_index_a_removed_pack() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::init(dir.path(), StoreConfig::default()).unwrap());
    let writers: Vec<_> = (0..4u32)
        .map(|w| {
            let path = dir.path().to_path_buf();
            std::thread::spawn(move || {
                let store = Store::open(&path).unwrap();
                (0..40u32)
                    .map(|i| {
                        let raw = format!("writer {w} object {i}").into_bytes();
                        let mut tx = store.transaction().unwrap();
                        tx.write_object(Kind::Tree, &raw).unwrap();
                        drop(tx.commit().unwrap());
                        store.maintain().unwrap();
                        raw
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let written: Vec<Vec<u8>> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert_sound_and_readable(dir.path(), &written);
}

/// Found as `fsck` failing after six `entity set` commands run at once: two of them
/// wrote the same merge operation, so the same pack (its name is a hash of what it
/// holds); one installed it again while maintenance was deleting it after copying it,
/// and its layer, written after the deletion, named a pack that no longer existed.
#[test]
fn writers_installing_the_same_pack_during_consolidation_leave_no_dangling_layer() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::init(dir.path(), StoreConfig::default()).unwrap());
    let written: Vec<Vec<u8>> = (0..60u32)
        .map(|i| format!("the same object {i}").into_bytes())
        .collect();
    // Two stores (as two processes) each write every object in a transaction of its
    // own before either commits, so each object makes the same pack in both.
    let path = dir.path().to_path_buf();
    let both_written = Arc::new(std::sync::Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (path, written, both_written) =
                (path.clone(), written.clone(), both_written.clone());
            std::thread::spawn(move || {
                let store = Store::open(&path).unwrap();
                let txs: Vec<Transaction> = written
                    .iter()
                    .map(|raw| {
                        let mut tx = store.transaction().unwrap();
                        tx.write_object(Kind::Tree, raw).unwrap();
                        tx
                    })
                    .collect();
                both_written.wait();
                for tx in txs {
                    drop(tx.commit().unwrap());
                    store.maintain().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_sound_and_readable(dir.path(), &written);
}

/// Checks that the packs and index of the store at `dir` have no problem and that
/// every object of `written` reads back.
fn assert_sound_and_readable(dir: &Path, written: &[Vec<u8>]) {
    let fresh = Store::open(dir).unwrap();
    let problems = fresh.check_packs(&|_| {}).unwrap().problems;
    assert!(problems.is_empty(), "{problems:?}");
    for raw in written {
        assert_eq!(&fresh.read_object(&Id::hash(raw), Kind::Tree).unwrap(), raw);
    }
    assert!(fresh.warnings().is_empty(), "{:?}", fresh.warnings());
}

/// A repository damaged by the race above (a layer whose row for an id names a
/// removed pack while another of its packs holds the id) still reads the object: the
/// layer is distrusted and its packs read from their footers.
#[test]
fn a_layer_naming_a_removed_pack_is_read_around() {
    let dir = tempfile::tempdir().unwrap();
    let first = Store::init(dir.path(), StoreConfig::default()).unwrap();
    let second = Store::open(dir.path()).unwrap();
    let raw = b"written by both".to_vec();
    let id = Id::hash(&raw);
    // The second transaction starts before the first commits, so it does not know
    // the object is stored and writes it too: two packs, two layers.
    let mut late = second.transaction().unwrap();
    let mut early = first.transaction().unwrap();
    early.write_object(Kind::Tree, &raw).unwrap();
    drop(early.commit().unwrap());
    late.write_object(Kind::Tree, &raw).unwrap();
    // (Something else too, or the two packs would be the same file.)
    late.write_object(Kind::Tree, b"and something else")
        .unwrap();
    drop(late.commit().unwrap());
    let store = Store::open(dir.path()).unwrap();
    let merged_name = {
        let state = store.index.read().unwrap();
        let layers: Vec<&Layer> = state.layers.iter().collect();
        assert_eq!(layers.len(), 2);
        let mut packs: Vec<Arc<str>> = layers
            .iter()
            .flat_map(|l| l.packs.iter().cloned())
            .collect();
        packs.sort();
        let name = write_layer(
            &dir.path().join(INDEX_DIR),
            &dir.path().join(TMP_DIR),
            &store.session_prefix().unwrap(),
            &packs,
            3,
            merged_rows(&layers).unwrap(),
        )
        .unwrap();
        for l in &layers {
            std::fs::remove_file(&l.path).unwrap();
        }
        name
    };
    store.reload_index().unwrap();
    let named = store.locate_all(&id).unwrap();
    assert_eq!(named.len(), 1, "one row per id in a merged layer");
    std::fs::remove_file(store.pack_path(&named[0].pack)).unwrap();

    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(fresh.read_object(&id, Kind::Tree).unwrap(), raw);
    let warnings = fresh.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&merged_name) && w.contains("does not exist")),
        "{warnings:?}"
    );
}
