//! lifeos-app: lifeos as every front end (the command line, a web app, an agent server)
//! uses it.
//!
//! The history core ([`lifeos_vcs`]) knows nothing of entities or of the catalog; a
//! repository opened here has them installed: entities derived from the files each
//! commit records ([`DeriveEntities`]), and the catalog answering operation and commit
//! lookups ([`CatalogIndex`]). A front end that opens repositories any other way gets the
//! same answers more slowly, and commits that derive no entities.

#![warn(missing_docs)]

pub mod commit;
pub mod watch;

use std::path::Path;
use std::sync::Arc;

use lifeos_catalog::CatalogIndex;
use lifeos_entities::from_files::DeriveEntities;
use lifeos_store::StoreConfig;
use lifeos_vcs::{Repo, Result};

/// Installs what a repository does beyond its history: entity derivation on every commit
/// and the catalog as its operation index.
pub fn install(repo: &mut Repo) {
    repo.add_commit_hook(Arc::new(DeriveEntities));
    repo.set_op_index(Arc::new(CatalogIndex));
}

/// Opens the repository whose folder is `start` or the nearest above it that has a
/// store, with its features installed, and the author git would name in a folder shared
/// with git ([`adopt_git_identity`]).
pub fn open(start: &Path) -> Result<Repo> {
    let mut repo = Repo::discover(start)?;
    install(&mut repo);
    adopt_git_identity(&mut repo);
    Ok(repo)
}

/// In a folder shared with git, commits are authored as git would author them: git's
/// `user.name` and `user.email` stand in where neither `LIFEOS_AUTHOR_NAME` nor a
/// `user.name` setting says who the person is (they used to fall back to the login name
/// and `NAME@HOST`). The email follows the same rule with `LIFEOS_AUTHOR_EMAIL` and
/// `user.email`.
pub fn adopt_git_identity(repo: &mut Repo) {
    // Every command opens the repository: a folder not shared with git costs one stat.
    if !lifeos_git::colocate::is_colocated(repo) {
        return;
    }
    let said = |var: &str, key: &str| {
        std::env::var_os(var).is_some()
            || lifeos_vcs::settings::effective(Some(repo.dot_dir()), key).is_some()
    };
    if said("LIFEOS_AUTHOR_NAME", "user.name") {
        return;
    }
    let Some((name, email)) = lifeos_git::colocate::git_identity(repo) else {
        return;
    };
    let email_said = said("LIFEOS_AUTHOR_EMAIL", "user.email");
    repo.actor.name = name;
    if let Some(email) = email.filter(|_| !email_said) {
        repo.actor.email = email;
    }
}

/// Creates a repository in `workdir`, with its features installed.
pub fn init(workdir: &Path, config: StoreConfig) -> Result<Repo> {
    let mut repo = Repo::init(workdir, config)?;
    install(&mut repo);
    Ok(repo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_entities::EntitiesExt;

    /// A commit through a repository opened here derives the entities of a vCard; one
    /// through the bare history core does not.
    #[test]
    fn an_opened_repository_derives_entities_and_a_bare_one_does_not() {
        let card = "BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Ann Lee\r\nUID:ann-1\r\nEND:VCARD\r\n";
        let with = tempfile::tempdir().unwrap();
        let repo = init(with.path(), StoreConfig::default()).unwrap();
        std::fs::write(with.path().join("people.vcf"), card).unwrap();
        lifeos_vcs::testing::commit_folder(&repo, b"people");
        assert!(repo.head().unwrap().view.entities.is_some());
        let reopened = open(with.path()).unwrap();
        std::fs::write(with.path().join("more.vcf"), card.replace("ann-1", "bo-2")).unwrap();
        lifeos_vcs::testing::commit_folder(&reopened, b"more");
        let without = tempfile::tempdir().unwrap();
        let bare = Repo::init(without.path(), StoreConfig::default()).unwrap();
        std::fs::write(without.path().join("people.vcf"), card).unwrap();
        lifeos_vcs::testing::commit_folder(&bare, b"people");
        assert!(bare.head().unwrap().view.entities.is_none());
        let view = reopened.head().unwrap().view;
        for (path, uid) in [(&b"people.vcf"[..], "ann-1"), (b"more.vcf", "bo-2")] {
            let id = lifeos_entities::from_files::derived_id("contact", path, uid);
            assert!(reopened.entity_in(&view, &id).unwrap().is_some(), "{id}");
        }
    }
}
