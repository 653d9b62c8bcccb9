//! A small revision-set language for `log -r`:
//!
//! ```text
//! @  @-  main  v1  3f9c2a  (revisions)        x | y   x & y   (union, intersection)
//! ancestors(x)   x..y   ..y   x..              (ranges; x..y = ancestors(y) minus ancestors(x))
//! descendants(x)   heads(x)   roots(x)   latest(x, n)
//! x ~ y   ~x                                    (difference, and everything but x)
//! author(text)   description(text)   files(glob)   date(after: WHEN, before: WHEN)   all()
//! ```
//! Parse errors name the column of the bad token.

use std::collections::{HashMap, HashSet};

use globset::Glob;
use lifeos_store::Id;

use crate::error::{Result, VcsError};
use crate::moment::{parse_when, When};
use crate::object::{Commit, View};
use crate::repo::Repo;

/// A parsed revset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// A single revision.
    Symbol(String),
    /// Every visible commit.
    All,
    /// Ancestors, inclusive.
    Ancestors(Box<Expr>),
    /// Descendants, inclusive.
    Descendants(Box<Expr>),
    /// The members that are no other member's ancestor.
    Heads(Box<Expr>),
    /// The members that are no other member's descendant.
    Roots(Box<Expr>),
    /// The `n` members with the newest committer time.
    Latest(Box<Expr>, usize),
    /// `x ~ y`: in x, not in y.
    Difference(Box<Expr>, Box<Expr>),
    /// `~x`: every visible commit not in x.
    Not(Box<Expr>),
    /// `x..y`: ancestors of y that are not ancestors of x (either side optional).
    Range(Option<Box<Expr>>, Option<Box<Expr>>),
    /// Union.
    Union(Box<Expr>, Box<Expr>),
    /// Intersection.
    Intersection(Box<Expr>, Box<Expr>),
    /// Author name or email contains the text (case-insensitive).
    Author(String),
    /// Message contains the text (case-insensitive).
    Description(String),
    /// Committed within the bounds (WHEN strings).
    Date {
        /// Lower bound.
        after: Option<String>,
        /// Upper bound.
        before: Option<String>,
    },
    /// Changed a path matching the glob.
    Files(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    LParen,
    RParen,
    Comma,
    Colon,
    Pipe,
    Amp,
    Tilde,
    DotDot,
    End,
}

/// Parentheses and function calls nest at most this deep.
const MAX_NESTING: usize = 64;
/// An expression has at most this many operators and operands (evaluation and dropping
/// recurse over the tree, so its size must be bounded).
const MAX_NODES: usize = 1_000;

struct Parser<'a> {
    src: &'a str,
    toks: Vec<(Tok, usize)>,
    pos: usize,
    nesting: usize,
    nodes: usize,
}

fn err(src: &str, column: usize, reason: impl Into<String>) -> VcsError {
    VcsError::BadRevision {
        rev: src.into(),
        column,
        reason: reason.into(),
    }
}

