//! Formats are contracts: a repository written by an earlier version of lifeos opens,
//! reads and takes new commits with this one, and its objects keep their ids.
//!
//! `tests/fixtures/repo-v1.tar` was written by lifeos at commit 91e6d79 (tree, commit
//! and view encodings version 1), `repo-actions-v1.tar` at d86ce95 (action records
//! version 1); see `tests/fixtures/README.md` for how they were made.

use crate::common::*;

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

use lifeos_store::{Id, Kind};
use lifeos_vcs::working_copy::WcState;
use lifeos_vcs::{Commit, EntryKind, Repo, Tree, View};

/// Extracts a fixture into a new temp dir; returns it and the repository folder.
fn unpack(fixture: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let tar = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture);
    let st = Command::new("tar")
        .arg("-xf")
        .arg(&tar)
        .arg("-C")
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(st.success(), "tar could not extract {}", tar.display());
    let d = tmp.path().join("repo");
    (tmp, d)
}

/// Every object reachable from the head view decodes and encodes back to the very bytes
/// stored under its id, so no id written by the earlier version changes meaning.
fn assert_reencodes(repo: &Repo) {
    let store = repo.store();
    let head = repo.head().unwrap();
    let view_bytes = store.read_object(&head.op.view, Kind::View).unwrap();
    assert_eq!(View::decode(&view_bytes).unwrap().encode(), view_bytes);
    let mut trees: Vec<Id> = Vec::new();
    let mut commits = head.view.referenced_commits();
    let mut seen = std::collections::HashSet::new();
    while let Some(c) = commits.pop() {
        if !seen.insert(c) {
            continue;
        }
        let bytes = store.read_object(&c, Kind::Commit).unwrap();
        let commit = Commit::decode(&bytes).unwrap();
        assert_eq!(commit.encode(), bytes, "commit {c} re-encodes differently");
        trees.push(commit.tree);
        commits.extend(commit.parents);
    }
    while let Some(t) = trees.pop() {
        if !seen.insert(t) {
            continue;
        }
        let bytes = store.read_object(&t, Kind::Tree).unwrap();
        let tree = Tree::decode(&bytes).unwrap();
        assert_eq!(tree.encode(), bytes, "tree {t} re-encodes differently");
        trees.extend(
            tree.entries
                .iter()
                .filter(|e| e.kind == EntryKind::Dir)
                .map(|e| e.id),
        );
    }
}

