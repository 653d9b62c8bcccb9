//! History as the operation log: log, show, status, branches, tags, describe, undo, op
//! restore, checkout, merge, time travel with --at, reindex, and concurrent writers.

use crate::common::*;

use std::path::Path;

fn log_messages(d: &Path, args: &[&str]) -> Vec<String> {
    let mut a = vec!["log"];
    a.extend_from_slice(args);
    json(d, &a)["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn log_show_and_status_describe_the_history() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "photos/cat.jpg", &noise(50_000, 1));
    write(d, "notes/plan.md", b"v1\n");
    ok(d, &["commit", "-m", "first"]);
    write(d, "notes/plan.md", b"v2\n");
    ok(d, &["commit", "-m", "second"]);
    write(d, "photos/cat.jpg", &noise(50_000, 2));
    ok(d, &["commit", "-m", "third"]);
    assert_eq!(log_messages(d, &[]), ["third", "second", "first"]);
    assert_eq!(log_messages(d, &["photos/cat.jpg"]), ["third", "first"]);
    assert_eq!(log_messages(d, &["notes"]), ["second", "first"]);
    let log = json(d, &["log"]);
    assert_eq!(log["schema"], "lifeos.log.v1");
    let change = log["commits"][0]["change_id"].as_str().unwrap();
    assert!(change.len() == 32 && change.bytes().all(|b| (b'k'..=b'z').contains(&b)));
    assert_eq!(log["commits"][0]["refs"][0], "main");

    let show = json(d, &["show", "@-"]);
    assert_eq!(show["schema"], "lifeos.show.v1");
    assert_eq!(show["message"], "second");
    assert_eq!(show["changes"].as_array().unwrap().len(), 1);
    assert_eq!(show["changes"][0]["path"], "notes/plan.md");
    assert_eq!(show["changes"][0]["status"], "modified");

    let st = json(d, &["status"]);
    assert_eq!(st["schema"], "lifeos.status.v1");
    assert_eq!(st["clean"], true);
    write(d, "notes/plan.md", b"v3\n");
    write(d, "new.txt", b"n");
    std::fs::remove_file(d.join("photos/cat.jpg")).unwrap();
    let st = json(d, &["status"]);
    let ch: Vec<(String, String)> = st["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().into(),
                c["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        ch,
        [
            ("new.txt".into(), "added".into()),
            ("notes/plan.md".into(), "modified".into()),
            ("photos/cat.jpg".into(), "deleted".into())
        ]
    );
    let human = ok(d, &["status"]);
    assert!(
        human.contains("A new.txt")
            && human.contains("M notes/plan.md")
            && human.contains("D photos/cat.jpg"),
        "{human}"
    );
}

#[test]
fn branches_tags_checkout_and_describe() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"main 1\n");
    ok(d, &["commit", "-m", "m1"]);
    ok(d, &["branch", "create", "trip"]);
    ok(d, &["checkout", "trip"]);
    write(d, "trip.txt", b"beach\n");
    ok(d, &["commit", "-m", "t1"]);
    ok(d, &["tag", "create", "v1", "-r", "@"]);
    let branches = json(d, &["branch", "list"]);
    assert_eq!(branches["schema"], "lifeos.branches.v1");
    let names: Vec<(&str, bool)> = branches["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["name"].as_str().unwrap(), b["current"].as_bool().unwrap()))
        .collect();
    assert_eq!(names, [("main", false), ("trip", true)]);
    // Back to main: trip.txt leaves the folder; back to v1 (detached): it returns.
    ok(d, &["checkout", "main"]);
    assert!(!d.join("trip.txt").exists());
    ok(d, &["checkout", "-r", "v1"]);
    assert_eq!(std::fs::read(d.join("trip.txt")).unwrap(), b"beach\n");
    ok(d, &["checkout", "trip"]);

    // describe keeps the change id and moves branch and tag... the tag stays on the old
    // commit's rewrite too.
    let before = json(d, &["log", "-n", "1"])["commits"][0].clone();
    ok(d, &["describe", "-m", "t1: a better message"]);
    let after = json(d, &["log", "-n", "1"])["commits"][0].clone();
    assert_eq!(after["change_id"], before["change_id"]);
    assert_ne!(after["commit"], before["commit"]);
    assert_eq!(after["message"], "t1: a better message");
    assert_eq!(after["refs"], serde_json::json!(["trip", "tag:v1"]));
    // Both ids work as revisions by unique prefix; the change id too.
    let change = after["change_id"].as_str().unwrap();
    assert_eq!(rev_id(d, &change[..8]), after["commit"].as_str().unwrap());
    assert_eq!(
        rev_id(d, &after["commit"].as_str().unwrap()[..10]),
        after["commit"].as_str().unwrap()
    );
}

/// A git or jj user's `HEAD~1`, `main^` or `::main` was read as lifeos syntax: `HEAD`
/// got "did you mean v1?", and `main~1` parsed as a difference with the commits whose id
/// starts with 1. Each is now refused with the lifeos spelling, by every verb that takes
/// a revision, and the lifeos spelling works.
#[test]
fn git_and_jj_revision_spellings_are_answered_with_the_lifeos_ones() {
    let repo = repo(false);
    let d = repo.path();
    for i in 0..3 {
        write(d, "a.txt", format!("{i}").as_bytes());
        ok(d, &["commit", "-m", &format!("c{i}")]);
    }
    for (args, lifeos) in [
        (["log", "-r", "HEAD"].as_slice(), "@"),
        (&["log", "-r", "HEAD~1"], "@-"),
        (&["log", "-r", "main~2"], "main--"),
        (&["log", "-r", "::main"], "ancestors(main)"),
        (&["log", "-r", "main::"], "descendants(main)"),
        (&["show", "HEAD^"], "@-"),
        (&["cat", "a.txt", "-r", "main^^"], "main--"),
        (&["diff", "-r", "HEAD~1"], "@-"),
    ] {
        let err = fails(d, args);
        assert!(
            err.contains(&format!("lifeos writes it {lifeos}")),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        log_messages(d, &["-r", "ancestors(main)"]),
        ["c2", "c1", "c0"]
    );
    assert_eq!(ok(d, &["cat", "a.txt", "-r", "main--"]), "0");
    // lifeos's own difference keeps its meaning when it is not git's spelling.
    assert_eq!(log_messages(d, &["-r", "all() ~ ancestors(main-)"]), ["c2"]);
}

/// After a plain amend, fsck said "1 unreachable entries (left by interrupted commands;
/// `lifeos gc` removes them)", and gc then kept the entry: nothing had been interrupted.
#[test]
fn fsck_after_an_amend_blames_no_interruption() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"one");
    write(d, "b.txt", b"b");
    ok(d, &["commit", "-m", "one", "a.txt"]);
    write(d, "a.txt", b"two");
    ok(d, &["commit", "--amend"]);
    let out = ok(d, &["fsck"]);
    assert!(
        out.contains("1 unreachable entry: data no operation refers to")
            && !out.contains("interrupted commands"),
        "{out}"
    );
    assert!(out.contains("no problems found"), "{out}");
}

