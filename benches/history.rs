//! Time travel on a long history: `log`, `op log`, `cat --at`, `log --at` and `search --at`
//! on 100,000 operations.
//!
//! `cargo bench --bench history`. Builds (once, in a temp dir) a repository with 100,000
//! operations: a first commit of the folder, then commits made one minute apart, written
//! through the library in batches ([`Repo::commit_series`]: one operation per commit, one
//! transaction per batch), and indexes every version for search; then measures reads as
//! of a moment in the middle of that history, both through the library and by running
//! the `lifeos` binary. `LIFEOS_BENCH_OPS` sets another number of operations.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};

#[path = "../tests/common/mod.rs"]
mod common;
use lifeos_vcs::bulk_commit::SeriesCommit;
use lifeos_vcs::commit::CommitOptions;
use lifeos_vcs::working_copy::NoProgress;
use lifeos_vcs::Repo;

/// 100,000 operations under `cargo bench` (or `LIFEOS_BENCH_OPS`); a short history when
/// the bench runs as a smoke test under `cargo test`.
fn ops() -> usize {
    if let Some(n) = std::env::var("LIFEOS_BENCH_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        n
    } else if std::env::args().any(|a| a == "--bench") {
        100_000
    } else {
        120
    }
}

/// Commits per transaction while the history is built.
const BATCH: usize = 5_000;

/// 2026-01-01, when the history starts; commit `i` is `i` minutes later.
const START_S: i64 = 1_767_225_600;

/// Operations: `init`, the first commit, and `ops - 2` commits that each rewrite
/// `notes/plan.md` and one of 50 day notes.
fn build(dir: &Path, ops: usize) {
    // The first two operations at the start of the history, so the commits after them
    // keep their times (an operation never ends before its parent).
    let start = jiff::Timestamp::from_second(START_S).unwrap();
    std::env::set_var("LIFEOS_NOW", start.to_string());
    let repo = Repo::init(dir, lifeos_store::StoreConfig::default()).unwrap();
    std::fs::create_dir_all(dir.join("notes")).unwrap();
    std::fs::create_dir_all(dir.join("photos")).unwrap();
    for i in 0..20 {
        std::fs::write(dir.join(format!("photos/p{i}.jpg")), vec![i as u8; 40_000]).unwrap();
    }
    std::fs::write(dir.join("notes/plan.md"), "plan version 0 budget\n").unwrap();
    let wc = repo.lock_working_copy().unwrap();
    let opts = CommitOptions {
        message: b"edit 0",
        ..CommitOptions::default()
    };
    repo.commit_working_copy(&wc, &opts, &NoProgress).unwrap();
    std::env::remove_var("LIFEOS_NOW");
    let commits: Vec<usize> = (1..ops - 1).collect();
    for batch in commits.chunks(BATCH) {
        let series: Vec<SeriesCommit> = batch
            .iter()
            .map(|&i| SeriesCommit {
                files: vec![
                    (
                        "notes/plan.md".into(),
                        Some(format!("plan version {i} budget\n").into_bytes()),
                    ),
                    (
                        format!("notes/day{}.md", i % 50).into(),
                        Some(format!("entry {i}\n").into_bytes()),
                    ),
                ],
                message: format!("edit {i}").into_bytes(),
                time_ms: (START_S + 60 * i as i64) * 1000,
            })
            .collect();
        repo.commit_series(&wc, &series).unwrap();
    }
}

fn time_travel(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let t = std::time::Instant::now();
    let ops = ops();
    build(dir.path(), ops);
    eprintln!(
        "built {ops} operations in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let d = dir.path();
    let t = std::time::Instant::now();
    common::ok(d, &["ingest"]);
    eprintln!(
        "indexed every version for search in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // The middle of the history, 30 s after commit number `mid`.
    let mid = ops / 2;
    let when = jiff::Timestamp::from_second(START_S + 60 * mid as i64 + 30)
        .unwrap()
        .to_string();
    let when = when.as_str();
    let repo = lifeos_app::open(d).unwrap();
    lifeos_catalog::CatalogExt::catalog(&repo).unwrap();
    let mut g = c.benchmark_group("history_ops");
    g.sample_size(20);
    g.bench_function("lib_op_at", |b| {
        b.iter(|| black_box(repo.op_at(when).unwrap()))
    });
    g.bench_function("lib_cat_at", |b| {
        b.iter(|| {
            let at = repo.op_at(when).unwrap();
            let c = repo.resolve_rev(&at.state.view, "@").unwrap();
            let tree = repo.commit(&c).unwrap().tree;
            let e = repo.lookup_path(&tree, b"notes/plan.md").unwrap().unwrap();
            let mut out = Vec::new();
            repo.store().read_file(&e.id, &mut out).unwrap();
            black_box(out)
        })
    });
    let run = |args: &[&str]| common::ok(d, args);
    assert_eq!(
        run(&["cat", "notes/plan.md", "--at", when]),
        format!("plan version {mid} budget\n")
    );
    let found = run(&["search", "budget", "--at", when, "--limit", "1"]);
    assert!(found.contains("notes/plan.md"), "{found}");
    let cli = [
        ("cli_log_limit_20", vec!["log", "-n", "20"]),
        ("cli_op_log_limit_20", vec!["op", "log", "-n", "20"]),
        ("cli_cat_at", vec!["cat", "notes/plan.md", "--at", when]),
        ("cli_log_at_limit_20", vec!["log", "--at", when, "-n", "20"]),
        ("cli_search_at", vec!["search", "budget", "--at", when]),
    ];
    for (name, args) in &cli {
        g.bench_function(*name, |b| b.iter(|| black_box(run(args))));
    }
    g.sample_size(10);
    g.bench_function("cli_log_at_all_half", |b| {
        b.iter(|| black_box(run(&["log", "--at", when])))
    });
    g.finish();
}

criterion_group!(benches, time_travel);
criterion_main!(benches);
