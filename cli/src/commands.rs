//! The verbs.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use lifeos_store::StoreConfig;
use lifeos_vcs::commit::CommitOptions;
use lifeos_vcs::path::{display, BString};
use lifeos_vcs::working_copy::moves::WorkingCopyLock;
use lifeos_vcs::working_copy::SnapshotProgress;
use lifeos_vcs::{EntryKind, Repo};
use serde_json::json;

use crate::error::{CliError, CliResult};
use crate::output::{bar, human_bytes, local_time, print_json, skipped_json, Style};
use crate::{history, Cli, Command};

fn cwd(cli_dir: &Option<PathBuf>) -> CliResult<PathBuf> {
    let here = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    Ok(match cli_dir {
        Some(d) => here.join(d),
        None => here,
    })
}

fn open(dir: &Path) -> CliResult<Repo> {
    let mut repo = Repo::discover(dir)?;
    repo.interrupt = crate::signals::interrupt();
    repo.add_commit_hook(std::sync::Arc::new(
        lifeos_entities::from_files::DeriveEntities,
    ));
    repo.set_op_index(std::sync::Arc::new(lifeos_catalog::CatalogIndex));
    crate::remote::serve_lazily(&repo)?;
    for w in repo.store().warnings() {
        eprintln!("warning: {w}");
    }
    Ok(repo)
}

/// Takes the working-copy lock, saying so if another command holds it, and reports a
/// folder move an interrupted command left that was finished now.
pub(crate) fn lock_folder(repo: &Repo, style: Style) -> CliResult<WorkingCopyLock> {
    let wc = repo.lock_working_copy()?;
    say_finished_move(&wc, style);
    Ok(wc)
}

/// Reports a folder move an interrupted command left that taking the lock `wc` finished.
pub(crate) fn say_finished_move(wc: &WorkingCopyLock, style: Style) {
    if let Some(m) = wc.finished_move() {
        eprintln!(
            "note: finished changing the folder for operation {}, which was interrupted ({} files updated)",
            style.id(&m.op.short(12)),
            m.applied
        );
        for p in &m.kept {
            eprintln!(
                "note: left {} as it is: it was changed after the interruption",
                display(p)
            );
        }
    }
}

/// Runs one command; returns the exit code. In a folder colocated with git, what git
/// changed is imported first, and what the command changed is exported after.
pub fn run(cli: Cli, style: Style) -> CliResult<u8> {
    let here = cwd(&cli.dir)?;
    let policy = cli.command.policy();
    if !policy.creates {
        crate::git::settle_store(&here)?;
    }
    let colocated = if policy.syncs_git {
        Repo::discover(&here)
            .ok()
            .filter(lifeos_git::colocate::is_colocated)
    } else {
        None
    };
    if let Some(repo) = &colocated {
        crate::git::sync_in(repo)?;
    }
    let start = lifeos_vcs::repo::now_ms();
    let timer = std::time::Instant::now();
    let dir = here.clone();
    let verbose = cli.verbose;
    // JSON is always an answer; -q mutes only reports of what was done.
    let json = std::env::args_os().any(|a| a == "--json");
    let redirected = if cli.quiet && !json && !policy.answers {
        crate::pager::Redirected::mute()
    } else if !cli.no_pager && !json && policy.pages {
        crate::pager::Redirected::pager(&here)
    } else {
        None
    };
    let code = dispatch(cli, here, style);
    // Commands that record operations fire the rules for the branches, tags, entities
    // and extracts they changed (commits fire their own, as git's hooks do).
    if policy.fires_rules && code.is_ok() {
        if let Ok(repo) = Repo::discover(&dir) {
            crate::actions::fire_since(&repo, start, style);
        }
    }
    if let Some(repo) = &colocated {
        crate::git::sync_out(repo)?;
    }
    drop(redirected);
    if verbose {
        let at = Repo::discover(&dir)
            .and_then(|r| r.head())
            .map(|h| format!("; the repository is at operation {}", h.id.short(12)))
            .unwrap_or_default();
        eprintln!("lifeos: done in {} ms{at}", timer.elapsed().as_millis());
    }
    code
}