#[test]
fn unknown_and_ambiguous_revisions_list_candidates() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a", b"a");
    ok(d, &["commit", "-m", "one"]);
    ok(d, &["branch", "create", "vacation"]);
    let err = fails(d, &["log", "-r", "vacaton"]);
    assert!(err.contains("did you mean vacation"), "{err}");
    // Make many commits so some pair shares a first hex digit.
    for i in 0..20 {
        write(d, "a", format!("{i}").as_bytes());
        ok(d, &["commit", "-m", &format!("c{i}")]);
    }
    let ids: Vec<String> = json(d, &["log"])["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["commit"].as_str().unwrap().to_string())
        .collect();
    let mut by_digit = std::collections::HashMap::<char, Vec<&String>>::new();
    for id in &ids {
        by_digit
            .entry(id.chars().next().unwrap())
            .or_default()
            .push(id);
    }
    // 21 ids over 16 first hex digits: at least two share one.
    let (digit, clash) = by_digit.iter().find(|(_, v)| v.len() > 1).unwrap();
    let err = fails(d, &["show", &digit.to_string()]);
    assert!(err.contains("ambiguous"), "{err}");
    for id in clash {
        assert!(err.contains(&id[..12]), "candidate {id} listed: {err}");
    }
    assert!(err.contains("hint:"), "{err}");
    let err = fails(d, &["log", "-r", "ancestors(@"]);
    assert!(err.contains("column 12"), "{err}");
}

#[test]
fn undo_steps_back_redo_steps_forward_op_restore_and_op_log() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"1\n");
    ok(d, &["commit", "-m", "one"]);
    write(d, "a.txt", b"2\n");
    ok(d, &["commit", "-m", "two"]);
    let oplog = json(d, &["op", "log"]);
    assert_eq!(oplog["schema"], "lifeos.oplog.v1");
    let ops = oplog["operations"].as_array().unwrap();
    assert_eq!(ops.len(), 3);
    let types: Vec<&str> = ops[0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    // A small commit also indexes what it recorded, in the same operation.
    assert_eq!(
        types,
        ["commit.created", "branch.moved", "content.extracted"]
    );
    assert_eq!(ops[2]["events"][0]["type"], "repo.initialized");
    let first_op = ops[2]["id"].as_str().unwrap().to_string();

    // undo: the commit is gone from the branch and the folder follows.
    ok(d, &["undo"]);
    assert_eq!(log_messages(d, &[]), ["one"]);
    assert_eq!(std::fs::read(d.join("a.txt")).unwrap(), b"1\n");
    // Undo again steps further back: the first commit goes too.
    ok(d, &["undo"]);
    let err = fails(d, &["log"]);
    assert!(err.contains("no commits yet"), "{err}");
    assert!(!d.join("a.txt").exists());
    // redo reverts the last undo, and redo again the one before it.
    ok(d, &["redo"]);
    assert_eq!(log_messages(d, &[]), ["one"]);
    assert_eq!(std::fs::read(d.join("a.txt")).unwrap(), b"1\n");
    ok(d, &["redo"]);
    assert_eq!(log_messages(d, &[]), ["two", "one"]);
    assert_eq!(std::fs::read(d.join("a.txt")).unwrap(), b"2\n");
    let err = fails(d, &["redo"]);
    assert!(err.contains("nothing to redo"), "{err}");
    // Undo after a redo steps back from where the redo left the repository.
    ok(d, &["undo"]);
    assert_eq!(log_messages(d, &[]), ["one"]);
    ok(d, &["redo"]);
    assert_eq!(log_messages(d, &[]), ["two", "one"]);
    // A new change ends what can be redone.
    ok(d, &["undo"]);
    ok(d, &["tag", "create", "v1"]);
    let err = fails(d, &["redo"]);
    assert!(err.contains("nothing to redo"), "{err}");
    ok(d, &["undo"]);
    ok(d, &["redo"]);
    assert_eq!(log_messages(d, &[]), ["one"]);
    assert_eq!(json(d, &["tag", "list"])["tags"][0]["name"], "v1");
    // Nothing was deleted: the op log has grown, and it names each step.
    let ops = json(d, &["op", "log"]);
    let ops = ops["operations"].as_array().unwrap();
    assert_eq!(ops.len(), 13);
    assert_eq!(ops[0]["events"][0]["type"], "operation.redone");
    assert_eq!(ops[1]["events"][0]["type"], "operation.undone");
    assert_eq!(ops[0]["events"][0]["operation"], ops[1]["id"]);
    ok(d, &["redo", "--help"]);
    ok(d, &["undo"]);
    ok(d, &["redo"]);
    ok(d, &["undo"]);
    ok(d, &["undo"]);
    ok(d, &["redo"]);
    ok(d, &["redo"]);
    assert_eq!(log_messages(d, &[]), ["one"]);
    assert_eq!(json(d, &["tag", "list"])["tags"][0]["name"], "v1");
    // op restore to the very first operation: no commits at all.
    ok(d, &["op", "restore", &first_op[..12]]);
    let err = fails(d, &["log"]);
    assert!(err.contains("no commits yet"), "{err}");
    assert!(!d.join("a.txt").exists());
    ok(d, &["undo"]);
    assert_eq!(log_messages(d, &[]), ["one"]);
    // The first operation cannot be undone.
    let fresh = tempfile::tempdir().unwrap();
    ok(fresh.path(), &["init"]);
    let err = fails(fresh.path(), &["undo"]);
    assert!(err.contains("nothing to undo"), "{err}");
}

