//! The rules index (`.lifeos/rules-index`): what a rules file listens for, kept so that a
//! commit that no rule can match does not read and parse the rules (a thousand rules take
//! about 12 ms to parse, more than a commit of one file in a thousand). It is derived data: written
//! when missing or stale (another rules file id), safe to delete. See `docs/FORMAT.md`
//! (7.12).

use std::borrow::Cow;
use std::collections::BTreeSet;

use lifeos_store::Id;

use crate::{Rules, Trigger};

/// The file, in `.lifeos`.
pub const INDEX_FILE: &str = "rules-index";

/// The first word of the file and its version.
const MAGIC: &str = "lifeos-rules-index 1";

/// What one version of the rules file listens for: the file's text, read line by line
/// when asked (a thousand rules make two thousand lines; building a set of them cost
/// more than the scan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesIndex {
    /// The rules file it describes.
    pub rules_file: Id,
    text: String,
}

/// One line of the index.
enum Line<'a> {
    /// Some rule fires on the event whatever the path (hooks, refs, entities, time, and
    /// ingest rules without `paths`).
    Any(&'a str),
    /// The literal prefix of a glob of a `commit` or `ingest` rule: a path that starts
    /// with none of an event's prefixes cannot fire it.
    Prefix(&'a str, Cow<'a, str>),
}

fn parse_line(line: &str) -> Option<Line<'_>> {
    match line.split_once(' ')? {
        ("any", e) => Some(Line::Any(e)),
        ("prefix", rest) => {
            let (e, p) = rest.split_once(' ')?;
            let p = match p.starts_with('"') {
                true => Cow::Owned(serde_json::from_str(p).ok()?),
                false => Cow::Borrowed(p),
            };
            Some(Line::Prefix(e, p))
        }
        _ => None,
    }
}

impl RulesIndex {
    /// The index of `rules`, read from file `id`.
    pub fn of(rules: &Rules, id: Id) -> RulesIndex {
        let mut any = BTreeSet::new();
        let mut prefixes = BTreeSet::new();
        for r in &rules.rules {
            match &r.paths {
                Some(g) => prefixes.extend(g.prefixes().map(|p| (r.on.as_str(), p))),
                None => {
                    any.insert(r.on.as_str());
                }
            }
        }
        let mut text = format!("{MAGIC} {}\n", id.to_hex());
        for e in any {
            text.push_str(&format!("any {e}\n"));
        }
        for (e, p) in prefixes {
            let p = if p.contains(['\n', '\r', '\\']) || p.starts_with('"') {
                serde_json::Value::String(p.to_string()).to_string()
            } else {
                p.to_string()
            };
            text.push_str(&format!("prefix {e} {p}\n"));
        }
        RulesIndex {
            rules_file: id,
            text,
        }
    }

    /// The lines after the header; `None` for one that does not parse (which answers
    /// every question with "maybe", so a damaged index costs a parse, never a rule).
    fn lines(&self) -> impl Iterator<Item = Option<Line<'_>>> {
        self.text.lines().skip(1).map(parse_line)
    }

    /// Whether some rule listens for `event` at all.
    pub fn listens(&self, event: &str) -> bool {
        self.lines().any(|l| match l {
            Some(Line::Any(e) | Line::Prefix(e, _)) => e == event,
            None => true,
        })
    }

    /// Whether some `event` rule (`commit` or `ingest`) could fire for a file at `path`
    /// (never false when one does).
    pub fn may_fire_path(&self, event: &str, path: &str) -> bool {
        self.lines().any(|l| match l {
            Some(Line::Any(e)) => e == event,
            Some(Line::Prefix(e, p)) => e == event && path.starts_with(&*p),
            None => true,
        })
    }

    /// Whether some rule could fire for `trigger` (never false when one does).
    pub fn may_fire(&self, trigger: &Trigger) -> bool {
        let event = trigger.event();
        let paths: Vec<std::borrow::Cow<'_, str>> = match trigger {
            Trigger::Commit { changes, .. } => changes
                .iter()
                .map(|(p, _)| String::from_utf8_lossy(p))
                .collect(),
            Trigger::Ingest { path, .. } => vec![String::from_utf8_lossy(path)],
            _ => Vec::new(),
        };
        self.lines().any(|l| match l {
            Some(Line::Any(e)) => e == event,
            Some(Line::Prefix(e, p)) => e == event && paths.iter().any(|x| x.starts_with(&*p)),
            None => true,
        })
    }

    /// The file's text: the magic and the rules file id, then one line per event
    /// (`any EVENT`) and per glob prefix (`prefix EVENT PREFIX`, the prefix as it is, or
    /// as a JSON string when it holds a line break or a backslash or starts with `"`).
    pub fn encode(&self) -> &str {
        &self.text
    }

    /// Reads the file's text; `None` if its header is not one this version wrote.
    pub fn decode(text: &str) -> Option<RulesIndex> {
        let id = text
            .lines()
            .next()?
            .strip_prefix(MAGIC)?
            .strip_prefix(' ')?;
        let rules_file = Id::from_hex(id)?;
        Some(RulesIndex {
            rules_file,
            text: text.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn narrow_text() -> String {
        let rules = "[[rule]]\nname = \"a\"\non = \"commit\"\npaths = [\"invoices/**/*.pdf\"]\n[rule.tag]\nname = \"t\"\n";
        RulesIndex::of(&Rules::parse(rules).unwrap(), Id::hash(b"r2"))
            .encode()
            .to_string()
    }

    #[test]
    fn the_index_round_trips_and_lets_through_every_path_a_rule_could_match() {
        let rules = Rules::parse(
            "[[rule]]\nname = \"a\"\non = \"commit\"\npaths = [\"invoices/**/*.pdf\", \"**/*.ics\", \"odd\\\\\\\\dir/*\"]\n[rule.tag]\nname = \"t\"\n\n[[rule]]\nname = \"b\"\non = \"commit\"\npaths = [\"in box/*\"]\n[rule.tag]\nname = \"t\"\n\n[[rule]]\nname = \"c\"\non = \"hook\"\nhook = \"pre-push\"\n[rule.tag]\nname = \"t\"\n",
        )
        .unwrap();
        let ix = RulesIndex::of(&rules, Id::hash(b"rules"));
        assert_eq!(RulesIndex::decode(ix.encode()), Some(ix.clone()));
        assert!(RulesIndex::decode("lifeos-rules-index 2 00").is_none());
        // A damaged line makes every question a "maybe".
        let damaged = RulesIndex::decode(&format!("{}garbage\n", narrow_text())).unwrap();
        assert!(damaged.listens("entity"));
        let commit = |p: &str| Trigger::Commit {
            commit: Id::hash(b"c"),
            changes: vec![(p.into(), "added")],
            branch: None,
            message: String::new(),
        };
        // "**/*.ics" has no literal prefix: every commit path could match it.
        assert!(ix.may_fire(&commit("notes/a.md")));
        let narrow = RulesIndex::decode(&narrow_text()).unwrap();
        assert!(!narrow.may_fire(&commit("notes/a.md")));
        assert!(narrow.may_fire(&commit("invoices/2026/x.pdf")));
        assert!(
            narrow.may_fire(&commit("invoices/x.txt")),
            "a superset of the matches"
        );
        assert!(ix.listens("hook") && !ix.listens("entity") && !narrow.listens("hook"));
    }
}
