//! Nothing recorded is ever lost and no wrong bytes are returned: commands racing each
//! other (commit, gc, checkout), commands killed or interrupted while they change the
//! folder, files that cannot be read, and names that are not UTF-8.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

fn bpath(dir: &Path, name: &[u8]) -> PathBuf {
    dir.join(OsStr::from_bytes(name))
}

fn status(d: &Path) -> serde_json::Value {
    json(d, &["status"])
}

/// Every commit id in the history (`all()`).
fn all_commits(d: &Path) -> Vec<String> {
    json(d, &["log", "-r", "all()"])["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["commit"].as_str().unwrap().to_string())
        .collect()
}

/// Whether some commit in the history holds `path` with exactly `content`.
fn recorded_somewhere(d: &Path, path: &str, content: &[u8]) -> bool {
    all_commits(d).iter().any(|c| {
        let out = run(d, &["cat", path, "-r", c]);
        out.status.success() && out.stdout == content
    })
}

fn sh_kill(signal: &str, pid: u32) {
    let _ = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
}

/// `gc` running beside commits removed packs of a commit whose operation was not yet
/// published (the lock was released too early); afterwards `fsck` found missing objects.
#[test]
fn gc_beside_commits_and_other_operations_loses_nothing() {
    let repo = repo(true);
    let d = repo.path().to_path_buf();
    write(&d, "big.bin", &noise(200_000, 0));
    ok(&d, &["commit", "-m", "base"]);
    let deadline = Instant::now() + Duration::from_secs(12);
    let committer = {
        let d = d.clone();
        std::thread::spawn(move || {
            let mut recorded = Vec::new();
            let mut i = 1u64;
            while Instant::now() < deadline {
                let content = noise(200_000, i);
                write(&d, "big.bin", &content);
                let v = json(&d, &["commit", "-m", &format!("edit {i}")]);
                let c = v["commit"].as_str().unwrap_or_else(|| panic!("{v}"));
                recorded.push((c.to_string(), content));
                i += 1;
            }
            recorded
        })
    };
    let gc = {
        let d = d.clone();
        std::thread::spawn(move || {
            let mut runs = 0;
            while Instant::now() < deadline {
                let out = run(&d, &["gc"]);
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                runs += 1;
            }
            runs
        })
    };
    let tagger = {
        let d = d.clone();
        std::thread::spawn(move || {
            let mut i = 0;
            while Instant::now() < deadline {
                ok(&d, &["tag", "create", &format!("t{i}"), "--force"]);
                i += 1;
            }
        })
    };
    let recorded = committer.join().unwrap();
    let gc_runs = gc.join().unwrap();
    tagger.join().unwrap();
    assert!(
        recorded.len() >= 5 && gc_runs >= 5,
        "{} commits, {gc_runs} gc runs",
        recorded.len()
    );
    let f = json(&d, &["fsck"]);
    assert_eq!(f["ok"], true, "{f}");
    for (c, content) in &recorded {
        let out = run(&d, &["cat", "big.bin", "-r", c]);
        assert!(
            out.status.success(),
            "commit {c}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == *content, "commit {c} returned other bytes");
    }
}

/// Without a working-copy lock, a commit beside a checkout could snapshot a half-moved
/// folder and record a mix of two branches.
#[test]
fn a_commit_beside_a_checkout_never_records_a_half_moved_folder() {
    let repo = repo(false);
    let d = repo.path().to_path_buf();
    for i in 0..150 {
        write(
            &d,
            &format!("f/{i:03}.txt"),
            format!("A {i}\n").repeat(200).as_bytes(),
        );
    }
    ok(&d, &["commit", "-m", "a"]);
    ok(&d, &["branch", "create", "b"]);
    ok(&d, &["checkout", "b"]);
    for i in 0..150 {
        write(
            &d,
            &format!("f/{i:03}.txt"),
            format!("B {i}\n").repeat(200).as_bytes(),
        );
    }
    ok(&d, &["commit", "-m", "b"]);
    let ids = |rev: &str| -> std::collections::BTreeSet<String> {
        json(&d, &["ls", "-r", rev])["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (a, b) = (ids("main"), ids("b"));
    let deadline = Instant::now() + Duration::from_secs(8);
    let switcher = {
        let d = d.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            while Instant::now() < deadline {
                ok(&d, &["checkout", if n % 2 == 0 { "main" } else { "b" }]);
                n += 1;
            }
            n
        })
    };
    let mut commits = 0;
    while Instant::now() < deadline {
        ok(&d, &["commit", "--allow-empty", "-m", "beside a checkout"]);
        commits += 1;
    }
    let switches = switcher.join().unwrap();
    assert!(
        switches >= 4 && commits >= 4,
        "{switches} checkouts, {commits} commits"
    );
    for c in all_commits(&d) {
        let t = ids(&c);
        assert!(
            t == a || t == b,
            "commit {c} records a mix of both branches"
        );
    }
    assert_eq!(status(&d)["clean"], true);
}

#[test]
fn names_that_are_not_utf8_survive_checkout_undo_restore_merge_and_diff() {
    let repo = repo(false);
    let d = repo.path();
    let cafe: &[u8] = b"caf\xe9.txt";
    std::fs::write(bpath(d, cafe), b"v1\n").unwrap();
    ok(d, &["commit", "-m", "one"]);
    std::fs::write(bpath(d, cafe), b"v2\n").unwrap();
    ok(d, &["commit", "-m", "two"]);
    let listing = |d: &Path| -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().as_bytes().to_vec())
            .filter(|n| n != b".lifeos")
            .collect();
        v.sort();
        v
    };
    // checkout: the same file gets the old content; no lossy twin appears.
    ok(d, &["checkout", "-r", "@-"]);
    assert_eq!(listing(d), vec![cafe.to_vec()]);
    assert_eq!(std::fs::read(bpath(d, cafe)).unwrap(), b"v1\n");
    ok(d, &["undo"]);
    assert_eq!(listing(d), vec![cafe.to_vec()]);
    assert_eq!(std::fs::read(bpath(d, cafe)).unwrap(), b"v2\n");
    assert_eq!(status(d)["clean"], true);
    // restore PATH, with the name given as bytes.
    TestEnv::at(d).ok_bytes(&[b"restore", cafe, b"-r", b"@-"]);
    assert_eq!(std::fs::read(bpath(d, cafe)).unwrap(), b"v1\n");
    assert_eq!(listing(d), vec![cafe.to_vec()]);
    assert_eq!(TestEnv::at(d).ok_bytes(&[b"cat", cafe]), "v1\n");
    // Two names that differ only in invalid bytes, on two branches, merged.
    ok(d, &["branch", "create", "side"]);
    std::fs::write(bpath(d, b"n\xff.bin"), b"ff side\n").unwrap();
    ok(d, &["commit", "-m", "ff"]);
    ok(d, &["checkout", "side"]);
    std::fs::write(bpath(d, b"n\xfe.bin"), b"fe side\n").unwrap();
    ok(d, &["commit", "-m", "fe"]);
    ok(d, &["checkout", "main"]);
    ok(d, &["merge", "side"]);
    assert_eq!(std::fs::read(bpath(d, b"n\xff.bin")).unwrap(), b"ff side\n");
    assert_eq!(std::fs::read(bpath(d, b"n\xfe.bin")).unwrap(), b"fe side\n");
    assert_eq!(listing(d).len(), 3);
    // diff and ls tell them apart, quoting what is not UTF-8.
    let diff = json(d, &["diff", "-r", "@-", "-r", "@", "--name-only"]);
    let paths: Vec<&str> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["\"n\\xfe.bin\""]);
    let ls = ok(d, &["ls"]);
    assert!(
        ls.contains("\"caf\\xe9.txt\"")
            && ls.contains("\"n\\xfe.bin\"")
            && ls.contains("\"n\\xff.bin\""),
        "{ls}"
    );
    assert_eq!(
        TestEnv::at(d).ok_bytes(&[b"cat", b"n\xfe.bin"]),
        "fe side\n"
    );
    assert_eq!(
        TestEnv::at(d).ok_bytes(&[b"cat", b"n\xff.bin"]),
        "ff side\n"
    );
    // The whole history restores byte for byte, names included.
    let out = tempfile::tempdir().unwrap();
    let t = out.path().join("r");
    ok(d, &["restore", "--to", t.to_str().unwrap()]);
    assert_eq!(listing(&t), listing(d));
    assert_eq!(json(d, &["fsck"])["ok"], true);
}

