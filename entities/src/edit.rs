//! Reading, changing and diffing entities: each change one operation, so `undo`, `op
//! restore` and `--at` cover entities with no more machinery than they use for files.
//! The entity object, and how concurrent changes merge, is the object format
//! ([`lifeos_vcs::object::entity`], FORMAT 7.9).

use lifeos_store::{Id, Kind, Transaction};

use lifeos_vcs::error::{Result, VcsError};
use lifeos_vcs::merkle_map::MerkleMap;
use lifeos_vcs::object::entity::{attr_changes, changed_attrs, decode_in, root_of, Entity, Value};
use lifeos_vcs::object::{Event, View};
use lifeos_vcs::repo::{now_ms, Repo};

use crate::names::{check_name, BUILTIN_TYPES};
use crate::query::{order_hits, Query};

/// A change to one entity.
#[derive(Debug, Clone)]
pub enum EntityChange {
    /// Record a new entity of a type with attributes.
    Add {
        /// The type.
        kind: String,
        /// Its attributes.
        attrs: Vec<(String, Value)>,
    },
    /// Set attributes.
    Set(Vec<(String, Value)>),
    /// Remove attributes.
    Unset(Vec<String>),
    /// Link to another entity.
    Link {
        /// The relation.
        rel: String,
        /// The other entity.
        target: String,
    },
    /// Remove a link.
    Unlink {
        /// The relation.
        rel: String,
        /// The other entity.
        target: String,
    },
    /// Remove the entity.
    Remove,
    /// Make the entity what it was in an earlier version (rollback as checkout: the new
    /// operation names the old object).
    Restore(Entity),
}

fn invalid(msg: String) -> VcsError {
    VcsError::Refused(msg)
}

/// The attribute a built-in type requires (`None` for a type declared in the schema).
fn builtin_required(kind: &str) -> Option<&'static str> {
    BUILTIN_TYPES
        .iter()
        .find(|(t, _)| *t == kind)
        .map(|(_, required)| *required)
}

/// Checks an entity id: `TYPE:NAME`, NAME being letters, digits, `.`, `_` or `-`.
fn check_id(kind: &str, id: &str) -> Result<()> {
    let ok = id
        .strip_prefix(kind)
        .and_then(|r| r.strip_prefix(':'))
        .is_some_and(|n| {
            !n.is_empty()
                && n.len() <= 200
                && n.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
        });
    if !ok {
        return Err(invalid(format!(
            "entity id {id:?} is not {kind}:NAME (NAME made of letters, digits, '.', '_' or '-')"
        )));
    }
    Ok(())
}

/// How one entity differs between two views.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityDiff {
    /// The entity's id.
    pub id: String,
    /// Its object and decoded form in the old view (`None`: created since).
    pub old: Option<(Id, Entity)>,
    /// Its object and decoded form in the new view (`None`: removed since).
    pub new: Option<(Id, Entity)>,
    /// Each attribute whose value differs, by name: (name, old value, new value).
    pub attrs: Vec<(String, Option<Value>, Option<Value>)>,
    /// Links the new side has and the old one has not.
    pub linked: Vec<(String, String)>,
    /// Links the old side has and the new one has not.
    pub unlinked: Vec<(String, String)>,
}

impl EntityDiff {
    /// The entity's type (from the new side, else the old).
    pub fn kind(&self) -> &str {
        self.new
            .as_ref()
            .or(self.old.as_ref())
            .map_or("", |(_, e)| e.kind.as_str())
    }

    /// Compares two versions of one entity (either may be absent).
    pub fn of(old: Option<(Id, Entity)>, new: Option<(Id, Entity)>) -> EntityDiff {
        let none = Entity {
            kind: String::new(),
            id: String::new(),
            attrs: vec![],
            links: vec![],
            conflicts: vec![],
        };
        let (a, b) = (
            old.as_ref().map_or(&none, |(_, e)| e),
            new.as_ref().map_or(&none, |(_, e)| e),
        );
        let attrs = attr_changes(a, b);
        let missing = |x: &Entity, y: &Entity| -> Vec<(String, String)> {
            x.links
                .iter()
                .filter(|l| y.links.binary_search(l).is_err())
                .cloned()
                .collect()
        };
        EntityDiff {
            id: if b.id.is_empty() {
                a.id.clone()
            } else {
                b.id.clone()
            },
            linked: missing(b, a),
            unlinked: missing(a, b),
            attrs,
            old,
            new,
        }
    }
}

