//! The main path: init, commit, edit, commit, ls, cat, restore, stats, fsck, gc.

use crate::common::*;

#[test]
fn commit_edit_commit_then_restore_both_versions_byte_for_byte() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "photos/a.jpg", &noise(700_000, 1));
    write(d, "photos/b.jpg", &noise(300_000, 2));
    write(d, "notes/plan.md", b"# Plan\n\nbudget: 100\n");
    write(d, "empty.txt", b"");
    std::os::unix::fs::symlink("notes/plan.md", d.join("plan-link")).unwrap();
    write(d, "bin/run.sh", b"#!/bin/sh\necho hi\n");
    std::fs::set_permissions(
        d.join("bin/run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let v1 = snapshot_of(d);
    let first = json(d, &["commit", "-m", "first"]);
    assert_eq!(first["schema"], "lifeos.commit.v1");
    assert_eq!(first["files"], 6);
    assert_eq!(first["changed"], true);

    // Edit: insert in the middle of a photo, delete one, add one, change a note.
    let mut a = noise(700_000, 1);
    a.splice(350_000..350_000, b"inserted".iter().copied());
    write(d, "photos/a.jpg", &a);
    std::fs::remove_file(d.join("photos/b.jpg")).unwrap();
    write(d, "photos/c.jpg", &noise(100_000, 3));
    write(d, "notes/plan.md", b"# Plan\n\nbudget: 250\n");
    let v2 = snapshot_of(d);
    ok(d, &["commit", "-m", "second"]);

    // ls shows the newest commit with sizes; ls -r @- the older one.
    let ls = json(d, &["ls"]);
    assert_eq!(ls["schema"], "lifeos.ls.v1");
    let paths: Vec<&str> = ls["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "bin/run.sh",
            "empty.txt",
            "notes/plan.md",
            "photos/a.jpg",
            "photos/c.jpg",
            "plan-link"
        ]
    );
    let a_entry = ls["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "photos/a.jpg")
        .unwrap();
    assert_eq!(a_entry["size"], 700_008);
    let kinds: Vec<&str> = ls["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["executable", "file", "file", "file", "file", "symlink"]
    );
    let human = ok(d, &["ls", "photos", "-r", "@-"]);
    assert!(human.contains("photos/b.jpg"), "{human}");

    // cat of an older version gives the old bytes.
    let out = run(d, &["cat", "photos/a.jpg", "-r", "@-"]);
    assert!(out.status.success());
    assert_eq!(out.stdout, noise(700_000, 1));
    assert_eq!(
        ok(d, &["cat", "notes/plan.md", "-r", "@-"]),
        "# Plan\n\nbudget: 100\n"
    );

    // restore both versions elsewhere and compare every byte, link and mode.
    let out1 = tempfile::tempdir().unwrap();
    let t1 = out1.path().join("v1");
    ok(d, &["restore", "--to", t1.to_str().unwrap(), "-r", "@-"]);
    assert_eq!(snapshot_of(&t1), v1);
    let t2 = out1.path().join("v2");
    ok(d, &["restore", "--to", t2.to_str().unwrap()]);
    assert_eq!(snapshot_of(&t2), v2);
    let mode = std::fs::metadata(t2.join("bin/run.sh"))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o111,
        0o111
    );

    // stats: chunk-level dedup keeps most of a.jpg shared between versions.
    let st = json(d, &["stats"]);
    assert_eq!(st["schema"], "lifeos.stats.v1");
    assert_eq!(st["commits"], 2);
    let logical = st["logical_bytes"].as_u64().unwrap();
    let stored = st["stored_bytes"].as_u64().unwrap();
    // Both versions in full: photos, the 20-byte note and the 18-byte script (links excluded).
    assert_eq!(
        logical,
        (700_000 + 300_000 + 20 + 18) + (700_008 + 100_000 + 20 + 18),
        "{st}"
    );
    // 1.1 MB of distinct photo bytes; the 8-byte insert adds only the chunks around it.
    assert!(
        stored < 1_100_000 + 300_000,
        "an 8-byte insert must not store the photo twice: {st}"
    );
    assert!(st["dedup_ratio"].as_f64().unwrap() > 1.4, "{st}");

    let f = json(d, &["fsck"]);
    assert_eq!(f["schema"], "lifeos.fsck.v1");
    assert_eq!(f["ok"], true, "{f}");
    assert_eq!(f["commits"], 2);
    ok(d, &["gc"]);
    assert_eq!(json(d, &["fsck"])["ok"], true);
    let out = run(d, &["cat", "photos/a.jpg", "-r", "@-"]);
    assert_eq!(out.stdout, noise(700_000, 1));
}

