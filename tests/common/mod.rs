//! Helpers for end-to-end tests: run the real `lifeos` binary on real files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The built binary.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lifeos"))
}

/// A command for the binary in `dir`, with a fixed identity and no colour.
pub fn cmd(dir: &Path) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(dir)
        .env("LIFEOS_AUTHOR_NAME", "Test User")
        .env("LIFEOS_AUTHOR_EMAIL", "test@example.com")
        .env("NO_COLOR", "1")
        .env_remove("LIFEOS_NOW");
    c
}

/// Runs `lifeos args...` in `dir`.
pub fn run(dir: &Path, args: &[&str]) -> Output {
    cmd(dir).args(args).output().expect("lifeos runs")
}

/// Runs and asserts success; returns stdout as a string.
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(
        out.status.success(),
        "lifeos {args:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Runs and asserts failure; returns stderr.
pub fn fails(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(
        !out.status.success(),
        "lifeos {args:?} should have failed:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs with `--json` and parses stdout.
pub fn json(dir: &Path, args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    let out = run(dir, &a);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "lifeos {a:?} printed no JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Deterministic pseudo-random bytes (xorshift), incompressible.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Writes a file, creating its parents.
pub fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

/// A folder's files (path and content or link target), sorted by path.
pub type Listing = Vec<(String, Vec<u8>)>;

/// Every regular file and symlink under `root` (skipping `.lifeos`), with its content
/// (or link target), sorted by path.
pub fn snapshot_of(root: &Path) -> Listing {
    fn go(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".lifeos" {
                continue;
            }
            let ft = e.file_type().unwrap();
            if ft.is_symlink() {
                out.push((
                    rel,
                    std::fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            } else if ft.is_dir() {
                go(root, &p, out);
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    go(root, root, &mut out);
    out.sort();
    out
}

/// A fresh repository in a temp dir, optionally with small packs so one commit spans
/// several of them.
pub fn repo(small_packs: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ok(dir.path(), &["init"]);
    if small_packs {
        let cfg = dir.path().join(".lifeos/config");
        let text = std::fs::read_to_string(&cfg).unwrap();
        let text = text.replace("target_size = 67108864", "target_size = 1048576");
        assert!(
            text.contains("target_size = 1048576"),
            "config format changed: {text}"
        );
        std::fs::write(cfg, text).unwrap();
    }
    dir
}

/// The commit id of a revision.
pub fn rev_id(dir: &Path, rev: &str) -> String {
    let v = json(dir, &["log", "-r", rev]);
    v["commits"][0]["commit"].as_str().unwrap().to_string()
}
