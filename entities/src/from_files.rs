//! Entities derived from committed files: each vCard of a `.vcf` file becomes a
//! `contact`, each event of an `.ics` file an `event`, and each row of a CSV or JSON Lines
//! file that a `[[files]]` rule of the schema (7.10) names becomes an entity of the rule's
//! type. A commit that adds or changes such a file records, in its own operation, the
//! entities it now holds (and removes those it no longer holds); a deleted file removes
//! its entities. Each cites its source: `source_path`, `source_line` (where its card,
//! event or row starts), `source_commit` (the commit that recorded that version) and
//! `source_file` (the file's content id). See `docs/FORMAT.md` (7.11).

use std::collections::BTreeMap;

use bstr::BString;
use lifeos_store::{Id, IdSet, Kind, Transaction};

use crate::names::SOURCE_ATTRS;
use crate::schema::{file_bytes, FileRule, Schema};
use lifeos_vcs::commit::{CommitHook, HookNote, HookReport, Recorded, Unstored};
use lifeos_vcs::error::{Result, VcsError};
use lifeos_vcs::merkle_map::MerkleMap;
use lifeos_vcs::object::entity::{AttrConflict, Entity, Value};
use lifeos_vcs::object::{EntryKind, Event, View};
use lifeos_vcs::repo::Repo;

/// One entity read from a file, before it gets its source attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    /// Its type.
    pub kind: String,
    /// Its id.
    pub id: String,
    /// Its attributes, sorted by name.
    pub attrs: Vec<(String, Value)>,
    /// The line (from 1) where it starts in the file.
    pub line: u64,
}

/// What a file held: its entities, and the parts that could not be read (line, reason).
#[derive(Debug, Default)]
pub struct FileEntities {
    /// The entities, in file order.
    pub entities: Vec<Derived>,
    /// Cards, events or rows skipped: (line, why).
    pub skipped: Vec<(u64, String)>,
}

/// A stable id for an entity of `kind` read from `path`: the hash of the path and the
/// entity's key (its UID, the rule's id column, or else its place in the file).
pub fn derived_id(kind: &str, path: &[u8], key: &str) -> String {
    let mut h = blake3::Hasher::new();
    h.update(path).update(b"\0").update(key.as_bytes());
    format!("{kind}:{}", &h.finalize().to_hex()[..16])
}

/// Whether `path` is a file entities are read from (under `schema`'s rules).
pub fn derives(schema: &Schema, path: &[u8]) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(b".vcf") || lower.ends_with(b".ics") || schema.file_rule(path).is_some()
}

/// Reads the entities of file `path` with content `bytes`.
pub fn read_file(schema: &Schema, path: &[u8], bytes: &[u8]) -> FileEntities {
    let lower = path.to_ascii_lowercase();
    let Ok(text) = std::str::from_utf8(bytes) else {
        return FileEntities {
            entities: vec![],
            skipped: vec![(1, "the file is not UTF-8 text".into())],
        };
    };
    if let Some(rule) = schema.file_rule(path) {
        return rows(schema, rule, path, text);
    }
    if lower.ends_with(b".vcf") {
        components(text, "VCARD", path, "contact")
    } else {
        components(text, "VEVENT", path, "event")
    }
}

/// The `BEGIN:NAME` ... `END:NAME` blocks of a vCard or iCalendar text, each parsed on
/// its own (so one malformed block is skipped and reported, the rest read) with the
/// `ical` crate.
fn components(text: &str, name: &str, path: &[u8], kind: &str) -> FileEntities {
    let mut out = FileEntities::default();
    let begin = format!("BEGIN:{name}");
    let end = format!("END:{name}");
    let mut block: Option<(u64, Vec<&str>)> = None;
    let mut index = 0usize;
    for (i, line) in text.lines().enumerate() {
        let n = i as u64 + 1;
        let trimmed = line.trim_end_matches('\r');
        if trimmed.eq_ignore_ascii_case(&begin) {
            if let Some((start, _)) = block.take() {
                out.skipped.push((start, format!("{begin} without {end}")));
            }
            block = Some((n, vec![trimmed]));
        } else if let Some((start, lines)) = block.as_mut() {
            lines.push(trimmed);
            if trimmed.eq_ignore_ascii_case(&end) {
                let start = *start;
                let body = lines.join("\r\n") + "\r\n";
                block = None;
                index += 1;
                match parse_component(&body, name) {
                    Ok(props) => match entity_of(kind, &props) {
                        Ok((key, attrs)) => out.entities.push(Derived {
                            kind: kind.into(),
                            id: derived_id(kind, path, &key.unwrap_or_else(|| format!("#{index}"))),
                            attrs,
                            line: start,
                        }),
                        Err(why) => out.skipped.push((start, why)),
                    },
                    Err(why) => out.skipped.push((start, why)),
                }
            }
        }
    }
    if let Some((start, _)) = block {
        out.skipped.push((start, format!("{begin} without {end}")));
    }
    out
}