#[test]
fn unchanged_files_are_not_read_again() {
    let repo = repo(false);
    let d = repo.path();
    for i in 0..50 {
        write(d, &format!("f/{i}.txt"), format!("file {i}\n").as_bytes());
    }
    write(d, "big.bin", &noise(200_000, 9));
    ok(d, &["commit", "-m", "one"]);
    // Age the files beyond the racy window, as if they were written long ago.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for e in walk_files(d) {
        let f = std::fs::File::options().write(true).open(&e).unwrap();
        f.set_modified(old).unwrap();
    }
    ok(d, &["commit", "-m", "refresh cache", "--allow-empty"]);
    let again = json(d, &["commit", "-m", "nothing"]);
    assert_eq!(again["changed"], false);
    assert_eq!(again["files_read"], 0, "{again}");
    write(d, "f/7.txt", b"edited\n");
    let edit = json(d, &["commit", "-m", "edit"]);
    assert_eq!(edit["changed"], true);
    assert_eq!(
        edit["files_read"], 1,
        "only the edited file is read: {edit}"
    );
}

fn walk_files(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_name() == ".lifeos" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if e.file_type().unwrap().is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn ignore_rules_and_git_dir_are_honoured() {
    let repo = repo(false);
    let d = repo.path();
    write(d, ".lifeosignore", b"*.tmp\ncache/\n");
    write(d, ".gitignore", b"build/\n");
    write(d, "keep.txt", b"keep");
    write(d, "scratch.tmp", b"no");
    write(d, "cache/x", b"no");
    write(d, "build/out", b"no");
    write(d, ".git/HEAD", b"ref: refs/heads/main\n");
    write(d, "sub/.git/config", b"x");
    write(d, "sub/file", b"yes");
    ok(d, &["commit", "-m", "one"]);
    let ls = json(d, &["ls"]);
    let paths: Vec<&str> = ls["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [".gitignore", ".lifeosignore", "keep.txt", "sub/file"]
    );
}

/// A file recorded before an ignore rule matched it stays recorded (as in git): status is
/// clean, an edit shows, and only deleting it records a deletion. A folder that became a
/// symlink is not followed to find it.
#[test]
fn a_tracked_file_an_ignore_rule_matches_stays_tracked() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "build/out", b"v1");
    write(d, "keep.txt", b"keep");
    ok(d, &["commit", "-m", "one"]);
    write(d, ".gitignore", b"build/\n");
    ok(d, &["commit", "-m", "ignore build"]);
    assert!(ok(d, &["ls", "build"]).contains("build/out"));
    assert_eq!(json(d, &["status"])["clean"], true);
    write(d, "build/out", b"v2");
    let st = json(d, &["status"]);
    assert_eq!(st["changes"][0]["path"], "build/out", "{st}");
    assert_eq!(st["changes"][0]["status"], "modified", "{st}");
    ok(d, &["commit", "-m", "edit"]);
    assert_eq!(ok(d, &["cat", "build/out"]), "v2");
    // Under a folder that is now a symlink to elsewhere: gone from the folder.
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "out", b"outside");
    std::fs::remove_dir_all(d.join("build")).unwrap();
    std::os::unix::fs::symlink(outside.path(), d.join("build")).unwrap();
    std::fs::remove_file(d.join(".gitignore")).unwrap();
    write(d, ".gitignore", b"build\n");
    let st = json(d, &["status"]);
    let deleted = st["changes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["path"] == "build/out" && c["status"] == "deleted");
    assert!(deleted, "{st}");
}