#[test]
fn checkout_and_restore_refuse_to_clobber_and_force_keeps_a_copy() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"committed\n");
    ok(d, &["commit", "-m", "one"]);
    ok(d, &["branch", "create", "other"]);
    write(d, "a.txt", b"precious uncommitted work\n");
    let err = fails(d, &["checkout", "other"]);
    assert!(
        err.contains("uncommitted changes") && err.contains("a.txt") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(d.join("a.txt")).unwrap(),
        b"precious uncommitted work\n"
    );
    let err = fails(d, &["restore", "a.txt", "-r", "@"]);
    assert!(err.contains("uncommitted changes"), "{err}");
    let out = ok(d, &["checkout", "other", "--force"]);
    assert_eq!(std::fs::read(d.join("a.txt")).unwrap(), b"committed\n");
    let saved = out
        .split_whitespace()
        .nth(4)
        .unwrap()
        .trim_end_matches(|c: char| !c.is_ascii_hexdigit())
        .to_string();
    assert_eq!(
        ok(d, &["cat", "a.txt", "-r", &saved]),
        "precious uncommitted work\n"
    );
    assert_eq!(json(d, &["fsck"])["ok"], true);
}

#[test]
fn time_travel_with_at() {
    let repo = tempfile::tempdir().unwrap();
    let d = repo.path();
    TestEnv::at(d).now("2026-10-01T09:00:00Z").ok(&["init"]);
    write(d, "notes/plan.md", b"launch in november\n");
    write(d, "photos/a.jpg", b"jpeg 1");
    TestEnv::at(d)
        .now("2026-10-01T10:00:00Z")
        .ok(&["commit", "-m", "plan"]);
    write(d, "notes/plan.md", b"launch in december\n");
    std::fs::remove_file(d.join("photos/a.jpg")).unwrap();
    TestEnv::at(d)
        .now("2026-11-02T10:00:00Z")
        .ok(&["commit", "-m", "delay"]);
    TestEnv::at(d)
        .now("2026-11-03T10:00:00Z")
        .ok(&["branch", "create", "later"]);
    let now = "2026-11-04T12:00:00Z";
    let later = TestEnv::at(d).now(now);
    let out = later.run(&["cat", "notes/plan.md", "--at", "2026-11-01 14:00"]);
    assert_eq!(out.stdout, b"launch in november\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("as of operation"),
        "says which operation was used: {err}"
    );
    assert_eq!(
        later
            .run(&["cat", "notes/plan.md", "--at", "yesterday"])
            .stdout,
        b"launch in december\n"
    );
    assert_eq!(
        later
            .run(&["cat", "notes/plan.md", "--at", "3 days ago"])
            .stdout,
        b"launch in november\n"
    );
    let ls = String::from_utf8(later.run(&["ls", "--at", "2026-10-15", "photos/"]).stdout).unwrap();
    assert!(ls.contains("photos/a.jpg"), "{ls}");
    let log = String::from_utf8(later.run(&["log", "--at", "2 days ago"]).stdout).unwrap();
    assert!(log.contains("delay") && log.contains("plan"), "{log}");
    let branches =
        String::from_utf8(later.run(&["branch", "list", "--at", "2 days ago"]).stdout).unwrap();
    assert!(!branches.contains("later"), "{branches}");
    // An operation id works as WHEN.
    let ops = json(d, &["op", "log"]);
    let plan_op = ops["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["description"] == "commit: plan")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        later
            .run(&["cat", "notes/plan.md", "--at", &plan_op[..10]])
            .stdout,
        b"launch in november\n"
    );
    // Before the first operation, or in the future: a clear error.
    let err = String::from_utf8(later.run(&["log", "--at", "2026-09-01"]).stderr).unwrap();
    assert!(err.contains("before the repository existed"), "{err}");
    let err = String::from_utf8(later.run(&["log", "--at", "2027-01-01"]).stderr).unwrap();
    assert!(err.contains("in the future"), "{err}");
    // restore PATH --at brings the old version back into the folder as a new commit.
    later.ok(&["restore", "notes/plan.md", "--at", "last monday"]);
    // 2026-11-04 is a Wednesday: last monday is 2026-11-02 00:00, before "delay".
    assert_eq!(
        std::fs::read(d.join("notes/plan.md")).unwrap(),
        b"launch in november\n"
    );
    let log = json(d, &["log", "-n", "1"]);
    assert!(log["commits"][0]["message"]
        .as_str()
        .unwrap()
        .starts_with("restore notes/plan.md from"));
    let ops = json(d, &["op", "log", "-n", "1"]);
    assert!(ops["operations"][0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "path.restored"));
    assert_eq!(json(d, &["status"])["clean"], true);
}

#[test]
fn reindex_after_deleting_the_catalog_gives_the_same_answers() {
    let repo = tempfile::tempdir().unwrap();
    let d = repo.path();
    TestEnv::at(d).now("2026-10-01T09:00:00Z").ok(&["init"]);
    for day in 1..=9 {
        write(d, "diary.md", format!("day {day}\n").as_bytes());
        TestEnv::at(d)
            .now(&format!("2026-10-0{day}T12:00:00Z"))
            .ok(&["commit", "-m", &format!("day {day}")]);
    }
    let now = "2026-10-20T00:00:00Z";
    let questions: Vec<Vec<&str>> = vec![
        vec!["cat", "diary.md", "--at", "2026-10-05 13:00"],
        vec!["log", "--at", "2026-10-07", "--json"],
        vec!["ls", "--at", "2026-10-03 12:00:00", "--json"],
        vec!["branch", "list", "--at", "2026-10-02", "--json"],
    ];
    let answers = |d: &Path| -> Vec<Vec<u8>> {
        questions
            .iter()
            .map(|q| TestEnv::at(d).now(now).run(q).stdout)
            .collect()
    };
    let before = answers(d);
    assert_eq!(before[0], b"day 5\n");
    std::fs::remove_file(d.join(".lifeos/catalog.sqlite")).unwrap();
    let _ = std::fs::remove_file(d.join(".lifeos/catalog.sqlite-wal"));
    let _ = std::fs::remove_file(d.join(".lifeos/catalog.sqlite-shm"));
    ok(d, &["reindex"]);
    assert_eq!(answers(d), before);
}

