//! `lifeos log`: commits newest first, as lines, a graph or JSON.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

use lifeos_store::Id;
use lifeos_vcs::object::change_id_str;
use lifeos_vcs::{Commit, Repo, View};
use serde_json::json;

use crate::context::{view_at, Context};
use crate::error::CliResult;
use crate::history_util::commit_json;
use crate::output::{print_json, relative_time, Style};
use crate::verb::{Policy, Verb};
use crate::AsOfArg;

/// Arguments of `lifeos log`.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Only commits that changed this path (a file or folder).
    pub path: Option<OsString>,
    /// A revision or revset, e.g. `main..trip`, `author(ann)`, `files(photos/*)`.
    #[arg(short, long)]
    pub revision: Option<String>,
    /// Show at most this many commits.
    #[arg(short = 'n', long)]
    pub limit: Option<usize>,
    /// Draw the commits' parent links as a graph, branches and merges beside each
    /// other (with `-r all()` or `--all`, every branch).
    #[arg(long, conflicts_with = "json")]
    pub graph: bool,
    /// Every visible commit (the revset `all()`).
    #[arg(long, conflicts_with = "revision")]
    pub all: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub at: AsOfArg,
    /// Print JSON (schema lifeos.log.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for LogArgs {
    fn policy(&self) -> Policy {
        Policy::PAGED
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        let LogArgs {
            path,
            revision,
            limit,
            graph,
            all,
            at,
            json,
        } = &self;
        log(
            ctx.repo()?,
            &LogRequest {
                path: path.as_deref().map(OsStrExt::as_bytes),
                revset: if *all {
                    Some("all()")
                } else {
                    revision.as_deref()
                },
                limit: *limit,
                graph: *graph,
                json: *json,
            },
            at,
            ctx.style(),
        )
    }
}

fn commit_line(
    style: Style,
    view: &View,
    refs: &HashMap<Id, Vec<String>>,
    id: &Id,
    c: &Commit,
) -> String {
    let at = if view.at_commit() == Some(*id) {
        "@ "
    } else {
        "  "
    };
    let names = refs
        .get(id)
        .map(|r| format!(" {}", style.name(&r.join(" "))))
        .unwrap_or_default();
    let conflict = if c.conflicts.is_empty() {
        String::new()
    } else {
        format!(
            " {}",
            style.bad(&format!("conflict ({})", c.conflicts.len()))
        )
    };
    format!(
        "{at}{} {}{names} {} {}{conflict}\n    {}",
        style.change(&change_id_str(&c.change_id)[..12]),
        style.id(&id.short(12)),
        c.author.name,
        style.dim(&relative_time(c.committer.time * 1000)),
        c.summary()
    )
}

/// What `lifeos log` was asked for.
struct LogRequest<'a> {
    /// Only commits that changed this path.
    path: Option<&'a [u8]>,
    /// The revset (default `ancestors(@)`).
    revset: Option<&'a str>,
    /// At most this many commits.
    limit: Option<usize>,
    /// Draw the graph.
    graph: bool,
    /// JSON instead of text.
    json: bool,
}