#[test]
fn errors_name_the_problem_and_suggest_a_fix() {
    let repo = repo(false);
    let d = repo.path();
    let err = fails(d, &["ls"]);
    assert!(
        err.contains("no commits yet") && err.contains("hint:"),
        "{err}"
    );
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "one"]);
    for (args, says) in [
        (
            ["cat", "missing.txt"].as_slice(),
            "missing.txt does not exist",
        ),
        (&["cat", "a.txt", "-r", "mian"], "did you mean main"),
        (&["cat", "a.txt", "-r", "@-"], "root commit"),
    ] {
        let err = fails(d, args);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let elsewhere = tempfile::tempdir().unwrap();
    let err = fails(elsewhere.path(), &["log"]);
    assert!(
        err.contains("no lifeos repository") && err.contains("lifeos init"),
        "{err}"
    );
    let nonempty = tempfile::tempdir().unwrap();
    write(nonempty.path(), "x", b"x");
    let err = fails(d, &["restore", "--to", nonempty.path().to_str().unwrap()]);
    assert!(err.contains("not empty"), "{err}");
}

/// `lifeos init DIR` created DIR/DIR: the global `-C DIR` option shared its argument id
/// with `init`'s folder, so the folder was also taken as the directory to run in.
#[test]
fn init_into_a_named_folder_does_not_nest_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = ok(tmp.path(), &["init", "life"]);
    assert!(tmp.path().join("life/.lifeos/config").is_file(), "{out}");
    assert!(!tmp.path().join("life/life").exists());
    std::fs::create_dir(tmp.path().join("other")).unwrap();
    ok(tmp.path(), &["-C", "other", "init"]);
    assert!(tmp.path().join("other/.lifeos/config").is_file());
}

/// `lifeos init` inside another repository's folder made a nested repository without a
/// word. It still makes it, and says so; a first repository says nothing of the kind.
#[test]
fn init_inside_a_repository_says_the_outer_one_records_it_too() {
    let tmp = tempfile::tempdir().unwrap();
    let first = run(tmp.path(), &["init", "outer"]);
    assert!(!String::from_utf8_lossy(&first.stderr).contains("inside"));
    let nested = run(&tmp.path().join("outer"), &["init", "notes"]);
    assert!(nested.status.success());
    let said = String::from_utf8_lossy(&nested.stderr);
    assert!(
        said.contains("is inside the lifeos repository at"),
        "{said}"
    );
    assert!(tmp.path().join("outer/notes/.lifeos").is_dir());
}

/// `cat --json` gives the exact bytes (base64), with size, id and the commit read.
#[test]
fn cat_json_carries_the_exact_bytes_of_any_version() {
    use base64::Engine as _;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    let v1: Vec<u8> = (0..=255u8).chain([0xff, 0xfe, 0x00]).collect();
    write(d, "bin/blob", &v1);
    ok(d, &["commit", "-m", "v1"]);
    write(d, "bin/blob", b"second");
    ok(d, &["commit", "-m", "v2"]);
    let j = json(d, &["cat", "bin/blob", "-r", "@-"]);
    assert_eq!(j["schema"], "lifeos.cat.v1", "{j}");
    assert_eq!(j["path"], "bin/blob");
    assert_eq!(j["size"], v1.len());
    assert_eq!(j["executable"], false);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(j["content_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(bytes, v1);
    let now = json(d, &["cat", "bin/blob"]);
    assert_eq!(now["content_base64"], "c2Vjb25k");
    assert_ne!(now["id"], j["id"]);
    let e = fails(d, &["cat", "bin", "--json"]);
    assert!(e.contains("directory"), "{e}");
}
