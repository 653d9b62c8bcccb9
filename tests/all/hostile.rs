//! Hostile repositories: what arrives from outside (git histories, lifeos remotes and the
//! servers behind them, rules files arriving by checkout, merge or pull) never runs a
//! command, never writes outside the folder or into `.git`/`.lifeos`, and never weakens
//! encryption (docs/SECURITY.md). Each test builds the hostile input with the real tools
//! (`git mktree`, `git hash-object`, a real lifeos remote rewritten as its server could),
//! then checks that nothing ran (a marker file is absent), nothing outside the folder was
//! written, the store is intact (`lifeos fsck`), and the error names the culprit.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// A git tree to build with `git mktree`: entries of (name, node).
enum Node {
    /// A blob with its git mode (`100644`, `100755`, `120000`).
    Blob(&'static str, Vec<u8>),
    /// A tree.
    Tree(Vec<(Vec<u8>, Node)>),
    /// A gitlink (a submodule's commit).
    Gitlink(&'static str),
}

fn blob(bytes: &[u8]) -> Node {
    Node::Blob("100644", bytes.to_vec())
}

fn exe(bytes: &[u8]) -> Node {
    Node::Blob("100755", bytes.to_vec())
}

fn link(target: &[u8]) -> Node {
    Node::Blob("120000", target.to_vec())
}

fn tree(entries: Vec<(&[u8], Node)>) -> Node {
    Node::Tree(entries.into_iter().map(|(n, e)| (n.to_vec(), e)).collect())
}

/// CVE-2018-11235: a submodule whose name climbs out of `.git/modules` (`../../x`), with
/// a hook in the repository it names. lifeos never clones submodules: the history is
/// imported (a `.gitmodules` file and a gitlink are data), a checkout makes the
/// submodule's empty folder, and nothing is written into `.git` or run.
#[test]
fn a_submodule_named_to_climb_out_of_git_modules_writes_and_runs_nothing() {
    let scene = Scene::new();
    let modules = format!(
        "[submodule \"../../modules/evil\"]\n\tpath = sub\n\turl = {}\n",
        scene.path("evil-sub").display()
    );
    let root = tree(vec![
        (b".gitmodules", blob(modules.as_bytes())),
        (
            b"sub",
            Node::Gitlink("1111111111111111111111111111111111111111"),
        ),
        (
            b"modules",
            tree(vec![(
                b"evil",
                tree(vec![(
                    b"hooks",
                    tree(vec![(
                        b"post-checkout",
                        exe(format!("#!/bin/sh\n{}\n", marker(&scene, "submodule")).as_bytes()),
                    )]),
                )]),
            )]),
        ),
    ]);
    let evil = scene.path("evil");
    git_repo_with(&evil, &root);
    let v = scene.path("victim");
    std::fs::create_dir(&v).unwrap();
    ok(&v, &["init"]);
    ok(&v, &["git", "import", evil.join(".git").to_str().unwrap()]);
    ok(&v, &["checkout", "main"]);
    assert!(v.join("sub").is_dir());
    assert_eq!(std::fs::read_dir(v.join("sub")).unwrap().count(), 0);
    assert!(!v.join(".git").exists(), "a .git was written");
    fsck_clean(&v);
    scene.assert_untouched();
}

/// `git` with stdin, no user or system configuration; returns stdout.
fn git_in(dir: &Path, args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("git runs");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Writes `node` into the git repository at `dir`; returns its SHA-1.
fn write_node(dir: &Path, node: &Node) -> String {
    match node {
        Node::Blob(_, bytes) => git_in(dir, &["hash-object", "-w", "--stdin"], bytes),
        Node::Gitlink(sha) => sha.to_string(),
        Node::Tree(entries) => {
            let mut listing = Vec::new();
            for (name, e) in entries {
                let (mode, kind) = match e {
                    Node::Blob(mode, _) => (*mode, "blob"),
                    Node::Tree(_) => ("040000", "tree"),
                    Node::Gitlink(_) => ("160000", "commit"),
                };
                listing.extend_from_slice(
                    format!("{mode} {kind} {}\t", write_node(dir, e)).as_bytes(),
                );
                listing.extend_from_slice(name);
                listing.push(b'\n');
            }
            git_in(dir, &["mktree", "--missing"], &listing)
        }
    }
}

/// A git repository at `dir` whose `main` is one commit of `root`; returns the commit.
fn git_repo_with(dir: &Path, root: &Node) -> String {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    let t = write_node(dir, root);
    let c = git_in(
        dir,
        &[
            "-c",
            "user.name=Mallory",
            "-c",
            "user.email=m@example.org",
            "commit-tree",
            &t,
            "-m",
            "hostile",
        ],
        b"",
    );
    git(dir, &["update-ref", "refs/heads/main", &c]);
    c
}

/// A folder with a sentinel file beside the repository, to show nothing outside the
/// folder is written.
struct Scene {
    _tmp: tempfile::TempDir,
    base: PathBuf,
}

impl Scene {
    fn new() -> Scene {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        std::fs::write(base.join("sentinel"), b"untouched").unwrap();
        Scene { _tmp: tmp, base }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    /// Asserts that nothing ran (no `PWNED*` marker anywhere in the scene) and that the
    /// files outside the folders under test are as they were.
    fn assert_untouched(&self) {
        let mut stack = vec![self.base.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let name = e.file_name();
                assert!(
                    !name.to_string_lossy().starts_with("PWNED"),
                    "a hostile command ran: {} exists",
                    e.path().display()
                );
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                }
            }
        }
        assert_eq!(
            std::fs::read(self.base.join("sentinel")).unwrap(),
            b"untouched"
        );
        let names: Vec<String> = std::fs::read_dir(&self.base)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n == "etc" || n == "hooks"),
            "something was written beside the folder: {names:?}"
        );
    }
}

/// Asserts that `lifeos fsck` finds nothing wrong in `dir`.
fn fsck_clean(dir: &Path) {
    let report = json(dir, &["fsck"]);
    assert_eq!(report["problems"], serde_json::json!([]), "{report}");
}

/// A marker command: creates `PWNED-<what>` in the scene's base when run.
fn marker(scene: &Scene, what: &str) -> String {
    format!("touch {}", scene.path(&format!("PWNED-{what}")).display())
}

