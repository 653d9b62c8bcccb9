//! Automations: what rules cost.
//!
//! `cargo bench --bench actions`. Measures: matching one commit event against 1,000 rules
//! (criterion); firing the rules for a commit none matches, with no rules file and with
//! 1,000 (criterion); a one-file commit of a 1,000-file folder alone and followed by
//! firing 1,000 trusted rules that do not match, as `lifeos commit` does (medians of 101
//! alternating runs); and
//! `lifeos watch` itself: CPU used while idle for 10 s, and how long after the quiet
//! period a change is committed. Under `cargo test` it runs once, small.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use lifeos_actions::{Actions, Rules, Trigger};
use lifeos_store::Id;
use lifeos_vcs::commit::CommitOptions;
use lifeos_vcs::working_copy::NoProgress;
use lifeos_vcs::Repo;

fn full() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// A rules file of `n` commit rules, none of which matches `notes/`.
fn rules_text(n: usize) -> String {
    let mut t = String::new();
    for i in 0..n {
        t.push_str(&format!(
            "[[rule]]\nname = \"r{i}\"\non = \"commit\"\npaths = [\"dir{i}/**/*.pdf\", \"inbox{i}/*\"]\n[rule.http]\nurl = \"http://127.0.0.1:9/{i}\"\nbody = {{ file = \"{{path}}\" }}\n\n"
        ));
    }
    t
}

fn matching(c: &mut Criterion) {
    let n = if full() { 1_000 } else { 20 };
    let start = Instant::now();
    let rules = Rules::parse(&rules_text(n)).unwrap();
    println!(
        "parsed {n} rules in {:.2} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let trigger = Trigger::Commit {
        commit: Id::hash(b"commit"),
        changes: vec![("notes/2026-12-04.md".into(), "modified")],
        branch: Some("main".into()),
        message: "notes".into(),
    };
    let hit = Trigger::Commit {
        commit: Id::hash(b"commit"),
        changes: vec![(format!("dir{}/a/b.pdf", n - 1).into(), "added")],
        branch: Some("main".into()),
        message: "invoice".into(),
    };
    assert!(rules.matching(&trigger, None).is_empty());
    assert_eq!(rules.matching(&hit, None).len(), 1);
    let mut g = c.benchmark_group("actions");
    g.bench_function(
        format!("match one commit event against {n} rules (none fires)"),
        |b| b.iter(|| black_box(rules.matching(&trigger, None).len())),
    );
    g.bench_function(
        format!("match one commit event against {n} rules (one fires)"),
        |b| b.iter(|| black_box(rules.matching(&hit, None).len())),
    );
    g.finish();
}

/// A repository of `files` small files, with `rules` trusted rules if any.
fn folder(files: usize, rules: usize) -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
    for i in 0..files {
        let p = dir.path().join(format!("notes/d{:02}/n{i}.md", i % 40));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("note {i}\n")).unwrap();
    }
    if rules > 0 {
        std::fs::write(dir.path().join("lifeos.rules.toml"), rules_text(rules)).unwrap();
    }
    commit(&repo, false);
    if rules > 0 {
        Actions::new(&repo).trust(None).unwrap();
    }
    (dir, repo)
}

/// Commits the folder; with `fire`, fires the rules for the commit as `lifeos commit`
/// does.
fn commit(repo: &Repo, fire: bool) {
    let wc = repo.lock_working_copy().unwrap();
    let opts = CommitOptions {
        message: b"edit",
        ..Default::default()
    };
    let out = repo.commit_working_copy(&wc, &opts, &NoProgress).unwrap();
    drop(wc);
    if let (true, Some(c)) = (fire, out.commit) {
        let read: Vec<_> = out.snapshot.read.iter().map(|(p, ..)| p.clone()).collect();
        let fired = Actions::new(repo).fire_commit(c, out.op, &read).unwrap();
        assert!(fired.proposed.is_empty() && fired.untrusted.is_none());
    }
}

