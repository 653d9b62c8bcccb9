//! The global chunk index at 10 million chunks: lookup latency and memory.
//!
//! `cargo bench --bench index`. Writes one index layer of 10,000,000 rows (400 MB) with
//! uniformly spread ids, opens it, and measures lookups of present and absent ids, printing
//! the process's resident memory before and after opening the layer.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use lifeos_store::index::{write_layer, Layer, Location};
use lifeos_store::{Id, Kind};

fn rows() -> u64 {
    if std::env::args().any(|a| a == "--bench") {
        10_000_000
    } else {
        100_000
    }
}

/// The `i`th of `n` ids, in sorted order: the first 8 bytes spread `i` evenly over the id
/// space, the rest are a hash of `i`.
fn id(i: u64, n: u64) -> Id {
    let mut b = [0u8; 32];
    let top = ((u128::from(i) << 64) / u128::from(n)) as u64;
    b[..8].copy_from_slice(&top.to_be_bytes());
    b[8..].copy_from_slice(&blake3::hash(&i.to_le_bytes()).as_bytes()[..24]);
    Id(b)
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmRSS:")
                    .map(|v| v.trim().trim_end_matches(" kB").parse().unwrap_or(0))
            })
        })
        .unwrap_or(0)
}

fn index(c: &mut Criterion) {
    let n = rows();
    let dir = tempfile::tempdir().unwrap();
    let pack: Arc<str> = "00112233445566778899aabbccddeeff".into();
    let t = std::time::Instant::now();
    let name = write_layer(
        dir.path(),
        dir.path(),
        "bench",
        std::slice::from_ref(&pack),
        n,
        (0..n).map(|i| {
            Ok((
                id(i, n),
                Location {
                    pack: pack.clone(),
                    offset: i as u32,
                    kind: Kind::Chunk,
                },
            ))
        }),
    )
    .unwrap();
    let path = dir.path().join(format!("{name}.idx"));
    let size = std::fs::metadata(&path).unwrap().len();
    let before = rss_kib();
    let layer = Layer::open(&path).unwrap();
    let after = rss_kib();
    eprintln!(
        "index layer: {n} rows, {:.1} MB on disk, written in {:.1} s; resident memory {before} KiB before opening, {after} KiB after (+{} KiB)",
        size as f64 / 1e6,
        t.elapsed().as_secs_f64(),
        after.saturating_sub(before)
    );
    let mut g = c.benchmark_group("index_lookup");
    let mut k = 0u64;
    g.bench_function(format!("hit_{n}_rows"), |b| {
        b.iter(|| {
            k = (k + 7_919) % n;
            black_box(layer.lookup(&id(k, n)).unwrap().expect("present"))
        })
    });
    g.bench_function(format!("miss_{n}_rows"), |b| {
        b.iter(|| {
            k = (k + 7_919) % n;
            let mut absent = id(k, n);
            absent.0[31] ^= 0xff;
            black_box(layer.lookup(&absent).unwrap())
        })
    });
    g.finish();
    eprintln!("resident memory after the lookups: {} KiB", rss_kib());
}

criterion_group!(benches, index);
criterion_main!(benches);
