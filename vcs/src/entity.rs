//! Entities: a person's records (people, tasks, events, places, ...) as typed, linked
//! objects whose history is the operation log.
//!
//! An entity object holds its type, its stable id, its attributes and its links. The
//! view's entity root is an [`EntityMap`] from entity id to the entity's current object,
//! so an edit is an operation like any other: `undo`, `op restore` and `--at` cover
//! entities with no more machinery than they use for files. Concurrent operations merge
//! their entity roots key by key, and attribute by attribute inside an entity edited on
//! both sides; an attribute changed on both sides to different values is kept as the
//! newer side's value with a recorded conflict. See `docs/FORMAT.md` (7.9).

use lifeos_store::enc::{DecodeError, Reader, Writer};
use lifeos_store::{Id, Kind, Transaction};

use crate::entity_map::EntityMap;
use crate::error::{Result, VcsError};
use crate::object::{Event, View};
use crate::repo::{now_ms, Repo};

/// Format version of an entity's encoding.
pub const ENTITY_VERSION: u8 = 1;

/// The built-in entity types and the attribute each requires.
pub const BUILTIN_TYPES: [(&str, &str); 8] = [
    ("bookmark", "url"),
    ("contact", "name"),
    ("event", "title"),
    ("note", "title"),
    ("person", "name"),
    ("place", "name"),
    ("project", "name"),
    ("task", "title"),
];

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Text.
    Str(String),
    /// A finite number (never `-0`).
    Num(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A calendar date, as days since 1970-01-01.
    Date(i64),
    /// A moment, as milliseconds since the Unix epoch (UTC).
    DateTime(i64),
}

impl Value {
    /// Reads a value as typed on the command line: `true`/`false`, a number (written as
    /// lifeos writes it back), a date
    /// (`2026-12-10`), a moment (`2026-12-10T09:00:00Z`), or else text.
    pub fn parse(text: &str) -> Value {
        match text {
            "true" => return Value::Bool(true),
            "false" => return Value::Bool(false),
            _ => {}
        }
        let numeric = text
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
            && text.bytes().any(|b| b.is_ascii_digit());
        if let Some(n) = numeric
            .then(|| text.parse::<f64>().ok())
            .flatten()
            .filter(|n| n.is_finite())
        {
            // Only text that reads back the same is a number: "0123" or "+4917..."
            // (a postcode, a phone number) stays text.
            let n = Value::Num(if n == 0.0 { 0.0 } else { n });
            if n.render() == text || text == "-0" {
                return n;
            }
        }
        if let Ok(d) = text.parse::<jiff::civil::Date>() {
            if let Ok(z) = d.to_zoned(jiff::tz::TimeZone::UTC) {
                return Value::Date(z.timestamp().as_second().div_euclid(86_400));
            }
        }
        if let Ok(t) = text.parse::<jiff::Timestamp>() {
            return Value::DateTime(t.as_millisecond());
        }
        Value::Str(text.to_string())
    }

    /// The value as people read it (and as `--json` gives dates and moments).
    pub fn render(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            Value::Num(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{}", *n as i64),
            Value::Num(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Date(d) => jiff::Timestamp::from_second(d.saturating_mul(86_400))
                .map(|t| t.to_zoned(jiff::tz::TimeZone::UTC).date().to_string())
                .unwrap_or_else(|_| format!("day {d}")),
            Value::DateTime(ms) => jiff::Timestamp::from_millisecond(*ms)
                .map(|t| t.to_string())
                .unwrap_or_else(|_| format!("{ms} ms")),
        }
    }

    fn encode(&self, w: &mut Writer) {
        match self {
            Value::Str(s) => w.u8(1).bytes(s.as_bytes()),
            Value::Num(n) => w.u8(2).raw(&n.to_bits().to_le_bytes()),
            Value::Bool(b) => w.u8(3).u8(u8::from(*b)),
            Value::Date(d) => w.u8(4).int(*d),
            Value::DateTime(ms) => w.u8(5).int(*ms),
        };
    }

    fn decode(r: &mut Reader<'_>, what: &'static str) -> std::result::Result<Value, DecodeError> {
        Ok(match r.u8(what)? {
            1 => Value::Str(r.str(what)?.to_string()),
            2 => {
                let b = r.raw(what, 8)?;
                let n = f64::from_bits(u64::from_le_bytes(b.try_into().expect("8 bytes")));
                if !n.is_finite() || (n == 0.0 && n.is_sign_negative()) {
                    return Err(DecodeError::new(
                        what,
                        format!("number {n} is not canonical"),
                    ));
                }
                Value::Num(n)
            }
            3 => match r.u8(what)? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                x => return Err(DecodeError::new(what, format!("bool {x}"))),
            },
            4 => Value::Date(r.int(what)?),
            5 => Value::DateTime(r.int(what)?),
            t => return Err(DecodeError::new(what, format!("value type {t}"))),
        })
    }
}

