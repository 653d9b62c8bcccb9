//! The entity query language: `task where status = "open" and due < 2026-12-10 order by
//! due`. See `docs/FORMAT.md` (13.6) for the grammar.

use std::cmp::Ordering;

use lifeos_store::Id;
use lifeos_vcs::object::entity::{Entity, Value};

/// A query that did not parse: what was expected, and the byte offset of the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct QueryError {
    /// What is wrong.
    pub message: String,
    /// Where in the query (a byte offset).
    pub at: usize,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `contains` (text, case-folded)
    Contains,
}

/// A filter over entities.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Both hold.
    And(Box<Filter>, Box<Filter>),
    /// Either holds.
    Or(Box<Filter>, Box<Filter>),
    /// It does not hold.
    Not(Box<Filter>),
    /// The path has a value.
    Has(Vec<String>),
    /// The path's value compares so with the literal.
    Cmp(Vec<String>, Op, Value),
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The entity type asked for.
    pub kind: String,
    /// The filter (`None`: every entity of the type).
    pub filter: Option<Filter>,
    /// The path to order by, and whether descending.
    pub order: Option<(Vec<String>, bool)>,
    /// At most this many results.
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Sym(&'static str),
    LParen,
    RParen,
    Dot,
}

fn lex(q: &str) -> Result<Vec<(Tok, usize)>, QueryError> {
    let b = q.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\n' => i += 1,
            b'(' => {
                out.push((Tok::LParen, i));
                i += 1;
            }
            b')' => {
                out.push((Tok::RParen, i));
                i += 1;
            }
            b'.' if !b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                out.push((Tok::Dot, i));
                i += 1;
            }
            b'"' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => {
                            return Err(QueryError {
                                message: "this text has no closing \"".into(),
                                at: start,
                            })
                        }
                        Some(b'"') => break,
                        Some(b'\\') if b.get(i + 1).is_some() => {
                            let ch = q[i + 1..].chars().next().expect("a char");
                            s.push(ch);
                            i += 1 + ch.len_utf8();
                        }
                        Some(_) => {
                            let ch = q[i..].chars().next().expect("a char");
                            s.push(ch);
                            i += ch.len_utf8();
                        }
                    }
                }
                i += 1;
                out.push((Tok::Str(s), start));
            }
            b'=' => {
                out.push((Tok::Sym("="), i));
                i += 1;
            }
            b'!' | b'<' | b'>' => {
                let two = b.get(i + 1) == Some(&b'=');
                let sym = match (c, two) {
                    (b'!', true) => "!=",
                    (b'<', true) => "<=",
                    (b'>', true) => ">=",
                    (b'<', false) => "<",
                    (b'>', false) => ">",
                    _ => {
                        return Err(QueryError {
                            message: "'!' must be followed by '=' (not equal)".into(),
                            at: i,
                        })
                    }
                };
                out.push((Tok::Sym(sym), i));
                i += if two { 2 } else { 1 };
            }
            _ if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b':' | b'+' | b'.') => {
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || matches!(b[i], b'_' | b'-' | b':' | b'+')
                        || (b[i] == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
                {
                    i += 1;
                }
                out.push((Tok::Word(q[start..i].to_string()), start));
            }
            _ => {
                return Err(QueryError {
                    message: format!("unexpected {:?}", q[i..].chars().next().unwrap_or(' ')),
                    at: i,
                })
            }
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn at(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |(_, a)| *a)
    }

    fn err<T>(&self, message: impl Into<String>) -> Result<T, QueryError> {
        Err(QueryError {
            message: message.into(),
            at: self.at(),
        })
    }

    fn keyword(&mut self, k: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(k)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn name(&mut self, what: &str) -> Result<String, QueryError> {
        match self.peek() {
            Some(Tok::Word(w))
                if w.bytes().next().is_some_and(|c| c.is_ascii_lowercase())
                    && w.bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_') =>
            {
                let w = w.clone();
                self.pos += 1;
                Ok(w)
            }
            _ => self.err(format!("expected {what}")),
        }
    }

    fn path(&mut self) -> Result<Vec<String>, QueryError> {
        let mut p = vec![self.name("an attribute name")?];
        while self.peek() == Some(&Tok::Dot) {
            self.pos += 1;
            p.push(self.name("an attribute name after '.'")?);
        }
        Ok(p)
    }

    fn or(&mut self) -> Result<Filter, QueryError> {
        let mut f = self.and()?;
        while self.keyword("or") {
            f = Filter::Or(Box::new(f), Box::new(self.and()?));
        }
        Ok(f)
    }

    fn and(&mut self) -> Result<Filter, QueryError> {
        let mut f = self.not()?;
        while self.keyword("and") {
            f = Filter::And(Box::new(f), Box::new(self.not()?));
        }
        Ok(f)
    }

    fn not(&mut self) -> Result<Filter, QueryError> {
        if self.keyword("not") {
            return Ok(Filter::Not(Box::new(self.not()?)));
        }
        if self.peek() == Some(&Tok::LParen) {
            self.pos += 1;
            let f = self.or()?;
            if self.peek() != Some(&Tok::RParen) {
                return self.err("expected ')'");
            }
            self.pos += 1;
            return Ok(f);
        }
        if self.keyword("has") {
            return Ok(Filter::Has(self.path()?));
        }
        let path = self.path()?;
        let op = match self.peek() {
            Some(Tok::Sym(s)) => match *s {
                "=" => Op::Eq,
                "!=" => Op::Ne,
                "<" => Op::Lt,
                "<=" => Op::Le,
                ">" => Op::Gt,
                _ => Op::Ge,
            },
            Some(Tok::Word(w)) if w == "contains" => Op::Contains,
            _ => {
                return self.err(format!(
                    "expected a comparison (=, !=, <, <=, >, >=, contains) after {}",
                    path.join(".")
                ))
            }
        };
        self.pos += 1;
        let value = match self.peek() {
            Some(Tok::Str(s)) => Value::Str(s.clone()),
            Some(Tok::Word(w)) => match Value::parse(w) {
                Value::Str(_) => {
                    return self.err(format!(
                    "expected a value: \"text\" (quoted), a number, a date, true or false; not {w}"
                ))
                }
                v => v,
            },
            _ => return self.err("expected a value after the comparison"),
        };
        self.pos += 1;
        Ok(Filter::Cmp(path, op, value))
    }
}

