//! Helpers for tests of this crate and of the crates above it that change a working folder
//! at random (not part of the API).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Writes `rel` under `root` (making its folders) with modification time `when`: a
/// file written long enough ago is not racily clean to the snapshot that reads it.
pub fn write_at(root: &Path, rel: &str, bytes: &[u8], when: std::time::SystemTime) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("a path under root")).expect("folders made");
    std::fs::write(&p, bytes).expect("file written");
    std::fs::File::options()
        .write(true)
        .open(&p)
        .and_then(|f| f.set_modified(when))
        .expect("modification time set");
}

/// Makes room for a file at `rel` under `root`: a folder there, or a file where a folder on
/// its way must be, is removed, and the folders on its way are made.
pub fn clear_way(root: &Path, rel: &[u8]) -> std::io::Result<()> {
    let rel = Path::new(OsStr::from_bytes(rel));
    let p = root.join(rel);
    if p.symlink_metadata().is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir_all(&p)?;
    }
    let mut at = root.to_path_buf();
    for c in rel.parent().into_iter().flat_map(|p| p.components()) {
        at.push(c);
        if at.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(&at)?;
        }
    }
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::remove_file(&p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Commits `repo`'s whole folder with `message`, as `lifeos commit -m` does.
pub fn commit_folder(repo: &crate::Repo, message: &[u8]) -> crate::commit::CommitOutcome {
    let wc = repo.lock_working_copy().expect("working-copy lock");
    let opts = crate::commit::CommitOptions {
        message,
        ..Default::default()
    };
    repo.commit_working_copy(&wc, &opts, &crate::working_copy::NoProgress)
        .expect("commit")
}

/// Commits a tree holding exactly `files` (repository path, kind, content) on branch
/// `branch` (a child of `@`), as another device or a damaged history could hold it:
/// nothing checks the names or symlink targets, and the folder does not change. Returns
/// the commit.
pub fn commit_entries(
    repo: &crate::Repo,
    branch: &str,
    files: &[(&[u8], crate::EntryKind, &[u8])],
    message: &str,
) -> lifeos_store::Id {
    use crate::object::{Commit, Event, Tree, TreeEntry};
    use lifeos_store::Kind;
    use std::collections::BTreeMap;

    #[derive(Default)]
    struct Dir(BTreeMap<Vec<u8>, Either>);
    enum Either {
        Leaf(TreeEntry),
        Dir(Dir),
    }
    fn write(tx: &mut lifeos_store::Transaction<'_>, dir: Dir) -> (lifeos_store::Id, u64) {
        let mut entries = Vec::new();
        for (name, e) in dir.0 {
            entries.push(match e {
                Either::Leaf(mut t) => {
                    t.name = name;
                    t
                }
                Either::Dir(d) => {
                    let (id, size) = write(tx, d);
                    TreeEntry {
                        name,
                        kind: crate::EntryKind::Dir,
                        id,
                        size,
                    }
                }
            });
        }
        let tree = Tree {
            entries,
            git_raw: None,
        };
        let size = tree.total_size();
        (
            tx.write_object(Kind::Tree, &tree.encode()).expect("tree"),
            size,
        )
    }
    let head = repo.head().expect("head");
    let mut tx = repo.store().transaction().expect("transaction");
    let mut root = Dir::default();
    for (path, kind, bytes) in files {
        let parts: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
        let mut at = &mut root;
        for p in &parts[..parts.len() - 1] {
            let next =
                at.0.entry(p.to_vec())
                    .or_insert_with(|| Either::Dir(Dir::default()));
            at = match next {
                Either::Dir(d) => d,
                Either::Leaf(_) => panic!("a file where a folder is needed"),
            };
        }
        // A gitlink holds a SHA-1 (its content, zero-padded when shorter), not a file.
        let id = if *kind == crate::EntryKind::Gitlink {
            let mut sha = [0u8; 20];
            sha[..bytes.len().min(20)].copy_from_slice(&bytes[..bytes.len().min(20)]);
            crate::object::gitlink_id(&sha)
        } else {
            tx.store_bytes(bytes).expect("content")
        };
        at.0.insert(
            parts[parts.len() - 1].to_vec(),
            Either::Leaf(TreeEntry {
                name: Vec::new(),
                kind: *kind,
                id,
                size: if *kind == crate::EntryKind::Gitlink {
                    0
                } else {
                    bytes.len() as u64
                },
            }),
        );
    }
    let (tree, _) = write(&mut tx, root);
    let sig = repo.signature(crate::repo::now_ms());
    let parent = head.view.at_commit();
    let commit = Commit {
        tree,
        parents: parent.into_iter().collect(),
        change_id: crate::commit::new_change_id(),
        author: sig.clone(),
        committer: sig,
        message: message.as_bytes().to_vec(),
        extra_headers: Vec::new(),
        conflicts: Vec::new(),
        git_header: None,
    };
    let id = tx
        .write_object(Kind::Commit, &commit.encode())
        .expect("commit");
    let mut view = head.view.clone();
    view.heads.push(id);
    view.set_branch(branch, Some(id));
    repo.publish(
        tx,
        &[head.id],
        view,
        "commit entries (test)",
        vec![Event::CommitCreated { commit: id }],
        crate::repo::now_ms(),
    )
    .expect("published");
    id
}

/// An entity of `kind` with attributes and links given in any order (sorted here), and
/// no conflicts.
pub fn entity(
    kind: &str,
    id: &str,
    attrs: &[(&str, crate::object::entity::Value)],
    links: &[(&str, &str)],
) -> crate::object::entity::Entity {
    let mut attrs: Vec<(String, crate::object::entity::Value)> = attrs
        .iter()
        .map(|(n, v)| (n.to_string(), v.clone()))
        .collect();
    attrs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut links: Vec<(String, String)> = links
        .iter()
        .map(|(r, t)| (r.to_string(), t.to_string()))
        .collect();
    links.sort();
    crate::object::entity::Entity {
        kind: kind.into(),
        id: id.into(),
        attrs,
        links,
        conflicts: vec![],
    }
}