fn write_opt_value(w: &mut Writer, v: &Option<Value>) {
    match v {
        Some(v) => {
            w.u8(1);
            v.encode(w);
        }
        None => {
            w.u8(0);
        }
    }
}

fn read_opt_value(
    r: &mut Reader<'_>,
    what: &'static str,
) -> std::result::Result<Option<Value>, DecodeError> {
    match r.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(Value::decode(r, what)?)),
        x => Err(DecodeError::new(what, format!("bad option flag {x}"))),
    }
}

/// An attribute that concurrent operations set to different values: the entity keeps the
/// newer side's value (`theirs`) and this record until the attribute is set again.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// The attribute (empty: the entity itself, removed on one side and changed on the
    /// other; it was kept).
    pub attr: String,
    /// The value in the operations' common ancestor.
    pub base: Option<Value>,
    /// The older side's value.
    pub ours: Option<Value>,
    /// The newer side's value.
    pub theirs: Option<Value>,
}

/// An entity: its type, stable id, attributes and links.
#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    /// The type (`task`, `person`, ...).
    pub kind: String,
    /// The stable id (`task:3f9c2a1b`).
    pub id: String,
    /// Attributes, sorted by name.
    pub attrs: Vec<(String, Value)>,
    /// Links (relation, target entity id), sorted.
    pub links: Vec<(String, String)>,
    /// Attributes left in conflict by a merge of concurrent operations, sorted.
    pub conflicts: Vec<Conflict>,
}

impl Entity {
    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_header(Kind::Entity as u8, ENTITY_VERSION);
        w.bytes(self.kind.as_bytes()).bytes(self.id.as_bytes());
        w.uint(self.attrs.len() as u64);
        for (name, v) in &self.attrs {
            w.bytes(name.as_bytes());
            v.encode(&mut w);
        }
        w.uint(self.links.len() as u64);
        for (rel, target) in &self.links {
            w.bytes(rel.as_bytes()).bytes(target.as_bytes());
        }
        w.uint(self.conflicts.len() as u64);
        for c in &self.conflicts {
            w.bytes(c.attr.as_bytes());
            write_opt_value(&mut w, &c.base);
            write_opt_value(&mut w, &c.ours);
            write_opt_value(&mut w, &c.theirs);
        }
        w.finish()
    }

    /// Decodes an entity, refusing unsorted or repeated attributes, links and conflicts.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Entity, DecodeError> {
        const W: &str = "entity";
        let mut r = Reader::new(bytes);
        r.header(W, Kind::Entity as u8, ENTITY_VERSION)?;
        let kind = r.str(W)?.to_string();
        let id = r.str(W)?.to_string();
        let n = r.count(W)?;
        let mut attrs: Vec<(String, Value)> = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.str(W)?.to_string();
            if attrs.last().is_some_and(|(p, _)| *p >= name) {
                return Err(DecodeError::new(W, "attributes are not sorted"));
            }
            attrs.push((name, Value::decode(&mut r, W)?));
        }
        let n = r.count(W)?;
        let mut links: Vec<(String, String)> = Vec::with_capacity(n);
        for _ in 0..n {
            let link = (r.str(W)?.to_string(), r.str(W)?.to_string());
            if links.last().is_some_and(|p| *p >= link) {
                return Err(DecodeError::new(W, "links are not sorted"));
            }
            links.push(link);
        }
        let n = r.count(W)?;
        let mut conflicts: Vec<Conflict> = Vec::with_capacity(n);
        for _ in 0..n {
            let attr = r.str(W)?.to_string();
            if conflicts.last().is_some_and(|p| p.attr >= attr) {
                return Err(DecodeError::new(W, "conflicts are not sorted"));
            }
            conflicts.push(Conflict {
                attr,
                base: read_opt_value(&mut r, W)?,
                ours: read_opt_value(&mut r, W)?,
                theirs: read_opt_value(&mut r, W)?,
            });
        }
        r.finish(W)?;
        Ok(Entity {
            kind,
            id,
            attrs,
            links,
            conflicts,
        })
    }

    /// An entity of `kind` with attributes and links given in any order (sorted here),
    /// and no conflicts: for tests.
    #[cfg(test)]
    pub(crate) fn sample(
        kind: &str,
        id: &str,
        attrs: &[(&str, Value)],
        links: &[(&str, &str)],
    ) -> Entity {
        let mut attrs: Vec<(String, Value)> = attrs
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect();
        attrs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut links: Vec<(String, String)> = links
            .iter()
            .map(|(r, t)| (r.to_string(), t.to_string()))
            .collect();
        links.sort();
        Entity {
            kind: kind.into(),
            id: id.into(),
            attrs,
            links,
            conflicts: vec![],
        }
    }

    /// The value of attribute `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.attrs
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| &self.attrs[i].1)
    }

    /// The entity without the record of having been removed on one side and changed on
    /// the other: a change made after the merge settles it.
    fn settled(mut self) -> Entity {
        self.conflicts.retain(|c| !c.attr.is_empty());
        self
    }

    /// Sets (or with `None` removes) attribute `name`, keeping the list sorted; a new
    /// value settles a conflict on it.
    pub(crate) fn set(&mut self, name: &str, value: Option<Value>) {
        match (
            self.attrs.binary_search_by(|(n, _)| n.as_str().cmp(name)),
            value,
        ) {
            (Ok(i), Some(v)) => self.attrs[i].1 = v,
            (Ok(i), None) => {
                self.attrs.remove(i);
            }
            (Err(i), Some(v)) => self.attrs.insert(i, (name.to_string(), v)),
            (Err(_), None) => {}
        }
        self.conflicts.retain(|c| c.attr != name);
    }
}

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

