//! Output helpers: sizes, colour, JSON documents with a schema name.

use crate::error::{CliError, CliResult};
use std::io::{IsTerminal, Write};

/// Formats a byte count for people (KiB, MiB, ... with one decimal).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Colour settings.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Whether to emit ANSI colour codes on stdout.
    pub color: bool,
}

impl Style {
    /// Colour on stdout when it is a terminal and `NO_COLOR` is unset, unless overridden.
    pub fn detect(choice: crate::ColorChoice) -> Style {
        Style::for_stream(choice, std::io::stdout().is_terminal())
    }

    /// The same for stderr (the `error:` and `hint:` prefixes).
    pub fn detect_stderr(choice: crate::ColorChoice) -> Style {
        Style::for_stream(choice, std::io::stderr().is_terminal())
    }

    fn for_stream(choice: crate::ColorChoice, terminal: bool) -> Style {
        let color = match choice {
            crate::ColorChoice::Always => true,
            crate::ColorChoice::Never => false,
            crate::ColorChoice::Auto => terminal && std::env::var_os("NO_COLOR").is_none(),
        };
        Style { color }
    }

    fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    /// A commit or operation id.
    pub fn id(&self, s: &str) -> String {
        self.paint("1;34", s)
    }

    /// A change id.
    pub fn change(&self, s: &str) -> String {
        self.paint("1;35", s)
    }

    /// A branch or tag name.
    pub fn name(&self, s: &str) -> String {
        self.paint("1;32", s)
    }

    /// A problem.
    pub fn bad(&self, s: &str) -> String {
        self.paint("1;31", s)
    }

    /// Emphasised words inside a changed line.
    pub fn emph(&self, s: &str) -> String {
        self.paint("1;4", s)
    }

    /// Secondary text.
    pub fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }
}

/// Prints a JSON document tagged with its schema name on stdout.
pub fn print_json(schema: &str, mut value: serde_json::Value) {
    if let serde_json::Value::Object(map) = &mut value {
        map.insert("schema".into(), schema.into());
    }
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer_pretty(&mut out, &value);
    let _ = writeln!(out);
}

/// Whether `-q` was given.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records `-q` for [`bar`] and [`quiet`].
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `-q` was given: notes about what was done stay unsaid (warnings and errors
/// are still said).
pub fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// A progress bar on stderr, drawn only when stderr is a terminal (and not with `-q`).
pub fn bar(len: u64, what: &str) -> indicatif::ProgressBar {
    if quiet() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::with_draw_target(
        Some(len),
        indicatif::ProgressDrawTarget::stderr(),
    );
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg:>10} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

/// Formats milliseconds since the epoch as local `YYYY-MM-DD HH:MM:SS±ZZ:ZZ`.
pub fn local_time(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => ts
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%Y-%m-%d %H:%M:%S%:z")
            .to_string(),
        Err(_) => format!("@{ms}ms"),
    }
}

/// Formats a time relative to now: "3 minutes ago", "2 days ago", or the date when old.
/// Now is the operations' clock, so a test that sets it (`LIFEOS_NOW`) sees the same
/// words on every run.
pub fn relative_time(ms: i64) -> String {
    let now = lifeos_vcs::repo::now_ms();
    let secs = (now - ms) / 1000;
    let (n, unit) = match secs {
        s if s < 0 => return local_time(ms),
        s if s < 60 => return "just now".into(),
        s if s < 3600 => (s / 60, "minute"),
        s if s < 86_400 => (s / 3600, "hour"),
        s if s < 30 * 86_400 => (s / 86_400, "day"),
        _ => return local_time(ms)[..10].to_string(),
    };
    format!("{n} {unit}{} ago", if n == 1 { "" } else { "s" })
}

/// Paths that were skipped or could not be read, with the reason, for `--json`.
pub fn skipped_json(list: &[lifeos_vcs::working_copy::Skipped]) -> Vec<serde_json::Value> {
    list.iter()
        .map(
            |k| serde_json::json!({"path": lifeos_vcs::path::display(&k.path), "reason": k.reason}),
        )
        .collect()
}

/// Writes `bytes` to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn write_stdout(bytes: &[u8]) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::new(format!("writing to stdout: {e}"))),
    }
}