/// Trees git itself refuses (git's `verify_path`; CVE-2014-9390's case and HFS+/NTFS
/// spellings), and the same for `.lifeos`: each import is refused naming the path and
/// the commit, and nothing is imported.
#[test]
fn git_trees_naming_git_or_lifeos_folders_are_refused_on_import() {
    let scene = Scene::new();
    let hook = |s: &Scene| exe(format!("#!/bin/sh\n{}\n", marker(s, "hook")).as_bytes());
    let gitdir = || {
        tree(vec![
            (b"HEAD", blob(b"ref: refs/heads/main\n")),
            (
                b"config",
                blob(
                    format!(
                        "[core]\n\tfsmonitor = \"{}; false\"\n",
                        marker(&scene, "fsmonitor")
                    )
                    .as_bytes(),
                ),
            ),
        ])
    };
    let cases: Vec<(&str, Node)> = vec![
        // H3: a gitdir file and the repository it points at.
        (
            ".git",
            tree(vec![
                (b".git", blob(b"gitdir: evil-gd\n")),
                (b"evil-gd", gitdir()),
            ]),
        ),
        (".git", tree(vec![(b".git", link(b"evil-gd"))])),
        (
            "sub/.git",
            tree(vec![(
                b"sub",
                tree(vec![(b".git", blob(b"gitdir: ../evil-gd\n"))]),
            )]),
        ),
        // CVE-2014-9390: case and file-system spellings of .git.
        (
            ".GIT",
            tree(vec![(
                b".GIT",
                tree(vec![(
                    b"hooks",
                    tree(vec![(b"post-checkout", hook(&scene))]),
                )]),
            )]),
        ),
        (
            ".Git",
            tree(vec![(b".Git", tree(vec![(b"config", blob(b"[core]\n"))]))]),
        ),
        (
            "GIT~1",
            tree(vec![(b"GIT~1", tree(vec![(b"config", blob(b"x"))]))]),
        ),
        (
            ".git. ",
            tree(vec![(b".git. ", tree(vec![(b"config", blob(b"x"))]))]),
        ),
        (
            ".git::$INDEX_ALLOCATION",
            tree(vec![(
                b".git::$INDEX_ALLOCATION",
                tree(vec![(b"config", blob(b"x"))]),
            )]),
        ),
        (
            ".g\u{200c}it",
            tree(vec![(
                ".g\u{200c}it".as_bytes(),
                tree(vec![(b"config", blob(b"x"))]),
            )]),
        ),
        // CVE-2018-11235's follow-up: .gitmodules may not be a symlink.
        (
            ".gitmodules",
            tree(vec![(b".gitmodules", link(b"/etc/passwd"))]),
        ),
        // H1 through lifeos's own import: lifeos's folder and the trust in it.
        (
            ".lifeos",
            tree(vec![(
                b".lifeos",
                tree(vec![(b"trusted-rules", blob(b"00\n"))]),
            )]),
        ),
        (".LIFEOS", tree(vec![(b".LIFEOS", blob(b"x"))])),
        (
            "deep/er/LIFEOS~1",
            tree(vec![(
                b"deep",
                tree(vec![(b"er", tree(vec![(b"LIFEOS~1", blob(b"x"))]))]),
            )]),
        ),
    ];
    for (i, (path, root)) in cases.iter().enumerate() {
        let evil = scene.path(&format!("evil{i}"));
        let commit = git_repo_with(&evil, root);
        let victim = scene.path(&format!("victim{i}"));
        std::fs::create_dir(&victim).unwrap();
        ok(&victim, &["init"]);
        let err = fails(
            &victim,
            &["git", "import", evil.join(".git").to_str().unwrap()],
        );
        assert!(
            err.contains(&format!(
                "ref refs/heads/main was not imported: commit {commit} has {path},"
            )) && err.contains("lifeos keeps none of its history"),
            "{path}: {err}"
        );
        // Nothing was imported: no commit, no branch.
        let log = run(&victim, &["log"]);
        assert!(!log.status.success(), "{path}: something was imported");
        fsck_clean(&victim);
        scene.assert_untouched();
    }
}

/// Commits `files` on branch `hostile` (a child of `@`) of the repository at `dir` through the library, as another
/// device (or a history imported before lifeos refused such trees) could hold them.
fn commit_hostile(dir: &Path, files: &[(&[u8], lifeos_vcs::EntryKind, &[u8])]) -> String {
    let repo = lifeos_vcs::Repo::discover(dir).unwrap();
    lifeos_vcs::testing::commit_entries(&repo, "hostile", files, "hostile").to_hex()
}

/// Asserts that a command succeeded, showing what it said when it did not.
fn ran_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Commits `rules` as the rules file of the repository at `d`, and trusts them.
fn trusted_rules(d: &Path, rules: &str) {
    write(d, "lifeos.rules.toml", rules.as_bytes());
    ok(d, &["commit", "-m", "rules"]);
    ok(d, &["rules", "trust"]);
}

/// A new folder `name` shared by lifeos and git (`lifeos init --git`).
fn colocated(scene: &Scene, name: &str) -> PathBuf {
    let w = scene.path(name);
    std::fs::create_dir(&w).unwrap();
    ok(&w, &["init", "--git"]);
    w
}

/// A lifeos repository with one commit of `notes.md`, as a victim has it.
fn victim(scene: &Scene, name: &str) -> PathBuf {
    let d = scene.path(name);
    std::fs::create_dir(&d).unwrap();
    ok(&d, &["init"]);
    write(&d, "notes.md", b"mine\n");
    ok(&d, &["commit", "-m", "mine"]);
    d
}

/// What the folder holds, but for lifeos's own folder.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_name() == ".lifeos" && d == dir {
                continue;
            }
            let rel = e
                .path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
            out.push(rel);
        }
    }
    out.sort();
    out
}