/// Checks an attribute or relation name: a lowercase letter, then lowercase letters,
/// digits and `_`.
pub fn check_name(what: &str, name: &str) -> Result<()> {
    let mut b = name.bytes();
    let ok = b.next().is_some_and(|c| c.is_ascii_lowercase())
        && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_');
    if !ok {
        return Err(invalid(format!(
            "{what} {name:?} is not a valid name (a lowercase letter, then lowercase letters, digits or _)"
        )));
    }
    if matches!(name, "id" | "type") {
        return Err(invalid(format!(
            "{what} {name:?} is reserved: queries read it as the entity's own {name}"
        )));
    }
    Ok(())
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

/// Orders `hits` (sorted by id) as `q` asks and applies its limit: by the first value of
/// the order path (`follow` reads linked entities), entities without one last either way,
/// ties by id.
fn order_hits(
    mut hits: Vec<(Id, Entity)>,
    q: &crate::query::Query,
    follow: &mut dyn FnMut(&str) -> Option<Entity>,
) -> Vec<(Id, Entity)> {
    if let Some((path, desc)) = &q.order {
        let mut keyed: Vec<(Option<Value>, (Id, Entity))> = hits
            .into_iter()
            .map(|h| {
                (
                    crate::query::values(&h.1, path, follow).into_iter().next(),
                    h,
                )
            })
            .collect();
        keyed.sort_by(|(a, _), (b, _)| match (a, b) {
            (Some(x), Some(y)) => {
                let o = crate::query::sort_order(x, y);
                if *desc {
                    o.reverse()
                } else {
                    o
                }
            }
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        hits = keyed.into_iter().map(|(_, h)| h).collect();
    }
    if let Some(n) = q.limit {
        hits.truncate(n);
    }
    hits
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

/// The entity root of `view`, if it has one.
pub fn root_of(view: &View) -> Option<EntityMap> {
    view.entities.map(EntityMap)
}

/// Entity queries on one open catalog, for a caller that asks many (a long-running
/// process, a bench): each query then costs its own SQL and the entities it returns, not
/// opening the catalog and reading the schema again. [`Repo::query_entities`] runs one.
pub struct EntityQueries<'r> {
    repo: &'r Repo,
    cat: crate::catalog::Catalog,
    /// The schema last read, with the commit it was read at.
    schema: Option<(Option<Id>, crate::schema::Schema)>,
    /// Entities decoded by earlier queries, by object id (as a page cache keeps what the
    /// last queries read): an object never changes, so an entry is never stale, whatever
    /// was published, packed or collected since. Emptied when it holds
    /// [`DECODED_CACHED`] entities.
    decoded: std::collections::HashMap<Id, Entity>,
}

/// How many decoded entities [`EntityQueries`] keeps.
const DECODED_CACHED: usize = 4096;

impl EntityQueries<'_> {
    /// The entities that `q` selects in the view of operation `op` (whose view is
    /// `view`), in the query's order: an indexed query on the catalog (brought up to date
    /// first if `op` was published since it was opened), or a walk over every entity of
    /// the view when the catalog has not indexed the operation.
    pub fn run(
        &mut self,
        op: &Id,
        view: &View,
        q: &crate::query::Query,
    ) -> Result<Vec<(Id, Entity)>> {
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
            Some(seq) => Repo::query_in(cat, seq, q, &mut read).map(Some),
            None => Ok(None),
        })?;
        if let Some(hits) = hits {
            return Ok(hits);
        }
        self.cat.sync(repo)?;
        match self.cat.entity_seq(op)? {
            Some(seq) => Repo::query_in(&self.cat, seq, q, &mut read),
            None => repo.scan_entities(view, q),
        }
    }
}

