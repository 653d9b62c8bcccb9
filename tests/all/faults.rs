//! Bad input and faults: damaged packs and indexes, hostile trees, killed commits,
//! files changing underneath, a full disk. Each must give a clear error and lose nothing.

use crate::common::*;

use std::path::{Path, PathBuf};

use lifeos_store::{Id, Kind, Store};

fn store_of(d: &Path) -> Store {
    Store::open(&d.join(".lifeos")).unwrap()
}

/// The pack holding the first chunk of file `path` at revision `@`.
fn pack_of_first_chunk(d: &Path, path: &str) -> (Id, String) {
    let ls = json(d, &["ls", path]);
    let file_id = Id::from_hex(ls["entries"][0]["id"].as_str().unwrap()).unwrap();
    let store = store_of(d);
    let chunk = store.file_chunks(&file_id).unwrap().chunks[0].id;
    let loc = store.locate(&chunk).unwrap().unwrap();
    (chunk, loc.pack.to_string())
}

fn pack_path(d: &Path, pack: &str) -> PathBuf {
    d.join(".lifeos/packs").join(format!("{pack}.pack"))
}

#[test]
fn flipped_byte_in_a_pack_is_named_by_fsck_and_cat_refuses_wrong_bytes() {
    let repo = repo(true);
    let d = repo.path();
    write(d, "big.bin", &noise(3_000_000, 5));
    write(d, "ok.txt", b"fine\n");
    ok(d, &["commit", "-m", "one"]);
    let (chunk, pack) = pack_of_first_chunk(d, "big.bin");
    let store = store_of(d);
    let off = store.locate(&chunk).unwrap().unwrap().offset as u64;
    drop(store);
    // Flip one byte inside the chunk's stored data (after its 48-byte header).
    let p = pack_path(d, &pack);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[(off + 48 + 1000) as usize] ^= 0x40;
    std::fs::write(&p, &bytes).unwrap();

    let f = json(d, &["fsck"]);
    assert_eq!(f["ok"], false);
    let problems = f["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|x| x["code"] == "corrupt-object"
            && x["object"] == chunk.to_hex()
            && x["pack"] == pack),
        "fsck must name chunk {chunk} and pack {pack}: {f}"
    );
    let out = run(d, &["fsck"]);
    assert_eq!(out.status.code(), Some(1));

    let out = run(d, &["cat", "big.bin"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&chunk.to_hex()) && err.contains(&pack),
        "{err}"
    );
    assert!(
        err.contains("lifeos fsck"),
        "the error suggests what to do: {err}"
    );
    assert!(
        out.stdout.is_empty(),
        "no byte of a corrupt first chunk is printed"
    );
    // Other files are still readable.
    assert_eq!(ok(d, &["cat", "ok.txt"]), "fine\n");
    // gc neither hides nor drops the damaged chunk: fsck still names it afterwards.
    ok(d, &["gc"]);
    assert_fsck_problem(d, |x| x["object"] == chunk.to_hex());
}

#[test]
fn truncated_or_missing_pack_fails_clearly_and_other_files_stay_readable() {
    let repo = repo(true);
    let d = repo.path();
    write(d, "a.bin", &noise(3_000_000, 11));
    ok(d, &["commit", "-m", "a"]);
    write(d, "b.bin", &noise(2_000_000, 12));
    ok(d, &["commit", "-m", "b"]);
    let (_, pack) = pack_of_first_chunk(d, "a.bin");
    let p = pack_path(d, &pack);
    let len = std::fs::metadata(&p).unwrap().len();
    let saved = std::fs::read(&p).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(len / 3)
        .unwrap();

    let err = fails(d, &["cat", "a.bin"]);
    assert!(err.contains(&pack) && err.contains("truncated"), "{err}");
    let out = run(d, &["cat", "b.bin"]);
    assert!(out.status.success());
    assert_eq!(out.stdout, noise(2_000_000, 12));
    assert_fsck_problem(d, |x| x["code"] == "damaged-pack" && x["pack"] == pack);

    std::fs::remove_file(&p).unwrap();
    let err = fails(d, &["cat", "a.bin"]);
    assert!(err.contains(&format!("pack {pack} is missing")), "{err}");
    assert!(err.contains("backup"), "{err}");
    assert_eq!(run(d, &["cat", "b.bin"]).stdout, noise(2_000_000, 12));
    assert_fsck_problem(d, |x| x["code"] == "missing-pack");

    // Putting the pack back heals everything.
    std::fs::write(&p, saved).unwrap();
    assert_eq!(json(d, &["fsck"])["ok"], true);
}

