//! Remotes end to end: the real binary pushing to, fetching from and cloning a directory
//! and a real S3-compatible server (SeaweedFS, started on 127.0.0.1 for each test).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Output;

use crate::common::*;

/// The output of `child`, which must exit within `secs` seconds (it is killed and the
/// test fails otherwise: a push that hangs when its server goes away is a bug).
fn finishes_within(mut child: std::process::Child, secs: u64) -> Output {
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(secs) {
            child.kill().unwrap();
            panic!("the command did not finish within {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn fsck_ok(dir: &Path) {
    let f = json(dir, &["fsck"]);
    assert_eq!(f["ok"], true, "{f}");
}

/// Adds a folder remote `origin` to the repository at `dir`, in a new temporary folder
/// (returned, with the remote's path), with `more` arguments to `remote add`.
fn folder_remote(env: &TestEnv, more: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
    let elsewhere = tempfile::tempdir().unwrap();
    let url = elsewhere.path().join("backup");
    let mut args = vec!["remote", "add", "origin", url.to_str().unwrap()];
    args.extend(more);
    env.ok(&args);
    (elsewhere, url)
}

/// Every file under `dir`, read whole.
fn every_file(dir: &Path, out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            every_file(&p, out);
        } else if let Ok(b) = std::fs::read(&p) {
            out.push((p, b));
        }
    }
}

fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A repository with text, a non-UTF-8 name and a 2 MB binary, committed; its
/// environment has the remotes' passphrase.
fn library() -> TestEnv {
    let a = TestEnv::repo().with_passphrase();
    let d = a.path();
    write(
        d,
        "notes/budget.md",
        b"The quarterly budget moved to Friday afternoon.\n",
    );
    write(d, "photos/beach.jpg", &noise(2_000_000, 1));
    std::fs::write(
        d.join(std::ffi::OsStr::from_bytes(b"notes/caf\xe9.txt")),
        b"latin-1 name",
    )
    .unwrap();
    ok(d, &["commit", "-m", "library"]);
    a
}

/// Once `backup` was added beside `origin`, a plain `push` went to `origin` without a
/// word. With several remotes, push, fetch and pull without a name are refused, listing
/// them, and nothing is sent; named, the push goes where it was told.
#[test]
fn with_several_remotes_a_command_that_names_none_is_refused() {
    let a = library();
    let (_elsewhere, origin) = folder_remote(&a, &[]);
    let other = tempfile::tempdir().unwrap();
    let backup = other.path().join("backup");
    a.ok(&["remote", "add", "backup", backup.to_str().unwrap()]);
    for verb in ["push", "fetch", "pull"] {
        let err = a.fails(&[verb]);
        assert!(
            err.contains("there are 2 remotes (backup, origin)")
                && err.contains("lifeos push NAME"),
            "{verb}: {err}"
        );
    }
    assert!(!origin.join("packs").exists() && !backup.join("packs").exists());
    let pushed = a.ok(&["push", "backup"]);
    assert!(pushed.contains("backup"), "{pushed}");
    assert!(backup.join("packs").is_dir() && !origin.join("packs").exists());
}

#[test]
fn a_directory_remote_on_a_second_path_round_trips_byte_for_byte() {
    let a = library();
    let (_elsewhere, url) = folder_remote(&a, &[]);
    let url = url.to_str().unwrap();
    let first = a.ok_json(&["push"]);
    assert_eq!(first["schema"], "lifeos.push.v1");
    assert_eq!(first["encrypted"], false);
    assert!(first["objects"].as_u64().unwrap() > 5, "{first}");
    let again = a.ok_json(&["push"]);
    assert_eq!(again["objects"], 0, "{again}");
    assert_eq!(again["heads_added"], 0, "{again}");

    let parent = tempfile::tempdir().unwrap();
    TestEnv::at(parent.path())
        .with_passphrase()
        .ok(&["clone", url, "b"]);
    let b = parent.path().join("b");
    assert_eq!(snapshot_of(&b), snapshot_of(a.path()));
    assert_eq!(rev_id(&b, "@"), rev_id(a.path(), "@"));
    fsck_ok(&b);

    // The clone works on, pushes; the first device pulls it.
    write(&b, "notes/budget.md", b"The budget is final.\n");
    write(&b, "notes/new.md", b"from the second device\n");
    ok(&b, &["commit", "-m", "second device"]);
    TestEnv::at(&b).with_passphrase().ok(&["push"]);
    let pulled = a.ok_json(&["pull"]);
    assert_eq!(pulled["schema"], "lifeos.pull.v1");
    assert_eq!(pulled["moved_to"].as_str().unwrap(), rev_id(&b, "@"));
    assert_eq!(snapshot_of(a.path()), snapshot_of(&b));
    let status = ok(a.path(), &["status"]);
    assert!(status.contains("nothing changed"), "{status}");
    fsck_ok(a.path());

    // Both devices commit: pull says the branch diverged and moves nothing; the other
    // device's commit is kept for a merge.
    write(&b, "notes/b.md", b"b\n");
    ok(&b, &["commit", "-m", "b again"]);
    TestEnv::at(&b).with_passphrase().ok(&["push"]);
    write(a.path(), "notes/a.md", b"a\n");
    ok(a.path(), &["commit", "-m", "a again"]);
    let before = snapshot_of(a.path());
    let err = a.fails(&["pull"]);
    assert!(err.contains("diverged"), "{err}");
    assert_eq!(snapshot_of(a.path()), before);
    let theirs = rev_id(&b, "@");
    let all = json(a.path(), &["log", "-r", "all()"]);
    assert!(all.to_string().contains(&theirs), "{all}");
}

