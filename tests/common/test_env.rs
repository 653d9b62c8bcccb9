//! [`TestEnv`]: the one way the end-to-end tests run the binary.

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The clock of the first command of a pinned environment ([`TestEnv::pinned`]); each
/// later command runs a minute after the one before.
pub const PINNED_START: &str = "2026-11-02T09:00:00Z";

/// The host name of a pinned environment's commands.
pub const PINNED_HOST: &str = "lifeos-test";

/// How a test runs `lifeos`: the folder it runs in, the variables it gets (over a fixed
/// identity, no colour and no speech models), the input it reads and the program it is run
/// through. An environment is a value: [`TestEnv::with`] and the other builders return a
/// changed copy, so one test can keep several (`let m = env.with("LIFEOS_MODELS", dir)`).
///
/// A pinned environment ([`TestEnv::pinned`]) also gives each command its own
/// `LIFEOS_RANDOMNESS_SEED` and `LIFEOS_NOW` from a counter its copies share, and a fixed
/// `LIFEOS_HOSTNAME` and time zone, so change ids, operation ids and times, and with them
/// whole screens, are the same on every run and every machine.
#[derive(Clone)]
pub struct TestEnv {
    dir: PathBuf,
    /// The temporary folder this environment made, deleted with its last copy.
    tmp: Option<Arc<tempfile::TempDir>>,
    /// Variables set (`Some`) or removed (`None`), in order; later ones win.
    vars: Vec<(OsString, Option<OsString>)>,
    stdin: Option<Arc<[u8]>>,
    /// A program (and its arguments) the binary is run through, such as `setpriv`.
    via: Vec<OsString>,
    /// The count of commands run so far, for a pinned environment.
    commands: Option<Arc<AtomicU64>>,
}

impl TestEnv {
    /// An environment in a new, empty temporary folder (deleted with the environment).
    pub fn new() -> TestEnv {
        let tmp = tempfile::tempdir().unwrap();
        TestEnv {
            dir: tmp.path().to_path_buf(),
            tmp: Some(Arc::new(tmp)),
            ..TestEnv::at(Path::new("/"))
        }
    }

    /// An environment in a new temporary folder holding a new repository.
    pub fn repo() -> TestEnv {
        let env = TestEnv::new();
        env.ok(&["init"]);
        env
    }

    /// A pinned environment ([`TestEnv::pinned`]) in a new temporary folder holding a new
    /// repository.
    pub fn pinned_repo() -> TestEnv {
        let env = TestEnv::new().pinned();
        env.ok(&["init"]);
        env
    }

    /// An environment that runs in `dir`, which the test owns.
    pub fn at(dir: &Path) -> TestEnv {
        TestEnv {
            dir: dir.to_path_buf(),
            tmp: None,
            vars: Vec::new(),
            stdin: None,
            via: Vec::new(),
            commands: None,
        }
    }

