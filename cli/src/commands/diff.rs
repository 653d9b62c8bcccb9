//! `lifeos diff`: what changed, file by file, in the terms of each file's kind.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use lifeos_catalog::CatalogExt;
use lifeos_diff::loaders::{FsLoader, StoreLoader};
use lifeos_diff::{FileDiff, Loader, Location, Options, Registry, Side};
use lifeos_entities::EntitiesExt;
use lifeos_store::Id;
use lifeos_vcs::path::{display, is_under, BString};
use lifeos_vcs::renames::{pair_renames, FileStatus};
use lifeos_vcs::treediff::{diff_flat, FlatTree};
use lifeos_vcs::{EntryKind, Repo, TreeEntry};
use serde_json::json;

use crate::context::{resolve_in, view_at, Context};
use crate::error::{CliError, CliResult};
use crate::output::{print_json, Style};
use crate::verb::{Policy, Verb};
use crate::AsOfArg;

/// Arguments of `lifeos diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Only these paths (files or folders).
    pub paths: Vec<OsString>,
    /// Revisions: one (against the folder) or two (from, to).
    #[arg(short, long = "revision")]
    pub revisions: Vec<String>,
    /// The old side (a revision).
    #[arg(long, conflicts_with = "revisions")]
    pub from: Option<String>,
    /// The new side (a revision).
    #[arg(long, conflicts_with = "revisions")]
    pub to: Option<String>,
    /// The old side is `@` as of WHEN.
    #[arg(long, value_name = "WHEN")]
    pub from_at: Option<String>,
    /// The new side is `@` as of WHEN.
    #[arg(long, value_name = "WHEN")]
    pub to_at: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub at: AsOfArg,
    /// One line per file.
    #[arg(long)]
    pub stat: bool,
    /// Only the changed paths.
    #[arg(long)]
    pub name_only: bool,
    /// Write a PNG highlighting what changed in an image.
    #[arg(long, value_name = "PNG")]
    pub visual: Option<PathBuf>,
    /// Print JSON (schema lifeos.diff.v1).
    #[arg(long)]
    pub json: bool,
}

impl Verb for DiffArgs {
    fn policy(&self) -> Policy {
        Policy::PAGED
    }

    fn run(self, ctx: &Context) -> CliResult<u8> {
        let DiffArgs {
            paths,
            revisions,
            from,
            to,
            from_at,
            to_at,
            at,
            stat,
            name_only,
            visual,
            json,
        } = self;
        diff(
            ctx.repo()?,
            DiffRequest {
                paths: paths.iter().map(|p| BString::from(p.as_bytes())).collect(),
                revisions,
                from,
                to,
                at,
                from_at,
                to_at,
                stat,
                name_only,
                json,
                visual,
            },
            ctx.style(),
        )
    }
}

/// One side of the comparison.
enum Compared {
    Commit(Id),
    Folder,
    /// A moment before the first commit: no files.
    NoCommit,
}

/// What `lifeos diff` was asked for, paths cleaned.
struct DiffRequest {
    paths: Vec<BString>,
    revisions: Vec<String>,
    from: Option<String>,
    to: Option<String>,
    at: AsOfArg,
    from_at: Option<String>,
    to_at: Option<String>,
    stat: bool,
    name_only: bool,
    json: bool,
    visual: Option<PathBuf>,
}

fn under(paths: &[BString], p: &[u8]) -> bool {
    // An empty path (`.` or `/`) is the whole repository.
    paths.is_empty() || paths.iter().any(|q| is_under(p, q))
}

fn end_json(e: &Compared) -> serde_json::Value {
    match e {
        Compared::Commit(c) => json!({"commit": c.to_hex()}),
        Compared::Folder => json!({"working_folder": true}),
        Compared::NoCommit => json!({"no_commit": true}),
    }
}

