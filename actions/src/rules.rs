//! The rules file, `lifeos.rules.toml` at the top of the repository: tracked like any
//! file, read at `@`. Each `[[rule]]` maps an event to one action, rendered from the
//! event into a payload before anyone approves it. See `docs/FORMAT.md` (7.12).
//!
//! ```toml
//! [[rule]]
//! name = "file invoices"
//! on = "commit"                   # or "hook" (with hook = "pre-push", ...)
//! paths = ["invoices/**/*.pdf"]   # changed paths that fire it, one action each
//! [rule.http]
//! url = "https://books.example.org/inbox"
//! body = { file = "{path}", commit = "{commit}" }
//! timeout = "10s"
//! retries = 2
//! ```

use std::collections::BTreeMap;

use globset::{Glob, GlobMatcher};
use serde::Deserialize;
use serde_json::{json, Value as Json};
use std::sync::OnceLock;

/// Where the rules are, relative to the top of the repository.
pub const RULES_FILE: &str = "lifeos.rules.toml";

/// The events a rule can name in `on`.
pub const EVENTS: &[&str] = &[
    "commit", "hook", "branch", "tag", "entity", "ingest", "time",
];

// The git hooks a `hook` rule can name: those `lifeos git hooks install` installs.
use lifeos_vcs::layout::GIT_HOOKS as HOOKS;

use crate::template::{
    json_strings, placeholders, quoted_placeholder, render, render_json, shell_quote,
};

/// The fields an event of each kind offers to templates (`{name}`).
fn fields(event: &str) -> &'static [&'static str] {
    match event {
        "commit" => &[
            "event", "commit", "short", "path", "change", "branch", "message", "op",
        ],
        "branch" | "tag" => &["event", "name", "from", "to", "short", "op"],
        "entity" => &["event", "entity", "type", "change", "attributes", "op"],
        "ingest" => &["event", "path", "file", "kind", "match", "op"],
        "time" => &["event", "time", "op"],
        _ => &[
            "event", "hook", "args", "input", "commit", "short", "branch", "op",
        ],
    }
}

/// A problem in the rules file, with where it is (line and column from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// Line of the problem.
    pub line: usize,
    /// Column of the problem.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{RULES_FILE}:{}:{}: {}",
            self.line, self.column, self.message
        )
    }
}

/// Globs a rule names. Each is checked when the rules are read and compiled only when a
/// name or path that starts with its literal prefix is first tested: with a thousand
/// rules, a commit pays for the few that could match, not for building every matcher.
#[derive(Debug, Clone)]
pub struct Globs(Vec<(Glob, String, OnceLock<GlobMatcher>)>);

impl Globs {
    fn new(list: &[String]) -> Result<Globs, String> {
        list.iter()
            .map(|p| {
                let g = Glob::new(p).map_err(|e| format!("bad glob {p:?}: {}", e.kind()))?;
                let prefix: String = p.chars().take_while(|c| !"*?[{\\".contains(*c)).collect();
                Ok((g, prefix, OnceLock::new()))
            })
            .collect::<Result<_, _>>()
            .map(Globs)
    }

    /// The literal prefix of each glob (the text before its first wildcard).
    pub fn prefixes(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(_, p, _)| p.as_str())
    }

    /// Whether one of the globs matches `name`.
    pub fn is_match(&self, name: &str) -> bool {
        self.0.iter().any(|(g, prefix, m)| {
            name.starts_with(prefix.as_str())
                && m.get_or_init(|| g.compile_matcher()).is_match(name)
        })
    }
}

/// Whether an action may run without a person approving it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalMode {
    /// A person approves each action (the default).
    Required,
    /// The rule's actions are approved when proposed (the rules file must be trusted,
    /// as for any rule to fire).
    Auto,
}