    /// The folder commands run in.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// A path in the folder commands run in.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.dir.join(rel)
    }

    /// The same environment, running in `dir` (a path relative to the current folder is
    /// taken from it). A pinned environment keeps counting.
    pub fn cd(&self, dir: impl AsRef<Path>) -> TestEnv {
        TestEnv {
            dir: self.dir.join(dir),
            ..self.clone()
        }
    }

    /// The same environment with `key` set to `value` for every command.
    pub fn with(&self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> TestEnv {
        let mut env = self.clone();
        env.vars
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        env
    }

    /// The same environment with `key` unset (the tests' own default included).
    pub fn without(&self, key: impl AsRef<OsStr>) -> TestEnv {
        let mut env = self.clone();
        env.vars.push((key.as_ref().to_owned(), None));
        env
    }

    /// The same environment with the clock at `now` (RFC 3339), so operations land at
    /// known times.
    pub fn now(&self, now: &str) -> TestEnv {
        self.with("LIFEOS_NOW", now)
    }

    /// The same environment, feeding `bytes` to each command's standard input (which is
    /// otherwise empty).
    pub fn input(&self, bytes: impl AsRef<[u8]>) -> TestEnv {
        TestEnv {
            stdin: Some(bytes.as_ref().into()),
            ..self.clone()
        }
    }

    /// The same environment, running the binary through `program args...` (which ends
    /// with `--` or whatever the program wants before the command it runs).
    pub fn via(&self, program: &[&str]) -> TestEnv {
        TestEnv {
            via: program.iter().map(OsString::from).collect(),
            ..self.clone()
        }
    }

    /// The same environment, pinned: from now on each command gets its own
    /// `LIFEOS_RANDOMNESS_SEED` and a `LIFEOS_NOW` one minute after the last, counted
    /// from [`PINNED_START`], the host name [`PINNED_HOST`] and `TZ=UTC`, unless the test
    /// sets them (a [`TestEnv::now`] keeps its time, and the seed still changes).
    pub fn pinned(&self) -> TestEnv {
        TestEnv {
            commands: Some(Arc::new(AtomicU64::new(0))),
            ..self.clone()
        }
    }

    /// A command for `lifeos args...` in this environment, to spawn or to give more
    /// settings; its standard input is empty unless [`TestEnv::input`] gave some, which
    /// only [`TestEnv::run`] and the others below write.
    pub fn command<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> Command {
        let mut c = match self.via.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(super::bin());
                c
            }
            None => Command::new(super::bin()),
        };
        c.current_dir(&self.dir)
            .env("LIFEOS_AUTHOR_NAME", "Test User")
            .env("LIFEOS_AUTHOR_EMAIL", "test@example.com")
            .env("NO_COLOR", "1")
            // No speech model unless a test installs one (not the user's own models).
            .env("LIFEOS_MODELS", "/nonexistent/lifeos-test-models")
            .env_remove("LIFEOS_NOW")
            .env_remove("LIFEOS_RANDOMNESS_SEED")
            .env_remove("LIFEOS_HOSTNAME")
            .stdin(Stdio::null());
        if let Some(count) = &self.commands {
            let n = count.fetch_add(1, Ordering::Relaxed);
            let start: jiff::Timestamp = PINNED_START.parse().unwrap();
            let now = start
                .checked_add(jiff::SignedDuration::from_mins(n as i64))
                .unwrap();
            c.env("LIFEOS_RANDOMNESS_SEED", n.to_string())
                .env("LIFEOS_NOW", now.to_string())
                // The host name is part of every operation id.
                .env("LIFEOS_HOSTNAME", PINNED_HOST)
                // Times are shown, and recorded with their offset, in UTC.
                .env("TZ", "UTC");
        }
        for (k, v) in &self.vars {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c.args(args);
        c
    }

    /// Runs `lifeos args...` (arguments that need not be UTF-8) and waits for it.
    pub fn run_os<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> Output {
        let mut c = self.command(args);
        let Some(input) = &self.stdin else {
            return c.output().expect("lifeos runs");
        };
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("lifeos runs");
        let mut pipe = child.stdin.take().unwrap();
        let input = input.clone();
        // Written from another thread, so a command that prints before it reads cannot
        // block on a full pipe.
        let writer = std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        });
        let out = child.wait_with_output().expect("lifeos runs");
        writer.join().unwrap();
        out
    }

    /// Runs `lifeos args...` and waits for it.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_os(args)
    }

    /// Runs `lifeos args...` with byte-string arguments (names that are not UTF-8).
    pub fn run_bytes(&self, args: &[&[u8]]) -> Output {
        self.run_os(args.iter().map(|a| OsStr::from_bytes(a)))
    }

    /// Runs and asserts success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        succeeded(self.run(args), args)
    }

    /// Runs with byte-string arguments and asserts success; returns stdout.
    pub fn ok_bytes(&self, args: &[&[u8]]) -> String {
        let shown: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
        succeeded(self.run_bytes(args), &shown)
    }

    /// Runs and asserts success; returns stderr (the warnings of a command that worked).
    pub fn ok_stderr(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        succeeded(out, args);
        stderr
    }

    /// Runs and asserts failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            !out.status.success(),
            "lifeos {args:?} should have failed:\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Runs with `--json` and parses stdout (which it reads whether the command
    /// succeeded or not).
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.push("--json");
        let out = self.run(&a);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "lifeos {a:?} printed no JSON ({e}):\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// Runs with `--json`, asserts success and parses stdout.
    pub fn ok_json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.push("--json");
        let out = self.ok(&a);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("lifeos {a:?}: {e}: {out}"))
    }

    /// How many operations the op log holds.
    pub fn op_count(&self) -> usize {
        self.json(&["op", "log"])["operations"]
            .as_array()
            .unwrap()
            .len()
    }

    /// What `lifeos args...` shows a person, whole: its stdout, its stderr under a line
    /// that says so, each closed by `[EOF]`, and its exit status when it is not 0 (as
    /// jj's tests show theirs), with what differs from run to run replaced (see
    /// [`TestEnv::normalize`]). For snapshots.
    pub fn screen(&self, args: &[&str]) -> String {
        self.screen_of(self.run(args))
    }

    /// The screen ([`TestEnv::screen`]) of a command already run.
    pub fn screen_of(&self, out: Output) -> String {
        let mut s = self.normalize(&String::from_utf8_lossy(&out.stdout));
        s.push_str("[EOF]\n");
        if !out.stderr.is_empty() {
            s.push_str("------- stderr -------\n");
            s.push_str(&self.normalize(&String::from_utf8_lossy(&out.stderr)));
            s.push_str("[EOF]\n");
        }
        if !out.status.success() {
            match out.status.code() {
                Some(code) => s.push_str(&format!("[exit status: {code}]\n")),
                None => s.push_str(&format!("[{}]\n", out.status)),
            }
        }
        s
    }

    /// Replaces what a screen shows that differs between runs of the same commands:
    /// - the temporary folder (as given, and as the system resolves it) becomes
    ///   `$TEST_ENV`, so paths read the same wherever the test ran;
    /// - how long something took (`in 12 ms`, `(0.02 s)`, `done in 3 ms`) becomes
    ///   `[DURATION]`, since wall time is not pinned by `LIFEOS_NOW`;
    /// - the `Nx real time` speed of a transcription becomes `[SPEED]`, for the same
    ///   reason.
    pub fn normalize(&self, text: &str) -> String {
        let root = self.tmp.as_ref().map_or(self.dir.as_path(), |t| t.path());
        let mut out = text.to_string();
        let mut roots = vec![root.to_path_buf()];
        if let Ok(real) = root.canonicalize() {
            roots.insert(0, real);
        }
        for r in roots {
            out = out.replace(r.to_str().unwrap(), "$TEST_ENV");
        }
        for (pattern, with) in [
            (r"\b\d+(\.\d+)? ?(ms|s)\b(\)| of work)", "[DURATION]$3"),
            (r"\bin \d+(\.\d+)? ?(ms|s)\b", "in [DURATION]"),
            (r"\(\d+(\.\d+)?× real time\)", "([SPEED])"),
        ] {
            out = regex::Regex::new(pattern)
                .unwrap()
                .replace_all(&out, with)
                .into_owned();
        }
        out
    }
}

impl Default for TestEnv {
    fn default() -> TestEnv {
        TestEnv::new()
    }
}

/// Asserts that a run of `lifeos args...` succeeded; returns its stdout as a string.
pub fn succeeded(out: Output, args: &[&str]) -> String {
    assert!(
        out.status.success(),
        "lifeos {args:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}
