//! Turning what a person types into a safe FTS5 query: words, "exact phrases" and
//! -exclusions. Every term is emitted as a quoted FTS5 string, so no input can inject
//! FTS5 syntax (or SQL: the query is a bound parameter).

use memchr::memmem;

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Terms {
    /// Words and phrases that must match (each a list of words).
    pub must: Vec<Vec<String>>,
    /// Words and phrases that must not match.
    pub not: Vec<Vec<String>>,
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .collect()
}

/// Parses user input.
pub fn parse(input: &str) -> Terms {
    let mut q = Terms::default();
    let chars: Vec<char> = input.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let negate = chars[i] == '-';
        if negate {
            i += 1;
        }
        let text: String = if chars.get(i) == Some(&'"') {
            let start = i + 1;
            let end = chars[start..]
                .iter()
                .position(|c| *c == '"')
                .map_or(chars.len(), |p| start + p);
            i = end + 1;
            chars[start..end].iter().collect()
        } else {
            let start = i;
            while i < chars.len() && !chars[i].is_whitespace() {
                i += 1;
            }
            chars[start..i].iter().collect()
        };
        let is_phrase =
            text.contains(char::is_whitespace) || input.contains(&format!("\"{text}\""));
        let ws = words(&text);
        if ws.is_empty() {
            continue;
        }
        let target = if negate { &mut q.not } else { &mut q.must };
        if is_phrase {
            target.push(ws);
        } else {
            // "e-mail" or "foo.bar" typed as one word: its parts are separate words.
            target.extend(ws.into_iter().map(|w| vec![w]));
        }
    }
    q
}

fn quoted(ws: &[String]) -> String {
    format!("\"{}\"", ws.join(" ").replace('"', "\"\""))
}

impl Terms {
    /// The FTS5 MATCH expression, or `None` if nothing must match.
    pub fn fts(&self) -> Option<String> {
        if self.must.is_empty() {
            return None;
        }
        let mut s = self
            .must
            .iter()
            .map(|t| quoted(t))
            .collect::<Vec<_>>()
            .join(" ");
        for t in &self.not {
            s.push_str(" NOT ");
            s.push_str(&quoted(t));
        }
        Some(s)
    }

    /// What says whether paths match the query, made once for many paths.
    pub fn path_matcher(&self) -> PathMatcher {
        let finders = |ts: &[Vec<String>]| {
            ts.iter()
                .map(|t| memmem::Finder::new(t.join(" ").as_bytes()).into_owned())
                .collect()
        };
        PathMatcher {
            must: finders(&self.must),
            not: finders(&self.not),
            lower: String::new(),
        }
    }
}

/// Whether paths match a [`Terms`]: every required word or phrase appears in the path
/// (lowercased), no excluded one does. Holds a searcher per phrase, made once, and one
/// buffer, so a search matching the names of 100,000 files allocates nothing per path
/// (and does not set up a substring search per path and phrase, as `str::contains` does).
#[derive(Debug)]
pub struct PathMatcher {
    must: Vec<memmem::Finder<'static>>,
    not: Vec<memmem::Finder<'static>>,
    lower: String,
}

impl PathMatcher {
    /// Whether `path` matches.
    pub fn matches(&mut self, path: &str) -> bool {
        if self.must.is_empty() {
            return false;
        }
        if path.is_ascii() {
            self.lower.clear();
            self.lower.push_str(path);
            self.lower.make_ascii_lowercase();
        } else {
            self.lower = path.to_lowercase();
        }
        let p = self.lower.as_bytes();
        self.must.iter().all(|t| t.find(p).is_some())
            && !self.not.iter().any(|t| t.find(p).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn words_phrases_and_exclusions() {
        let q = parse(r#"budget "launch plan" -draft"#);
        assert_eq!(q.fts().unwrap(), r#""budget" "launch plan" NOT "draft""#);
        assert_eq!(parse("e-mail").fts().unwrap(), r#""e" "mail""#);
        assert_eq!(parse("-only").fts(), None);
    }

    #[test]
    fn paths_match_lowercased_as_unicode_lowercases_them() {
        let mut m = parse(r#"Budget "launch plan" -draft"#).path_matcher();
        assert!(m.matches("notes/BUDGET/Launch Plan.md"));
        assert!(!m.matches("notes/budget/launch plan draft.md"));
        assert!(!m.matches("notes/budget.md"));
        // Non-ASCII paths are lowercased as Unicode does: the Kelvin sign is a k.
        let mut k = parse("kilo").path_matcher();
        assert!(k.matches("\u{212A}ILO.txt"));
        assert!(k.matches("ÉTÉ/KILO.txt"));
        assert!(!parse("-draft").path_matcher().matches("anything"));
    }

    proptest! {
        #[test]
        fn no_input_escapes_quoting(s in ".{0,60}") {
            if let Some(f) = parse(&s).fts() {
                // Outside quoted strings only spaces and NOT appear.
                let mut inside = false;
                let mut outside = String::new();
                for c in f.chars() {
                    if c == '"' { inside = !inside; continue; }
                    if !inside { outside.push(c); }
                }
                prop_assert!(outside.split_whitespace().all(|w| w == "NOT"), "{f}");
            }
        }
    }
}