/// A component's properties (name upper-cased, value), parsed by the `ical` crate.
fn parse_component(body: &str, name: &str) -> std::result::Result<Vec<(String, String)>, String> {
    let props: Vec<ical::property::Property> = if name == "VCARD" {
        let mut p = ical::VcardParser::new(std::io::BufReader::new(body.as_bytes()));
        match p.next() {
            Some(Ok(card)) => card.properties,
            Some(Err(e)) => return Err(format!("not a valid vCard: {e}")),
            None => return Err("an empty vCard".into()),
        }
    } else {
        let wrapped = format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\n{body}END:VCALENDAR\r\n");
        let mut p = ical::IcalParser::new(std::io::BufReader::new(wrapped.as_bytes()));
        match p.next() {
            Some(Ok(cal)) => match cal.events.into_iter().next() {
                Some(ev) => ev.properties,
                None => return Err("an empty event".into()),
            },
            Some(Err(e)) => return Err(format!("not a valid iCalendar event: {e}")),
            None => return Err("an empty event".into()),
        }
    };
    Ok(props
        .into_iter()
        .filter_map(|p| Some((p.name.to_ascii_uppercase(), p.value?)))
        .collect())
}

/// Reads an iCalendar or vCard date or date-time (`20261210`, `2026-12-10`,
/// `20261210T090000Z`; a time without a zone is taken as UTC).
fn moment(text: &str) -> Option<Value> {
    let t = text.trim();
    let compact: String = t.chars().filter(|c| *c != '-' && *c != ':').collect();
    if compact.len() == 8 && compact.bytes().all(|b| b.is_ascii_digit()) {
        let d = jiff::civil::Date::strptime("%Y%m%d", &compact).ok()?;
        let z = d.to_zoned(jiff::tz::TimeZone::UTC).ok()?;
        return Some(Value::Date(z.timestamp().as_second().div_euclid(86_400)));
    }
    let (body, _utc) = match compact.strip_suffix('Z') {
        Some(b) => (b, true),
        None => (compact.as_str(), false),
    };
    let dt = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%S", body).ok()?;
    let z = dt.to_zoned(jiff::tz::TimeZone::UTC).ok()?;
    Some(Value::DateTime(z.timestamp().as_millisecond()))
}

/// An entity's key (its UID, if it has one) and attributes.
type Keyed = (Option<String>, Vec<(String, Value)>);

/// The key and attributes of a vCard (`contact`) or event.
fn entity_of(kind: &str, props: &[(String, String)]) -> std::result::Result<Keyed, String> {
    let get = |n: &str| {
        props
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.trim().to_string())
    };
    let text = |v: String| Value::Str(unescape(&v));
    let mut attrs: BTreeMap<String, Value> = BTreeMap::new();
    let pick: &[(&str, &str)] = if kind == "contact" {
        &[
            ("FN", "name"),
            ("EMAIL", "email"),
            ("TEL", "phone"),
            ("ORG", "org"),
            ("NOTE", "note"),
            ("TITLE", "role"),
        ]
    } else {
        &[
            ("SUMMARY", "title"),
            ("LOCATION", "location"),
            ("DESCRIPTION", "description"),
            ("STATUS", "status"),
        ]
    };
    for (prop, attr) in pick {
        if let Some(v) = get(prop).filter(|v| !v.is_empty()) {
            // ORG is several components separated by `;`.
            let v = if *prop == "ORG" {
                v.replace(';', ", ").trim_end_matches(", ").to_string()
            } else {
                v
            };
            attrs.insert(attr.to_string(), text(v));
        }
    }
    let dates: &[(&str, &str)] = if kind == "contact" {
        &[("BDAY", "birthday")]
    } else {
        &[("DTSTART", "start"), ("DTEND", "end")]
    };
    for (prop, attr) in dates {
        if let Some(v) = get(prop) {
            match moment(&v) {
                Some(m) => {
                    attrs.insert(attr.to_string(), m);
                }
                None => return Err(format!("{prop} {v:?} is not a date or date-time")),
            }
        }
    }
    let required = if kind == "contact" { "name" } else { "title" };
    if !attrs.contains_key(required) {
        return Err(format!(
            "no {}: a {kind} needs one",
            if kind == "contact" {
                "FN (formatted name)"
            } else {
                "SUMMARY"
            }
        ));
    }
    if let Some(uid) = get("UID") {
        attrs.insert("uid".into(), Value::Str(uid.clone()));
        return Ok((Some(uid), attrs.into_iter().collect()));
    }
    Ok((None, attrs.into_iter().collect()))
}

