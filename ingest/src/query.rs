//! Turning what a person types into a safe FTS5 query: words, "exact phrases" and
//! -exclusions. Every term is emitted as a quoted FTS5 string, so no input can inject
//! FTS5 syntax (or SQL: the query is a bound parameter).

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
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
pub fn parse(input: &str) -> Query {
    let mut q = Query::default();
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

impl Query {
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

    /// Whether a path matches: every required word appears in it, no excluded one does.
    pub fn matches_path(&self, path: &str) -> bool {
        let p = path.to_lowercase();
        !self.must.is_empty()
            && self.must.iter().all(|t| p.contains(&t.join(" ")))
            && !self.not.iter().any(|t| p.contains(&t.join(" ")))
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
