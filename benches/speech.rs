//! Speech throughput, as real-time factors (seconds of audio per second of work), on one
//! whisper.cpp thread with the reference tiny.en model:
//! - decoding and resampling alone (AAC, 44.1 kHz stereo, to 16 kHz mono);
//! - whisper.cpp alone on the decoded samples (the same windows and reruns ingest uses);
//! - the whole of `lifeos ingest` on the committed recording (reading from the store,
//!   decoding, resampling, transcribing, recording the extract, updating the catalog).
//!
//! The pipeline's cost beyond whisper.cpp is the last minus the second.
//! `cargo bench --bench speech` uses a recording of about three minutes of espeak-ng
//! speech and takes the median of three runs; in test mode, a short one, once.

use std::path::{Path, PathBuf};
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};

#[path = "../tests/common/mod.rs"]
mod common;
use lifeos_catalog::CatalogExt;
use lifeos_speech::audio::{self, Source};
use lifeos_vcs::Repo;

fn full() -> bool {
    std::env::args().any(|a| a == "--bench")
}

const SENTENCES: &[&str] = &[
    "The budget meeting moved to Friday afternoon.",
    "Please remember to water the tomato plants.",
    "The train to London leaves at seven o'clock.",
    "We should buy a new bicycle for the summer holiday.",
    "Yesterday I fixed the login page and wrote the tests.",
    "The quarterly report is due next Monday morning.",
    "Could you send me the photos from the wedding?",
    "The doctor said the results look good.",
];

/// A recording of `n` sentences as AAC in M4A at 44.1 kHz stereo.
fn recording(dir: &Path, n: usize) -> PathBuf {
    let text: Vec<&str> = (0..n).map(|i| SENTENCES[i % SENTENCES.len()]).collect();
    let txt = dir.join("speech.txt");
    std::fs::write(&txt, text.join("\n\n")).unwrap();
    let wav = dir.join("speech.wav");
    common::tool(
        "espeak-ng",
        &["-w", wav.to_str().unwrap(), "-f", txt.to_str().unwrap()],
    );
    let m4a = dir.join("speech.m4a");
    common::tool(
        "ffmpeg",
        &[
            "-loglevel",
            "error",
            "-y",
            "-i",
            wav.to_str().unwrap(),
            "-ar",
            "44100",
            "-ac",
            "2",
            "-c:a",
            "aac",
            "-b:a",
            "96k",
            m4a.to_str().unwrap(),
        ],
    );
    m4a
}

fn opener(bytes: &[u8]) -> impl Fn() -> std::io::Result<(Box<dyn Source>, u64)> + '_ {
    move || {
        let src: Box<dyn Source> = Box::new(std::io::Cursor::new(bytes.to_vec()));
        Ok((src, bytes.len() as u64))
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn speech(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m4a = recording(d, if full() { 64 } else { 2 });
    let bytes = std::fs::read(&m4a).unwrap();
    let mut samples = Vec::new();
    let info = audio::decode("speech.m4a", &opener(&bytes), &mut |b| {
        samples.extend_from_slice(b);
        Ok(())
    })
    .unwrap();
    let secs = info.seconds;
    let runs = if full() { 3 } else { 1 };

    let model = common::test_model();
    let whisper = lifeos_speech::transcribe::Transcriber::load(&model, 1, false).unwrap();
    let alone = median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                let mut s = whisper.session(300).unwrap();
                s.push(&samples).unwrap();
                let segs = s.finish().unwrap();
                assert!(!segs.is_empty());
                t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    drop(whisper);

    // The whole ingest: a fresh repository each run, so the recording is transcribed.
    let models = d.join("models");
    lifeos_speech::models::Registry::at(models.clone())
        .import(&[model], None)
        .unwrap();
    std::env::set_var("LIFEOS_MODELS", &models);
    let pipeline = median(
        (0..runs)
            .map(|i| {
                let root = d.join(format!("repo{i}"));
                std::fs::create_dir_all(&root).unwrap();
                std::fs::copy(&m4a, root.join("speech.m4a")).unwrap();
                let repo = Repo::init(&root, lifeos_store::StoreConfig::default()).unwrap();
                lifeos_vcs::testing::commit_folder(&repo, b"rec");
                let t = Instant::now();
                let r =
                    lifeos_ingest::run::ingest(&repo, false, &Default::default(), &|_| {}).unwrap();
                let _ = repo.catalog().unwrap();
                let s = t.elapsed().as_secs_f64();
                assert!(r.failed.is_empty() && r.audio_seconds > 0.0, "{r:?}");
                s
            })
            .collect(),
    );
    let t = Instant::now();
    audio::decode("speech.m4a", &opener(&bytes), &mut |_| Ok(())).unwrap();
    let decode = t.elapsed().as_secs_f64();
    eprintln!(
        "speech, {secs:.1} s of AAC 44.1 kHz stereo, medians of {runs}: decode+resample {:.0}× real time ({decode:.3} s); whisper.cpp alone {:.2}× ({alone:.2} s); lifeos ingest {:.2}× ({pipeline:.2} s); pipeline overhead {:+.1}% of whisper.cpp's time",
        secs / decode,
        secs / alone,
        secs / pipeline,
        100.0 * (pipeline - alone) / alone
    );

    let mut g = c.benchmark_group("speech");
    g.sample_size(10);
    g.bench_function("decode_resample_aac_44k_stereo", |b| {
        b.iter(|| audio::decode("speech.m4a", &opener(&bytes), &mut |_| Ok(())).unwrap())
    });
    g.finish();
}

criterion_group!(benches, speech);
criterion_main!(benches);
