//! Ingest and search: cited hits with exact anchors, time travel, reindex equivalence,
//! resumable jobs, recorded failures, exclusions and redaction of secrets.

use crate::common::*;

use std::path::Path;

use serde_json::Value;

/// Turns off indexing at commit time, for tests of `lifeos ingest` itself.
fn manual_ingest(d: &Path) {
    let cfg = d.join(".lifeos/config");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[ingest]\nafter_commit = false\n");
    std::fs::write(cfg, text).unwrap();
}

fn hits(d: &Path, args: &[&str]) -> Vec<Value> {
    let mut a = vec!["search"];
    a.extend_from_slice(args);
    let v = json(d, &a);
    assert_eq!(v["schema"], "lifeos.search.v1");
    v["hits"].as_array().unwrap().clone()
}

fn library(d: &Path) {
    write(d, "notes/plan.md", b"# Plan\nIntro text.\n\n## Budget\nThe quarterly budget is 12,000.\nReviewed in March.\n\n## Team\nAnn and Bob.\n");
    write(d, "web/launch.html", b"<html><head><title>x</title><script>var budget=1;</script></head>\n<body>\n<h1>News</h1>\n<p>The launch plan moved to Friday.</p>\n</body></html>\n");
    write(d, "meetings/2026-11-03.srt", b"1\n00:00:01,000 --> 00:00:04,000\nHello everyone.\n\n2\n00:00:07,900 --> 00:00:12,100\nThe quarterly budget meeting moved to Friday afternoon.\n");
    write(
        d,
        "docs/report.pdf",
        &pdf(&[
            "Cover page",
            "Summary of spending",
            "Appendix: invoice numbers",
        ]),
    );
    write(
        d,
        "scans/receipt.jpg",
        &jpeg_with_exif(
            &image::RgbImage::from_fn(40, 30, |x, y| image::Rgb([x as u8 * 6, y as u8 * 8, 90])),
            "2026:11:03 18:30:00",
            "Pixel 8",
        ),
    );
}

#[test]
fn search_cites_the_exact_place() {
    let repo = repo(false);
    let d = repo.path();
    manual_ingest(d);
    library(d);
    ok(d, &["commit", "-m", "library"]);
    let ing = json(d, &["ingest"]);
    assert_eq!(ing["schema"], "lifeos.ingest.v1");
    assert_eq!(ing["extracted"], 5, "{ing}");
    let h = hits(d, &["quarterly budget"]);
    let md = h
        .iter()
        .find(|x| x["path"] == "notes/plan.md")
        .expect("markdown hit");
    assert_eq!(
        md["anchor"],
        serde_json::json!({"kind": "lines", "start": 4, "end": 7})
    );
    assert_eq!(md["cite"], "lines 4–7");
    assert!(
        md["snippet"]
            .as_str()
            .unwrap()
            .contains("[quarterly] [budget]"),
        "{md}"
    );
    let srt = h
        .iter()
        .find(|x| x["path"] == "meetings/2026-11-03.srt")
        .expect("subtitle hit");
    assert_eq!(
        srt["anchor"],
        serde_json::json!({"kind": "time", "start_ms": 7900, "end_ms": 12100})
    );
    assert_eq!(srt["cite"], "00:07.9–00:12.1");
    assert_eq!(srt["commit"], rev_id(d, "@"));
    // HTML: visible text only (the script's "budget" is not indexed), with its line.
    let html = hits(d, &["launch plan"]);
    assert_eq!(html[0]["path"], "web/launch.html");
    assert_eq!(
        html[0]["anchor"],
        serde_json::json!({"kind": "lines", "start": 4, "end": 4})
    );
    assert!(hits(d, &["budget"])
        .iter()
        .all(|x| x["path"] != "web/launch.html"));
    // PDF: the page number.
    let pdf = hits(d, &["invoice"]);
    let p = pdf.iter().find(|x| x["path"] == "docs/report.pdf").unwrap();
    assert_eq!(p["anchor"], serde_json::json!({"kind": "page", "page": 3}));
    assert_eq!(p["cite"], "p. 3");
    // Images: EXIF metadata is searchable; filters by type and path.
    let img = hits(d, &["pixel", "--type", "image", "--path", "scans/**"]);
    assert_eq!(img.len(), 1, "{img:?}");
    assert_eq!(img[0]["path"], "scans/receipt.jpg");
    assert!(
        img[0]["snippet"].as_str().unwrap().contains("[Pixel]"),
        "{}",
        img[0]
    );
    assert!(hits(d, &["pixel", "--type", "pdf"]).is_empty());
    // A glob is read from the folder it starts with; one naming no folder, or a file,
    // finds nothing there; one starting with a pattern reads the whole tree.
    assert_eq!(hits(d, &["pixel", "--path", "scans/*.jpg"]), img);
    assert_eq!(hits(d, &["pixel", "--path", "*/receipt.jpg"]), img);
    assert_eq!(hits(d, &["pixel", "--path", "scans/receipt.jpg"]), img);
    assert!(hits(d, &["pixel", "--path", "scan/**"]).is_empty());
    assert!(hits(d, &["pixel", "--path", "scans/receipt.jpg/**"]).is_empty());
    // A type that does not exist is an error naming the valid ones, not an empty answer.
    let e = fails(d, &["search", "pixel", "--type", "vidoe"]);
    assert!(
        e.contains("possible values") && e.contains("audio") && e.contains("'video'"),
        "{e}"
    );
    // Phrases and exclusions.
    assert!(hits(d, &["\"budget quarterly\""]).is_empty());
    let ex = hits(d, &["budget -meeting"]);
    assert!(
        ex.iter().all(|x| x["path"] != "meetings/2026-11-03.srt"),
        "{ex:?}"
    );
    // Human output cites too.
    let text = ok(d, &["search", "quarterly budget"]);
    assert!(
        text.contains("notes/plan.md")
            && text.contains("lines 4–7")
            && text.contains("00:07.9–00:12.1"),
        "{text}"
    );
}

