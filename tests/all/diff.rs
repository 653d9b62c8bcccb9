//! `lifeos diff`: semantic diffs on real fixtures made here (images drawn with the image
//! crate, audio synthesised as WAV, PDFs written by a helper, JSON/CSV/Markdown text),
//! asserting on the located changes.

use crate::common::*;

use std::path::Path;

use serde_json::Value;

/// The diff of one path between two revisions (or the folder), as JSON.
fn diff_file(d: &Path, args: &[&str], path: &str) -> Value {
    let mut a = vec!["diff"];
    a.extend_from_slice(args);
    a.push(path);
    let v = json(d, &a);
    assert_eq!(v["schema"], "lifeos.diff.v1");
    v["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path)
        .cloned()
        .unwrap_or_else(|| panic!("{path} not in {v}"))
}

fn texts(f: &Value) -> Vec<String> {
    f["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_string())
        .collect()
}

fn two_versions(name: &str, v1: &[u8], v2: &[u8]) -> (tempfile::TempDir, Value) {
    let repo = repo(false);
    let d = repo.path();
    write(d, name, v1);
    ok(d, &["commit", "-m", "v1"]);
    write(d, name, v2);
    ok(d, &["commit", "-m", "v2"]);
    let f = diff_file(d, &["-r", "@-", "-r", "@"], name);
    (repo, f)
}

#[test]
fn text_diff_locates_lines_words_and_line_endings() {
    let v1 = b"alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\n";
    let v2 = b"alpha\nbeta\ngamma\ndelta\nepsilon now\nzeta\neta\ntheta\r\n";
    let (_r, f) = two_versions("notes.txt", v1, v2);
    assert_eq!(f["plugin"], "text");
    let c = &f["changes"][0];
    assert_eq!(
        c["at"],
        serde_json::json!({"kind": "lines", "old_start": 2, "old_len": 7, "new_start": 2, "new_len": 7})
    );
    let lines = c["detail"]["lines"].as_array().unwrap();
    let added = lines
        .iter()
        .find(|l| l["tag"] == "+" && l["text"] == "epsilon now")
        .unwrap();
    let emphasized: Vec<&str> = added["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["emphasized"] == true)
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        emphasized.concat().trim(),
        "now",
        "word-level highlight: {added}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["tag"] == "+" && l["text"] == "theta\\r\\n"),
        "CRLF is visible: {lines:?}"
    );
    // Non-UTF-8 text is handled with a note.
    let (_r, f) = two_versions("latin1.txt", b"caf\xe9\n", b"caf\xe9s\n");
    assert_eq!(f["plugin"], "text");
    assert!(
        f["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("not valid UTF-8")),
        "{f}"
    );
}

#[test]
fn structured_data_diffs_by_key_path_whatever_the_formatting() {
    let (_r, f) = two_versions(
        "config.json",
        br#"{"server": {"port": 8080, "host": "example.org"}, "features": ["a", "b"], "debug": true}"#,
        b"{\n  \"features\": [\"a\", \"b\", \"c\"],\n  \"server\": {\n    \"host\": \"example.org\",\n    \"port\": 9090\n  }\n}\n",
    );
    assert_eq!(f["plugin"], "json");
    let t = texts(&f);
    assert!(
        t.contains(&"$.server.port: 8080 → 9090".to_string()),
        "{t:?}"
    );
    assert!(t.contains(&"$.features[2] added".to_string()));
    assert!(t.contains(&"$.debug removed".to_string()));
    assert_eq!(
        t.len(),
        3,
        "key order and formatting are not changes: {t:?}"
    );
    let (_r, f) = two_versions(
        "app.yaml",
        b"db:\n  pool: 5\n  name: main\n",
        b"db:\n  name: main\n  pool: 10\n",
    );
    assert_eq!(texts(&f), ["$.db.pool: 5 → 10"]);
    let (_r, f) = two_versions(
        "Cargo.toml",
        b"[package]\nname = \"x\"\nversion = \"1.0\"\n",
        b"[package]\nversion = \"1.1\"\nname = \"x\"\n",
    );
    assert_eq!(texts(&f), ["$.package.version: \"1.0\" → \"1.1\""]);
    // Invalid JSON falls back to the text diff, with a note.
    let (_r, f) = two_versions("broken.json", b"{\"a\": 1}\n", b"{\"a\": 2,,}\n");
    assert_eq!(f["plugin"], "text");
    assert!(
        f["notes"][0].as_str().unwrap().contains("not valid Json"),
        "{f}"
    );
}

#[test]
fn tables_diff_by_key_column_or_position() {
    let (_r, f) = two_versions(
        "prices.csv",
        b"sku,name,price\nA1,apple,3\nB2,pear,4\nC3,plum,5\n",
        b"sku,name,price\nC3,plum,6\nA1,apple,3\nD4,fig,9\n",
    );
    assert_eq!(f["plugin"], "table");
    let t = texts(&f);
    assert!(
        t.contains(&"row C3: price \"5\" → \"6\"".to_string()),
        "{t:?}"
    );
    assert!(t.contains(&"row D4 added".to_string()));
    assert!(t.contains(&"row B2 removed".to_string()));
    assert_eq!(t.len(), 3, "a moved row is not a change: {t:?}");
    let cell = f["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["op"] == "changed")
        .unwrap();
    assert_eq!(
        cell["at"],
        serde_json::json!({"kind": "row", "row": "C3", "column": "price"})
    );
    let (_r, f) = two_versions(
        "log.tsv",
        b"day\tnote\nmon\tx\nmon\ty\n",
        b"day\tnote\nmon\tx\nmon\tz\n",
    );
    assert_eq!(texts(&f), ["row 2: note \"y\" → \"z\""]);
}

#[test]
fn markdown_diffs_by_section() {
    let (_r, f) = two_versions(
        "plan.md",
        b"# Plan\nintro\n## Budget\n12,000\n## Team\nAnn\n# Old\nbye\n",
        b"# Plan\nintro\n## Team\nAnn\n## Budget\n15,000\n# New\nhello\n",
    );
    assert_eq!(f["plugin"], "markdown");
    let t = texts(&f);
    // Budget and Team swapped places: one of them is reported as moved.
    assert!(
        t.iter()
            .any(|x| x.starts_with("section # Plan > ## Budget moved")
                || x.starts_with("section # Plan > ## Team moved")),
        "{t:?}"
    );
    assert!(
        t.iter()
            .any(|x| x.starts_with("section # Plan > ## Budget edited")),
        "{t:?}"
    );
    assert!(
        t.iter().any(|x| x.starts_with("section # New added")),
        "{t:?}"
    );
    assert!(t.contains(&"section # Old removed".to_string()), "{t:?}");
}

/// An added Markdown file said "2 added, 1 removed" (an empty section before the first
/// heading, on the side that did not exist) and a deleted one "1 added, 2 removed".
#[test]
fn an_added_or_deleted_markdown_file_only_adds_or_removes_sections() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "base.txt", b"x");
    ok(d, &["commit", "-m", "base"]);
    write(d, "notes.md", b"# Plan\nSome text\n## Budget\nMore\n");
    ok(d, &["commit", "-m", "add"]);
    let added = diff_file(d, &["-r", "@-", "-r", "@"], "notes.md");
    assert_eq!(
        added["summary"], "2 sections: 2 added, 0 removed, 0 moved, 0 edited",
        "{added}"
    );
    std::fs::remove_file(d.join("notes.md")).unwrap();
    ok(d, &["commit", "-m", "delete"]);
    let deleted = diff_file(d, &["-r", "@-", "-r", "@"], "notes.md");
    assert_eq!(
        deleted["summary"], "0 sections: 0 added, 2 removed, 0 moved, 0 edited",
        "{deleted}"
    );
    assert_eq!(
        texts(&deleted),
        [
            "section # Plan removed",
            "section # Plan > ## Budget removed"
        ]
    );
}

/// A `.mp4` that is no recording got "transcripts not compared: a version has not been
/// transcribed (run `lifeos ingest` with a speech model installed)", whether or not a
/// model was installed and after an ingest had tried it: no version of it can have a
/// transcript. The note is only for versions read as audio or video.
#[test]
fn a_file_named_like_a_recording_that_is_none_gets_no_transcript_note() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "clip.mp4", &noise(40_000, 1));
    ok(d, &["commit", "-m", "v1"]);
    write(d, "clip.mp4", &noise(40_000, 2));
    ok(d, &["commit", "-m", "v2"]);
    run(d, &["ingest"]);
    let f = diff_file(d, &["-r", "@-", "-r", "@"], "clip.mp4");
    let notes = f["notes"].to_string();
    assert!(
        notes.contains("cannot be read as audio or video") && !notes.contains("transcripts"),
        "{f}"
    );
}