/// Trees from elsewhere that name git's or lifeos's folder, or whose symlinks lead out of
/// the folder or into those folders (CVE-2021-21300's `A -> .git/hooks` beside `a/`,
/// CVE-2024-32002's symlink to `.git` beside a submodule), are never checked out,
/// restored or merged into the folder: the command fails naming the path and the
/// commit, publishes nothing and writes nothing.
#[test]
fn checkout_restore_and_merge_never_write_what_a_hostile_tree_holds() {
    use lifeos_vcs::EntryKind::{Executable, File, Gitlink, Symlink};
    let scene = Scene::new();
    let hook = format!("#!/bin/sh\n{}\n", marker(&scene, "hook"));
    // (the path refused, the name in it refused, the tree's files)
    type Files<'a> = Vec<(&'a [u8], lifeos_vcs::EntryKind, &'a [u8])>;
    let cases: Vec<(&str, &str, Files)> = vec![
        (".git", ".git", vec![(b".git", File, b"gitdir: evil-gd\n")]),
        (
            "sub/.GIT/hooks/post-checkout",
            ".GIT",
            vec![(b"sub/.GIT/hooks/post-checkout", Executable, hook.as_bytes())],
        ),
        (
            ".lifeos/trusted-rules",
            ".lifeos",
            vec![(b".lifeos/trusted-rules", File, b"00\n")],
        ),
        (
            "a/LIFEOS~1/config",
            "LIFEOS~1",
            vec![(b"a/LIFEOS~1/config", File, b"[ui]\npager = \"sh\"\n")],
        ),
        (
            "A",
            "A",
            vec![
                (b"A", Symlink, b".git/hooks"),
                (b"a/post-checkout", Executable, hook.as_bytes()),
            ],
        ),
        (
            "a",
            "a",
            vec![(b"a", Symlink, b".git"), (b"A/modules/x", Gitlink, b"\x11")],
        ),
        ("d/up", "up", vec![(b"d/up", Symlink, b"../../outside")]),
        ("abs", "abs", vec![(b"abs", Symlink, b"/etc/passwd")]),
        ("twisty", "twisty", vec![(b"twisty", Symlink, b"d/../../x")]),
        (
            ".gitmodules",
            ".gitmodules",
            vec![(b".gitmodules", Symlink, b"notes.md")],
        ),
    ];
    for (i, (path, culprit, files)) in cases.iter().enumerate() {
        let d = victim(&scene, &format!("checkout{i}"));
        let before = listing(&d);
        let commit = commit_hostile(&d, files);
        let named = format!("{path} in commit {}", &commit[..12]);
        let n = op_count(&d);
        for args in [
            vec!["checkout", "hostile"],
            vec!["restore", ".", "-r", "hostile"],
        ] {
            let err = fails(&d, &args);
            assert!(err.contains(&named), "{args:?} {path}: {err}");
            assert_eq!(
                op_count(&d),
                n,
                "{args:?} {path}: an operation was published"
            );
            assert_eq!(listing(&d), before, "{args:?} {path}: the folder changed");
        }
        let out = scene.path(&format!("restored{i}"));
        let err = fails(
            &d,
            &["restore", "--to", out.to_str().unwrap(), "-r", "hostile"],
        );
        assert!(err.contains(culprit), "restore --to {culprit}: {err}");
        // Merging the hostile commit into the current branch is refused the same way.
        write(&d, "other.md", b"x\n");
        ok(&d, &["commit", "-m", "other"]);
        let n = op_count(&d);
        let before = listing(&d);
        let err = fails(&d, &["merge", "hostile"]);
        assert!(
            err.contains(path) && err.contains(&commit[..12]),
            "merge {path}: {err}"
        );
        assert_eq!(op_count(&d), n, "merge {path}: an operation was published");
        assert_eq!(listing(&d), before, "merge {path}: the folder changed");
        fsck_problems_only_name(&d, culprit);
        scene.assert_untouched();
    }
}

/// `fsck` reports a tree entry lifeos never writes (and nothing else): the data is whole.
fn fsck_problems_only_name(dir: &Path, culprit: &str) {
    let report = json(dir, &["fsck"]);
    for p in report["problems"].as_array().unwrap() {
        assert_eq!(p["code"], "reserved-name", "{report}");
        assert!(
            p["detail"]
                .as_str()
                .unwrap()
                .contains(culprit.rsplit('/').next().unwrap()),
            "{report}"
        );
    }
}

/// A symlink of a person's own that leads outside the folder is written once they allow
/// it; one into `.git` never is.
#[test]
fn a_person_may_allow_their_own_symlinks_outside_the_folder() {
    use lifeos_vcs::EntryKind::Symlink;
    let scene = Scene::new();
    let d = victim(&scene, "own");
    commit_hostile(
        &d,
        &[
            (b"notes.md", lifeos_vcs::EntryKind::File, b"mine\n"),
            (b"logs", Symlink, b"/var/log"),
        ],
    );
    let err = fails(&d, &["checkout", "hostile"]);
    assert!(err.contains("safety.outside-symlinks"), "{err}");
    ok(&d, &["config", "set", "safety.outside-symlinks", "true"]);
    ok(&d, &["checkout", "hostile"]);
    assert_eq!(
        std::fs::read_link(d.join("logs")).unwrap(),
        Path::new("/var/log")
    );
    let repo = lifeos_vcs::Repo::discover(&d).unwrap();
    lifeos_vcs::testing::commit_entries(
        &repo,
        "hooks",
        &[(b"hooks", Symlink, b"/x/.git/hooks")],
        "x",
    );
    drop(repo);
    let err = fails(&d, &["checkout", "hooks"]);
    assert!(
        err.contains("hooks in commit") && err.contains(".git"),
        "{err}"
    );
    scene.assert_untouched();
}

/// A lifeos remote whose history holds a tree lifeos never writes (another device's, or
/// planted by whoever can write the remote) is kept as history (it is data, and `fsck`
/// names it) but never written: `pull` and `clone` refuse to check it out, naming the
/// path and the commit.
#[test]
fn a_remote_history_holding_a_hostile_tree_is_kept_but_never_checked_out() {
    let scene = Scene::new();
    let remote = scene.path("remote");
    let src = victim(&scene, "src");
    ok(&src, &["remote", "add", "origin", remote.to_str().unwrap()]);
    ok(&src, &["push"]);
    let copy = scene.path("copy");
    ok(
        &scene.base,
        &["clone", remote.to_str().unwrap(), copy.to_str().unwrap()],
    );
    let before = listing(&copy);
    // The other device's main now holds a gitdir file.
    let repo = lifeos_vcs::Repo::discover(&src).unwrap();
    let commit = lifeos_vcs::testing::commit_entries(
        &repo,
        "main",
        &[(b".git", lifeos_vcs::EntryKind::File, b"gitdir: x\n")],
        "hostile",
    )
    .to_hex();
    drop(repo);
    ok(&src, &["push"]);
    ok(&copy, &["fetch"]);
    let err = fails(&copy, &["pull"]);
    assert!(
        err.contains(&format!(".git in commit {}", &commit[..12])),
        "pull: {err}"
    );
    assert_eq!(listing(&copy), before, "pull changed the folder");
    let fresh = scene.path("fresh");
    let err = fails(
        &scene.base,
        &["clone", remote.to_str().unwrap(), fresh.to_str().unwrap()],
    );
    assert!(
        err.contains(&format!(".git in commit {}", &commit[..12])),
        "clone: {err}"
    );
    assert!(!fresh.join(".git").exists());
    fsck_problems_only_name(&copy, ".git");
    scene.assert_untouched();
}

/// A snapshot never records what a file system reads as `.git` or `.lifeos`, of any kind
/// and at any depth: a worktree's or submodule's `.git` file, a `.GIT` folder.
#[test]
fn a_snapshot_never_records_a_repository_s_own_names() {
    let scene = Scene::new();
    let d = victim(&scene, "snap");
    write(
        &d,
        "sub/.git",
        b"gitdir: ../../elsewhere/.git/worktrees/sub\n",
    );
    write(&d, "sub/kept.md", b"kept\n");
    write(&d, "other/.GIT/config", b"[core]\n");
    write(&d, "x/.LifeOS/config", b"format = 1\n");
    write(&d, "GIT~1/config", b"x");
    ok(&d, &["commit", "-m", "everything"]);
    let files = ok(&d, &["ls"]);
    assert!(files.contains("sub/kept.md"), "{files}");
    for never in [".git", ".GIT", ".LifeOS", "GIT~1"] {
        assert!(!files.contains(never), "{never} was recorded:\n{files}");
    }
    fsck_clean(&d);
}