#[test]
fn merge_takes_one_sided_changes_merges_text_and_records_conflicts() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "shared.md", b"line 1\nline 2\nline 3\nline 4\nline 5\n");
    write(d, "ours-only.txt", b"base\n");
    write(d, "theirs-only.txt", b"base\n");
    write(d, "both.txt", b"base\n");
    write(d, "photo.bin", &noise(1000, 1));
    ok(d, &["commit", "-m", "base"]);
    ok(d, &["branch", "create", "trip"]);
    // Ours (main).
    write(
        d,
        "shared.md",
        b"line 1 (main)\nline 2\nline 3\nline 4\nline 5\n",
    );
    write(d, "ours-only.txt", b"ours\n");
    write(d, "both.txt", b"main says\n");
    write(d, "photo.bin", &noise(1000, 2));
    ok(d, &["commit", "-m", "main work"]);
    // Theirs (trip).
    ok(d, &["checkout", "trip"]);
    write(
        d,
        "shared.md",
        b"line 1\nline 2\nline 3\nline 4\nline 5 (trip)\n",
    );
    write(d, "theirs-only.txt", b"theirs\n");
    write(d, "both.txt", b"trip says\n");
    write(d, "photo.bin", &noise(1000, 3));
    write(d, "added-on-trip.txt", b"new\n");
    ok(d, &["commit", "-m", "trip work"]);
    ok(d, &["checkout", "main"]);
    let out = run(d, &["merge", "trip"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "conflicts exit 1: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(d.join("shared.md")).unwrap(),
        b"line 1 (main)\nline 2\nline 3\nline 4\nline 5 (trip)\n"
    );
    assert_eq!(std::fs::read(d.join("ours-only.txt")).unwrap(), b"ours\n");
    assert_eq!(
        std::fs::read(d.join("theirs-only.txt")).unwrap(),
        b"theirs\n"
    );
    assert_eq!(
        std::fs::read(d.join("added-on-trip.txt")).unwrap(),
        b"new\n"
    );
    let both = String::from_utf8(std::fs::read(d.join("both.txt")).unwrap()).unwrap();
    assert!(
        both.contains("<<<<<<<") && both.contains("main says") && both.contains("trip says"),
        "{both}"
    );
    assert_eq!(
        std::fs::read(d.join("photo.bin")).unwrap(),
        noise(1000, 2),
        "binary conflict keeps ours in the folder"
    );
    // Recorded in the commit with all three versions; shown by status and log.
    let log = json(d, &["log", "-n", "1"]);
    assert_eq!(
        log["commits"][0]["conflicts"],
        serde_json::json!(["both.txt", "photo.bin"])
    );
    assert_eq!(log["commits"][0]["parents"].as_array().unwrap().len(), 2);
    let st = json(d, &["status"]);
    assert_eq!(st["conflicts"].as_array().unwrap().len(), 2);
    let theirs = st["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "photo.bin")
        .unwrap()["theirs"]
        .as_str()
        .unwrap()
        .to_string();
    let trip_photo = json(d, &["ls", "photo.bin", "-r", "trip"])["entries"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(theirs, trip_photo, "their version is kept");
    assert!(ok(d, &["log", "-n", "1"]).contains("conflict (2)"));
    // Resolving one by committing a new version leaves the other recorded.
    write(d, "both.txt", b"both agree\n");
    ok(d, &["commit", "-m", "resolve both.txt"]);
    let log = json(d, &["log", "-n", "1"]);
    assert_eq!(
        log["commits"][0]["conflicts"],
        serde_json::json!(["photo.bin"])
    );
    write(d, "photo.bin", &noise(1000, 3));
    ok(d, &["commit", "-m", "take theirs"]);
    assert_eq!(
        json(d, &["log", "-n", "1"])["commits"][0]["conflicts"],
        serde_json::json!([])
    );
    assert!(json(d, &["status"])["conflicts"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn revsets_select_commits() {
    let repo = tempfile::tempdir().unwrap();
    let d = repo.path();
    TestEnv::at(d).now("2026-10-01T09:00:00Z").ok(&["init"]);
    write(d, "photos/a.jpg", b"a");
    TestEnv::at(d)
        .now("2026-10-02T09:00:00Z")
        .with("LIFEOS_AUTHOR_NAME", "Ann")
        .run(&["commit", "-m", "add photo"]);
    write(d, "notes/x.md", b"x");
    TestEnv::at(d)
        .now("2026-10-05T09:00:00Z")
        .with("LIFEOS_AUTHOR_NAME", "Bob")
        .run(&["commit", "-m", "budget note"]);
    TestEnv::at(d)
        .now("2026-10-06T09:00:00Z")
        .ok(&["branch", "create", "old", "-r", "@-"]);
    write(d, "photos/b.jpg", b"b");
    TestEnv::at(d)
        .now("2026-10-09T09:00:00Z")
        .with("LIFEOS_AUTHOR_NAME", "Ann")
        .run(&["commit", "-m", "second photo"]);
    assert_eq!(
        log_messages(d, &["-r", "author(ann)"]),
        ["second photo", "add photo"]
    );
    assert_eq!(
        log_messages(d, &["-r", "description(BUDGET)"]),
        ["budget note"]
    );
    assert_eq!(
        log_messages(d, &["-r", "files(photos/*)"]),
        ["second photo", "add photo"]
    );
    assert_eq!(
        log_messages(d, &["-r", "old..@"]),
        ["second photo", "budget note"]
    );
    assert_eq!(
        log_messages(d, &["-r", "date(after: 2026-10-03, before: 2026-10-08)"]),
        ["budget note"]
    );
    assert_eq!(
        log_messages(d, &["-r", "ancestors(@-) & author(ann)"]),
        ["add photo"]
    );
    assert_eq!(
        log_messages(d, &["-r", "old | @"]),
        ["second photo", "add photo"]
    );
}

#[test]
fn two_concurrent_writers_lose_no_operation() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "base"]);
    let writer = |name: &'static str, dir: std::path::PathBuf| {
        std::thread::spawn(move || {
            for i in 0..100 {
                let out = TestEnv::at(&dir).run(&[
                    "commit",
                    "--allow-empty",
                    "-m",
                    &format!("{name} {i}"),
                ]);
                assert!(
                    out.status.success(),
                    "{name} {i}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        })
    };
    let a = writer("w1", d.to_path_buf());
    let b = writer("w2", d.to_path_buf());
    a.join().unwrap();
    b.join().unwrap();
    // Every commit is recorded by an operation reachable from the op log...
    let ops = json(d, &["op", "log"]);
    let created: std::collections::HashSet<String> = ops["operations"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| o["events"].as_array().unwrap().clone())
        .filter(|e| e["type"] == "commit.created")
        .map(|e| e["commit"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(created.len(), 201, "every commit was recorded");
    // ...and stays visible: all of them are in the history reachable from the view.
    let all = json(d, &["log", "-r", "all()"]);
    let msgs: std::collections::HashSet<String> = all["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message"].as_str().unwrap().to_string())
        .collect();
    for w in ["w1", "w2"] {
        for i in 0..100 {
            assert!(msgs.contains(&format!("{w} {i}")), "{w} {i} missing");
        }
    }
    assert_eq!(json(d, &["fsck"])["ok"], true);
}

#[test]
fn kill_during_history_operations_keeps_the_op_log_consistent() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "base"]);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..20 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let args: Vec<String> = match round % 4 {
            0 => vec!["branch".into(), "create".into(), format!("b{round}")],
            1 => vec!["tag".into(), "create".into(), format!("t{round}")],
            2 => vec!["describe".into(), "-m".into(), format!("message {round}")],
            _ => vec!["undo".into()],
        };
        let mut child = TestEnv::at(d)
            .command(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(rng % 40));
        let _ = child.kill();
        let _ = child.wait();
        let ops = json(d, &["op", "log"]);
        assert!(ops["operations"].as_array().unwrap().len() >= 2);
        let heads = std::fs::read_dir(d.join(".lifeos/op_heads"))
            .unwrap()
            .count();
        assert_eq!(heads, 1, "after loading, one op head remains");
        assert_eq!(json(d, &["fsck"])["ok"], true);
    }
}

/// Publishes one operation per name, each creating that branch at `@`, all started from
/// the same operation (as concurrent writers would), `t` ms after it: several op heads.
fn concurrent_branch_creations(d: &Path, names: &[(&str, i64)]) {
    use lifeos_vcs::object::Event;
    let r = lifeos_vcs::Repo::discover(d).unwrap();
    let head = r.head().unwrap();
    let at = head.view.at_commit().unwrap();
    for (name, t) in names {
        let mut view = head.view.clone();
        view.set_branch(name, Some(at));
        let tx = r.store().transaction().unwrap();
        let ev = vec![Event::BranchMoved {
            name: (*name).into(),
            from: None,
            to: Some(at),
        }];
        r.publish(
            tx,
            &[head.id],
            view,
            &format!("branch create {name}"),
            ev,
            head.op.end_ms + t,
        )
        .unwrap();
    }
    assert_eq!(
        std::fs::read_dir(d.join(".lifeos/op_heads"))
            .unwrap()
            .count(),
        names.len()
    );
}

fn branch_names(d: &Path) -> Vec<String> {
    json(d, &["branch", "list"])["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn undo_after_concurrent_operations_undoes_the_newest() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "base"]);
    concurrent_branch_creations(d, &[("first", 1_000), ("second", 2_000)]);
    // The next command merges them: both branches are there.
    assert_eq!(branch_names(d), ["first", "main", "second"]);
    let ops = json(d, &["op", "log", "-n", "1"]);
    assert_eq!(
        ops["operations"][0]["events"][0]["type"],
        "operations.merged"
    );
    // Undo undoes the newest of the concurrent operations, undo again the other one,
    // and redo brings them back one by one.
    ok(d, &["undo"]);
    assert_eq!(branch_names(d), ["first", "main"]);
    ok(d, &["undo"]);
    assert_eq!(branch_names(d), ["main"]);
    ok(d, &["redo"]);
    assert_eq!(branch_names(d), ["first", "main"]);
    ok(d, &["redo"]);
    assert_eq!(branch_names(d), ["first", "main", "second"]);
}

/// With three or more concurrent operations, undo reverted two of them.
#[test]
fn undo_after_three_concurrent_operations_undoes_only_the_newest() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "base"]);
    concurrent_branch_creations(d, &[("first", 1_000), ("second", 2_000), ("third", 3_000)]);
    assert_eq!(branch_names(d), ["first", "main", "second", "third"]);
    ok(d, &["undo"]);
    assert_eq!(branch_names(d), ["first", "main", "second"]);
    ok(d, &["undo"]);
    assert_eq!(branch_names(d), ["first", "main"]);
    ok(d, &["undo"]);
    assert_eq!(branch_names(d), ["main"]);
    ok(d, &["redo"]);
    ok(d, &["redo"]);
    assert_eq!(branch_names(d), ["first", "main", "second"]);
    ok(d, &["redo"]);
    assert_eq!(branch_names(d), ["first", "main", "second", "third"]);
}

