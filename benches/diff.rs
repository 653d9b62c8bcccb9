//! Diff plugins: the manifest-only binary diff of a 10 GiB file with one byte inserted,
//! and an image diff of two 1920×1080 photos.
//!
//! `cargo bench --bench diff`.

use std::hint::black_box;
use std::io::Cursor;

use criterion::{criterion_group, criterion_main, Criterion};
use lifeos_diff::{DiffError, DiffPlugin, Loader, Options, ReadSeek, Side};
use lifeos_store::{ChunkRef, Id, Manifest};

/// A version held in memory.
struct Mem {
    bytes: Vec<u8>,
    chunks: Manifest,
}

impl Loader for Mem {
    fn load(&self) -> Result<Vec<u8>, DiffError> {
        Ok(self.bytes.clone())
    }
    fn head(&self, n: usize) -> Result<Vec<u8>, DiffError> {
        Ok(self.bytes[..n.min(self.bytes.len())].to_vec())
    }
    fn chunks(&self) -> Result<Manifest, DiffError> {
        Ok(self.chunks.clone())
    }
    fn reader(&self) -> Result<Box<dyn ReadSeek>, DiffError> {
        Ok(Box::new(Cursor::new(self.bytes.clone())))
    }
}

/// The chunk list of a 10 GiB file (64 KiB average chunks), and the same file with one
/// byte inserted in the middle: one chunk differs, one byte longer.
fn manifests() -> (Manifest, Manifest) {
    let n = (10u64 << 30) / (64 << 10);
    let a = Manifest {
        chunks: (0..n)
            .map(|i| ChunkRef {
                id: Id::hash(&i.to_le_bytes()),
                len: 64 << 10,
            })
            .collect(),
    };
    let mut b = a.clone();
    let mid = (n / 2) as usize;
    b.chunks[mid] = ChunkRef {
        id: Id::hash(b"edited"),
        len: (64 << 10) + 1,
    };
    (a, b)
}

fn photo(shift: u8) -> Vec<u8> {
    let img = image::RgbImage::from_fn(1920, 1080, |x, y| {
        let inside = shift > 0 && (800..1000).contains(&x) && (400..600).contains(&y);
        if inside {
            image::Rgb([255, shift, 0])
        } else {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8])
        }
    });
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

fn diffs(c: &mut Criterion) {
    let (a, b) = manifests();
    let la = Mem {
        bytes: Vec::new(),
        chunks: a,
    };
    let lb = Mem {
        bytes: Vec::new(),
        chunks: b,
    };
    let size = 10u64 << 30;
    let sa = Side {
        path: "disk.img",
        size,
        id: None,
        loader: &la,
    };
    let sb = Side {
        path: "disk.img",
        size: size + 1,
        id: None,
        loader: &lb,
    };
    let mut g = c.benchmark_group("diff");
    g.sample_size(10);
    g.bench_function("binary_manifest_10GiB_one_byte_insert", |bch| {
        bch.iter(|| {
            black_box(
                lifeos_diff::binary::BinaryPlugin
                    .diff(Some(&sa), Some(&sb), &Options::default())
                    .unwrap(),
            )
        })
    });
    let (pa, pb) = (photo(0), photo(40));
    let ia = Mem {
        bytes: pa.clone(),
        chunks: Manifest::default(),
    };
    let ib = Mem {
        bytes: pb.clone(),
        chunks: Manifest::default(),
    };
    let xa = Side {
        path: "photo.png",
        size: pa.len() as u64,
        id: None,
        loader: &ia,
    };
    let xb = Side {
        path: "photo.png",
        size: pb.len() as u64,
        id: None,
        loader: &ib,
    };
    g.bench_function("image_1920x1080_png", |bch| {
        bch.iter(|| {
            black_box(
                lifeos_diff::image_diff::ImagePlugin
                    .diff(Some(&xa), Some(&xb), &Options::default())
                    .unwrap(),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, diffs);
criterion_main!(benches);
