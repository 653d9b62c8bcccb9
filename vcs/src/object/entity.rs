//! Entity objects (FORMAT 7.9): a person's record (a task, a contact, an event) as its
//! type, stable id, typed attributes, links and merge conflicts; the entity root of a
//! view is a [`MerkleMap`] from entity id to the entity's current object.
//!
//! This is the object format and its merge rule, which the history core needs to merge
//! concurrent operations: attribute by attribute against their common ancestor, an
//! attribute set differently on both sides keeping the newer side's value and a
//! [`AttrConflict`]. What entities mean (the schema, edits, queries, derivation from files)
//! is `lifeos-entities`.

use lifeos_store::codec::{DecodeError, Reader, Writer};
use lifeos_store::{Id, Kind, Transaction};

use crate::error::{Result, VcsError};
use crate::merkle_map::MerkleMap;
use crate::object::View;

/// Format version of an entity's encoding.
pub const ENTITY_VERSION: u8 = 1;

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
pub struct AttrConflict {
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
    pub conflicts: Vec<AttrConflict>,
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
        let mut conflicts: Vec<AttrConflict> = Vec::with_capacity(n);
        for _ in 0..n {
            let attr = r.str(W)?.to_string();
            if conflicts.last().is_some_and(|p| p.attr >= attr) {
                return Err(DecodeError::new(W, "conflicts are not sorted"));
            }
            conflicts.push(AttrConflict {
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

    /// The value of attribute `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.attrs
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| &self.attrs[i].1)
    }

    /// The entity without the record of having been removed on one side and changed on
    /// the other: a change made after the merge settles it.
    pub fn settled(mut self) -> Entity {
        self.conflicts.retain(|c| !c.attr.is_empty());
        self
    }

    /// Sets (or with `None` removes) attribute `name`, keeping the list sorted; a new
    /// value settles a conflict on it.
    pub fn set(&mut self, name: &str, value: Option<Value>) {
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

/// The entity root of `view`, if it has one.
pub fn root_of(view: &View) -> Option<MerkleMap> {
    view.entities.map(MerkleMap)
}

/// Each attribute whose value differs from `a` to `b`: (name, old value, new value), by
/// name.
pub fn attr_changes(a: &Entity, b: &Entity) -> Vec<(String, Option<Value>, Option<Value>)> {
    let mut names: Vec<&String> = a.attrs.iter().chain(&b.attrs).map(|(n, _)| n).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| a.get(n) != b.get(n))
        .map(|n| (n.clone(), a.get(n).cloned(), b.get(n).cloned()))
        .collect()
}

/// The attributes whose values differ between two versions of an entity, with `links`
/// when its links differ; sorted.
pub fn changed_attrs(a: &Entity, b: &Entity) -> Vec<String> {
    let mut changed: Vec<String> = attr_changes(a, b).into_iter().map(|(n, ..)| n).collect();
    if a.links != b.links {
        changed.push("links".into());
        changed.sort();
    }
    changed
}

/// Reads an entity object inside a transaction.
pub fn decode_in(tx: &Transaction<'_>, obj: &Id) -> Result<Entity> {
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
/// [`AttrConflict`]. An entity removed on one side and changed on the other is kept, with a
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
                AttrConflict {
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
    let mut conflicts: Vec<AttrConflict> = Vec::new();
    let mut attrs = Vec::new();
    for name in names {
        let vb = base.and_then(|b| b.get(name)).cloned();
        let (vo, vt) = (o.get(name).cloned(), t.get(name).cloned());
        let v = three_way(vb.clone(), vo, vt).unwrap_or_else(|(ours, theirs)| {
            conflicts.push(AttrConflict {
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
    // AttrConflict records merge like attributes (a side that settled one drops it), then the
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
    let mut records: Vec<AttrConflict> = names
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
    crate::merkle_map::merge_map_roots(tx, base, sides, &mut |tx, c| {
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
            conflicts: vec![AttrConflict {
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
