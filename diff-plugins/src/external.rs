//! External plugins: commands configured per repository for formats lifeos does not know.
//!
//! In `.lifeos/config`:
//!
//! ```toml
//! [[diff.external]]
//! name = "godot-scene"
//! globs = ["*.tscn"]
//! command = ["godot-scene-diff", "{old}", "{new}"]
//! timeout_ms = 5000
//! ```
//!
//! The command gets the two versions as files (an empty file for a side that does not
//! exist) and prints a JSON document in the plugin schema ([`crate::PLUGIN_SCHEMA`]):
//! `{"schema": "lifeos.diff-plugin.v1", "summary": "...", "changes": [...]}`, changes as
//! in `lifeos.diff.v1`. A command that fails, prints something else, or runs past its
//! timeout is killed and lifeos falls back to its own plugins, with a note.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

use crate::{DiffError, DiffPlugin, FileDiff, Located, Options, Probe, Side, PLUGIN_SCHEMA};

/// Largest version handed to an external command.
const MAX_EXTERNAL: u64 = 1 << 30;

/// One configured external plugin.
#[derive(Debug, Clone, Deserialize)]
pub struct ExternalConfig {
    /// Name shown in output.
    pub name: String,
    /// Globs matched against the repository path (or its file name).
    pub globs: Vec<String>,
    /// The command and its arguments; `{old}` and `{new}` are replaced by file paths.
    pub command: Vec<String>,
    /// Time limit in milliseconds (default 10 s).
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
}

fn default_timeout() -> u64 {
    10_000
}

#[derive(Deserialize, Default)]
struct DiffSection {
    #[serde(default)]
    external: Vec<ExternalConfig>,
}

#[derive(Deserialize, Default)]
struct ConfigFile {
    #[serde(default)]
    diff: DiffSection,
}

/// Reads the `[[diff.external]]` entries of a repository config.
pub fn load_config(text: &str) -> Result<Vec<ExternalConfig>, String> {
    toml::from_str::<ConfigFile>(text)
        .map(|c| c.diff.external)
        .map_err(|e| e.to_string())
}

/// An external plugin.
pub struct ExternalPlugin {
    config: ExternalConfig,
    globs: GlobSet,
}

impl ExternalPlugin {
    /// Builds a plugin from its config.
    pub fn new(config: ExternalConfig) -> Result<ExternalPlugin, String> {
        let mut b = GlobSetBuilder::new();
        for g in &config.globs {
            b.add(
                Glob::new(g).map_err(|e| format!("plugin {}: bad glob {g:?}: {e}", config.name))?,
            );
        }
        let globs = b.build().map_err(|e| e.to_string())?;
        if config.command.is_empty() {
            return Err(format!("plugin {}: empty command", config.name));
        }
        Ok(ExternalPlugin { config, globs })
    }
}

#[derive(Deserialize)]
struct PluginOutput {
    schema: String,
    summary: String,
    #[serde(default)]
    changes: Vec<Located>,
}

impl DiffPlugin for ExternalPlugin {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn score(&self, probe: &Probe<'_>) -> Option<u8> {
        let file = probe.path.rsplit('/').next().unwrap_or(probe.path);
        (self.globs.is_match(probe.path) || self.globs.is_match(file)).then_some(100)
    }

    fn diff(
        &self,
        old: Option<&Side<'_>>,
        new: Option<&Side<'_>>,
        _opts: &Options,
    ) -> Result<FileDiff, DiffError> {
        let fail = |why: String| {
            DiffError::Fallback(format!("external plugin {}: {why}", self.config.name))
        };
        let dir = tempfile::tempdir().map_err(|e| fail(e.to_string()))?;
        let ext = new.or(old).map(|s| s.extension()).unwrap_or_default();
        let mut paths = Vec::new();
        for (label, side) in [("old", old), ("new", new)] {
            let p = dir.path().join(if ext.is_empty() {
                label.to_string()
            } else {
                format!("{label}.{ext}")
            });
            let bytes = match side {
                Some(s) => s.load_within(MAX_EXTERNAL, "external")?,
                None => Vec::new(),
            };
            std::fs::write(&p, bytes).map_err(|e| fail(e.to_string()))?;
            paths.push(p);
        }
        let args: Vec<String> = self.config.command[1..]
            .iter()
            .map(|a| {
                a.replace("{old}", &paths[0].to_string_lossy())
                    .replace("{new}", &paths[1].to_string_lossy())
            })
            .collect();
        let mut child = Command::new(&self.config.command[0])
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| fail(format!("cannot run {:?}: {e}", self.config.command[0])))?;
        let mut stdout = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = stdout.by_ref().take(64 << 20).read_to_end(&mut s);
            s
        });
        let deadline = Instant::now() + Duration::from_millis(self.config.timeout_ms);
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break st,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(fail(format!(
                        "timed out after {} ms",
                        self.config.timeout_ms
                    )));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Err(fail(e.to_string())),
            }
        };
        let out = reader.join().unwrap_or_default();
        if !status.success() {
            return Err(fail(format!("exited with {status}")));
        }
        let parsed: PluginOutput =
            serde_json::from_slice(&out).map_err(|e| fail(format!("printed invalid JSON: {e}")))?;
        if parsed.schema != PLUGIN_SCHEMA {
            return Err(fail(format!(
                "printed schema {:?}, expected {PLUGIN_SCHEMA}",
                parsed.schema
            )));
        }
        Ok(FileDiff {
            plugin: self.config.name.clone(),
            summary: parsed.summary,
            changes: parsed.changes,
            notes: Vec::new(),
            visual: None,
        })
    }
}
