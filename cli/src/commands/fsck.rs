//! `lifeos fsck`: verify every pack, chunk and object, and that history is complete; or a
//! remote.

use lifeos_vcs::Repo;
use serde_json::json;

use crate::context::Context;
use crate::error::CliResult;
use crate::output::{bar, human_bytes, print_json, Style};
use crate::remote_util::{open_remote, PassArgs, Scratch};
use crate::verb::{Policy, Verb};

/// Arguments of `lifeos fsck`.
#[derive(Debug, clap::Args)]
pub struct FsckArgs {
    /// Check this remote instead: its indexes, packs and heads, and that everything
    /// its heads reach is on it.
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    /// With --remote: also download every object and check it against its id.
    #[arg(long, requires = "remote")]
    pub read_data: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub pass: PassArgs,
    /// Print JSON (schema lifeos.fsck.v1, or lifeos.fsck_remote.v1 with --remote).
    #[arg(long)]
    pub json: bool,
}

impl Verb for FsckArgs {
    fn policy(&self) -> Policy {
        Policy::READ
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        let repo = ctx.repo()?;
        match &self.remote {
            Some(name) => fsck_remote(repo, name, self.read_data, self.pass, self.json),
            None => fsck(repo, self.json, ctx.style()),
        }
    }
}

fn problem_json(p: &lifeos_store::fsck::Problem) -> serde_json::Value {
    json!({
        "code": p.code,
        "object": p.object.map(|o| o.to_hex()),
        "pack": p.pack,
        "file": p.file.as_ref().map(|f| f.display().to_string()),
        "detail": p.detail,
    })
}

fn fsck(repo: &Repo, json: bool, style: Style) -> CliResult<u8> {
    let total = repo.store().stats()?.pack_bytes;
    let pb = bar(total, "verifying");
    let r = repo.fsck(&|n| pb.inc(n))?;
    pb.finish_and_clear();
    let code = u8::from(!r.problems.is_empty());
    if json {
        print_json(
            "lifeos.fsck.v1",
            json!({
                "ok": r.problems.is_empty(),
                "packs": r.packs, "entries": r.entries, "bytes": r.bytes,
                "operations": r.operations, "commits": r.commits, "trees": r.trees, "files": r.files,
                "unreachable": r.unreachable,
                "problems": r.problems.iter().map(problem_json).collect::<Vec<_>>(),
            }),
        );
        return Ok(code);
    }
    println!(
        "checked {} packs, {} entries ({}); {} operations, {} commits, {} trees, {} files",
        r.packs,
        r.entries,
        human_bytes(r.bytes),
        r.operations,
        r.commits,
        r.trees,
        r.files
    );
    if r.unreachable > 0 {
        // Not damage, and not only what an interrupted command left: a command may write
        // an object it then replaces (an amend did). gc removes such entries only from the
        // packs it rewrites, so the line says that rather than promising their removal.
        let (n, them) = if r.unreachable == 1 {
            ("entry", "it")
        } else {
            ("entries", "them")
        };
        println!(
            "{} unreachable {n}: data no operation refers to (an interrupted or a replaced write); `lifeos gc` removes {them} when it rewrites {} pack",
            r.unreachable,
            if r.unreachable == 1 { "its" } else { "their" }
        );
    }
    if r.problems.is_empty() {
        println!("no problems found");
    } else {
        for p in &r.problems {
            let mut line = format!("{}: ", style.bad(p.code));
            if let Some(o) = p.object {
                line += &format!("object {} ", o);
            }
            if let Some(pk) = &p.pack {
                line += &format!("in pack {pk} ");
            }
            line += &format!("- {}", p.detail);
            println!("{line}");
        }
        eprintln!("error: {} problems found", r.problems.len());
    }
    Ok(code)
}

/// `lifeos fsck --remote NAME [--read-data]`.
fn fsck_remote(
    repo: &Repo,
    name: &str,
    read_data: bool,
    pass: PassArgs,
    json: bool,
) -> CliResult<u8> {
    let (name, remote, _) = open_remote(repo, Some(name), false, &pass)?;
    let scratch = Scratch::new();
    let r = remote.check(&scratch.0, read_data)?;
    let code = u8::from(!r.problems.is_empty());
    if json {
        print_json(
            "lifeos.fsck_remote.v1",
            json!({"remote": name, "location": remote.location(), "ok": r.problems.is_empty(),
                   "packs": r.packs, "bytes": r.bytes, "objects": r.objects, "verified": r.verified,
                   "heads": r.heads, "reachable": r.reachable, "unindexed_packs": r.unindexed,
                   "problems": r.problems}),
        );
        return Ok(code);
    }
    println!(
        "checked {name}: {} packs ({}), {} objects{}; {} heads reaching {} objects",
        r.packs,
        human_bytes(r.bytes),
        r.objects,
        if read_data {
            format!(", {} downloaded and verified", r.verified)
        } else {
            String::new()
        },
        r.heads,
        r.reachable
    );
    if !r.unindexed.is_empty() {
        println!(
            "{} packs without an index (left by a push that was stopped; `lifeos gc --remote {name}` removes them)",
            r.unindexed.len()
        );
    }
    if r.problems.is_empty() {
        println!("no problems found");
    } else {
        for p in &r.problems {
            println!("problem: {p}");
        }
    }
    Ok(code)
}
