//! The git bridge against git itself: real histories imported and exported back with
//! identical ids, incremental imports, and the quirks real histories hold.

use crate::common::*;

use std::path::Path;
use std::process::Command;

/// Every ref with what it names, and every commit, sorted.
fn identity(repo: &Path) -> (String, Vec<String>) {
    let refs = git(
        repo,
        &[
            "for-each-ref",
            "--format=%(objectname) %(objecttype) %(refname)",
        ],
    );
    let mut commits: Vec<String> = git(repo, &["rev-list", "--all"])
        .lines()
        .map(str::to_string)
        .collect();
    commits.sort();
    (refs, commits)
}

/// Mirrors `bundle` (in tests/fixtures/git), imports it into a new lifeos repository,
/// exports it to a new bare repository, and checks that git sees the same history.
/// `lifeos status` is clean after the checkout (bats-core tracks
/// `test/.bats/run-logs/.gitkeep` below a folder its own .gitignore ignores: tracked files
/// are never ignored).
fn round_trip(bundle: &str, commits: usize, refs: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/git")
        .join(bundle);
    git(
        t,
        &[
            "clone",
            "-q",
            "--mirror",
            fixture.to_str().unwrap(),
            "src.git",
        ],
    );
    let src = t.join("src.git");
    let lr = t.join("lifeos");
    std::fs::create_dir(&lr).unwrap();
    ok(&lr, &["init"]);

    let first = json(&lr, &["git", "import", src.to_str().unwrap()]);
    assert_eq!(first["published"], true, "{first}");
    assert_eq!(first["commits"], commits, "{first}");
    assert_eq!(first["new_commits"], commits, "{first}");
    assert_eq!(first["refs"], refs, "{first}");
    assert_eq!(first["mismatches"], 0, "{first}");
    // The history takes at most 1.2x git's own packed size (the bundle), and gc keeps it.
    let stored = json(&lr, &["stats"])["stored_bytes"].as_u64().unwrap();
    let bundle = std::fs::metadata(&fixture).unwrap().len();
    assert!(
        stored * 10 <= bundle * 12,
        "stored {stored} bytes, the bundle is {bundle}"
    );
    // (gc rewrites the index as one layer; the checkout and export below read it all.)
    let gc = json(&lr, &["gc"]);
    assert_eq!(gc["objects_removed"], 0, "{gc}");
    let ops = op_count(&lr);

    // Nothing changed: nothing published, and the git map spares reading any commit.
    let again = json(&lr, &["git", "import", src.to_str().unwrap()]);
    assert_eq!(again["published"], false, "{again}");
    assert_eq!(again["new_commits"], 0, "{again}");
    assert_eq!(again["commits"], 0, "{again}");
    assert_eq!(op_count(&lr), ops);
    assert_eq!(json(&lr, &["fsck"])["ok"], true);

    // The folder takes git's HEAD branch: every file, symlink and submodule folder.
    let head = git(&src, &["symbolic-ref", "--short", "HEAD"]);
    ok(&lr, &["checkout", head.trim()]);
    let files = git(&src, &["ls-tree", "-r", "--name-only", "HEAD"]);
    for f in files.lines() {
        assert!(
            lr.join(f).symlink_metadata().is_ok(),
            "{f} is missing after checkout"
        );
    }
    let st = json(&lr, &["status"]);
    assert_eq!(st["clean"], true, "{st}");

    let out = t.join("out.git");
    ok(&lr, &["git", "export", out.to_str().unwrap()]);
    let (src_refs, src_commits) = identity(&src);
    let (out_refs, out_commits) = identity(&out);
    assert_eq!(out_commits.len(), commits);
    assert!(out_refs == src_refs, "refs differ after the round trip");
    assert!(
        out_commits == src_commits,
        "commits differ after the round trip"
    );
    git(&out, &["fsck", "--strict", "--no-progress"]);
    assert_eq!(
        git(&out, &["symbolic-ref", "HEAD"]),
        git(&src, &["symbolic-ref", "HEAD"])
    );
}

#[test]
fn bats_core_round_trips_with_identical_ids() {
    // Merges, signed commits and tags, symlinks, gitlinks, a `change-id` header.
    round_trip("bats-core.bundle", 2618, 746);
}

#[test]
fn gtoolkit_phlow_round_trips_with_identical_ids() {
    // `encoding` headers, messages that are not UTF-8, thousands of tags.
    round_trip("gtoolkit-phlow.bundle", 4409, 2787);
}

