//! Resolving revisions: `@`, `@-`, `REV-`, branch and tag names, and unique prefixes of
//! commit ids (hex) or change ids (`k`–`z`).

use lifeos_store::Id;

use crate::error::{Result, VcsError};
use crate::object::{change_id_str, is_change_id_prefix, View};
use crate::prefix::IdKind;
use crate::repo::Repo;

/// Every commit reachable from the view, newest first by committer time, through the
/// installed operation index.
pub fn all_commits(repo: &Repo, view: &View) -> Result<Vec<(Id, crate::object::Commit)>> {
    let mut out = repo
        .op_index()
        .reachable_commits(repo, &view.referenced_commits())?;
    out.sort_by(|a, b| {
        b.1.committer
            .time
            .cmp(&a.1.committer.time)
            .then(a.0.cmp(&b.0))
    });
    Ok(out)
}

/// Levenshtein distance, for "did you mean" hints.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != *cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

impl Repo {
    /// Resolves a revision in `view` to a commit id.
    pub fn resolve_rev(&self, view: &View, rev: &str) -> Result<Id> {
        let rev = rev.trim();
        if rev.is_empty() {
            return Err(VcsError::BadRevision {
                rev: rev.into(),
                column: 1,
                reason: "empty revision".into(),
            });
        }
        if let Some(id) = self.resolve_symbol(view, rev)? {
            return Ok(id);
        }
        let base = rev.trim_end_matches('-');
        let back = rev.len() - base.len();
        if back == 0 || base.is_empty() {
            return Err(self.unknown(view, rev));
        }
        let mut id = self
            .resolve_symbol(view, base)?
            .ok_or_else(|| self.unknown(view, base))?;
        for step in 0..back {
            let c = self.commit(&id)?;
            id = *c.parents.first().ok_or_else(|| {
                VcsError::Refused(format!(
                    "{rev:?} goes past the root commit: {base}{} has no parent",
                    "-".repeat(step)
                ))
            })?;
        }
        Ok(id)
    }

    fn unknown(&self, view: &View, rev: &str) -> VcsError {
        let mut names: Vec<(usize, String)> = view
            .branches
            .iter()
            .chain(view.tags.iter())
            .map(|(n, _)| (distance(n, rev), n.clone()))
            .filter(|(d, n)| *d <= 2.max(n.len() / 3))
            .collect();
        names.sort();
        VcsError::UnknownRevision {
            rev: rev.into(),
            candidates: names.into_iter().map(|(_, n)| n).take(3).collect(),
        }
    }

    fn resolve_symbol(&self, view: &View, sym: &str) -> Result<Option<Id>> {
        if sym == "@" {
            let tip = match &view.current_branch {
                Some(b) => view.branch(b),
                None => view.wc_commit,
            };
            return tip.map(Some).ok_or_else(|| {
                VcsError::NoCommits(view.current_branch.clone().unwrap_or_else(|| "@".into()))
            });
        }
        if let Some(id) = view.branch(sym).or_else(|| view.tag(sym)) {
            return Ok(Some(id));
        }
        if let Some(id) = Id::from_hex(&sym.to_ascii_lowercase()) {
            if self
                .store()
                .locate(&id)?
                .is_some_and(|l| l.kind == lifeos_store::Kind::Commit)
            {
                return Ok(Some(id));
            }
        }
        let hex = sym.len() <= 64 && sym.bytes().all(|b| b.is_ascii_hexdigit());
        let change = is_change_id_prefix(sym);
        if !hex && !change {
            return Ok(None);
        }
        let lower = sym.to_ascii_lowercase();
        let mut matches: Vec<(Id, String)> = Vec::new();
        for (id, c) in all_commits(self, view)? {
            if hex && id.has_hex_prefix(&lower) {
                matches.push((id, id.short(12)));
            } else if change
                && change_id_str(&c.change_id).starts_with(&lower)
                && !matches.iter().any(|m| m.0 == id)
            {
                matches.push((
                    id,
                    format!(
                        "{} (change {})",
                        id.short(12),
                        &change_id_str(&c.change_id)[..12]
                    ),
                ));
            }
        }
        let one = crate::prefix::at_most_one(matches, sym, IdKind::Revision, |m| m.1.clone())?;
        Ok(one.map(|m| m.0))
    }
}
