//! Rebuilding the catalog and the git map from the objects (`lifeos reindex`). It sits
//! above export, the filter and colocation, which it asks what export would write.

use lifeos_catalog::CatalogExt;
use lifeos_vcs::Repo;

use crate::export::Exporter;
use crate::Result;

/// Rebuilds the git map from the objects: the SHA-1 of every commit, tree, blob and tag
/// the view reaches, computed as export would write them. Returns the rows written.
pub fn rebuild_map(repo: &Repo) -> Result<u64> {
    let view = repo.head()?.view;
    let mut map = repo.catalog()?;
    // Pointer rows first: they decide how the contents they name are exported.
    let pointers = crate::filter::pointer_rows(repo)?;
    map.git_record(&pointers)?;
    let mut ex = Exporter::new(repo, None, &map);
    if crate::colocate::is_colocated(repo) {
        ex.filter = crate::filter::FilterAttributes::load(repo.workdir())?;
    }
    ex.refs(&view)?;
    let rows = std::mem::take(&mut ex.rows);
    map.git_record(&rows)?;
    Ok((pointers.len() + rows.len()) as u64)
}

/// What [`reindex`] rebuilt.
pub struct Reindexed {
    /// The catalog, rebuilt from the objects.
    pub catalog: lifeos_catalog::Catalog,
    /// The rows of the git map it rebuilt (0 when the repository had none).
    pub git_rows: u64,
}

/// Rebuilds the catalog from the objects, with the git map when the repository met git:
/// it is colocated, its view records git's refs, or its catalog had a map. Computing the
/// map reads every file version, which a repository that never met git does not need.
/// (A catalog deleted by hand had no map to tell, so the objects decide.)
pub fn reindex(repo: &Repo) -> Result<Reindexed> {
    let met_git = crate::colocate::is_colocated(repo)
        || !repo.head()?.view.git_refs.is_empty()
        || repo.catalog().and_then(|c| c.git_map_len()).unwrap_or(0) > 0;
    let catalog = repo.reindex()?;
    let git_rows = if met_git { rebuild_map(repo)? } else { 0 };
    Ok(Reindexed { catalog, git_rows })
}