#[test]
fn damaged_index_falls_back_to_pack_footers_and_gc_rebuilds_it() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.bin", &noise(500_000, 21));
    ok(d, &["commit", "-m", "a"]);
    let index_dir = d.join(".lifeos/index");
    for e in std::fs::read_dir(&index_dir).unwrap() {
        let p = e.unwrap().path();
        let len = std::fs::metadata(&p).unwrap().len();
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(len - 10)
            .unwrap();
    }
    let out = run(d, &["cat", "a.bin"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, noise(500_000, 21));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning") && err.contains("truncated") && err.contains("lifeos gc"),
        "{err}"
    );
    assert_fsck_problem(d, |x| x["code"] == "damaged-index");
    ok(d, &["gc"]);
    assert_eq!(json(d, &["fsck"])["ok"], true);
    let out = run(d, &["cat", "a.bin"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes a commit whose tree is `tree_bytes` (encoded by hand, bypassing validation) on a
/// branch named `evil`, through the library, as a hostile repository would hold it.
fn plant_tree(d: &Path, tree_bytes: Vec<u8>, extra: &[(Kind, Vec<u8>)]) {
    use lifeos_vcs::object::{Commit, Event};
    let repo = lifeos_vcs::Repo::discover(d).unwrap();
    let head = repo.head().unwrap();
    let mut tx = repo.store().transaction().unwrap();
    for (k, b) in extra {
        tx.write_object(*k, b).unwrap();
    }
    let tree = tx.write_object(Kind::Tree, &tree_bytes).unwrap();
    let sig = repo.signature(0);
    let commit = Commit {
        tree,
        parents: vec![],
        change_id: [7; 16],
        author: sig.clone(),
        committer: sig,
        message: b"evil".to_vec(),
        extra_headers: vec![],
        conflicts: vec![],
        git_header: None,
    };
    let c = tx.write_object(Kind::Commit, &commit.encode()).unwrap();
    let mut view = head.view.clone();
    view.set_branch("evil", Some(c));
    view.heads.push(c);
    repo.publish(
        tx,
        &[head.id],
        view,
        "plant",
        vec![Event::CommitCreated { commit: c }],
        0,
    )
    .unwrap();
}

fn raw_tree(entries: &[(&[u8], u8, Id, u64)]) -> Vec<u8> {
    let mut w = lifeos_store::codec::Writer::with_header(Kind::Tree as u8, 1);
    w.uint(entries.len() as u64);
    for (name, kind, id, size) in entries {
        w.bytes(name).u8(*kind).id(id).uint(*size);
    }
    w.finish()
}

#[test]
fn hostile_trees_are_refused_and_nothing_is_written_outside_the_target() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "one"]);
    let payload = b"pwned".to_vec();
    let pid = Id::hash(&payload);
    let outside = tempfile::tempdir().unwrap();
    let target_link = outside.path().to_str().unwrap().as_bytes().to_vec();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("dotdot", raw_tree(&[(b"..", 1, pid, 5)])),
        ("absolute", raw_tree(&[(b"/abs", 1, pid, 5)])),
        ("slash", raw_tree(&[(b"x/../../y", 1, pid, 5)])),
        (
            "through-symlink",
            raw_tree(&[
                (b"link", 3, Id::hash(&target_link), target_link.len() as u64),
                (
                    b"link",
                    4,
                    Id::hash(&raw_tree(&[(b"pwned.txt", 1, pid, 5)])),
                    5,
                ),
            ]),
        ),
    ];
    for (what, bytes) in cases {
        let inner = raw_tree(&[(b"pwned.txt", 1, pid, 5)]);
        plant_tree(
            d,
            bytes,
            &[
                (Kind::Chunk, payload.clone()),
                (Kind::Chunk, target_link.clone()),
                (Kind::Tree, inner),
            ],
        );
        let work = tempfile::tempdir().unwrap();
        let dest = work.path().join("out");
        let err = fails(
            d,
            &["restore", "--to", dest.to_str().unwrap(), "-r", "evil"],
        );
        assert!(
            err.contains("tree")
                && (err.contains("not allowed")
                    || err.contains("contains '/'")
                    || err.contains("duplicated")),
            "{what}: {err}"
        );
        assert!(
            std::fs::read_dir(outside.path()).unwrap().next().is_none(),
            "{what}: wrote outside"
        );
        assert!(
            !work.path().join("pwned.txt").exists() && !Path::new("/abs").exists(),
            "{what}"
        );
    }
}