/// Regions were snapped to an 8-pixel grid: a 40×40 change at (120, 30) was reported as
/// 40×48 at (120, 24). They are the changed pixels' bounding boxes, exact to the pixel.
#[test]
fn image_regions_are_exact_to_the_pixel() {
    let before = photo(200, 100);
    let mut after = before.clone();
    let mut paint = |x0: u32, y0: u32, w: u32, h: u32| {
        for x in x0..x0 + w {
            for y in y0..y0 + h {
                after.put_pixel(x, y, image::Rgb([255, 255, 0]));
            }
        }
    };
    paint(120, 30, 40, 40);
    paint(10, 70, 10, 10);
    paint(57, 13, 1, 1);
    let repo = repo(false);
    let d = repo.path();
    write(d, "p.png", &png(&before));
    ok(d, &["commit", "-m", "v1"]);
    write(d, "p.png", &png(&after));
    let f = diff_file(d, &[], "p.png");
    let mut boxes: Vec<(u64, u64, u64, u64)> = f["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["at"]["kind"] == "region")
        .map(|c| {
            let a = &c["at"];
            let n = |k: &str| a[k].as_u64().unwrap();
            (n("x"), n("y"), n("w"), n("h"))
        })
        .collect();
    boxes.sort();
    assert_eq!(
        boxes,
        [(10, 70, 10, 10), (57, 13, 1, 1), (120, 30, 40, 40)],
        "{f}"
    );
    let text = ok(d, &["diff", "p.png"]);
    for want in [
        "pixels changed in 40×40 at (120, 30)",
        "pixels changed in 10×10 at (10, 70)",
        "pixels changed in 1×1 at (57, 13)",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    // The visual marks the exact boxes: their corners are outlined, and the pixel just
    // outside is not.
    let out = tempfile::tempdir().unwrap();
    let vis = out.path().join("v.png");
    ok(d, &["diff", "p.png", "--visual", vis.to_str().unwrap()]);
    let v = image::open(&vis).unwrap().to_rgb8();
    let red = image::Rgb([255, 32, 32]);
    for (x, y) in [(120, 30), (159, 69), (10, 70), (19, 79), (57, 13)] {
        assert_eq!(v.get_pixel(x, y), &red, "({x}, {y})");
    }
    for (x, y) in [(119, 30), (120, 29), (160, 69), (20, 79)] {
        assert_ne!(v.get_pixel(x, y), &red, "({x}, {y})");
    }
}

#[test]
fn images_report_the_changed_region_and_a_visual() {
    let before = photo(320, 240);
    let mut after = before.clone();
    for x in 100..160 {
        for y in 80..140 {
            after.put_pixel(x, y, image::Rgb([255, 0, 0]));
        }
    }
    let repo = repo(false);
    let d = repo.path();
    write(d, "photos/beach.png", &png(&before));
    ok(d, &["commit", "-m", "v1"]);
    write(d, "photos/beach.png", &png(&after));
    let f = diff_file(d, &[], "photos/beach.png");
    assert_eq!(f["plugin"], "image");
    let regions: Vec<&Value> = f["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["at"]["kind"] == "region")
        .collect();
    assert_eq!(regions.len(), 1, "{f}");
    let r = &regions[0]["at"];
    let (x, y, w, h) = (
        r["x"].as_u64().unwrap(),
        r["y"].as_u64().unwrap(),
        r["w"].as_u64().unwrap(),
        r["h"].as_u64().unwrap(),
    );
    assert!(
        x <= 100 && y <= 80 && x + w >= 160 && y + h >= 140,
        "region covers the painted square: {r}"
    );
    assert!(w <= 80 && h <= 80, "region is tight: {r}");
    assert!(
        f["summary"]
            .as_str()
            .unwrap()
            .contains("4.69% of pixels changed"),
        "{f}"
    );
    let out = tempfile::tempdir().unwrap();
    let vis = out.path().join("beach-diff.png");
    ok(
        d,
        &[
            "diff",
            "photos/beach.png",
            "--visual",
            vis.to_str().unwrap(),
        ],
    );
    let v = image::open(&vis).unwrap().to_rgb8();
    assert_eq!(v.dimensions(), (320, 240));
    assert_eq!(
        v.get_pixel(x as u32, y as u32 + 10),
        &image::Rgb([255, 32, 32]),
        "the region is outlined"
    );

    // A resized copy is said to be resized.
    ok(d, &["commit", "-m", "v2"]);
    let small = image::imageops::resize(&after, 160, 120, image::imageops::FilterType::Triangle);
    write(d, "photos/beach.png", &png(&small));
    let f = diff_file(d, &[], "photos/beach.png");
    assert!(f["summary"].as_str().unwrap().contains("resized"), "{f}");
    assert!(texts(&f).contains(&"dimensions 320×240 → 160×120".to_string()));
}

#[test]
fn image_exif_changes_are_named() {
    let img = photo(64, 48);
    let (_r, f) = two_versions(
        "scan.jpg",
        &jpeg_with_exif(&img, "2026:11:01 10:00:00", "Pixel 7"),
        &jpeg_with_exif(&img, "2026:11:03 18:30:00", "Pixel 8"),
    );
    assert_eq!(f["plugin"], "image");
    let t = texts(&f);
    assert!(
        t.iter()
            .any(|x| x.starts_with("EXIF date taken: 2026-11-01 10:00:00 → 2026-11-03 18:30:00")),
        "{t:?}"
    );
    assert!(
        t.iter()
            .any(|x| x.starts_with("EXIF camera model: Pixel 7 → Pixel 8")),
        "{t:?}"
    );
    assert!(
        f["summary"].as_str().unwrap().contains("pixels identical"),
        "{f}"
    );
}

fn wav(samples: &[i16], rate: u32) -> Vec<u8> {
    let data_len = (samples.len() * 2) as u32;
    let mut v = Vec::new();
    v.extend_from_slice(b"RIFF");
    v.extend_from_slice(&(36 + data_len).to_le_bytes());
    v.extend_from_slice(b"WAVEfmt ");
    v.extend_from_slice(&16u32.to_le_bytes());
    v.extend_from_slice(&1u16.to_le_bytes());
    v.extend_from_slice(&1u16.to_le_bytes());
    v.extend_from_slice(&rate.to_le_bytes());
    v.extend_from_slice(&(rate * 2).to_le_bytes());
    v.extend_from_slice(&2u16.to_le_bytes());
    v.extend_from_slice(&16u16.to_le_bytes());
    v.extend_from_slice(b"data");
    v.extend_from_slice(&data_len.to_le_bytes());
    for s in samples {
        v.extend_from_slice(&s.to_le_bytes());
    }
    v
}

/// A tone whose loudness varies slowly, so every stretch of it is recognisable.
fn tone(seconds: f64, rate: u32, seed: f64) -> Vec<i16> {
    (0..(seconds * f64::from(rate)) as usize)
        .map(|i| {
            let t = i as f64 / f64::from(rate);
            let env = 0.3 + 0.25 * (t * 0.9 + seed).sin() + 0.1 * (t * 2.3).cos();
            (8000.0 * env * (t * 440.0 * std::f64::consts::TAU).sin()) as i16
        })
        .collect()
}

#[test]
fn audio_reports_changed_and_added_time_ranges() {
    let rate = 8000;
    let base = tone(10.0, rate, 0.0);
    let mut louder = base.clone();
    for s in &mut louder[(4.1 * 8000.0) as usize..(4.7 * 8000.0) as usize] {
        *s = (f64::from(*s) * 5.0).clamp(-32000.0, 32000.0) as i16;
    }
    let (_r, f) = two_versions("memo.wav", &wav(&base, rate), &wav(&louder, rate));
    assert_eq!(f["plugin"], "media");
    let times: Vec<&Value> = f["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["at"]["kind"] == "time")
        .collect();
    assert_eq!(times.len(), 1, "{f}");
    let (s, e) = (
        times[0]["at"]["start_ms"].as_u64().unwrap(),
        times[0]["at"]["end_ms"].as_u64().unwrap(),
    );
    assert!(
        (4000..=4200).contains(&s) && (4600..=4800).contains(&e),
        "changed 4.1–4.7 s, got {s}–{e}"
    );
    assert!(f["summary"].as_str().unwrap().contains("WAV"), "{f}");

    let mut longer = base[..7 * 8000].to_vec();
    longer.extend(tone(3.2, rate, 5.0).iter().map(|s| s / 3));
    longer.extend_from_slice(&base[7 * 8000..]);
    let (_r, f) = two_versions("memo.wav", &wav(&base, rate), &wav(&longer, rate));
    let t = texts(&f);
    assert!(t.iter().any(|x| x == "3.2 s added at 00:07"), "{t:?}");
    assert!(
        t.iter()
            .any(|x| x.starts_with("duration 00:10.0 → 00:13.2")),
        "{t:?}"
    );
}

#[test]
fn pdf_reports_pages_added_and_page_text_changes() {
    let (_r, f) = two_versions(
        "report.pdf",
        &pdf(&["Quarterly budget is 12000", "Team notes"]),
        &pdf(&["Quarterly budget is 15000", "Team notes", "Appendix"]),
    );
    assert_eq!(f["plugin"], "pdf");
    let c = f["changes"].as_array().unwrap();
    assert!(
        c.iter().any(
            |x| x["at"] == serde_json::json!({"kind": "page", "page": 1}) && x["op"] == "changed"
        ),
        "{f}"
    );
    assert!(
        c.iter().any(
            |x| x["at"] == serde_json::json!({"kind": "page", "page": 3}) && x["op"] == "added"
        ),
        "{f}"
    );
    assert!(
        f["summary"]
            .as_str()
            .unwrap()
            .starts_with("2 pages → 3 pages"),
        "{f}"
    );
}

#[test]
fn any_other_binary_is_diffed_from_chunk_lists() {
    let v1 = noise(5_000_000, 42);
    let mut v2 = v1.clone();
    v2.insert(2_500_000, 0x55);
    let (_r, f) = two_versions("disk.img", &v1, &v2);
    assert_eq!(f["plugin"], "binary");
    let c = f["changes"].as_array().unwrap();
    assert_eq!(c.len(), 1, "{f}");
    let at = &c[0]["at"];
    let (o, ol) = (
        at["old_offset"].as_u64().unwrap(),
        at["old_len"].as_u64().unwrap(),
    );
    assert!(
        o <= 2_500_000 && o + ol >= 2_500_000 && ol <= 600_000,
        "the range holds the insertion: {at}"
    );
    assert_eq!(at["new_len"].as_u64().unwrap(), ol + 1);
    assert!(f["summary"]
        .as_str()
        .unwrap()
        .contains("% of the new bytes are in unchanged chunks"));
}

#[test]
fn renames_and_similar_renames() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a/photo.jpg", &noise(300_000, 1));
    write(d, "video.bin", &noise(2_000_000, 2));
    ok(d, &["commit", "-m", "v1"]);
    std::fs::rename(d.join("a/photo.jpg"), d.join("b/photo.jpg")).unwrap_or_else(|_| {
        write(d, "b/photo.jpg", &noise(300_000, 1));
        std::fs::remove_file(d.join("a/photo.jpg")).unwrap();
    });
    let mut v = noise(2_000_000, 2);
    v.splice(1_000_000..1_000_000, b"edit".iter().copied());
    std::fs::remove_file(d.join("video.bin")).unwrap();
    write(d, "clips/video.bin", &v);
    ok(d, &["commit", "-m", "v2"]);
    let v = json(d, &["diff", "-r", "@-", "-r", "@"]);
    let files = v["files"].as_array().unwrap();
    let photo = files.iter().find(|f| f["path"] == "b/photo.jpg").unwrap();
    assert_eq!(photo["status"], "renamed");
    assert_eq!(photo["old_path"], "a/photo.jpg");
    assert_eq!(photo["similarity"], 1.0);
    let video = files
        .iter()
        .find(|f| f["path"] == "clips/video.bin")
        .unwrap();
    assert_eq!(video["status"], "renamed");
    assert_eq!(video["old_path"], "video.bin");
    assert!(video["similarity"].as_f64().unwrap() > 0.8, "{video}");
    assert_eq!(files.len(), 2, "no separate add/delete: {v}");
    let stat = ok(d, &["diff", "-r", "@-", "-r", "@", "--stat"]);
    assert!(stat.contains("renamed from video.bin"), "{stat}");
    assert_eq!(
        ok(d, &["diff", "-r", "@-", "-r", "@", "--name-only"]),
        "b/photo.jpg\nclips/video.bin\n"
    );
}

#[test]
fn external_plugins_run_and_fall_back_on_failure_or_timeout() {
    let repo = repo(false);
    let d = repo.path();
    let tools = tempfile::tempdir().unwrap();
    let good = tools.path().join("scene-diff");
    std::fs::write(
        &good,
        "#!/bin/sh\nprintf '{\"schema\":\"lifeos.diff-plugin.v1\",\"summary\":\"nodes: %s -> %s bytes\",\"changes\":[{\"op\":\"changed\",\"at\":{\"kind\":\"field\",\"name\":\"Player\"},\"text\":\"Player moved\"}]}' \"$(wc -c < \"$1\")\" \"$(wc -c < \"$2\")\"\n",
    )
    .unwrap();
    let bad = tools.path().join("broken-diff");
    std::fs::write(&bad, "#!/bin/sh\necho not json\n").unwrap();
    let slow = tools.path().join("slow-diff");
    std::fs::write(&slow, "#!/bin/sh\nsleep 30\n").unwrap();
    for p in [&good, &bad, &slow] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let cfg = d.join(".lifeos/config");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!(
        "\n[[diff.external]]\nname = \"godot-scene\"\nglobs = [\"*.tscn\"]\ncommand = [\"{}\", \"{{old}}\", \"{{new}}\"]\n\n[[diff.external]]\nname = \"broken\"\nglobs = [\"*.blend\"]\ncommand = [\"{}\", \"{{old}}\", \"{{new}}\"]\n\n[[diff.external]]\nname = \"slow\"\nglobs = [\"*.fig\"]\ncommand = [\"{}\"]\ntimeout_ms = 300\n",
        good.display(),
        bad.display(),
        slow.display()
    ));
    std::fs::write(&cfg, text).unwrap();
    write(d, "level.tscn", b"[node name=\"Player\"]\n");
    write(d, "model.blend", b"BLENDER v1");
    write(d, "design.fig", b"FIG v1");
    ok(d, &["commit", "-m", "v1"]);
    write(d, "level.tscn", b"[node name=\"Player\"]\nposition=1\n");
    write(d, "model.blend", b"BLENDER v2");
    write(d, "design.fig", b"FIG v2");
    let f = diff_file(d, &[], "level.tscn");
    assert_eq!(f["plugin"], "godot-scene");
    assert_eq!(f["summary"], "nodes: 21 -> 32 bytes");
    assert_eq!(texts(&f), ["Player moved"]);
    let f = diff_file(d, &[], "model.blend");
    assert_ne!(f["plugin"], "broken");
    assert!(
        f["notes"][0].as_str().unwrap().contains("invalid JSON"),
        "{f}"
    );
    let t = std::time::Instant::now();
    let f = diff_file(d, &[], "design.fig");
    assert!(t.elapsed() < std::time::Duration::from_secs(10));
    assert!(
        f["notes"][0]
            .as_str()
            .unwrap()
            .contains("timed out after 300 ms"),
        "{f}"
    );
}

#[test]
fn bad_input_gets_a_bounded_diff_or_a_clear_fallback() {
    let repo = repo(false);
    let d = repo.path();
    let good_png = png(&photo(64, 64));
    let wave = wav(&tone(2.0, 8000, 0.0), 8000);
    let doc = pdf(&["one page"]);
    write(d, "truncated.png", &good_png);
    write(d, "corrupt.wav", &wave);
    write(d, "truncated.pdf", &doc);
    write(d, "liar.png", b"this is plain text, not a picture\n");
    write(d, "oneline.txt", &vec![b'x'; 3 << 20]);
    write(d, "binary.txt", &noise(100_000, 3));
    let mut big = b"[".to_vec();
    while big.len() < 100 << 20 {
        big.extend_from_slice(b"{\"id\": 12345, \"name\": \"item\", \"tags\": [\"a\", \"b\"]},\n");
    }
    big.extend_from_slice(b"{}]\n");
    write(d, "huge.json", &big);
    ok(d, &["commit", "-m", "v1"]);
    write(d, "truncated.png", &good_png[..good_png.len() / 2]);
    let mut bad_wave = wave.clone();
    for b in &mut bad_wave[20..44] {
        *b = 0xff;
    }
    write(d, "corrupt.wav", &bad_wave);
    write(d, "truncated.pdf", &doc[..doc.len() / 3]);
    write(d, "liar.png", b"this is plain text, still not a picture\n");
    let mut line = vec![b'x'; 3 << 20];
    line[1 << 20] = b'y';
    write(d, "oneline.txt", &line);
    let mut bin = noise(100_000, 3);
    bin[500] ^= 1;
    write(d, "binary.txt", &bin);
    big[1000] = b'9';
    write(d, "huge.json", &big);
    ok(d, &["commit", "-m", "v2"]);
    let out = run(d, &["diff", "-r", "@-", "-r", "@", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = |p: &str| {
        v["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == p)
            .unwrap()
            .clone()
    };
    let note = |f: &Value, s: &str| {
        f["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains(s))
    };
    let f = file("truncated.png");
    assert_eq!(f["plugin"], "binary");
    assert!(note(&f, "cannot be decoded as an image"), "{f}");
    let f = file("corrupt.wav");
    assert_ne!(f["plugin"], "none", "{f}");
    let f = file("truncated.pdf");
    assert_ne!(f["plugin"], "pdf");
    assert!(note(&f, "not a readable PDF"), "{f}");
    let f = file("liar.png");
    assert_eq!(
        f["plugin"], "text",
        "sniffing wins over a lying extension: {f}"
    );
    assert!(texts(&f)[0].contains("lines"), "{f}");
    let f = file("oneline.txt");
    assert_eq!(f["plugin"], "binary");
    assert!(note(&f, "line longer than"), "{f}");
    let f = file("binary.txt");
    assert_eq!(f["plugin"], "binary");
    assert!(note(&f, "NUL bytes") || note(&f, "binary"), "{f}");
    let f = file("huge.json");
    assert_eq!(f["plugin"], "binary");
    assert!(note(&f, "more than the"), "{f}");
    assert_eq!(f["changes"].as_array().unwrap().len(), 1, "{f}");
}

#[test]
fn a_mode_change_alone_is_reported_and_dot_means_everything() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "run.sh", b"#!/bin/sh\necho hi\n");
    ok(d, &["commit", "-m", "v1"]);
    std::fs::set_permissions(
        d.join("run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let f = diff_file(d, &["."], "run.sh");
    assert_eq!(f["status"], "modified");
    assert_eq!(f["summary"], "content unchanged; file → executable");
}

#[test]
fn table_columns_added_and_removed_are_listed_in_header_order() {
    let (_r, f) = two_versions("t.csv", b"id,a,b,c\n1,x,y,z\n", b"id,c,d,e\n1,z,p,q\n");
    let cols: Vec<String> = texts(&f)
        .into_iter()
        .filter(|t| t.starts_with("column"))
        .collect();
    assert_eq!(
        cols,
        [
            "column d added",
            "column e added",
            "column a removed",
            "column b removed"
        ]
    );
    // --json with --name-only still prints the JSON document.
    let repo = repo(false);
    let d = repo.path();
    write(d, "x.txt", b"1\n");
    ok(d, &["commit", "-m", "v1"]);
    write(d, "x.txt", b"2\n");
    let v = json(d, &["diff", "--name-only"]);
    assert_eq!(v["files"][0]["path"], "x.txt");
}