/// New commits in git come in with the next import, and only they are new.
#[test]
fn a_second_import_brings_only_new_commits_and_moved_refs() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("work");
    std::fs::create_dir(&w).unwrap();
    git(&w, &["init", "-q", "-b", "main"]);
    let commit = |msg: &str| git_commit(&w, &["--allow-empty-message", "-m", msg]);
    write(&w, "a.txt", b"one\n");
    git(&w, &["add", "a.txt"]);
    commit("one");
    let lr = tmp.path().join("lifeos");
    std::fs::create_dir(&lr).unwrap();
    ok(&lr, &["init"]);
    let first = json(&lr, &["git", "import", w.to_str().unwrap()]);
    assert_eq!(first["new_commits"], 1, "{first}");
    write(&w, "a.txt", b"two\n");
    git(&w, &["add", "a.txt"]);
    commit("two");
    let second = json(&lr, &["git", "import", w.to_str().unwrap()]);
    assert_eq!(second["new_commits"], 1, "{second}");
    // Only the new commit is read: the git map knows the first.
    assert_eq!(second["commits"], 1, "{second}");
    assert_eq!(ok(&lr, &["cat", "-r", "main", "a.txt"]), "two\n");
    assert_eq!(ok(&lr, &["cat", "-r", "main-", "a.txt"]), "one\n");
    // The working folder was not touched.
    assert!(!lr.join("a.txt").exists());
}

/// Quirks the fixtures lack, written with `git hash-object --literally`: a `-0000` zone,
/// a commit with no blank line before its message, a `mergetag` and an unknown header, a
/// tree with mode 100664 and one out of git's order. Each comes back with its SHA-1.
#[test]
fn synthetic_quirks_keep_their_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    git(t, &["init", "-q", "--bare", "-b", "main", "q.git"]);
    let q = t.join("q.git");
    let hash = |kind: &str, body: &[u8]| -> String {
        let f = t.join("obj");
        std::fs::write(&f, body).unwrap();
        git(
            &q,
            &[
                "hash-object",
                "--literally",
                "-w",
                "-t",
                kind,
                f.to_str().unwrap(),
            ],
        )
        .trim()
        .to_string()
    };
    let blob = hash("blob", b"content\n");
    let raw_sha = |hex: &str| -> Vec<u8> {
        (0..20)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    };
    let entry = |mode: &str, name: &str, sha: &str| -> Vec<u8> {
        let mut e = format!("{mode} {name}\0").into_bytes();
        e.extend(raw_sha(sha));
        e
    };
    // Mode 100664, and "b" before "a": both out of git's canonical form.
    let mut odd = entry("100664", "b.txt", &blob);
    odd.extend(entry("100644", "a.txt", &blob));
    let odd_tree = hash("tree", &odd);
    let plain_tree = hash("tree", &entry("100644", "a.txt", &blob));
    let c1 = hash(
        "commit",
        format!("tree {plain_tree}\nauthor Zone <z@x> 1700000000 -0000\ncommitter Zone <z@x> 1700000000 -0000\n\nzone -0000\n").as_bytes(),
    );
    let c2 = hash(
        "commit",
        format!("tree {odd_tree}\nparent {c1}\nauthor A <a@x> 1700000001 +0100\ncommitter A <a@x> 1700000001 +0100\nmergetag object {c1}\n type commit\n tag v0\n tagger A <a@x> 1700000001 +0100\n \n tagged\nx-unknown-header some value\n").as_bytes(),
    );
    git(&q, &["update-ref", "refs/heads/main", &c2]);

    let lr = t.join("lifeos");
    std::fs::create_dir(&lr).unwrap();
    ok(&lr, &["init"]);
    let r = json(&lr, &["git", "import", q.to_str().unwrap()]);
    assert_eq!(r["commits"], 2, "{r}");
    assert_eq!(r["raw_trees"], 1, "{r}");
    assert_eq!(r["mismatches"], 0, "{r}");
    assert_eq!(ok(&lr, &["cat", "-r", "main", "b.txt"]), "content\n");
    let out = t.join("out.git");
    ok(&lr, &["git", "export", out.to_str().unwrap()]);
    assert_eq!(git(&out, &["rev-parse", "refs/heads/main"]).trim(), c2);
    assert_eq!(git(&out, &["rev-parse", "refs/heads/main~1"]).trim(), c1);
    assert_eq!(
        git(&out, &["rev-parse", "refs/heads/main^{tree}"]).trim(),
        odd_tree
    );
}

/// A git object that is missing is named, and lifeos is left unchanged.
#[test]
fn a_missing_git_object_is_named_and_nothing_is_imported() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let w = t.join("work");
    std::fs::create_dir(&w).unwrap();
    git(&w, &["init", "-q", "-b", "main"]);
    write(&w, "a.txt", b"one\n");
    git(&w, &["add", "a.txt"]);
    git_commit(&w, &["-m", "one"]);
    let blob = git(&w, &["rev-parse", "HEAD:a.txt"]).trim().to_string();
    std::fs::remove_file(w.join(".git/objects").join(&blob[..2]).join(&blob[2..])).unwrap();
    let lr = t.join("lifeos");
    std::fs::create_dir(&lr).unwrap();
    ok(&lr, &["init"]);
    let ops = op_count(&lr);
    let err = fails(&lr, &["git", "import", w.to_str().unwrap()]);
    assert!(err.contains(&blob), "{err}");
    assert_eq!(op_count(&lr), ops);
}