/// `lifeos log`.
fn log(repo: &Repo, args: &LogRequest<'_>, at: &AsOfArg, style: Style) -> CliResult<u8> {
    let LogRequest {
        path,
        revset,
        limit,
        graph,
        json,
    } = *args;
    let view = view_at(repo, at)?;
    // A folder on no commit (a lazy clone before its first checkout) shows every commit.
    let default = if view.at_commit().is_none() && !view.heads.is_empty() {
        "all()"
    } else {
        "ancestors(@)"
    };
    let expr = lifeos_vcs::revset::parse(revset.unwrap_or(default))?;
    let clean = lifeos_vcs::path::clean(path.unwrap_or_default())?;
    let commits = log_commits(repo, &view, &expr, &clean, limit)?;
    let refs = view.refs_by_commit();
    if json {
        print_json(
            "lifeos.log.v1",
            json!({"commits": commits.iter().map(|(id, c)| commit_json(id, c, &refs)).collect::<Vec<_>>()}),
        );
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    let mut columns = Graph::default();
    let shown: std::collections::HashSet<Id> = commits.iter().map(|(id, _)| *id).collect();
    for (id, c) in &commits {
        let text = commit_line(style, &view, &refs, id, c);
        if !graph {
            let _ = writeln!(out, "{text}");
            continue;
        }
        let node = if view.at_commit() == Some(*id) {
            '@'
        } else {
            '○'
        };
        let parents: Vec<Id> = c
            .parents
            .iter()
            .filter(|p| shown.contains(p))
            .copied()
            .collect();
        for line in columns.join(*id) {
            let _ = writeln!(out, "{line}");
        }
        // The commit's lines, each after its graph prefix (the node says which is @).
        for (i, t) in text.lines().enumerate() {
            let t = t.strip_prefix("@ ").unwrap_or(t).trim_start();
            let _ = writeln!(
                out,
                "{}{t}",
                columns.prefix(i == 0, *id, node, !parents.is_empty())
            );
        }
        for line in columns.advance(*id, &parents) {
            let _ = writeln!(out, "{line}");
        }
    }
    Ok(0)
}

/// The commits `log` shows, newest first, with their content. With a limit, the
/// ancestors of one revision are read one at a time while they form a chain (20 commits
/// of a 100,000-commit history without reading the rest); otherwise the revset is
/// evaluated over every visible commit.
fn log_commits(
    repo: &Repo,
    view: &lifeos_vcs::object::View,
    expr: &lifeos_vcs::revset::Expr,
    path: &[u8],
    limit: Option<usize>,
) -> CliResult<Vec<(Id, lifeos_vcs::object::Commit)>> {
    if let Some(n) = limit {
        if let Some(mut chain) = lifeos_vcs::revset::Chain::of(repo, view, expr)? {
            let ids = repo.commits_changing(&mut chain, path, Some(n))?;
            if ids.len() >= n || chain.whole()? {
                return Ok(ids
                    .into_iter()
                    .map(|id| Ok((id, repo.commit(&id)?)))
                    .collect::<lifeos_vcs::error::Result<_>>()?);
            }
        }
    }
    let ev = lifeos_vcs::revset::Evaluator::new(repo, view)?;
    let ids = repo.commits_changing(ev.sorted(ev.eval(expr)?), path, limit)?;
    Ok(ids
        .into_iter()
        .map(|id| {
            let c = ev.commit(&id).clone();
            (id, c)
        })
        .collect())
}

/// The columns of `log --graph`: each waits for a commit (a parent of one shown above).
#[derive(Default)]
struct Graph {
    columns: Vec<Option<Id>>,
}

impl Graph {
    /// The connector rows to draw before commit `id`: where several columns wait for it,
    /// they join into the leftmost (`├─╯`). Makes sure one column waits for it.
    fn join(&mut self, id: Id) -> Vec<String> {
        let waiting: Vec<usize> = (0..self.columns.len())
            .filter(|i| self.columns[*i] == Some(id))
            .collect();
        let mut rows = Vec::new();
        match waiting.as_slice() {
            [] => match self.columns.iter().position(Option::is_none) {
                Some(free) => self.columns[free] = Some(id),
                None => self.columns.push(Some(id)),
            },
            [_] => {}
            [first, rest @ ..] => {
                let last = *rest.last().expect("several columns");
                let mut row = String::new();
                for (i, c) in self.columns.iter().enumerate() {
                    let cell = if i == *first {
                        "├─"
                    } else if rest.contains(&i) && i == last {
                        "╯ "
                    } else if rest.contains(&i) {
                        "┴─"
                    } else if i > *first && i < last {
                        if c.is_some() {
                            "┼─"
                        } else {
                            "──"
                        }
                    } else if c.is_some() {
                        "│ "
                    } else {
                        "  "
                    };
                    row.push_str(cell);
                }
                rows.push(row.trim_end().to_string());
                for i in rest {
                    self.columns[*i] = None;
                }
            }
        }
        self.trim();
        rows
    }

    /// The graph part of a line of commit `id`: its node on the first line, a line down
    /// its column on the others (when a parent of it is shown below).
    fn prefix(&self, first: bool, id: Id, node: char, parents: bool) -> String {
        let mut out = String::new();
        for c in &self.columns {
            match c {
                Some(x) if *x == id && first => {
                    out.push(node);
                    out.push(' ');
                }
                Some(x) if *x == id && !parents => out.push_str("  "),
                Some(_) => out.push_str("│ "),
                None => out.push_str("  "),
            }
        }
        out.push(' ');
        out
    }

    /// After commit `id`: its column waits for its first parent (or ends), and each other
    /// parent not awaited yet gets a column of its own, drawn branching off (`├─╮`).
    fn advance(&mut self, id: Id, parents: &[Id]) -> Vec<String> {
        let col = self
            .columns
            .iter()
            .position(|c| *c == Some(id))
            .expect("join() gave the commit a column");
        self.columns[col] = parents.first().copied();
        let before = self.columns.len();
        for p in parents.iter().skip(1) {
            if !self.columns.contains(&Some(*p)) {
                self.columns.push(Some(*p));
            }
        }
        let mut rows = Vec::new();
        if self.columns.len() > before {
            let mut row = String::new();
            for (i, c) in self.columns.iter().enumerate() {
                let cell = if i == col {
                    "├─"
                } else if i + 1 == self.columns.len() {
                    "╮ "
                } else if i > col && i >= before {
                    "┬─"
                } else if i > col {
                    if c.is_some() {
                        "┼─"
                    } else {
                        "──"
                    }
                } else if c.is_some() {
                    "│ "
                } else {
                    "  "
                };
                row.push_str(cell);
            }
            rows.push(row.trim_end().to_string());
        }
        self.trim();
        rows
    }

    fn trim(&mut self) {
        while self.columns.last() == Some(&None) {
            self.columns.pop();
        }
    }
}