/// Sets attributes on `e`; a field the schema declares as a reference to another type
/// becomes a link (replacing the field's link), its value the target's id.
fn set_fields(
    schema: &crate::schema::Schema,
    e: &mut Entity,
    attrs: &[(String, Value)],
) -> Result<()> {
    for (name, v) in attrs {
        check_name("attribute", name)?;
        match (schema.field(&e.kind, name), v) {
            (Some(crate::schema::FieldType::Ref(_)), Value::Str(target)) => {
                e.links.retain(|(rel, _)| rel != name);
                let link = (name.clone(), target.clone());
                if let Err(at) = e.links.binary_search(&link) {
                    e.links.insert(at, link);
                }
            }
            (Some(crate::schema::FieldType::Ref(to)), other) => {
                return Err(invalid(format!(
                    "entity {}: field {name} links to a {to}: give the id of one, not {}",
                    e.id,
                    other.render()
                )))
            }
            _ => e.set(name, Some(v.clone())),
        }
    }
    Ok(())
}

/// What a repository does with entities (every front end calls these).
pub trait EntitiesExt {
    /// The entity `id` as `view` has it: its object id and decoded form.
    fn entity_in(&self, view: &View, id: &str) -> Result<Option<(Id, Entity)>>;
    /// Reads and decodes entity object `obj`.
    fn entity_object(&self, obj: &Id) -> Result<Entity>;
    /// Applies `change` to entity `id` (for [`EntityChange::Add`], `id` may be `None` to
    /// get a fresh one) as one operation; returns the operation (the current one if
    /// nothing changed), the entity's id and its new object (`None` after a removal).
    fn change_entity(
        &self,
        id: Option<&str>,
        change: EntityChange,
    ) -> Result<(Id, String, Option<Id>)>;
    /// The entities query `q` selects in `view`, found by reading every entity of it:
    /// the reference the catalog's indexed answers must equal.
    fn scan_entities(&self, view: &View, q: &Query) -> Result<Vec<(Id, Entity)>>;
    /// The entities that differ from view `old` to view `new`, by id: found by
    /// descending only where the two entity maps differ.
    fn diff_entities(&self, old: &View, new: &View) -> Result<Vec<EntityDiff>>;
    /// The schema in force in `view`: `lifeos.schema.toml` as committed at `@` (the
    /// built-in types alone when there is none).
    fn entity_schema(&self, view: &View) -> Result<crate::schema::Schema>;
}

impl EntitiesExt for Repo {
    fn entity_schema(&self, view: &View) -> Result<crate::schema::Schema> {
        crate::schema::in_view(self, view)
    }

    /// The entity `id` as `view` has it: its object id and decoded form.
    fn entity_in(&self, view: &View, id: &str) -> Result<Option<(Id, Entity)>> {
        let Some(root) = root_of(view) else {
            return Ok(None);
        };
        match root.get(self.store(), id.as_bytes())? {
            Some(obj) => Ok(Some((obj, self.entity_object(&obj)?))),
            None => Ok(None),
        }
    }

    /// Reads and decodes entity object `obj`.
    fn entity_object(&self, obj: &Id) -> Result<Entity> {
        self.read_decoded(obj, Kind::Entity, Entity::decode)
    }

