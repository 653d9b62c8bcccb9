//! The commit pipeline every front end records the folder through: `lifeos commit`,
//! `lifeos watch`, and whatever comes next (a web app, an agent server).
//!
//! One call records the folder as a commit, indexes its small changes for search in the
//! same operation (`[ingest] after_commit`), fires the rules for the commit, and, in a
//! folder colocated with git, exports what changed to git. Only the recording can fail
//! the call: once the commit is published, a step after it that fails is reported in
//! [`FolderCommit`], never undoes it.

use lifeos_actions::{Actions, Fired};
use lifeos_ingest::run::SmallChanges;
use lifeos_ingest::settings::Settings;
use lifeos_ingest::IngestError;
use lifeos_vcs::commit::{CommitHook, CommitOptions, CommitOutcome};
use lifeos_vcs::path::BString;
use lifeos_vcs::working_copy::moves::WorkingCopyLock;
use lifeos_vcs::working_copy::SnapshotProgress;
use lifeos_vcs::{Repo, Result};

/// What [`commit_folder`] did: the commit, and how each step after it went.
pub struct FolderCommit {
    /// The commit (`outcome.commit` is `None` when nothing changed).
    pub outcome: CommitOutcome,
    /// Why the commit's small changes were not indexed for search: the ingest settings
    /// could not be read. The commit is recorded all the same; `lifeos ingest` indexes it
    /// once the config is fixed.
    pub not_indexed: Option<IngestError>,
    /// The rules fired for the commit, or why they could not be; `None` when no commit
    /// was made.
    pub fired: Option<std::result::Result<Fired, lifeos_actions::ActionsError>>,
    /// What exporting to git did, in a folder colocated with git where a commit was
    /// made; `None` otherwise.
    pub exported: Option<std::result::Result<lifeos_git::colocate::SyncOut, lifeos_git::GitError>>,
}

/// The automations of `repo`, carrying out `ingest` actions as `lifeos ingest` does.
pub fn actions_of(repo: &Repo) -> Actions<'_> {
    Actions::new(repo).with_ingest(|repo| {
        lifeos_ingest::run::ingest(repo, false, &Default::default(), &|_| {})
            .map(|r| {
                format!(
                    "{} files extracted, {} failed, {} already done",
                    r.extracted,
                    r.failed.len(),
                    r.already
                )
            })
            .map_err(|e| e.to_string())
    })
}

