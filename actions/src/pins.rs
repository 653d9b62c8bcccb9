//! What an approval of a `run` action pins beside its payload, so that what runs is what
//! the person approved: the program, resolved to an absolute path and hashed; every file
//! inside the repository that the command line names, hashed; and the environment the
//! command gets. A payload's text says `./publish.sh {path}`; these say which bytes
//! `./publish.sh` and the file were when approved. Anything different when the action is
//! run blocks it, with a receipt saying what changed (docs/SECURITY.md).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The variables a command gets from the environment of whoever approved it, pinned with
/// their values. Nothing else of the environment reaches it (no passphrase, no cloud
/// credentials) but the variables its rule names (`env`), read when it runs and never
/// stored.
pub const INHERITED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
];

/// The in-repository files a command line names that are pinned, at most.
const FILES_MAX: usize = 64;

/// A file as pinned: where it is and the BLAKE3 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedFile {
    /// An absolute path (the program), or a path relative to the repository's top. A
    /// program that was nowhere when approved keeps the name it was given.
    pub path: String,
    /// BLAKE3 of the content, in hex; empty for a program that was nowhere when
    /// approved (it must still be nowhere when run: the command then fails to start).
    pub blake3: String,
}

/// What an approval of a `run` payload pins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pins {
    /// The program `argv[0]` resolved to.
    pub program: PinnedFile,
    /// Files inside the repository that the command line names.
    pub files: Vec<PinnedFile>,
    /// The environment the command gets (of [`INHERITED`], those that were set).
    pub env: Vec<(String, String)>,
}

impl Pins {
    /// The canonical bytes kept in the approval record.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("pins serialise")
    }

    /// Reads what [`Pins::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Option<Pins> {
        serde_json::from_slice(bytes).ok()
    }
}

/// The BLAKE3 of the file at `path`, in hex.
fn hash_file(path: &Path) -> Result<String, String> {
    let mut h = blake3::Hasher::new();
    std::fs::File::open(path)
        .and_then(|mut f| std::io::copy(&mut f, &mut h))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(h.finalize().to_hex().to_string())
}

/// The words of a `run` payload's command line: `argv`, or for `sh -c LINE` the words of
/// LINE as the shell splits them (what it names as files, whatever quoting it uses).
fn words(argv: &[String]) -> Vec<String> {
    match argv {
        [sh, c, line] if sh == "sh" && c == "-c" => {
            let mut w = vec![sh.clone()];
            w.extend(shlex::split(line).unwrap_or_default());
            w
        }
        _ => argv.to_vec(),
    }
}

/// Where `program` is: a path (with a `/`) relative to `cwd`, or the first executable
/// file of that name in `path` (a `PATH` value).
fn resolve_program(program: &str, cwd: &Path, path: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let found = if program.contains('/') {
        Some(cwd.join(program))
    } else {
        std::env::split_paths(path)
            .filter(|d| d.is_absolute())
            .map(|d| d.join(program))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    };
    let found = found.ok_or_else(|| format!("{program:?} is on no folder of PATH ({path})"))?;
    found
        .canonicalize()
        .map_err(|e| format!("{}: {e}", found.display()))
}

/// The environment `env` (a variable's value, if set) keeps of [`INHERITED`].
pub fn inherited(env: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    INHERITED
        .iter()
        .filter_map(|k| env(k).map(|v| (k.to_string(), v)))
        .collect()
}