#[test]
fn s3_round_trip_is_encrypted_and_the_server_holds_no_plaintext() {
    let s3 = S3Server::start();
    let a = library();
    let url = format!("s3://{S3_BUCKET}/home");
    let added = a.s3(&s3).ok(&["remote", "add", "origin", &url]);
    assert!(added.contains("encrypted"), "{added}");
    let pushed = a.s3(&s3).ok_json(&["push"]);
    assert_eq!(pushed["encrypted"], true, "{pushed}");

    // Nothing the server keeps reveals the note, the photo or the photo's id.
    let photo = noise(2_000_000, 1);
    let id = blake3::hash(&photo);
    let mut files = Vec::new();
    every_file(s3.data.path(), &mut files);
    assert!(files.iter().map(|(_, b)| b.len()).sum::<usize>() > 2_000_000);
    for (path, bytes) in &files {
        for (what, needle) in [
            ("the note's phrase", b"quarterly budget".as_slice()),
            ("the photo's bytes", &photo[1000..1064]),
            ("the photo's id", id.as_bytes().as_slice()),
            ("the photo's id in hex", id.to_hex().as_bytes()),
        ] {
            assert!(!holds(bytes, needle), "{} holds {what}", path.display());
        }
    }

    // A wrong passphrase is a clear error and creates nothing.
    let parent = tempfile::tempdir().unwrap();
    let out = s3
        .at(parent.path())
        .with("LIFEOS_PASSPHRASE", "wrong")
        .run(&["clone", &url, "b"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("wrong passphrase"), "{err}");
    assert!(!parent.path().join("b").exists());

    s3.at(parent.path()).ok(&["clone", &url, "b"]);
    let b = parent.path().join("b");
    assert_eq!(snapshot_of(&b), snapshot_of(a.path()));
    fsck_ok(&b);
    write(&b, "photos/new.jpg", &noise(300_000, 7));
    ok(&b, &["commit", "-m", "from b"]);
    s3.at(&b).ok(&["push"]);
    a.s3(&s3).ok(&["pull"]);
    assert_eq!(snapshot_of(a.path()), snapshot_of(&b));
}

#[test]
fn a_small_edit_to_a_large_file_pushes_a_few_chunks() {
    let s3 = S3Server::start();
    let a = TestEnv::repo().with_passphrase();
    let mut video = noise(24 << 20, 3);
    write(a.path(), "video.mp4", &video);
    ok(a.path(), &["commit", "-m", "video"]);
    let url = format!("s3://{S3_BUCKET}/v");
    a.s3(&s3).ok(&["remote", "add", "origin", &url]);
    let first = a.s3(&s3).ok_json(&["push"]);
    assert!(first["bytes"].as_u64().unwrap() > 24 << 20, "{first}");
    video[12 << 20..(12 << 20) + 100].copy_from_slice(&[7u8; 100]);
    write(a.path(), "video.mp4", &video);
    ok(a.path(), &["commit", "-m", "trim"]);
    let second = a.s3(&s3).ok_json(&["push"]);
    let bytes = second["bytes"].as_u64().unwrap();
    assert!(
        bytes < 1 << 20,
        "a 100-byte edit pushed {bytes} bytes: {second}"
    );
    assert!(second["objects"].as_u64().unwrap() <= 12, "{second}");
}

/// An S3 server may store an upload past 8 MiB as several pieces and hash it again
/// (SeaweedFS does), so a push closes each pack before it would pass 8 MiB.
#[test]
fn every_remote_pack_is_at_most_8_mib() {
    let a = TestEnv::repo().with_passphrase();
    write(a.path(), "video.mp4", &noise(30 << 20, 5));
    ok(a.path(), &["commit", "-m", "video"]);
    let (_elsewhere, url) = folder_remote(&a, &[]);
    let pushed = a.ok_json(&["push"]);
    let mut sizes: Vec<u64> = std::fs::read_dir(url.join("packs"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect();
    sizes.sort_unstable();
    assert_eq!(
        sizes.len() as u64,
        pushed["packs"].as_u64().unwrap(),
        "{pushed}"
    );
    assert_eq!(sizes.iter().sum::<u64>(), pushed["bytes"].as_u64().unwrap());
    assert!(sizes.len() >= 4, "{sizes:?}");
    assert!(sizes.iter().all(|&n| n <= 8 << 20), "{sizes:?}");
    // Packs are filled close to the limit, not cut short.
    assert!(sizes[sizes.len() - 2] > 7 << 20, "{sizes:?}");
}

#[test]
fn two_devices_pushing_at_the_same_moment_both_land() {
    let s3 = S3Server::start();
    let a = library();
    let url = format!("s3://{S3_BUCKET}/shared");
    a.s3(&s3).ok(&["remote", "add", "origin", &url]);
    a.s3(&s3).ok(&["push"]);
    let parent = tempfile::tempdir().unwrap();
    s3.at(parent.path()).ok(&["clone", &url, "b"]);
    let b = parent.path().join("b");
    let mut recorded = Vec::new();
    for round in 0..3 {
        write(
            a.path(),
            &format!("a/{round}.txt"),
            format!("a {round}").as_bytes(),
        );
        write(
            &b,
            &format!("b/{round}.txt"),
            format!("b {round}").as_bytes(),
        );
        ok(a.path(), &["commit", "-m", &format!("a {round}")]);
        ok(&b, &["commit", "-m", &format!("b {round}")]);
        recorded.push(rev_id(a.path(), "@"));
        recorded.push(rev_id(&b, "@"));
        let spawn = |d: &Path| {
            s3.at(d)
                .command(["push"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (pa, pb) = (spawn(a.path()), spawn(&b));
        for p in [pa, pb] {
            let out = p.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "a concurrent push failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // A third device sees every commit either device recorded.
    let c = parent.path().join("c");
    s3.at(parent.path()).ok(&["clone", &url, "c"]);
    let all = json(&c, &["log", "-r", "all()"]);
    let ids: Vec<&str> = all["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["commit"].as_str().unwrap())
        .collect();
    for r in &recorded {
        assert!(ids.contains(&r.as_str()), "commit {r} was lost: {ids:?}");
    }
    fsck_ok(&c);
    // Each device fetches the other's work; both keep their own folder.
    let fetched = a.s3(&s3).ok_json(&["fetch"]);
    assert!(
        !fetched["new_heads"].as_array().unwrap().is_empty(),
        "{fetched}"
    );
    assert!(ok(a.path(), &["status"]).contains("nothing changed"));
}

#[test]
fn a_killed_push_leaves_no_head_without_its_data_and_a_rerun_completes() {
    let s3 = S3Server::start();
    let a = TestEnv::repo().with_passphrase();
    let url = format!("s3://{S3_BUCKET}/killed");
    a.s3(&s3).ok(&["remote", "add", "origin", &url]);
    let mut kills = 0;
    for round in 0..6u64 {
        write(a.path(), &format!("r{round}.bin"), &noise(20 << 20, round));
        ok(a.path(), &["commit", "-m", &format!("round {round}")]);
        let mut child = a
            .s3(&s3)
            .command(["push"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200 + 150 * round));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            kills += 1;
        }
        child.wait().unwrap();
        // Whatever the remote holds is whole: a clone of it checks every object its
        // heads reach, and the clone is healthy.
        let parent = tempfile::tempdir().unwrap();
        let out = s3.at(parent.path()).run(&["clone", &url, "b"]);
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            fsck_ok(&parent.path().join("b"));
        } else {
            assert!(
                err.contains("holds no lifeos remote yet"),
                "after a killed push: {err}"
            );
        }
    }
    assert!(kills > 0, "no push was killed");
    a.s3(&s3).ok(&["push"]);
    let checked = a.s3(&s3).ok_json(&["fsck", "--remote", "origin"]);
    assert_eq!(checked["ok"], true, "{checked}");
    // What the killed pushes left that no head reaches goes; the rest stays whole.
    let collected = a.s3(&s3).ok_json(&["gc", "--remote", "origin"]);
    assert_eq!(collected["schema"], "lifeos.gc_remote.v1");
    let checked = a
        .s3(&s3)
        .ok_json(&["fsck", "--remote", "origin", "--read-data"]);
    assert_eq!(checked["ok"], true, "{checked}");
    assert_eq!(
        checked["unindexed_packs"].as_array().unwrap().len(),
        0,
        "{checked}"
    );
    assert_eq!(checked["verified"], checked["objects"], "{checked}");
    let parent = tempfile::tempdir().unwrap();
    s3.at(parent.path()).ok(&["clone", &url, "b"]);
    assert_eq!(snapshot_of(&parent.path().join("b")), snapshot_of(a.path()));
}

#[test]
fn a_lazy_clone_reads_file_contents_on_demand() {
    let s3 = S3Server::start();
    let a = TestEnv::repo().with_passphrase();
    for i in 0..3 {
        write(a.path(), &format!("rec/{i}.wav"), &noise(2_000_000, 10 + i));
    }
    ok(a.path(), &["commit", "-m", "recordings"]);
    let url = format!("s3://{S3_BUCKET}/lazy");
    a.s3(&s3).ok(&["remote", "add", "origin", &url]);
    a.s3(&s3).ok(&["push"]);

    let parent = tempfile::tempdir().unwrap();
    let cloned = s3
        .at(parent.path())
        .ok_json(&["clone", "--lazy", &url, "b"]);
    assert_eq!(cloned["lazy"], true);
    let b = parent.path().join("b");
    let size = |d: &Path| {
        let mut f = Vec::new();
        every_file(&d.join(".lifeos"), &mut f);
        f.iter().map(|(_, b)| b.len()).sum::<usize>()
    };
    assert!(
        size(&b) < 1_000_000,
        "a lazy clone holds {} bytes",
        size(&b)
    );
    let logged = ok(&b, &["log"]);
    assert!(logged.contains("recordings"), "{logged}");
    let listed = ok(&b, &["ls", "-r", "main"]);
    assert!(listed.contains("rec/1.wav"), "{listed}");
    // One file's contents come when read, not the others'.
    let out = s3.at(&b).run(&["cat", "-r", "main", "rec/1.wav"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout == noise(2_000_000, 11),
        "cat returned other bytes"
    );
    let after = size(&b);
    assert!((2_000_000..3_500_000).contains(&after), "{after}");
    // checkout writes the files, reading what it lacks; fetch --all-data completes it.
    s3.at(&b).ok(&["checkout", "main"]);
    assert_eq!(snapshot_of(&b), snapshot_of(a.path()));
    // Its remote holds what it has not read: it cannot be forgotten yet.
    let err = fails(&b, &["remote", "remove", "origin"]);
    assert!(
        err.contains("lazy clone") && err.contains("--all-data"),
        "{err}"
    );
    s3.at(&b).ok(&["fetch", "--all-data"]);
    let remotes = json(&b, &["remote", "list"]);
    assert_eq!(remotes["remotes"][0]["lazy"], false, "{remotes}");
    fsck_ok(&b);
    ok(&b, &["remote", "remove", "origin"]);
    fsck_ok(&b);
}

#[test]
fn the_server_stopped_during_a_push_is_a_clear_error_and_a_retry_completes() {
    let mut s3 = S3Server::start();
    let a = TestEnv::repo().with_passphrase();
    write(a.path(), "big.bin", &noise(40 << 20, 5));
    ok(a.path(), &["commit", "-m", "big"]);
    let url = format!("s3://{S3_BUCKET}/stopped");
    a.s3(&s3).ok(&["remote", "add", "origin", &url]);
    let child = a
        .s3(&s3)
        .command(["push"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    s3.stop();
    let out = finishes_within(child, 120);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("s3://{S3_BUCKET}/stopped")), "{err}");
        assert!(err.contains("hint:"), "{err}");
    }
    // Stopped for good: a clear error, nothing changed here.
    let err = a.s3(&s3).fails(&["push"]);
    assert!(err.contains("error:") && err.contains("s3://"), "{err}");
    s3.resume();
    a.s3(&s3).ok(&["push"]);
    let parent = tempfile::tempdir().unwrap();
    s3.at(parent.path()).ok(&["clone", &url, "b"]);
    assert_eq!(snapshot_of(&parent.path().join("b")), snapshot_of(a.path()));
}

#[test]
fn a_passphrase_changes_without_uploading_data_again() {
    let s3 = S3Server::start();
    let a = library();
    let url = format!("s3://{S3_BUCKET}/keys");
    a.s3(&s3).ok(&["remote", "add", "origin", &url]);
    a.s3(&s3).ok(&["push"]);
    let out =
        a.s3(&s3)
            .with("LIFEOS_NEW_PASSPHRASE", "new phrase")
            .run(&["remote", "key", "--replace"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = a.s3(&s3).fails(&["push"]);
    assert!(err.contains("wrong passphrase"), "{err}");
    let out = a
        .s3(&s3)
        .with("LIFEOS_PASSPHRASE", "new phrase")
        .run(&["push", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["objects"], 0, "{v}");
}

#[test]
fn remote_checks_find_damage_and_gc_never_races_a_push() {
    let a = library();
    let (_elsewhere, root) = folder_remote(&a, &[]);
    a.ok(&["push"]);
    let checked = a.ok_json(&["fsck", "--remote", "origin", "--read-data"]);
    assert_eq!(checked["ok"], true, "{checked}");

    // A push in progress (its lock object is fresh): gc removes nothing.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    std::fs::create_dir_all(root.join("locks")).unwrap();
    std::fs::write(root.join("locks/push-0011223344556677"), now.to_string()).unwrap();
    std::fs::write(
        root.join("packs/00112233445566778899aabbccddeeff"),
        b"orphan",
    )
    .unwrap();
    let err = a.fails(&["gc", "--remote", "origin"]);
    assert!(err.contains("a push is running"), "{err}");
    assert!(root.join("packs/00112233445566778899aabbccddeeff").exists());
    // A lock left by a killed push (stale) is ignored.
    std::fs::write(root.join("locks/push-0011223344556677"), b"0").unwrap();
    let collected = a.ok_json(&["gc", "--remote", "origin"]);
    assert_eq!(collected["packs_removed"], 1, "{collected}");

    // A damaged object is found and named.
    let pack = std::fs::read_dir(root.join("packs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&pack).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    std::fs::write(&pack, bytes).unwrap();
    let out = a.run(&["fsck", "--remote", "origin", "--read-data", "--json"]);
    assert!(!out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false, "{v}");
    assert!(
        v["problems"][0].as_str().unwrap().contains("object "),
        "{v}"
    );
    // A clone from the damaged remote fails clearly and leaves no repository.
    let parent = tempfile::tempdir().unwrap();
    let err =
        TestEnv::at(parent.path())
            .with_passphrase()
            .fails(&["clone", root.to_str().unwrap(), "b"]);
    assert!(
        err.contains("damaged") || err.contains("hashes to"),
        "{err}"
    );
    assert!(
        !parent.path().join("b").exists(),
        "a failed clone left its folder"
    );
}

/// A pseudo-terminal: the master end, and the slave end as a file.
fn pty() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two new descriptors into the integers it is given; the other
    // arguments may be null.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and nothing else owns them.
    unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    }
}

#[test]
fn a_passphrase_prompt_holds_no_lock_while_it_waits() {
    use std::io::{Read, Write};
    use std::os::unix::process::CommandExt;
    let a = library();
    let (_elsewhere, url) = folder_remote(&a, &["--encrypt"]);
    a.ok(&["push"]);
    write(
        a.path(),
        "notes/later.md",
        b"written after the first push\n",
    );
    ok(a.path(), &["commit", "-m", "later"]);
    // A push with no passphrase at hand asks on its terminal.
    let (mut master, slave) = pty();
    let mut push = a.without("LIFEOS_PASSPHRASE").command(["push"]);
    push.stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave);
    // SAFETY: setsid and ioctl are async-signal-safe; the child takes the terminal on
    // its standard input as its controlling terminal, which the prompt reads.
    unsafe {
        push.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let push = push.spawn().unwrap();
    let mut reader = master.try_clone().unwrap();
    let (said, hear) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 256];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || said.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut shown = Vec::new();
    while !holds(&shown, b"passphrase") {
        match hear.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(b) => shown.extend(b),
            Err(e) => panic!("no prompt ({e}); the terminal showed {shown:?}"),
        }
    }
    // While the person has not answered, gc (which takes the repository lock alone) runs.
    let gc = a.command(["gc"]).spawn().unwrap();
    let out = finishes_within(gc, 120);
    assert!(out.status.success(), "gc: {out:?}");
    master.write_all(format!("{PASS}\n").as_bytes()).unwrap();
    let status = finishes_within(push, 120).status;
    while let Ok(b) = hear.try_recv() {
        shown.extend(b);
    }
    assert!(status.success(), "{}", String::from_utf8_lossy(&shown));
    let parent = tempfile::tempdir().unwrap();
    TestEnv::at(parent.path())
        .with_passphrase()
        .ok(&["clone", url.to_str().unwrap(), "b"]);
    assert_eq!(
        std::fs::read(parent.path().join("b/notes/later.md")).unwrap(),
        b"written after the first push\n"
    );
}