    /// Applies `change` to entity `id` (for [`EntityChange::Add`], `id` may be `None` to
    /// get a fresh one) as one operation; returns the operation (the current one if
    /// nothing changed), the entity's id and its new object (`None` after a removal).
    fn change_entity(
        &self,
        id: Option<&str>,
        change: EntityChange,
    ) -> Result<(Id, String, Option<Id>)> {
        let start = now_ms();
        let head = self.head()?;
        let schema = self.entity_schema(&head.view)?;
        let mut tx = self.store().transaction()?;
        let root = root_of(&head.view);
        let id = match (&change, id) {
            (EntityChange::Add { kind, .. }, None) => {
                format!("{kind}:{}", lifeos_store::fsutil::random_hex(4))
            }
            (_, Some(id)) => id.to_string(),
            (_, None) => return Err(invalid("which entity? give its id".into())),
        };
        let lookup = |tx: &Transaction<'_>, key: &str| match &root {
            Some(r) => r.get(tx, key.as_bytes()),
            None => Ok(None),
        };
        let current = match lookup(&tx, &id)? {
            Some(obj) => Some((obj, decode_in(&tx, &obj)?)),
            None => None,
        };
        let existing = || {
            current.clone().map(|(_, e)| e).ok_or_else(|| {
                invalid(format!(
                    "no entity {id}; an id looks like task:3f9c2a1b (`lifeos entity add` prints it)"
                ))
            })
        };
        let next = match &change {
            EntityChange::Add { kind, attrs } => {
                schema.check_type(kind)?;
                check_id(kind, &id)?;
                if current.is_some() {
                    return Err(invalid(format!("entity {id} exists already")));
                }
                let mut e = Entity {
                    kind: kind.clone(),
                    id: id.clone(),
                    attrs: Vec::new(),
                    links: Vec::new(),
                    conflicts: Vec::new(),
                };
                set_fields(&schema, &mut e, attrs)?;
                if let Some(required) = builtin_required(kind).filter(|r| e.get(r).is_none()) {
                    return Err(invalid(format!(
                        "entity {id}: a {kind} needs {required}=... (it is missing)"
                    )));
                }
                Some(e)
            }
            EntityChange::Set(attrs) => {
                let mut e = existing()?.settled();
                set_fields(&schema, &mut e, attrs)?;
                Some(e)
            }
            EntityChange::Unset(names) => {
                let mut e = existing()?.settled();
                let required = builtin_required(&e.kind);
                for name in names {
                    if Some(name.as_str()) == required {
                        return Err(invalid(format!(
                            "entity {id}: {name} is required for a {}; set it to another value instead",
                            e.kind
                        )));
                    }
                    if e.get(name).is_none() {
                        return Err(invalid(format!("entity {id} has no attribute {name}")));
                    }
                    e.set(name, None);
                }
                Some(e)
            }
            EntityChange::Link { rel, target } | EntityChange::Unlink { rel, target } => {
                let mut e = existing()?.settled();
                check_name("relation", rel)?;
                let link = (rel.clone(), target.clone());
                let has = e.links.binary_search(&link);
                match (&change, has) {
                    (EntityChange::Link { .. }, Err(at)) => {
                        if lookup(&tx, target)?.is_none() {
                            return Err(invalid(format!(
                                "cannot link {id} to {target}: there is no entity {target}"
                            )));
                        }
                        e.links.insert(at, link);
                    }
                    (EntityChange::Unlink { .. }, Ok(at)) => {
                        e.links.remove(at);
                    }
                    (EntityChange::Unlink { .. }, Err(_)) => {
                        return Err(invalid(format!("{id} has no link {rel} {target}")));
                    }
                    _ => {}
                }
                Some(e)
            }
            EntityChange::Remove => {
                existing()?;
                None
            }
            EntityChange::Restore(old) => {
                if old.id != id {
                    return Err(invalid(format!("{} is not entity {id}", old.id)));
                }
                Some(old.clone())
            }
        };
        // A rollback restores what was recorded, whatever the schema says now.
        if let Some(e) = next
            .as_ref()
            .filter(|_| !matches!(change, EntityChange::Restore(_)))
        {
            schema.check(e, &mut |target| {
                Ok(match lookup(&tx, target)? {
                    Some(obj) => Some(decode_in(&tx, &obj)?.kind),
                    None => None,
                })
            })?;
        }
        let obj = match &next {
            Some(e) => Some(tx.write_object(Kind::Entity, &e.encode())?),
            None => None,
        };
        let old = current.as_ref().map(|(o, _)| *o);
        if obj == old {
            return Ok((head.id, id, obj));
        }
        let (event, verb) = match (&change, &current, obj) {
            (
                EntityChange::Link { rel, target } | EntityChange::Unlink { rel, target },
                _,
                Some(o),
            ) => {
                let linked = matches!(change, EntityChange::Link { .. });
                (
                    Event::EntityLinked {
                        id: id.clone(),
                        rel: rel.clone(),
                        target: target.clone(),
                        linked,
                        entity: o,
                    },
                    if linked { "link" } else { "unlink" },
                )
            }
            (_, Some((from, before)), Some(to)) => (
                Event::EntityChanged {
                    id: id.clone(),
                    paths: changed_attrs(before, next.as_ref().expect("an entity")),
                    from: *from,
                    to,
                },
                if matches!(change, EntityChange::Restore(_)) {
                    "restore"
                } else {
                    "set"
                },
            ),
            (_, None, Some(o)) => (
                Event::EntityCreated {
                    id: id.clone(),
                    entity: o,
                },
                if matches!(change, EntityChange::Restore(_)) {
                    "restore"
                } else {
                    "add"
                },
            ),
            (_, Some((last, _)), None) => (
                Event::EntityRemoved {
                    id: id.clone(),
                    entity: *last,
                },
                "rm",
            ),
            (_, None, None) => unreachable!("nothing to remove was refused above"),
        };
        let edit = [(id.as_bytes().to_vec(), obj)];
        let new_root = match root {
            Some(r) => r.apply(&mut tx, &edit)?.0,
            None => MerkleMap::build(&mut tx, &edit)?,
        };
        let mut view = head.view.clone();
        view.entities = Some(new_root.0);
        let op = self.publish(
            tx,
            &[head.id],
            view,
            &format!("entity {verb} {id}"),
            vec![event],
            start,
        )?;
        Ok((op, id, obj))
    }

    /// The entities query `q` selects in `view`, found by reading every entity of it:
    /// the reference the catalog's indexed answers must equal.
    fn scan_entities(&self, view: &View, q: &Query) -> Result<Vec<(Id, Entity)>> {
        self.entity_schema(view)?.check_type(&q.kind)?;
        let Some(root) = root_of(view) else {
            return Ok(Vec::new());
        };
        let mut all = std::collections::HashMap::new();
        for (_, obj) in root.entries(self.store())? {
            let e = self.entity_object(&obj)?;
            all.insert(e.id.clone(), (obj, e));
        }
        let mut follow = |id: &str| all.get(id).map(|(_, e)| e.clone());
        let mut hits: Vec<(Id, Entity)> = Vec::new();
        for (obj, e) in all.values() {
            let pass = e.kind == q.kind
                && q.filter
                    .as_ref()
                    .is_none_or(|f| crate::query::matches(e, f, &mut follow));
            if pass {
                hits.push((*obj, e.clone()));
            }
        }
        hits.sort_by(|a, b| a.1.id.cmp(&b.1.id));
        Ok(order_hits(hits, q, &mut follow))
    }

    /// The entities that differ from view `old` to view `new`, by id: found by
    /// descending only where the two entity maps differ.
    fn diff_entities(&self, old: &View, new: &View) -> Result<Vec<EntityDiff>> {
        let changes =
            MerkleMap::changes(self.store(), root_of(old).as_ref(), root_of(new).as_ref())?;
        let read = |o: Option<Id>| -> Result<Option<(Id, Entity)>> {
            o.map(|o| Ok((o, self.entity_object(&o)?))).transpose()
        };
        let mut out = changes
            .into_iter()
            .map(|c| Ok(EntityDiff::of(read(c.old)?, read(c.new)?)))
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_store::StoreConfig;

    fn set(repo: &Repo, id: &str, name: &str, v: &str) {
        repo.change_entity(
            Some(id),
            EntityChange::Set(vec![(name.into(), Value::parse(v))]),
        )
        .unwrap();
    }

    /// Publishes, with `parent` as the only parent (so concurrently with whatever else
    /// descends from it), a change setting `name` of entity `id`.
    fn set_from(repo: &Repo, parent: &Id, id: &str, name: &str, v: &str) {
        let state = repo.op_state(parent).unwrap();
        let mut tx = repo.store().transaction().unwrap();
        let root = root_of(&state.view).unwrap();
        let obj = root.get(&tx, id.as_bytes()).unwrap().unwrap();
        let mut e = decode_in(&tx, &obj).unwrap();
        e.set(name, Some(Value::parse(v)));
        let new = tx.write_object(Kind::Entity, &e.encode()).unwrap();
        let (root, _) = root
            .apply(&mut tx, &[(id.as_bytes().to_vec(), Some(new))])
            .unwrap();
        let mut view = state.view.clone();
        view.entities = Some(root.0);
        repo.publish(tx, &[*parent], view, "concurrent edit", vec![], now_ms())
            .unwrap();
    }

    /// Two operations made from the same parent: edits of different entities, and of
    /// different attributes of one entity, are all kept; one attribute set differently
    /// on both sides keeps the newer value and records a conflict; nothing is lost.
    #[test]
    fn concurrent_entity_edits_merge_and_conflicts_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), StoreConfig::default()).unwrap();
        for (id, title) in [("task:a", "A"), ("task:b", "B")] {
            repo.change_entity(
                Some(id),
                EntityChange::Add {
                    kind: "task".into(),
                    attrs: vec![("title".into(), Value::parse(title))],
                },
            )
            .unwrap();
        }
        let parent = repo.head().unwrap().id;
        set(&repo, "task:a", "status", "open");
        set(&repo, "task:a", "owner", "ann");
        set_from(&repo, &parent, "task:b", "status", "done");
        set_from(&repo, &parent, "task:a", "due", "2026-12-10");
        // The next command sees three heads and merges them.
        let head = repo.head().unwrap();
        assert_eq!(head.op.parents.len(), 3);
        let a = repo.entity_in(&head.view, "task:a").unwrap().unwrap().1;
        let b = repo.entity_in(&head.view, "task:b").unwrap().unwrap().1;
        assert_eq!(a.get("status"), Some(&Value::Str("open".into())));
        assert_eq!(a.get("owner"), Some(&Value::Str("ann".into())));
        assert_eq!(a.get("due"), Some(&Value::parse("2026-12-10")));
        assert_eq!(b.get("status"), Some(&Value::Str("done".into())));
        assert!(a.conflicts.is_empty() && b.conflicts.is_empty());

        let parent = repo.head().unwrap().id;
        set(&repo, "task:a", "status", "blocked");
        set_from(&repo, &parent, "task:a", "status", "waiting");
        let head = repo.head().unwrap();
        let a = repo.entity_in(&head.view, "task:a").unwrap().unwrap().1;
        assert_eq!(a.conflicts.len(), 1, "{a:?}");
        let c = &a.conflicts[0];
        assert_eq!(c.attr, "status");
        assert_eq!(c.base, Some(Value::Str("open".into())));
        let sides = [c.ours.clone(), c.theirs.clone()];
        assert!(sides.contains(&Some(Value::Str("blocked".into()))));
        assert!(sides.contains(&Some(Value::Str("waiting".into()))));
        assert_eq!(a.get("status"), c.theirs.as_ref());
        // Setting the attribute again settles the conflict.
        set(&repo, "task:a", "status", "done");
        let a = repo
            .entity_in(&repo.head().unwrap().view, "task:a")
            .unwrap()
            .unwrap()
            .1;
        assert!(a.conflicts.is_empty());
    }
}
