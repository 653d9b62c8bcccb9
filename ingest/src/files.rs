//! Which file versions a run or a listing covers, and the first bytes that tell a file's
//! kind when its name does not.

use std::io::Read;
use std::sync::Arc;

use lifeos_store::{Id, Store};
use lifeos_vcs::object::EntryKind;
use lifeos_vcs::Repo;

use crate::Result;

/// The files of the tree `tree` at `paths` (files, and everything under folders; every
/// file when `paths` is empty), each content with one path, in path order: (content,
/// path, size). A path that is not in the tree is an error naming it and `rev`.
pub fn files_at(
    repo: &Repo,
    tree: Option<&Id>,
    paths: &[Vec<u8>],
    rev: &str,
) -> Result<Vec<(Id, String, u64)>> {
    let mut found: Vec<(String, lifeos_vcs::object::TreeEntry)> = Vec::new();
    let everything = [Vec::new()];
    let wanted = if paths.is_empty() { &everything } else { paths };
    for p in wanted {
        let clean = lifeos_vcs::path::clean(p)?;
        let rows = repo.entries_at(tree, &clean, rev)?;
        found.extend(
            rows.into_iter()
                .map(|(p, e)| (lifeos_vcs::path::display(&p).into_owned(), e)),
        );
    }
    let mut seen = std::collections::HashSet::new();
    let mut files: Vec<(Id, String, u64)> = found
        .into_iter()
        .filter(|(_, e)| {
            !matches!(
                e.kind,
                EntryKind::Symlink | EntryKind::Gitlink | EntryKind::Dir
            )
        })
        .filter(|(_, e)| seen.insert(e.id))
        .map(|(p, e)| (e.id, p, e.size))
        .collect();
    files.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(files)
}

/// The first 4 KiB of the file `id` (empty when it cannot be read).
pub(crate) fn head_bytes(store: &Arc<Store>, id: &Id) -> Vec<u8> {
    let mut v = Vec::new();
    if let Ok(r) = lifeos_store::reader::FileReader::open(store.clone(), id) {
        let _ = r.take(4096).read_to_end(&mut v);
    }
    v
}