/// Makes a git work tree at `w` on branch main with `n` commits, each changing `a.txt`.
fn git_history(w: &Path, n: usize) {
    std::fs::create_dir_all(w).unwrap();
    git(w, &["init", "-q", "-b", "main"]);
    for i in 0..n {
        write(w, "a.txt", format!("version {i}\n").as_bytes());
        git(w, &["add", "a.txt"]);
        git_commit(w, &["-m", &format!("commit {i}")]);
    }
}

/// A shallow clone imports down to its boundary and says so; export writes the same ids
/// (and a `shallow` file), and once the clone is deepened the next import brings the rest.
#[test]
fn a_shallow_clone_imports_to_its_boundary_and_deepens_later() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    git_history(&t.join("full"), 6);
    let url = format!("file://{}", t.join("full").display());
    git(t, &["clone", "-q", "--depth", "2", &url, "shallow"]);
    let sh = t.join("shallow");
    let lr = t.join("lifeos");
    std::fs::create_dir(&lr).unwrap();
    ok(&lr, &["init"]);
    let r = json(&lr, &["git", "import", sh.to_str().unwrap()]);
    assert_eq!(r["commits"], 2, "{r}");
    assert_eq!(r["shallow_boundary"], 1, "{r}");
    assert_eq!(r["mismatches"], 0, "{r}");
    let human = ok(&lr, &["git", "import", sh.to_str().unwrap()]);
    assert!(human.contains("shallow clone"), "{human}");
    assert_eq!(ok(&lr, &["cat", "-r", "main", "a.txt"]), "version 5\n");
    assert_eq!(ok(&lr, &["cat", "-r", "main-", "a.txt"]), "version 4\n");

    let out = t.join("out.git");
    ok(&lr, &["git", "export", out.to_str().unwrap()]);
    assert_eq!(
        git(&out, &["rev-parse", "refs/heads/main"]),
        git(&sh, &["rev-parse", "HEAD"])
    );
    git(&out, &["fsck", "--strict", "--no-progress"]);
    assert_eq!(git(&out, &["rev-list", "--all"]).lines().count(), 2);

    git(&sh, &["fetch", "-q", "--unshallow"]);
    let deeper = json(&lr, &["git", "import", sh.to_str().unwrap()]);
    assert_eq!(deeper["shallow_boundary"], 0, "{deeper}");
    assert_eq!(deeper["published"], true, "{deeper}");
    assert_eq!(ok(&lr, &["cat", "-r", "main-----", "a.txt"]), "version 0\n");
    let full = t.join("full.git");
    ok(&lr, &["git", "export", full.to_str().unwrap()]);
    assert_eq!(
        git(&full, &["rev-list", "refs/heads/main"]),
        git(&sh, &["rev-list", "HEAD"])
    );
}

/// `lifeos reindex` rebuilds the git map, so the next import is still a no-op that reads
/// no commit.
#[test]
fn reindex_rebuilds_the_git_map() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let w = t.join("work");
    git_history(&w, 3);
    let lr = t.join("lifeos");
    std::fs::create_dir(&lr).unwrap();
    ok(&lr, &["init"]);
    json(&lr, &["git", "import", w.to_str().unwrap()]);
    let out = ok(&lr, &["reindex"]);
    // 3 commits, 3 trees, 3 blobs.
    assert!(out.contains(" 9 git map entries"), "{out}");
    let r = json(&lr, &["git", "import", w.to_str().unwrap()]);
    assert_eq!(r["published"], false, "{r}");
    assert_eq!(r["commits"], 0, "{r}");
}

/// A commit made in lifeos, exported and read back by a repository whose catalog is gone,
/// keeps its lifeos id: nothing new is imported.
#[test]
fn a_lifeos_commit_read_back_from_git_keeps_its_id() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let lr = t.join("lifeos");
    std::fs::create_dir(&lr).unwrap();
    ok(&lr, &["init"]);
    write(&lr, "notes.md", b"hello\n");
    ok(&lr, &["commit", "-m", "first"]);
    write(&lr, "notes.md", b"hello again\n");
    ok(&lr, &["commit", "-m", "second"]);
    let out = t.join("out.git");
    ok(&lr, &["git", "export", out.to_str().unwrap()]);
    let header = git(&out, &["cat-file", "commit", "refs/heads/main"]);
    assert!(header.contains("\nchange-id "), "{header}");
    git(&out, &["fsck", "--strict", "--no-progress"]);
    for f in ["catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"] {
        let _ = std::fs::remove_file(lr.join(".lifeos").join(f));
    }
    let r = json(&lr, &["git", "import", out.to_str().unwrap()]);
    assert_eq!(r["new_commits"], 0, "{r}");
    assert_eq!(r["published"], false, "{r}");
}

