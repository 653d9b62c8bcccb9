//! `lifeos stats`: logical bytes, stored bytes, dedup ratio, chunks, packs.

use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::Context;
use crate::error::CliResult;
use crate::output::{human_bytes, print_json};
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos stats`.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Print JSON (schema lifeos.stats.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for StatsArgs {
    fn policy(&self) -> Policy {
        Policy::READ
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        stats(ctx.repo()?, self.json)
    }
}

fn stats(repo: &Repo, json: bool) -> CliResult<u8> {
    let s = repo.stats()?;
    let stored = s.store.pack_bytes + s.store.index_bytes;
    let ratio = if stored == 0 {
        0.0
    } else {
        s.history_bytes as f64 / stored as f64
    };
    if json {
        print_json(
            "lifeos.stats.v1",
            json!({
                "current_commit": s.current_commit.map(|c| c.to_hex()),
                "current_bytes": s.current_bytes,
                "commits": s.commits,
                "operations": s.operations,
                "logical_bytes": s.history_bytes,
                "unique_file_bytes": s.unique_file_bytes,
                "unique_files": s.unique_files,
                "stored_bytes": stored,
                "pack_bytes": s.store.pack_bytes,
                "index_bytes": s.store.index_bytes,
                "dedup_ratio": ratio,
                "chunks": s.store.chunks,
                "objects": s.store.objects,
                "packs": s.store.packs,
                "index_layers": s.store.index_layers,
            }),
        );
        return Ok(0);
    }
    println!(
        "current commit   {} ({})",
        s.current_commit
            .map(|c| c.short(12))
            .unwrap_or_else(|| "none".into()),
        human_bytes(s.current_bytes)
    );
    println!("commits          {}", s.commits);
    println!("operations       {}", s.operations);
    println!(
        "logical bytes    {} (every file of every commit)",
        human_bytes(s.history_bytes)
    );
    println!(
        "unique content   {} in {} distinct files",
        human_bytes(s.unique_file_bytes),
        s.unique_files
    );
    println!(
        "stored bytes     {} ({} packs, {} index)",
        human_bytes(stored),
        human_bytes(s.store.pack_bytes),
        human_bytes(s.store.index_bytes)
    );
    println!("dedup ratio      {ratio:.2}x");
    println!("chunks           {}", s.store.chunks);
    println!("other objects    {}", s.store.objects);
    println!(
        "packs            {} ({} index layers)",
        s.store.packs, s.store.index_layers
    );
    Ok(0)
}