fn lex(src: &str) -> Result<Vec<(Tok, usize)>> {
    let b: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        let col = i + 1;
        match c {
            ' ' | '\t' => i += 1,
            '(' => (out.push((Tok::LParen, col)), i += 1).1,
            ')' => (out.push((Tok::RParen, col)), i += 1).1,
            ',' => (out.push((Tok::Comma, col)), i += 1).1,
            ':' => (out.push((Tok::Colon, col)), i += 1).1,
            '|' => (out.push((Tok::Pipe, col)), i += 1).1,
            '&' => (out.push((Tok::Amp, col)), i += 1).1,
            '~' => (out.push((Tok::Tilde, col)), i += 1).1,
            '.' if b.get(i + 1) == Some(&'.') => (out.push((Tok::DotDot, col)), i += 2).1,
            '"' | '\'' => {
                let q = c;
                let mut s = String::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err(err(src, col, "unterminated quoted string")),
                        Some(&ch) if ch == q => break,
                        Some('\\') if b.get(i + 1).is_some() => {
                            s.push(b[i + 1]);
                            i += 2;
                            continue;
                        }
                        Some(&ch) => s.push(ch),
                    }
                    i += 1;
                }
                i += 1;
                out.push((Tok::Str(s), col));
            }
            c if c.is_alphanumeric() || "@-_/+*?.[]{}!".contains(c) => {
                let mut s = String::new();
                while i < b.len() {
                    let ch = b[i];
                    if ch == '.' && b.get(i + 1) == Some(&'.') {
                        break;
                    }
                    if ch.is_alphanumeric() || "@-_/+*?.[]{}!".contains(ch) {
                        s.push(ch);
                        i += 1;
                    } else {
                        break;
                    }
                }
                out.push((Tok::Word(s), col));
            }
            other => return Err(err(src, col, format!("unexpected character {other:?}"))),
        }
    }
    out.push((Tok::End, b.len() + 1));
    Ok(out)
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }
    fn col(&self) -> usize {
        self.toks[self.pos].1
    }
    fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].0.clone();
        if t != Tok::End {
            self.pos += 1;
        }
        t
    }
    /// Counts one more node of the expression tree.
    fn node(&mut self) -> Result<()> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(err(
                self.src,
                self.col(),
                format!("the expression is too long (more than {MAX_NODES} terms)"),
            ));
        }
        Ok(())
    }

    /// Parses a nested expression (in parentheses or a function's argument).
    fn nested(&mut self) -> Result<Expr> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(err(
                self.src,
                self.col(),
                format!("parentheses nest deeper than {MAX_NESTING} levels"),
            ));
        }
        let e = self.union();
        self.nesting -= 1;
        e
    }

    fn expect(&mut self, t: Tok, what: &str) -> Result<()> {
        if *self.peek() == t {
            self.next();
            Ok(())
        } else {
            Err(err(self.src, self.col(), format!("expected {what}")))
        }
    }

    fn union(&mut self) -> Result<Expr> {
        let mut e = self.inter()?;
        while *self.peek() == Tok::Pipe {
            self.next();
            self.node()?;
            e = Expr::Union(Box::new(e), Box::new(self.inter()?));
        }
        Ok(e)
    }

    fn inter(&mut self) -> Result<Expr> {
        let mut e = self.range()?;
        loop {
            match self.peek() {
                Tok::Amp => {
                    self.next();
                    self.node()?;
                    e = Expr::Intersection(Box::new(e), Box::new(self.range()?));
                }
                Tok::Tilde => {
                    self.next();
                    self.node()?;
                    e = Expr::Difference(Box::new(e), Box::new(self.range()?));
                }
                _ => return Ok(e),
            }
        }
    }

    fn range(&mut self) -> Result<Expr> {
        if *self.peek() == Tok::DotDot {
            self.next();
            return Ok(Expr::Range(None, Some(Box::new(self.primary()?))));
        }
        let left = self.primary()?;
        if *self.peek() == Tok::DotDot {
            self.next();
            let right = match self.peek() {
                Tok::End | Tok::RParen | Tok::Pipe | Tok::Amp | Tok::Comma => None,
                _ => Some(Box::new(self.primary()?)),
            };
            return Ok(Expr::Range(Some(Box::new(left)), right));
        }
        Ok(left)
    }

    fn text_arg(&mut self) -> Result<String> {
        let col = self.col();
        match self.next() {
            Tok::Str(s) | Tok::Word(s) => Ok(s),
            _ => Err(err(self.src, col, "expected a text argument")),
        }
    }

    fn primary(&mut self) -> Result<Expr> {
        self.node()?;
        let col = self.col();
        match self.next() {
            Tok::LParen => {
                let e = self.nested()?;
                self.expect(Tok::RParen, "')'")?;
                Ok(e)
            }
            Tok::Tilde => Ok(Expr::Not(Box::new(self.primary()?))),
            Tok::Word(w) if *self.peek() == Tok::LParen => {
                self.next();
                let e = match w.as_str() {
                    "ancestors" => Expr::Ancestors(Box::new(self.nested()?)),
                    "descendants" => Expr::Descendants(Box::new(self.nested()?)),
                    "heads" => Expr::Heads(Box::new(self.nested()?)),
                    "roots" => Expr::Roots(Box::new(self.nested()?)),
                    "latest" => {
                        let x = self.nested()?;
                        self.expect(Tok::Comma, "',' and a count")?;
                        let ncol = self.col();
                        let n = match self.next() {
                            Tok::Word(w) => w.parse::<usize>().ok(),
                            _ => None,
                        }
                        .ok_or_else(|| err(self.src, ncol, "expected a count of commits"))?;
                        Expr::Latest(Box::new(x), n)
                    }
                    "all" => Expr::All,
                    "author" => Expr::Author(self.text_arg()?),
                    "description" => Expr::Description(self.text_arg()?),
                    "files" => Expr::Files(self.text_arg()?),
                    "date" => {
                        let (mut after, mut before) = (None, None);
                        loop {
                            let kcol = self.col();
                            let key = match self.next() {
                                Tok::Word(k) => k,
                                Tok::RParen if after.is_some() || before.is_some() => return Ok(Expr::Date { after, before }),
                                _ => return Err(err(self.src, kcol, "expected after: or before:")),
                            };
                            self.expect(Tok::Colon, "':' after the key")?;
                            let v = self.text_arg()?;
                            match key.as_str() {
                                "after" => after = Some(v),
                                "before" => before = Some(v),
                                _ => return Err(err(self.src, kcol, format!("unknown key {key:?} (use after: or before:)"))),
                            }
                            if *self.peek() == Tok::Comma {
                                self.next();
                            }
                        }
                    }
                    other => {
                        return Err(err(
                            self.src,
                            col,
                            format!("unknown function {other:?} (known: ancestors, descendants, heads, roots, latest, all, author, description, files, date)"),
                        ))
                    }
                };
                self.expect(Tok::RParen, "')'")?;
                Ok(e)
            }
            Tok::Word(w) => Ok(Expr::Symbol(w)),
            Tok::End => Err(err(self.src, col, "expected a revision")),
            t => Err(err(self.src, col, format!("unexpected {}", tok_name(&t)))),
        }
    }
}