/// Undoes the text escapes of vCard and iCalendar (`\n`, `\,`, `\;`, `\\`).
fn unescape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') | Some('N') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The rows of a CSV (header line first) or JSON Lines file under `rule`.
fn rows(schema: &Schema, rule: &FileRule, path: &[u8], text: &str) -> FileEntities {
    let mut out = FileEntities::default();
    let push = |line: u64, fields: Vec<(String, FieldText)>, out: &mut FileEntities| {
        let key = rule
            .id
            .as_ref()
            .and_then(|k| fields.iter().find(|(n, _)| n == k))
            .map(|(_, v)| v.key());
        let key = match (&rule.id, key) {
            (Some(col), None) => {
                out.skipped
                    .push((line, format!("no {col} (the rule's id field)")));
                return;
            }
            (_, Some(k)) => k,
            (None, None) => format!("#{line}"),
        };
        let id = derived_id(&rule.kind, path, &key);
        let mut attrs = Vec::with_capacity(fields.len());
        for (name, v) in fields {
            if let Err(e) = crate::names::check_name("field", &name) {
                out.skipped.push((line, e.to_string()));
                return;
            }
            let value = match v {
                FieldText::Text(t) if t.is_empty() => continue,
                FieldText::Text(t) => schema.parse_value(&id, &rule.kind, &name, &t),
                FieldText::Typed(v) => Ok(v),
            };
            match value {
                Ok(v) => attrs.push((name, v)),
                Err(e) => {
                    out.skipped.push((line, e.to_string()));
                    return;
                }
            }
        }
        // Sorted by name; of a name given twice (a CSV header), the last value is kept.
        attrs.reverse();
        attrs.sort_by(|a, b| a.0.cmp(&b.0));
        attrs.dedup_by(|a, b| a.0 == b.0);
        out.entities.push(Derived {
            kind: rule.kind.clone(),
            id,
            attrs,
            line,
        });
    };
    if path.to_ascii_lowercase().ends_with(b".csv") {
        let mut r = csv::ReaderBuilder::new()
            .flexible(false)
            .from_reader(text.as_bytes());
        let headers: Vec<String> = match r.headers() {
            Ok(h) => h.iter().map(|s| s.trim().to_string()).collect(),
            Err(e) => {
                out.skipped
                    .push((1, format!("the header line cannot be read: {e}")));
                return out;
            }
        };
        let mut rec = csv::StringRecord::new();
        loop {
            let line = r.position().line();
            match r.read_record(&mut rec) {
                Ok(false) => break,
                Ok(true) => {
                    let fields = headers
                        .iter()
                        .zip(rec.iter())
                        .map(|(h, v)| (h.clone(), FieldText::Text(v.to_string())))
                        .collect();
                    push(line, fields, &mut out);
                }
                Err(e) => out.skipped.push((line, format!("not a CSV row: {e}"))),
            }
        }
    } else {
        // Lines are independent: read them on every core, in runs, kept in file order.
        let lines: Vec<(u64, &str)> = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i as u64 + 1, l))
            .collect();
        let runs: Vec<&[(u64, &str)]> = lines.chunks(4096).collect();
        let read_run = |run: &&[(u64, &str)]| {
            let mut part = FileEntities::default();
            for (n, line) in run.iter() {
                json_line(*n, line, &push, &mut part);
            }
            part
        };
        let parts = if runs.len() > 1 {
            lifeos_store::par::map(&runs, read_run)
        } else {
            runs.iter().map(read_run).collect()
        };
        for part in parts {
            out.entities.extend(part.entities);
            out.skipped.extend(part.skipped);
        }
    }
    out
}

/// Types, keys and records one row (line, fields) into a file's entities.
type PushRow<'a> = dyn Fn(u64, Vec<(String, FieldText)>, &mut FileEntities) + Sync + 'a;

