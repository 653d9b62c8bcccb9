//! Time travel on a long history: `cat --at` and `log --at` on 10,000 operations.
//!
//! `cargo bench --bench history`. Builds (once, in a temp dir) a repository with 10,000
//! commits made one minute apart, then measures reads as of a moment in the middle of
//! that history, both through the library and by running the `lifeos` binary.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};

#[path = "../tests/common/mod.rs"]
mod common;
use lifeos_vcs::commit::CommitOptions;
use lifeos_vcs::working_copy::NoProgress;
use lifeos_vcs::Repo;

/// 10,000 operations under `cargo bench`; a short history when the bench runs as a smoke
/// test under `cargo test`.
fn ops() -> usize {
    if std::env::args().any(|a| a == "--bench") {
        10_000
    } else {
        120
    }
}

fn build(dir: &Path, ops: usize) {
    let repo = Repo::init(dir, lifeos_store::StoreConfig::default()).unwrap();
    std::fs::create_dir_all(dir.join("notes")).unwrap();
    std::fs::create_dir_all(dir.join("photos")).unwrap();
    for i in 0..20 {
        std::fs::write(dir.join(format!("photos/p{i}.jpg")), vec![i as u8; 40_000]).unwrap();
    }
    let start = jiff::Timestamp::from_second(1_767_225_600).unwrap(); // 2026-01-01
    for i in 0..ops - 1 {
        std::fs::write(dir.join("notes/plan.md"), format!("plan version {i}\n")).unwrap();
        std::fs::write(
            dir.join(format!("notes/day{}.md", i % 50)),
            format!("entry {i}\n"),
        )
        .unwrap();
        let t = start
            .checked_add(jiff::SignedDuration::from_secs(60 * i as i64))
            .unwrap();
        // The clock of each commit is one minute after the previous one.
        std::env::set_var("LIFEOS_NOW", t.to_string());
        let wc = repo.lock_working_copy().unwrap();
        let message = format!("edit {i}");
        let opts = CommitOptions {
            message: message.as_bytes(),
            allow_empty: true,
            ..CommitOptions::default()
        };
        let out = repo.commit_working_copy(&wc, &opts, &NoProgress).unwrap();
        assert!(out.commit.is_some());
    }
    std::env::remove_var("LIFEOS_NOW");
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
    // The middle of the history, 30 s after commit number `mid`.
    let mid = ops / 2;
    let when = jiff::Timestamp::from_second(1_767_225_600 + 60 * mid as i64 + 30)
        .unwrap()
        .to_string();
    let when = when.as_str();
    let repo = Repo::discover(d).unwrap();
    repo.catalog().unwrap();
    let mut g = c.benchmark_group("history_10k_ops");
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
        format!("plan version {mid}\n")
    );
    g.bench_function("cli_cat_at", |b| {
        b.iter(|| black_box(run(&["cat", "notes/plan.md", "--at", when])))
    });
    g.bench_function("cli_log_at_limit_20", |b| {
        b.iter(|| black_box(run(&["log", "--at", when, "-n", "20"])))
    });
    g.sample_size(10);
    g.bench_function("cli_log_at_all_half", |b| {
        b.iter(|| black_box(run(&["log", "--at", when])))
    });
    g.finish();
}

criterion_group!(benches, time_travel);
criterion_main!(benches);