fn tok_name(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("{w:?}"),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::LParen => "'('".into(),
        Tok::RParen => "')'".into(),
        Tok::Comma => "','".into(),
        Tok::Colon => "':'".into(),
        Tok::Pipe => "'|'".into(),
        Tok::Amp => "'&'".into(),
        Tok::Tilde => "'~'".into(),
        Tok::DotDot => "'..'".into(),
        Tok::End => "end of input".into(),
    }
}

/// Parses a revset.
pub fn parse(src: &str) -> Result<Expr> {
    // `main~1` would parse (as "main, but not the commits whose id starts with 1"), and
    // `::main` or `main^` would fail at a column: either way the writer meant git's or
    // jj's revision, so they are told its spelling here.
    if let Some(lifeos) = crate::rev::lifeos_spelling(src) {
        return Err(VcsError::ForeignRevision {
            rev: src.trim().into(),
            lifeos,
        });
    }
    let toks = lex(src)?;
    let mut p = Parser {
        src,
        toks,
        pos: 0,
        nesting: 0,
        nodes: 0,
    };
    let e = p.union()?;
    if *p.peek() != Tok::End {
        return Err(err(
            src,
            p.col(),
            format!("unexpected {}", tok_name(p.peek())),
        ));
    }
    Ok(e)
}

/// `ancestors(start)` read one commit at a time, in [`Evaluator::sorted`]'s order, as
/// long as the history is a chain. Before the first merge every commit is the only
/// child, in that set, of its one parent (another child would be both its ancestor and
/// its descendant), so each is ready next in that order; the walk yields the first merge
/// it meets and stops there, when the order beyond would need the whole set. A caller
/// that takes only the first few commits (`log -n 20`) reads those alone instead of every
/// commit visible; if it wanted more than came before the merge, [`Chain::whole`] says
/// it must evaluate the revset in full.
pub struct Chain<'r> {
    repo: &'r Repo,
    next: Option<Id>,
    merge: bool,
    error: Option<VcsError>,
}

impl<'r> Chain<'r> {
    /// The walk from `start`.
    pub fn new(repo: &'r Repo, start: Id) -> Self {
        Chain {
            repo,
            next: Some(start),
            merge: false,
            error: None,
        }
    }

    /// The revset `e` as such a walk, when it is `ancestors(r)` or `..r` of one revision
    /// that the view refers to (`@`, a branch, a tag, a head): it and its ancestors are
    /// visible, as the evaluator requires of what it lists.
    pub fn of(repo: &'r Repo, view: &View, e: &Expr) -> Result<Option<Self>> {
        let one = match e {
            Expr::Ancestors(x) => x.as_ref(),
            Expr::Range(None, Some(x)) => x.as_ref(),
            _ => return Ok(None),
        };
        let Expr::Symbol(s) = one else {
            return Ok(None);
        };
        let start = repo.resolve_rev(view, s)?;
        if view.referenced_commits().binary_search(&start).is_err() {
            return Ok(None);
        }
        Ok(Some(Chain::new(repo, start)))
    }