/// Records the folder under `wc` as a commit with `asked`'s message and options, indexing
/// its small changes in the same operation; then fires the rules for the commit and
/// exports it to git where the folder is colocated. `asked.hook` must be `None`: the
/// pipeline brings its own.
///
/// The caller takes the working-copy lock `wc` (a front end says so if another command
/// holds it); the pipeline releases it as soon as the commit is recorded, before any
/// rule fires, since an action may itself change the folder (`restore`, a branch move)
/// and take the lock.
pub fn commit_folder(
    repo: &Repo,
    wc: WorkingCopyLock,
    asked: CommitOptions<'_>,
    progress: &dyn SnapshotProgress,
) -> Result<FolderCommit> {
    let (small, not_indexed) = match Settings::load(repo) {
        Ok(s) => (Some(SmallChanges(s)), None),
        Err(e) => (None, Some(e)),
    };
    let opts = CommitOptions {
        hook: small.as_ref().map(|h| h as &dyn CommitHook),
        ..asked
    };
    let outcome = repo.commit_working_copy(&wc, &opts, progress)?;
    drop(wc);
    let (fired, exported) = match outcome.commit {
        Some(c) => {
            let read: Vec<BString> = outcome
                .snapshot
                .read
                .iter()
                .map(|(p, ..)| p.clone())
                .collect();
            let fired = actions_of(repo).fire_commit(c, outcome.op, &read);
            let exported = lifeos_git::colocate::is_colocated(repo)
                .then(|| lifeos_git::colocate::sync_out(repo));
            (Some(fired), exported)
        }
        None => (None, None),
    };
    Ok(FolderCommit {
        outcome,
        not_indexed,
        fired,
        exported,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_store::StoreConfig;

    /// One call records the folder, indexes the new note for search in the same
    /// operation and fires the rule its rules file trusts; a second call with nothing
    /// changed makes no commit and fires nothing.
    #[test]
    fn one_call_records_indexes_and_fires_the_rules() {
        let dir = tempfile::tempdir().unwrap();
        let repo = crate::init(dir.path(), StoreConfig::default()).unwrap();
        std::fs::write(
            dir.path().join(lifeos_actions::RULES_FILE),
            "[[rule]]\nname = \"seen\"\non = \"commit\"\n[rule.tag]\nname = \"seen-{short}\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("plan.md"),
            "# Plan\n\nThe quarterly budget.\n",
        )
        .unwrap();
        let asked = CommitOptions {
            message: b"rules and a plan",
            ..Default::default()
        };
        let wc = repo.lock_working_copy().unwrap();
        let first = commit_folder(&repo, wc, asked, &lifeos_vcs::working_copy::NoProgress).unwrap();
        assert!(first.not_indexed.is_none());
        assert!(first.exported.is_none(), "not colocated with git");
        let commit = first.outcome.commit.expect("a commit");
        // The note is searchable as of the commit's own operation.
        let view = repo.head().unwrap().view;
        let scope = lifeos_ingest::search::Versions::View(&view);
        let hits = lifeos_ingest::search::search(
            &repo,
            "quarterly budget",
            scope,
            &Default::default(),
            10,
        )
        .unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].path, "plan.md");
        // The rules file is not trusted yet: the fire says so and proposes nothing.
        let fired = first.fired.expect("rules fired").unwrap();
        assert!(fired.untrusted.is_some());
        assert!(fired.proposed.is_empty());
        let again = commit_folder(
            &repo,
            repo.lock_working_copy().unwrap(),
            CommitOptions {
                message: b"again",
                ..Default::default()
            },
            &lifeos_vcs::working_copy::NoProgress,
        )
        .unwrap();
        assert!(again.outcome.commit.is_none());
        assert_eq!(again.outcome.parent, Some(commit));
        assert!(again.fired.is_none());
    }

    /// A rule that runs at once and changes the folder (a `restore`) takes the
    /// working-copy lock itself: the pipeline lets go of it before firing, or the commit
    /// would wait for itself forever.
    #[test]
    fn a_rule_that_restores_a_file_runs_inside_the_pipeline_without_waiting_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let repo = crate::init(dir.path(), StoreConfig::default()).unwrap();
        let commit = |message: &'static [u8]| {
            let asked = CommitOptions {
                message,
                ..Default::default()
            };
            let wc = repo.lock_working_copy().unwrap();
            commit_folder(&repo, wc, asked, &lifeos_vcs::working_copy::NoProgress).unwrap()
        };
        std::fs::write(dir.path().join("plan.md"), "v1\n").unwrap();
        commit(b"v1");
        let v1 = repo.head().unwrap().id.to_hex();
        let rules = format!(
            "[[rule]]\nname = \"reset\"\non = \"commit\"\npaths = [\"reset\"]\napproval = \"auto\"\n[rule.restore]\npath = \"plan.md\"\nat = \"{}\"\n",
            &v1[..12]
        );
        std::fs::write(dir.path().join(lifeos_actions::RULES_FILE), rules).unwrap();
        std::fs::write(dir.path().join("plan.md"), "v2\n").unwrap();
        commit(b"rules, v2");
        actions_of(&repo).trust(None).unwrap();
        std::fs::write(dir.path().join("reset"), "").unwrap();
        let done = commit(b"reset");
        let fired = done.fired.expect("rules fired").unwrap();
        assert_eq!(fired.ran.len(), 1, "{fired:?}");
        assert_eq!(std::fs::read(dir.path().join("plan.md")).unwrap(), b"v1\n");
    }
}