/// `branch rename`: one operation; the target stays, the checked-out branch follows, and
/// `undo` brings the old name back.
#[test]
fn a_branch_is_renamed_in_one_operation_and_the_folder_follows() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "base"]);
    ok(d, &["branch", "create", "side"]);
    let before = json(d, &["branch", "list"]);
    ok(d, &["branch", "rename", "main", "trunk"]);
    assert_eq!(branch_names(d), ["side", "trunk"]);
    let after = json(d, &["branch", "list"]);
    let trunk = after["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "trunk")
        .unwrap()
        .clone();
    assert_eq!(trunk["current"], true, "{after}");
    assert_eq!(trunk["commit"], before["branches"][0]["commit"], "{before}");
    write(d, "b.txt", b"b");
    ok(d, &["commit", "-m", "on trunk"]);
    assert_eq!(log_messages(d, &["-r", "trunk"]), ["on trunk"]);
    assert_eq!(log_messages(d, &[]), ["on trunk", "base"]);
    let ops = json(d, &["op", "log", "-n", "2"]);
    let rename = &ops["operations"][1];
    let types: Vec<_> = rename["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["branch.moved", "branch.moved"], "{rename}");
    for (args, says) in [
        (["branch", "rename", "trunk", "side"], "already exists"),
        (
            ["branch", "rename", "nope", "x"],
            "no branch named \"nope\"",
        ),
    ] {
        let e = fails(d, &args);
        assert!(e.contains(says), "{args:?}: {e}");
    }
    // The operation before the rename still names the old branch.
    let before_rename = json(d, &["op", "log", "-n", "3"])["operations"][2]["id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(d, &["op", "restore", &before_rename[..12]]);
    assert_eq!(branch_names(d), ["main", "side"]);
}

/// The bash completion script completes commands, and branch names where a revision or a
/// branch is expected; the manual pages are generated from the same definitions.
#[test]
fn bash_completes_commands_and_branch_names_and_man_pages_are_written() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    ok(d, &["commit", "-m", "base"]);
    ok(d, &["branch", "create", "feature/x"]);
    let outside = tempfile::tempdir().unwrap();
    let script = outside.path().join("lifeos.bash");
    std::fs::write(&script, ok(d, &["completions", "bash"])).unwrap();
    let path = format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let complete = |words: &[&str]| -> String {
        let line = format!(
            "source {}; COMP_WORDS=({}); COMP_CWORD={}; _lifeos_with_refs lifeos '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            words.join(" "),
            words.len() - 1,
            words[words.len() - 1],
            words[words.len() - 2],
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &line])
            .current_dir(d)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let commands = complete(&["lifeos", "chec"]);
    assert_eq!(commands.trim(), "checkout", "{commands}");
    let branches = complete(&["lifeos", "checkout", "fe"]);
    assert_eq!(branches.trim(), "feature/x", "{branches}");
    let revisions = complete(&["lifeos", "log", "-r", ""]);
    assert!(
        revisions.contains("feature/x") && revisions.contains("main"),
        "{revisions}"
    );
    for shell in ["zsh", "fish", "powershell"] {
        assert!(ok(d, &["completions", shell]).contains("lifeos"), "{shell}");
    }
    let page = ok(d, &["man"]);
    assert!(
        page.contains(".TH lifeos 1") && page.contains("commit"),
        "{page}"
    );
    let dir = outside.path().join("man1");
    ok(d, &["man", "--dir", dir.to_str().unwrap()]);
    let commit = std::fs::read_to_string(dir.join("lifeos-commit.1")).unwrap();
    assert!(commit.contains(".SH NAME"), "{commit}");
    // The README's set-up installs them for a user: the bash script is the one that
    // completed above.
    let data = outside.path().join("data");
    let out = std::process::Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install-shell.sh"))
        .env("XDG_DATA_HOME", &data)
        .env("LIFEOS_BIN", bin())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(data.join("man/man1/lifeos-log.1").is_file());
    assert!(data.join("zsh/site-functions/_lifeos").is_file());
    assert!(data.join("fish/vendor_completions.d/lifeos.fish").is_file());
    let installed = data.join("bash-completion/completions/lifeos");
    assert_eq!(
        std::fs::read_to_string(&installed).unwrap(),
        std::fs::read_to_string(&script).unwrap()
    );
    // Help and man pages end with examples (every command's are checked in the CLI crate).
    assert!(commit.contains("lifeos commit \\-\\-amend"), "{commit}");
    let help = ok(d, &["branch", "rename", "--help"]);
    assert!(
        help.contains("Examples:\n  lifeos branch rename trip holiday"),
        "{help}"
    );
}

/// `commit` without -m asks an editor (on a list of the changes; an empty message records
/// nothing), `commit PATH...` records only those paths, and `--amend` rewrites `@` with the
/// same change id.
#[test]
fn commit_messages_from_an_editor_partial_commits_and_amend() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a1");
    write(d, "b.txt", b"b1");
    ok(d, &["commit", "-m", "base"]);
    write(d, "a.txt", b"a2");
    write(d, "notes/b.txt", b"new");
    let outside = tempfile::tempdir().unwrap();
    let seen = outside.path().join("template");
    // An editor that keeps the template aside and writes a message above it.
    let editor = outside.path().join("edit.sh");
    std::fs::write(
        &editor,
        format!(
            "#!/bin/sh\ncp \"$1\" {}\n{{ echo 'Edited a'; echo; echo 'with a body'; cat {}; }} > \"$1\"\n",
            seen.display(),
            seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = TestEnv::at(d)
        .with("LIFEOS_EDITOR", &editor)
        .run(&["commit", "a.txt"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let template = std::fs::read_to_string(&seen).unwrap();
    assert!(template.contains("#   M a.txt"), "{template}");
    assert!(
        !template.contains("notes/b.txt"),
        "only the paths asked for: {template}"
    );
    assert_eq!(log_messages(d, &[]), ["Edited a\n\nwith a body", "base"]);
    // Only a.txt was recorded; the new file is still uncommitted.
    let status = json(d, &["status"]);
    let left: Vec<_> = status["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["notes/b.txt"], "{status}");
    assert_eq!(ok(d, &["cat", "a.txt"]), "a2");
    let e = fails(d, &["commit", "nothing/here", "-m", "x"]);
    assert!(e.contains("nothing/here"), "{e}");

    // An empty message records nothing.
    let out = TestEnv::at(d)
        .with("LIFEOS_EDITOR", "true")
        .run(&["commit"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing was recorded"));
    assert_eq!(log_messages(d, &[]).len(), 2);

    // --amend: the folder's content into @, same change id and parent, new message.
    let before = json(d, &["log", "-n", "1"])["commits"][0].clone();
    ok(d, &["commit", "--amend", "-m", "Edited a, added notes"]);
    let after = json(d, &["log", "-n", "1"])["commits"][0].clone();
    assert_eq!(after["change_id"], before["change_id"]);
    assert_eq!(after["parents"], before["parents"]);
    assert_ne!(after["commit"], before["commit"]);
    assert_eq!(log_messages(d, &[]), ["Edited a, added notes", "base"]);
    assert!(json(d, &["status"])["clean"].as_bool().unwrap());
    // Without -m, it keeps the message.
    write(d, "a.txt", b"a3");
    ok(d, &["commit", "--amend"]);
    assert_eq!(log_messages(d, &[]), ["Edited a, added notes", "base"]);
    assert_eq!(ok(d, &["cat", "a.txt"]), "a3");
    let fresh = tempfile::tempdir().unwrap();
    ok(fresh.path(), &["init"]);
    let e = fails(fresh.path(), &["commit", "--amend", "-m", "x"]);
    assert!(e.contains("nothing to amend"), "{e}");
}

/// Revsets a jj or git user reaches for: difference and complement, descendants, heads,
/// roots and latest, on a history with two branches.
#[test]
fn revsets_difference_descendants_heads_roots_and_latest() {
    let repo = repo(false);
    let d = repo.path();
    // One minute apart, so that `latest` has an order to find.
    for (i, m) in ["base", "a1", "a2"].into_iter().enumerate() {
        write(d, "f.txt", m.as_bytes());
        TestEnv::at(d)
            .now(&format!("2026-11-01T10:0{i}:00Z"))
            .ok(&["commit", "-m", m]);
        if m == "base" {
            ok(d, &["branch", "create", "side"]);
        }
    }
    ok(d, &["checkout", "side"]);
    write(d, "g.txt", b"s1");
    TestEnv::at(d)
        .now("2026-11-01T10:05:00Z")
        .ok(&["commit", "-m", "s1"]);
    let set = |r: &str| -> Vec<String> {
        let mut m = log_messages(d, &["-r", r]);
        m.sort();
        m
    };
    assert_eq!(set("all() ~ ancestors(side)"), ["a1", "a2"]);
    assert_eq!(set("~ancestors(main)"), ["s1"]);
    assert_eq!(set("descendants(main-)"), ["a1", "a2"]);
    assert_eq!(
        set("descendants(ancestors(side) ~ side)"),
        ["a1", "a2", "base", "s1"]
    );
    assert_eq!(set("heads(all())"), ["a2", "s1"]);
    assert_eq!(set("roots(all() ~ ancestors(side))"), ["a1"]);
    assert_eq!(set("roots(all())"), ["base"]);
    assert_eq!(set("latest(all(), 1)"), ["s1"]);
    assert_eq!(set("latest(ancestors(main), 2)"), ["a1", "a2"]);
    let e = fails(d, &["log", "-r", "latest(all())"]);
    assert!(e.contains("count"), "{e}");
}

/// `log --graph` draws branches beside each other, a merge branching off and the two
/// lines joining where they began, as jj does.
#[test]
fn log_graph_draws_branches_and_merges() {
    let repo = repo(false);
    let d = repo.path();
    let commit = |when: &str, m: &str| {
        write(d, "f.txt", m.as_bytes());
        TestEnv::at(d).now(when).ok(&["commit", "-m", m]);
    };
    commit("2026-11-01T10:00:00Z", "base");
    ok(d, &["branch", "create", "side"]);
    commit("2026-11-01T10:01:00Z", "a1");
    commit("2026-11-01T10:02:00Z", "a2");
    ok(d, &["checkout", "side"]);
    write(d, "g.txt", b"s");
    TestEnv::at(d)
        .now("2026-11-01T10:03:00Z")
        .ok(&["commit", "-m", "s1"]);
    ok(d, &["checkout", "main"]);
    TestEnv::at(d)
        .now("2026-11-01T10:04:00Z")
        .ok(&["merge", "side"]);
    commit("2026-11-01T10:05:00Z", "after");
    let out = ok(d, &["log", "--graph", "--color", "never"]);
    // The graph part of each line: what comes before the change id or the message.
    let shape: Vec<String> = out
        .lines()
        .map(|l| {
            l.chars()
                .take_while(|c| !c.is_alphanumeric())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect();
    assert_eq!(
        shape,
        [
            "@",
            "│",
            "○",
            "│",
            "├─╮",
            "│ ○",
            "│ │",
            "○ │",
            "│ │",
            "○ │",
            "│ │",
            "├─╯",
            "○",
            ""
        ],
        "{out}"
    );
    assert!(out.contains("merge side into main"), "{out}");
    // --all shows every branch; without --graph the lines are as before.
    assert_eq!(ok(d, &["log", "--all", "--graph", "--color", "never"]), out);
    let plain = ok(d, &["log", "--color", "never"]);
    assert!(plain.starts_with("@ "), "{plain}");
    assert!(!plain.contains('│'), "{plain}");
    // A limit reads the commits above the merge one by one, and evaluates the whole
    // revset beyond it: the same commits either way.
    let ids = |args: &[&str]| -> Vec<String> {
        json(d, args)["commits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["commit"].as_str().unwrap().to_string())
            .collect()
    };
    let all = ids(&["log"]);
    let f = ids(&["log", "f.txt"]);
    assert_eq!(all.len(), 6);
    assert_eq!(f.len(), 4);
    for n in 1..=7 {
        let limit = n.to_string();
        assert_eq!(ids(&["log", "-n", &limit]), all[..n.min(6)]);
        assert_eq!(ids(&["log", "-r", "..@", "-n", &limit]), all[..n.min(6)]);
        assert_eq!(ids(&["log", "f.txt", "-n", &limit]), f[..n.min(4)]);
    }
}

/// `-q` mutes reports of what was done (never answers, never JSON), `-v` says how long a
/// command took and where the repository is, and long output goes through the pager on
/// a terminal only.
#[test]
fn quiet_verbose_and_the_pager() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.txt", b"a");
    let out = run(d, &["-q", "commit", "-m", "one"]);
    assert!(out.status.success());
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(log_messages(d, &[]), ["one"]);
    assert!(ok(d, &["-q", "log"]).contains("one"));
    let j = json(d, &["-q", "commit", "-m", "two", "--allow-empty"]);
    assert_eq!(j["schema"], "lifeos.commit.v1", "{j}");
    let out = run(d, &["-v", "status"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("lifeos: done in") && err.contains("at operation "),
        "{err}"
    );
    assert!(fails(d, &["-q", "-v", "status"]).contains("cannot be used with"));

    // On a terminal (script gives the command one), log goes through the pager.
    let through = |extra: &str| -> String {
        let line = format!("{} {extra} log --color never", bin().display());
        let out = std::process::Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .current_dir(d)
            .env("LIFEOS_PAGER", "sed 's/^/paged: /'")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let paged = through("");
    assert!(paged.contains("paged:") && paged.contains("two"), "{paged}");
    let plain = through("--no-pager");
    assert!(
        !plain.contains("paged:") && plain.contains("two"),
        "{plain}"
    );
    // Not on a terminal: never paged.
    let piped = TestEnv::at(d)
        .with("LIFEOS_PAGER", "sed 's/^/paged: /'")
        .run(&["log"]);
    assert!(!String::from_utf8_lossy(&piped.stdout).contains("paged:"));
}

/// `lifeos config`: the repository's settings over the user's, checked keys and values,
/// and settings that take effect (the author of commits, the editor).
#[test]
fn config_sets_gets_and_lists_settings_that_take_effect() {
    let repo = repo(false);
    let d = repo.path();
    let home = tempfile::tempdir().unwrap();
    let user = TestEnv::at(d)
        .with("XDG_CONFIG_HOME", home.path())
        .without("LIFEOS_AUTHOR_NAME")
        .without("LIFEOS_AUTHOR_EMAIL")
        .without("LIFEOS_EDITOR");
    let lifeos = |args: &[&str]| user.run(args);
    let out = |args: &[&str]| {
        let o = lifeos(args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    out(&["config", "set", "user.name", "Ann Lee", "--user"]);
    out(&["config", "set", "user.email", "ann@home.example", "--user"]);
    out(&["config", "set", "user.email", "ann@work.example"]);
    assert_eq!(out(&["config", "get", "user.email"]), "ann@work.example\n");
    assert_eq!(
        out(&["config", "get", "user.email", "--user"]),
        "ann@home.example\n"
    );
    let list = out(&["config", "list"]);
    assert!(list.contains("user.name = \"Ann Lee\"  (user)"), "{list}");
    assert!(
        list.contains("user.email = \"ann@work.example\"  (repository)"),
        "{list}"
    );
    // The store's own settings in .lifeos/config are kept.
    let repo_file = std::fs::read_to_string(d.join(".lifeos/config")).unwrap();
    assert!(
        repo_file.contains("format = ") && repo_file.contains("[chunking]"),
        "{repo_file}"
    );
    // Unknown keys and bad values are errors that say what would be right.
    let e =
        String::from_utf8_lossy(&lifeos(&["config", "set", "ui.pagr", "less"]).stderr).into_owned();
    assert!(e.contains("did you mean ui.pager"), "{e}");
    let e = String::from_utf8_lossy(&lifeos(&["config", "set", "ui.color", "sometimes"]).stderr)
        .into_owned();
    assert!(e.contains("auto, always or never"), "{e}");
    // They take effect: the author of a commit, and the editor.
    write(d, "a.txt", b"a");
    out(&[
        "config",
        "set",
        "ui.editor",
        "sh -c 'echo from the editor > \"$1\"' sh",
    ]);
    out(&["commit"]);
    let c = &json(d, &["log", "-n", "1"])["commits"][0];
    assert_eq!(c["message"], "from the editor", "{c}");
    let o = lifeos(&["log", "-n", "1", "--json"]);
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(c["commits"][0]["author"]["name"], "Ann Lee", "{c}");
    assert_eq!(
        c["commits"][0]["author"]["email"], "ann@work.example",
        "{c}"
    );
    out(&["config", "unset", "user.email"]);
    assert_eq!(out(&["config", "get", "user.email"]), "ann@home.example\n");
    assert_eq!(
        lifeos(&["config", "get", "ui.pager"]).status.code(),
        Some(1)
    );
}

/// `--color` and `ui.color` govern the `error:` and `hint:` prefixes on stderr as they
/// govern stdout; they were coloured by stderr being a terminal alone.
#[test]
fn the_color_setting_governs_error_and_hint_prefixes() {
    let repo = repo(false);
    let d = repo.path();
    let red = "\x1b[1;31merror\x1b[0m: ";
    let err = fails(d, &["--color", "always", "show", "nosuchrev"]);
    assert!(err.starts_with(red), "{err:?}");
    assert!(err.contains("\x1b[1;31mhint\x1b[0m: "), "{err:?}");
    let err = fails(d, &["--color", "never", "show", "nosuchrev"]);
    assert!(err.starts_with("error: "), "{err:?}");
    assert!(!err.contains('\x1b'), "{err:?}");
    // Not a terminal, no flag: plain; the setting turns it on.
    assert!(!fails(d, &["show", "nosuchrev"]).contains('\x1b'));
    ok(d, &["config", "set", "ui.color", "always"]);
    assert!(fails(d, &["show", "nosuchrev"]).starts_with(red));
}

/// `log PATH -n 1` diffed every commit of the history before keeping the first: the
/// path-filtered walk now stops once it has enough (a commit past that point, here one
/// that does not exist, is never read), and it follows files, folders and modes.
#[test]
fn a_path_filtered_log_stops_when_it_has_enough() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "notes/a.md", b"1\n");
    write(d, "photos/p.jpg", b"jpg\n");
    ok(d, &["commit", "-m", "first"]);
    write(d, "notes/a.md", b"2\n");
    ok(d, &["commit", "-m", "second"]);
    std::fs::set_permissions(
        d.join("photos/p.jpg"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    ok(d, &["commit", "-m", "mode"]);
    std::fs::remove_file(d.join("notes/a.md")).unwrap();
    ok(d, &["commit", "-m", "removed"]);
    assert_eq!(log_messages(d, &["notes"]), ["removed", "second", "first"]);
    assert_eq!(
        log_messages(d, &["notes/a.md", "-n", "2"]),
        ["removed", "second"]
    );
    assert_eq!(log_messages(d, &["photos/p.jpg"]), ["mode", "first"]);
    assert_eq!(log_messages(d, &["photos", "-n", "1"]), ["mode"]);
    assert!(log_messages(d, &["elsewhere"]).is_empty());

    let r = lifeos_vcs::Repo::discover(d).unwrap();
    let newest = lifeos_store::Id::from_hex(&rev_id(d, "@")).unwrap();
    let missing = lifeos_store::Id::hash(b"no such commit");
    let ids = [newest, missing];
    assert_eq!(
        r.commits_changing(ids, b"notes", Some(1)).unwrap(),
        [newest]
    );
    assert!(r.commits_changing(ids, b"notes", None).is_err());
}

/// A partial commit reads every changed file but records only some: the stat cache it
/// leaves must not trust the content of the others, which nothing reachable holds (thrown
/// away with the transaction when the partial commit records nothing, collected by gc
/// when it records something). A later commit must read them again.
#[test]
fn a_partial_commit_leaves_no_trusted_content_it_did_not_record() {
    for records_something in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        ok(d, &["init"]);
        write(d, "kept.txt", b"kept\n");
        write(d, "other.txt", b"first\n");
        ok(d, &["commit", "-m", "base"]);
        write(d, "other.txt", b"second version\n");
        // Past the racy window: the partial commit's snapshot trusts what it reads now.
        std::thread::sleep(std::time::Duration::from_millis(200));
        if records_something {
            // kept.txt alone: other.txt's new content is stored, and nothing reaches it.
            write(d, "kept.txt", b"kept, changed\n");
            ok(d, &["commit", "-m", "kept only", "kept.txt"]);
            ok(d, &["gc"]);
        } else {
            // An unchanged path alone: nothing is recorded, nor other.txt's content.
            let out = ok(d, &["commit", "-m", "nothing", "kept.txt"]);
            assert!(out.contains("Nothing changed"), "{out}");
        }
        ok(d, &["commit", "-m", "everything"]);
        assert_eq!(ok(d, &["cat", "other.txt"]), "second version\n");
        let fsck = json(d, &["fsck"]);
        assert_eq!(fsck["ok"], true, "{records_something}: {fsck}");
    }
}