    /// After the walk: `Ok(true)` when what it yielded is the whole set, `Ok(false)` when
    /// it stopped at a merge, or the error that stopped it.
    pub fn whole(self) -> Result<bool> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(!self.merge),
        }
    }
}

impl Iterator for Chain<'_> {
    type Item = Id;

    fn next(&mut self) -> Option<Id> {
        let id = self.next.take()?;
        match self.repo.commit(&id) {
            Ok(c) => match c.parents.as_slice() {
                [] => {}
                [p] => self.next = Some(*p),
                _ => self.merge = true,
            },
            Err(e) => {
                self.error = Some(e);
                return None;
            }
        }
        Some(id)
    }
}

/// Evaluates revsets over the commits visible in one view.
pub struct Evaluator<'r> {
    repo: &'r Repo,
    view: &'r View,
    commits: HashMap<Id, Commit>,
}

impl<'r> Evaluator<'r> {
    /// An evaluator over every commit reachable from `view`.
    pub fn new(repo: &'r Repo, view: &'r View) -> Result<Self> {
        let commits = crate::rev::all_commits(repo, view)?.into_iter().collect();
        Ok(Evaluator {
            repo,
            view,
            commits,
        })
    }

    /// The commit `id` (must be visible).
    pub fn commit(&self, id: &Id) -> &Commit {
        &self.commits[id]
    }

    fn ancestors(&self, from: &HashSet<Id>) -> HashSet<Id> {
        let mut out = HashSet::new();
        let mut stack: Vec<Id> = from.iter().copied().collect();
        while let Some(c) = stack.pop() {
            if out.insert(c) {
                if let Some(commit) = self.commits.get(&c) {
                    stack.extend(commit.parents.iter().copied());
                }
            }
        }
        out
    }

    /// `from` and every visible commit that has one of them as an ancestor.
    fn descendants(&self, from: &HashSet<Id>) -> HashSet<Id> {
        let mut children: HashMap<Id, Vec<Id>> = HashMap::new();
        for (id, c) in &self.commits {
            for p in &c.parents {
                children.entry(*p).or_default().push(*id);
            }
        }
        let mut out = HashSet::new();
        let mut stack: Vec<Id> = from
            .iter()
            .filter(|c| self.commits.contains_key(c))
            .copied()
            .collect();
        while let Some(c) = stack.pop() {
            if out.insert(c) {
                stack.extend(children.get(&c).into_iter().flatten().copied());
            }
        }
        out
    }

    fn time(&self, w: &str) -> Result<i64> {
        let now = jiff::Timestamp::from_millisecond(crate::repo::now_ms())
            .map_err(|e| VcsError::BadTime(e.to_string()))?
            .to_zoned(jiff::tz::TimeZone::system());
        match parse_when(w, &now).map_err(VcsError::BadTime)? {
            When::Time(t) => Ok(t.div_euclid(1000)),
            When::Operation(_) => Err(VcsError::BadTime(format!(
                "date() needs a time, not an operation id: {w:?}"
            ))),
        }
    }

