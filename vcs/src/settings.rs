//! A person's settings: the repository's `.lifeos/config` over the user's
//! `$XDG_CONFIG_HOME/lifeos/config.toml` (else `~/.config/lifeos/config.toml`). Both are
//! TOML; a setting `table.key` is the key `key` of the table `[table]`. Only the settings
//! in [`SETTINGS`] are read here; the repository file also holds the store's own
//! configuration and the `[ingest]`, `[speech]` and `[diff]` tables, which their readers
//! parse.

use std::path::{Path, PathBuf};

/// What a setting's value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    /// Any text.
    Text,
    /// `auto`, `always` or `never`.
    Color,
    /// A whole number of at least 1.
    Count,
    /// `true` or `false`.
    Flag,
}

/// A setting a person can give.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// `table.key`.
    pub key: &'static str,
    /// What its value must be.
    pub kind: SettingKind,
    /// What it does.
    pub about: &'static str,
}

/// Every setting, in the order `lifeos config list` shows them.
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "user.name",
        kind: SettingKind::Text,
        about: "your name on commits (LIFEOS_AUTHOR_NAME wins; default: the login name)",
    },
    Setting {
        key: "user.email",
        kind: SettingKind::Text,
        about: "your email on commits (LIFEOS_AUTHOR_EMAIL wins; default: name@host)",
    },
    Setting {
        key: "ui.color",
        kind: SettingKind::Color,
        about: "when to colour output: auto, always or never (--color wins)",
    },
    Setting {
        key: "ui.pager",
        kind: SettingKind::Text,
        about: "the pager for long output (LIFEOS_PAGER wins; then PAGER; default less -FRX)",
    },
    Setting {
        key: "ui.editor",
        kind: SettingKind::Text,
        about:
            "the editor for commit messages (LIFEOS_EDITOR wins; then VISUAL, EDITOR; default vi)",
    },
    Setting {
        key: "safety.outside-symlinks",
        kind: SettingKind::Flag,
        about: "write symlinks that lead outside the folder (absolute, or above its top) when checking out or restoring (default false: refused, as for any tree from elsewhere)",
    },
    Setting {
        key: "speech.threads",
        kind: SettingKind::Count,
        about: "whisper.cpp threads for transcription (default 1)",
    },
];

/// The setting named `key`, or an error naming the nearest one.
pub fn setting(key: &str) -> Result<&'static Setting, String> {
    if let Some(s) = SETTINGS.iter().find(|s| s.key == key) {
        return Ok(s);
    }
    let nearest = SETTINGS
        .iter()
        .min_by_key(|s| strsim::levenshtein(s.key, key))
        .expect("there are settings");
    Err(format!(
        "unknown setting {key:?}; did you mean {}? (`lifeos config list` shows them all)",
        nearest.key
    ))
}

/// `value` checked against what `s` takes: the value as stored.
pub fn check(s: &Setting, value: &str) -> Result<toml::Value, String> {
    match s.kind {
        SettingKind::Text => Ok(toml::Value::String(value.to_string())),
        SettingKind::Color => match value {
            "auto" | "always" | "never" => Ok(toml::Value::String(value.to_string())),
            _ => Err(format!("{} is auto, always or never, not {value:?}", s.key)),
        },
        SettingKind::Flag => match value {
            "true" => Ok(toml::Value::Boolean(true)),
            "false" => Ok(toml::Value::Boolean(false)),
            _ => Err(format!("{} is true or false, not {value:?}", s.key)),
        },
        SettingKind::Count => match value.parse::<i64>() {
            Ok(n) if n >= 1 => Ok(toml::Value::Integer(n)),
            _ => Err(format!(
                "{} is a whole number of at least 1, not {value:?}",
                s.key
            )),
        },
    }
}

/// The user's settings file: `$XDG_CONFIG_HOME/lifeos/config.toml`, else
/// `$HOME/.config/lifeos/config.toml`; `None` without either variable.
pub fn user_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("lifeos").join("config.toml"))
}

/// The store folder of the repository whose working folder is `start` or above it.
pub fn repo_dot_dir(start: &Path) -> Option<PathBuf> {
    crate::layout::locate(start).map(|(_, dot)| dot)
}

/// The repository's settings file in `dot_dir`.
pub fn repo_file(dot_dir: &Path) -> PathBuf {
    dot_dir.join(lifeos_store::store::CONFIG_FILE)
}

/// The value of `key` in the TOML file at `path` (a missing file has none), as text.
pub fn read(path: &Path, key: &str) -> Result<Option<String>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let doc: toml::Table = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let (table, name) = key.split_once('.').expect("settings are table.key");
    Ok(doc.get(table).and_then(|t| t.get(name)).map(|v| match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }))
}

/// The value of `key` that applies in the repository of `dot_dir` (if any): the
/// repository's, else the user's. A file that cannot be read counts as saying nothing.
pub fn effective(dot_dir: Option<&Path>, key: &str) -> Option<String> {
    dot_dir
        .and_then(|d| read(&repo_file(d), key).ok().flatten())
        .or_else(|| user_file().and_then(|f| read(&f, key).ok().flatten()))
}