/// Parses a query.
pub fn parse(q: &str) -> Result<Query, QueryError> {
    let mut p = Parser {
        toks: lex(q)?,
        pos: 0,
        end: q.len(),
    };
    let kind = p.name("an entity type (task, person, ...)")?;
    let filter = if p.keyword("where") {
        Some(p.or()?)
    } else {
        None
    };
    let order = if p.keyword("order") {
        if !p.keyword("by") {
            return p.err("expected 'by' after 'order'");
        }
        let path = p.path()?;
        let desc = if p.keyword("desc") {
            true
        } else {
            p.keyword("asc");
            false
        };
        Some((path, desc))
    } else {
        None
    };
    let limit = if p.keyword("limit") {
        match p.peek() {
            Some(Tok::Word(w)) => match w.parse::<usize>() {
                Ok(n) => {
                    p.pos += 1;
                    Some(n)
                }
                Err(_) => return p.err("expected a number after 'limit'"),
            },
            _ => return p.err("expected a number after 'limit'"),
        }
    } else {
        None
    };
    if p.peek().is_some() {
        return p.err("expected 'and', 'or', 'order by', 'limit' or the end of the query");
    }
    Ok(Query {
        kind,
        filter,
        order,
        limit,
    })
}

/// Compares two values for a query: values of one kind by value, a date and a moment as
/// moments; other pairs do not compare.
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    let ms = |v: &Value| match v {
        Value::Date(d) => Some(d.saturating_mul(86_400_000)),
        Value::DateTime(t) => Some(*t),
        _ => None,
    };
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
        (Value::Num(x), Value::Num(y)) => x.partial_cmp(y),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => Some(ms(a)?.cmp(&ms(b)?)),
    }
}

/// Orders any two values, for sorting: by kind (text, number, bool, then dates and
/// moments together), then as [`compare`] does, so the order is total.
pub fn sort_order(a: &Value, b: &Value) -> Ordering {
    let rank = |v: &Value| match v {
        Value::Str(_) => 0,
        Value::Num(_) => 1,
        Value::Bool(_) => 2,
        Value::Date(_) | Value::DateTime(_) => 3,
    };
    rank(a)
        .cmp(&rank(b))
        .then_with(|| compare(a, b).unwrap_or(Ordering::Equal))
}

/// The values a path reaches from `e`: its attribute (or, for a relation, the ids it
/// links to), or through links (`project.name`: the `name` of every entity `e` links to
/// as `project`). `id` and `type` are fields of every entity.
pub fn values(
    e: &Entity,
    path: &[String],
    follow: &mut dyn FnMut(&str) -> Option<Entity>,
) -> Vec<Value> {
    match path {
        [] => Vec::new(),
        [name] => match name.as_str() {
            "id" => vec![Value::Str(e.id.clone())],
            "type" => vec![Value::Str(e.kind.clone())],
            // An attribute, or else the ids a relation links to.
            _ => match e.get(name) {
                Some(v) => vec![v.clone()],
                None => e
                    .links
                    .iter()
                    .filter(|(r, _)| r == name)
                    .map(|(_, t)| Value::Str(t.clone()))
                    .collect(),
            },
        },
        [rel, rest @ ..] => {
            let mut out = Vec::new();
            for (_, target) in e.links.iter().filter(|(r, _)| r == rel) {
                if let Some(t) = follow(target) {
                    out.extend(values(&t, rest, follow));
                }
            }
            out
        }
    }
}