/// `git` in `dir` with an identity and no user or system configuration; returns its
/// output, failing or not.
fn git_run(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=V", "-c", "user.email=v@example.org"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

/// A hook rule that runs `command` with approval "auto".
fn auto_hook_rule(command: &str) -> String {
    format!(
        "[[rule]]\nname = \"on checkout\"\non = \"hook\"\nhook = \"post-checkout\"\napproval = \"auto\"\n[rule.run]\nargv = [\"sh\", \"-c\", {command:?}]\n"
    )
}

/// H1: in a folder shared with git, git's own commands cannot reach lifeos's store. A
/// branch that brings its rules and `.lifeos/trusted-rules` runs nothing on a plain `git
/// checkout`; a branch with `.lifeos` as a symlink, `git clean -fdx` and `git stash -u`
/// leave the store, its trust and its history as they were.
#[test]
fn git_checkout_clean_and_stash_never_reach_the_store_of_a_colocated_folder() {
    let scene = Scene::new();
    let w = colocated(&scene, "work");
    write(&w, "notes.md", b"mine\n");
    ok(&w, &["commit", "-m", "mine"]);
    ok(&w, &["git", "hooks", "install"]);
    let store = w.join(".git/lifeos");
    assert!(store.join("config").is_file());
    let ops_before = op_count(&w);

    // The attacker's branch: rules that run a command on checkout, and a trust file
    // naming them, where lifeos kept trust before.
    let attacker = scene.path("attacker");
    assert!(git_run(
        &scene.base,
        &[
            "clone",
            "-q",
            w.to_str().unwrap(),
            attacker.to_str().unwrap()
        ]
    )
    .status
    .success());
    let rules = auto_hook_rule(&marker(&scene, "rules"));
    write(&attacker, "lifeos.rules.toml", rules.as_bytes());
    let rules_id = blake3::hash(rules.as_bytes()).to_hex().to_string();
    write(
        &attacker,
        ".lifeos/trusted-rules",
        format!("{rules_id}\n").as_bytes(),
    );
    write(
        &attacker,
        ".lifeos/config",
        b"[ui]\npager = \"sh -c 'touch PWNED-pager'\"\n",
    );
    assert!(git_run(&attacker, &["add", "-f", "."]).status.success());
    assert!(git_run(&attacker, &["commit", "-q", "-m", "feature"])
        .status
        .success());
    // A branch with the rules alone (lifeos imports it; nothing trusts them).
    assert!(
        git_run(&attacker, &["checkout", "-q", "-b", "rules", "HEAD~1"])
            .status
            .success()
    );
    write(&attacker, "lifeos.rules.toml", rules.as_bytes());
    assert!(git_run(&attacker, &["add", "lifeos.rules.toml"])
        .status
        .success());
    assert!(git_run(&attacker, &["commit", "-q", "-m", "rules"])
        .status
        .success());
    // And a branch where `.lifeos` is a symlink out of the folder.
    assert!(
        git_run(&attacker, &["checkout", "-q", "-b", "link", "main~1"])
            .status
            .success()
    );
    std::os::unix::fs::symlink(&scene.base, attacker.join(".lifeos")).unwrap();
    assert!(git_run(&attacker, &["add", "-f", ".lifeos"])
        .status
        .success());
    assert!(git_run(&attacker, &["commit", "-q", "-m", "link"])
        .status
        .success());

    let a = attacker.to_str().unwrap();
    // The attacker's main is the feature branch (its clone's main, one commit on).
    let out = git_run(
        &w,
        &["fetch", "-q", a, "main:feature", "rules:rules", "link:link"],
    );
    ran_ok(&out);
    let trust_before = std::fs::read_dir(&store).unwrap().count();
    let config_before = std::fs::read(store.join("config")).unwrap();
    // A plain `git checkout` of each branch (the hooks run lifeos), then back.
    for branch in ["feature", "rules", "link"] {
        let out = git_run(&w, &["checkout", "-q", branch]);
        ran_ok(&out);
        scene.assert_untouched();
        assert!(
            store.join("config").is_file(),
            "git checkout {branch} removed the store"
        );
        assert_eq!(std::fs::read(store.join("config")).unwrap(), config_before);
        assert!(
            !store.join("trusted-rules").exists(),
            "trust came with {branch}"
        );
        // lifeos goes on working; a branch whose history holds `.lifeos` is refused by
        // name, and no other is lost.
        let out = run(&w, &["log"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{branch}: {err}");
        if branch != "rules" {
            assert!(
                err.contains(&format!("ref refs/heads/{branch} was not imported")),
                "{branch}: {err}"
            );
        }
        scene.assert_untouched();
        let out = git_run(&w, &["checkout", "-q", "-f", "main"]);
        ran_ok(&out);
    }
    // git's commands that delete what they do not track.
    write(&w, "scratch.txt", b"untracked\n");
    assert!(git_run(&w, &["stash", "-u"]).status.success());
    assert!(git_run(&w, &["clean", "-fdx"]).status.success());
    assert!(
        store.join("config").is_file(),
        "git clean -fdx removed the store"
    );
    assert!(std::fs::read_dir(&store).unwrap().count() >= trust_before);
    // The history is whole: every operation is still there, and the folder works.
    assert!(op_count(&w) >= ops_before);
    write(&w, "more.md", b"more\n");
    ok(&w, &["commit", "-m", "after"]);
    fsck_clean(&w);
    scene.assert_untouched();
}

/// A store an earlier lifeos kept at `.lifeos` beside `.git` (with `/.lifeos/` in git's
/// exclude file) moves into `.git/lifeos` on the next command, history and trust whole;
/// a `.lifeos` that git tracks is never used.
#[test]
fn an_older_colocated_store_moves_into_git_and_a_tracked_one_is_refused() {
    let scene = Scene::new();
    let w = colocated(&scene, "old");
    write(&w, "notes.md", b"mine\n");
    ok(&w, &["commit", "-m", "mine"]);
    let log = ok(&w, &["log"]);
    // As an earlier lifeos left it.
    std::fs::rename(w.join(".git/lifeos"), w.join(".lifeos")).unwrap();
    std::fs::write(w.join(".lifeos/trusted-rules"), b"00\n").unwrap();
    std::fs::write(w.join(".git/info/exclude"), b"# git's own\n/.lifeos/\n").unwrap();
    let out = run(&w, &["log"]);
    assert!(out.status.success());
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(
        note.contains("moved lifeos's store") && note.contains(".git/lifeos"),
        "{note}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), log);
    assert!(!w.join(".lifeos").exists());
    assert_eq!(
        std::fs::read(w.join(".git/lifeos/trusted-rules")).unwrap(),
        b"00\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.join(".git/info/exclude")).unwrap(),
        "# git's own\n"
    );
    fsck_clean(&w);

    // A `.lifeos` that git tracks, in a plain git clone: refused, its config unused.
    let t = scene.path("tracked");
    std::fs::create_dir(&t).unwrap();
    git(&t, &["init", "-q", "-b", "main"]);
    let planted = scene.path("planted");
    std::fs::create_dir(&planted).unwrap();
    ok(&planted, &["init"]);
    copy_dir(&planted.join(".lifeos"), &t.join(".lifeos"));
    std::fs::write(
        t.join(".lifeos/config"),
        format!(
            "{}\n[ui]\npager = \"sh -c '{}'\"\n",
            std::fs::read_to_string(planted.join(".lifeos/config")).unwrap(),
            marker(&scene, "pager")
        ),
    )
    .unwrap();
    assert!(git_run(&t, &["add", "-f", ".lifeos"]).status.success());
    let err = fails(&t, &["log"]);
    assert!(err.contains("is tracked by the git repository"), "{err}");
    scene.assert_untouched();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A victim's repository with an encrypted folder remote `origin` pushed to: the
/// repository, and the remote's folder (what its storage holds).
fn pushed_encrypted(scene: &Scene) -> (PathBuf, PathBuf) {
    let d = victim(scene, "dev");
    let remote = scene.path("remote");
    let url = remote.to_str().unwrap();
    let dev = TestEnv::at(&d).with_passphrase();
    dev.ok(&["remote", "add", "origin", url, "--encrypt"]);
    dev.ok(&["push"]);
    (d, remote)
}

/// Whether any file under `dir` holds `needle`.
fn holds(dir: &Path, needle: &[u8]) -> bool {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if std::fs::read(e.path())
                .unwrap_or_default()
                .windows(needle.len())
                .any(|w| w == needle)
            {
                return true;
            }
        }
    }
    false
}

/// H2 with a folder remote: whoever writes the remote's storage rewrites its config to
/// plain and removes its keys; the next push is refused before anything is sent, the
/// secret never reaches the storage, and `remote list` says what was seen.
#[test]
fn a_remote_downgraded_to_plain_by_its_storage_is_refused() {
    let scene = Scene::new();
    let (d, remote) = pushed_encrypted(&scene);
    let dev = TestEnv::at(&d).with_passphrase();
    // The server's move.
    std::fs::write(remote.join("config"), "format = 1\nencrypted = false\n").unwrap();
    std::fs::remove_dir_all(remote.join("keys")).unwrap();
    write(&d, "diary.md", b"SECRET second entry\n");
    dev.ok(&["commit", "-m", "secret"]);
    let err = dev.fails(&["push"]);
    assert!(
        err.contains("was encrypted when this repository first used it")
            && err.contains("nothing was sent"),
        "{err}"
    );
    assert!(
        !holds(&remote, b"SECRET second entry"),
        "plaintext reached the remote"
    );
    for args in [vec!["fetch"], vec!["pull"]] {
        let err = dev.fails(&args);
        assert!(err.contains("was encrypted"), "{args:?}: {err}");
    }
    let list = dev.ok(&["remote", "list"]);
    assert!(list.contains("(encrypted)"), "{list}");
    // A remote added to be encrypted and found plain the first time is refused too.
    let e = victim(&scene, "other");
    let other = TestEnv::at(&e).with_passphrase();
    let plain = scene.path("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("config"), "format = 1\nencrypted = false\n").unwrap();
    other.ok(&[
        "remote",
        "add",
        "origin",
        plain.to_str().unwrap(),
        "--encrypt",
    ]);
    let err = other.fails(&["push"]);
    assert!(err.contains("it was added to be"), "{err}");
    assert!(!holds(&plain, b"mine"), "plaintext reached the remote");
    scene.assert_untouched();
}

/// The same with a real S3 server, rewritten through its own filer API as its operator
/// could: the encrypted remote's config becomes plain; the push is refused and the
/// server never holds the plaintext.
#[test]
fn an_s3_remote_downgraded_by_its_server_is_refused() {
    let s3 = S3Server::start();
    let scene = Scene::new();
    let d = victim(&scene, "dev");
    let url = format!("s3://{S3_BUCKET}/me");
    s3.at(&d).ok(&["remote", "add", "origin", &url]);
    s3.at(&d).ok(&["push"]);
    let filer = format!(
        "http://127.0.0.1:{}/buckets/{S3_BUCKET}/me/config",
        s3.port + 3
    );
    let plain = scene.path("plain-config");
    std::fs::write(&plain, "format = 1\nencrypted = false\n").unwrap();
    let out = Command::new("curl")
        .args(["-sf", "-X", "PUT", "--data-binary"])
        .arg(format!("@{}", plain.display()))
        .arg(&filer)
        .output()
        .unwrap();
    ran_ok(&out);
    let got = Command::new("curl").args(["-sf", &filer]).output().unwrap();
    assert_eq!(
        got.stdout, b"format = 1\nencrypted = false\n",
        "the server's config was not rewritten"
    );
    write(&d, "diary.md", b"SECRET second entry\n");
    s3.at(&d).ok(&["commit", "-m", "secret"]);
    let err = s3.at(&d).fails(&["push"]);
    assert!(
        err.contains("was encrypted when this repository first used it"),
        "{err}"
    );
    assert!(
        !holds(s3.data.path(), b"SECRET second entry"),
        "plaintext reached the server"
    );
}

/// What a server can do short of breaking the encryption: roll its heads back to an
/// earlier push, answer with oversized files, swap objects between packs. Each is said by
/// name; nothing wrong is merged or written; the repository stays whole.
#[test]
fn a_server_rolling_back_oversizing_or_swapping_is_noticed() {
    let scene = Scene::new();
    let (d, remote) = pushed_encrypted(&scene);
    let dev = TestEnv::at(&d).with_passphrase();
    let heads = |r: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(r.join("heads"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        v.sort();
        v
    };
    let old: Vec<(PathBuf, Vec<u8>)> = heads(&remote)
        .into_iter()
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect();
    write(&d, "later.md", b"later\n");
    dev.ok(&["commit", "-m", "later"]);
    dev.ok(&["push"]);
    // Rollback: the server puts the earlier heads back.
    for p in heads(&remote) {
        std::fs::remove_file(p).unwrap();
    }
    for (p, b) in &old {
        std::fs::write(p, b).unwrap();
    }
    let out = dev.run(&["fetch"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("no longer shows operation") && err.contains("rolled back"),
        "{err}"
    );
    // Pushing again puts it back, and the warning goes.
    dev.ok(&["push"]);
    let out = dev.run(&["fetch"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("no longer shows"));

    // Oversized: a head of 8 MiB is left out, named; the rest is fetched.
    let copy = scene.path("copy");
    let copied = TestEnv::at(&copy).with_passphrase();
    TestEnv::at(&scene.base).with_passphrase().ok(&[
        "clone",
        remote.to_str().unwrap(),
        copy.to_str().unwrap(),
    ]);
    std::fs::write(remote.join("heads/ffff"), vec![7u8; 8 << 20]).unwrap();
    let out = copied.run(&["fetch"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("heads/ffff is larger than"), "{err}");
    // What an unreadable head reaches is unknown: gc --remote removes nothing.
    let err = copied.fails(&["gc", "--remote", "origin"]);
    assert!(err.contains("heads/ffff"), "{err}");
    std::fs::remove_file(remote.join("heads/ffff")).unwrap();

    // Swapped: the server answers for the new pack with an older one's bytes (its index
    // unchanged): the objects fail their checks, and nothing is merged.
    let packs = |r: &Path| -> std::collections::BTreeSet<PathBuf> {
        std::fs::read_dir(r.join("packs"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect()
    };
    let before_push = packs(&remote);
    write(&d, "swap.md", b"swap\n");
    dev.ok(&["commit", "-m", "swap"]);
    dev.ok(&["push"]);
    let new: Vec<PathBuf> = packs(&remote).difference(&before_push).cloned().collect();
    let older = before_push.iter().next().unwrap();
    for p in &new {
        std::fs::copy(older, p).unwrap();
    }
    let before = op_count(&copy);
    let err = copied.fails(&["fetch"]);
    assert!(err.contains("packs/"), "{err}");
    assert_eq!(op_count(&copy), before, "something was merged");
    fsck_clean(&copy);
    fsck_clean(&d);
    scene.assert_untouched();
}

// Actions: what runs is what a person approved on this machine, in an environment of
// its own, once.

/// A repository with `rules` committed and trusted, and a script `tools/mark.sh` (mode
/// 755) that appends its first argument and the repository it ran in to `log`.
fn with_rules(scene: &Scene, name: &str, rules: &str, log: &Path) -> PathBuf {
    let d = victim(scene, name);
    write(
        &d,
        "tools/mark.sh",
        format!(
            "#!/bin/sh\necho \"$1 in $LIFEOS_REPO\" >> {}\n",
            log.display()
        )
        .as_bytes(),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        d.join("tools/mark.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    trusted_rules(&d, rules);
    d
}

/// A repository with `rules` (see [`with_rules`]) where `inbox/a.pdf` was committed:
/// it, and the id of the action proposed for the file.
fn proposed(scene: &Scene, name: &str, rules: &str, log: &Path) -> (PathBuf, String) {
    let d = with_rules(scene, name, rules, log);
    write(&d, "inbox/a.pdf", b"a");
    ok(&d, &["commit", "-m", "a"]);
    let id = action_for(&d, "inbox/a.pdf")["id"]
        .as_str()
        .unwrap()
        .to_string();
    (d, id)
}

/// A rule that runs `tools/mark.sh {path}` for each file committed under `inbox/`.
fn mark_rule(approval: &str) -> String {
    format!(
        "[[rule]]\nname = \"mark\"\non = \"commit\"\npaths = [\"inbox/**\"]\napproval = \"{approval}\"\n[rule.run]\nargv = [\"./tools/mark.sh\", \"{{path}}\"]\n"
    )
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// M1: an approval made on one device does not run on another that never approved it
/// (nor trusted its rules), so it runs once, where it was approved; a rejection on one
/// device outranks an approval made a second later on another.
#[test]
fn approvals_run_where_they_were_made_and_a_rejection_outranks_an_approval() {
    let scene = Scene::new();
    let log = scene.path("ran.log");
    let b = with_rules(&scene, "b", &mark_rule("required"), &log);
    let remote = scene.path("remote");
    ok(&b, &["remote", "add", "origin", remote.to_str().unwrap()]);
    write(&b, "inbox/x.pdf", b"x");
    ok(&b, &["commit", "-m", "x"]);
    let id = action_for(&b, "inbox/x.pdf")["id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&b, &["approve", &id]);
    ok(&b, &["push"]);
    let a = scene.path("a");
    ok(
        &scene.base,
        &["clone", remote.to_str().unwrap(), a.to_str().unwrap()],
    );
    assert_eq!(action_for(&a, "inbox/x.pdf")["state"], "approved_elsewhere");
    // Rules that came with the clone fire nothing until trusted here.
    write(&a, "inbox/z.pdf", b"z");
    let out = run(&a, &["commit", "-m", "z"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not trusted"));
    assert!(actions(&a)
        .iter()
        .all(|x| x["event"]["path"] != "inbox/z.pdf"));
    let out = run(&a, &["actions", "run"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("approved on another device"), "{said}");
    // Trusting the rules here does not make B's approval A's.
    ok(&a, &["rules", "trust"]);
    let _ = run(&a, &["actions", "run"]);
    assert!(
        lines(&log).is_empty(),
        "the clone ran B's approval: {:?}",
        lines(&log)
    );
    ok(&b, &["actions", "run"]);
    assert_eq!(lines(&log).len(), 1, "{:?}", lines(&log));
    assert!(lines(&log)[0].ends_with(&format!("in {}", b.display())));

    // Round two: A rejects, B approves a second later; both push and fetch.
    ok(&b, &["push"]);
    write(&b, "inbox/y.pdf", b"y");
    ok(&b, &["commit", "-m", "y"]);
    ok(&b, &["push"]);
    ok(&a, &["fetch"]);
    let id = action_for(&a, "inbox/y.pdf")["id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&a, &["reject", &id]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    ok(&b, &["approve", &id]);
    ok(&a, &["push"]);
    ok(&b, &["fetch"]);
    assert_eq!(action_for(&b, "inbox/y.pdf")["state"], "rejected");
    let _ = run(&b, &["actions", "run"]);
    ok(&b, &["push"]);
    ok(&a, &["fetch"]);
    assert_eq!(action_for(&a, "inbox/y.pdf")["state"], "rejected");
    assert_eq!(
        lines(&log).len(),
        1,
        "a rejected action ran: {:?}",
        lines(&log)
    );
    scene.assert_untouched();
}

/// M3: the approval pins what a command runs. A script replaced after the approval is
/// not run: the action is blocked with a receipt naming what changed. A program earlier
/// on PATH when it runs is not the one run: the program approved is.
#[test]
fn what_an_approval_pins_cannot_change_before_it_runs() {
    let scene = Scene::new();
    let log = scene.path("ran.log");
    let (d, id) = proposed(&scene, "pins", &mark_rule("required"), &log);
    ok(&d, &["approve", &id]);
    let shown = json(&d, &["actions", "show", &id]);
    let pins = &shown["actions"][0]["approval"]["pins"];
    assert!(
        pins["program"]["path"]
            .as_str()
            .unwrap()
            .ends_with("/tools/mark.sh"),
        "{shown}"
    );
    write(
        &d,
        "tools/mark.sh",
        format!("#!/bin/sh\n{}\n", marker(&scene, "replaced")).as_bytes(),
    );
    let out = String::from_utf8_lossy(&run(&d, &["actions", "run"]).stdout).into_owned();
    assert!(
        out.contains("blocked") && out.contains("tools/mark.sh changed since it was approved"),
        "{out}"
    );
    let r = receipts(&d);
    assert_eq!(r.last().unwrap()["outcome"], "blocked");
    assert!(lines(&log).is_empty());

    // PATH: a tool found on PATH when approved; a hostile one put earlier on PATH later.
    let good = scene.path("good");
    let evil = scene.path("evil");
    for (dir, body) in [
        (&good, format!("echo good >> {}", log.display())),
        (&evil, marker(&scene, "path")),
    ] {
        std::fs::create_dir(dir).unwrap();
        std::fs::write(dir.join("mytool"), format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("mytool"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    let rules = "[[rule]]\nname = \"tool\"\non = \"commit\"\npaths = [\"tool/**\"]\n[rule.run]\nargv = [\"mytool\"]\n";
    write(&d, "tools/mark.sh", b"#!/bin/sh\n");
    write(&d, "lifeos.rules.toml", rules.as_bytes());
    ok(&d, &["commit", "-m", "tool rule"]);
    ok(&d, &["rules", "trust"]);
    write(&d, "tool/x", b"x");
    ok(&d, &["commit", "-m", "x"]);
    let id = action_for(&d, "tool/x")["id"].as_str().unwrap().to_string();
    let path = std::env::var("PATH").unwrap();
    let out = TestEnv::at(&d)
        .with("PATH", format!("{}:{path}", good.display()))
        .run(&["approve", &id]);
    succeeded(out, &["approve"]);
    let out = TestEnv::at(&d)
        .with(
            "PATH",
            format!("{}:{}:{path}", evil.display(), good.display()),
        )
        .run(&["actions", "run"]);
    ran_ok(&out);
    assert_eq!(lines(&log), vec!["good"]);
    scene.assert_untouched();
}

/// M5: a rule whose action commits (through lifeos, or through git with the hooks
/// installed) does not set itself off again: one commit by a person, one run.
#[test]
fn what_an_action_does_never_fires_rules_again() {
    let scene = Scene::new();
    let stamps = scene.path("stamps");
    let lifeos = bin();
    // Through lifeos.
    let rules = format!(
        "[[rule]]\nname = \"loop\"\non = \"commit\"\npaths = [\"**\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"sh\", \"-c\", \"echo s >> {s}; n=$(wc -l < {s}); [ $n -lt 5 ] && echo $n > loop-$n.txt && {l} commit -m again\"]\n",
        s = stamps.display(),
        l = lifeos.display()
    );
    let d = victim(&scene, "loop");
    trusted_rules(&d, &rules);
    write(&d, "a.md", b"a\n");
    let out = run(&d, &["commit", "-m", "a"]);
    ran_ok(&out);
    assert_eq!(
        lines(&stamps).len(),
        1,
        "the rule set itself off: {:?}",
        lines(&stamps)
    );

    // Through git's hooks: a post-commit rule whose command commits with git.
    let g = colocated(&scene, "git");
    ok(&g, &["git", "hooks", "install"]);
    let stamps2 = scene.path("stamps2");
    let rules = format!(
        "[[rule]]\nname = \"loop\"\non = \"hook\"\nhook = \"post-commit\"\napproval = \"auto\"\n[rule.run]\nargv = [\"sh\", \"-c\", \"echo s >> {s}; [ $(wc -l < {s}) -lt 5 ] && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m again\"]\n",
        s = stamps2.display()
    );
    trusted_rules(&g, &rules);
    let out = git_run(&g, &["commit", "-q", "--allow-empty", "-m", "by a person"]);
    ran_ok(&out);
    assert_eq!(
        lines(&stamps2).len(),
        1,
        "the hook rule set itself off: {:?}",
        lines(&stamps2)
    );
    // And no action runs from inside an action.
    let out = TestEnv::at(&d)
        .with("LIFEOS_ACTION_ID", "x")
        .run(&["actions", "run"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("runs inside action x"));
}

/// L1: an approval holds at most 30 days, and one dated ahead of the clock (the clock
/// was put back) is no approval.
#[test]
fn approvals_are_bounded_in_time() {
    let scene = Scene::new();
    let log = scene.path("ran.log");
    let (d, id) = proposed(&scene, "ttl", &mark_rule("required"), &log);
    let err = fails(&d, &["approve", &id, "--ttl", "100000000d"]);
    assert!(err.contains("30 days"), "{err}");
    let tomorrow = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24);
    TestEnv::at(&d)
        .now(&tomorrow.to_string())
        .ok(&["approve", &id]);
    let out = String::from_utf8_lossy(&run(&d, &["actions", "run"]).stdout).into_owned();
    assert!(out.contains("approval_dated_in_the_future"), "{out}");
    assert!(lines(&log).is_empty());
}

/// L2: an action gets none of the environment's secrets (a remote's passphrase, cloud
/// credentials), only what its rule names, and the receipt keeps none of them.
#[test]
fn actions_get_a_clean_environment_and_receipts_keep_no_secrets() {
    let scene = Scene::new();
    let rules = "[[rule]]\nname = \"env\"\non = \"commit\"\npaths = [\"**\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"env\"]\nenv = [\"GITHUB_TOKEN\"]\n";
    let d = victim(&scene, "env");
    trusted_rules(&d, rules);
    write(&d, "a.md", b"a\n");
    let out = TestEnv::at(&d)
        .with("LIFEOS_PASSPHRASE", "correct-horse-battery")
        .with("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIK7MDENG")
        .with("GITHUB_TOKEN", "ghtoken-value-123")
        .run(&["commit", "-m", "a"]);
    ran_ok(&out);
    let r = receipts(&d);
    let last = r.last().unwrap();
    assert_eq!(last["outcome"], "executed", "{last}");
    let shown = ok(&d, &["receipt", "show", last["id"].as_str().unwrap()]);
    for secret in [
        "correct-horse-battery",
        "wJalrXUtnFEMIK7MDENG",
        "ghtoken-value-123",
    ] {
        assert!(
            !shown.contains(secret),
            "{secret} is in the receipt:\n{shown}"
        );
    }
    assert!(shown.contains("GITHUB_TOKEN=[REDACTED]"), "{shown}");
    assert!(
        !shown.contains("LIFEOS_PASSPHRASE") && !shown.contains("AWS_"),
        "{shown}"
    );
    assert!(shown.contains("LIFEOS_ACTION_ID="), "{shown}");
}

/// L4 and M2: rules match a file's real name (a tab in it), a name starting with `-`
/// reaches a command as `./-...`, a name that is not UTF-8 fires nothing and says so;
/// a shell line quoting a placeholder is refused by `rules check` and at commit.
#[test]
fn file_names_reach_rules_as_they_are_and_never_as_options() {
    let scene = Scene::new();
    let rules = "[[rule]]\nname = \"echo\"\non = \"commit\"\npaths = [\"**\"]\n[rule.run]\nargv = [\"echo\", \"{path}\"]\n";
    let d = victim(&scene, "names");
    trusted_rules(&d, rules);
    write(&d, "inbox/tab\tname.pdf", b"t");
    write(&d, "-n", b"n");
    std::fs::write(
        d.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"caf\xe9.txt")),
        b"c",
    )
    .unwrap();
    let out = run(&d, &["commit", "-m", "names"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("not UTF-8"), "{err}");
    let all = actions(&d);
    let argv = |path: &str| {
        all.iter()
            .find(|a| a["event"]["path"] == path)
            .unwrap_or_else(|| panic!("no action for {path:?}: {all:?}"))["payload"]["argv"]
            .clone()
    };
    assert_eq!(
        argv("inbox/tab\tname.pdf"),
        serde_json::json!(["echo", "inbox/tab\tname.pdf"])
    );
    assert_eq!(argv("-n"), serde_json::json!(["echo", "./-n"]));

    let quoted = "[[rule]]\nname = \"q\"\non = \"commit\"\npaths = [\"**\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"echo \\\"new file: {path}\\\" >> inbox.log\"]\nshell = true\n";
    write(&d, "lifeos.rules.toml", quoted.as_bytes());
    let err = fails(&d, &["rules", "check"]);
    assert!(err.contains("{path} stands inside quotes"), "{err}");
    ok(&d, &["commit", "-m", "quoted rules"]);
    let err = fails(&d, &["rules", "trust"]);
    assert!(err.contains("stands inside quotes"), "{err}");
}

/// L8: `rules trust` trusts what `rules check` read: it refuses while the folder's file
/// differs from the committed one, and takes the id `rules check` printed.
#[test]
fn rules_trust_trusts_what_rules_check_read() {
    let scene = Scene::new();
    let d = victim(&scene, "check");
    let first = mark_rule("required");
    write(&d, "lifeos.rules.toml", first.as_bytes());
    ok(&d, &["commit", "-m", "rules"]);
    write(&d, "lifeos.rules.toml", mark_rule("auto").as_bytes());
    let checked = ok(&d, &["rules", "check"]);
    let err = fails(&d, &["rules", "trust"]);
    assert!(err.contains("differs from the one at @"), "{err}");
    ok(&d, &["commit", "-m", "auto"]);
    let id = checked
        .split(['(', ')'])
        .nth(1)
        .expect("rules check prints the file's id");
    let out = ok(&d, &["rules", "trust", "--id", id]);
    assert!(out.contains(id), "{out}");
    let err = fails(&d, &["rules", "trust", "--id", "00000000"]);
    assert!(err.contains("changed since you checked it"), "{err}");
}

// Hooks and watch.

/// M4: `git hooks install` writes only into this repository's own `.git`: a global
/// `core.hooksPath` (every repository's hooks) and one inside the work tree (committed
/// for everyone) are refused unless `--force`; uninstall puts back exactly what was
/// there, and a person's hook that only copies lifeos's text is set aside, not replaced.
#[test]
fn hooks_are_installed_only_into_this_repository_s_git_folder() {
    let scene = Scene::new();
    let w = colocated(&scene, "repo");
    let global_hooks = scene.path("globalhooks");
    std::fs::create_dir(&global_hooks).unwrap();
    std::fs::write(global_hooks.join("post-commit"), "#!/bin/sh\necho mine\n").unwrap();
    let gitconfig = scene.path("gitconfig");
    std::fs::write(
        &gitconfig,
        format!("[core]\n\thooksPath = {}\n", global_hooks.display()),
    )
    .unwrap();
    let global = TestEnv::at(&w).with("GIT_CONFIG_GLOBAL", &gitconfig);
    let with_global = |args: &[&str]| global.run(args);
    let out = with_global(&["git", "hooks", "install"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("outside this repository's git folder") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&global_hooks).unwrap().count(),
        1,
        "the global folder was written"
    );
    // A hooks folder inside the work tree (tracked by git) is refused too.
    git(&w, &["config", "core.hooksPath", ".githooks"]);
    let err = fails(&w, &["git", "hooks", "install"]);
    assert!(
        err.contains("outside this repository's git folder"),
        "{err}"
    );
    assert!(!w.join(".githooks").exists());
    // With --force it goes there, and uninstall puts back what was.
    let out = with_global(&["git", "hooks", "install", "--force"]);
    ran_ok(&out);
    git(&w, &["config", "--unset", "core.hooksPath"]);
    // Inside .git: fine. A hook of the person's that copies lifeos's text is theirs.
    let hooks = w.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let copied =
        "#!/bin/sh\n# lifeos-hook 1: installed by `lifeos git hooks install`\necho my own\n";
    std::fs::write(hooks.join("post-merge"), copied).unwrap();
    ok(&w, &["git", "hooks", "install"]);
    assert_eq!(
        std::fs::read_to_string(hooks.join("post-merge.lifeos-user")).unwrap(),
        copied
    );
    ok(&w, &["git", "hooks", "uninstall"]);
    assert_eq!(
        std::fs::read_to_string(hooks.join("post-merge")).unwrap(),
        copied
    );
    assert!(!hooks.join("post-commit").exists());
    scene.assert_untouched();
}

/// L7: a reader that stops reading (`lifeos ... | head -1`) ends lifeos quietly, with
/// no panic and no backtrace, after what it did is done.
#[test]
fn a_closed_pipe_ends_output_quietly() {
    let scene = Scene::new();
    let w = colocated(&scene, "repo");
    let mut child = TestEnv::at(&w)
        .command(["git", "hooks", "install"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    assert!(
        w.join(".git/hooks/post-commit").is_file(),
        "the hooks were installed"
    );
    // Many lines into a reader that reads one.
    for i in 0..200 {
        write(&w, &format!("n/{i}.md"), b"x");
    }
    ok(&w, &["commit", "-m", "many"]);
    let mut child = TestEnv::at(&w)
        .command(["ls"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

/// L3: `lifeos watch` stops with a clear error when its folder is moved away, instead of
/// retrying forever.
#[test]
fn watch_stops_when_its_folder_is_moved() {
    let scene = Scene::new();
    let w = scene.path("watched");
    std::fs::create_dir(&w).unwrap();
    ok(&w, &["init"]);
    let log_path = scene.path("watch.log");
    let err_path = scene.path("watch.err");
    let mut watcher = TestEnv::at(&w)
        .command(["watch", "--quiet-period", "200ms", "--no-ingest"])
        .stdout(std::fs::File::create(&log_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    wait_for("the watcher to start", || log().contains("watching"));
    std::fs::rename(&w, scene.path("moved")).unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = watcher.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > std::time::Duration::from_secs(20) {
            watcher.kill().unwrap();
            panic!("watch did not stop after its folder moved:\n{}", log());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(!status.success());
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(err.contains("was moved or deleted"), "{err}");
    assert!(
        log()
            .lines()
            .filter(|l| l.contains("not committed"))
            .count()
            < 3,
        "{}",
        log()
    );
}

/// A tree git would refuse (from another device, or imported before lifeos refused such
/// trees) is never exported to git: the export names the commit and the path.
#[test]
fn export_refuses_a_tree_git_would_refuse() {
    let scene = Scene::new();
    let d = victim(&scene, "export");
    let commit = commit_hostile(&d, &[(b"a/.Git/config", lifeos_vcs::EntryKind::File, b"x")]);
    let out = scene.path("out.git");
    let err = fails(&d, &["git", "export", out.to_str().unwrap()]);
    assert!(
        err.contains(&format!("commit {} has a/.Git,", &commit[..12]))
            && err.contains("nothing was exported"),
        "{err}"
    );
}
