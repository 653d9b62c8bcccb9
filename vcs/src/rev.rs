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

/// The lifeos spelling of a revision written as git or jj write it (`HEAD`, `HEAD~2`,
/// `main^`, `::main`, `main::`, `a::b`), if `rev` is one: such a revision never means
/// what its writer expects here (`~` is lifeos's difference, `:` and `^` are not
/// revision syntax), so it is refused with the spelling that does.
pub fn lifeos_spelling(rev: &str) -> Option<String> {
    let rev = rev.trim();
    let word = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_alphanumeric() || "@-_/.".contains(c))
    };
    let ours = |w: &str| {
        if w == "HEAD" {
            "@".to_string()
        } else {
            w.to_string()
        }
    };
    if rev == "HEAD" {
        return Some("@".into());
    }
    if let Some((a, b)) = rev.split_once("::") {
        return match (a.is_empty(), b.is_empty()) {
            (true, false) if word(b) => Some(format!("ancestors({})", ours(b))),
            (false, true) if word(a) => Some(format!("descendants({})", ours(a))),
            (false, false) if word(a) && word(b) => {
                Some(format!("descendants({}) & ancestors({})", ours(a), ours(b)))
            }
            _ => None,
        };
    }
    if let Some((base, n)) = rev.split_once('~') {
        let steps: usize = if n.is_empty() { 1 } else { n.parse().ok()? };
        return (word(base) && (1..=1000).contains(&steps))
            .then(|| format!("{}{}", ours(base), "-".repeat(steps)));
    }
    let base = rev.trim_end_matches('^');
    let carets = rev.len() - base.len();
    (carets > 0 && word(base)).then(|| format!("{}{}", ours(base), "-".repeat(carets)))
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
        if let Some(lifeos) = lifeos_spelling(rev) {
            return Err(VcsError::ForeignRevision {
                rev: rev.into(),
                lifeos,
            });
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

#[cfg(test)]
mod tests {
    use super::lifeos_spelling;

    /// git's and jj's ways to write a revision get lifeos's; lifeos's own revsets, in
    /// which `~` is the difference and `..` a range, are left alone.
    #[test]
    fn git_and_jj_revisions_are_told_their_lifeos_spelling() {
        let table: &[(&str, Option<&str>)] = &[
            ("HEAD", Some("@")),
            ("HEAD~1", Some("@-")),
            ("HEAD~3", Some("@---")),
            ("HEAD^", Some("@-")),
            ("main^^", Some("main--")),
            ("main~", Some("main-")),
            ("main~2", Some("main--")),
            ("@~1", Some("@-")),
            ("::main", Some("ancestors(main)")),
            ("main::", Some("descendants(main)")),
            ("v1::main", Some("descendants(v1) & ancestors(main)")),
            ("main", None),
            ("@-", None),
            ("main..trip", None),
            ("main..", None),
            ("all() ~ main", None),
            ("main ~ 1", None),
            ("main~trip", None),
            ("date(after: 2026-11-01)", None),
            ("files(photos/*)", None),
        ];
        for (rev, want) in table {
            assert_eq!(lifeos_spelling(rev).as_deref(), *want, "{rev}");
        }
    }
}