/// Reads JSON Lines line `n` into `out` through `push` (which types and keys a row).
fn json_line(n: u64, line: &str, push: &PushRow<'_>, out: &mut FileEntities) {
    if line.trim().is_empty() {
        return;
    }
    let obj = match serde_json::from_str::<serde_json::Value>(line) {
        Ok(serde_json::Value::Object(o)) => o,
        Ok(_) => {
            out.skipped.push((n, "not a JSON object".into()));
            return;
        }
        Err(e) => {
            out.skipped.push((n, format!("not JSON: {e}")));
            return;
        }
    };
    let mut fields = Vec::with_capacity(obj.len());
    for (k, v) in obj {
        let f = match v {
            serde_json::Value::Null => continue,
            serde_json::Value::String(s) => FieldText::Text(s),
            serde_json::Value::Bool(b) => FieldText::Typed(Value::Bool(b)),
            serde_json::Value::Number(x) => match x.as_f64().filter(|f| f.is_finite()) {
                Some(f) => FieldText::Typed(Value::Num(if f == 0.0 { 0.0 } else { f })),
                None => {
                    out.skipped
                        .push((n, format!("{k}: {x} is not a finite number")));
                    return;
                }
            },
            _ => {
                out.skipped.push((
                    n,
                    format!("{k}: lists and objects are not attribute values"),
                ));
                return;
            }
        };
        fields.push((k, f));
    }
    push(n, fields, out);
}

/// A field's value as the file gave it: text (read as the schema types it) or a typed
/// JSON value.
enum FieldText {
    Text(String),
    Typed(Value),
}

impl FieldText {
    fn key(&self) -> String {
        match self {
            FieldText::Text(t) => t.clone(),
            FieldText::Typed(v) => v.render(),
        }
    }
}

/// What a commit did to derived entities: the new entity root, the events, and the
/// parts of files that were skipped (path, line, why).
pub struct DeriveOutcome {
    /// Events for the commit's operation.
    pub events: Vec<Event>,
    /// Skipped cards, events and rows.
    pub skipped: Vec<(BString, u64, String)>,
    /// Attributes set by hand that the file's new version set otherwise: (path, line,
    /// what was replaced); each is kept as a conflict on its entity.
    pub replaced: Vec<(BString, u64, String)>,
}

/// The entity a file's row `d` makes of the recorded entity `before`, merged three ways
/// against the row in the file's previous version (`base`): an attribute set by hand
/// that the file did not change stays, one the file changed takes the file's value (a
/// conflict when it was also set by hand), and links made by hand stay. `None`: nothing
/// to write (the entity is already that, or it was removed by hand and its row did not
/// change).
fn merged_with_file(before: Option<&Entity>, base: Option<&Derived>, d: Derived) -> Option<Entity> {
    let Some(cur) = before else {
        // Removed by hand while its row stayed as it was: it stays removed.
        if base.is_some_and(|b| b.kind == d.kind && b.attrs == d.attrs) {
            return None;
        }
        return Some(Entity {
            kind: d.kind,
            id: d.id,
            attrs: d.attrs,
            links: vec![],
            conflicts: vec![],
        });
    };
    let row = |kind: &str, attrs: &[(String, Value)]| Entity {
        kind: kind.to_string(),
        id: d.id.clone(),
        attrs: attrs.to_vec(),
        links: cur.links.clone(),
        conflicts: vec![],
    };
    let own = |(n, _): &&(String, Value)| !SOURCE_ATTRS.contains(&n.as_str());
    if cur.kind == d.kind && cur.attrs.iter().filter(own).eq(d.attrs.iter()) {
        return None;
    }
    let ours = Entity {
        attrs: cur.attrs.iter().filter(own).cloned().collect(),
        ..cur.clone()
    };
    let base = base.map(|b| row(&b.kind, &b.attrs));
    let merged = lifeos_vcs::object::entity::merge_entity(
        base.as_ref(),
        Some(&ours),
        Some(&row(&d.kind, &d.attrs)),
    )?;
    (merged != ours).then_some(merged)
}

/// What the commit says when the file's value of an attribute replaces one set by hand.
fn replaced_note(id: &str, c: &AttrConflict) -> String {
    let shown = |v: &Option<Value>| v.as_ref().map_or("(unset)".into(), Value::render);
    format!(
        "{id}: {} was set by hand to {}; the file's {} replaces it (both are kept as a conflict: lifeos entity show {id})",
        c.attr,
        shown(&c.ours),
        shown(&c.theirs)
    )
}