/// What a rule does.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionSpec {
    /// Runs a command.
    Run {
        /// The command and its arguments (templates).
        argv: Vec<String>,
        /// Whether `argv` is one line for `sh -c`.
        shell: bool,
        /// Working folder, relative to the repository's top (template).
        cwd: Option<String>,
        /// How long it may run.
        timeout_ms: i64,
        /// How much of its output is kept.
        output_cap: u64,
        /// Variables of the running process's environment the command also gets (read
        /// when it runs, never stored, their values redacted from its output).
        env: Vec<String>,
    },
    /// POSTs JSON to a URL.
    Http {
        /// The URL (template).
        url: String,
        /// The JSON body (strings are templates).
        body: Json,
        /// Time allowed per attempt.
        timeout_ms: i64,
        /// Attempts after the first when the server cannot be reached or answers 5xx.
        retries: u32,
    },
    /// Creates a tag on the triggering commit.
    Tag {
        /// The tag's name (template).
        name: String,
    },
    /// Creates or moves a branch to the triggering commit.
    Branch {
        /// The branch's name (template).
        name: String,
    },
    /// Extracts text from what is not indexed yet (as `lifeos ingest`).
    Ingest,
    /// Adds an entity, or sets attributes of one.
    Entity {
        /// `add` or `set`.
        change: String,
        /// The type (`add`; template).
        kind: Option<String>,
        /// The entity (`set`; template).
        id: Option<String>,
        /// The attributes (values are templates, read as the schema types them).
        attrs: BTreeMap<String, String>,
    },
    /// Brings a path back as it was at a moment (a new commit, as `lifeos restore`).
    Restore {
        /// The path (template).
        path: String,
        /// When (as `--at` reads it: `yesterday`, `2026-11-01`, `2 hours ago`), resolved to
        /// a commit when the action is proposed.
        at: String,
    },
}

impl ActionSpec {
    /// The action's kind name (`run`, `http`, `tag`).
    pub fn kind(&self) -> &'static str {
        match self {
            ActionSpec::Run { .. } => "run",
            ActionSpec::Http { .. } => "http",
            ActionSpec::Tag { .. } => "tag",
            ActionSpec::Branch { .. } => "branch",
            ActionSpec::Restore { .. } => "restore",
            ActionSpec::Entity { .. } => "entity",
            ActionSpec::Ingest => "ingest",
        }
    }

    /// Whether it only writes new operations (which `undo` and `rollback` revert), so a
    /// rule may approve it automatically.
    pub fn is_internal(&self) -> bool {
        !matches!(self, ActionSpec::Run { .. } | ActionSpec::Http { .. })
    }

    /// Its templates.
    fn templates(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        match self {
            ActionSpec::Run { argv, cwd, .. } => {
                out.extend(argv.iter().map(String::as_str));
                out.extend(cwd.as_deref());
            }
            ActionSpec::Http { url, body, .. } => {
                out.push(url);
                json_strings(body, &mut out);
            }
            ActionSpec::Tag { name } | ActionSpec::Branch { name } => out.push(name),
            ActionSpec::Restore { path, at } => {
                out.push(path);
                out.push(at);
            }
            ActionSpec::Ingest => {}
            ActionSpec::Entity {
                kind, id, attrs, ..
            } => {
                out.extend(kind.as_deref());
                out.extend(id.as_deref());
                out.extend(attrs.values().map(String::as_str));
            }
        }
        out
    }
}

/// One rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Its name (unique in the file).
    pub name: String,
    /// The event it fires on (one of [`EVENTS`]).
    pub on: String,
    /// For `commit`: the paths whose change fires it.
    pub paths: Option<Globs>,
    /// For `hook`: the hook.
    pub hook: Option<String>,
    /// For `branch` and `tag`: the names that fire it (all when absent).
    pub names: Option<Globs>,
    /// For `entity`: the types that fire it (all when empty).
    pub types: Vec<String>,
    /// For `entity`: the attributes whose change fires it (any when empty).
    pub attributes: Vec<String>,
    /// For `entity`: `created`, `changed`, `removed`, `linked` (all when empty).
    pub changes: Vec<String>,
    /// For `ingest`: the extractors whose results fire it (all when empty).
    pub kinds: Vec<String>,
    /// For `ingest`: a pattern the extracted text must match (`phrase` is a literal one).
    pub text: Option<regex::Regex>,
    /// For `time`: when it fires (while `lifeos watch` runs).
    pub schedule: Option<crate::schedule::Schedule>,
    /// Whether its actions need approval.
    pub approval: ApprovalMode,
    /// What it does.
    pub action: ActionSpec,
    /// What undoes it, for `lifeos rollback` of an action outside the repository.
    pub compensate: Option<ActionSpec>,
    /// Where it starts in the file (line from 1).
    pub line: usize,
}