    /// The set of commits `e` denotes.
    pub fn eval(&self, e: &Expr) -> Result<HashSet<Id>> {
        Ok(match e {
            Expr::Symbol(s) => HashSet::from([self.repo.resolve_rev(self.view, s)?]),
            Expr::All => self.commits.keys().copied().collect(),
            Expr::Ancestors(x) => self.ancestors(&self.eval(x)?),
            Expr::Range(a, b) => {
                let upper = match b {
                    Some(b) => self.ancestors(&self.eval(b)?),
                    None => self.commits.keys().copied().collect(),
                };
                let lower = match a {
                    Some(a) => self.ancestors(&self.eval(a)?),
                    None => HashSet::new(),
                };
                upper.difference(&lower).copied().collect()
            }
            Expr::Descendants(x) => self.descendants(&self.eval(x)?),
            Expr::Heads(x) => {
                let x = self.eval(x)?;
                let parents: HashSet<Id> = x
                    .iter()
                    .flat_map(|c| self.commits[c].parents.iter().copied())
                    .collect();
                let below = self.ancestors(&parents);
                x.difference(&below).copied().collect()
            }
            Expr::Roots(x) => {
                let x = self.eval(x)?;
                let children: HashSet<Id> = self
                    .commits
                    .iter()
                    .filter(|(_, c)| c.parents.iter().any(|p| x.contains(p)))
                    .map(|(id, _)| *id)
                    .collect();
                let above = self.descendants(&children);
                x.difference(&above).copied().collect()
            }
            Expr::Latest(x, n) => {
                let mut x: Vec<Id> = self.eval(x)?.into_iter().collect();
                x.sort_by_key(|id| std::cmp::Reverse((self.commits[id].committer.time, *id)));
                x.into_iter().take(*n).collect()
            }
            Expr::Difference(a, b) => self.eval(a)?.difference(&self.eval(b)?).copied().collect(),
            Expr::Not(x) => {
                let x = self.eval(x)?;
                self.commits
                    .keys()
                    .filter(|c| !x.contains(c))
                    .copied()
                    .collect()
            }
            Expr::Union(a, b) => self.eval(a)?.union(&self.eval(b)?).copied().collect(),
            Expr::Intersection(a, b) => self
                .eval(a)?
                .intersection(&self.eval(b)?)
                .copied()
                .collect(),
            Expr::Author(t) => {
                let t = t.to_lowercase();
                self.filter(|c| {
                    format!("{} <{}>", c.author.name, c.author.email)
                        .to_lowercase()
                        .contains(&t)
                })
            }
            Expr::Description(t) => {
                let t = t.to_lowercase();
                self.filter(|c| {
                    String::from_utf8_lossy(&c.message)
                        .to_lowercase()
                        .contains(&t)
                })
            }
            Expr::Date { after, before } => {
                let lo = after.as_deref().map(|w| self.time(w)).transpose()?;
                let hi = before.as_deref().map(|w| self.time(w)).transpose()?;
                self.filter(|c| {
                    lo.is_none_or(|l| c.committer.time >= l)
                        && hi.is_none_or(|h| c.committer.time < h)
                })
            }
            Expr::Files(g) => {
                let m = Glob::new(g)
                    .map_err(|e| VcsError::BadRevision {
                        rev: g.clone(),
                        column: 1,
                        reason: e.to_string(),
                    })?
                    .compile_matcher();
                let mut out = HashSet::new();
                for (id, c) in &self.commits {
                    let parent_tree = match c.parents.first() {
                        Some(p) => Some(self.repo.commit(p)?.tree),
                        None => None,
                    };
                    let changes = self.repo.diff_trees(parent_tree.as_ref(), Some(&c.tree))?;
                    if changes.iter().any(|ch| {
                        m.is_match(std::path::Path::new(
                            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&ch.path),
                        ))
                    }) {
                        out.insert(*id);
                    }
                }
                out
            }
        })
    }

    fn filter(&self, f: impl Fn(&Commit) -> bool) -> HashSet<Id> {
        self.commits
            .iter()
            .filter(|(_, c)| f(c))
            .map(|(id, _)| *id)
            .collect()
    }

    /// Orders a set newest first: every commit before its parents, and among commits
    /// whose children are all listed, the newest (committer time, then id) first.
    pub fn sorted(&self, set: HashSet<Id>) -> Vec<Id> {
        let set: HashSet<Id> = set
            .into_iter()
            .filter(|id| self.commits.contains_key(id))
            .collect();
        let mut children: HashMap<Id, usize> = set.iter().map(|id| (*id, 0)).collect();
        for id in &set {
            for p in &self.commits[id].parents {
                if let Some(n) = children.get_mut(p) {
                    *n += 1;
                }
            }
        }
        let key = |id: &Id| (self.commits[id].committer.time, *id);
        let mut ready: std::collections::BinaryHeap<(i64, Id)> = children
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(id, _)| key(id))
            .collect();
        let mut out = Vec::with_capacity(set.len());
        while let Some((_, id)) = ready.pop() {
            out.push(id);
            for p in &self.commits[&id].parents {
                if let Some(n) = children.get_mut(p) {
                    *n -= 1;
                    if *n == 0 {
                        ready.push(key(p));
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_differences_negations_and_the_set_functions() {
        let sym = |s: &str| Box::new(Expr::Symbol(s.into()));
        assert_eq!(
            parse("main ~ v1").unwrap(),
            Expr::Difference(sym("main"), sym("v1"))
        );
        assert_eq!(
            parse("~main & all()").unwrap(),
            Expr::Intersection(Box::new(Expr::Not(sym("main"))), Box::new(Expr::All))
        );
        assert_eq!(
            parse("latest(descendants(v1), 3)").unwrap(),
            Expr::Latest(Box::new(Expr::Descendants(sym("v1"))), 3)
        );
        assert_eq!(
            parse("heads(all())").unwrap(),
            Expr::Heads(Box::new(Expr::All))
        );
        assert_eq!(parse("roots(@)").unwrap(), Expr::Roots(sym("@")));
        let e = parse("latest(@, many)").unwrap_err().to_string();
        assert!(e.contains("column 11") && e.contains("count"), "{e}");
        let e = parse("kids(@)").unwrap_err().to_string();
        assert!(e.contains("descendants"), "{e}");
    }

    #[test]
    fn parses_the_language() {
        assert_eq!(parse("@-").unwrap(), Expr::Symbol("@-".into()));
        assert_eq!(
            parse("main..trip").unwrap(),
            Expr::Range(
                Some(Box::new(Expr::Symbol("main".into()))),
                Some(Box::new(Expr::Symbol("trip".into())))
            )
        );
        assert_eq!(
            parse("..v1").unwrap(),
            Expr::Range(None, Some(Box::new(Expr::Symbol("v1".into()))))
        );
        assert_eq!(
            parse("author(\"Ann Lee\")").unwrap(),
            Expr::Author("Ann Lee".into())
        );
        assert_eq!(
            parse("date(after: 2026-11-01, before: \"3 days ago\") & files(photos/*.jpg)").unwrap(),
            Expr::Intersection(
                Box::new(Expr::Date {
                    after: Some("2026-11-01".into()),
                    before: Some("3 days ago".into())
                }),
                Box::new(Expr::Files("photos/*.jpg".into()))
            )
        );
        assert!(matches!(
            parse("ancestors(@) | description(x)").unwrap(),
            Expr::Union(..)
        ));
    }

    #[test]
    fn errors_point_at_the_bad_token() {
        let e = parse("ancestors(@").unwrap_err().to_string();
        assert!(e.contains("column 12") && e.contains("')'"), "{e}");
        let e = parse("authr(x)").unwrap_err().to_string();
        assert!(
            e.contains("column 1") && e.contains("unknown function"),
            "{e}"
        );
        let e = parse("@ &").unwrap_err().to_string();
        assert!(e.contains("column 4"), "{e}");
        let e = parse("date(since: x)").unwrap_err().to_string();
        assert!(e.contains("column 6") && e.contains("after"), "{e}");
        let e = parse("a $ b").unwrap_err().to_string();
        assert!(e.contains("column 3"), "{e}");
    }

    /// Deeply nested parentheses overflowed the stack (the parser recursed without bound).
    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        for depth in [65, 10_000, 1_000_000] {
            let src = format!("{}@{}", "(".repeat(depth), ")".repeat(depth));
            let e = parse(&src).unwrap_err().to_string();
            assert!(e.contains("nest deeper"), "{e}");
            let src = format!("{}@{}", "ancestors(".repeat(depth), ")".repeat(depth));
            assert!(parse(&src).is_err());
        }
        let ok = format!("{}@{}", "(".repeat(64), ")".repeat(64));
        assert_eq!(parse(&ok).unwrap(), Expr::Symbol("@".into()));
    }

    #[test]
    fn long_chains_are_bounded() {
        let src = vec!["@"; 100_000].join("|");
        let e = parse(&src).unwrap_err().to_string();
        assert!(e.contains("too long"), "{e}");
        assert!(parse(&vec!["@"; 400].join(" & ")).is_ok());
    }

    const VALID: &[&str] = &[
        "@-",
        "main..trip",
        "..v1",
        "author(\"Ann Lee\") & files(photos/*.jpg)",
        "date(after: 2026-11-01, before: \"3 days ago\")",
        "ancestors(@) | description(x)",
        "(a | b) & ancestors(c..d)",
    ];

    proptest::proptest! {
        /// Valid expressions with bytes changed, dropped or repeated never panic.
        #[test]
        fn mutated_expressions_never_panic(
            which in 0..VALID.len(),
            edits in proptest::collection::vec((0usize..64, 0u8..4, proptest::char::any()), 0..8),
        ) {
            let mut v: Vec<char> = VALID[which].chars().collect();
            for (pos, op, c) in edits {
                let at = pos % (v.len() + 1);
                match op {
                    0 => v.insert(at, c),
                    1 if at < v.len() => { v.remove(at); }
                    2 if at < v.len() => v[at] = c,
                    _ => {
                        let tail: Vec<char> = v[at..].to_vec();
                        v.extend(tail);
                    }
                }
            }
            let src: String = v.into_iter().collect();
            let _ = parse(&src);
        }
    }
}