fn edit_and_commit(dir: &Path, repo: &Repo, i: usize, fire: bool) -> f64 {
    std::fs::write(dir.join("notes/d00/n0.md"), format!("edit {i}\n")).unwrap();
    let start = Instant::now();
    commit(repo, fire);
    start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What `lifeos commit` adds to a commit for the rules: firing them for a one-file
/// change that none matches, with no rules file and with `rules` trusted rules.
fn fire_cost(c: &mut Criterion) {
    let rules = if full() { 1_000 } else { 20 };
    let mut g = c.benchmark_group("actions");
    for n in [0, rules] {
        let (_dir, repo) = folder(20, n);
        let head = repo.head().unwrap();
        let trigger = Trigger::Commit {
            commit: head.view.at_commit().unwrap(),
            changes: vec![("notes/d00/n0.md".into(), "modified")],
            branch: Some("main".into()),
            message: "edit".into(),
        };
        let actions = Actions::new(&repo);
        g.bench_function(
            format!("fire the rules for a commit no rule matches ({n} rules)"),
            |b| {
                b.iter(|| {
                    black_box(
                        actions
                            .fire(&[(trigger.clone(), None)])
                            .unwrap()
                            .proposed
                            .len(),
                    )
                })
            },
        );
    }
    g.finish();
}

/// The same one-file commit in one repository with `rules` trusted rules, alternately
/// alone and followed by firing the rules as `lifeos commit` does: what the rules cost
/// a commit none of them matches. (Two repositories, one without the rules file, differ
/// by more than the rules: the 200 KB file is in one folder only.)
fn commit_overhead() {
    let (files, rules, runs) = if full() {
        (1_000, 1_000, 101)
    } else {
        (20, 20, 3)
    };
    let (dir, repo) = folder(files, rules);
    let (mut alone, mut fired) = (Vec::new(), Vec::new());
    for i in 0..runs {
        if i % 2 == 0 {
            alone.push(edit_and_commit(dir.path(), &repo, 2 * i, false));
            fired.push(edit_and_commit(dir.path(), &repo, 2 * i + 1, true));
        } else {
            fired.push(edit_and_commit(dir.path(), &repo, 2 * i, true));
            alone.push(edit_and_commit(dir.path(), &repo, 2 * i + 1, false));
        }
    }
    let (a, b) = (median(alone), median(fired));
    println!(
        "one-file commit of {files} files: {:.2} ms alone, {:.2} ms with {rules} trusted rules fired, none of which matches ({:+.1}%)",
        a * 1e3,
        b * 1e3,
        (b / a - 1.0) * 100.0
    );
}

/// CPU ticks (user + system) process `pid` used so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn watch() {
    let (idle, edits) = if full() { (10, 7) } else { (1, 1) };
    let (dir, _repo) = folder(20, 0);
    let quiet_ms = 500;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lifeos"))
        .current_dir(dir.path())
        .args([
            "watch",
            "--quiet-period",
            &format!("{quiet_ms}ms"),
            "--no-ingest",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let before = cpu_ticks(child.id());
    std::thread::sleep(Duration::from_secs(idle));
    let used = cpu_ticks(child.id()) - before;
    // SAFETY: sysconf with a valid name has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    println!(
        "lifeos watch idle for {idle} s: {:.0} ms of CPU ({:.2}% of one core)",
        used as f64 / hz * 1e3,
        used as f64 / hz / idle as f64 * 100.0
    );
    let heads = dir.path().join(".lifeos/op_heads");
    let head = || {
        std::fs::read_dir(&heads)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect::<Vec<_>>()
    };
    let mut lags = Vec::new();
    for i in 0..edits {
        let was = head();
        std::fs::write(dir.path().join("notes/d01/n1.md"), format!("watched {i}\n")).unwrap();
        let start = Instant::now();
        while head() == was {
            assert!(start.elapsed() < Duration::from_secs(30), "no commit");
            std::thread::sleep(Duration::from_millis(5));
        }
        lags.push(start.elapsed().as_secs_f64() * 1e3 - quiet_ms as f64);
        std::thread::sleep(Duration::from_millis(300));
    }
    // SAFETY: signals the watcher started above.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    println!(
        "lifeos watch: a change committed {:.0} ms (median of {edits}) after the {quiet_ms} ms quiet period",
        median(lags)
    );
}

fn all(c: &mut Criterion) {
    matching(c);
    fire_cost(c);
    commit_overhead();
    watch();
}

criterion_group!(benches, all);
criterion_main!(benches);