/// The commit subjects `git log` shows from HEAD, newest first.
fn git_subjects(w: &Path) -> Vec<String> {
    git(w, &["log", "--format=%s"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// In a folder shared with git, lifeos authored commits as the login name
/// (`root <root@HOST>`) even where git's user.name was set. It authors them as git would,
/// unless LIFEOS_AUTHOR_NAME or lifeos's own user.name setting says otherwise.
#[test]
fn a_folder_shared_with_git_commits_as_gits_user() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("work");
    git_history(&w, 1);
    git(&w, &["config", "user.name", "Ann Lee"]);
    git(&w, &["config", "user.email", "ann@work.example"]);
    ok(&w, &["init", "--git"]);
    let author = |w: &Path| json(w, &["log", "-n", "1"])["commits"][0]["author"].clone();
    write(&w, "a.txt", b"by git's user");
    let out = TestEnv::at(&w)
        .command(["commit", "-m", "as git's user"])
        .env_remove("LIFEOS_AUTHOR_NAME")
        .env_remove("LIFEOS_AUTHOR_EMAIL")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a = author(&w);
    assert_eq!(
        (a["name"].as_str(), a["email"].as_str()),
        (Some("Ann Lee"), Some("ann@work.example")),
        "{a}"
    );
    // The environment still says who it is.
    write(&w, "a.txt", b"by the environment's");
    ok(&w, &["commit", "-m", "as LIFEOS_AUTHOR_NAME"]);
    assert_eq!(author(&w)["name"], "Test User");
}

/// `lifeos init --git` adopts a git work tree: each tool sees the other's commits, `git
/// status` is clean after `lifeos commit`, HEAD stays on the branch, and branches made or
/// deleted on either side appear on the other.
#[test]
fn a_colocated_folder_round_trips_both_ways() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("work");
    git_history(&w, 2);
    let out = ok(&w, &["init", "--git"]);
    assert!(out.contains("Adopted the git repository"), "{out}");
    let log = json(&w, &["log"]);
    assert_eq!(log["commits"].as_array().unwrap().len(), 2, "{log}");
    assert_eq!(json(&w, &["status"])["clean"], true);
    assert_eq!(git(&w, &["status", "--porcelain"]), "");

    // lifeos → git.
    write(&w, "a.txt", b"edited in lifeos\n");
    write(&w, "new.txt", b"new\n");
    ok(&w, &["commit", "-m", "from lifeos"]);
    assert_eq!(git_subjects(&w)[0], "from lifeos");
    assert_eq!(git(&w, &["status", "--porcelain"]), "");
    assert_eq!(git(&w, &["symbolic-ref", "HEAD"]).trim(), "refs/heads/main");
    assert!(git(&w, &["cat-file", "commit", "HEAD"]).contains("\nchange-id "));
    git(&w, &["fsck", "--strict", "--no-progress"]);

    // git → lifeos.
    write(&w, "b.txt", b"from git\n");
    git(&w, &["add", "b.txt"]);
    git_commit(&w, &["-m", "from git"]);
    let log = json(&w, &["log"]);
    assert_eq!(log["commits"][0]["message"], "from git\n", "{log}");
    assert_eq!(log["commits"][1]["message"], "from lifeos", "{log}");
    assert_eq!(json(&w, &["status"])["clean"], true);
    assert_eq!(ok(&w, &["cat", "-r", "main", "b.txt"]), "from git\n");

    // Branches and checkouts, both ways.
    ok(&w, &["branch", "create", "feature"]);
    assert!(git(&w, &["branch", "--list", "feature"]).contains("feature"));
    ok(&w, &["checkout", "feature"]);
    assert_eq!(
        git(&w, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/feature"
    );
    write(&w, "f.txt", b"feature work\n");
    ok(&w, &["commit", "-m", "on feature"]);
    assert_eq!(git(&w, &["status", "--porcelain"]), "");
    assert_eq!(git_subjects(&w)[0], "on feature");
    git(&w, &["checkout", "-q", "main"]);
    assert!(!w.join("f.txt").exists());
    assert_eq!(json(&w, &["status"])["clean"], true);
    git(&w, &["branch", "-q", "-D", "feature"]);
    let branches = ok(&w, &["branch", "list"]);
    assert!(!branches.contains("feature"), "{branches}");
    // The deleted branch's commit is still in lifeos's history.
    ok(&w, &["op", "log"]);
    git(&w, &["fsck", "--strict", "--no-progress"]);
}

/// While git holds index.lock, a lifeos commit is recorded and exported but git's index
/// cannot follow: the command says so, and the next command brings the index up to date.
#[test]
fn a_held_git_index_lock_delays_the_index_and_the_next_command_catches_up() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("work");
    git_history(&w, 1);
    ok(&w, &["init", "--git"]);
    write(&w, "a.txt", b"edited in lifeos\n");
    std::fs::write(w.join(".git/index.lock"), b"").unwrap();
    let err = fails(&w, &["commit", "-m", "from lifeos"]);
    assert!(
        err.contains("cannot write git's index") && err.contains("let it finish"),
        "{err}"
    );
    assert_eq!(git_subjects(&w)[0], "from lifeos");
    // git's index still has the old a.txt against the new HEAD.
    assert_eq!(
        git(&w, &["diff", "--cached", "--name-only"]).trim(),
        "a.txt"
    );
    std::fs::remove_file(w.join(".git/index.lock")).unwrap();
    assert_eq!(json(&w, &["status"])["clean"], true);
    assert_eq!(git(&w, &["status", "--porcelain"]), "");
}

/// `lifeos init --git` in a plain folder creates the git repository, and the first
/// `lifeos commit` is git's first commit too.
#[test]
fn init_git_creates_the_git_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("fresh");
    std::fs::create_dir(&w).unwrap();
    let out = ok(&w, &["init", "--git"]);
    assert!(out.contains("Created the git repository"), "{out}");
    write(&w, "notes.md", b"hello\n");
    ok(&w, &["commit", "-m", "first"]);
    assert_eq!(git_subjects(&w), vec!["first"]);
    assert_eq!(git(&w, &["status", "--porcelain"]), "");
    assert_eq!(git(&w, &["show", "HEAD:notes.md"]), "hello\n");
    // lifeos's store is inside git's own folder, where no git command writes.
    assert!(w.join(".git/lifeos/config").is_file());
    assert!(!w.join(".lifeos").exists());
}