fn dispatch(cli: Cli, here: PathBuf, style: Style) -> CliResult<u8> {
    match cli.command {
        Command::Init { dir, git } => {
            let target = dir.map(|d| here.join(d)).unwrap_or(here);
            let repo = Repo::init(&target, StoreConfig::default())?;
            println!(
                "Initialized an empty lifeos repository in {}",
                repo.dot_dir().display()
            );
            if git {
                crate::git::colocate(repo)?;
            }
            Ok(0)
        }
        Command::Commit {
            paths,
            message,
            amend,
            allow_empty,
            allow_unreadable,
            json,
        } => {
            let repo = open(&here)?;
            let paths = paths
                .iter()
                .map(|p| lifeos_vcs::path::clean(p.as_bytes()).map_err(CliError::from))
                .collect::<CliResult<Vec<_>>>()?;
            let message = match message {
                Some(m) => m,
                None if amend => String::new(),
                None => match crate::editor::commit_message(&repo, &paths)? {
                    Some(m) => m,
                    None => {
                        eprintln!("Aborting: the message was empty; nothing was recorded");
                        return Ok(1);
                    }
                },
            };
            let asked = CommitOptions {
                message: message.as_bytes(),
                allow_empty,
                allow_unreadable,
                paths: &paths,
                amend,
                hook: None,
            };
            commit(&repo, asked, json, style)
        }
        Command::Ls {
            path,
            rev: crate::RevAt { revision, at },
            json,
        } => ls(
            &open(&here)?,
            path.as_deref().map(OsStrExt::as_bytes),
            &revision,
            &at,
            json,
        ),
        Command::Cat {
            path,
            rev: crate::RevAt { revision, at },
            json,
        } => cat(&open(&here)?, path.as_bytes(), &revision, &at, json),
        Command::Restore {
            path,
            to,
            revision,
            at,
            force,
            json,
        } => {
            let repo = open(&here)?;
            match (path, to) {
                (None, Some(to)) => restore(&repo, &here.join(to), &revision, &at, json),
                (Some(p), None) => history::restore_path(&repo, p.as_bytes(), &revision, &at, force, json, style),
                (Some(_), Some(_)) => Err(CliError::new("give either PATH or --to DIR, not both")),
                (None, None) => Err(CliError::new("nothing to restore")
                    .hint("name a PATH to bring back into the folder, or --to DIR to materialise a whole revision")),
            }
        }
        Command::Log {
            path,
            revision,
            limit,
            graph,
            all,
            at,
            json,
        } => history::log(
            &open(&here)?,
            &history::LogArgs {
                path: path.as_deref().map(OsStrExt::as_bytes),
                revset: if all {
                    Some("all()")
                } else {
                    revision.as_deref()
                },
                limit,
                graph,
                json,
            },
            &at,
            style,
        ),
        Command::Diff {
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
        } => crate::diff::run(
            &open(&here)?,
            crate::diff::DiffArgs {
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
            style,
        ),
        Command::Show { revision, at, json } => {
            history::show(&open(&here)?, &revision, &at, json, style)
        }
        Command::Status { json } => history::status(&open(&here)?, json, style),
        Command::Branch(b) => history::branch(&open(&here)?, b, style),
        Command::Tag(t) => history::tag(&open(&here)?, t, style),
        Command::Checkout {
            branch,
            revision,
            force,
        } => history::checkout(&open(&here)?, branch, revision, force, style),
        Command::Describe { revision, message } => {
            history::describe(&open(&here)?, &revision, &message, style)
        }
        Command::Merge { branch } => history::merge(&open(&here)?, &branch, style),
        Command::Op(o) => history::op(&open(&here)?, o, style),
        Command::Actions(a) => crate::actions::actions(&open(&here)?, a, style),
        Command::Approve { id, ttl, run, hash } => {
            crate::actions::approve(&open(&here)?, &id, &ttl, run, hash.as_deref(), style)
        }
        Command::Reject { id } => crate::actions::reject(&open(&here)?, &id, style),
        Command::Watch {
            index_only: true, ..
        } => crate::watch::monitor_only(&open(&here)?),
        Command::Watch {
            quiet_period,
            rescan,
            no_ingest,
            index_only: false,
        } => crate::watch::watch(&open(&here)?, &quiet_period, &rescan, !no_ingest, style),
        Command::Rollback { receipt } => crate::actions::rollback(&open(&here)?, &receipt, style),
        Command::Receipts { json } => crate::actions::receipts(&open(&here)?, json, style),
        Command::Receipt(r) => crate::actions::receipt(&open(&here)?, r, style),
        Command::Rules(r) => crate::actions::rules(&open(&here)?, r, style),
        Command::Entity(e) => crate::entity::run(&open(&here)?, e, style),
        Command::Query { query, at, json } => {
            crate::entity::query(&open(&here)?, &query, &at, json, style)
        }
        Command::Git(crate::git::GitCmd::Clone { url, dir }) => {
            crate::git::clone(&here, &url, dir.as_deref())
        }
        Command::Git(g) => crate::git::run(&open(&here)?, g),
        Command::Undo { force } => history::undo(&open(&here)?, force, false, style),
        Command::Redo { force } => history::undo(&open(&here)?, force, true, style),
        Command::Model(cmd) => crate::knowledge::model(cmd),
        Command::Reindex => history::reindex(&open(&here)?),
        Command::Ingest {
            paths,
            retry_failed,
            model,
            json,
        } => {
            let only = lifeos_ingest::run::Selection {
                paths: paths.iter().map(|p| p.as_bytes().to_vec()).collect(),
                model,
            };
            crate::knowledge::ingest(&open(&here)?, retry_failed, &only, json)
        }
        Command::Search {
            query,
            at,
            all_history,
            file_type,
            path,
            mentions,
            model,
            limit,
            json,
        } => crate::knowledge::search(
            &open(&here)?,
            query.as_deref(),
            &at,
            all_history,
            &lifeos_ingest::search::Filters {
                file_type: file_type.map(crate::SearchType::name),
                path: path.as_deref(),
                mentions: mentions.as_deref(),
                model: model.as_deref(),
            },
            limit,
            json,
            style,
        ),
        Command::Extract(cmd) => crate::extract::run(&open(&here)?, cmd, style),
        Command::Stats { json } => stats(&open(&here)?, json),
        Command::Fsck {
            remote: Some(name),
            read_data,
            pass,
            json,
        } => crate::remote::fsck(&open(&here)?, &name, read_data, pass, json),
        Command::Fsck { json, .. } => fsck(&open(&here)?, json, style),
        Command::Gc {
            remote: Some(name),
            pass,
            json,
            ..
        } => crate::remote::gc(&open(&here)?, &name, pass, json),
        Command::Gc { json, dry_run, .. } => gc(&open(&here)?, dry_run, json),
        Command::Completions { shell } => crate::docs::completions(shell),
        Command::Config(c) => crate::config::config(c, &here),
        Command::Man { dir } => crate::docs::man(dir.as_deref()),
        Command::Remote(cmd) => crate::remote::remote(&open(&here)?, cmd),
        Command::Push { name, pass, json } => crate::remote::push(&open(&here)?, name, pass, json),
        Command::Fetch {
            name,
            all_data,
            pass,
            json,
        } => crate::remote::fetch(&open(&here)?, name, all_data, pass, json, style),
        Command::Pull {
            name,
            force,
            pass,
            json,
        } => crate::remote::pull(&open(&here)?, name, force, pass, json, style),
        Command::Clone(args) => crate::remote::clone(&here, args),
    }
}

struct SnapshotBar(indicatif::ProgressBar);

impl SnapshotProgress for SnapshotBar {
    fn scanned(&self, _files: u64, _bytes: u64, _to_read: u64, bytes_to_read: u64) {
        self.0.set_length(bytes_to_read);
    }
    fn read(&self, n: u64) {
        self.0.inc(n);
    }
}

fn commit(repo: &Repo, asked: CommitOptions<'_>, json: bool, style: Style) -> CliResult<u8> {
    let amend = asked.amend;
    let pb = SnapshotBar(bar(0, "reading"));
    let out = record_folder(repo, asked, &pb, style);
    pb.0.finish_and_clear();
    let out = out?;
    let s = &out.snapshot;
    if json {
        print_json(
            "lifeos.commit.v1",
            json!({
                "commit": out.commit.map(|c| c.to_hex()),
                "operation": out.op.map(|o| o.to_hex()),
                "parent": out.parent.map(|p| p.to_hex()),
                "branch": out.branch,
                "tree": s.tree.to_hex(),
                "changed": out.commit.is_some(),
                "files": s.files,
                "bytes": s.bytes,
                "files_read": s.files_read,
                "bytes_read": s.bytes_read,
                "skipped": skipped_json(&s.skipped),
                "unreadable": skipped_json(&s.unreadable),
            }),
        );
        return Ok(0);
    }
    match out.commit {
        Some(c) => {
            let on = out
                .branch
                .map(|b| format!(" on {}", style.name(&b)))
                .unwrap_or_default();
            let message = repo.commit(&c)?.message;
            println!(
                "{} {}{on}: {}",
                if amend { "Amended, now" } else { "Committed" },
                style.id(&c.short(12)),
                String::from_utf8_lossy(&message)
                    .lines()
                    .next()
                    .unwrap_or("")
            );
        }
        None => println!(
            "Nothing changed since {}; no commit made",
            out.parent
                .map(|p| style.id(&p.short(12)))
                .unwrap_or_default()
        ),
    }
    println!(
        "  {} files, {} ({} files read, {})",
        s.files,
        human_bytes(s.bytes),
        s.files_read,
        human_bytes(s.bytes_read)
    );
    Ok(0)
}

/// Records the folder as a commit through the commit pipeline ([`lifeos_app::commit`]):
/// says on stderr what was not recorded, and how indexing, the rules and the export to
/// git went.
pub(crate) fn record_folder(
    repo: &Repo,
    asked: CommitOptions<'_>,
    progress: &dyn lifeos_vcs::working_copy::SnapshotProgress,
    style: Style,
) -> CliResult<lifeos_vcs::commit::CommitOutcome> {
    let wc = lock_folder(repo, style)?;
    // The pipeline lets go of the folder once the commit is recorded; what follows
    // reports it and never undoes it.
    let done = lifeos_app::commit::commit_folder(repo, wc, asked, progress)?;
    if let Some(e) = &done.not_indexed {
        eprintln!(
            "warning: this commit is recorded without indexing it for search (fix the config, then `lifeos ingest`): {e}"
        );
    }
    let out = done.outcome;
    let s = &out.snapshot;
    for sk in &s.skipped {
        eprintln!(
            "warning: not recorded: {}: {}",
            display(&sk.path),
            sk.reason
        );
    }
    for sk in &s.unreadable {
        eprintln!(
            "warning: cannot read {}: {}; its last recorded version was kept",
            display(&sk.path),
            sk.reason
        );
    }
    for n in &out.notes {
        eprintln!("warning: {}:{}: {}", display(&n.path), n.line, n.text);
    }
    match done.fired {
        Some(Ok(f)) => crate::actions::report_fired(&f, style),
        Some(Err(e)) => eprintln!("warning: rules did not fire: {}", CliError::from(e).message),
        None => {}
    }
    match done.exported {
        Some(Ok(r)) => crate::git::report_sync_out(&r),
        Some(Err(e)) => eprintln!(
            "warning: not exported to git: {}",
            CliError::from(e).message
        ),
        None => {}
    }
    Ok(out)
}

/// The view to read: the current one, or the one `--at` names (said on stderr).
pub(crate) fn view_at(repo: &Repo, at: &crate::AtArg) -> CliResult<lifeos_vcs::View> {
    Ok(state_at(repo, at)?.view)
}

/// The operation `--at` names (the current one without it), telling stderr which it is.
pub(crate) fn state_at(repo: &Repo, at: &crate::AtArg) -> CliResult<lifeos_vcs::OpState> {
    match &at.at {
        None => Ok(repo.head()?),
        Some(when) => {
            let a = repo.op_at(when)?;
            let asked = a
                .asked_ms
                .map(|t| format!(", the last at or before {}", local_time(t)))
                .unwrap_or_default();
            eprintln!(
                "as of operation {} ({}{asked})",
                a.state.id.short(12),
                local_time(a.state.op.end_ms)
            );
            Ok(a.state)
        }
    }
}

/// Resolves a revision in a view and reads the commit.
pub(crate) fn resolve_in(
    repo: &Repo,
    view: &lifeos_vcs::View,
    rev: &str,
) -> CliResult<(lifeos_store::Id, lifeos_vcs::Commit)> {
    let id = repo.resolve_rev(view, rev)?;
    let c = repo.commit(&id)?;
    Ok((id, c))
}

pub(crate) fn resolve(
    repo: &Repo,
    rev: &str,
    at: &crate::AtArg,
) -> CliResult<(lifeos_store::Id, lifeos_vcs::Commit)> {
    let view = view_at(repo, at)?;
    resolve_in(repo, &view, rev)
}

fn ls(repo: &Repo, path: Option<&[u8]>, rev: &str, at: &crate::AtArg, json: bool) -> CliResult<u8> {
    let (id, c) = resolve(repo, rev, at)?;
    let clean = lifeos_vcs::path::clean(path.unwrap_or_default())?;
    let rows = repo.entries_at(Some(&c.tree), &clean, rev)?;
    if json {
        print_json(
            "lifeos.ls.v1",
            json!({
                "commit": id.to_hex(),
                "entries": rows.iter().map(|(p, e)| json!({"path": display(p), "kind": e.kind.name(), "size": e.size, "id": e.id.to_hex()})).collect::<Vec<_>>(),
            }),
        );
    } else {
        let mut out = std::io::stdout().lock();
        for (p, e) in &rows {
            let mark = match e.kind {
                EntryKind::Executable => "*".to_string(),
                EntryKind::Symlink => "@".to_string(),
                EntryKind::Gitlink => format!(
                    "  (submodule at {})",
                    hex::encode(lifeos_vcs::object::gitlink_sha1(&e.id))
                ),
                _ => String::new(),
            };
            let _ = writeln!(out, "{:>12}  {}{mark}", human_bytes(e.size), display(p));
        }
    }
    Ok(0)
}

/// A file in a revision, as `cat` and `extract show` read it.
pub(crate) struct FileAt {
    /// The commit's id.
    pub commit: lifeos_store::Id,
    /// The path, cleaned.
    pub path: lifeos_vcs::path::BString,
    /// The file's entry in the commit's tree.
    pub entry: lifeos_vcs::TreeEntry,
}

/// The file at `path` in `rev` (as of `at`) ([`Repo::file_at`]). A folder or a submodule
/// is refused with `hint` (given the path as people see it) saying what to run instead.
pub(crate) fn file_at(
    repo: &Repo,
    path: &[u8],
    rev: &str,
    at: &crate::AtArg,
    hint: impl FnOnce(&str) -> String,
) -> CliResult<FileAt> {
    let (commit, c) = resolve(repo, rev, at)?;
    match repo.file_at(&c, path, rev) {
        Ok((path, entry)) => Ok(FileAt {
            commit,
            path,
            entry,
        }),
        Err(lifeos_vcs::VcsError::NotAFile {
            path,
            found,
            expected,
        }) => {
            let hint = hint(&path);
            let e = lifeos_vcs::VcsError::NotAFile {
                path,
                found,
                expected,
            };
            Err(CliError::from(e).hint(hint))
        }
        Err(e) => Err(e.into()),
    }
}

fn cat(repo: &Repo, path: &[u8], rev: &str, at: &crate::AtArg, json: bool) -> CliResult<u8> {
    let FileAt {
        commit,
        path: clean,
        entry,
    } = file_at(repo, path, rev, at, |p| {
        format!("`lifeos ls {p} -r {rev}` lists it")
    })?;
    if json {
        use base64::Engine as _;
        let mut bytes = Vec::new();
        repo.store().read_file(&entry.id, &mut bytes)?;
        print_json(
            "lifeos.cat.v1",
            json!({
                "path": display(&clean),
                "commit": commit.to_hex(),
                "id": entry.id.to_hex(),
                "size": bytes.len(),
                "executable": entry.kind == EntryKind::Executable,
                "symlink": entry.kind == EntryKind::Symlink,
                "content_base64": base64::engine::general_purpose::STANDARD.encode(&bytes),
            }),
        );
        return Ok(0);
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match repo.store().read_file(&entry.id, &mut out) {
        Ok(_) => {}
        Err(lifeos_store::StoreError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            return Ok(0)
        }
        Err(e) => return Err(e.into()),
    }
    out.flush()
        .map_err(|e| CliError::new(format!("writing to stdout: {e}")))?;
    Ok(0)
}

fn restore(repo: &Repo, to: &Path, rev: &str, at: &crate::AtArg, json: bool) -> CliResult<u8> {
    let (id, c) = resolve(repo, rev, at)?;
    let total = repo.tree(&c.tree)?.total_size();
    let pb = bar(total, "restoring");
    let st = repo.restore_tree_to(&c.tree, to, &|n| pb.inc(n))?;
    pb.finish_and_clear();
    if json {
        print_json(
            "lifeos.restore.v1",
            json!({"commit": id.to_hex(), "target": to.display().to_string(), "files": st.files, "dirs": st.dirs, "bytes": st.bytes}),
        );
    } else {
        println!(
            "Restored {} ({} files, {}) into {}",
            id.short(12),
            st.files,
            human_bytes(st.bytes),
            to.display()
        );
    }
    Ok(0)
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
        println!(
            "{} unreachable entries (left by interrupted commands; `lifeos gc` removes them)",
            r.unreachable
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

fn gc(repo: &Repo, dry_run: bool, json: bool) -> CliResult<u8> {
    let pb = bar(0, if dry_run { "planning" } else { "collecting" });
    let r = repo.gc(dry_run, &|n| pb.inc(n))?;
    pb.finish_and_clear();
    let r = match r {
        Ok(r) => r,
        Err(problems) => {
            for p in &problems {
                eprintln!("{}: {}", p.code, p.detail);
            }
            return Err(CliError::new(format!("gc refused: the history walk found {} problems", problems.len()))
                .hint("run `lifeos fsck` and repair the repository first; gc removes nothing from a damaged repository"));
        }
    };
    if json {
        print_json(
            "lifeos.gc.v1",
            json!({
                "packs_before": r.packs_before, "packs_after": r.packs_after,
                "bytes_before": r.bytes_before, "bytes_after": r.bytes_after,
                "objects_removed": r.objects_removed, "objects_kept_unreachable": r.objects_kept_unreachable,
                "packs_rewritten": r.packs_rewritten, "packs_deleted": r.packs_deleted,
                "packs_damaged": r.packs_damaged, "tmp_removed": r.tmp_removed,
                "dry_run": dry_run,
            }),
        );
    } else if dry_run {
        println!(
            "would remove {} unreachable entries and free {} ({} -> {}): {} packs deleted, {} rewritten; nothing was changed",
            r.objects_removed,
            human_bytes(r.bytes_before - r.bytes_after),
            human_bytes(r.bytes_before),
            human_bytes(r.bytes_after),
            r.packs_deleted,
            r.packs_rewritten,
        );
        if r.objects_kept_unreachable > 0 {
            println!(
                "{} unreachable entries would stay in packs below the rewrite threshold",
                r.objects_kept_unreachable
            );
        }
    } else {
        println!(
            "removed {} unreachable entries; packs {} -> {}, {} -> {} ({} rewritten, {} deleted, {} temporary files removed)",
            r.objects_removed,
            r.packs_before,
            r.packs_after,
            human_bytes(r.bytes_before),
            human_bytes(r.bytes_after),
            r.packs_rewritten,
            r.packs_deleted,
            r.tmp_removed
        );
        if r.objects_kept_unreachable > 0 {
            println!(
                "{} unreachable entries kept in packs below the rewrite threshold",
                r.objects_kept_unreachable
            );
        }
    }
    Ok(0)
}