/// Whether `e` passes `f`.
pub fn matches(e: &Entity, f: &Filter, follow: &mut dyn FnMut(&str) -> Option<Entity>) -> bool {
    match f {
        Filter::And(a, b) => matches(e, a, follow) && matches(e, b, follow),
        Filter::Or(a, b) => matches(e, a, follow) || matches(e, b, follow),
        Filter::Not(a) => !matches(e, a, follow),
        Filter::Has(p) => !values(e, p, follow).is_empty(),
        Filter::Cmp(p, op, lit) => values(e, p, follow).iter().any(|v| {
            if *op == Op::Contains {
                return match (v, lit) {
                    (Value::Str(s), Value::Str(t)) => s.to_lowercase().contains(&t.to_lowercase()),
                    _ => false,
                };
            }
            let Some(ord) = compare(v, lit) else {
                return *op == Op::Ne;
            };
            match op {
                Op::Eq => ord == Ordering::Equal,
                Op::Ne => ord != Ordering::Equal,
                Op::Lt => ord == Ordering::Less,
                Op::Le => ord != Ordering::Greater,
                Op::Gt => ord == Ordering::Greater,
                Op::Ge => ord != Ordering::Less,
                Op::Contains => unreachable!("handled above"),
            }
        }),
    }
}

/// Orders `hits` (sorted by id) as `q` asks and applies its limit: by the first value of
/// the order path (`follow` reads linked entities), entities without one last either way,
/// ties by id.
pub fn order_hits(
    mut hits: Vec<(Id, Entity)>,
    q: &Query,
    follow: &mut dyn FnMut(&str) -> Option<Entity>,
) -> Vec<(Id, Entity)> {
    if let Some((path, desc)) = &q.order {
        let mut keyed: Vec<(Option<Value>, (Id, Entity))> = hits
            .into_iter()
            .map(|h| (values(&h.1, path, follow).into_iter().next(), h))
            .collect();
        keyed.sort_by(|(a, _), (b, _)| match (a, b) {
            (Some(x), Some(y)) => {
                let o = sort_order(x, y);
                if *desc {
                    o.reverse()
                } else {
                    o
                }
            }
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        hits = keyed.into_iter().map(|(_, h)| h).collect();
    }
    if let Some(n) = q.limit {
        hits.truncate(n);
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, attrs: &[(&str, &str)], links: &[(&str, &str)]) -> Entity {
        let attrs: Vec<(&str, Value)> = attrs.iter().map(|(n, v)| (*n, Value::parse(v))).collect();
        lifeos_vcs::testing::entity("task", id, &attrs, links)
    }

    #[test]
    fn queries_parse_and_match() {
        let q =
            parse(r#"task where status = "open" and due < 2026-12-10 order by due desc limit 5"#)
                .unwrap();
        assert_eq!(q.kind, "task");
        assert_eq!(q.order, Some((vec!["due".to_string()], true)));
        assert_eq!(q.limit, Some(5));
        let move_house = Entity {
            kind: "project".into(),
            id: "project:move".into(),
            attrs: vec![("name".into(), Value::Str("Move".into()))],
            links: vec![],
            conflicts: vec![],
        };
        let mut follow = |id: &str| (id == "project:move").then(|| move_house.clone());
        let open = task(
            "task:1",
            &[("status", "open"), ("due", "2026-12-09")],
            &[("project", "project:move")],
        );
        let late = task("task:2", &[("status", "open"), ("due", "2026-12-11")], &[]);
        let f = q.filter.unwrap();
        assert!(matches(&open, &f, &mut follow));
        assert!(!matches(&late, &f, &mut follow));
        let f = parse(r#"task where project.name = "Move""#)
            .unwrap()
            .filter
            .unwrap();
        assert!(matches(&open, &f, &mut follow));
        assert!(!matches(&late, &f, &mut follow));
        let f = parse("task where not has project or (due >= 2026-12-11 and estimate > 1)")
            .unwrap()
            .filter
            .unwrap();
        assert!(matches(&late, &f, &mut follow));
        assert!(!matches(&open, &f, &mut follow));
        let f = parse(r#"task where id contains "TASK:1""#)
            .unwrap()
            .filter
            .unwrap();
        assert!(matches(&open, &f, &mut follow));
    }

    /// Found by fuzzing: a backslash before a character of several bytes cut the query
    /// inside that character.
    #[test]
    fn a_backslash_before_a_multibyte_character_escapes_the_whole_character() {
        let q = parse("task where title = \"a\\\u{52a}b\"").unwrap();
        assert_eq!(
            q.filter,
            Some(Filter::Cmp(
                vec!["title".into()],
                Op::Eq,
                Value::Str("a\u{52a}b".into())
            ))
        );
        assert!(parse("01)nWagric\"e\\\u{52a}\\\\is~  ago").is_err());
    }

    #[test]
    fn parse_errors_point_at_the_token() {
        for (q, at, says) in [
            (r#"task where status "open""#, 18, "expected a comparison"),
            ("task where due < soon", 17, "expected a value"),
            ("task where (status = 1", 22, "expected ')'"),
            (r#"task where title = "open"#, 19, "no closing"),
            ("task order due", 11, "expected 'by'"),
            ("task where a = 1 b", 17, "end of the query"),
            ("Task", 0, "an entity type"),
            ("task where a ! 1", 13, "'!' must be followed"),
        ] {
            let e = parse(q).unwrap_err();
            assert_eq!(e.at, at, "{q}: {e:?}");
            assert!(e.message.contains(says), "{q}: {e:?}");
        }
    }
}