/// While git is in the middle of a rebase, lifeos says so and changes nothing.
#[test]
fn a_colocated_folder_mid_rebase_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("work");
    git_history(&w, 1);
    ok(&w, &["init", "--git"]);
    std::fs::create_dir(w.join(".git/rebase-merge")).unwrap();
    let err = fails(&w, &["status"]);
    assert!(err.contains("middle of a rebase"), "{err}");
    std::fs::remove_dir(w.join(".git/rebase-merge")).unwrap();
    ok(&w, &["status"]);
}

/// Writes an executable shell hook.
fn write_hook(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Hooks import what git does; a user's hook is chained (it still runs and its exit
/// status still counts), installing twice changes nothing, and uninstall puts it back.
#[test]
fn git_hooks_chain_the_user_s_hooks_and_uninstall_restores_them() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("work");
    git_history(&w, 1);
    git(&w, &["config", "core.hooksPath", "my-hooks"]);
    let user_post_commit = "#!/bin/sh\necho ran >> \"$(git rev-parse --git-dir)/user-hook-log\"\n";
    write_hook(&w.join("my-hooks/post-commit"), user_post_commit);
    write_hook(&w.join("my-hooks/pre-push"), "#!/bin/sh\nexit 1\n");
    ok(&w, &["init", "--git"]);

    // A hooks folder in the work tree is committed with the files: installing there is
    // asked for explicitly (tests/hostile.rs checks it is refused otherwise).
    let r = json(&w, &["git", "hooks", "install", "--force"]);
    assert_eq!(r["dir"], w.join("my-hooks").display().to_string(), "{r}");
    let states: Vec<(String, String)> = r["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["hook"].as_str().unwrap().into(),
                h["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    for (hook, state) in &states {
        let want = if hook == "post-commit" || hook == "pre-push" {
            "chained"
        } else {
            "installed"
        };
        assert_eq!(state, want, "{hook}: {r}");
    }
    let installed = std::fs::read(w.join("my-hooks/post-commit")).unwrap();
    let again = json(&w, &["git", "hooks", "install", "--force"]);
    assert_eq!(
        again["hooks"],
        r["hooks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let mut h = h.clone();
                h["before"] = h["state"].clone();
                h
            })
            .collect::<serde_json::Value>()
    );
    assert_eq!(
        std::fs::read(w.join("my-hooks/post-commit")).unwrap(),
        installed
    );

    // A git commit runs the user's hook, then lifeos's, which imports it.
    write(&w, "b.txt", b"b\n");
    git(&w, &["add", "b.txt"]);
    git_commit(&w, &["-m", "hooked"]);
    assert_eq!(
        std::fs::read_to_string(w.join(".git/user-hook-log")).unwrap(),
        "ran\n"
    );
    let head = git(&w, &["rev-parse", "HEAD"]);
    let synced = std::fs::read_to_string(w.join(".git/lifeos/git-synced")).unwrap();
    assert!(
        synced.contains(head.trim()),
        "the hook imported the commit:\n{synced}"
    );

    // The user's pre-push still vetoes a push.
    let remote = tmp.path().join("remote.git");
    git(
        tmp.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    let push = Command::new("git")
        .current_dir(&w)
        .args(["push", "-q", remote.to_str().unwrap(), "main"])
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(!push.status.success(), "the user's pre-push hook exits 1");
    write_hook(
        &w.join("my-hooks/pre-push.lifeos-user"),
        "#!/bin/sh\nexit 0\n",
    );
    git(&w, &["push", "-q", remote.to_str().unwrap(), "main"]);

    let status = ok(&w, &["git", "hooks", "status"]);
    assert!(status.contains("running your hook first"), "{status}");
    ok(&w, &["git", "hooks", "uninstall"]);
    assert_eq!(
        std::fs::read_to_string(w.join("my-hooks/post-commit")).unwrap(),
        user_post_commit
    );
    assert!(!w.join("my-hooks/post-merge").exists());
    assert!(!w.join("my-hooks/post-commit.lifeos-user").exists());
    let after = json(&w, &["git", "hooks", "status"]);
    for h in after["hooks"].as_array().unwrap() {
        let want = if h["hook"] == "post-commit" || h["hook"] == "pre-push" {
            "user"
        } else {
            "absent"
        };
        assert_eq!(h["state"], want, "{after}");
    }
}

/// A `git daemon` serving `base` on 127.0.0.1 (fetch and push), stopped on drop.
struct GitDaemon {
    child: std::process::Child,
    port: u16,
}

impl GitDaemon {
    fn start(base: &Path) -> GitDaemon {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // The daemon itself, not the `git daemon` wrapper, so that killing the child stops it.
        let exec_path = git(base, &["--exec-path"]);
        let mut child = Command::new(Path::new(exec_path.trim()).join("git-daemon"))
            .args([
                "--reuseaddr",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", base.display()),
                "--export-all",
                "--enable=receive-pack",
                base.to_str().unwrap(),
            ])
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("git daemon starts (Debian's git package has it)");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return GitDaemon { child, port };
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("git daemon did not listen on 127.0.0.1:{port}");
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `lifeos git clone`, `push` and `fetch` against a real git server on 127.0.0.1.
#[test]
fn clone_push_and_fetch_through_a_git_server() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    git_history(&t.join("seed"), 3);
    let srv = t.join("srv");
    std::fs::create_dir(&srv).unwrap();
    git(
        t,
        &[
            "clone",
            "-q",
            "--bare",
            "seed",
            srv.join("project.git").to_str().unwrap(),
        ],
    );
    let daemon = GitDaemon::start(&srv);
    let url = format!("git://127.0.0.1:{}/project.git", daemon.port);

    ok(t, &["git", "clone", &url]);
    let p = t.join("project");
    assert_eq!(json(&p, &["log"])["commits"].as_array().unwrap().len(), 3);
    assert_eq!(json(&p, &["status"])["clean"], true);
    assert_eq!(git(&p, &["status", "--porcelain"]), "");

    // Push a lifeos commit.
    write(&p, "a.txt", b"from lifeos\n");
    ok(&p, &["commit", "-m", "pushed from lifeos"]);
    ok(&p, &["git", "push"]);
    let bare = srv.join("project.git");
    assert_eq!(
        git(&bare, &["log", "-1", "--format=%s", "main"]).trim(),
        "pushed from lifeos"
    );
    assert_eq!(
        git(&bare, &["rev-parse", "main"]),
        git(&p, &["rev-parse", "HEAD"])
    );

    // Someone else pushes; fetch brings it in, and a git merge shows it in lifeos.
    git(t, &["clone", "-q", &url, "other"]);
    let o = t.join("other");
    write(&o, "o.txt", b"elsewhere\n");
    git(&o, &["add", "o.txt"]);
    git_commit(&o, &["-m", "from elsewhere"]);
    git(&o, &["push", "-q", "origin", "main"]);
    ok(&p, &["git", "fetch"]);
    git(&p, &["merge", "-q", "--ff-only", "origin/main"]);
    let log = json(&p, &["log"]);
    assert_eq!(log["commits"][0]["message"], "from elsewhere\n", "{log}");
    assert_eq!(ok(&p, &["cat", "o.txt"]), "elsewhere\n");
    drop(daemon);
}

/// Without git, or with one too old, remote commands say so.
#[test]
fn a_missing_or_old_git_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let empty = t.join("empty-bin");
    std::fs::create_dir(&empty).unwrap();
    let out = TestEnv::at(t)
        .with("PATH", &empty)
        .run(&["git", "clone", "git://127.0.0.1:9/x.git"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("git is not installed"), "{err}");

    let old = t.join("old-bin");
    write_hook(&old.join("git"), "#!/bin/sh\necho 'git version 1.8.0'\n");
    let out = TestEnv::at(t)
        .with("PATH", &old)
        .run(&["git", "clone", "git://127.0.0.1:9/x.git"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("git 1.8 is too old"), "{err}");
    assert!(!t.join("x").exists());
}

/// A work tree at `w` on branch main, a plain lifeos repository beside it, and git's
/// `lifeos` filter set up for `*.bin`.
fn filtered_repo(w: &Path) {
    std::fs::create_dir_all(w).unwrap();
    git(w, &["init", "-q", "-b", "main"]);
    ok(w, &["init"]);
    let first = json(w, &["git", "filter", "install", "--pattern", "*.bin"]);
    assert_eq!(first["config_changed"], true, "{first}");
    assert_eq!(first["added"], serde_json::json!(["*.bin"]));
    let again = json(w, &["git", "filter", "install", "--pattern", "*.bin"]);
    assert_eq!(again["config_changed"], false, "{again}");
    assert_eq!(again["added"], serde_json::json!([]));
    assert_eq!(
        std::fs::read_to_string(w.join(".gitattributes")).unwrap(),
        "*.bin filter=lifeos -text\n"
    );
}

/// git keeps a pointer and lifeos the content: checkouts rebuild it byte for byte, an edit
/// stores only the chunks it changed, `gc` keeps what git points to, and cleaning the same
/// content again publishes nothing.
#[test]
fn the_filter_keeps_large_files_in_lifeos_and_checks_them_out_byte_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("work");
    filtered_repo(&w);
    let v1 = noise(3 << 20, 7);
    write(&w, "big.bin", &v1);
    write(&w, "notes.txt", b"not filtered\n");
    git(&w, &["add", ".gitattributes", "big.bin", "notes.txt"]);
    git_commit(&w, &["-m", "v1"]);
    let pointer = git(&w, &["cat-file", "-p", "HEAD:big.bin"]);
    let content_id = blake3::hash(&v1).to_hex().to_string();
    assert_eq!(
        pointer,
        format!(
            "version https://lifeos.dev/spec/pointer/v1\noid blake3:{content_id}\nsize 3145728\n"
        )
    );
    assert_eq!(
        git(&w, &["cat-file", "-p", "HEAD:notes.txt"]),
        "not filtered\n"
    );
    assert_eq!(git(&w, &["status", "--porcelain"]), "");

    // Cleaning the same content again (a touched file) publishes nothing.
    let ops = op_count(&w);
    let log = json(&w, &["op", "log"]);
    assert_eq!(
        log["operations"][0]["events"][0]["type"], "files.stored",
        "{log}"
    );
    std::fs::write(w.join("big.bin"), &v1).unwrap();
    git(&w, &["add", "big.bin"]);
    assert_eq!(op_count(&w), ops);

    // gc keeps the content git points to; checkout rebuilds it.
    ok(&w, &["gc"]);
    std::fs::remove_file(w.join("big.bin")).unwrap();
    git(&w, &["checkout", "--", "big.bin"]);
    assert!(std::fs::read(w.join("big.bin")).unwrap() == v1);

    // A 100-byte edit stores a few chunks, not the file again.
    let before = json(&w, &["stats"])["stored_bytes"].as_u64().unwrap();
    let mut v2 = v1.clone();
    v2[1_500_000..1_500_100].copy_from_slice(&[0xAB; 100]);
    write(&w, "big.bin", &v2);
    git(&w, &["add", "big.bin"]);
    git_commit(&w, &["-m", "v2"]);
    let grew = json(&w, &["stats"])["stored_bytes"].as_u64().unwrap() - before;
    assert!(grew < 400_000, "a 100-byte edit stored {grew} bytes");

    // Both versions check out exactly.
    git(&w, &["checkout", "-q", "HEAD~1", "--", "big.bin"]);
    assert!(std::fs::read(w.join("big.bin")).unwrap() == v1);
    git(&w, &["checkout", "-q", "HEAD", "--", "big.bin"]);
    assert!(std::fs::read(w.join("big.bin")).unwrap() == v2);
    assert_eq!(git(&w, &["status", "--porcelain"]), "");
    assert!(ok(&w, &["fsck"]).contains("no problems"));
}

/// A clone elsewhere has the pointers but not the content: checking a file out fails,
/// naming the file and what to do, and writes no file rather than a wrong one.
#[test]
fn a_pointer_whose_content_is_missing_fails_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("work");
    filtered_repo(&w);
    write(&w, "big.bin", &noise(200_000, 3));
    git(&w, &["add", ".gitattributes", "big.bin"]);
    git_commit(&w, &["-m", "v1"]);

    let c = tmp.path().join("clone");
    let url = format!("file://{}", w.display());
    git(tmp.path(), &["clone", "-q", &url, "clone"]);
    ok(&c, &["init"]);
    ok(&c, &["git", "filter", "install"]);
    std::fs::remove_file(c.join("big.bin")).unwrap();
    let out = Command::new("git")
        .current_dir(&c)
        .args(["checkout", "--", "big.bin"])
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("lifeos: big.bin: its content (blake3:")
            && err.contains("is not in the lifeos repository")
            && err.contains("git checkout -- <path>"),
        "{err}"
    );
    assert!(!c.join("big.bin").exists());
}

