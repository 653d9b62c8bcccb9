//! The whole `lifeos search` process as a person runs it, at scale: 100,000 notes in 400
//! folders, a title and 10 sections each (1,100,000 segments), searched with no scope, with
//! `--path`, `--type`, `--at` and `--all-history`.
//!
//! `cargo bench --bench search_cli`. Builds (once, in a temp dir) the notes, commits and
//! ingests them through the library, edits 1% of them and commits and ingests again (so
//! `--at` and `--all-history` have two versions to tell apart), then runs 60 queries per
//! scope as separate processes (one word, two words, a two-word phrase, drawn as in
//! natural text) and prints p50, p95 and max; criterion times one common query.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/zipf.rs"]
mod zipf;
use lifeos_vcs::commit::CommitOptions;
use lifeos_vcs::working_copy::NoProgress;
use lifeos_vcs::Repo;
use zipf::{fts_query, latencies, text};

/// Folders and notes per folder: 400 × 250 under `cargo bench`, a few in the smoke test.
fn size() -> (usize, usize) {
    if std::env::args().any(|a| a == "--bench") {
        (400, 250)
    } else {
        (4, 25)
    }
}

/// Sections per note (one segment each).
const SECTIONS: usize = 10;

fn note(rng: &mut u64, title: &str) -> String {
    let mut s = format!("# {title}\n");
    for k in 0..SECTIONS {
        s.push_str(&format!("\n## Part {k}\n\n{}\n", text(rng, 12)));
    }
    s
}

fn commit_and_ingest(repo: &Repo, message: &[u8]) {
    let wc = repo.lock_working_copy().unwrap();
    let opts = CommitOptions {
        message,
        ..CommitOptions::default()
    };
    repo.commit_working_copy(&wc, &opts, &NoProgress).unwrap();
    drop(wc);
    lifeos_ingest::run::ingest(repo, false, &Default::default(), &|_| {}).unwrap();
}

/// The time of the first commit: 2026-01-01.
const FIRST: jiff::Timestamp = jiff::Timestamp::constant(1_767_225_600, 0);

/// The notes, committed and ingested; then 1% of them edited, committed and ingested a
/// minute later. Returns a time between the two commits.
fn build(d: &Path, folders: usize, per: usize) -> String {
    std::env::set_var("LIFEOS_NOW", FIRST.to_string());
    let repo = Repo::init(d, lifeos_store::StoreConfig::default()).unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for f in 0..folders {
        let dir = d.join(format!("notes/d{f:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for n in 0..per {
            let body = note(&mut rng, &format!("Note {f}-{n}"));
            std::fs::write(dir.join(format!("n{n:03}.md")), body).unwrap();
        }
    }
    commit_and_ingest(&repo, b"notes");
    let second = FIRST
        .checked_add(jiff::SignedDuration::from_secs(120))
        .unwrap();
    std::env::set_var("LIFEOS_NOW", second.to_string());
    for f in 0..folders {
        for n in (0..per).step_by(100) {
            let body = note(&mut rng, &format!("Note {f}-{n}, edited"));
            std::fs::write(d.join(format!("notes/d{f:03}/n{n:03}.md")), body).unwrap();
        }
    }
    commit_and_ingest(&repo, b"edits");
    std::env::remove_var("LIFEOS_NOW");
    between_commits()
}

/// A time between the two commits of [`build`].
fn between_commits() -> String {
    FIRST
        .checked_add(jiff::SignedDuration::from_secs(60))
        .unwrap()
        .to_string()
}

fn search_cli(c: &mut Criterion) {
    let (folders, per) = size();
    // `SEARCH_CLI_DIR=<dir>` builds the repository there once and reuses it on later
    // runs (to time a change against the same catalog); by default a temp dir.
    let dir = tempfile::tempdir().unwrap();
    let kept = std::env::var_os("SEARCH_CLI_DIR").map(std::path::PathBuf::from);
    let d = kept.as_deref().unwrap_or(dir.path());
    let t = Instant::now();
    let between = if d.join(".lifeos").exists() {
        between_commits()
    } else {
        std::fs::create_dir_all(d).unwrap();
        build(d, folders, per)
    };
    let built = t.elapsed().as_secs_f64();
    // The first command after an ingest brings the catalog up to date: not timed.
    common::ok(d, &["search", "budget"]);
    let segments: i64 = rusqlite::Connection::open(d.join(".lifeos/catalog.sqlite"))
        .unwrap()
        .query_row("SELECT COUNT(*) FROM segments", [], |r| r.get(0))
        .unwrap();
    eprintln!(
        "{} notes, {segments} segments, committed and ingested twice in {built:.1} s",
        folders * per,
    );
    let scopes: [(&str, Vec<&str>); 5] = [
        ("no scope", vec![]),
        ("--path notes/d007/**", vec!["--path", "notes/d007/**"]),
        ("--type markdown", vec!["--type", "markdown"]),
        ("--at (the first commit)", vec!["--at", &between]),
        ("--all-history", vec!["--all-history"]),
    ];
    for (label, extra) in &scopes {
        let mut rng = 0x1234_5678u64;
        let mut lat = Vec::new();
        for i in 0..60 {
            let q = fts_query(&mut rng, i);
            let mut args = vec!["search", q.as_str()];
            args.extend(extra.iter().copied());
            let t = Instant::now();
            // A query may find nothing (exit status 1): the time counts all the same.
            black_box(common::run(d, &args));
            lat.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        eprintln!("lifeos search, {label}, 60 queries: {}", latencies(lat));
    }
    let mut g = c.benchmark_group("search_cli");
    g.sample_size(20);
    g.bench_function("common_word_no_scope", |b| {
        b.iter(|| black_box(common::ok(d, &["search", "budget"])))
    });
    g.bench_function("common_word_path", |b| {
        b.iter(|| {
            black_box(common::ok(
                d,
                &["search", "budget", "--path", "notes/d007/**"],
            ))
        })
    });
    g.finish();
}

criterion_group!(benches, search_cli);
criterion_main!(benches);
