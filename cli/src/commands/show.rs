//! `lifeos show`: one commit, its metadata and the files it changed.

use lifeos_vcs::object::change_id_str;
use lifeos_vcs::path::display;
use lifeos_vcs::Repo;

use crate::context::{resolve_in, view_at, Context};
use crate::error::CliResult;
use crate::history_util::{change_json, commit_json};
use crate::output::{human_bytes, local_time, print_json, Style};
use crate::verb::{Policy, Verb};
use crate::AsOfArg;

/// Arguments of `lifeos show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The revision (default `@`).
    #[arg(default_value = "@")]
    pub revision: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub at: AsOfArg,
    /// Print JSON (schema lifeos.show.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for ShowArgs {
    fn policy(&self) -> Policy {
        Policy::PAGED
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        show(
            ctx.repo()?,
            &self.revision,
            &self.at,
            self.json,
            ctx.style(),
        )
    }
}

/// `lifeos show`.
fn show(repo: &Repo, rev: &str, at: &AsOfArg, json: bool, style: Style) -> CliResult<u8> {
    let view = view_at(repo, at)?;
    let (id, c) = resolve_in(repo, &view, rev)?;
    let parent_tree = match c.parents.first() {
        Some(p) => Some(repo.commit(p)?.tree),
        None => None,
    };
    let changes = repo.diff_trees(parent_tree.as_ref(), Some(&c.tree))?;
    let refs = view.refs_by_commit();
    if json {
        let mut v = commit_json(&id, &c, &refs);
        v["changes"] = changes.iter().map(change_json).collect::<Vec<_>>().into();
        print_json("lifeos.show.v1", v);
        return Ok(0);
    }
    println!("commit   {}", style.id(&id.to_hex()));
    println!("change   {}", style.change(&change_id_str(&c.change_id)));
    for p in &c.parents {
        println!("parent   {}", style.id(&p.short(12)));
    }
    if let Some(r) = refs.get(&id) {
        println!("refs     {}", style.name(&r.join(" ")));
    }
    println!(
        "author   {} <{}> {}",
        c.author.name,
        c.author.email,
        local_time(c.author.time * 1000)
    );
    println!(
        "\n    {}\n",
        String::from_utf8_lossy(&c.message)
            .trim_end()
            .replace('\n', "\n    ")
    );
    for ch in &changes {
        let size = ch
            .new
            .as_ref()
            .or(ch.old.as_ref())
            .map(|e| human_bytes(e.size))
            .unwrap_or_default();
        println!(
            "{} {}  {}",
            ch.kind.letter(),
            display(&ch.path),
            style.dim(&size)
        );
    }
    for k in &c.conflicts {
        println!("{} {}", style.bad("conflict"), display(&k.path));
    }
    Ok(0)
}