#[test]
fn user_input_cannot_inject_fts_or_sql() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.md", b"# A\nbudget notes\n");
    ok(d, &["commit", "-m", "a"]);
    ok(d, &["ingest"]);
    for q in [
        "budget\" OR 1=1 --",
        "NEAR(budget notes)",
        "budget*",
        "a:b",
        "'); DROP TABLE segments; --",
        "^budget",
        "\"unterminated",
    ] {
        let out = run(d, &["search", q, "--json"]);
        assert!(
            out.status.success() || String::from_utf8_lossy(&out.stderr).contains("no words"),
            "{q}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(hits(d, &["budget"]).len(), 1, "the catalog is intact");
}

#[test]
fn search_at_a_moment_and_across_all_history() {
    let repo = tempfile::tempdir().unwrap();
    let d = repo.path();
    assert!(TestEnv::at(d)
        .now("2026-09-30T10:00:00Z")
        .run(&["init"])
        .status
        .success());
    write(
        d,
        "notes/launch.md",
        b"# Launch\nThe launch plan is October.\n",
    );
    assert!(TestEnv::at(d)
        .now("2026-09-30T12:00:00Z")
        .run(&["commit", "-m", "v1"])
        .status
        .success());
    write(
        d,
        "notes/launch.md",
        b"# Launch\nThe launch plan slipped to December.\n",
    );
    assert!(TestEnv::at(d)
        .now("2026-10-15T12:00:00Z")
        .run(&["commit", "-m", "v2"])
        .status
        .success());
    assert!(TestEnv::at(d)
        .now("2026-10-16T12:00:00Z")
        .run(&["ingest"])
        .status
        .success());
    let now = "2026-10-20T00:00:00Z";
    let then: Value = serde_json::from_slice(
        &TestEnv::at(d)
            .now(now)
            .run(&["search", "launch plan", "--at", "2026-10-01", "--json"])
            .stdout,
    )
    .unwrap();
    let h = then["hits"].as_array().unwrap();
    assert_eq!(h.len(), 1);
    assert!(
        h[0]["snippet"].as_str().unwrap().contains("October"),
        "{then}"
    );
    let current = hits(d, &["launch plan"]);
    assert!(current[0]["snippet"].as_str().unwrap().contains("December"));
    let all = hits(d, &["launch plan", "--all-history"]);
    assert_eq!(all.len(), 2, "both versions: {all:?}");
    assert!(all.iter().all(|x| x["path"] == "notes/launch.md"));
    assert_ne!(all[0]["commit"], all[1]["commit"]);
}

#[test]
fn reindex_gives_identical_results_without_extracting_again() {
    let repo = repo(false);
    let d = repo.path();
    library(d);
    ok(d, &["commit", "-m", "library"]);
    ok(d, &["ingest"]);
    let queries: Vec<Vec<&str>> = vec![
        vec!["quarterly budget"],
        vec!["invoice"],
        vec!["pixel"],
        vec!["launch plan"],
        vec!["budget", "--all-history"],
    ];
    let answers = |d: &Path| -> Vec<Vec<Value>> { queries.iter().map(|q| hits(d, q)).collect() };
    let before = answers(d);
    for f in ["catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"] {
        let _ = std::fs::remove_file(d.join(".lifeos").join(f));
    }
    let out = ok(d, &["reindex"]);
    assert!(out.contains("5 extracted files"), "{out}");
    assert_eq!(answers(d), before);
    // Nothing is extracted again: every job is known from its stored result.
    let ing = json(d, &["ingest"]);
    assert_eq!(ing["extracted"], 0);
    assert_eq!(ing["already"], 5);
}

#[test]
fn a_killed_ingest_resumes_without_duplicates() {
    let repo = repo(false);
    let d = repo.path();
    let n = 2000;
    for i in 0..n {
        write(
            d,
            &format!("notes/n{i:04}.md"),
            format!("# Note {i}\nbudget line {i}\n").as_bytes(),
        );
    }
    ok(d, &["commit", "-m", "many"]);
    let mut child = TestEnv::at(d)
        .command(["ingest"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it as soon as its first batch is published.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let top = json(d, &["op", "log", "-n", "1"]);
        if top["operations"][0]["description"]
            .as_str()
            .unwrap_or("")
            .starts_with("ingest")
            || std::time::Instant::now() > deadline
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    let ing = json(d, &["ingest"]);
    let (extracted, already) = (
        ing["extracted"].as_u64().unwrap(),
        ing["already"].as_u64().unwrap(),
    );
    assert_eq!(extracted + already, n, "{ing}");
    assert!(
        already > 0 && extracted > 0,
        "the first run was killed midway and the second resumed: {ing}"
    );
    let h = hits(d, &["budget", "--limit", "5000"]);
    assert_eq!(h.len() as u64, n, "one hit per note, no duplicates");
    assert_eq!(json(d, &["fsck"])["ok"], true);
}

#[test]
fn failures_are_recorded_and_retried_only_when_asked() {
    let repo = repo(false);
    let d = repo.path();
    manual_ingest(d);
    write(
        d,
        "docs/broken-invoice.pdf",
        b"%PDF-1.4\nthis is not really a pdf\n",
    );
    ok(d, &["commit", "-m", "broken"]);
    let ing = json(d, &["ingest"]);
    let failed = ing["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["path"], "docs/broken-invoice.pdf");
    assert!(
        failed[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not a readable PDF"),
        "{ing}"
    );
    // Still found by name.
    let h = hits(d, &["invoice"]);
    assert_eq!(h[0]["path"], "docs/broken-invoice.pdf");
    assert_eq!(h[0]["kind"], "name");
    let again = json(d, &["ingest"]);
    assert_eq!(again["failed_before"], 1);
    assert_eq!(again["failed"].as_array().unwrap().len(), 0);
    let retry = json(d, &["ingest", "--retry-failed"]);
    assert_eq!(
        retry["failed"].as_array().unwrap().len(),
        1,
        "retried: {retry}"
    );
}

#[test]
fn secrets_are_neither_stored_in_the_catalog_nor_findable_and_excluded_paths_are_not_indexed() {
    let repo = repo(false);
    let d = repo.path();
    let key = "AKIAZZZZYYYYXXXXWWWW";
    write(
        d,
        "notes/setup.md",
        format!("# Setup\nUse the deploy key {key} and password = s3cr3t-Pa55 for staging.\n")
            .as_bytes(),
    );
    write(d, "private/diary.md", b"# Diary\nmy budget secrets\n");
    let cfg = d.join(".lifeos/config");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[ingest]\nexclude = [\"private/**\"]\n");
    std::fs::write(&cfg, text).unwrap();
    ok(d, &["commit", "-m", "secret"]);
    let ing = json(d, &["ingest"]);
    assert_eq!(ing["excluded"], 1);
    assert!(hits(d, &[key]).is_empty());
    assert!(hits(d, &["s3cr3t"]).is_empty());
    let h = hits(d, &["deploy key"]);
    assert_eq!(h.len(), 1);
    assert!(
        h[0]["snippet"].as_str().unwrap().contains("[REDACTED]"),
        "{}",
        h[0]
    );
    for f in ["catalog.sqlite", "catalog.sqlite-wal"] {
        if let Ok(bytes) = std::fs::read(d.join(".lifeos").join(f)) {
            assert!(
                !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
                "{f} holds the key"
            );
            assert!(
                !bytes.windows(11).any(|w| w == b"s3cr3t-Pa55"),
                "{f} holds the password"
            );
        }
    }
    assert!(hits(d, &["diary budget"])
        .iter()
        .all(|x| x["kind"] == "name" || x["path"] != "private/diary.md"));
}

#[test]
fn undo_after_ingest_undoes_the_commit_not_the_index() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "a.md", b"# A\nfirst\n");
    ok(d, &["commit", "-m", "one"]);
    write(d, "a.md", b"# A\nsecond\n");
    ok(d, &["commit", "-m", "two"]);
    ok(d, &["ingest"]);
    ok(d, &["undo"]);
    let log = json(d, &["log"]);
    assert_eq!(log["commits"].as_array().unwrap().len(), 1, "{log}");
    assert_eq!(std::fs::read(d.join("a.md")).unwrap(), b"# A\nfirst\n");
}

/// An image with `text` drawn on it by ImageMagick (installed by the test script).
fn text_image(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let out = dir.join(name);
    let status = imagemagick()
        .expect("ImageMagick is installed (scripts/test.sh installs it)")
        .args([
            "-size",
            "900x220",
            "xc:white",
            "-font",
            "DejaVu-Sans",
            "-pointsize",
            "56",
            "-fill",
            "black",
            "-annotate",
            "+30+130",
            text,
        ])
        .arg(&out)
        .status()
        .expect("ImageMagick runs");
    assert!(status.success());
    out
}

#[test]
fn images_are_searchable_by_ocr_text_with_its_region_and_by_metadata_without_tesseract() {
    let repo = repo(false);
    let d = repo.path();
    manual_ingest(d);
    let tmp = tempfile::tempdir().unwrap();
    let png = text_image(tmp.path(), "a.png", "Invoice 4711 total");
    let jpg = text_image(tmp.path(), "b.jpg", "Quarterly Budget Review");
    std::fs::create_dir_all(d.join("scans")).unwrap();
    std::fs::copy(&png, d.join("scans/invoice.png")).unwrap();
    std::fs::copy(&jpg, d.join("scans/slide.jpg")).unwrap();
    ok(d, &["commit", "-m", "scans"]);
    // Without tesseract: metadata only, a one-line notice, no error.
    let out = TestEnv::at(d).with("PATH", "/nonexistent").run(&["ingest"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.lines().filter(|l| l.contains("tesseract")).count(),
        1,
        "{err}"
    );
    assert!(hits(d, &["4711"]).is_empty());
    let meta = hits(d, &["png 900x220"]);
    assert_eq!(meta[0]["path"], "scans/invoice.png", "{meta:?}");
    // With tesseract: the text, with the region it is in.
    let ing = json(d, &["ingest"]);
    assert_eq!(ing["ocr"], true, "{ing}");
    let h = hits(d, &["invoice 4711", "--type", "image"]);
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!(h[0]["path"], "scans/invoice.png");
    let r = &h[0]["anchor"];
    assert_eq!(r["kind"], "region");
    let (x, y, w, hh) = (
        r["x"].as_u64().unwrap(),
        r["y"].as_u64().unwrap(),
        r["w"].as_u64().unwrap(),
        r["h"].as_u64().unwrap(),
    );
    assert!(
        (20..=60).contains(&x) && (70..=100).contains(&y) && w > 300 && (30..=90).contains(&hh),
        "region of the drawn text: {r}"
    );
    let j = hits(d, &["budget review"]);
    assert_eq!(j[0]["path"], "scans/slide.jpg", "{j:?}");
    assert!(j[0]["cite"].as_str().unwrap().starts_with("region "));
}

#[test]
fn small_commits_are_searchable_at_once() {
    let repo = repo(false);
    let d = repo.path();
    write(
        d,
        "notes/trip.md",
        b"# Trip\nPack the passport and the camera.\n",
    );
    ok(d, &["commit", "-m", "trip"]);
    let h = hits(d, &["passport"]);
    assert_eq!(h.len(), 1, "indexed as part of the commit: {h:?}");
    assert_eq!(
        h[0]["anchor"],
        serde_json::json!({"kind": "lines", "start": 1, "end": 2})
    );
    let ops = json(d, &["op", "log", "-n", "1"]);
    let types: Vec<&str> = ops["operations"][0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["commit.created", "branch.moved", "content.extracted"],
        "one operation records both"
    );
    assert_eq!(json(d, &["ingest"])["already"], 1);
    // The setting turns it off.
    let cfg = d.join(".lifeos/config");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[ingest]\nafter_commit = false\n");
    std::fs::write(&cfg, text).unwrap();
    write(d, "notes/later.md", b"# Later\nvisa\n");
    ok(d, &["commit", "-m", "later"]);
    assert!(hits(d, &["visa"]).is_empty());
    ok(d, &["ingest"]);
    assert_eq!(hits(d, &["visa"]).len(), 1);
}

/// A commit of more files than a small change holds (500 that an extractor takes) is left
/// whole to `lifeos ingest`; one of exactly 500 is indexed with the commit.
#[test]
fn a_commit_of_more_than_500_extractable_files_is_left_to_ingest() {
    let repo = repo(false);
    let d = repo.path();
    for i in 0..500 {
        write(
            d,
            &format!("small/n{i:03}.md"),
            format!("# Note {i}\nalpha{i}\n").as_bytes(),
        );
    }
    ok(d, &["commit", "-m", "500"]);
    assert_eq!(hits(d, &["alpha499"]).len(), 1, "indexed with the commit");
    for i in 0..501 {
        write(
            d,
            &format!("large/n{i:03}.md"),
            format!("# Note {i}\nbeta{i}\n").as_bytes(),
        );
    }
    ok(d, &["commit", "-m", "501"]);
    assert!(hits(d, &["beta0"]).is_empty(), "left to ingest");
    assert!(hits(d, &["beta500"]).is_empty(), "left to ingest");
    ok(d, &["ingest"]);
    assert_eq!(hits(d, &["beta500"]).len(), 1);
}

#[test]
fn a_video_with_sidecar_subtitles_is_searchable_at_once() {
    let repo = repo(false);
    let d = repo.path();
    write(d, "meetings/2026-11-03.mp4", &noise(200_000, 9));
    write(d, "meetings/2026-11-03.srt", b"1\n00:00:07,900 --> 00:00:12,100\nthe quarterly budget meeting moved to Friday afternoon\n");
    write(d, "notes/other.md", b"# Other\nbudget meeting notes\n");
    ok(d, &["commit", "-m", "meeting"]);
    let h = hits(d, &["budget meeting", "--type", "video"]);
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!(h[0]["media"], "meetings/2026-11-03.mp4");
    assert_eq!(h[0]["path"], "meetings/2026-11-03.srt");
    assert_eq!(h[0]["cite"], "00:07.9–00:12.1");
    let text = ok(d, &["search", "budget meeting", "--type", "video"]);
    assert!(
        text.starts_with("meetings/2026-11-03.mp4 (subtitles meetings/2026-11-03.srt)"),
        "{text}"
    );
}

/// Regression: a bad `[ingest]` or `[speech]` table in `.lifeos/config` stopped `lifeos
/// commit` (which only indexes small changes with it), and `[speech]` errors were labelled
/// `[ingest]`.
#[test]
fn a_bad_ingest_or_speech_table_does_not_stop_a_commit_and_names_its_table() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    let config = d.join(".lifeos/config");
    let good = std::fs::read_to_string(&config).unwrap();
    for (table, line) in [("speech", "threads = \"x\""), ("ingest", "ocr = \"maybe\"")] {
        std::fs::write(&config, format!("{good}\n[{table}]\n{line}\n")).unwrap();
        write(d, &format!("{table}.txt"), b"budget meeting notes\n");
        let out = TestEnv::at(d).run(&["commit", "-m", table]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains(&format!("repository config [{table}]")),
            "{err}"
        );
        assert!(err.contains("lifeos ingest"), "{err}");
        let e = fails(d, &["ingest"]);
        assert!(e.contains(&format!("repository config [{table}]")), "{e}");
    }
    let log = ok(d, &["log"]);
    assert!(log.contains("speech") && log.contains("ingest"), "{log}");
    // Fixed, the next ingest indexes what the commits left.
    std::fs::write(&config, good).unwrap();
    ok(d, &["ingest"]);
    assert_eq!(hits(d, &["budget"]).len(), 2);
}

/// `lifeos extract show PATH [--at WHEN] --json` as JSON, checked against its schema name.
fn extract_at(d: &Path, now: &str, args: &[&str]) -> Value {
    let mut a = vec!["extract", "show"];
    a.extend_from_slice(args);
    let v = TestEnv::at(d).now(now).ok_json(&a);
    assert_eq!(v["schema"], "lifeos.extract.v1");
    v
}

#[test]
fn extract_show_reads_back_lines_pages_ocr_exif_and_failures_as_they_were() {
    let repo = tempfile::tempdir().unwrap();
    let d = repo.path();
    TestEnv::at(d).now("2026-10-01T09:00:00Z").ok(&["init"]);
    manual_ingest(d);
    library(d);
    let tmp = tempfile::tempdir().unwrap();
    let png = text_image(tmp.path(), "a.png", "Invoice 4711 total");
    std::fs::copy(&png, d.join("scans/invoice.png")).unwrap();
    write(d, "docs/broken.pdf", b"%PDF-1.4\nnot really a pdf\n");
    write(d, "data.bin", &[0, 1, 2, 3]);
    TestEnv::at(d)
        .now("2026-10-01T10:00:00Z")
        .ok(&["commit", "-m", "v1"]);
    let now = "2026-10-01T10:05:00Z";

    // Before ingest: what is pending, and what no extractor reads.
    let list = TestEnv::at(d).now(now).ok_json(&["extract", "list"]);
    assert_eq!(list["schema"], "lifeos.extract_list.v1");
    let state = |list: &Value, path: &str| -> Vec<(Value, Value)> {
        list["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == path)
            .unwrap_or_else(|| panic!("{path} in {list}"))["extracts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| (x["extractor"].clone(), x["state"].clone()))
            .collect()
    };
    assert_eq!(
        state(&list, "notes/plan.md"),
        [("markdown".into(), "pending".into())]
    );
    assert_eq!(
        state(&list, "data.bin"),
        [(Value::Null, "no_extractor".into())]
    );
    let before = fails(d, &["extract", "show", "notes/plan.md"]);
    assert!(
        before.contains("nothing was extracted from notes/plan.md")
            && before.contains("lifeos ingest"),
        "{before}"
    );

    let ingest_op = {
        TestEnv::at(d).now("2026-10-01T11:00:00Z").ok(&["ingest"]);
        json(d, &["op", "log", "-n", "1"])["operations"][0]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let list = json(d, &["extract", "list"]);
    assert_eq!(
        state(&list, "notes/plan.md"),
        [("markdown".into(), "done".into())]
    );
    assert_eq!(
        state(&list, "docs/broken.pdf"),
        [("pdf".into(), "failed".into())]
    );

    // Markdown: each section with its lines, the extractor and the operation that made it.
    let text = ok(d, &["extract", "show", "notes/plan.md"]);
    assert!(text.contains("markdown 1"), "{text}");
    assert!(
        text.contains(&format!("by operation {}", &ingest_op[..12])),
        "{text}"
    );
    assert!(text.contains("lines 4–7  ## Budget"), "{text}");
    // Continuation lines under the first, past the widest place ("lines 1–3" and two spaces).
    let under = " ".repeat("lines 1–3".chars().count() + 2);
    assert!(
        text.contains(&format!("\n{under}The quarterly budget is 12,000.\n")),
        "{text}"
    );
    let plan = extract_at(d, now, &["notes/plan.md"]);
    let x = &plan["extracts"][0];
    assert_eq!(x["extractor"], "markdown");
    assert_eq!(x["state"], "done");
    assert_eq!(x["operation"], ingest_op.as_str());
    assert_eq!(x["time_ms"], 1_790_852_400_000i64);
    let sections: Vec<(&str, &str)> = x["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["cite"].as_str().unwrap(), s["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        sections,
        [
            ("lines 1–3", "# Plan\nIntro text."),
            (
                "lines 4–7",
                "## Budget\nThe quarterly budget is 12,000.\nReviewed in March."
            ),
            ("lines 8–9", "## Team\nAnn and Bob."),
        ]
    );

    // A PDF by page; an image's OCR lines with their regions; a photo's EXIF fields.
    let pdf = ok(d, &["extract", "show", "docs/report.pdf"]);
    assert!(pdf.contains("p. 2  Summary of spending"), "{pdf}");
    let img = extract_at(d, now, &["scans/invoice.png"]);
    let segs = img["extracts"][0]["segments"].as_array().unwrap();
    assert_eq!(segs[0]["kind"], "metadata");
    assert_eq!(segs[0]["text"], "image Png 900x220");
    let ocr = segs
        .iter()
        .find(|s| s["kind"] == "ocr")
        .unwrap_or_else(|| panic!("an OCR line in {img}"));
    assert!(ocr["text"].as_str().unwrap().contains("4711"), "{ocr}");
    assert_eq!(ocr["anchor"]["kind"], "region");
    assert!(ocr["cite"].as_str().unwrap().starts_with("region "));
    let photo = extract_at(d, now, &["scans/receipt.jpg"]);
    let meta = &photo["extracts"][0]["segments"][0];
    assert_eq!(meta["meta"]["camera model"], "Pixel 8", "{photo}");
    assert_eq!(meta["meta"]["date taken"], "2026-11-03 18:30:00", "{photo}");
    assert!(meta["text"]
        .as_str()
        .unwrap()
        .contains("camera model: Pixel 8"));

    // A failure is shown with its reason, and the command says so by its exit code.
    let out = run(d, &["extract", "show", "docs/broken.pdf"]);
    assert_eq!(out.status.code(), Some(1));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("failed: not a readable PDF"), "{shown}");
    let broken = extract_at(d, now, &["docs/broken.pdf"]);
    assert_eq!(broken["extracts"][0]["state"], "failed");
    assert!(broken["extracts"][0]["reason"]
        .as_str()
        .unwrap()
        .starts_with("not a readable PDF"));
    let bin = fails(d, &["extract", "show", "data.bin"]);
    assert!(
        bin.contains("no extractor reads files of its kind"),
        "{bin}"
    );

    // The version at a moment and at a revision, not the newest.
    write(
        d,
        "notes/plan.md",
        b"# Plan\nThe budget was cut to 9,000.\n",
    );
    TestEnv::at(d)
        .now("2026-10-02T10:00:00Z")
        .ok(&["commit", "-m", "v2"]);
    TestEnv::at(d).now("2026-10-02T11:00:00Z").ok(&["ingest"]);
    let later = "2026-10-03T00:00:00Z";
    let text_of = |v: &Value| v["extracts"][0]["segments"][0]["text"].clone();
    assert_eq!(
        text_of(&extract_at(d, later, &["notes/plan.md"])),
        "# Plan\nThe budget was cut to 9,000."
    );
    let then = extract_at(d, later, &["notes/plan.md", "--at", "2026-10-01 12:00"]);
    assert_eq!(text_of(&then), "# Plan\nIntro text.");
    assert_eq!(then["commit"], rev_id(d, "@-").as_str());
    let by_rev = extract_at(d, later, &["notes/plan.md", "-r", "@-"]);
    assert_eq!(by_rev["extracts"], then["extracts"]);
    let missing = fails(d, &["extract", "show", "notes/nothing.md"]);
    assert!(missing.contains("notes/nothing.md"), "{missing}");
    // A folder is refused as `cat` refuses it, pointing at the list of its files.
    let folder = fails(d, &["extract", "show", "notes"]);
    assert!(
        folder.contains("notes is a directory, not a file")
            && folder.contains("lifeos extract list notes"),
        "{folder}"
    );
    let unknown = fails(d, &["extract", "list", "notes/nothing.md"]);
    assert!(
        unknown.contains("notes/nothing.md does not exist in @"),
        "{unknown}"
    );
}
