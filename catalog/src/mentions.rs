//! Mentions: which extracted segments (a note's lines, a document's page, a transcript's
//! sentence, an image's text) name a person, place or project, by its `name` or one of
//! its `aliases` (comma-separated), case-folded and on word boundaries. Deterministic;
//! no model. Kept in the catalog (level 6, `docs/FORMAT.md` 12.9) and brought up to date
//! by its sync: new segments are matched against every name, and an entity whose names
//! changed is matched again through the full-text index.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use aho_corasick::AhoCorasick;
use rusqlite::params;

use crate::{db_err, Catalog};
use lifeos_vcs::error::Result;

/// The types whose names are looked for.
pub const MENTIONED_TYPES: [&str; 3] = ["person", "place", "project"];

/// Names shorter than this (in characters, once folded) are not looked for: a one-letter
/// name would be found everywhere.
const MIN_NAME: usize = 2;

/// Folds text for matching: Unicode lowercase.
pub fn fold(text: &str) -> String {
    text.to_lowercase()
}

/// The folded names of an entity: its `name` and each of its comma-separated `aliases`.
pub fn names_of(name: Option<&str>, aliases: Option<&str>) -> BTreeSet<String> {
    name.into_iter()
        .chain(aliases.into_iter().flat_map(|a| a.split(',')))
        .map(|n| fold(n.trim()))
        .filter(|n| n.chars().count() >= MIN_NAME)
        .collect()
}

/// A matcher for many names at once.
pub struct Matcher {
    ac: Option<AhoCorasick>,
    owners: Vec<String>,
}

impl Matcher {
    /// A matcher for `names` (entity id -> folded names).
    pub fn new(names: &BTreeMap<String, BTreeSet<String>>) -> Matcher {
        let mut patterns = Vec::new();
        let mut owners = Vec::new();
        for (eid, ns) in names {
            for n in ns {
                patterns.push(n.clone());
                owners.push(eid.clone());
            }
        }
        Matcher {
            ac: (!patterns.is_empty())
                .then(|| AhoCorasick::new(&patterns).expect("plain names build a matcher")),
            owners,
        }
    }

    /// The entities `text` mentions (each once, sorted).
    pub fn find(&self, text: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let Some(ac) = &self.ac else {
            return out;
        };
        let folded = fold(text);
        for m in ac.find_overlapping_iter(&folded) {
            if on_word_boundaries(&folded, m.start(), m.end()) {
                out.insert(self.owners[m.pattern().as_usize()].clone());
            }
        }
        out
    }
}

/// Whether `text[start..end]` neither starts nor ends inside a word.
fn on_word_boundaries(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
}

/// An FTS5 phrase query for `name`: its words in double quotes (none: `None`).
fn phrase(name: &str) -> Option<String> {
    let words: Vec<&str> = name
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    (!words.is_empty()).then(|| format!("\"{}\"", words.join(" ")))
}