/// The rules of one version of the rules file.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// The rules, in file order.
    pub rules: Vec<Rule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    rule: Vec<toml::Spanned<RawRule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: String,
    on: String,
    #[serde(default)]
    paths: Vec<String>,
    hook: Option<String>,
    names: Option<Vec<String>>,
    #[serde(default)]
    types: Vec<String>,
    #[serde(default)]
    attributes: Vec<String>,
    #[serde(default)]
    changes: Vec<String>,
    #[serde(default)]
    kinds: Vec<String>,
    #[serde(rename = "match")]
    pattern: Option<String>,
    phrase: Option<String>,
    every: Option<String>,
    at: Option<String>,
    approval: Option<String>,
    run: Option<RawRun>,
    http: Option<RawHttp>,
    tag: Option<RawName>,
    branch: Option<RawName>,
    restore: Option<RawRestore>,
    entity: Option<RawEntity>,
    ingest: Option<RawIngest>,
    compensate: Option<RawAction>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAction {
    run: Option<RawRun>,
    http: Option<RawHttp>,
    tag: Option<RawName>,
    branch: Option<RawName>,
    restore: Option<RawRestore>,
    entity: Option<RawEntity>,
    ingest: Option<RawIngest>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIngest {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntity {
    change: String,
    #[serde(rename = "type")]
    kind: Option<String>,
    id: Option<String>,
    #[serde(default)]
    attrs: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    argv: Vec<String>,
    #[serde(default)]
    shell: bool,
    cwd: Option<String>,
    timeout: Option<String>,
    output_cap: Option<u64>,
    #[serde(default)]
    env: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    url: String,
    #[serde(default)]
    body: Option<toml::Value>,
    timeout: Option<String>,
    retries: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawName {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRestore {
    path: String,
    at: String,
}

/// Line and column (from 1) of byte `offset` of `text`.
/// `starts`: the offset of every line's start (from [`line_starts`]). The column counts
/// bytes.
fn line_col(starts: &[usize], offset: usize) -> (usize, usize) {
    let line = starts.partition_point(|s| *s <= offset).max(1);
    (line, offset - starts[line - 1] + 1)
}

/// The offset of every line's start in `text`, for [`line_col`] (a rules file of a
/// thousand rules would otherwise be scanned once per rule).
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The offset in `text` of the first line of `region` that sets `key` (`key = ...`, in
/// the rule's table or one of its sub-tables), or of the first `needle` in it when `key`
/// is `None`.
fn find_in(
    text: &str,
    region: std::ops::Range<usize>,
    key: Option<&str>,
    needle: &str,
) -> Option<usize> {
    let part = text.get(region.clone())?;
    let Some(key) = key else {
        return part.find(needle).map(|i| region.start + i);
    };
    let mut at = region.start;
    for line in part.split_inclusive('\n') {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix(key) {
            if rest.trim_start().starts_with('=') {
                return Some(at + line.len() - t.len());
            }
        }
        at += line.len();
    }
    None
}

/// The units of a duration, largest first, with their length in milliseconds.
const DURATION_UNITS: [(&str, i64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Reads a duration such as `500ms`, `10s`, `2m`, `1h` or `1d`.
pub fn parse_duration(text: &str) -> Option<i64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = t.split_at(split);
    let n: i64 = n.parse().ok()?;
    let unit = match unit.trim() {
        "min" => "m",
        u => u,
    };
    let ms = DURATION_UNITS.iter().find(|(u, _)| *u == unit)?.1;
    n.checked_mul(ms).filter(|v| *v > 0)
}

/// A duration as [`parse_duration`] reads it back: in the largest unit that divides it
/// exactly (`1d`, `90m`, `1500ms`).
pub fn format_duration(ms: i64) -> String {
    DURATION_UNITS
        .iter()
        .find(|(_, size)| ms != 0 && ms % size == 0)
        .map(|(unit, size)| format!("{}{unit}", ms / size))
        .unwrap_or_else(|| format!("{ms}ms"))
}

/// Converts a TOML value to JSON (dates become their text).
fn toml_to_json(v: toml::Value) -> Json {
    match v {
        toml::Value::String(s) => Json::String(s),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) => json!(f),
        toml::Value::Boolean(b) => Json::Bool(b),
        toml::Value::Datetime(d) => Json::String(d.to_string()),
        toml::Value::Array(a) => Json::Array(a.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            Json::Object(t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
        }
    }
}

/// Reads a duration option (`None`: the default).
fn duration(t: Option<String>, default: i64) -> Result<i64, String> {
    match t {
        None => Ok(default),
        Some(t) => parse_duration(&t)
            .ok_or_else(|| format!("timeout {t:?} is not a duration such as 500ms, 10s, 2m or 1h")),
    }
}

/// The one action a table names (`None`: none).
/// An error names the key at fault when there is one.
fn action_of(raw: RawAction) -> Result<Option<ActionSpec>, (Option<&'static str>, String)> {
    let RawAction {
        run,
        http,
        tag,
        branch,
        restore,
        entity,
        ingest,
    } = raw;
    let given = [
        run.is_some(),
        http.is_some(),
        tag.is_some(),
        branch.is_some(),
        restore.is_some(),
        entity.is_some(),
        ingest.is_some(),
    ];
    if given.iter().filter(|g| **g).count() > 1 {
        return Err((None, "a rule has one action, not several".into()));
    }
    if let Some(run) = run {
        if run.argv.is_empty() || run.argv[0].is_empty() {
            return Err((Some("argv"), "run.argv needs a command".into()));
        }
        if run.shell && run.argv.len() != 1 {
            return Err((
                Some("argv"),
                "with shell = true, argv is one command line for sh -c".into(),
            ));
        }
        if let Some(p) = run
            .argv
            .first()
            .filter(|_| run.shell)
            .and_then(|l| quoted_placeholder(l))
        {
            return Err((
                Some("argv"),
                format!(
                    "{{{p}}} stands inside quotes in a shell = true command line: lifeos quotes every value as one word itself, and a value inside the line's own quotes would be read by the shell (a file named `$(...)` would run); remove the quotes around it"
                ),
            ));
        }
        if let Some(bad) = run.env.iter().find(|n| {
            n.is_empty()
                || !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                || n.starts_with("LIFEOS_")
        }) {
            return Err((
                Some("env"),
                format!(
                    "run.env names variables (letters, digits, `_`; not LIFEOS_*), not {bad:?}"
                ),
            ));
        }
        return Ok(Some(ActionSpec::Run {
            argv: run.argv,
            shell: run.shell,
            cwd: run.cwd,
            timeout_ms: duration(run.timeout, 60_000).map_err(|m| (Some("timeout"), m))?,
            output_cap: run.output_cap.unwrap_or(64 << 10),
            env: run.env,
        }));
    }
    if let Some(http) = http {
        if !(http.url.starts_with("http://") || http.url.starts_with("https://")) {
            return Err((
                Some("url"),
                format!(
                    "http.url {:?} must start with http:// or https://",
                    http.url
                ),
            ));
        }
        return Ok(Some(ActionSpec::Http {
            url: http.url,
            body: http.body.map(toml_to_json).unwrap_or_else(|| json!({})),
            timeout_ms: duration(http.timeout, 10_000).map_err(|m| (Some("timeout"), m))?,
            retries: http.retries.unwrap_or(2).min(10),
        }));
    }
    if ingest.is_some() {
        return Ok(Some(ActionSpec::Ingest));
    }
    if let Some(e) = entity {
        match (e.change.as_str(), &e.kind, &e.id) {
            ("add", Some(_), None) | ("set", None, Some(_)) => {}
            ("add", _, _) => {
                return Err((
                    Some("change"),
                    "entity change = \"add\" needs type (and no id)".into(),
                ))
            }
            ("set", _, _) => {
                return Err((
                    Some("change"),
                    "entity change = \"set\" needs id (and no type)".into(),
                ))
            }
            (other, _, _) => {
                return Err((
                    Some("change"),
                    format!("entity change is \"add\" or \"set\", not {other:?}"),
                ))
            }
        }
        return Ok(Some(ActionSpec::Entity {
            change: e.change,
            kind: e.kind,
            id: e.id,
            attrs: e.attrs,
        }));
    }
    Ok(tag
        .map(|t| ActionSpec::Tag { name: t.name })
        .or(branch.map(|b| ActionSpec::Branch { name: b.name }))
        .or(restore.map(|r| ActionSpec::Restore {
            path: r.path,
            at: r.at,
        })))
}

impl Rules {
    /// Parses a rules file; every problem names its line and column.
    pub fn parse(text: &str) -> Result<Rules, RuleError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let (line, column) = e
                .span()
                .map_or((1, 1), |s| line_col(&line_starts(text), s.start));
            RuleError {
                line,
                column,
                message: e.message().to_string(),
            }
        })?;
        let mut rules: Vec<Rule> = Vec::new();
        let starts = line_starts(text);
        let mut names = std::collections::HashSet::new();
        // Each rule's text runs to the next rule's start.
        let ends: Vec<usize> = raw
            .rule
            .iter()
            .skip(1)
            .map(|r| r.span().start)
            .chain([text.len()])
            .collect();
        for (spanned, end) in raw.rule.into_iter().zip(ends) {
            let region = spanned.span().start..end;
            let (line, column) = line_col(&starts, region.start);
            let err = |message: String| RuleError {
                line,
                column,
                message,
            };
            let r = spanned.into_inner();
            let name = r.name.trim().to_string();
            if name.is_empty() {
                return Err(err("a rule needs a name".into()));
            }
            if !names.insert(name.clone()) {
                return Err(err(format!("a second rule named {name:?}")));
            }
            let at = |m: String| err(format!("rule {name:?}: {m}"));
            // A problem with one key (or one piece of text) points at it.
            let at_found = |key: Option<&str>, needle: &str, m: String| {
                let (line, column) = find_in(text, region.clone(), key, needle)
                    .map_or((line, column), |o| line_col(&starts, o));
                RuleError {
                    line,
                    column,
                    message: format!("rule {name:?}: {m}"),
                }
            };
            let at_key = |key: &str, m: String| at_found(Some(key), "", m);
            if !EVENTS.contains(&r.on.as_str()) {
                return Err(at_key(
                    "on",
                    format!("unknown event {:?}; events are {}", r.on, EVENTS.join(", ")),
                ));
            }
            let globs = |key: &str, list: &[String]| Globs::new(list).map_err(|m| at_key(key, m));
            let on = r.on.as_str();
            let paths = match (on, r.paths.is_empty()) {
                ("commit", true) => {
                    return Err(at(
                        "a commit rule needs paths = [\"glob\", ...] (\"**\" for any)".into(),
                    ))
                }
                ("commit" | "ingest", false) => Some(globs("paths", &r.paths)?),
                (_, false) => {
                    return Err(at_key(
                        "paths",
                        "paths applies to commit and ingest rules only".into(),
                    ))
                }
                (_, true) => None,
            };
            let only = |key: &str, given: bool, events: &[&str]| {
                if given && !events.contains(&on) {
                    Err(at_key(
                        key,
                        format!("{key} applies to {} rules only", events.join(" and ")),
                    ))
                } else {
                    Ok(())
                }
            };
            only("names", r.names.is_some(), &["branch", "tag"])?;
            only("types", !r.types.is_empty(), &["entity"])?;
            only("attributes", !r.attributes.is_empty(), &["entity"])?;
            only("changes", !r.changes.is_empty(), &["entity"])?;
            only("kinds", !r.kinds.is_empty(), &["ingest"])?;
            only("match", r.pattern.is_some(), &["ingest"])?;
            only("phrase", r.phrase.is_some(), &["ingest"])?;
            only("every", r.every.is_some(), &["time"])?;
            only("at", r.at.is_some(), &["time"])?;
            let schedule = match (on, &r.every) {
                ("time", None) => {
                    return Err(at(
                        "a time rule needs every = \"1d\" (and at = \"09:00\" if you like)".into(),
                    ))
                }
                ("time", Some(every)) => {
                    let every_ms = parse_duration(every).ok_or_else(|| {
                        at_key(
                            "every",
                            format!("every {every:?} is not a duration such as 30m, 1h or 1d"),
                        )
                    })?;
                    let at_min = match &r.at {
                        None => None,
                        Some(t) => {
                            let hm = t
                                .split_once(':')
                                .and_then(|(h, m)| {
                                    Some((h.parse::<i64>().ok()?, m.parse::<i64>().ok()?))
                                })
                                .filter(|(h, m)| (0..24).contains(h) && (0..60).contains(m))
                                .ok_or_else(|| {
                                    at_key(
                                        "at",
                                        format!("at {t:?} is not a time of day such as 09:00"),
                                    )
                                })?;
                            if every_ms % 86_400_000 != 0 {
                                return Err(at_key(
                                    "every",
                                    format!("with at, every is whole days (1d, 7d), not {every:?}"),
                                ));
                            }
                            Some(hm.0 * 60 + hm.1)
                        }
                    };
                    Some(crate::schedule::Schedule { every_ms, at_min })
                }
                _ => None,
            };
            let names = r.names.as_deref().map(|n| globs("names", n)).transpose()?;
            if let Some(c) = r.changes.iter().find(|c| {
                !["created", "changed", "removed", "linked", "unlinked"].contains(&c.as_str())
            }) {
                return Err(at_key(
                    "changes",
                    format!("unknown change {c:?}; changes are created, changed, removed, linked, unlinked"),
                ));
            }
            let text = match (r.pattern, r.phrase) {
                (Some(_), Some(_)) => {
                    return Err(at_key("phrase", "give match or phrase, not both".into()))
                }
                (Some(p), None) => Some(
                    regex::RegexBuilder::new(&p)
                        .size_limit(1 << 20)
                        .build()
                        .map_err(|e| {
                            at_key("match", format!("match {p:?} is not a valid pattern: {e}"))
                        })?,
                ),
                (None, Some(p)) => Some(
                    regex::RegexBuilder::new(&regex::escape(&p))
                        .case_insensitive(true)
                        .build()
                        .map_err(|e| at_key("phrase", format!("phrase {p:?}: {e}")))?,
                ),
                (None, None) => None,
            };
            let hook = match (r.on.as_str(), r.hook) {
                ("hook", Some(h)) if HOOKS.contains(&h.as_str()) => Some(h),
                ("hook", Some(h)) => {
                    return Err(at_key(
                        "hook",
                        format!("unknown hook {h:?}; hooks are {}", HOOKS.join(", ")),
                    ))
                }
                ("hook", None) => return Err(at("a hook rule needs hook = \"...\"".into())),
                (_, Some(_)) => {
                    return Err(at_key("hook", "hook applies to hook rules only".into()))
                }
                (_, None) => None,
            };
            let approval = match r.approval.as_deref() {
                None | Some("required") => ApprovalMode::Required,
                Some("auto") => ApprovalMode::Auto,
                Some(other) => {
                    return Err(at_key(
                        "approval",
                        format!("approval is \"required\" or \"auto\", not {other:?}"),
                    ))
                }
            };
            let action = RawAction {
                run: r.run,
                http: r.http,
                tag: r.tag,
                branch: r.branch,
                restore: r.restore,
                entity: r.entity,
                ingest: r.ingest,
            };
            let action = action_of(action)
                .map_err(|(key, m)| at_found(key, "", m))?
                .ok_or_else(|| {
                at("a rule needs an action: [rule.run], [rule.http], [rule.tag], [rule.branch], [rule.restore], [rule.entity] or [rule.ingest]".into())
            })?;
            let compensate = match r.compensate {
                None => None,
                Some(c) => {
                    let c = action_of(c)
                        .map_err(|(key, m)| at_found(key, "", format!("compensate: {m}")))?;
                    match c {
                        Some(c) if !c.is_internal() => Some(c),
                        Some(_) => {
                            return Err(at("compensate is a run or http action (what an internal action did, rollback undoes by itself)".into()))
                        }
                        None => return Err(at("compensate needs [rule.compensate.run] or [rule.compensate.http]".into())),
                    }
                }
            };
            if compensate.is_some() && action.is_internal() {
                return Err(at(
                    "compensate is for run and http actions; rollback undoes an internal one by itself".into(),
                ));
            }
            // Every placeholder must be a field the event has.
            let known = fields(&r.on);
            let mut templates = action.templates();
            if let Some(c) = &compensate {
                templates.extend(c.templates());
            }
            for t in templates {
                for p in placeholders(t).map_err(|m| at_found(None, t, m))? {
                    if !known.contains(&p) {
                        return Err(at_found(
                            None,
                            &format!("{{{p}}}"),
                            format!(
                                "unknown field {{{p}}}; a {} event has {}",
                                r.on,
                                known
                                    .iter()
                                    .map(|f| format!("{{{f}}}"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        ));
                    }
                }
            }
            rules.push(Rule {
                name,
                on: r.on,
                paths,
                hook,
                names,
                types: r.types,
                attributes: r.attributes,
                changes: r.changes,
                kinds: r.kinds,
                text,
                schedule,
                approval,
                action,
                compensate,
                line,
            });
        }
        Ok(Rules { rules })
    }
}

impl Rule {
    /// The payload this rule's action has for an event with `fields`: everything that
    /// will run, as JSON (rendered now, so what is approved is what runs). `event` is the
    /// event as JSON (a command gets it on stdin).
    pub fn payload(&self, fields: &BTreeMap<String, String>, event: &Json) -> Json {
        self.action.payload(fields, event)
    }
}

impl ActionSpec {
    /// The payload of this action for an event with `fields` (see [`Rule::payload`]); a
    /// `restore` names its moment as text here, resolved to a commit by the caller. A
    /// path starting with `-` is given as `./-...` (the same file, from the repository's
    /// top), so a file's name never becomes a command's option.
    pub fn payload(&self, fields: &BTreeMap<String, String>, event: &Json) -> Json {
        let guarded;
        let fields = match fields.get("path") {
            Some(p) if p.starts_with('-') => {
                let mut f = fields.clone();
                f.insert("path".into(), format!("./{p}"));
                guarded = f;
                &guarded
            }
            _ => fields,
        };
        match self {
            ActionSpec::Run {
                argv,
                shell,
                cwd,
                timeout_ms,
                output_cap,
                env,
            } => {
                let argv = if *shell {
                    // Each value goes into the command line as one quoted word, so text
                    // from a file, a commit message or a transcript is never shell syntax.
                    let quoted: BTreeMap<String, String> = fields
                        .iter()
                        .map(|(k, v)| (k.clone(), shell_quote(v)))
                        .collect();
                    vec![
                        "sh".to_string(),
                        "-c".to_string(),
                        render(&argv[0], &quoted),
                    ]
                } else {
                    argv.iter().map(|a| render(a, fields)).collect()
                };
                let mut p = json!({
                    "kind": "run",
                    "argv": argv,
                    "cwd": cwd.as_deref().map(|c| render(c, fields)).unwrap_or_else(|| ".".into()),
                    "timeout_ms": timeout_ms,
                    "output_cap": output_cap,
                    "stdin": event,
                });
                // Only when named: the payloads (and hashes) of other rules stay as they were.
                if !env.is_empty() {
                    p["env"] = json!(env);
                }
                p
            }
            ActionSpec::Http {
                url,
                body,
                timeout_ms,
                retries,
            } => json!({
                "kind": "http",
                "url": render(url, fields),
                "body": render_json(body, fields),
                "timeout_ms": timeout_ms,
                "retries": retries,
            }),
            // The event's commit, or where a moved branch or tag now points.
            ActionSpec::Tag { name } | ActionSpec::Branch { name } => json!({
                "kind": self.kind(),
                "name": render(name, fields),
                "commit": fields.get("commit").or_else(|| fields.get("to")).cloned().unwrap_or_default(),
            }),
            ActionSpec::Restore { path, at } => json!({
                "kind": "restore",
                "path": render(path, fields),
                "at": render(at, fields),
            }),
            ActionSpec::Ingest => json!({"kind": "ingest"}),
            ActionSpec::Entity {
                change,
                kind,
                id,
                attrs,
            } => {
                let attrs: serde_json::Map<String, Json> = attrs
                    .iter()
                    .map(|(k, v)| (k.clone(), Json::String(render(v, fields))))
                    .collect();
                match change.as_str() {
                    "add" => json!({
                        "kind": "entity", "change": "add",
                        "type": render(kind.as_deref().unwrap_or_default(), fields), "attrs": attrs,
                    }),
                    _ => json!({
                        "kind": "entity", "change": "set",
                        "id": render(id.as_deref().unwrap_or_default(), fields), "attrs": attrs,
                    }),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Durations print as `--ttl` takes them, in the largest unit that is exact, and read
    /// back to the same length.
    #[test]
    fn durations_read_as_ttl_takes_them() {
        for (ms, text) in [
            (86_400_000, "1d"),
            (7_200_000, "2h"),
            (5_400_000, "90m"),
            (90_000, "90s"),
            (1_500, "1500ms"),
            (0, "0ms"),
        ] {
            assert_eq!(format_duration(ms), text, "{ms}");
            if ms > 0 {
                assert_eq!(parse_duration(text), Some(ms), "{text}");
            }
        }
        assert_eq!(parse_duration("3min"), Some(180_000));
        assert_eq!(parse_duration("3 weeks"), None);
    }

    #[test]
    fn rules_parse_and_errors_name_line_and_column() {
        let text = "[[rule]]\nname = \"invoices\"\non = \"commit\"\npaths = [\"invoices/*.pdf\"]\n[rule.http]\nurl = \"http://127.0.0.1:9/x\"\nbody = { file = \"{path}\", n = 2 }\n\n[[rule]]\nname = \"tag pushes\"\non = \"hook\"\nhook = \"pre-push\"\napproval = \"auto\"\n[rule.tag]\nname = \"pushed-{short}\"\n";
        let rules = Rules::parse(text).unwrap();
        assert_eq!(rules.rules.len(), 2);
        assert_eq!(rules.rules[1].line, 9);
        assert!(rules.rules[0]
            .paths
            .as_ref()
            .unwrap()
            .is_match("invoices/a.pdf"));
        let fields: BTreeMap<String, String> =
            [("path".to_string(), "invoices/a.pdf".to_string())].into();
        let p = rules.rules[0].payload(&fields, &json!({}));
        assert_eq!(p["body"], json!({"file": "invoices/a.pdf", "n": 2}));

        let bad = |t: &str| Rules::parse(t).unwrap_err();
        let e = bad("[[rule]]\nname = \"x\"\non = \"commit\"\npaths = [\"*\"]\n[rule.run]\nargv = [\"echo\", \"{nope}\"]\n");
        assert_eq!((e.line, e.column), (6, 18), "{e}");
        assert!(e.message.contains("unknown field {nope}"), "{e}");
        let e = bad("[[rule]]\nname = \"x\"\non = \"sometimes\"\n[rule.tag]\nname = \"t\"\n");
        assert!(e.message.contains("unknown event \"sometimes\""), "{e}");
        assert_eq!((e.line, e.column), (3, 1), "{e}");
        // A second rule's problem points into that rule, at the key.
        let e = bad("[[rule]]\nname = \"a\"\non = \"tag\"\n[rule.tag]\nname = \"t\"\n\n[[rule]]\nname = \"b\"\non = \"commit\"\npaths = [\"*\"]\n  approval = \"sometimes\"\n[rule.tag]\nname = \"t\"\n");
        assert_eq!((e.line, e.column), (11, 3), "{e}");
        assert!(e.message.contains("rule \"b\": approval is"), "{e}");
        let e = bad("[[rule]]\nname = \"x\"\non = \"commit\"\npaths = [\"*\"]\ncolour = 1\n");
        assert_eq!(e.line, 5, "{e}");
        assert!(e.message.contains("colour"), "{e}");
        let e = bad("[[rule]]\nname = \"x\"\non = \"commit\"\npaths = [\"*\"]\n[rule.run]\nargv = [\"sleep\"]\ntimeout = \"soon\"\n");
        assert!(e.message.contains("not a duration"), "{e}");
        let e = bad("[[rule]]\nname = \"x\"\non = \"hook\"\nhook = \"post-commit\"\n");
        assert!(e.message.contains("needs an action"), "{e}");
        // Problems inside an action's table point at the key.
        let e = bad(
            "[[rule]]\nname = \"x\"\non = \"commit\"\npaths = [\"*\"]\n[rule.run]\n  argv = []\n",
        );
        assert_eq!(
            (e.line, e.column, e.message.contains("needs a command")),
            (6, 3, true),
            "{e}"
        );
        let e = bad("[[rule]]\nname = \"x\"\non = \"commit\"\npaths = [\"*\"]\n[rule.http]\nbody = {}\nurl = \"ftp://x\"\n");
        assert_eq!((e.line, e.column), (7, 1), "{e}");
        let e = bad("[[rule]]\nname = \"x\"\non = \"entity\"\n[rule.entity]\nchange = \"drop\"\nid = \"task:1\"\n");
        assert_eq!(e.line, 5, "{e}");
    }

    #[test]
    fn shell_commands_get_each_value_as_one_quoted_word() {
        let rules = Rules::parse("[[rule]]\nname = \"x\"\non = \"commit\"\npaths = [\"*\"]\n[rule.run]\nargv = [\"echo {message} > out\"]\nshell = true\n").unwrap();
        let fields: BTreeMap<String, String> = [(
            "message".to_string(),
            "it's done; rm -rf / $(id)".to_string(),
        )]
        .into();
        let p = rules.rules[0].payload(&fields, &json!({}));
        let line = p["argv"][2].as_str().unwrap();
        assert_eq!(line, r"echo 'it'\''s done; rm -rf / $(id)' > out");
        let out = std::process::Command::new("sh")
            .args(["-c", &line.replace(" > out", "")])
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"it's done; rm -rf / $(id)\n");
    }

    #[test]
    fn templates_render_fields_and_literal_braces() {
        let f: BTreeMap<String, String> = [("a".to_string(), "1".to_string())].into();
        assert_eq!(render("x{a}y{{z}}", &f), "x1y{z}");
        assert_eq!(placeholders("{a}{{b}}{c}").unwrap(), ["a", "c"]);
        assert!(placeholders("{a").is_err());
        assert_eq!(parse_duration("2h"), Some(7_200_000));
        assert_eq!(parse_duration("500ms"), Some(500));
        assert_eq!(parse_duration("0s"), None);
    }

    /// M2: a placeholder inside the line's own quotes would be outside lifeos's quoting
    /// (`"{path}"` with a file named `$(id)` runs it): refused when the rules are read.
    #[test]
    fn a_placeholder_inside_quotes_of_a_shell_line_is_refused() {
        for (line, bad) in [
            (r#"echo "new file: {path}" >> inbox.log"#, Some("path")),
            ("echo '{path}'", Some("path")),
            (r#"echo "a" {path} 'b'"#, None),
            (r#"echo "{{literal}}" {path}"#, None),
            (r#"echo \"{path}"#, None),
            (r#"echo "x\"{message}\"y""#, Some("message")),
            ("printf %s {path} | grep '^x$'", None),
        ] {
            assert_eq!(quoted_placeholder(line), bad, "{line}");
            let text = format!(
                "[[rule]]\nname = \"x\"\non = \"commit\"\npaths = [\"*\"]\n[rule.run]\nargv = [{}]\nshell = true\n",
                toml::Value::String(line.to_string())
            );
            match (Rules::parse(&text), bad) {
                (Ok(_), None) => {}
                (Err(e), Some(p)) => {
                    let e = e.to_string();
                    assert!(
                        e.contains(&format!("{{{p}}} stands inside quotes"))
                            && e.contains("lifeos.rules.toml:6:"),
                        "{e}"
                    );
                }
                (r, _) => panic!("{line}: {:?}", r.map(|_| ())),
            }
        }
    }
}