#[test]
fn a_symlink_in_the_target_is_never_written_through() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "dir/file.txt", b"inside");
    ok(d, &["commit", "-m", "one"]);
    let lrepo = lifeos_vcs::Repo::discover(d).unwrap();
    let head = lrepo.head().unwrap();
    let c = lrepo
        .commit(&lrepo.resolve_rev(&head.view, "@").unwrap())
        .unwrap();
    let tree = lrepo.tree(&c.tree).unwrap();
    let dir_entry = tree.get(b"dir").unwrap();
    // A target whose `dir` already is a symlink to somewhere else.
    let outside = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), work.path().join("dir")).unwrap();
    let err = lrepo
        .write_file(&lifeos_vcs::working_copy::restore::FileJob {
            repo_path: "dir/file.txt".into(),
            dest: work.path().join("dir/file.txt"),
            id: lrepo.tree(&dir_entry.id).unwrap().entries[0].id,
            kind: lifeos_vcs::EntryKind::File,
            size: 6,
        })
        .unwrap_err();
    assert!(err.to_string().contains("symlink"), "{err}");
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
}

#[test]
fn kill_during_commit_leaves_a_healthy_repository_with_every_earlier_commit() {
    let repo = repo(true);
    let d = repo.path();
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for i in 0..40 {
        let size = if i % 10 == 0 {
            1_500_000
        } else {
            2_000 + (i * 3_001) % 50_000
        };
        write(d, &format!("dir{}/f{i}.bin", i % 4), &noise(size, i as u64));
    }
    ok(d, &["commit", "-m", "base"]);
    let mut versions: Vec<(String, Listing)> = vec![(rev_id(d, "@"), snapshot_of(d))];
    let mut kills = 0;
    let mut round = 0u64;
    while kills < 20 {
        round += 1;
        // Change a few files, including a large one.
        for _ in 0..4 {
            let i = next() % 40;
            let size = if i % 10 == 0 { 1_500_000 } else { 3_000 };
            write(
                d,
                &format!("dir{}/f{i}.bin", i % 4),
                &noise(size as usize, round * 100 + i),
            );
        }
        write(d, &format!("new/r{round}.bin"), &noise(800_000, round));
        let mut child = TestEnv::at(d)
            .command(["commit", "-m", &format!("round {round}")])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let delay = next() % 120;
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let finished = child.try_wait().unwrap().is_some();
        if !finished {
            child.kill().unwrap();
            kills += 1;
        }
        let status = child.wait().unwrap();
        // Whatever happened, the repository opens and is healthy.
        let f = json(d, &["fsck"]);
        assert_eq!(f["ok"], true, "after kill at {delay} ms: {f}");
        if finished && status.success() {
            versions.push((rev_id(d, "@"), snapshot_of(d)));
        } else {
            // The interrupted commit either published or not; if it did, remember it too.
            let now = rev_id(d, "@");
            if versions.iter().all(|v| v.0 != now) {
                // Published before the kill: its content is whatever the commit read, which
                // is the folder as it is now (nothing changed it since).
                versions.push((now, snapshot_of(d)));
            }
        }
    }
    for (id, expect) in &versions {
        let out = tempfile::tempdir().unwrap();
        let t = out.path().join("r");
        ok(d, &["restore", "--to", t.to_str().unwrap(), "-r", id]);
        assert_eq!(
            &snapshot_of(&t),
            expect,
            "commit {id} restores byte for byte"
        );
    }
    // gc removes what the killed commits left behind (keeping only what sits in packs
    // below the rewrite threshold), and everything still restores.
    let before = json(d, &["fsck"])["unreachable"].as_u64().unwrap();
    // A dry run says what gc will do, and changes nothing.
    let plan = json(d, &["gc", "--dry-run"]);
    assert_eq!(plan["dry_run"], true);
    assert_eq!(json(d, &["fsck"])["unreachable"], before, "{plan}");
    let g = json(d, &["gc"]);
    for k in [
        "objects_removed",
        "objects_kept_unreachable",
        "packs_deleted",
        "packs_rewritten",
        "packs_before",
        "bytes_before",
    ] {
        assert_eq!(plan[k], g[k], "{k}: {plan} {g}");
    }
    assert!(plan["bytes_after"].as_u64() <= plan["bytes_before"].as_u64());
    let f = json(d, &["fsck"]);
    assert_eq!(f["ok"], true);
    assert_eq!(f["unreachable"], g["objects_kept_unreachable"], "{f} {g}");
    assert_eq!(
        g["objects_removed"].as_u64().unwrap() + g["objects_kept_unreachable"].as_u64().unwrap(),
        before,
        "{g}"
    );
    // Only session lock files remain (a `.locking` one if a kill hit the moment a session
    // was being registered; it is removed once it is old enough to be judged dead).
    assert!(std::fs::read_dir(d.join(".lifeos/tmp")).unwrap().all(|e| {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        n.ends_with(".lock") || n.ends_with(".locking")
    }));
    let (id, expect) = &versions[0];
    let out = tempfile::tempdir().unwrap();
    let t = out.path().join("r");
    ok(d, &["restore", "--to", t.to_str().unwrap(), "-r", id]);
    assert_eq!(&snapshot_of(&t), expect);
}

