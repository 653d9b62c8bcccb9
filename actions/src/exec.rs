//! Carrying out `run` and `http` payloads: a command with a timeout and an output cap, a
//! JSON POST with a timeout and retries.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use lifeos_vcs::object::action::Outcome;

/// What running a payload came to.
#[derive(Debug)]
pub struct Ran {
    /// Executed or failed.
    pub outcome: Outcome,
    /// Why it failed, or a summary of what it did.
    pub reason: String,
    /// Exit status or HTTP status.
    pub status: Option<i64>,
    /// Captured output (not yet redacted), at most the cap.
    pub output: Vec<u8>,
    /// The operation an internal action published.
    pub effect: Option<lifeos_store::Id>,
}

impl Ran {
    /// An internal action that published operation `effect`.
    pub fn done(reason: String, effect: lifeos_store::Id) -> Ran {
        Ran {
            outcome: Outcome::Executed,
            reason,
            status: None,
            output: Vec::new(),
            effect: Some(effect),
        }
    }

    /// A failure with nothing to show but the reason.
    pub fn failure(reason: String) -> Ran {
        failed(reason, None, Vec::new())
    }
}

fn failed(reason: String, status: Option<i64>, output: Vec<u8>) -> Ran {
    Ran {
        outcome: Outcome::Failed,
        reason,
        status,
        output,
        effect: None,
    }
}

/// The command line of a `run` payload (its `argv` strings).
pub fn argv(payload: &Json) -> Vec<String> {
    payload["argv"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads at most `cap` bytes of `r` (the rest is read and dropped, so the writer never
/// blocks), noting whether anything was cut.
fn capped(mut r: impl Read, cap: u64) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let _ = (&mut r).take(cap).read_to_end(&mut out);
    let rest = std::io::copy(&mut r, &mut std::io::sink()).unwrap_or(0);
    (out, rest > 0)
}

/// Runs a `run` payload in `workdir`: `program` (the absolute path its approval pinned
/// `argv[0]` to) with the rest of `argv`, in an environment of `env` alone; the event on
/// stdin, its output captured up to the cap, killed (with everything it started) at the
/// timeout.
pub fn run(payload: &Json, workdir: &Path, program: &Path, env: &[(String, String)]) -> Ran {
    let argv = argv(payload);
    let Some((_, args)) = argv.split_first() else {
        return failed("the payload has no command".into(), None, Vec::new());
    };
    let timeout = Duration::from_millis(payload["timeout_ms"].as_u64().unwrap_or(60_000));
    let cap = payload["output_cap"].as_u64().unwrap_or(64 << 10);
    let cwd = workdir.join(payload["cwd"].as_str().unwrap_or("."));
    let stdin = serde_json::to_vec(&payload["stdin"]).unwrap_or_default();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so a timeout stops what it started too.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return failed(
                format!("cannot start {program:?} in {}: {e}", cwd.display()),
                None,
                Vec::new(),
            )
        }
    };
    let pid = child.id();
    if let Some(mut input) = child.stdin.take() {
        std::thread::spawn(move || {
            let _ = input.write_all(&stdin);
        });
    }
    let out = child
        .stdout
        .take()
        .map(|o| std::thread::spawn(move || capped(o, cap)));
    let err = child
        .stderr
        .take()
        .map(|e| std::thread::spawn(move || capped(e, cap)));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if start.elapsed() >= timeout => {
                // SAFETY: signals the process group the child leads (created above).
                unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
                let _ = child.wait();
                break Err(format!(
                    "timed out after {} ms and was killed",
                    timeout.as_millis()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => break Err(format!("waiting for it failed: {e}")),
        }
    };
    let join = |h: Option<std::thread::JoinHandle<(Vec<u8>, bool)>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    let ((mut output, cut_out), (stderr, cut_err)) = (join(out), join(err));
    if !stderr.is_empty() {
        output.extend_from_slice(b"\n--- stderr ---\n");
        output.extend_from_slice(&stderr);
    }
    if cut_out || cut_err {
        output.extend_from_slice(format!("\n[output cut at {cap} bytes]\n").as_bytes());
    }
    match status {
        Err(reason) => failed(reason, None, output),
        Ok(s) => match s.code() {
            Some(0) => Ran {
                outcome: Outcome::Executed,
                reason: "exit status 0".into(),
                status: Some(0),
                output,
                effect: None,
            },
            Some(c) => failed(format!("exit status {c}"), Some(i64::from(c)), output),
            None => failed("killed by a signal".into(), None, output),
        },
    }
}

/// POSTs an `http` payload's body as JSON, retrying when no connection could be made or
/// the server answers 429 or 503 (the request was not handled); never after a
/// timeout or a broken connection once it was sent, which the server may have received.
pub fn http(payload: &Json) -> Ran {
    let url = payload["url"].as_str().unwrap_or_default();
    let timeout = Duration::from_millis(payload["timeout_ms"].as_u64().unwrap_or(10_000));
    let retries = payload["retries"].as_u64().unwrap_or(0);
    let body = serde_json::to_vec(&payload["body"]).unwrap_or_default();
    let agent = ureq::AgentBuilder::new()
        .timeout(timeout)
        .redirects(0)
        .build();
    let mut last = failed("no attempt was made".into(), None, Vec::new());
    for attempt in 0..=retries {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(200 << attempt.min(5)));
        }
        let answer = agent
            .post(url)
            .set("Content-Type", "application/json")
            .set("User-Agent", concat!("lifeos/", env!("CARGO_PKG_VERSION")))
            .send_bytes(&body);
        let (status, resp) = match answer {
            Ok(r) => (r.status(), Some(r)),
            Err(ureq::Error::Status(code, r)) => (code, Some(r)),
            // Sent again only when it surely did not arrive: no connection was made.
            Err(ureq::Error::Transport(t))
                if matches!(
                    t.kind(),
                    ureq::ErrorKind::Dns | ureq::ErrorKind::ConnectionFailed
                ) =>
            {
                last = failed(format!("POST {url}: {t}"), None, Vec::new());
                continue;
            }
            Err(ureq::Error::Transport(t)) => {
                return failed(
                    format!("POST {url}: {t}; not sent again, as the server may have received it"),
                    None,
                    Vec::new(),
                )
            }
        };
        let text = resp
            .map(|r| capped(r.into_reader(), 64 << 10).0)
            .unwrap_or_default();
        let ran = if (200..300).contains(&status) {
            Ran {
                outcome: Outcome::Executed,
                reason: format!("HTTP {status}"),
                status: Some(i64::from(status)),
                output: text,
                effect: None,
            }
        } else {
            failed(format!("HTTP {status}"), Some(i64::from(status)), text)
        };
        // Tried again only on answers that say the request was not handled (a gateway's
        // 502 or 504 may come after the server behind it took the request).
        if !matches!(status, 429 | 503) {
            return ran;
        }
        last = ran;
    }
    last
}
