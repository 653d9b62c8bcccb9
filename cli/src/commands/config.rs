//! `lifeos config get | set | unset | list [--user | --repo]`: the settings of
//! `lifeos_vcs::settings`, edited in place (comments, order and the store's own keys in
//! `.lifeos/config` are kept).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use lifeos_vcs::settings::{self, SETTINGS};

use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::verb::{Policy, Verb};

/// Which file a `config` command reads or writes.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigLevel {
    /// The user's file ($XDG_CONFIG_HOME/lifeos/config.toml).
    #[arg(long, conflicts_with = "repo")]
    pub user: bool,
    /// The repository's file (.lifeos/config; the default for set and unset).
    #[arg(long)]
    pub repo: bool,
}

/// `lifeos config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// The value that applies (the repository's, else the user's), or the one a file has.
    Get {
        /// The setting, e.g. user.name.
        key: String,
        #[command(flatten)]
        #[allow(missing_docs)]
        scope: ConfigLevel,
    },
    /// Set a value (in the repository's file unless --user).
    Set {
        /// The setting, e.g. ui.pager.
        key: String,
        /// Its value.
        value: String,
        #[command(flatten)]
        #[allow(missing_docs)]
        scope: ConfigLevel,
    },
    /// Remove a value (from the repository's file unless --user).
    Unset {
        /// The setting.
        key: String,
        #[command(flatten)]
        #[allow(missing_docs)]
        scope: ConfigLevel,
    },
    /// Every setting with the value that applies and where it comes from (or those of
    /// one file).
    List {
        #[command(flatten)]
        #[allow(missing_docs)]
        scope: ConfigLevel,
    },
}

impl Verb for ConfigCmd {
    fn policy(&self) -> Policy {
        Policy {
            syncs_git: false,
            ..Policy::REPORT
        }
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        config(self, ctx.here())
    }
}

/// The file `scope` names (the repository's when neither is given and `write`).
fn file_of(scope: &ConfigLevel, here: &Path, write: bool) -> CliResult<Option<PathBuf>> {
    if scope.user {
        return settings::user_file().map(Some).ok_or_else(|| {
            CliError::new("neither XDG_CONFIG_HOME nor HOME is set: there is no user file")
        });
    }
    if scope.repo || write {
        let dot = settings::repo_dot_dir(here).ok_or_else(|| {
            CliError::new(format!("no lifeos repository at {}", here.display()))
                .hint("use --user for your own settings, or run it inside a repository")
        })?;
        return Ok(Some(settings::repo_file(&dot)));
    }
    Ok(None)
}

/// `lifeos config ...`.
fn config(cmd: ConfigCmd, here: &Path) -> CliResult<u8> {
    let dot = settings::repo_dot_dir(here);
    match cmd {
        ConfigCmd::Get { key, scope } => {
            settings::setting(&key).map_err(CliError::new)?;
            let value = match file_of(&scope, here, false)? {
                Some(f) => settings::read(&f, &key).map_err(CliError::new)?,
                None => settings::effective(dot.as_deref(), &key),
            };
            match value {
                Some(v) => {
                    println!("{v}");
                    Ok(0)
                }
                None => Ok(1),
            }
        }
        ConfigCmd::Set { key, value, scope } => {
            let s = settings::setting(&key).map_err(CliError::new)?;
            let value = settings::check(s, &value).map_err(CliError::new)?;
            let file = file_of(&scope, here, true)?.expect("a file to write");
            edit(&file, |doc| {
                let (table, name) = key.split_once('.').expect("settings are table.key");
                if !doc.contains_table(table) {
                    doc.insert(table, toml_edit::table());
                }
                let item = match value {
                    toml::Value::Integer(n) => toml_edit::value(n),
                    toml::Value::Boolean(b) => toml_edit::value(b),
                    other => toml_edit::value(other.as_str().unwrap_or_default()),
                };
                doc[table][name] = item;
            })?;
            Ok(0)
        }
        ConfigCmd::Unset { key, scope } => {
            settings::setting(&key).map_err(CliError::new)?;
            let file = file_of(&scope, here, true)?.expect("a file to write");
            edit(&file, |doc| {
                let (table, name) = key.split_once('.').expect("settings are table.key");
                if let Some(t) = doc.get_mut(table).and_then(|t| t.as_table_like_mut()) {
                    t.remove(name);
                }
            })?;
            Ok(0)
        }
        ConfigCmd::List { scope } => {
            let only = file_of(&scope, here, false)?;
            for s in SETTINGS {
                let (value, from) = match &only {
                    Some(f) => (settings::read(f, s.key).map_err(CliError::new)?, ""),
                    None => {
                        let repo = dot.as_deref().and_then(|d| {
                            settings::read(&settings::repo_file(d), s.key)
                                .ok()
                                .flatten()
                        });
                        match repo {
                            Some(v) => (Some(v), "  (repository)"),
                            None => (
                                settings::user_file()
                                    .and_then(|f| settings::read(&f, s.key).ok().flatten()),
                                "  (user)",
                            ),
                        }
                    }
                };
                if let Some(v) = value {
                    println!("{} = {v:?}{from}", s.key);
                }
            }
            Ok(0)
        }
    }
}

/// Edits the TOML file at `path` in place (created, with its folder, if missing),
/// keeping every other key and comment; written whole, then renamed over the old one.
fn edit(path: &Path, change: impl FnOnce(&mut toml_edit::DocumentMut)) -> CliResult<()> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(CliError::new(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    change(&mut doc);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::new(format!("cannot create {}: {e}", dir.display())))?;
    }
    lifeos_store::fsutil::write_atomic(path, doc.to_string().as_bytes())?;
    Ok(())
}
