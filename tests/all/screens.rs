//! Whole screens: what a person sees of each command, kept as snapshots in
//! `tests/all/snapshots/` (one `.snap` file each, headed by the command that printed it).
//! Each test runs in a pinned [`TestEnv`], so change ids, operation ids and times are the
//! same on every run and machine, and a change to an output shows as a diff to review.
//! After a change that is meant, `INSTA_UPDATE=always cargo test --test all screens`
//! writes the new snapshots; read each one before committing it.

use crate::common::*;

/// Asserts that what `lifeos args...` shows in `env` is the snapshot `name`.
fn assert_screen(env: &TestEnv, name: &str, args: &[&str]) {
    assert_shown(name, args, env.screen(args));
}

/// Asserts that `screen`, what `lifeos args...` showed, is the snapshot `name`.
fn assert_shown(name: &str, args: &[&str], screen: String) {
    let mut settings = insta::Settings::clone_current();
    settings.set_description(shown(args));
    settings.set_omit_expression(true);
    settings.bind(|| insta::assert_snapshot!(name, screen));
}

/// `lifeos args...` as a person would type it: quoted where a shell would need it.
fn shown(args: &[&str]) -> String {
    let plain = |a: &str| {
        !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:@=,+".contains(c))
    };
    std::iter::once("lifeos".to_string())
        .chain(args.iter().map(|a| match plain(a) {
            true => a.to_string(),
            false => format!("'{}'", a.replace('\'', r"'\''")),
        }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A history: a branch, a merge, a tag, a deleted photo; status before and after.
#[test]
fn history() {
    let env = TestEnv::pinned_repo();
    let d = env.path();
    write(d, "notes/plan.md", b"# Move\n\nFriday.\n");
    write(d, "photos/beach.jpg", &noise(40_000, 1));
    env.ok(&["commit", "-m", "Start the move plan"]);
    env.ok(&["branch", "create", "trip"]);
    write(d, "notes/plan.md", b"# Move\n\nSaturday, with Ann.\n");
    write(d, "notes/budget.md", b"Budget: 12,000\n");
    std::fs::remove_file(d.join("photos/beach.jpg")).unwrap();
    assert_screen(&env, "status_with_changes", &["status"]);
    env.ok(&["commit", "-m", "Move to Saturday"]);
    env.ok(&["checkout", "trip"]);
    write(d, "trip/route.txt", b"Oslo - Bergen\n");
    env.ok(&["commit", "-m", "Plan the route"]);
    env.ok(&["checkout", "main"]);
    env.ok(&["merge", "trip"]);
    env.ok(&["tag", "create", "v1"]);
    assert_screen(&env, "status_clean", &["status"]);
    assert_screen(&env, "log", &["log"]);
    assert_screen(&env, "log_graph", &["log", "--graph"]);
    assert_screen(&env, "show_merge", &["show"]);
    assert_screen(&env, "show_commit", &["show", "@-"]);
    assert_screen(&env, "op_log", &["op", "log"]);
    assert_screen(&env, "stats", &["stats"]);
}

/// One diff per kind of file: each plugin's words for what changed.
#[test]
fn diff_per_kind_of_file() {
    let env = TestEnv::pinned_repo();
    let d = env.path();
    let before = photo(64, 48);
    let mut after = before.clone();
    for x in 10..30 {
        for y in 5..15 {
            after.put_pixel(x, y, image::Rgb([255, 0, 0]));
        }
    }
    let blob = noise(300_000, 7);
    let mut edited_blob = blob.clone();
    edited_blob[150_000..150_100].fill(0);
    let files: [(&str, &[u8], &[u8]); 7] = [
        (
            "notes/todo.txt",
            b"pack the books\ncall the movers\nlabel the boxes\n",
            b"pack the books\ncall the movers on Monday\nlabel the boxes\nreturn the keys\n",
        ),
        (
            "notes/plan.md",
            b"# Move\n\nIntro.\n\n## Budget\n\n10,000\n\n## Team\n\nAnn.\n",
            b"# Move\n\nIntro.\n\n## Budget\n\n12,000\n\n## Team\n\nAnn and Bob.\n",
        ),
        (
            "config/app.json",
            br#"{"name": "lifeos", "version": 1, "tags": ["a", "b"]}"#,
            br#"{"name": "lifeos", "version": 2, "tags": ["a"], "beta": true}"#,
        ),
        (
            "data/people.csv",
            b"id,name,city\n1,Ann,Oslo\n2,Bob,Rome\n",
            b"id,name,city\n1,Ann,Bergen\n2,Bob,Rome\n3,Cy,Lima\n",
        ),
        ("photos/gradient.png", &png(&before), &png(&after)),
        ("data/blob.bin", &blob, &edited_blob),
        (
            "docs/report.pdf",
            &pdf(&["Cover page", "Summary of spending"]),
            &pdf(&["Cover page", "Summary of spending, revised", "Appendix"]),
        ),
    ];
    for (path, old, _) in &files {
        write(d, path, old);
    }
    env.ok(&["commit", "-m", "before"]);
    for (path, _, new) in &files {
        write(d, path, new);
    }
    for (name, path) in [
        ("diff_text", "notes/todo.txt"),
        ("diff_markdown", "notes/plan.md"),
        ("diff_json", "config/app.json"),
        ("diff_table", "data/people.csv"),
        ("diff_image", "photos/gradient.png"),
        ("diff_binary", "data/blob.bin"),
        ("diff_pdf", "docs/report.pdf"),
    ] {
        assert_screen(&env, name, &["diff", path]);
    }
    // A rename and a removal, between two commits.
    env.ok(&["commit", "-m", "after"]);
    std::fs::rename(d.join("notes/todo.txt"), d.join("notes/done.txt")).unwrap();
    std::fs::remove_file(d.join("data/blob.bin")).unwrap();
    env.ok(&["commit", "-m", "tidy"]);
    assert_screen(&env, "diff_two_commits", &["diff", "-r", "@-", "-r", "@"]);
}

/// Search hits and what ingest extracted: lines, pages and subtitle times.
#[test]
fn search_and_extract() {
    let env = TestEnv::pinned_repo();
    let d = env.path();
    write(
        d,
        "notes/plan.md",
        b"# Plan\nIntro text.\n\n## Budget\nThe quarterly budget is 12,000.\nReviewed in March.\n\n## Team\nAnn and Bob.\n",
    );
    write(
        d,
        "meetings/2026-11-03.srt",
        b"1\n00:00:01,000 --> 00:00:04,000\nHello everyone.\n\n2\n00:00:07,900 --> 00:00:12,100\nThe quarterly budget meeting moved to Friday afternoon.\n",
    );
    write(
        d,
        "docs/report.pdf",
        &pdf(&["Cover page", "Summary of the budget", "Appendix"]),
    );
    write(d, "data/blob.bin", &noise(1_000, 3));
    env.ok(&["commit", "-m", "library"]);
    assert_screen(&env, "search", &["search", "budget"]);
    assert_screen(&env, "search_no_hit", &["search", "giraffe"]);
    assert_screen(&env, "extract_list", &["extract", "list"]);
    assert_screen(
        &env,
        "extract_show_markdown",
        &["extract", "show", "notes/plan.md"],
    );
    assert_screen(
        &env,
        "extract_show_pdf",
        &["extract", "show", "docs/report.pdf"],
    );
    assert_screen(
        &env,
        "extract_show_subtitles",
        &["extract", "show", "meetings/2026-11-03.srt"],
    );
}

/// Entities: one shown now and as it was, its history, and queries.
#[test]
fn entities_and_queries() {
    let env = TestEnv::pinned_repo();
    env.ok(&[
        "entity",
        "add",
        "project",
        "name=Move house",
        "--id",
        "project:move",
    ]);
    env.ok(&[
        "entity",
        "add",
        "task",
        "title=Pack boxes",
        "due=2026-12-10",
        "estimate=2.5",
        "--id",
        "task:pack",
    ]);
    // Every entity is given its id: one `entity add` makes up is random in every build.
    env.ok(&[
        "entity",
        "add",
        "task",
        "title=Book the van",
        "due=2026-12-01",
        "--id",
        "task:van",
    ]);
    env.ok(&["entity", "link", "task:pack", "project", "project:move"]);
    env.ok(&["entity", "set", "task:pack", "status=done"]);
    assert_screen(&env, "entity_show", &["entity", "show", "task:pack"]);
    assert_screen(
        &env,
        "entity_show_at",
        &[
            "entity",
            "show",
            "task:pack",
            "--at",
            "2026-11-02T09:02:30Z",
        ],
    );
    assert_screen(&env, "entity_history", &["entity", "history", "task:pack"]);
    assert_screen(&env, "query", &["query", "task order by due"]);
    assert_screen(
        &env,
        "query_through_a_link",
        &["query", r#"task where project.name = "Move house""#],
    );
    assert_screen(&env, "query_parse_error", &["query", "task where due <"]);
}

/// Actions: the rules checked, what a commit proposed, one action shown.
#[test]
fn actions() {
    let env = TestEnv::pinned_repo();
    let d = env.path();
    write(
        d,
        "lifeos.rules.toml",
        b"[[rule]]\nname = \"notes\"\non = \"commit\"\npaths = [\"notes/*.md\"]\n[rule.run]\nargv = [\"echo\", \"{path}\"]\n",
    );
    env.ok(&["commit", "-m", "rules"]);
    assert_screen(&env, "rules_check", &["rules", "check"]);
    env.ok(&["rules", "trust"]);
    write(d, "notes/a.md", b"a\n");
    write(d, "notes/b.md", b"b\n");
    env.ok(&["commit", "-m", "notes"]);
    assert_screen(&env, "actions_list", &["actions"]);
    let listed = env.ok_json(&["actions"]);
    let first = listed["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["event"]["path"] == "notes/a.md")
        .unwrap_or_else(|| panic!("no action for notes/a.md: {listed}"))["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Each record of the action's history holds the id of the process that wrote it, so
    // its own id differs from run to run.
    let args = ["actions", "show", &first];
    let screen = env.screen(&args);
    let record_ids = regex::Regex::new(r"(?m)^  [0-9a-f]{12}  ").unwrap();
    let screen = record_ids.replace_all(&screen, "  [RECORD ID]  ");
    assert_shown("actions_show", &args, screen.into_owned());
}

/// A remote: added, pushed to, listed.
#[test]
fn remotes() {
    let top = TestEnv::new().pinned().with_passphrase();
    top.ok(&["init", "library"]);
    let env = top.cd("library");
    write(env.path(), "notes/plan.md", b"# Move\n");
    env.ok(&["commit", "-m", "plan"]);
    let remote = top.join("backup");
    env.ok(&["remote", "add", "origin", remote.to_str().unwrap()]);
    env.ok(&["push"]);
    assert_screen(&env, "remote_list", &["remote", "list"]);
}

/// What the argument parser says to a command it cannot read, each in a snapshot of its
/// own (the name says which).
#[test]
fn argument_errors() {
    let env = TestEnv::new().pinned();
    for (name, args) in [
        ("no_command", [].as_slice()),
        ("unknown_command", &["frobnicate"]),
        ("misspelled_command", &["comit", "-m", "x"]),
        ("missing_subcommand", &["branch"]),
        ("unknown_subcommand", &["branch", "grow"]),
        ("missing_argument", &["cat"]),
        ("missing_flag_value", &["commit", "-m"]),
        ("unknown_flag", &["log", "--bogus"]),
        ("bad_flag_value", &["--color", "sometimes", "status"]),
        ("bad_number", &["log", "-n", "many"]),
        ("conflicting_flags", &["-q", "-v", "status"]),
        ("unexpected_argument", &["status", "extra"]),
    ] {
        assert_screen(&env, &format!("error_{name}"), args);
    }
}

/// The top-level help.
#[test]
fn help() {
    let env = TestEnv::new().pinned();
    assert_screen(&env, "help", &["--help"]);
    assert_screen(&env, "help_short", &["-h"]);
}