#[test]
fn repository_written_by_version_1_opens_reads_and_commits() {
    let (_tmp, d) = unpack("repo-v1.tar");
    let d = d.as_path();

    let before = json(d, &["fsck"]);
    assert_eq!(before["ok"], true, "{before}");
    assert_eq!(before["commits"], 5, "{before}");
    assert_eq!(before["operations"], 10, "{before}");
    assert_reencodes(&Repo::discover(d).unwrap());

    let log = json(d, &["log", "-r", "all()"]);
    let messages: Vec<&str> = log["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message"].as_str().unwrap().trim_end())
        .collect();
    for m in [
        "first version",
        "second version",
        "on side",
        "third version",
        "merge side into main",
    ] {
        assert!(messages.contains(&m), "{m:?} missing from {messages:?}");
    }
    assert_eq!(
        ok(d, &["cat", "-r", "v1", "notes/a.md"]),
        "first note\nsecond line\n"
    );
    assert_eq!(
        ok(d, &["cat", "notes/a.md"]),
        "first note\nsecond line\nthird\n"
    );
    assert_eq!(json(d, &["status"])["changes"].as_array().unwrap().len(), 0);
    // The stat cache that version wrote (format 1) is read; the commands that save it
    // (checkout, commit) write format 2, with the same paths.
    let cache_path = d.join(".lifeos/wc_state");
    let old_cache = WcState::decode(&std::fs::read(&cache_path).unwrap()).expect("format 1");
    assert!(old_cache.entries.contains_key(b"notes/a.md".as_slice()));

    // The folder goes back to v1 and forward again, a name that is not UTF-8 included.
    ok(d, &["checkout", "-r", "v1"]);
    assert_eq!(
        std::fs::read(d.join("notes/a.md")).unwrap(),
        b"first note\nsecond line\n"
    );
    ok(d, &["checkout", "-r", "main"]);
    let latin1 = d.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt"));
    assert_eq!(std::fs::read(&latin1).unwrap(), b"caf\n");
    assert!(std::fs::read_link(d.join("link")).is_ok());
    assert_eq!(std::fs::read(d.join("big.bin")).unwrap().len(), 300_000);

    // New history on top of the old.
    write(d, "notes/a.md", b"first note\nsecond line\nthird\nfourth\n");
    ok(d, &["commit", "-m", "written by the new version"]);
    let cache = std::fs::read(&cache_path).unwrap();
    assert_eq!(cache[8], 2, "format 2 written");
    let new_cache = WcState::decode(&cache).unwrap();
    assert_eq!(
        new_cache.entries.keys().collect::<Vec<_>>(),
        old_cache.entries.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        ok(d, &["cat", "-r", "@-", "notes/a.md"]),
        "first note\nsecond line\nthird\n"
    );
    let after = json(d, &["fsck"]);
    assert_eq!(after["ok"], true, "{after}");
    assert_eq!(after["commits"], 6, "{after}");
    assert_reencodes(&Repo::discover(d).unwrap());
}

/// `tests/fixtures/repo-v2-deltas.tar`: a git history imported by lifeos at de3c192, in
/// packs of version 2 whose chunks and commits are deltas (codec 2). This version writes
/// version-3 packs with blocks; the old packs must read as they are, next to new ones,
/// through commit, gc and export.
#[test]
fn repository_with_version_2_delta_packs_opens_commits_and_exports_the_same_ids() {
    let (tmp, d) = unpack("repo-v2-deltas.tar");
    let report = json(&d, &["fsck"]);
    assert_eq!(report["ok"], true, "{report}");
    let notes = ok(&d, &["cat", "notes.txt", "-r", "main"]);
    assert!(notes.contains("changed in version 6"), "{notes}");
    // A 100,000-byte blob stored as a delta of its previous version.
    let cat = run(&d, &["cat", "data.bin", "-r", "main"]);
    assert!(cat.status.success());
    assert!(cat.stdout == std::fs::read(d.join("data.bin")).unwrap());

    write(&d, "new.txt", &b"written by this version\n".repeat(100));
    ok(&d, &["commit", "-m", "on top"]);
    let gc = json(&d, &["gc"]);
    assert_eq!(gc["objects_removed"], 0, "{gc}");
    let report = json(&d, &["fsck"]);
    assert_eq!(report["ok"], true, "{report}");

    // The imported commits and the annotated tag come back with git's ids.
    let out_git = tmp.path().join("out.git");
    let st = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&out_git)
        .status()
        .unwrap();
    assert!(st.success());
    ok(&d, &["git", "export", out_git.to_str().unwrap()]);
    let rev = |r: &str| {
        let o = Command::new("git")
            .arg("-C")
            .arg(&out_git)
            .args(["rev-parse", r])
            .output()
            .unwrap();
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    assert_eq!(rev("main~1"), "8f2f2e14cab407e9e11fb4072a7366b8ecba34d2");
    assert_eq!(
        rev("refs/tags/v1"),
        "ea5f72e6c86934750109ff28c2b5173d5f272790"
    );
}