/// `env`, running lifeos as an unprivileged user (65534) when the tests run as root, so
/// that file permissions apply; as a normal user it runs directly.
fn as_user(env: &TestEnv) -> TestEnv {
    let env = env.with("HOME", env.path());
    if unsafe_euid_is_root() {
        env.via(&[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
        ])
    } else {
        env
    }
}

fn unsafe_euid_is_root() -> bool {
    // The owner of a file this process creates is its effective user.
    use std::os::unix::fs::MetadataExt;
    let f = tempfile::NamedTempFile::new().unwrap();
    f.as_file().metadata().unwrap().uid() == 0
}

/// A repository in a folder the unprivileged user owns, and the environment that runs
/// lifeos in it as that user ([`as_user`]).
fn user_repo() -> TestEnv {
    let top = TestEnv::new();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = top.join("lib");
    std::fs::create_dir(&d).unwrap();
    if unsafe_euid_is_root() {
        std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
    }
    let user = as_user(&top.cd("lib"));
    user.ok(&["init"]);
    user
}

fn user_write(d: &Path, rel: &str, bytes: &[u8]) {
    let p = d.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, bytes).unwrap();
    if unsafe_euid_is_root() {
        let mut cur = p.as_path();
        while cur != d {
            std::os::unix::fs::chown(cur, Some(65534), Some(65534)).unwrap();
            cur = cur.parent().unwrap();
        }
    }
}