impl Repo {
    /// The entity `id` as `view` has it: its object id and decoded form.
    pub fn entity_in(&self, view: &View, id: &str) -> Result<Option<(Id, Entity)>> {
        let Some(root) = root_of(view) else {
            return Ok(None);
        };
        match root.get(self.store(), id.as_bytes())? {
            Some(obj) => Ok(Some((obj, self.entity_object(&obj)?))),
            None => Ok(None),
        }
    }

    /// Reads and decodes entity object `obj`.
    pub fn entity_object(&self, obj: &Id) -> Result<Entity> {
        self.read_decoded(obj, Kind::Entity, Entity::decode)
    }

    /// Applies `change` to entity `id` (for [`EntityChange::Add`], `id` may be `None` to
    /// get a fresh one) as one operation; returns the operation (the current one if
    /// nothing changed), the entity's id and its new object (`None` after a removal).
    pub fn change_entity(
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
                format!("{kind}:{}", lifeos_store::store::random_hex(4))
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
            None => EntityMap::build(&mut tx, &edit)?,
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

    /// The entities that `q` selects in the view of operation `op` (whose view is
    /// `view`), in the query's order: an indexed query on the catalog, or a walk over
    /// every entity of the view when the catalog has not indexed the operation.
    pub fn query_entities(
        &self,
        op: &Id,
        view: &View,
        q: &crate::query::Query,
    ) -> Result<Vec<(Id, Entity)>> {
        self.entity_queries()?.run(op, view, q)
    }

    /// Entity queries on one open catalog (see [`EntityQueries`]).
    pub fn entity_queries(&self) -> Result<EntityQueries<'_>> {
        Ok(EntityQueries {
            repo: self,
            cat: self.catalog()?,
            schema: None,
            decoded: std::collections::HashMap::new(),
        })
    }