/// Brings the mentions up to date (in the catalog's sync transaction, after the segments
/// and entities are): `new_segments` are the rows the sync added.
pub(crate) fn sync(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    new_segments: &[i64],
) -> Result<()> {
    let e = |e| db_err(path, e);
    let current = current_names(tx, path)?;
    let stored: BTreeMap<String, BTreeSet<String>> = {
        let mut st = tx
            .prepare("SELECT eid, name FROM mention_names")
            .map_err(e)?;
        let rows = st
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(e)?;
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for row in rows {
            let (eid, name) = row.map_err(e)?;
            m.entry(eid).or_default().insert(name);
        }
        m
    };
    let mut insert = tx
        .prepare_cached("INSERT OR IGNORE INTO mentions (segment, eid) VALUES (?1, ?2)")
        .map_err(e)?;
    // Entities whose names changed (or that came or went): match them again.
    let changed: BTreeSet<&String> = current
        .keys()
        .chain(stored.keys())
        .filter(|eid| current.get(*eid) != stored.get(*eid))
        .collect();
    for eid in changed {
        tx.execute("DELETE FROM mentions WHERE eid = ?1", [eid])
            .map_err(e)?;
        tx.execute("DELETE FROM mention_names WHERE eid = ?1", [eid])
            .map_err(e)?;
        let Some(names) = current.get(eid) else {
            continue;
        };
        let one = Matcher::new(&BTreeMap::from([(eid.clone(), names.clone())]));
        for n in names {
            tx.execute(
                "INSERT INTO mention_names (eid, name) VALUES (?1, ?2)",
                params![eid, n],
            )
            .map_err(e)?;
            let Some(q) = phrase(n) else { continue };
            let mut st = tx
                .prepare_cached(
                    "SELECT s.id, s.text FROM segments_fts JOIN segments s ON s.id = segments_fts.rowid
                     WHERE segments_fts MATCH ?1",
                )
                .map_err(e)?;
            let hits: Vec<(i64, String)> = st
                .query_map([q], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(e)?
                .collect::<rusqlite::Result<_>>()
                .map_err(e)?;
            for (seg, text) in hits {
                if !one.find(&text).is_empty() {
                    insert.execute(params![seg, eid]).map_err(e)?;
                }
            }
        }
    }
    if !new_segments.is_empty() && !current.is_empty() {
        let all = Matcher::new(&current);
        let mut text = tx
            .prepare_cached("SELECT text FROM segments WHERE id = ?1")
            .map_err(e)?;
        for seg in new_segments {
            let t: String = text.query_row([seg], |r| r.get(0)).map_err(e)?;
            for eid in all.find(&t) {
                insert.execute(params![seg, eid]).map_err(e)?;
            }
        }
    }
    Ok(())
}

/// The folded names of every current person, place and project, from the entity index.
fn current_names(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let e = |e| db_err(path, e);
    let mut st = tx
        .prepare(&format!(
            "SELECT r.eid, v.name, v.v FROM entity_versions r JOIN entity_values v ON v.row = r.row
             WHERE r.to_seq = {} AND r.type IN ({}) AND v.name IN ('name', 'aliases') AND v.rank = 0",
            i64::MAX,
            MENTIONED_TYPES.map(|t| format!("'{t}'")).join(", ")
        ))
        .map_err(e)?;
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .map_err(e)?;
    let mut raw: BTreeMap<String, (Option<String>, Option<String>)> = BTreeMap::new();
    for row in rows {
        let (eid, field, value) = row.map_err(e)?;
        let slot = raw.entry(eid).or_default();
        if field == "name" {
            slot.0 = Some(value);
        } else {
            slot.1 = Some(value);
        }
    }
    Ok(raw
        .into_iter()
        .map(|(eid, (n, a))| (eid, names_of(n.as_deref(), a.as_deref())))
        .filter(|(_, ns)| !ns.is_empty())
        .collect())
}

impl Catalog {
    /// The segments (catalog rows) that mention entity `eid`.
    pub fn mentions_of(&self, eid: &str) -> Result<BTreeSet<i64>> {
        let e = |e| db_err(&self.path, e);
        let mut st = self
            .conn
            .prepare_cached("SELECT segment FROM mentions WHERE eid = ?1")
            .map_err(e)?;
        let rows = st.query_map([eid], |r| r.get(0)).map_err(e)?;
        rows.collect::<rusqlite::Result<_>>().map_err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_found_case_folded_on_word_boundaries() {
        let names = BTreeMap::from([
            (
                "person:ann".to_string(),
                names_of(Some("Ann Lee"), Some("Annie, A")),
            ),
            ("place:zurich".to_string(), names_of(Some("Zürich"), None)),
            ("project:move".to_string(), names_of(Some("Move"), None)),
        ]);
        assert_eq!(
            names["person:ann"],
            BTreeSet::from(["ann lee".into(), "annie".into()])
        );
        let m = Matcher::new(&names);
        let found = |t: &str| m.find(t).into_iter().collect::<Vec<_>>();
        assert_eq!(
            found("ANN LEE flew to ZÜRICH."),
            ["person:ann", "place:zurich"]
        );
        assert_eq!(found("Annie said so"), ["person:ann"]);
        assert!(found("Annie's").contains(&"person:ann".to_string()));
        assert!(
            found("annealing, removed, Leeward").is_empty(),
            "inside words"
        );
        assert_eq!(found("the move (Move!) and"), ["project:move"]);
        assert!(Matcher::new(&BTreeMap::new()).find("anything").is_empty());
        assert_eq!(phrase("A. Lee-Smith").as_deref(), Some("\"A Lee Smith\""));
        assert_eq!(phrase("--"), None);
    }
}