/// An unreadable file was recorded as deleted, and a later checkout overwrote its
/// newer, never-recorded content.
#[test]
fn an_unreadable_file_is_never_recorded_as_deleted_nor_overwritten() {
    let user = user_repo();
    let d = user.path().to_path_buf();
    user_write(&d, "f.txt", b"zero\n");
    user_write(&d, "other.txt", b"x\n");
    user.ok(&["commit", "-m", "zero"]);
    let zero = user.json(&["log"])["commits"][0]["commit"]
        .as_str()
        .unwrap()
        .to_string();
    user_write(&d, "f.txt", b"one\n");
    user.ok(&["commit", "-m", "one"]);
    user_write(&d, "f.txt", b"two, never recorded\n");
    user_write(&d, "other.txt", b"y\n");
    std::fs::set_permissions(d.join("f.txt"), std::fs::Permissions::from_mode(0o000)).unwrap();
    let before = user.op_count();
    // The commit is refused, naming the file and the way forward; nothing is recorded.
    let out = user.run(&["commit", "-m", "two"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("f.txt") && err.contains("Permission denied"),
        "{err}"
    );
    assert!(err.contains("--allow-unreadable"), "{err}");
    assert_eq!(user.op_count(), before);
    // status shows it as unreadable, not deleted.
    let st = user.json(&["status"]);
    assert_eq!(st["unreadable"][0]["path"], "f.txt", "{st}");
    let changed: Vec<&str> = st["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["other.txt"], "{st}");
    // With --allow-unreadable the rest is recorded and f.txt keeps its last version.
    user.ok(&["commit", "-m", "two", "--allow-unreadable"]);
    let show = user.json(&["show"]);
    let changed: Vec<&str> = show["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["other.txt"], "{show}");
    assert_eq!(user.ok(&["cat", "f.txt"]), "one\n");
    // A checkout that would replace it is refused, even with --force: its content
    // cannot be saved first. Nothing is recorded and nothing changes.
    let before = user.op_count();
    for force in [false, true] {
        let mut args = vec!["checkout", "-r", zero.as_str()];
        if force {
            args.push("--force");
        }
        let out = user.run(&args);
        assert!(!out.status.success(), "checkout {args:?} went ahead");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("f.txt") && err.contains("cannot be read"),
            "{err}"
        );
        assert_eq!(user.op_count(), before);
    }
    // A checkout that leaves it alone goes ahead, and leaves it alone.
    user.ok(&["checkout", "-r", "@-"]);
    std::fs::set_permissions(d.join("f.txt"), std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        std::fs::read(d.join("f.txt")).unwrap(),
        b"two, never recorded\n"
    );
    // Readable again: the new content is recorded.
    user.ok(&["commit", "-m", "three"]);
    assert_eq!(user.ok(&["cat", "f.txt"]), "two, never recorded\n");
}

#[test]
fn an_unreadable_folder_keeps_what_was_recorded_in_it() {
    let user = user_repo();
    let d = user.path().to_path_buf();
    user_write(&d, "box/a.txt", b"a\n");
    user_write(&d, "box/b.txt", b"b\n");
    user_write(&d, "top.txt", b"t\n");
    user.ok(&["commit", "-m", "one"]);
    std::fs::set_permissions(d.join("box"), std::fs::Permissions::from_mode(0o000)).unwrap();
    user_write(&d, "top.txt", b"t2\n");
    // The folder is what cannot be read, once: not each recorded file in it again.
    let unreadable: Vec<String> = user.json(&["status"])["unreadable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(unreadable, ["box"]);
    let out = user.run(&["commit", "-m", "two"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("box"), "{err}");
    user.ok(&["commit", "-m", "two", "--allow-unreadable"]);
    let ls: Vec<String> = user.json(&["ls"])["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ls, ["box/a.txt", "box/b.txt", "top.txt"]);
    std::fs::set_permissions(d.join("box"), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(user.json(&["status"])["clean"], true);
}

/// A tracked file in an ignored folder whose metadata could not be read was taken as
/// deleted: the scan does not enter ignored folders, so only the check of tracked paths
/// saw it, and it dropped the error.
#[test]
fn a_tracked_file_in_an_ignored_folder_that_cannot_be_read_is_not_deleted() {
    let user = user_repo();
    let d = user.path().to_path_buf();
    user_write(&d, "build/keep.txt", b"kept\n");
    user_write(&d, "top.txt", b"t\n");
    user.ok(&["commit", "-m", "one"]);
    user_write(&d, ".gitignore", b"build/\n");
    user.ok(&["commit", "-m", "ignore build"]);
    // The folder can be listed by name but nothing in it can be looked up.
    std::fs::set_permissions(d.join("build"), std::fs::Permissions::from_mode(0o600)).unwrap();
    user_write(&d, "top.txt", b"t2\n");
    let st = user.json(&["status"]);
    assert_eq!(st["unreadable"][0]["path"], "build/keep.txt", "{st}");
    let changed: Vec<&str> = st["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["top.txt"], "{st}");
    let out = user.run(&["commit", "-m", "two"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("build/keep.txt"),
        "{err}"
    );
    user.ok(&["commit", "-m", "two", "--allow-unreadable"]);
    let ls: Vec<String> = user.json(&["ls"])["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ls, [".gitignore", "build/keep.txt", "top.txt"]);
    std::fs::set_permissions(d.join("build"), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(user.json(&["status"])["clean"], true);
}

/// Files were restored 0644/0755 whatever the umask, so a private library came back
/// world-readable.
#[test]
fn restored_files_honour_the_umask() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "secret.txt", b"s\n");
    write(d, "run.sh", b"#!/bin/sh\n");
    std::fs::set_permissions(d.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    ok(d, &["commit", "-m", "one"]);
    // lifeos run by a shell that set the umask first.
    let with_umask = |mask: &str| {
        TestEnv::at(d).via(&["sh", "-c", &format!("umask {mask} && exec \"$0\" \"$@\"")])
    };
    let out = tempfile::tempdir().unwrap();
    let t = out.path().join("r");
    with_umask("077").ok(&["restore", "--to", t.to_str().unwrap()]);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&t.join("secret.txt")), 0o600);
    assert_eq!(mode(&t.join("run.sh")), 0o700);
    // Checkout writes files the same way.
    std::fs::write(d.join("secret.txt"), b"s2\n").unwrap();
    ok(d, &["commit", "-m", "two"]);
    with_umask("027").ok(&["checkout", "-r", "@-"]);
    assert_eq!(mode(&d.join("secret.txt")), 0o640);
}

/// Two branches of many files, and uncommitted work on top: what `checkout --force`
/// must save before it replaces anything.
fn busy_repo() -> (tempfile::TempDir, Vec<(String, Vec<u8>)>) {
    let repo = repo(false);
    let d = repo.path();
    for i in 0..400 {
        write(d, &format!("f/{i:03}.bin"), &noise(16_000, i));
    }
    ok(d, &["commit", "-m", "main"]);
    ok(d, &["branch", "create", "other"]);
    ok(d, &["checkout", "other"]);
    for i in 0..400 {
        write(d, &format!("f/{i:03}.bin"), &noise(16_000, 1000 + i));
    }
    write(d, "only-other.txt", b"other\n");
    ok(d, &["commit", "-m", "other"]);
    ok(d, &["checkout", "main"]);
    let precious = vec![
        ("f/007.bin".to_string(), noise(16_000, 77_777)),
        (
            "new-work.txt".to_string(),
            b"written, never committed\n".to_vec(),
        ),
    ];
    for (p, c) in &precious {
        write(d, p, c);
    }
    (repo, precious)
}

fn copy_repo(from: &Path) -> tempfile::TempDir {
    let to = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to.path())
        .status()
        .unwrap();
    assert!(status.success());
    to
}

/// Checks a repository after a `checkout other --force` was stopped: either nothing was
/// published and the folder is untouched, or the operation was published, the
/// uncommitted work is in a commit, and the next command finishes the move.
fn check_after_stopped_checkout(
    d: &Path,
    ops_before: usize,
    precious: &[(String, Vec<u8>)],
    what: &str,
) {
    let published = op_count(d) > ops_before;
    // Any command that uses the folder first finishes an interrupted move.
    let st = status(d);
    if published {
        assert_eq!(
            st["clean"], true,
            "{what}: after the move was finished: {st}"
        );
        assert_eq!(st["branch"], "other", "{what}");
        for (p, c) in precious {
            assert!(recorded_somewhere(d, p, c), "{what}: {p} was lost");
        }
        assert_eq!(
            std::fs::read(d.join("only-other.txt")).unwrap(),
            b"other\n",
            "{what}"
        );
    } else {
        assert_eq!(st["branch"], "main", "{what}");
        for (p, c) in precious {
            assert_eq!(std::fs::read(d.join(p)).unwrap(), *c, "{what}: {p} changed");
        }
        assert!(
            !d.join("only-other.txt").exists(),
            "{what}: folder changed before publishing"
        );
    }
    assert!(!d.join(".lifeos/wc_move").exists(), "{what}");
    let f = json(d, &["fsck"]);
    assert_eq!(f["ok"], true, "{what}: {f}");
}

#[test]
fn checkout_force_killed_or_interrupted_anywhere_keeps_the_saved_work() {
    let (base, precious) = busy_repo();
    let ops_before = op_count(base.path());
    // How long an uninterrupted one takes, to spread the stops over it.
    let probe = copy_repo(base.path());
    let t = Instant::now();
    ok(probe.path(), &["checkout", "other", "--force"]);
    let took = t.elapsed().as_millis() as u64;
    let mut published = 0;
    for round in 0..16u64 {
        let r = copy_repo(base.path());
        let d = r.path();
        let child = TestEnv::at(d)
            .command(["checkout", "other", "--force"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(took * round / 14));
        let signal = if round % 2 == 0 { "-KILL" } else { "-INT" };
        sh_kill(signal, child.id());
        let out = child.wait_with_output().unwrap();
        if signal == "-INT" && out.status.code() == Some(130) {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("interrupted") && err.contains("lifeos status"),
                "{err}"
            );
        }
        check_after_stopped_checkout(
            d,
            ops_before,
            &precious,
            &format!("round {round} ({signal} after {} ms)", took * round / 14),
        );
        if op_count(d) > ops_before {
            published += 1;
        }
    }
    assert!(
        published > 0 && published < 16,
        "stops landed only on one side ({published}/16 published; a checkout takes {took} ms)"
    );
}

#[test]
fn merge_killed_anywhere_leaves_either_the_old_folder_or_the_merge() {
    let repo = repo(false);
    let d = repo.path();
    for i in 0..300 {
        write(
            d,
            &format!("m/{i:03}.txt"),
            format!("line {i}\n").repeat(300).as_bytes(),
        );
    }
    ok(d, &["commit", "-m", "base"]);
    ok(d, &["branch", "create", "side"]);
    for i in (0..300).step_by(2) {
        write(
            d,
            &format!("m/{i:03}.txt"),
            format!("main {i}\n").repeat(300).as_bytes(),
        );
    }
    ok(d, &["commit", "-m", "main edits"]);
    ok(d, &["checkout", "side"]);
    for i in (1..300).step_by(2) {
        write(
            d,
            &format!("m/{i:03}.txt"),
            format!("side {i}\n").repeat(300).as_bytes(),
        );
    }
    ok(d, &["commit", "-m", "side edits"]);
    ok(d, &["checkout", "main"]);
    let main_id = rev_id(d, "main");
    let ops_before = op_count(d);
    let probe = copy_repo(d);
    let t = Instant::now();
    ok(probe.path(), &["merge", "side"]);
    let took = t.elapsed().as_millis() as u64;
    let merged = snapshot_of(probe.path());
    let unmerged = snapshot_of(d);
    for round in 0..12u64 {
        let r = copy_repo(d);
        let d = r.path();
        let mut child = TestEnv::at(d)
            .command(["merge", "side"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(took * round / 10));
        sh_kill(if round % 3 == 0 { "-INT" } else { "-KILL" }, child.id());
        let _ = child.wait();
        let st = status(d);
        assert_eq!(st["clean"], true, "round {round}: {st}");
        if op_count(d) > ops_before {
            assert_ne!(rev_id(d, "@"), main_id);
            let now = snapshot_of(d);
            let differ: Vec<&String> = now
                .iter()
                .filter(|f| !merged.contains(f))
                .map(|f| &f.0)
                .collect();
            assert!(now == merged, "round {round}: not the merge: {differ:?}");
        } else {
            assert_eq!(rev_id(d, "@"), main_id);
            assert!(
                snapshot_of(d) == unmerged,
                "round {round}: folder changed before publishing"
            );
        }
        assert_eq!(json(d, &["fsck"])["ok"], true);
    }
}

/// A folder move stopped by a full disk is recorded; once there is space, the next
/// command finishes it.
#[test]
fn a_move_stopped_by_a_full_disk_is_finished_by_the_next_command() {
    let Some(mnt) = Tmpfs::mount("10m") else {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return;
    };
    let d = mnt.0.join("lib");
    std::fs::create_dir(&d).unwrap();
    ok(&d, &["init"]);
    write(&d, "a.txt", b"a\n");
    ok(&d, &["commit", "-m", "small"]);
    ok(&d, &["branch", "create", "big"]);
    ok(&d, &["checkout", "big"]);
    write(&d, "big.bin", &noise(3_000_000, 1));
    ok(&d, &["commit", "-m", "big"]);
    ok(&d, &["checkout", "main"]);
    // Fill the disk so the operation still fits but the 3 MB file cannot be written back.
    let df = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(&mnt.0)
        .output()
        .unwrap();
    let avail: u64 = String::from_utf8_lossy(&df.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .expect("df prints the free space");
    let filler = mnt.0.join("filler");
    let _ = std::fs::write(&filler, vec![0u8; avail.saturating_sub(1 << 20) as usize]);
    let out = run(&d, &["checkout", "big"]);
    if out.status.success() {
        eprintln!("skipped: the disk was not full enough");
        return;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("partly updated") && err.contains("disk is full"),
        "{err}"
    );
    assert!(d.join(".lifeos/wc_move").exists());
    std::fs::remove_file(&filler).unwrap();
    let st = run(&d, &["status"]);
    let note = String::from_utf8_lossy(&st.stderr);
    assert!(note.contains("finished changing the folder"), "{note}");
    assert_eq!(status(&d)["clean"], true);
    assert_eq!(
        std::fs::read(d.join("big.bin")).unwrap(),
        noise(3_000_000, 1)
    );
    assert!(!d.join(".lifeos/wc_move").exists());
}

struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let mnt = std::env::temp_dir().join(format!("lifeos-safety-{}", std::process::id()));
        std::fs::create_dir_all(&mnt).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mnt)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::fs::remove_dir(&mnt);
            return None;
        }
        Some(Tmpfs(mnt))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A checkout overwrote an ignored file that lifeos had never recorded.
#[test]
fn an_ignored_file_in_the_way_stops_a_checkout_before_anything_changes() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a\n");
    ok(d, &["commit", "-m", "one"]);
    ok(d, &["branch", "create", "other"]);
    ok(d, &["checkout", "other"]);
    write(d, "build/out.txt", b"tracked on other\n");
    ok(d, &["commit", "-m", "build output tracked"]);
    ok(d, &["checkout", "main"]);
    write(d, ".gitignore", b"build/\n");
    ok(d, &["commit", "-m", "ignore build"]);
    write(d, "build/out.txt", b"my local build, ignored\n");
    let ops = op_count(d);
    for args in [
        ["checkout", "other"].as_slice(),
        &["checkout", "other", "--force"],
    ] {
        let err = fails(d, args);
        assert!(
            err.contains("build/out.txt") && err.contains("not recorded"),
            "{err}"
        );
        assert_eq!(op_count(d), ops);
    }
    assert_eq!(
        std::fs::read(d.join("build/out.txt")).unwrap(),
        b"my local build, ignored\n"
    );
}

/// Empty folders where a checkout puts a file are removed (they hold nothing recorded).
#[test]
fn empty_folders_in_the_way_of_a_file_are_removed() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a\n");
    ok(d, &["commit", "-m", "one"]);
    ok(d, &["branch", "create", "other"]);
    ok(d, &["checkout", "other"]);
    write(d, "slot", b"a file on other\n");
    ok(d, &["commit", "-m", "slot"]);
    ok(d, &["checkout", "main"]);
    std::fs::create_dir_all(d.join("slot/a/b")).unwrap();
    ok(d, &["checkout", "other"]);
    assert_eq!(std::fs::read(d.join("slot")).unwrap(), b"a file on other\n");
    assert_eq!(status(d)["clean"], true);
}

/// Concurrent operations that move the same branch differently keep the newest move,
/// and one that only moves a branch never undoes another's commit.
#[test]
fn concurrent_branch_changes_merge_against_their_common_ancestor() {
    use lifeos_vcs::object::Event;
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "base"]);
    write(d, "a.txt", b"b");
    ok(d, &["commit", "-m", "second"]);
    let r = lifeos_vcs::Repo::discover(d).unwrap();
    let head = r.head().unwrap();
    let second = head.view.at_commit().unwrap();
    let base = r.commit(&second).unwrap().parents[0];
    // One operation moves `main` back to base; a later one, started from the same
    // operation, only creates a tag.
    let mut moved = head.view.clone();
    moved.set_branch("main", Some(base));
    let mut tagged = head.view.clone();
    tagged.set_tag("v1", Some(second));
    for (view, t, ev) in [
        (
            moved,
            1_000,
            Event::BranchMoved {
                name: "main".into(),
                from: Some(second),
                to: Some(base),
            },
        ),
        (
            tagged,
            2_000,
            Event::TagMoved {
                name: "v1".into(),
                from: None,
                to: Some(second),
            },
        ),
    ] {
        let tx = r.store().transaction().unwrap();
        r.publish(
            tx,
            &[head.id],
            view,
            "concurrent",
            vec![ev],
            head.op.end_ms + t,
        )
        .unwrap();
    }
    let r = lifeos_vcs::Repo::discover(d).unwrap();
    let merged = r.head().unwrap().view;
    assert_eq!(
        merged.branch("main"),
        Some(base),
        "the older side's move is kept"
    );
    assert_eq!(merged.tag("v1"), Some(second));
    assert!(merged.heads.contains(&second), "nothing is hidden");
}

/// A damaged catalog row made `--at` panic.
#[test]
fn a_damaged_catalog_row_is_an_error_not_a_panic() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "base"]);
    ok(d, &["reindex"]);
    let db = rusqlite::Connection::open(d.join(".lifeos/catalog.sqlite")).unwrap();
    db.execute(
        "UPDATE operations SET id = x'00' WHERE end_ms = (SELECT MAX(end_ms) FROM operations)",
        [],
    )
    .unwrap();
    drop(db);
    let now = jiff::Timestamp::now().to_string();
    let err = fails(d, &["log", "--at", &now]);
    assert!(
        err.contains("reindex") && !err.contains("panicked"),
        "{err}"
    );
    ok(d, &["reindex"]);
    ok(d, &["log", "--at", &now]);
}