/// The commit hook that brings the entities derived from files (vCard, iCalendar, and
/// the CSV and JSON Lines files the schema names) up to date with each commit; what it
/// skipped or replaced becomes the commit's notes, skipped parts first.
#[derive(Debug, Default, Clone, Copy)]
pub struct DeriveEntities;

impl CommitHook for DeriveEntities {
    fn recorded(
        &self,
        repo: &Repo,
        tx: &mut Transaction<'_>,
        view: &mut View,
        rec: &Recorded<'_>,
    ) -> Result<HookReport> {
        let out = derive(
            repo,
            tx,
            view,
            rec.parent_tree,
            rec.tree,
            rec.commit,
            rec.unstored,
        )?;
        let skipped = out.skipped.into_iter().map(|(path, line, why)| HookNote {
            path,
            line,
            text: format!("not recorded as an entity: {why}"),
        });
        let replaced =
            out.replaced
                .into_iter()
                .map(|(path, line, text)| HookNote { path, line, text });
        Ok(HookReport {
            events: out.events,
            notes: skipped.chain(replaced).collect(),
        })
    }
}

/// Brings the entities derived from files up to date with a commit from tree `old`
/// to tree `new` (`commit` its id), in `view`'s entity root, inside `tx`.
fn derive(
    repo: &Repo,
    tx: &mut Transaction<'_>,
    view: &mut View,
    old: Option<&Id>,
    new: &Id,
    commit: &Id,
    unstored: &Unstored<'_>,
) -> Result<DeriveOutcome> {
    let mut out = DeriveOutcome {
        events: Vec::new(),
        skipped: Vec::new(),
        replaced: Vec::new(),
    };
    // A broken schema must not stop files from being recorded: say so and read the
    // vCard and iCalendar files with the built-in types alone.
    let schema = match crate::schema::in_tx(repo, tx, new, unstored) {
        Ok(s) => s,
        Err(VcsError::Refused(why)) => {
            out.skipped.push((
                crate::schema::SCHEMA_FILE.into(),
                0,
                format!(
                    "{why}; until it is fixed, CSV and JSON Lines files are not read as entities"
                ),
            ));
            Schema::default()
        }
        Err(e) => return Err(e),
    };
    let changes = repo.diff_trees_tx_where(tx, old, Some(new), &|p| derives(&schema, p))?;
    if changes.is_empty() {
        return Ok(out);
    }
    let root = view.entities.map(MerkleMap);
    let current = |tx: &Transaction<'_>, id: &str| -> Result<Option<(Id, Entity)>> {
        match &root {
            Some(r) => match r.get(tx, id.as_bytes())? {
                Some(o) => Ok(Some((o, lifeos_vcs::object::entity::decode_in(tx, &o)?))),
                None => Ok(None),
            },
            None => Ok(None),
        }
    };
    let is_file = |e: &Option<lifeos_vcs::object::TreeEntry>| {
        e.as_ref()
            .filter(|e| matches!(e.kind, EntryKind::File | EntryKind::Executable))
            .map(|e| e.id)
    };
    // Each key at most once: a derived id hashes its file's path, so two files never
    // share one, a file's second entry with a key is skipped, and a file's removed
    // ids are ones its new version does not hold.
    let mut edits: Vec<(Vec<u8>, Option<Id>)> = Vec::new();
    for c in &changes {
        // The old version's entities, by id: the base a hand edit is merged against.
        let mut old: Vec<Derived> = match is_file(&c.old) {
            Some(id) => {
                // The old version is the parent commit's: in the store, or written
                // earlier in the same transaction (a series of commits).
                let bytes = match unstored.get(&id) {
                    Some(b) => b.to_vec(),
                    None => {
                        let mut bytes = Vec::new();
                        repo.store().read_file(&id, &mut bytes)?;
                        bytes
                    }
                };
                read_file(&schema, &c.path, &bytes).entities
            }
            None => Vec::new(),
        };
        old.sort_by(|a, b| a.id.cmp(&b.id));
        old.dedup_by(|a, b| a.id == b.id);
        // The entities the new version holds, by walk order (needed only to find the
        // old version's that are gone).
        let mut kept: IdSet<[u8; 32]> = IdSet::default();
        let (first_skipped, first_replaced) = (out.skipped.len(), out.replaced.len());
        if let Some(file) = is_file(&c.new) {
            let bytes = file_bytes(repo, &c.path, &file, unstored)?;
            let read = read_file(&schema, &c.path, &bytes);
            drop(bytes);
            for (line, why) in read.skipped {
                out.skipped.push((c.path.clone(), line, why));
            }
            // Where these entities came from, the same for all of them.
            let source = [
                ("source_commit", Value::Str(commit.to_hex())),
                ("source_file", Value::Str(file.to_hex())),
                (
                    "source_path",
                    Value::Str(lifeos_vcs::path::display(&c.path).into_owned()),
                ),
            ];
            // Written as they are read, in the order the map is walked (the BLAKE3
            // of the id), so that reading them back (the catalog's indexing, a diff)
            // decodes each block once; the sort is stable, so of two entries with
            // one key the first in the file comes first.
            let mut rows: Vec<([u8; 32], Derived)> = read
                .entities
                .into_iter()
                .map(|d| (lifeos_vcs::merkle_map::walk_order(d.id.as_bytes()), d))
                .collect();
            rows.sort_by_key(|r| r.0);
            out.events.reserve(rows.len());
            edits.reserve(rows.len());
            let mut previous = None;
            for (order, d) in rows {
                if previous.replace(order) == Some(order) {
                    out.skipped.push((
                        c.path.clone(),
                        d.line,
                        format!("a second entry with the key of {}", d.id),
                    ));
                    continue;
                }
                let before = if root.is_some() {
                    current(tx, &d.id)?
                } else {
                    None
                };
                let base = old
                    .binary_search_by(|o| o.id.as_str().cmp(&d.id))
                    .ok()
                    .map(|i| &old[i]);
                let line = d.line;
                let Some(mut e) = merged_with_file(before.as_ref().map(|b| &b.1), base, d) else {
                    if !old.is_empty() {
                        kept.insert(order);
                    }
                    continue;
                };
                e.attrs
                    .extend(source.iter().map(|(n, v)| (n.to_string(), v.clone())));
                e.attrs
                    .push(("source_line".into(), Value::Num(line as f64)));
                e.attrs.sort_by(|a, b| a.0.cmp(&b.0));
                let mut type_of = |t: &str| -> Result<Option<String>> {
                    Ok(current(tx, t)?.map(|(_, e)| e.kind))
                };
                if let Err(err) = schema.check(&e, &mut type_of) {
                    out.skipped.push((c.path.clone(), line, err.to_string()));
                    continue;
                }
                if !old.is_empty() {
                    kept.insert(order);
                }
                let new_conflicts = e.conflicts.iter().filter(|k| {
                    before
                        .as_ref()
                        .is_none_or(|(_, b)| !b.conflicts.contains(k))
                });
                for k in new_conflicts {
                    out.replaced
                        .push((c.path.clone(), line, replaced_note(&e.id, k)));
                }
                let (obj, _) = tx.write_grouped(Kind::Entity, &e.encode())?;
                out.events.push(match before {
                    Some((from, b)) => Event::EntityChanged {
                        id: e.id.clone(),
                        paths: lifeos_vcs::object::entity::changed_attrs(&b, &e),
                        from,
                        to: obj,
                    },
                    None => Event::EntityCreated {
                        id: e.id.clone(),
                        entity: obj,
                    },
                });
                edits.push((e.id.into_bytes(), Some(obj)));
            }
        }
        // What was skipped or replaced, in the file's order.
        out.skipped[first_skipped..].sort_by_key(|s| s.1);
        out.replaced[first_replaced..].sort_by_key(|s| s.1);
        let gone = old
            .into_iter()
            .map(|d| d.id)
            .filter(|id| !kept.contains(&lifeos_vcs::merkle_map::walk_order(id.as_bytes())));
        for gone in gone {
            if let Some((obj, _)) = current(tx, &gone)? {
                out.events.push(Event::EntityRemoved {
                    id: gone.clone(),
                    entity: obj,
                });
                edits.push((gone.into_bytes(), None));
            }
        }
    }
    if edits.is_empty() {
        return Ok(out);
    }
    let new_root = match root {
        Some(r) => r.apply(tx, &edits)?.0,
        None => MerkleMap::build(tx, &edits)?,
    };
    view.entities = Some(new_root.0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(attrs: &[(&str, &str)]) -> Derived {
        Derived {
            kind: "event".into(),
            id: "event:1".into(),
            attrs: attrs
                .iter()
                .map(|(n, v)| (n.to_string(), Value::Str(v.to_string())))
                .collect(),
            line: 3,
        }
    }

    #[test]
    fn a_row_merges_with_hand_edits_against_the_files_previous_row() {
        let base = row(&[("location", "Room 4"), ("title", "Stand-up")]);
        let mut recorded = Entity {
            kind: "event".into(),
            id: "event:1".into(),
            attrs: row(&[("location", "Room 4"), ("title", "Stand-up")]).attrs,
            links: vec![("project".into(), "project:q4".into())],
            conflicts: vec![],
        };
        recorded.set("priority", Some(Value::Str("high".into())));
        recorded.set("source_line", Some(Value::Num(3.0)));
        // The row unchanged: nothing to write, the hand edit stays.
        assert_eq!(
            merged_with_file(Some(&recorded), Some(&base), base.clone()),
            None
        );
        // The row changed elsewhere: the file's change and the hand edit both stay.
        let moved = row(&[("location", "Room 4"), ("title", "Daily")]);
        let m = merged_with_file(Some(&recorded), Some(&base), moved).unwrap();
        assert_eq!(m.get("title"), Some(&Value::Str("Daily".into())));
        assert_eq!(m.get("priority"), Some(&Value::Str("high".into())));
        assert_eq!(
            m.get("source_line"),
            None,
            "source attributes are written after"
        );
        assert_eq!(m.links, recorded.links);
        assert!(m.conflicts.is_empty());
        // Both changed one attribute: the file's value, with a conflict naming both.
        recorded.set("location", Some(Value::Str("Room 9".into())));
        let there = row(&[("location", "Room 5"), ("title", "Stand-up")]);
        let m = merged_with_file(Some(&recorded), Some(&base), there.clone()).unwrap();
        assert_eq!(m.get("location"), Some(&Value::Str("Room 5".into())));
        assert_eq!(m.conflicts.len(), 1);
        assert_eq!(m.conflicts[0].ours, Some(Value::Str("Room 9".into())));
        assert!(replaced_note(&m.id, &m.conflicts[0]).starts_with(
            "event:1: location was set by hand to Room 9; the file's Room 5 replaces it"
        ));
        // Removed by hand: stays removed while its row is as it was, comes back when the
        // row changes.
        assert_eq!(merged_with_file(None, Some(&base), base.clone()), None);
        let back = merged_with_file(None, Some(&base), there).unwrap();
        assert_eq!(back.get("location"), Some(&Value::Str("Room 5".into())));
        assert!(back.links.is_empty());
    }

    #[test]
    fn vcards_and_events_are_read_card_by_card_with_their_lines() {
        let vcf = "BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Ann Lee\r\nEMAIL:ann@example.org\r\nORG:Acme;Research\r\nBDAY:1990-05-17\r\nUID:ann-1\r\nEND:VCARD\r\nBEGIN:VCARD\r\nVERSION:3.0\r\nEMAIL:nobody@example.org\r\nEND:VCARD\r\nBEGIN:VCARD\r\nVERSION:3.0\r\nFN:Bo\\, the second\r\nEND:VCARD\r\nBEGIN:VCARD\r\nFN:Cut off\r\n";
        let got = read_file(&Schema::default(), b"people.vcf", vcf.as_bytes());
        assert_eq!(got.entities.len(), 2, "{got:?}");
        let ann = &got.entities[0];
        assert_eq!(ann.line, 1);
        assert_eq!(ann.id, derived_id("contact", b"people.vcf", "ann-1"));
        let get = |d: &Derived, n: &str| {
            d.attrs
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.render())
        };
        assert_eq!(get(ann, "name").as_deref(), Some("Ann Lee"));
        assert_eq!(get(ann, "org").as_deref(), Some("Acme, Research"));
        assert_eq!(get(ann, "birthday").as_deref(), Some("1990-05-17"));
        assert_eq!(
            get(&got.entities[1], "name").as_deref(),
            Some("Bo, the second")
        );
        assert_eq!(got.entities[1].line, 13);
        assert_eq!(got.skipped.len(), 2, "{:?}", got.skipped);
        assert_eq!(got.skipped[0].0, 9);
        assert!(got.skipped[0].1.contains("FN"), "{:?}", got.skipped);
        assert_eq!(got.skipped[1].0, 17);

        let ics = "BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nUID:standup-1\nSUMMARY:Stand-up\nDTSTART:20261210T090000Z\nDTEND:20261210T091500Z\nLOCATION:Room 4\nEND:VEVENT\nBEGIN:VEVENT\nSUMMARY:Holiday\nDTSTART;VALUE=DATE:20261224\nEND:VEVENT\nBEGIN:VEVENT\nSUMMARY:Broken\nDTSTART:soon\nEND:VEVENT\nEND:VCALENDAR\n";
        let got = read_file(&Schema::default(), b"cal/work.ics", ics.as_bytes());
        assert_eq!(got.entities.len(), 2, "{got:?}");
        assert_eq!(
            get(&got.entities[0], "start").as_deref(),
            Some("2026-12-10T09:00:00Z")
        );
        assert_eq!(
            get(&got.entities[1], "start").as_deref(),
            Some("2026-12-24")
        );
        assert_eq!(got.entities[1].line, 10);
        assert_eq!(
            got.skipped,
            vec![(
                14,
                "DTSTART \"soon\" is not a date or date-time".to_string()
            )]
        );
    }

    #[test]
    fn csv_and_json_lines_rows_follow_the_rule_and_bad_rows_are_reported() {
        let schema = Schema::parse(
            "[types.book]\nrequired = [\"title\"]\nfields.title = \"string\"\nfields.pages = \"number\"\nfields.isbn = \"string\"\n\n[[files]]\nglob = \"books/*.csv\"\ntype = \"book\"\nid = \"isbn\"\n\n[[files]]\nglob = \"**/*.jsonl\"\ntype = \"book\"\nid = \"isbn\"\n",
        )
        .unwrap();
        assert!(derives(&schema, b"books/a.csv") && !derives(&schema, b"other/a.csv"));
        let csv = "isbn,title,pages\n111,Dune,412\n222,1984,many\n333,,10\n";
        let got = read_file(&schema, b"books/a.csv", csv.as_bytes());
        // The row without a title is read; the commit refuses it against the schema.
        assert_eq!(got.entities.len(), 2, "{got:?}");
        assert_eq!(got.entities[0].line, 2);
        assert_eq!(got.skipped.len(), 1, "{:?}", got.skipped);
        assert_eq!(got.skipped[0].0, 3);
        assert!(
            got.skipped[0].1.contains("must be a number"),
            "{:?}",
            got.skipped
        );
        let jsonl = "{\"isbn\":\"111\",\"title\":\"Dune\",\"pages\":412}\n[1]\n{\"title\":\"no isbn\"}\n{\"isbn\":\"9\",\"title\":\"1984\"}\n";
        let got = read_file(&schema, b"x/books.jsonl", jsonl.as_bytes());
        assert_eq!(got.entities.len(), 2);
        assert_eq!(got.entities[1].line, 4);
        assert_eq!(got.skipped.iter().map(|s| s.0).collect::<Vec<_>>(), [2, 3]);
    }

    fn write(path: &str, bytes: &str) -> (BString, Option<Vec<u8>>) {
        (path.into(), Some(bytes.as_bytes().to_vec()))
    }

    fn at(i: i64) -> i64 {
        1_767_225_600_000 + i * 60_000
    }

    /// Entities are derived from files written earlier in the same series (their bytes
    /// are not in the store before the transaction commits): a vCard added, then edited.
    #[test]
    fn a_series_derives_entities_from_what_it_wrote_before() {
        let dir = tempfile::tempdir().unwrap();
        let mut repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
        repo.add_commit_hook(std::sync::Arc::new(DeriveEntities));
        let wc = repo.lock_working_copy().unwrap();
        let card = |name: &str| {
            format!("BEGIN:VCARD\r\nVERSION:3.0\r\nFN:{name}\r\nUID:ann-1\r\nEND:VCARD\r\n")
        };
        let series = [
            lifeos_vcs::bulk_commit::SeriesCommit {
                files: vec![write("people.vcf", &card("Ann Lee"))],
                message: b"add".to_vec(),
                time_ms: at(1),
            },
            lifeos_vcs::bulk_commit::SeriesCommit {
                files: vec![write("people.vcf", &card("Ann Lee-Smith"))],
                message: b"rename".to_vec(),
                time_ms: at(2),
            },
        ];
        let out = repo.commit_series(&wc, &series).unwrap();
        assert!(out.notes.is_empty(), "{:?}", out.notes);
        let id = derived_id("contact", b"people.vcf", "ann-1");
        let name = |op: &Id| {
            let view = repo.op_state(op).unwrap().view;
            let (_, e) = crate::EntitiesExt::entity_in(&repo, &view, &id)
                .unwrap()
                .unwrap();
            e.get("name").map(|v| v.render())
        };
        let first = repo.operation(&out.op).unwrap().parents[0];
        assert_eq!(name(&first).as_deref(), Some("Ann Lee"));
        assert_eq!(name(&out.op).as_deref(), Some("Ann Lee-Smith"));
    }
}
