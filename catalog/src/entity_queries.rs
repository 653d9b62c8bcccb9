//! Entity queries answered from the catalog's entity index (FORMAT 12.8): the same
//! answers as [`EntitiesExt::scan_entities`], which reads every entity of a view, in the
//! time of the SQL and the entities returned.

use lifeos_entities::query::{order_hits, Query};
use lifeos_entities::schema::Schema;
use lifeos_entities::{EntitiesExt, Entity};
use lifeos_store::Id;
use lifeos_vcs::error::Result;
use lifeos_vcs::{Repo, View};

use crate::entity_index::{IndexedVersion, Selected};
use crate::{Catalog, CatalogExt};

/// Entity queries on one open catalog, for a caller that asks many (a long-running
/// process, a bench): each query then costs its own SQL and the entities it returns, not
/// opening the catalog and reading the schema again. [`CatalogExt::query_entities`] runs one.
pub struct EntityQueries<'r> {
    pub(crate) repo: &'r Repo,
    pub(crate) cat: Catalog,
    /// The schema last read, with the commit it was read at.
    pub(crate) schema: Option<(Option<Id>, Schema)>,
    /// Entities decoded by earlier queries, by object id (as a page cache keeps what the
    /// last queries read): an object never changes, so an entry is never stale, whatever
    /// was published, packed or collected since. Emptied when it holds
    /// [`DECODED_CACHED`] entities.
    pub(crate) decoded: std::collections::HashMap<Id, Entity>,
}

/// How many decoded entities [`EntityQueries`] keeps.
const DECODED_CACHED: usize = 4096;

impl EntityQueries<'_> {
    /// The entities that `q` selects in the view of operation `op` (whose view is
    /// `view`), in the query's order: an indexed query on the catalog (brought up to date
    /// first if `op` was published since it was opened), or a walk over every entity of
    /// the view when the catalog has not indexed the operation.
    pub fn run(&mut self, op: &Id, view: &View, q: &Query) -> Result<Vec<(Id, Entity)>> {
        let at = view.at_commit();
        let schema = match &self.schema {
            Some((c, schema)) if *c == at => schema,
            _ => &self.schema.insert((at, self.repo.entity_schema(view)?)).1,
        };
        schema.check_type(&q.kind)?;
        // One read of the catalog for the operation's place and the query: the place
        // stays right while it runs, and the catalog is locked and unlocked once.
        let repo = self.repo;
        let decoded = &mut self.decoded;
        let mut read = |obj: &Id| -> Result<Entity> {
            if let Some(e) = decoded.get(obj) {
                return Ok(e.clone());
            }
            let e = repo.entity_object(obj)?;
            if decoded.len() >= DECODED_CACHED {
                decoded.clear();
            }
            decoded.insert(*obj, e.clone());
            Ok(e)
        };
        let hits = self.cat.reading(|cat| match cat.entity_seq(op)? {
            Some(seq) => query_in(cat, seq, q, &mut read).map(Some),
            None => Ok(None),
        })?;
        if let Some(hits) = hits {
            return Ok(hits);
        }
        self.cat.sync(repo)?;
        match self.cat.entity_seq(op)? {
            Some(seq) => query_in(&self.cat, seq, q, &mut read),
            None => repo.scan_entities(view, q),
        }
    }
}

/// The entities that `q` selects in the view of the operation at `seq` of `cat`, each
/// entity object decoded by `read`.
pub(crate) fn query_in(
    cat: &Catalog,
    seq: i64,
    q: &Query,
    read: &mut dyn FnMut(&Id) -> Result<Entity>,
) -> Result<Vec<(Id, Entity)>> {
    let mut decode = |objs: Vec<Id>| -> Result<Vec<(Id, Entity)>> {
        objs.into_iter().map(|o| Ok((o, read(&o)?))).collect()
    };
    match cat.select_entities(seq, q)? {
        Selected::Ordered(objs) => decode(objs),
        Selected::Unordered(objs) => {
            let mut hits = decode(objs)?;
            hits.sort_by(|a, b| a.1.id.cmp(&b.1.id));
            let mut failed = None;
            let mut follow = |id: &str| match cat.entity_at(seq, id) {
                Ok(Some(o)) => match read(&o) {
                    Ok(e) => Some(e),
                    Err(e) => {
                        failed.get_or_insert(e);
                        None
                    }
                },
                Ok(None) => None,
                Err(e) => {
                    failed.get_or_insert(e);
                    None
                }
            };
            let hits = order_hits(hits, q, &mut follow);
            match failed {
                Some(e) => Err(e),
                None => Ok(hits),
            }
        }
    }
}

/// Every version of entity `id`, newest first: each operation after which the
/// entity, as `--at` that operation shows it, differs from the operation before (in
/// `--at` order), read from the catalog's index.
pub(crate) fn history(repo: &Repo, id: &str) -> Result<Vec<IndexedVersion>> {
    // Concurrent heads are merged first, so their edits are in the history.
    repo.head()?;
    let mut versions = repo.catalog()?.entity_versions(id)?;
    // A removal changed every attribute the entity had.
    for i in 1..versions.len() {
        if let (None, Some(prev)) = (versions[i].object, versions[i - 1].object) {
            versions[i].changed = repo
                .entity_object(&prev)?
                .attrs
                .into_iter()
                .map(|(n, _)| n)
                .collect();
        }
    }
    versions.reverse();
    Ok(versions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_entities::{EntityChange, Value};
    use lifeos_store::StoreConfig;

    /// One [`EntityQueries`] kept open across edits answers each operation as a fresh one
    /// does: the entities it decoded before are cached by object, never by entity id.
    #[test]
    fn a_query_handle_kept_open_sees_each_edit_and_each_past_operation() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), StoreConfig::default()).unwrap();
        let q = lifeos_entities::query::parse(r#"task where status = "open""#).unwrap();
        let mut open = repo.entity_queries().unwrap();
        let titles = |hits: Vec<(Id, Entity)>| -> Vec<String> {
            hits.iter()
                .map(|(_, e)| e.get("title").unwrap().render())
                .collect()
        };
        let set = |name: &str, v: &str| {
            let change = EntityChange::Set(vec![(name.into(), Value::parse(v))]);
            repo.change_entity(Some("task:a"), change).unwrap()
        };
        let mut seen = Vec::new();
        for (i, title) in ["first", "second", "third"].into_iter().enumerate() {
            if i == 0 {
                let add = EntityChange::Add {
                    kind: "task".into(),
                    attrs: vec![
                        ("status".into(), Value::parse("open")),
                        ("title".into(), Value::parse(title)),
                    ],
                };
                repo.change_entity(Some("task:a"), add).unwrap();
            } else {
                set("title", title);
            }
            let head = repo.head().unwrap();
            assert_eq!(titles(open.run(&head.id, &head.view, &q).unwrap()), [title]);
            seen.push((head.id, title));
        }
        set("status", "done");
        let head = repo.head().unwrap();
        assert!(open.run(&head.id, &head.view, &q).unwrap().is_empty());
        for (op, title) in seen {
            let state = repo.op_state(&op).unwrap();
            assert_eq!(titles(open.run(&op, &state.view, &q).unwrap()), [title]);
            let fresh = repo.query_entities(&op, &state.view, &q).unwrap();
            assert_eq!(titles(fresh), [title]);
        }
    }
}
