//! The model registry: Whisper models in ggml form in a per-user data directory, each with
//! a manifest holding its sha256, verified before use.
//!
//! Layout of the directory (`$LIFEOS_MODELS`, else `$XDG_DATA_HOME/lifeos/models`, else
//! `~/.local/share/lifeos/models`):
//! - `<name>.bin`: the ggml model file;
//! - `<name>.json`: its manifest (schema `lifeos.model.v1`);
//! - `default`: the name of the model ingest uses.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::convert::{check_ggml, ct2_to_ggml, Hparams, GGML_MAGIC};
use crate::{Result, SpeechError};

/// The manifest's schema name.
pub const MANIFEST_SCHEMA: &str = "lifeos.model.v1";

/// An installed model.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Model {
    /// Schema of this manifest.
    pub schema: String,
    /// The model's name ("whisper-tiny.en").
    pub name: String,
    /// The ggml file's size in bytes.
    pub size: u64,
    /// The ggml file's sha256, hex.
    pub sha256: String,
    /// What it was imported from, and how ("ctranslate2 wheel", "ggml").
    pub source: String,
    /// The model's dimensions.
    pub hparams: Hparams,
    /// Whether the model is multilingual (language detected) or English-only.
    pub multilingual: bool,
}

/// The model directory.
pub fn models_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("LIFEOS_MODELS") {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("lifeos/models"));
    }
    let home = std::env::var_os("HOME").ok_or_else(|| {
        SpeechError::Model("no home directory: set LIFEOS_MODELS to a directory".into())
    })?;
    Ok(PathBuf::from(home).join(".local/share/lifeos/models"))
}

/// A model directory's contents.
pub struct Registry {
    dir: PathBuf,
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> SpeechError + '_ {
    move |e| SpeechError::Io(format!("{}: {e}", path.display()))
}

impl Registry {
    /// The registry at `dir` (created when a model is imported).
    pub fn at(dir: PathBuf) -> Registry {
        Registry { dir }
    }

    /// The registry in [`models_dir`].
    pub fn open() -> Result<Registry> {
        Ok(Registry::at(models_dir()?))
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Installed models, by name.
    pub fn list(&self) -> Result<Vec<Model>> {
        let mut out = Vec::new();
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io_at(&self.dir)(e)),
        };
        for e in rd {
            let p = e.map_err(io_at(&self.dir))?.path();
            if p.extension().is_some_and(|x| x == "json") {
                let text = std::fs::read_to_string(&p).map_err(io_at(&p))?;
                let m: Model = serde_json::from_str(&text).map_err(|e| {
                    SpeechError::Model(format!(
                        "{}: unreadable manifest ({e}); import the model again",
                        p.display()
                    ))
                })?;
                out.push(m);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The default model's name: the `default` file, else the only model installed.
    pub fn default_name(&self) -> Result<Option<String>> {
        let models = self.list()?;
        if let Ok(n) = std::fs::read_to_string(self.dir.join("default")) {
            let n = n.trim().to_string();
            if models.iter().any(|m| m.name == n) {
                return Ok(Some(n));
            }
        }
        Ok(models.first().map(|m| m.name.clone()))
    }

    /// Makes `name` the default.
    pub fn set_default(&self, name: &str) -> Result<()> {
        if !self.list()?.iter().any(|m| m.name == name) {
            return Err(SpeechError::Model(format!(
                "no model named {name:?} is installed (see `lifeos model list`)"
            )));
        }
        write_atomic(&self.dir.join("default"), name.as_bytes())
    }

    /// The ggml file of a model.
    pub fn path_of(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.bin"))
    }

    /// The model to use (`name`, else the default), its file verified against the manifest.
    pub fn resolve(&self, name: Option<&str>) -> Result<Option<(Model, PathBuf)>> {
        let name = match name {
            Some(n) => n.to_string(),
            None => match self.default_name()? {
                Some(n) => n,
                None => return Ok(None),
            },
        };
        let Some(m) = self.list()?.into_iter().find(|m| m.name == name) else {
            return Err(SpeechError::Model(format!(
                "no model named {name:?} is installed (see `lifeos model list`)"
            )));
        };
        let path = self.path_of(&name);
        let (sha, size) = sha256_file(&path)?;
        if sha != m.sha256 || size != m.size {
            return Err(SpeechError::Model(format!(
                "model file {} does not match its manifest (sha256 {sha}, expected {}): it \
                 is damaged; import the model again",
                path.display(),
                m.sha256
            )));
        }
        Ok(Some((m, path)))
    }

    /// Imports a model from `inputs`: a ggml `.bin`, a CTranslate2 model directory, a
    /// wheel (zip) holding one, or several files whose concatenation is one of those (a
    /// model split in parts). Returns the installed model; the first one installed
    /// becomes the default.
    pub fn import(&self, inputs: &[PathBuf], name: Option<&str>) -> Result<Model> {
        let first = inputs
            .first()
            .ok_or_else(|| SpeechError::Model("nothing to import".into()))?;
        std::fs::create_dir_all(&self.dir).map_err(io_at(&self.dir))?;
        let (ggml, source): (Vec<u8>, String) = if first.is_dir() {
            let (model, vocab) = read_ct2_dir(first)?;
            (convert(&model, &vocab)?, "ctranslate2 directory".into())
        } else {
            let bytes = read_parts(inputs)?;
            if bytes.starts_with(&GGML_MAGIC.to_le_bytes()) {
                (bytes, "ggml".into())
            } else if bytes.starts_with(b"PK\x03\x04") {
                let (model, vocab) = read_ct2_zip(&bytes)?;
                (convert(&model, &vocab)?, "ctranslate2 wheel".into())
            } else {
                return Err(SpeechError::Model(format!(
                    "{}: not a ggml model, a wheel or a CTranslate2 model directory",
                    first.display()
                )));
            }
        };
        let hp = check_ggml(&ggml)?;
        let name = name
            .map(str::to_string)
            .unwrap_or_else(|| format!("whisper-{}", hp.size_name()));
        if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
            return Err(SpeechError::Model(format!("{name:?} is not a model name")));
        }
        let model = Model {
            schema: MANIFEST_SCHEMA.into(),
            name: name.clone(),
            size: ggml.len() as u64,
            sha256: hex::encode(Sha256::digest(&ggml)),
            source: format!(
                "{source}: {}",
                inputs
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" + ")
            ),
            hparams: hp,
            multilingual: hp.multilingual(),
        };
        let had_default = self.default_name()?.is_some();
        write_atomic(&self.path_of(&name), &ggml)?;
        let manifest = serde_json::to_vec_pretty(&model).expect("serializable");
        write_atomic(&self.dir.join(format!("{name}.json")), &manifest)?;
        if !had_default {
            self.set_default(&name)?;
        }
        Ok(model)
    }
}

