//! Views: the refs of the repository after an operation (FORMAT 7.4).

use lifeos_store::codec::{DecodeError, Reader, Writer};
use lifeos_store::{Id, Kind};

use super::codec::{read_ids, read_opt_id, write_ids, write_opt_id};

/// View format version: 1, or 2 for a view with git refs.
pub const VIEW_VERSION: u8 = 4;

/// The refs of the repository after an operation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct View {
    /// Commits with no descendants that are kept visible (sorted).
    pub heads: Vec<Id>,
    /// Branches: name and target commit (sorted by name).
    pub branches: Vec<(String, Id)>,
    /// Tags: name and target commit (sorted by name).
    pub tags: Vec<(String, Id)>,
    /// The branch the working folder is on.
    pub current_branch: Option<String>,
    /// The commit the working folder was last checked out from or committed as.
    pub wc_commit: Option<Id>,
    /// Git refs that are not plain branches or tags (`refs/pull/1/head`,
    /// `refs/remotes/...`), and annotated tags (`refs/tags/v1` naming a tag object); sorted
    /// by name.
    pub git_refs: Vec<GitRef>,
    /// The entity root: the [`crate::merkle_map::MerkleMap`] of every entity, once any
    /// was recorded.
    pub entities: Option<Id>,
    /// The action root: a map from action id to its newest [`crate::action`] record,
    /// once any was recorded.
    pub actions: Option<Id>,
}

/// A git ref kept in a view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitRef {
    /// The full ref name (`refs/pull/1/head`).
    pub name: String,
    /// What it names: the commit, or a [`GitTag`] object.
    pub target: Id,
    /// The commit `target` peels to (`target` itself for a commit).
    pub commit: Id,
}

fn write_refs(w: &mut Writer, refs: &[(String, Id)]) {
    w.uint(refs.len() as u64);
    for (n, id) in refs {
        w.bytes(n.as_bytes()).id(id);
    }
}

fn read_refs(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<(String, Id)>, DecodeError> {
    let n = r.count(what)?;
    let mut out: Vec<(String, Id)> = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.str(what)?.to_string();
        if out.last().is_some_and(|(p, _)| *p >= name) {
            return Err(DecodeError::new(what, "ref names are not sorted"));
        }
        out.push((name, r.id(what)?));
    }
    Ok(out)
}

impl View {
    /// The names pointing at each commit: its branches, then its tags as `tag:NAME`, each
    /// in the view's order.
    pub fn refs_by_commit(&self) -> std::collections::HashMap<Id, Vec<String>> {
        let mut m: std::collections::HashMap<Id, Vec<String>> = std::collections::HashMap::new();
        for (n, id) in &self.branches {
            m.entry(*id).or_default().push(n.clone());
        }
        for (n, id) in &self.tags {
            m.entry(*id).or_default().push(format!("tag:{n}"));
        }
        m
    }

    /// The canonical encoding (version 4 only for a view with an action root, 3 for one
    /// with an entity root, 2 for one with git refs).
    pub fn encode(&self) -> Vec<u8> {
        let version = if self.actions.is_some() {
            4
        } else if self.entities.is_some() {
            3
        } else if !self.git_refs.is_empty() {
            2
        } else {
            1
        };
        let mut w = Writer::with_header(Kind::View as u8, version);
        write_ids(&mut w, &self.heads);
        write_refs(&mut w, &self.branches);
        write_refs(&mut w, &self.tags);
        match &self.current_branch {
            Some(b) => w.u8(1).bytes(b.as_bytes()),
            None => w.u8(0),
        };
        match &self.wc_commit {
            Some(c) => w.u8(1).id(c),
            None => w.u8(0),
        };
        if version >= 2 {
            w.uint(self.git_refs.len() as u64);
            for g in &self.git_refs {
                w.bytes(g.name.as_bytes()).id(&g.target).id(&g.commit);
            }
        }
        match (version, &self.entities) {
            (4, entities) => {
                write_opt_id(&mut w, entities);
            }
            (_, Some(root)) => {
                w.id(root);
            }
            _ => {}
        }
        if let Some(root) = &self.actions {
            w.id(root);
        }
        w.finish()
    }