/// Pins what `payload` (a `run` payload) runs in the repository at `workdir`, with the
/// environment `env` keeps ([`inherited`]). `None` for a payload that runs no command.
pub fn pin(
    payload: &Json,
    workdir: &Path,
    env: Vec<(String, String)>,
) -> Result<Option<Pins>, String> {
    if payload["kind"] != "run" {
        return Ok(None);
    }
    let argv = crate::exec::argv(payload);
    let Some(first) = argv.first() else {
        return Err("the payload has no command".into());
    };
    let cwd = workdir.join(payload["cwd"].as_str().unwrap_or("."));
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or("/usr/local/bin:/usr/bin:/bin");
    let program = match resolve_program(first, &cwd, path) {
        Ok(p) => PinnedFile {
            blake3: hash_file(&p)?,
            path: p.to_string_lossy().into_owned(),
        },
        Err(_) => PinnedFile {
            path: if first.contains('/') {
                cwd.join(first).to_string_lossy().into_owned()
            } else {
                first.clone()
            },
            blake3: String::new(),
        },
    };
    let top = workdir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", workdir.display()))?;
    let mut files = Vec::new();
    for word in words(&argv).iter().skip(1) {
        let Ok(p) = cwd.join(word).canonicalize() else {
            continue;
        };
        let Ok(rel) = p.strip_prefix(&top) else {
            continue;
        };
        let rel = rel.to_string_lossy().into_owned();
        if !p.is_file() || files.iter().any(|f: &PinnedFile| f.path == rel) {
            continue;
        }
        if files.len() == FILES_MAX {
            return Err(format!(
                "the command names more than {FILES_MAX} files of the repository; approve a command that names fewer"
            ));
        }
        files.push(PinnedFile {
            blake3: hash_file(&p)?,
            path: rel,
        });
    }
    Ok(Some(Pins {
        program,
        files,
        env,
    }))
}

/// What changed since `pins` were taken, for the repository at `workdir` (`None`:
/// nothing). Only the program and files are read again: the environment is the pinned
/// one whatever the running process has.
pub fn changed(pins: &Pins, workdir: &Path) -> Option<String> {
    let differs = |what: &str, f: &PinnedFile, at: &Path| match hash_file(at) {
        Ok(h) if h == f.blake3 => None,
        Ok(h) => Some(format!(
            "{what} {} changed since it was approved (blake3 {} then, {} now)",
            f.path,
            &f.blake3[..12],
            &h[..12]
        )),
        Err(e) => Some(format!("{what} {} is no longer readable ({e})", f.path)),
    };
    let program = if pins.program.blake3.is_empty() {
        // Nowhere when approved: it must not have appeared since.
        let path = pins
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or_default();
        resolve_program(&pins.program.path, Path::new("/"), path)
            .ok()
            .map(|p| {
                format!(
                    "the program {} was nowhere when approved and is {} now",
                    pins.program.path,
                    p.display()
                )
            })
    } else {
        differs("the program", &pins.program, Path::new(&pins.program.path))
    };
    program.or_else(|| {
        pins.files
            .iter()
            .find_map(|f| differs("the file", f, &workdir.join(&f.path)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_command_s_program_and_files_are_pinned_and_a_change_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::fs::create_dir(w.join("scripts")).unwrap();
        std::fs::write(w.join("scripts/publish.sh"), "#!/bin/sh\necho hi\n").unwrap();
        std::fs::write(w.join("invoice.pdf"), "%PDF").unwrap();
        let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        let payload = json!({"kind": "run", "argv": ["./publish.sh", "../invoice.pdf", "/etc/hostname"], "cwd": "scripts"});
        let pins = pin(&payload, w, env.clone()).unwrap().unwrap();
        assert!(
            pins.program.path.ends_with("/scripts/publish.sh"),
            "{pins:?}"
        );
        assert_eq!(
            pins.files
                .iter()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>(),
            vec!["invoice.pdf"],
            "files outside the repository are not pinned"
        );
        assert_eq!(Pins::decode(&pins.encode()), Some(pins.clone()));
        assert_eq!(changed(&pins, w), None);
        std::fs::write(w.join("scripts/publish.sh"), "#!/bin/sh\ncurl evil\n").unwrap();
        let why = changed(&pins, w).unwrap();
        assert!(
            why.contains("the program") && why.contains("publish.sh"),
            "{why}"
        );
        std::fs::write(w.join("scripts/publish.sh"), "#!/bin/sh\necho hi\n").unwrap();
        std::fs::write(w.join("invoice.pdf"), "%PDF other").unwrap();
        let why = changed(&pins, w).unwrap();
        assert!(why.contains("the file invoice.pdf"), "{why}");
        // A shell line's words are files too, however they are quoted.
        std::fs::write(w.join("invoice.pdf"), "%PDF").unwrap();
        let payload =
            json!({"kind": "run", "argv": ["sh", "-c", "cat 'invoice.pdf' >> log"], "cwd": "."});
        let pins = pin(&payload, w, env).unwrap().unwrap();
        assert!(pins.program.path.ends_with("sh"), "{pins:?}");
        assert_eq!(pins.files.len(), 1);
        assert_eq!(pin(&json!({"kind": "http"}), w, vec![]).unwrap(), None);
    }
}