#[test]
fn a_file_growing_while_it_is_read_is_recorded_consistently() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "log.bin", &noise(4_000_000, 1));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let path = d.join("log.bin");
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut f = std::fs::File::options().append(true).open(&path).unwrap();
        let mut i = 0u64;
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            f.write_all(&noise(4096, 1000 + i)).unwrap();
            i += 1;
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    });
    let ops_before = op_count(d);
    let out = run(d, &["commit", "-m", "racing", "--json"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    let full = std::fs::read(d.join("log.bin")).unwrap();
    if out.status.success() {
        // Recorded: the stored bytes are exactly a state the file was in (a prefix).
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["files"], 1, "{v}");
        let stored = run(d, &["cat", "log.bin"]).stdout;
        assert!(stored.len() >= 4_000_000 && full.starts_with(&stored));
    } else {
        // Refused, naming the file and why; nothing was recorded (a file that could not
        // be read consistently is never recorded as absent).
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("log.bin") && err.contains("changing"), "{err}");
        assert!(err.contains("--allow-unreadable"), "{err}");
        let ops_after = op_count(d);
        assert_eq!(ops_after, ops_before);
    }
    assert_eq!(json(d, &["fsck"])["ok"], true);
}

#[test]
fn files_disappearing_during_a_commit_are_reported_not_corrupted() {
    let repo = repo(false);
    let d = repo.path();
    for i in 0..1500 {
        write(
            d,
            &format!("many/{i:04}.txt"),
            format!("content {i}\n").as_bytes(),
        );
    }
    let dir = d.join("many");
    let deleter = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(5));
        for i in (0..1500).rev().step_by(2) {
            let _ = std::fs::remove_file(dir.join(format!("{i:04}.txt")));
        }
    });
    let out = run(d, &["commit", "-m", "while deleting", "--json"]);
    deleter.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for s in v["skipped"].as_array().unwrap() {
        assert!(s["reason"].as_str().unwrap().contains("disappeared"), "{s}");
    }
    // Every recorded file has exactly its content.
    let ls = json(d, &["ls"]);
    for e in ls["entries"].as_array().unwrap() {
        let p = e["path"].as_str().unwrap();
        let n: usize = p
            .trim_start_matches("many/")
            .trim_end_matches(".txt")
            .parse()
            .unwrap();
        assert_eq!(ok(d, &["cat", p]), format!("content {n}\n"));
    }
    assert_eq!(json(d, &["fsck"])["ok"], true);
}

struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_full_disk_gives_a_clear_error_and_leaves_the_repository_unchanged() {
    let mnt = std::env::temp_dir().join(format!("lifeos-full-{}", std::process::id()));
    std::fs::create_dir_all(&mnt).unwrap();
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=6m", "tmpfs"])
        .arg(&mnt)
        .status();
    if !status.is_ok_and(|s| s.success()) {
        let _ = std::fs::remove_dir(&mnt);
        eprintln!(
            "skipped: a full disk is simulated with a small tmpfs, and mounting one needs root"
        );
        return;
    }
    let _guard = Tmpfs(mnt.clone());
    let d = mnt.join("lib");
    std::fs::create_dir(&d).unwrap();
    ok(&d, &["init"]);
    write(&d, "small.txt", b"small\n");
    ok(&d, &["commit", "-m", "one"]);
    let before = json(&d, &["log"]);
    write(&d, "huge.bin", &noise(4_000_000, 3));
    let huge2 = noise(4_000_000, 4);
    // The data may not even fit in the folder; write what fits.
    let _ = std::fs::write(d.join("huge2.bin"), &huge2);
    let err = fails(&d, &["commit", "-m", "too big"]);
    assert!(
        err.contains("No space left") || err.contains("disk is full"),
        "{err}"
    );
    assert!(err.contains("repository is unchanged"), "{err}");
    // Nothing was published; the earlier commit is intact.
    assert_eq!(json(&d, &["log"]), before);
    assert_eq!(ok(&d, &["cat", "small.txt"]), "small\n");
    std::fs::remove_file(d.join("huge.bin")).unwrap();
    let _ = std::fs::remove_file(d.join("huge2.bin"));
    assert_eq!(json(&d, &["fsck"])["ok"], true);
    // The next command cleans the interrupted writer's temporary data.
    ok(&d, &["gc"]);
    let tmp_left: Vec<_> = std::fs::read_dir(d.join(".lifeos/tmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    assert!(tmp_left.is_empty(), "{tmp_left:?}");
    ok(&d, &["commit", "-m", "after freeing space"]);
}

#[test]
fn gc_killed_midway_leaves_a_healthy_repository() {
    let repo = repo(true);
    let d = repo.path();
    for i in 0..12 {
        write(d, &format!("keep/f{i}.bin"), &noise(400_000, i));
    }
    ok(d, &["commit", "-m", "keep"]);
    let expect = snapshot_of(d);
    let id = rev_id(d, "@");
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for round in 0..10u64 {
        // Garbage for gc to remove: a commit of new data that is killed before it publishes.
        write(d, "junk/j.bin", &noise(3_000_000, 100 + round));
        let mut c = TestEnv::at(d)
            .command(["commit", "-m", "junk"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let _ = c.kill();
        let _ = c.wait();
        // If that commit did publish, undo it so its data becomes garbage too (the folder
        // follows, dropping the junk).
        if rev_id(d, "@") != id {
            ok(d, &["undo"]);
        }
        let _ = std::fs::remove_dir_all(d.join("junk"));
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut g = TestEnv::at(d)
            .command(["gc"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(rng % 80));
        let _ = g.kill();
        let _ = g.wait();
        let f = json(d, &["fsck"]);
        assert_eq!(f["ok"], true, "after gc killed in round {round}: {f}");
        let out = tempfile::tempdir().unwrap();
        let t = out.path().join("r");
        ok(d, &["restore", "--to", t.to_str().unwrap(), "-r", &id]);
        let mut restored = snapshot_of(&t);
        restored.retain(|(p, _)| !p.starts_with("junk"));
        let mut want = expect.clone();
        want.retain(|(p, _)| !p.starts_with("junk"));
        assert_eq!(restored, want);
    }
    ok(d, &["gc"]);
    assert_eq!(json(d, &["fsck"])["ok"], true);
}

/// Runs `fsck --json` and asserts that one of the problems it reports satisfies `want`.
fn assert_fsck_problem(d: &Path, want: impl Fn(&serde_json::Value) -> bool) {
    let f = json(d, &["fsck"]);
    assert!(f["problems"].as_array().unwrap().iter().any(want), "{f}");
}

/// A submodule (gitlink) is a folder of another repository: checkout makes its folder,
/// commits keep the gitlink while the folder is there without recording what is inside,
/// `cat` refuses it, and removing the folder removes it.
#[test]
fn gitlink_survives_checkout_and_commits_and_goes_with_its_folder() {
    use lifeos_vcs::object::{gitlink_id, Tree, TreeEntry};
    use lifeos_vcs::EntryKind;
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "one"]);
    let content = b"file beside a submodule\n".to_vec();
    let tree = Tree {
        entries: vec![
            TreeEntry {
                name: b"a.txt".to_vec(),
                kind: EntryKind::File,
                id: Id::hash(&content),
                size: content.len() as u64,
            },
            TreeEntry {
                name: b"sub".to_vec(),
                kind: EntryKind::Gitlink,
                id: gitlink_id(&[0xab; 20]),
                size: 0,
            },
        ],
        git_raw: None,
    };
    plant_tree(d, tree.encode(), &[(Kind::Chunk, content.clone())]);
    ok(d, &["checkout", "-r", "evil"]);
    assert_eq!(std::fs::read(d.join("a.txt")).unwrap(), content);
    assert!(std::fs::read_dir(d.join("sub")).unwrap().next().is_none());
    assert!(ok(d, &["ls"]).contains(&format!("sub  (submodule at {})", "ab".repeat(20))));
    let err = fails(d, &["cat", "sub"]);
    assert!(err.contains("submodule"), "{err}");

    // The submodule's own files are not this repository's.
    write(d, "sub/inner.txt", b"belongs to the submodule");
    write(d, "b.txt", b"b");
    ok(d, &["commit", "-m", "two"]);
    let ls = json(d, &["ls"]);
    let entries: Vec<(String, String)> = ls["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("a.txt".to_string(), "file".to_string()),
            ("b.txt".to_string(), "file".to_string()),
            ("sub".to_string(), "gitlink".to_string()),
        ]
    );
    let st = json(d, &["status"]);
    assert_eq!(st["clean"], true, "{st}");

    // Back to a commit without it: the empty folder goes; with it: the folder comes back.
    std::fs::remove_file(d.join("sub/inner.txt")).unwrap();
    ok(d, &["checkout", "-r", "main"]);
    assert!(!d.join("sub").exists());
    ok(d, &["checkout", "-r", "evil"]);
    assert!(d.join("sub").is_dir());

    // Removing the folder removes the submodule; the diff names its commit.
    std::fs::remove_dir(d.join("sub")).unwrap();
    ok(d, &["commit", "-m", "three"]);
    assert!(!ok(d, &["ls"]).contains("sub"));
    let diff = json(d, &["diff", "-r", "@-", "-r", "@"]);
    let sub = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "sub")
        .unwrap_or_else(|| panic!("{diff}"));
    assert_eq!(sub["plugin"], "submodule");
    assert_eq!(
        sub["summary"],
        format!("submodule at {} → nothing", "ab".repeat(20))
    );
    assert_eq!(json(d, &["fsck"])["ok"], true);
}