#[test]
fn repository_with_version_1_action_records_reads_its_receipts_and_runs_what_is_pending() {
    let (_tmp, d) = unpack("repo-actions-v1.tar");
    let d = d.as_path();
    let report = json(d, &["fsck"]);
    assert_eq!(
        report["problems"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
    let receipts = json(d, &["receipts"]);
    let list = receipts["receipts"].as_array().unwrap().clone();
    assert_eq!(list.len(), 3, "{receipts}");
    assert!(
        list.iter().all(|r| r["outcome"] == "executed"),
        "{receipts}"
    );
    let filed = list.iter().find(|r| r["rule"] == "file notes").unwrap();
    let shown = json(d, &["receipt", "show", filed["id"].as_str().unwrap()]);
    assert_eq!(shown["receipts"][0]["output_text"], "filed notes/a.md\n");
    // The pending action of the earlier version is approved and run by this one.
    // (`lifeos actions` also lists those that ended in the last day.)
    let listed = json(d, &["actions", "--all"]);
    let pending: Vec<_> = listed["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["state"] == "pending")
        .collect();
    assert_eq!(pending.len(), 1, "{listed}");
    assert_eq!(pending[0]["id"], "c3dbef4e314cc02e", "{listed}");
    ok(d, &["approve", "c3dbef4e314cc02e", "--run"]);
    let after = json(d, &["receipts"]);
    assert_eq!(after["receipts"].as_array().unwrap().len(), 4, "{after}");
    // A version-1 receipt does not name the operation it made: rollback says so.
    let tag = list.iter().find(|r| r["rule"] == "tag notes").unwrap();
    let e = fails(d, &["rollback", tag["id"].as_str().unwrap()]);
    assert!(e.contains("names no operation to revert"), "{e}");
}

/// `remote-encrypted-v1.tar` holds `remote/`, an encrypted folder remote written by
/// lifeos at e611ea9, when XChaCha20-Poly1305 was the RustCrypto crate's: this version
/// clones it byte for byte, checks every sealed object, and pushes on top of it.
#[test]
fn an_encrypted_remote_written_by_an_earlier_version_clones_and_takes_pushes() {
    let (tmp, _) = unpack("remote-encrypted-v1.tar");
    let url = tmp.path().join("remote");
    let url = url.to_str().unwrap();
    let with = |pass: &str, d: &Path, args: &[&str]| {
        TestEnv::at(d).with("LIFEOS_PASSPHRASE", pass).run(args)
    };
    let pass = "fixture passphrase";
    let parent = tempfile::tempdir().unwrap();
    let wrong = with("not it", parent.path(), &["clone", url, "w"]);
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("wrong passphrase"));
    assert!(!parent.path().join("w").exists());

    succeeded(with(pass, parent.path(), &["clone", url, "b"]), &["clone"]);
    let b = parent.path().join("b");
    assert_eq!(
        rev_id(&b, "main"),
        "bfc1fbe4806f98f2b2e4a378649970837e887210e06cb063f4d87106f1982630"
    );
    assert_eq!(
        std::fs::read(b.join("notes/budget.md")).unwrap(),
        b"The budget meeting moved to Friday afternoon.\nsecond line\n"
    );
    assert_eq!(
        std::fs::metadata(b.join("photo.bin")).unwrap().len(),
        300_000
    );
    ok(&b, &["fsck"]);
    succeeded(
        with(pass, &b, &["fsck", "--remote", "origin", "--read-data"]),
        &["fsck", "--remote"],
    );

    std::fs::write(b.join("notes/new.md"), b"written by this version\n").unwrap();
    ok(&b, &["commit", "-m", "third version"]);
    succeeded(with(pass, &b, &["push"]), &["push"]);
    succeeded(with(pass, parent.path(), &["clone", url, "c"]), &["clone"]);
    let c = parent.path().join("c");
    assert_eq!(rev_id(&c, "main"), rev_id(&b, "main"));
    assert_eq!(
        std::fs::read(c.join("notes/new.md")).unwrap(),
        b"written by this version\n"
    );
    succeeded(
        with(pass, &c, &["fsck", "--remote", "origin", "--read-data"]),
        &["fsck", "--remote"],
    );
}
