//! Where a repository keeps what: the store's folder (`.lifeos`, or `.git/lifeos` in a
//! folder git shares), the names inside it every layer uses, and how a repository is
//! found from a path (FORMAT 2).

use std::path::{Path, PathBuf};

/// Name of the repository directory inside the working folder.
pub const DOT_DIR: &str = ".lifeos";
/// Where a folder shared with git keeps its store: `.git/lifeos`, inside git's own
/// folder, which no git command writes into from a tree or removes (`checkout`,
/// `merge`, `pull`, `stash -u` and `clean -fdx` all leave `.git` alone), as git keeps its
/// own state there (docs/DECISIONS.md TRUST-1).
pub const COLOCATED_DIR: &str = "lifeos";
/// Operation heads: one empty file per head, named by the operation id.
pub const OP_HEADS_DIR: &str = "op_heads";
/// The branch a new repository starts on.
pub const DEFAULT_BRANCH: &str = "main";

/// The store folder of the repository whose working folder is `dir`, if `dir` is one:
/// `dir/.git/lifeos` (shared with git), else `dir/.lifeos`.
pub fn store_dir_of(dir: &Path) -> Option<PathBuf> {
    let config = lifeos_store::store::CONFIG_FILE;
    let colocated = dir.join(".git").join(COLOCATED_DIR);
    if colocated.join(config).is_file() {
        return Some(colocated);
    }
    let plain = dir.join(DOT_DIR);
    plain.join(config).is_file().then_some(plain)
}

/// The working folder and store folder of the repository at `start` or the nearest
/// folder above it (the store is not opened).
pub fn locate(start: &Path) -> Option<(PathBuf, PathBuf)> {
    let start = start.canonicalize().ok()?;
    start
        .ancestors()
        .find_map(|d| store_dir_of(d).map(|dot| (d.to_path_buf(), dot)))
}

/// The git hooks lifeos installs in a colocated folder (`.git/hooks/NAME`), which are also
/// the names a rule's `hook` trigger may give.
pub const GIT_HOOKS: &[&str] = &[
    "post-commit",
    "post-merge",
    "post-checkout",
    "post-rewrite",
    "reference-transaction",
    "pre-push",
];
