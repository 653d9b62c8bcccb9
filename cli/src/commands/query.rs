//! `lifeos query`: find entities with the query language.

use lifeos_catalog::CatalogExt;
use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::Context;
use crate::entity_util::entity_json;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, Style};
use crate::verb::{Policy, Verb};
use crate::AsOfArg;

/// Arguments of `lifeos query`.
#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// TYPE [where FILTER] [order by PATH [asc|desc]] [limit N]; FILTER compares
    /// attributes (=, !=, <, <=, >, >=, contains), joins with and/or/not and
    /// parentheses, tests `has PATH`, and follows links (`project.name`).
    pub query: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub at: AsOfArg,
    /// Print JSON (schema lifeos.query.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for QueryArgs {
    fn policy(&self) -> Policy {
        Policy::READ
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        query(ctx.repo()?, &self.query, &self.at, self.json, ctx.style())
    }
}

/// Runs `lifeos query QUERY`.
fn query(repo: &Repo, q: &str, at: &AsOfArg, json: bool, style: Style) -> CliResult<u8> {
    let parsed = lifeos_entities::query::parse(q).map_err(|e| {
        let col = q[..e.at.min(q.len())].chars().count();
        CliError::new(format!("query: {}\n  {q}\n  {}^", e.message, " ".repeat(col))).hint(
            "a query is TYPE [where FILTER] [order by PATH [asc|desc]] [limit N]; text values go in double quotes",
        )
    })?;
    let state = crate::context::state_at(repo, at)?;
    let hits = repo.query_entities(&state.id, &state.view, &parsed)?;
    if json {
        print_json(
            "lifeos.query.v1",
            json!({
                "query": q,
                "count": hits.len(),
                "entities": hits.iter().map(|(o, e)| entity_json(o, e)).collect::<Vec<_>>(),
            }),
        );
        return Ok(0);
    }
    for (_, e) in &hits {
        let attrs: Vec<String> = e
            .attrs
            .iter()
            .map(|(n, v)| format!("{}={}", style.dim(n), v.render()))
            .collect();
        println!("{}  {}", style.name(&e.id), attrs.join("  "));
    }
    Ok(0)
}