/// Writes a move journal as an interrupted command would have left it: the folder was
/// being moved from commit `from`'s tree to `to`'s, for the head operation.
fn plant_journal(d: &Path, from: &str, to: &str) {
    let r = lifeos_vcs::Repo::discover(d).unwrap();
    let tree = |rev: &str| {
        let head = r.head().unwrap();
        let c = r.resolve_rev(&head.view, rev).unwrap();
        r.commit(&c).unwrap().tree
    };
    let j = lifeos_vcs::working_copy::moves::MoveJournal {
        op: r.head().unwrap().id,
        from: Some(tree(from)),
        to: Some(tree(to)),
    };
    std::fs::write(d.join(".lifeos/wc_move"), j.encode()).unwrap();
}

/// Finishing an interrupted move treated anything it could not hash as absent: an
/// unreadable file, a folder of files, or a path under a symlink where a folder was, at a
/// path the move adds, was overwritten (or stopped every command). They are left alone.
#[test]
fn finishing_a_move_leaves_alone_what_it_cannot_vouch_for() {
    let user = user_repo();
    let d = user.path().to_path_buf();
    user_write(&d, "keep.txt", b"k\n");
    user.ok(&["commit", "-m", "small"]);
    user.ok(&["branch", "create", "big"]);
    user.ok(&["checkout", "big"]);
    for p in ["secret.txt", "dir/a.txt", "link/b.txt", "plain.txt"] {
        user_write(&d, p, format!("recorded {p}\n").as_bytes());
    }
    user.ok(&["commit", "-m", "big"]);
    user.ok(&["checkout", "main"]);
    // The move to `big` was interrupted before it wrote anything; since then someone put
    // an unreadable file, a folder of files and a symlink where the move writes.
    user_write(&d, "secret.txt", b"mine, unreadable\n");
    std::fs::set_permissions(d.join("secret.txt"), std::fs::Permissions::from_mode(0o000)).unwrap();
    user_write(&d, "dir/a.txt/inner.txt", b"mine\n");
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), d.join("link")).unwrap();
    user.ok(&["branch", "set", "main", "-r", "big"]);
    plant_journal(&d, "@-", "big");
    let out = user.run(&["status"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("finished changing the folder"), "{err}");
    for p in ["secret.txt", "dir/a.txt", "link/b.txt"] {
        assert!(err.contains(&format!("left {p} as it is")), "{p}: {err}");
    }
    assert_eq!(
        std::fs::read(d.join("plain.txt")).unwrap(),
        b"recorded plain.txt\n"
    );
    std::fs::set_permissions(d.join("secret.txt"), std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        std::fs::read(d.join("secret.txt")).unwrap(),
        b"mine, unreadable\n"
    );
    assert_eq!(
        std::fs::read(d.join("dir/a.txt/inner.txt")).unwrap(),
        b"mine\n"
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert!(!d.join(".lifeos/wc_move").exists());
}

/// A command that opened the repository before an interrupted move was published took
/// its stale index for the truth, found the move's operation "unpublished" and dropped
/// the journal; the half-moved folder was then recorded by the next commit.
#[test]
fn a_command_opened_before_the_interrupted_move_still_finishes_it() {
    let (base, _) = busy_repo();
    // Open the repository (and load its index) first, as a command waiting for the lock.
    for delay in [40u64, 80, 120, 160, 200, 260, 320, 400] {
        let r = copy_repo(base.path());
        let d = r.path();
        ok(d, &["commit", "-m", "precious work committed"]);
        let waiting = lifeos_vcs::Repo::discover(d).unwrap();
        let child = TestEnv::at(d)
            .command(["checkout", "other"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        sh_kill("-KILL", child.id());
        let _ = child.wait_with_output();
        if !d.join(".lifeos/wc_move").exists() {
            continue;
        }
        let wc = waiting.lock_working_copy().unwrap();
        let finished = wc.finished_move().is_some();
        drop(wc);
        // The journal named a published operation: the waiting command finished the move.
        assert!(!d.join(".lifeos/wc_move").exists());
        if status(d)["branch"] == "other" {
            assert!(finished, "after {delay} ms");
            assert_eq!(status(d)["clean"], true, "after {delay} ms");
            assert_eq!(std::fs::read(d.join("only-other.txt")).unwrap(), b"other\n");
        }
        return;
    }
    eprintln!("note: no kill landed while the folder was moving; nothing to check");
}

/// An ingest batch published beside a commit was the newest of the concurrent
/// operations, so `undo` undid the batch (a no-op) instead of the commit.
#[test]
fn undo_beside_an_ingest_batch_undoes_the_change_not_the_batch() {
    use lifeos_vcs::object::Event;
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "base"]);
    let r = lifeos_vcs::Repo::discover(d).unwrap();
    let head = r.head().unwrap();
    let at = head.view.at_commit().unwrap();
    let mut view = head.view.clone();
    view.set_branch("made", Some(at));
    let tx = r.store().transaction().unwrap();
    let ev = vec![Event::BranchMoved {
        name: "made".into(),
        from: None,
        to: Some(at),
    }];
    r.publish(
        tx,
        &[head.id],
        view,
        "branch create made",
        ev,
        head.op.end_ms + 1_000,
    )
    .unwrap();
    let tx = r.store().transaction().unwrap();
    let ev = vec![Event::ContentExtracted { results: vec![] }];
    r.publish(
        tx,
        &[head.id],
        head.view.clone(),
        "ingest: 0 files",
        ev,
        head.op.end_ms + 2_000,
    )
    .unwrap();
    let names = |d: &Path| -> Vec<String> {
        json(d, &["branch", "list"])["branches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(d), ["made", "main"]);
    ok(d, &["undo"]);
    assert_eq!(names(d), ["main"]);
}

/// More than 64 concurrent operation heads (a script creating tags in parallel) made
/// every later command fail.
#[test]
fn seventy_concurrent_operations_are_all_kept() {
    use lifeos_vcs::object::Event;
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "base"]);
    let r = lifeos_vcs::Repo::discover(d).unwrap();
    let head = r.head().unwrap();
    let at = head.view.at_commit().unwrap();
    for i in 0..70 {
        let mut view = head.view.clone();
        view.set_tag(&format!("t{i:02}"), Some(at));
        let tx = r.store().transaction().unwrap();
        let ev = vec![Event::TagMoved {
            name: format!("t{i:02}"),
            from: None,
            to: Some(at),
        }];
        r.publish(
            tx,
            &[head.id],
            view,
            "tag create",
            ev,
            head.op.end_ms + 1 + i,
        )
        .unwrap();
    }
    let tags = json(d, &["tag", "list"]);
    assert_eq!(tags["tags"].as_array().unwrap().len(), 70, "{tags}");
    assert_eq!(
        std::fs::read_dir(d.join(".lifeos/op_heads"))
            .unwrap()
            .count(),
        1
    );
    assert_eq!(json(d, &["fsck"])["ok"], true);
}

/// The commit-time indexer matched `[ingest] exclude` globs against the quoted form of a
/// name that is not UTF-8, so an excluded file was indexed.
#[test]
fn ingest_exclusions_hold_for_names_that_are_not_utf8() {
    let repo = repo(false);
    let d = repo.path();
    let cfg = d.join(".lifeos/config");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[ingest]\nexclude = [\"private/**\"]\n");
    std::fs::write(&cfg, text).unwrap();
    std::fs::create_dir(d.join("private")).unwrap();
    std::fs::write(
        bpath(d, b"private/caf\xe9.md"),
        b"# Secret\nzanzibar plans\n",
    )
    .unwrap();
    write(d, "public.md", b"# Open\nzanzibar trip\n");
    ok(d, &["commit", "-m", "notes"]);
    ok(d, &["ingest"]);
    let hits = json(d, &["search", "zanzibar"]);
    let paths: Vec<&str> = hits["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["public.md"], "{hits}");
}

/// A git history can hold files under `.lifeos/`, where lifeos keeps the repository. A
/// checkout of such a commit wrote them over the repository's own files, and a checkout
/// away from it removed them. Such a history is now refused when it is imported (as git
/// refuses to check it out), naming the path and the commit; a tree that holds it anyway
/// (another device's) is never checked out (`tests/hostile.rs`); the repository keeps
/// working.
#[test]
fn a_tree_holding_the_repository_folder_never_writes_into_it() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let src = t.join("src");
    std::fs::create_dir(&src).unwrap();
    git(&src, &["init", "-q", "-b", "main"]);
    write(&src, "notes.md", b"notes\n");
    git(&src, &["add", "."]);
    let commit = |msg: &str| git_commit(&src, &["-m", msg]);
    commit("plain");
    git(&src, &["checkout", "-q", "-b", "hostile"]);
    // New paths only: a path the repository already has was refused as "not recorded".
    write(&src, ".lifeos/op_heads/0000", b"x");
    write(&src, ".lifeos/notes", b"not lifeos's\n");
    git(&src, &["add", "-f", "."]);
    commit("hostile");
    let lr = t.join("lifeos");
    std::fs::create_dir(&lr).unwrap();
    ok(&lr, &["init"]);
    let config = std::fs::read(lr.join(".lifeos/config")).unwrap();
    let hostile = git(&src, &["rev-parse", "hostile"]);
    let err = fails(&lr, &["git", "import", src.to_str().unwrap()]);
    assert!(
        err.contains(&format!("commit {} has .lifeos,", hostile.trim()))
            && err.contains("lifeos keeps none of its history"),
        "{err}"
    );
    assert_eq!(std::fs::read(lr.join(".lifeos/config")).unwrap(), config);
    assert!(!lr.join(".lifeos/op_heads/0000").exists());
    assert!(!lr.join(".lifeos/notes").exists());
    // Nothing of that history came in, and the repository still works.
    assert!(!run(&lr, &["log", "-r", "hostile"]).status.success());
    write(&lr, "more.md", b"more\n");
    ok(&lr, &["commit", "-m", "more"]);
    assert!(ok(&lr, &["fsck"]).contains("no problems found"));
}