    /// The entities that `q` selects in the view of the operation at `seq` of `cat`, each
    /// entity object decoded by `read`.
    pub(crate) fn query_in(
        cat: &crate::catalog::Catalog,
        seq: i64,
        q: &crate::query::Query,
        read: &mut dyn FnMut(&Id) -> Result<Entity>,
    ) -> Result<Vec<(Id, Entity)>> {
        let mut decode = |objs: Vec<Id>| -> Result<Vec<(Id, Entity)>> {
            objs.into_iter().map(|o| Ok((o, read(&o)?))).collect()
        };
        match cat.select_entities(seq, q)? {
            crate::entity_index::Selected::Ordered(objs) => decode(objs),
            crate::entity_index::Selected::Unordered(objs) => {
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

    /// [`Repo::query_entities`] by reading every entity of `view`: the reference the
    /// catalog's answers must equal.
    pub fn scan_entities(&self, view: &View, q: &crate::query::Query) -> Result<Vec<(Id, Entity)>> {
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
    pub fn diff_entities(&self, old: &View, new: &View) -> Result<Vec<EntityDiff>> {
        let changes =
            EntityMap::changes(self.store(), root_of(old).as_ref(), root_of(new).as_ref())?;
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

    /// Every version of entity `id`, newest first: each operation after which the
    /// entity, as `--at` that operation shows it, differs from the operation before (in
    /// `--at` order), read from the catalog's index.
    pub fn entity_history(&self, id: &str) -> Result<Vec<crate::entity_index::IndexedVersion>> {
        // Concurrent heads are merged first, so their edits are in the history.
        self.head()?;
        let mut versions = self.catalog()?.entity_versions(id)?;
        // A removal changed every attribute the entity had.
        for i in 1..versions.len() {
            if let (None, Some(prev)) = (versions[i].object, versions[i - 1].object) {
                versions[i].changed = self
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
}

/// The attributes whose values differ between two versions of an entity, with `links`
/// when its links differ; sorted.
/// Each attribute whose value differs from `a` to `b`: (name, old value, new value), by
/// name.
fn attr_changes(a: &Entity, b: &Entity) -> Vec<(String, Option<Value>, Option<Value>)> {
    let mut names: Vec<&String> = a.attrs.iter().chain(&b.attrs).map(|(n, _)| n).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| a.get(n) != b.get(n))
        .map(|n| (n.clone(), a.get(n).cloned(), b.get(n).cloned()))
        .collect()
}

pub(crate) fn changed_attrs(a: &Entity, b: &Entity) -> Vec<String> {
    let mut changed: Vec<String> = attr_changes(a, b).into_iter().map(|(n, ..)| n).collect();
    if a.links != b.links {
        changed.push("links".into());
        changed.sort();
    }
    changed
}

/// Reads an entity object inside a transaction.
pub(crate) fn decode_in(tx: &Transaction<'_>, obj: &Id) -> Result<Entity> {
    let raw = tx.read_object(obj, Kind::Entity)?;
    Entity::decode(&raw).map_err(|source| VcsError::Decode {
        kind: "entity",
        id: *obj,
        source,
    })
}

/// Merges one entity changed on both sides of concurrent operations (`None`: absent on
/// that side): attribute by attribute and link by link against the base; an attribute
/// both sides set differently keeps the newer side's (`theirs`) value and a
/// [`Conflict`]. An entity removed on one side and changed on the other is kept, with a
/// conflict on the entity itself.
pub fn merge_entity(
    base: Option<&Entity>,
    ours: Option<&Entity>,
    theirs: Option<&Entity>,
) -> Option<Entity> {
    let (o, t) = match (ours, theirs) {
        (None, None) => return None,
        (Some(o), None) | (None, Some(o)) => {
            let mut kept = o.clone();
            kept.conflicts.retain(|c| !c.attr.is_empty());
            kept.conflicts.insert(
                0,
                Conflict {
                    attr: String::new(),
                    base: None,
                    ours: None,
                    theirs: None,
                },
            );
            return Some(kept);
        }
        (Some(o), Some(t)) => (o, t),
    };
    let mut merged = t.clone();
    let mut names: Vec<&String> = o
        .attrs
        .iter()
        .chain(&t.attrs)
        .chain(base.map_or(&[][..], |b| &b.attrs[..]))
        .map(|(n, _)| n)
        .collect();
    names.sort();
    names.dedup();
    let mut conflicts: Vec<Conflict> = Vec::new();
    let mut attrs = Vec::new();
    for name in names {
        let vb = base.and_then(|b| b.get(name)).cloned();
        let (vo, vt) = (o.get(name).cloned(), t.get(name).cloned());
        let v = three_way(vb.clone(), vo, vt).unwrap_or_else(|(ours, theirs)| {
            conflicts.push(Conflict {
                attr: name.clone(),
                base: vb,
                ours,
                theirs: theirs.clone(),
            });
            theirs
        });
        attrs.extend(v.map(|v| (name.clone(), v)));
    }
    merged.attrs = attrs;
    let mut links: Vec<(String, String)> = o.links.iter().chain(&t.links).cloned().collect();
    links.extend(base.map_or(Vec::new(), |b| b.links.clone()));
    links.sort();
    links.dedup();
    let has = |e: Option<&Entity>, l: &(String, String)| e.is_some_and(|e| e.links.contains(l));
    merged.links = links
        .into_iter()
        .filter(|l| three_way(has(base, l), has(Some(o), l), has(Some(t), l)).unwrap_or(true))
        .collect();
    // Conflict records merge like attributes (a side that settled one drops it), then the
    // new ones replace any record on the same attribute.
    let record = |e: Option<&Entity>, attr: &str| {
        e.and_then(|e| e.conflicts.iter().find(|c| c.attr == attr).cloned())
    };
    let mut names: Vec<String> = o
        .conflicts
        .iter()
        .chain(&t.conflicts)
        .map(|c| c.attr.clone())
        .collect();
    names.sort();
    names.dedup();
    let mut records: Vec<Conflict> = names
        .iter()
        .filter_map(|a| {
            three_way(record(base, a), record(Some(o), a), record(Some(t), a))
                .unwrap_or_else(|(_, theirs)| theirs)
        })
        .filter(|c| !conflicts.iter().any(|n| n.attr == c.attr))
        .collect();
    records.extend(conflicts);
    records.sort_by(|a, b| a.attr.cmp(&b.attr));
    merged.conflicts = records;
    Some(merged)
}

/// The three-way choice: the value a side changed it to, or the shared value; both sides
/// changed it differently: `Err((ours, theirs))`.
fn three_way<T: PartialEq>(base: T, ours: T, theirs: T) -> std::result::Result<T, (T, T)> {
    if ours == theirs || theirs == base {
        Ok(ours)
    } else if ours == base {
        Ok(theirs)
    } else {
        Err((ours, theirs))
    }
}

/// Merges the entity roots of concurrent operations (given oldest first) against `base`'s
/// root, writing the merged map and merged entities into `tx`.
pub(crate) fn merge_roots(
    tx: &mut Transaction<'_>,
    base: Option<Id>,
    sides: &[Option<Id>],
) -> Result<Option<Id>> {
    crate::entity_map::merge_map_roots(tx, base, sides, &mut |tx, c| {
        let read = |obj: Option<Id>| -> Result<Option<Entity>> {
            obj.map(|o| decode_in(tx, &o)).transpose()
        };
        let (b, o, t) = (read(c.base)?, read(c.ours)?, read(c.theirs)?);
        match merge_entity(b.as_ref(), o.as_ref(), t.as_ref()) {
            Some(e) => Ok(Some(tx.write_object(Kind::Entity, &e.encode())?)),
            None => Ok(None),
        }
    })
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
    /// One [`EntityQueries`] kept open across edits answers each operation as a fresh one
    /// does: the entities it decoded before are cached by object, never by entity id.
    #[test]
    fn a_query_handle_kept_open_sees_each_edit_and_each_past_operation() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), StoreConfig::default()).unwrap();
        let q = crate::query::parse(r#"task where status = "open""#).unwrap();
        let mut open = repo.entity_queries().unwrap();
        let titles = |hits: Vec<(Id, Entity)>| -> Vec<String> {
            hits.iter()
                .map(|(_, e)| e.get("title").unwrap().render())
                .collect()
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
                set(&repo, "task:a", "title", title);
            }
            let head = repo.head().unwrap();
            assert_eq!(titles(open.run(&head.id, &head.view, &q).unwrap()), [title]);
            seen.push((head.id, title));
        }
        set(&repo, "task:a", "status", "done");
        let head = repo.head().unwrap();
        assert!(open.run(&head.id, &head.view, &q).unwrap().is_empty());
        for (op, title) in seen {
            let state = repo.op_state(&op).unwrap();
            assert_eq!(titles(open.run(&op, &state.view, &q).unwrap()), [title]);
            let fresh = repo.query_entities(&op, &state.view, &q).unwrap();
            assert_eq!(titles(fresh), [title]);
        }
    }

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

    #[test]
    fn entities_round_trip_and_refuse_unsorted_fields() {
        let e = Entity {
            kind: "task".into(),
            id: "task:x".into(),
            attrs: vec![
                ("due".into(), Value::parse("2026-12-10")),
                ("n".into(), Value::parse("2.5")),
                ("t".into(), Value::parse("2026-12-10T09:00:00Z")),
                ("title".into(), Value::parse("Pay rent")),
                ("urgent".into(), Value::parse("true")),
            ],
            links: vec![("project".into(), "project:move".into())],
            conflicts: vec![Conflict {
                attr: "title".into(),
                base: None,
                ours: Some(Value::Num(1.0)),
                theirs: Some(Value::Bool(false)),
            }],
        };
        assert_eq!(Entity::decode(&e.encode()).unwrap(), e);
        assert_eq!(e.get("due").unwrap().render(), "2026-12-10");
        assert_eq!(e.get("t").unwrap().render(), "2026-12-10T09:00:00Z");
        assert_eq!(e.get("n").unwrap().render(), "2.5");
        let mut bad = e.clone();
        bad.attrs.swap(0, 1);
        assert!(Entity::decode(&bad.encode()).is_err());
        assert_eq!(Value::parse("-0"), Value::Num(0.0));
        assert_eq!(Value::parse("1e999"), Value::Str("1e999".into()));
        assert_eq!(Value::parse("e"), Value::Str("e".into()));
    }
}