fn convert(model: &[u8], vocab: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(model.len() + (4 << 20));
    ct2_to_ggml(model, vocab, &mut out)?;
    Ok(out)
}

/// The files' bytes, concatenated (one file, or the parts of a split one).
fn read_parts(inputs: &[PathBuf]) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    for p in inputs {
        std::fs::File::open(p)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(io_at(p))?;
    }
    Ok(bytes)
}

/// `model.bin` (or its parts `model.bin.*`, in name order) and the vocabulary of a
/// CTranslate2 model directory.
fn read_ct2_dir(dir: &Path) -> Result<(Vec<u8>, String)> {
    let mut parts: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io_at(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "model.bin" || n.starts_with("model.bin."))
        })
        .collect();
    parts.sort();
    if parts.is_empty() {
        return Err(SpeechError::Model(format!(
            "{}: no model.bin (is this a CTranslate2 model directory?)",
            dir.display()
        )));
    }
    let vocab = ["vocabulary.json", "vocabulary.txt"]
        .iter()
        .find_map(|n| std::fs::read_to_string(dir.join(n)).ok())
        .ok_or_else(|| {
            SpeechError::Model(format!("{}: no vocabulary.json or .txt", dir.display()))
        })?;
    Ok((read_parts(&parts)?, vocab))
}

/// The same from a wheel (a zip archive): the first `model.bin` and the vocabulary beside it.
fn read_ct2_zip(bytes: &[u8]) -> Result<(Vec<u8>, String)> {
    let bad = |e: zip::result::ZipError| SpeechError::Model(format!("unreadable wheel: {e}"));
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(bad)?;
    let names: Vec<String> = z.file_names().map(str::to_string).collect();
    let mut parts: Vec<&String> = names
        .iter()
        .filter(|n| {
            let base = n.rsplit('/').next().unwrap_or(n);
            base == "model.bin" || base.starts_with("model.bin.")
        })
        .collect();
    parts.sort();
    let Some(first) = parts.first() else {
        return Err(SpeechError::Model(
            "the wheel holds no CTranslate2 model.bin".into(),
        ));
    };
    let dir = first.rsplit_once('/').map_or("", |(d, _)| d).to_string();
    let read = |z: &mut zip::ZipArchive<_>, n: &str| -> Result<Vec<u8>> {
        let mut v = Vec::new();
        z.by_name(n)
            .map_err(bad)?
            .read_to_end(&mut v)
            .map_err(|e| SpeechError::Model(format!("unreadable wheel entry {n}: {e}")))?;
        Ok(v)
    };
    let mut model = Vec::new();
    for p in &parts {
        model.extend(read(&mut z, p)?);
    }
    let join = |f: &str| {
        if dir.is_empty() {
            f.to_string()
        } else {
            format!("{dir}/{f}")
        }
    };
    let vocab = ["vocabulary.json", "vocabulary.txt"]
        .iter()
        .map(|f| join(f))
        .find(|n| names.contains(n))
        .ok_or_else(|| {
            SpeechError::Model("the wheel holds no vocabulary beside model.bin".into())
        })?;
    let vocab = String::from_utf8(read(&mut z, &vocab)?)
        .map_err(|_| SpeechError::Model("the vocabulary is not UTF-8".into()))?;
    Ok((model, vocab))
}

/// A file's sha256 (hex) and size.
pub fn sha256_file(path: &Path) -> Result<(String, u64)> {
    let mut f = std::fs::File::open(path).map_err(io_at(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0;
    loop {
        let n = f.read(&mut buf).map_err(io_at(path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hex::encode(h.finalize()), size))
}

/// Writes a file whole or not at all: a temporary file, fsynced, renamed into place.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let r = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r.map_err(io_at(path))
}