/// In a colocated folder the filtered file is content to lifeos and a pointer to git, both
/// ways: git's commit imports as the content, lifeos's commit exports the pointer back,
/// and both tools' status stay clean.
#[test]
fn a_colocated_folder_keeps_filtered_files_as_pointers_in_git() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("work");
    git_history(&w, 1);
    ok(&w, &["init", "--git"]);
    ok(&w, &["git", "filter", "install", "--pattern", "*.bin"]);
    let data = noise(1 << 20, 5);
    write(&w, "big.bin", &data);
    git(&w, &["add", ".gitattributes", "big.bin"]);
    git_commit(&w, &["-m", "big file, from git"]);
    let pointer = git(&w, &["cat-file", "-p", "HEAD:big.bin"]);
    assert!(pointer.starts_with("version https://lifeos.dev/spec/pointer/v1\n"));

    // git → lifeos: the file is its content.
    assert_eq!(json(&w, &["status"])["clean"], true);
    let log = json(&w, &["op", "log"]);
    assert!(
        log["operations"][0]["description"]
            .as_str()
            .unwrap()
            .starts_with("git import"),
        "{log}"
    );
    let cat = TestEnv::at(&w).run(&["cat", "-r", "main", "big.bin"]);
    assert!(cat.stdout == data);

    // lifeos → git: another file changes; the filtered one goes back as its pointer.
    let head = git(&w, &["rev-parse", "HEAD"]);
    write(&w, "a.txt", b"edited in lifeos\n");
    ok(&w, &["commit", "-m", "from lifeos"]);
    assert_ne!(git(&w, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&w, &["cat-file", "-p", "HEAD:big.bin"]), pointer);
    assert_eq!(git(&w, &["status", "--porcelain"]), "");
    git(&w, &["fsck", "--strict", "--no-progress"]);

    // A new version committed by lifeos goes to git as a pointer too, as `git add` would
    // have made it, and git checks it out from lifeos's store.
    let v2 = noise(1 << 20, 6);
    write(&w, "big.bin", &v2);
    write(&w, "media.bin", &v2[..300_000]);
    ok(&w, &["commit", "-m", "new big file, from lifeos"]);
    let p2 = git(&w, &["cat-file", "-p", "HEAD:big.bin"]);
    assert!(
        p2.contains(&format!("oid blake3:{}", blake3::hash(&v2).to_hex())),
        "{p2}"
    );
    assert!(git(&w, &["cat-file", "-p", "HEAD:media.bin"]).contains("size 300000"));
    assert_eq!(git(&w, &["status", "--porcelain"]), "");
    std::fs::remove_file(w.join("big.bin")).unwrap();
    git(&w, &["checkout", "--", "big.bin"]);
    assert!(std::fs::read(w.join("big.bin")).unwrap() == v2);
    assert_eq!(json(&w, &["status"])["clean"], true);
    git(&w, &["fsck", "--strict", "--no-progress"]);

    // An export elsewhere gives the same ids: the map's pointer rows say how.
    ok(
        &w,
        &[
            "git",
            "export",
            tmp.path().join("copy.git").to_str().unwrap(),
        ],
    );
    assert_eq!(
        git(&tmp.path().join("copy.git"), &["rev-parse", "main"]),
        git(&w, &["rev-parse", "main"])
    );
    // reindex rebuilds those rows.
    ok(&w, &["reindex"]);
    ok(
        &w,
        &[
            "git",
            "export",
            tmp.path().join("again.git").to_str().unwrap(),
        ],
    );
    assert_eq!(
        git(&tmp.path().join("again.git"), &["rev-parse", "main"]),
        git(&w, &["rev-parse", "main"])
    );
}
