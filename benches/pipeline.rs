//! Throughput of the snapshot pipeline's stages and of pack reads (MB/s).
//!
//! `cargo bench --bench pipeline`. Inputs are incompressible pseudo-random bytes, like
//! photos and videos; text-like inputs are noted where they differ.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use lifeos_store::chunker::chunk_lengths;
use lifeos_store::config::Chunking;
use lifeos_store::{Store, StoreConfig};

#[path = "../tests/common/mod.rs"]
mod common;
use common::noise;

const MB: usize = 1 << 20;

fn stages(c: &mut Criterion) {
    let data = noise(64 * MB, 1);
    let mut g = c.benchmark_group("stages");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(10);
    g.bench_function("fastcdc_v2020_64MiB", |b| {
        b.iter(|| black_box(chunk_lengths(&data, Chunking::default())))
    });
    g.bench_function("blake3_64MiB", |b| {
        b.iter(|| black_box(blake3::hash(&data)))
    });
    let chunk = &data[..64 * 1024];
    g.throughput(Throughput::Bytes(chunk.len() as u64));
    g.bench_function("zstd3_64KiB_incompressible", |b| {
        let mut z = zstd::bulk::Compressor::new(3).unwrap();
        b.iter(|| black_box(z.compress(chunk).unwrap()))
    });
    let text: Vec<u8> = (0..64 * 1024)
        .map(|i| b"the quarterly budget meeting moved to friday "[i % 45])
        .collect();
    g.bench_function("zstd3_64KiB_text", |b| {
        let mut z = zstd::bulk::Compressor::new(3).unwrap();
        b.iter(|| black_box(z.compress(&text).unwrap()))
    });
    g.finish();
}

fn pipeline(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..4)
        .map(|i| {
            let p = dir.path().join(format!("video{i}.bin"));
            std::fs::write(&p, noise(32 * MB, 10 + i)).unwrap();
            p
        })
        .collect();
    let total = (4 * 32 * MB) as u64;
    let mut g = c.benchmark_group("pipeline");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(total));
    // A fresh store each time: every chunk is new, so this measures read, chunk, hash,
    // compress and pack writes including fsync.
    g.bench_function("store_files_4x32MiB_new", |b| {
        b.iter_batched(
            || {
                let repo = tempfile::tempdir().unwrap();
                let store = Store::init(&repo.path().join("s"), StoreConfig::default()).unwrap();
                (repo, store)
            },
            |(repo, store)| {
                let mut tx = store.transaction().unwrap();
                let res = tx.store_files(&files, &|_| {}).unwrap();
                assert!(res.iter().all(|r| r.is_ok()));
                drop(tx.commit().unwrap());
                drop(store);
                drop(repo);
            },
            BatchSize::PerIteration,
        )
    });
    // Everything already stored: the dedup path (read, chunk, hash, look up).
    let repo = tempfile::tempdir().unwrap();
    let store = Store::init(&repo.path().join("s"), StoreConfig::default()).unwrap();
    let mut tx = store.transaction().unwrap();
    let stored = tx.store_files(&files, &|_| {}).unwrap();
    drop(tx.commit().unwrap());
    g.bench_function("store_files_4x32MiB_all_known", |b| {
        b.iter(|| {
            let mut tx = store.transaction().unwrap();
            black_box(tx.store_files(&files, &|_| {}).unwrap());
        })
    });
    // Pack reads: stream a 32 MiB file back with verification.
    let id = stored[0].as_ref().unwrap().id;
    g.throughput(Throughput::Bytes(32 * MB as u64));
    g.bench_function("read_file_32MiB", |b| {
        b.iter(|| {
            let mut sink = std::io::sink();
            black_box(store.read_file(&id, &mut sink).unwrap())
        })
    });
    g.finish();
}

criterion_group!(benches, stages, pipeline);
criterion_main!(benches);