fn print_change(out: &mut impl Write, style: Style, c: &lifeos_diff::Located) {
    let mark = match c.op {
        lifeos_diff::Op::Added => style.name("+"),
        lifeos_diff::Op::Removed => style.bad("-"),
        lifeos_diff::Op::Changed => style.id("~"),
        lifeos_diff::Op::Moved => style.id(">"),
    };
    let where_ = match &c.at {
        Location::Lines {
            old_start,
            old_len,
            new_start,
            new_len,
        } => format!("@@ -{old_start},{old_len} +{new_start},{new_len} @@ "),
        _ => String::new(),
    };
    let _ = writeln!(out, "  {mark} {where_}{}", c.text);
    let hunks: Vec<serde_json::Value> = match &c.detail {
        Some(d) if d.get("lines").is_some() => vec![d.clone()],
        Some(d) => d
            .get("hunks")
            .and_then(|h| h.as_array())
            .map(|h| h.iter().filter_map(|x| x.get("detail").cloned()).collect())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    for h in hunks {
        for l in h["lines"].as_array().into_iter().flatten() {
            let tag = l["tag"].as_str().unwrap_or(" ");
            let mut line = String::new();
            for seg in l["segments"].as_array().into_iter().flatten() {
                let t = seg["text"].as_str().unwrap_or("");
                if seg["emphasized"].as_bool() == Some(true) && tag != " " {
                    line.push_str(&style.emph(t));
                } else {
                    line.push_str(t);
                }
            }
            let line = match tag {
                "-" => style.bad(&format!("-{line}")),
                "+" => style.name(&format!("+{line}")),
                _ => format!(" {line}"),
            };
            let _ = writeln!(out, "      {line}");
        }
    }
}

/// Runs `lifeos diff`.
fn diff(repo: &Repo, args: DiffRequest, style: Style) -> CliResult<u8> {
    let view = view_at(repo, &args.at)?;
    let resolve = |rev: &str| -> CliResult<Compared> {
        Ok(Compared::Commit(resolve_in(repo, &view, rev)?.0))
    };
    // A side given as a moment: its `@` (if any) and its view, whose entities are compared.
    let at_side = |when: &str| -> CliResult<(Compared, Option<lifeos_vcs::View>)> {
        let view = repo.op_at(when)?.state.view;
        Ok((
            view.at_commit()
                .map_or(Compared::NoCommit, Compared::Commit),
            Some(view),
        ))
    };
    if args.revisions.len() > 2 {
        return Err(CliError::new("give at most two revisions (-r FROM -r TO)"));
    }
    let (from, from_view) = match (&args.from, args.revisions.first(), &args.from_at) {
        (Some(r), _, _) | (None, Some(r), _) => (resolve(r)?, None),
        (None, None, Some(w)) => at_side(w)?,
        (None, None, None) => (resolve("@")?, None),
    };
    let (to, to_view) = match (&args.to, args.revisions.get(1), &args.to_at) {
        (Some(r), _, _) | (None, Some(r), _) => (resolve(r)?, None),
        (None, None, Some(w)) => at_side(w)?,
        (None, None, None) => (Compared::Folder, None),
    };
    let paths: Vec<BString> = args
        .paths
        .iter()
        .map(|p| lifeos_vcs::path::clean(p))
        .collect::<Result<_, _>>()?;
    // Between two moments (not revisions: commits hold no entities; the folder's side is
    // the current view), and with no paths asked for, the entities that changed too.
    let new_view = match (&to_view, &to) {
        (Some(_), _) => to_view,
        (None, Compared::Folder) if from_view.is_some() && paths.is_empty() => {
            Some(repo.head()?.view)
        }
        _ => None,
    };
    let entities = match (&from_view, &new_view, paths.is_empty()) {
        (Some(old), Some(new), true) => repo.diff_entities(old, new)?,
        _ => Vec::new(),
    };
    let flat = |e: &Compared, other: &FlatTree| -> CliResult<FlatTree> {
        Ok(match e {
            Compared::Commit(c) => repo.flatten(&repo.commit(c)?.tree)?,
            Compared::NoCommit => FlatTree::new(),
            Compared::Folder => {
                // A file that cannot be read is unknown, not deleted: compare it as the
                // other side has it, and say so.
                // The folder's submodules are the gitlinks of the commit it is on.
                let at = match repo.head()?.view.at_commit() {
                    Some(c) => Some(repo.flatten(&repo.commit(&c)?.tree)?),
                    None => None,
                };
                let read = repo.working_tree(at.as_ref())?;
                let mut flat = read.flat;
                for u in &read.unreadable {
                    eprintln!("warning: cannot read {}: {}", display(&u.path), u.reason);
                    for (p, e) in other.iter().filter(|(p, _)| is_under(p, &u.path)) {
                        flat.entry(p.clone()).or_insert_with(|| e.clone());
                    }
                }
                flat
            }
        })
    };
    let a = flat(&from, &FlatTree::new())?;
    let b = flat(&to, &a)?;
    let changes: Vec<_> = diff_flat(&a, &b)
        .into_iter()
        .filter(|c| under(&paths, &c.path))
        .collect();
    let store = repo.store_arc();
    let pairs = pair_renames(&store, changes, matches!(to, Compared::Commit(_)));
    if args.name_only && !args.json {
        for p in &pairs {
            println!("{}", display(&p.path));
        }
        for d in &entities {
            println!("entity {}", d.id);
        }
        return Ok(0);
    }
    let mut registry = Registry::builtin();
    let cfg_text = std::fs::read_to_string(repo.dot_dir().join("config")).unwrap_or_default();
    for c in lifeos_diff::external::load_config(&cfg_text)
        .map_err(|e| CliError::new(format!("repository config [diff]: {e}")))?
    {
        registry.add(Box::new(
            lifeos_diff::external::ExternalPlugin::new(c).map_err(CliError::new)?,
        ));
    }
    let opts = Options {
        visual: args.visual.is_some(),
    };
    let chunking = repo.store().config().chunking;
    let mut files = Vec::new();
    let mut visual_written = false;
    let mut catalog = None;
    for p in &pairs {
        let path = display(&p.path).into_owned();
        let old_path = display(p.old_path.as_ref().unwrap_or(&p.path)).into_owned();
        // Plugins read a file's name for its extension: they get the name itself (lossy
        // where it is not UTF-8), not the quoted form people see.
        let new_name = String::from_utf8_lossy(&p.path).into_owned();
        let old_name = String::from_utf8_lossy(p.old_path.as_ref().unwrap_or(&p.path)).into_owned();
        let old_loader = p
            .old
            .as_ref()
            .map(|e| StoreLoader::new(store.clone(), e.id, old_path.clone()));
        let new_store = matches!(to, Compared::Commit(_));
        let new_store_loader = p
            .new
            .as_ref()
            .filter(|_| new_store)
            .map(|e| StoreLoader::new(store.clone(), e.id, path.clone()));
        let new_fs_loader = p.new.as_ref().filter(|_| !new_store).map(|e| {
            FsLoader::new(
                lifeos_vcs::path::in_folder(repo.workdir(), &p.path),
                chunking,
                e.kind == EntryKind::Symlink,
            )
        });
        let old_side = p.old.as_ref().zip(old_loader.as_ref()).map(|(e, l)| Side {
            path: &old_name,
            size: e.size,
            id: Some(e.id),
            loader: l as &dyn Loader,
        });
        let new_loader: Option<&dyn Loader> = match (&new_store_loader, &new_fs_loader) {
            (Some(l), _) => Some(l),
            (_, Some(l)) => Some(l),
            _ => None,
        };
        let new_side = p.new.as_ref().zip(new_loader).map(|(e, l)| Side {
            path: &new_name,
            size: e.size,
            id: Some(e.id),
            loader: l,
        });
        let same_content = p
            .old
            .as_ref()
            .zip(p.new.as_ref())
            .is_some_and(|(o, n)| o.id == n.id);
        let submodule = |e: &Option<TreeEntry>| match e {
            Some(e) if e.kind == EntryKind::Gitlink => format!(
                "submodule at {}",
                hex::encode(lifeos_vcs::object::gitlink_sha1(&e.id))
            ),
            Some(e) => e.kind.name().to_string(),
            None => "nothing".to_string(),
        };
        let gitlink =
            |e: &Option<TreeEntry>| e.as_ref().is_some_and(|e| e.kind == EntryKind::Gitlink);
        let mut d = if !same_content && (gitlink(&p.old) || gitlink(&p.new)) {
            // A submodule's content is another repository's commit: name the commits.
            FileDiff {
                plugin: "submodule".into(),
                summary: format!("{} → {}", submodule(&p.old), submodule(&p.new)),
                ..FileDiff::default()
            }
        } else if same_content {
            let (o, n) = (p.old.as_ref().expect("both"), p.new.as_ref().expect("both"));
            let mut summary = if p.status == FileStatus::Renamed {
                format!("renamed from {old_path}, content unchanged")
            } else {
                "content unchanged".into()
            };
            if o.kind != n.kind {
                summary.push_str(&format!("; {} → {}", o.kind.name(), n.kind.name()));
            }
            let plugin = if p.status == FileStatus::Renamed {
                "rename"
            } else {
                "mode"
            };
            FileDiff {
                plugin: plugin.into(),
                summary,
                ..FileDiff::default()
            }
        } else {
            match registry.diff(old_side.as_ref(), new_side.as_ref(), &opts) {
                Ok(d) => d,
                Err(e) => FileDiff {
                    plugin: "none".into(),
                    summary: format!("could not be compared: {e}"),
                    ..FileDiff::default()
                },
            }
        };
        if let (Some(o), Some(n)) = (&p.old, &p.new) {
            // Only a version read as audio or video has a transcript to compare: a file
            // named like a recording that is none gets no note about transcripts.
            if o.id != n.id && d.plugin == "media" && lifeos_ingest::speech::is_recording(&new_name)
            {
                let catalog = match &mut catalog {
                    Some(c) => c,
                    None => catalog.insert(repo.catalog()?),
                };
                lifeos_ingest::speech::add_transcript_diff(catalog, &o.id, &n.id, &mut d)?;
            }
        }
        if let (Some(out), Some(png)) = (&args.visual, &d.visual) {
            std::fs::write(out, png)
                .map_err(|e| CliError::new(format!("writing {}: {e}", out.display())))?;
            visual_written = true;
        }
        files.push((p, d));
    }
    if let Some(out) = &args.visual {
        if !visual_written {
            eprintln!("warning: no visual diff was produced (it needs one changed image of the same size); {} not written", out.display());
        }
    }
    if args.json {
        print_json(
            "lifeos.diff.v1",
            json!({
                "from": end_json(&from),
                "to": end_json(&to),
                "files": files.iter().map(|(p, d)| json!({
                    "path": display(&p.path),
                    "old_path": p.old_path.as_ref().map(|o| display(o)),
                    "status": p.status.as_str(),
                    "similarity": p.similarity,
                    "plugin": d.plugin,
                    "summary": d.summary,
                    "changes": d.changes,
                    "notes": d.notes,
                })).collect::<Vec<_>>(),
                "entities": entities.iter().map(crate::entity_util::entity_diff_json).collect::<Vec<_>>(),
            }),
        );
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    for (p, d) in &files {
        let path = display(&p.path);
        let status = match (&p.old_path, p.similarity) {
            (Some(o), Some(s)) => {
                format!("renamed from {}, {:.0}% similar", display(o), 100.0 * s)
            }
            _ => p.status.as_str().to_string(),
        };
        if args.stat {
            let _ = writeln!(out, "{path} ({status}, {}): {}", d.plugin, d.summary);
            continue;
        }
        let _ = writeln!(
            out,
            "{}",
            style.id(&format!("── {path} ({status}; {}) ──", d.plugin))
        );
        let _ = writeln!(out, "  {}", d.summary);
        for n in &d.notes {
            let _ = writeln!(out, "  {}", style.dim(&format!("note: {n}")));
        }
        for c in &d.changes {
            print_change(&mut out, style, c);
        }
    }
    if args.stat {
        for d in &entities {
            let _ = writeln!(
                out,
                "entity {} ({}): {} attributes, {} links",
                d.id,
                d.kind(),
                d.attrs.len(),
                d.linked.len() + d.unlinked.len()
            );
        }
    } else {
        crate::entity_util::print_entity_diffs(&mut out, &entities, style);
    }
    if files.is_empty() && entities.is_empty() && !args.stat {
        let _ = writeln!(out, "no changes");
    }
    Ok(0)
}