    /// Decodes a view.
    pub fn decode(bytes: &[u8]) -> Result<View, DecodeError> {
        const W: &str = "view";
        let mut r = Reader::new(bytes);
        let version = r.header(W, Kind::View as u8, VIEW_VERSION)?;
        let heads = read_ids(&mut r, W)?;
        if heads.windows(2).any(|w| w[0] >= w[1]) {
            return Err(DecodeError::new(W, "heads are not sorted and unique"));
        }
        let branches = read_refs(&mut r, W)?;
        let tags = read_refs(&mut r, W)?;
        let current_branch = match r.u8(W)? {
            0 => None,
            1 => Some(r.str(W)?.to_string()),
            x => return Err(DecodeError::new(W, format!("bad option flag {x}"))),
        };
        let wc_commit = match r.u8(W)? {
            0 => None,
            1 => Some(r.id(W)?),
            x => return Err(DecodeError::new(W, format!("bad option flag {x}"))),
        };
        let mut git_refs: Vec<GitRef> = Vec::new();
        if version >= 2 {
            let n = r.count(W)?;
            for _ in 0..n {
                let name = r.str(W)?.to_string();
                if git_refs.last().is_some_and(|p| p.name >= name) {
                    return Err(DecodeError::new(W, "git ref names are not sorted"));
                }
                git_refs.push(GitRef {
                    name,
                    target: r.id(W)?,
                    commit: r.id(W)?,
                });
            }
            if version == 2 && git_refs.is_empty() {
                return Err(DecodeError::new(W, "version 2 view with no git refs"));
            }
        }
        let entities = match version {
            3 => Some(r.id(W)?),
            4 => read_opt_id(&mut r, W)?,
            _ => None,
        };
        let actions = if version >= 4 { Some(r.id(W)?) } else { None };
        r.finish(W)?;
        Ok(View {
            heads,
            branches,
            tags,
            current_branch,
            wc_commit,
            git_refs,
            entities,
            actions,
        })
    }

    /// Whether `self` and `other` differ at most in what operations only record (the
    /// action root, a ledger that undo and restore keep).
    pub fn same_apart_from_action_records(&self, other: &View) -> bool {
        View {
            actions: None,
            ..self.clone()
        } == View {
            actions: None,
            ..other.clone()
        }
    }

    /// The commit a branch points at.
    pub fn branch(&self, name: &str) -> Option<Id> {
        self.branches
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, id)| *id)
    }

    /// The commit a tag points at.
    pub fn tag(&self, name: &str) -> Option<Id> {
        self.tags.iter().find(|(n, _)| n == name).map(|(_, id)| *id)
    }

    /// Points branch `name` at `target` (or removes it), keeping the list sorted.
    pub fn set_branch(&mut self, name: &str, target: Option<Id>) {
        set_ref(&mut self.branches, name, target);
    }

    /// The git ref named `name`.
    pub fn git_ref(&self, name: &str) -> Option<&GitRef> {
        self.git_refs
            .binary_search_by(|g| g.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.git_refs[i])
    }

    /// Sets git ref `name` (or removes it), keeping the list sorted.
    pub fn set_git_ref(&mut self, name: &str, target: Option<(Id, Id)>) {
        match (
            self.git_refs
                .binary_search_by(|g| g.name.as_str().cmp(name)),
            target,
        ) {
            (Ok(i), Some((target, commit))) => {
                self.git_refs[i].target = target;
                self.git_refs[i].commit = commit;
            }
            (Ok(i), None) => {
                self.git_refs.remove(i);
            }
            (Err(i), Some((target, commit))) => self.git_refs.insert(
                i,
                GitRef {
                    name: name.to_string(),
                    target,
                    commit,
                },
            ),
            (Err(_), None) => {}
        }
    }

    /// Points tag `name` at `target` (or removes it), keeping the list sorted.
    pub fn set_tag(&mut self, name: &str, target: Option<Id>) {
        set_ref(&mut self.tags, name, target);
    }

    /// Every commit the view names directly.
    pub fn referenced_commits(&self) -> Vec<Id> {
        let mut v: Vec<Id> = self.heads.clone();
        v.extend(self.branches.iter().map(|(_, id)| *id));
        v.extend(self.tags.iter().map(|(_, id)| *id));
        v.extend(self.wc_commit);
        v.extend(self.git_refs.iter().map(|g| g.commit));
        v.sort();
        v.dedup();
        v
    }
}

fn set_ref(refs: &mut Vec<(String, Id)>, name: &str, target: Option<Id>) {
    match (refs.binary_search_by(|(n, _)| n.as_str().cmp(name)), target) {
        (Ok(i), Some(t)) => refs[i].1 = t,
        (Ok(i), None) => {
            refs.remove(i);
        }
        (Err(i), Some(t)) => refs.insert(i, (name.to_string(), t)),
        (Err(_), None) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Branches come before tags at a commit, each as the view lists them; a commit no
    /// name points at has no entry.
    #[test]
    fn refs_by_commit_lists_branches_then_tags_per_commit() {
        let (a, b, c) = (Id::hash(b"a"), Id::hash(b"b"), Id::hash(b"c"));
        let view = View {
            heads: vec![a, b, c],
            branches: vec![("dev".into(), b), ("main".into(), a), ("topic".into(), a)],
            tags: vec![("v1".into(), a), ("v2".into(), b)],
            ..View::default()
        };
        let refs = view.refs_by_commit();
        assert_eq!(refs[&a], ["main", "topic", "tag:v1"]);
        assert_eq!(refs[&b], ["dev", "tag:v2"]);
        assert!(!refs.contains_key(&c));
    }
}
