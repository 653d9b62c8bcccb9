//! Search latency over 1,000,000 segments, and ingest throughput for text and images
//! (OCR off and on).
//!
//! `cargo bench --bench search`. Prints p50/p95 latencies of 300 varied queries and the
//! ingest rates, then criterion figures for one query.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/zipf.rs"]
mod zipf;
use lifeos_catalog::Catalog;
use lifeos_vcs::Repo;
use zipf::{fts_query, latencies, text};

/// Records the folder as a commit.
fn commit(repo: &Repo, message: &[u8]) {
    let wc = repo.lock_working_copy().unwrap();
    let opts = lifeos_vcs::commit::CommitOptions {
        message,
        ..Default::default()
    };
    repo.commit_working_copy(&wc, &opts, &lifeos_vcs::working_copy::NoProgress)
        .unwrap();
}

fn full() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn search(c: &mut Criterion) {
    let n: usize = if full() { 1_000_000 } else { 20_000 };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.sqlite");
    let cat = Catalog::open(&path).unwrap();
    drop(cat);
    let t = Instant::now();
    {
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        {
            let mut seg = tx
                .prepare("INSERT INTO segments (file_id, extractor, version, kind, anchor, text, meta) VALUES (?1, 'text', 1, 'text', ?2, ?3, '')")
                .unwrap();
            let mut fts = tx
                .prepare("INSERT INTO segments_fts (rowid, text) VALUES (?1, ?2)")
                .unwrap();
            let mut rng = 0x9e37_79b9_7f4a_7c15u64;
            for i in 0..n {
                let file = blake3::hash(&((i / 20) as u64).to_le_bytes());
                let body = text(&mut rng, 30);
                seg.execute(rusqlite::params![
                    &file.as_bytes()[..],
                    format!(r#"{{"kind":"lines","start":{i},"end":{i}}}"#),
                    body
                ])
                .unwrap();
                fts.execute(rusqlite::params![tx.last_insert_rowid(), body])
                    .unwrap();
            }
        }
        // The terms' row counts ranking reads, as the sync keeps them (made here as the
        // level-12 migration makes them from the index).
        let (_, term_docs) = lifeos_catalog::MIGRATIONS[11];
        tx.execute_batch(term_docs).unwrap();
        tx.commit().unwrap();
    }
    eprintln!("indexed {n} segments in {:.1} s", t.elapsed().as_secs_f64());
    let cat = Catalog::open(&path).unwrap();
    let mut rng = 0x1234_5678u64;
    let mut lat = Vec::new();
    for i in 0..300 {
        let q = fts_query(&mut rng, i);
        let t = Instant::now();
        black_box(
            cat.search_segments(&q, &|_, _, _, _| true, 20, None)
                .unwrap(),
        );
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    eprintln!(
        "search over {n} segments, 300 queries (20 hits each): {}",
        latencies(lat)
    );
    let mut g = c.benchmark_group("search");
    g.bench_function(format!("two_words_{n}_segments"), |b| {
        b.iter(|| {
            black_box(
                cat.search_segments("\"quarterly\" \"budget\"", &|_, _, _, _| true, 20, None)
                    .unwrap(),
            )
        })
    });
    g.finish();
    ingest_rates();
}

/// Ingest throughput: Markdown notes, and PNG images with OCR off and on.
fn ingest_rates() {
    let (notes, images) = if full() { (2000, 40) } else { (50, 2) };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let repo = Repo::init(d, lifeos_store::StoreConfig::default()).unwrap();
    let mut rng = 42u64;
    let mut bytes = 0;
    for i in 0..notes {
        let body = format!(
            "# Note {i}\n\n{}\n\n## Details\n{}\n",
            text(&mut rng, 200),
            text(&mut rng, 400)
        );
        bytes += body.len();
        std::fs::create_dir_all(d.join("notes")).unwrap();
        std::fs::write(d.join(format!("notes/n{i:04}.md")), body).unwrap();
    }
    commit(&repo, b"notes");
    let t = Instant::now();
    let r = lifeos_ingest::run::ingest(&repo, false, &Default::default(), &|_| {}).unwrap();
    let s = t.elapsed().as_secs_f64();
    eprintln!(
        "ingest, Markdown: {} files ({:.1} MB) in {s:.2} s: {:.0} files/s, {:.1} MB/s",
        r.extracted,
        bytes as f64 / 1e6,
        r.extracted as f64 / s,
        bytes as f64 / 1e6 / s
    );
    std::fs::create_dir_all(d.join("scans")).unwrap();
    for i in 0..images {
        let Some(mut convert) = common::imagemagick() else {
            eprintln!("ImageMagick is not installed: image ingest rates not measured");
            return;
        };
        let status = convert
            .args([
                "-size",
                "1200x400",
                "xc:white",
                "-font",
                "DejaVu-Sans",
                "-pointsize",
                "40",
                "-fill",
                "black",
            ])
            .args([
                "-annotate",
                "+40+120",
                &format!("Invoice {i} for {}", text(&mut rng, 3)),
            ])
            .args(["-annotate", "+40+260", &text(&mut rng, 5)])
            .arg(d.join(format!("scans/s{i:03}.png")))
            .status();
        if !status.is_ok_and(|s| s.success()) {
            eprintln!("ImageMagick is not installed: image ingest rates not measured");
            return;
        }
    }
    commit(&repo, b"scans");
    for (ocr, label) in [(false, "OCR off"), (true, "OCR on")] {
        let cfg = d.join(".lifeos/config");
        let text = std::fs::read_to_string(&cfg).unwrap();
        let base = text.split("\n[ingest]").next().unwrap().to_string();
        std::fs::write(&cfg, format!("{base}\n[ingest]\nocr = {ocr}\n")).unwrap();
        let t = Instant::now();
        let r = lifeos_ingest::run::ingest(&repo, false, &Default::default(), &|_| {}).unwrap();
        let s = t.elapsed().as_secs_f64();
        eprintln!("ingest, 1200x400 PNG images, {label}: {} images in {s:.2} s: {:.1} images/s (OCR ran: {})", r.extracted, r.extracted as f64 / s, r.ocr);
    }
}

criterion_group!(benches, search);
criterion_main!(benches);
