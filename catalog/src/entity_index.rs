//! The catalog's index of entities: every entity object each operation's view holds,
//! with the range of operations it was live in, and the values queries compare, so that
//! `lifeos query` (now or `--at` a past operation) is an indexed SQL query rather than a
//! walk over every entity. Derived from the objects like the rest of the catalog (see
//! `migrations/0005_entities.sql`); [`crate::Repo::scan_entities`] is the reference it
//! must agree with.

use std::path::Path;

use lifeos_store::Id;
use rusqlite::types::Value as Sql;
use rusqlite::{params, OptionalExtension};

use crate::{db_err, Catalog};
use lifeos_entities::query::{Filter, Op, Query};
use lifeos_entities::{EntitiesExt, Entity, Value};
use lifeos_vcs::error::{Result, VcsError};
use lifeos_vcs::merkle_map::MerkleMap;
use lifeos_vcs::repo::Repo;

/// A condition fewer rows than this pass drives a query (see [`Catalog::select_entities`]).
pub(crate) const SELECTIVE: i64 = 500;

/// `to_seq` of a version that is still current.
const CURRENT: i64 = i64::MAX;

/// The SQL function that folds text for `contains` exactly as the scan does
/// (`str::to_lowercase`).
pub(crate) const FOLD: &str = "lifeos_fold";

/// Registers [`FOLD`] on a catalog connection.
pub(crate) fn register(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    conn.create_scalar_function(
        FOLD,
        1,
        rusqlite::functions::FunctionFlags::SQLITE_UTF8
            | rusqlite::functions::FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(match ctx.get_raw(0) {
                rusqlite::types::ValueRef::Text(t) => {
                    Some(String::from_utf8_lossy(t).to_lowercase())
                }
                _ => None,
            })
        },
    )
}

/// A value as the index stores it: its rank (the order kinds sort in, as
/// [`lifeos_entities::query::sort_order`] has it) and an SQL value that compares as
/// [`lifeos_entities::query::compare`] does within the rank.
fn stored(v: &Value) -> (i64, Sql) {
    match v {
        Value::Str(s) => (0, Sql::Text(s.clone())),
        Value::Num(n) => (1, Sql::Real(*n)),
        Value::Bool(b) => (2, Sql::Integer(i64::from(*b))),
        Value::Date(d) => (3, Sql::Integer(d.saturating_mul(86_400_000))),
        Value::DateTime(ms) => (3, Sql::Integer(*ms)),
    }
}

/// Brings the entity index up to date with the `operations` table (run inside the
/// catalog's sync transaction, after the new operations are in it). Operations that sort
/// after every indexed one are appended; one that sorts among them (a concurrent
/// operation published late, a clock that went back) rewinds the index to just before it
/// and replays from there, so the rows always describe the operations in `--at` order.
pub(crate) fn sync(
    tx: &rusqlite::Transaction<'_>,
    repo: &Repo,
    path: &Path,
    bulk: usize,
) -> Result<()> {
    let e = |e| db_err(path, e);
    let first_new: Option<(i64, Vec<u8>)> = tx
        .query_row(
            "SELECT end_ms, id FROM operations WHERE id NOT IN (SELECT op FROM entity_ops)
             ORDER BY end_ms, id LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(e)?;
    let Some((first_ms, first_id)) = first_new else {
        return Ok(());
    };
    // The first indexed operation that sorts after the new one: replay from there.
    let rewind: Option<i64> = tx
        .query_row(
            "SELECT min(seq) FROM entity_ops WHERE (end_ms, op) > (?1, ?2)",
            params![first_ms, first_id],
            |r| r.get(0),
        )
        .map_err(e)?;
    if let Some(k) = rewind {
        tx.execute_batch(&format!(
            "DELETE FROM entity_values WHERE row IN (SELECT row FROM entity_versions WHERE from_seq >= {k});
             DELETE FROM entity_links WHERE row IN (SELECT row FROM entity_versions WHERE from_seq >= {k});
             DELETE FROM entity_versions WHERE from_seq >= {k};
             UPDATE entity_versions SET to_seq = {CURRENT} WHERE to_seq >= {k} AND to_seq != {CURRENT};
             DELETE FROM entity_ops WHERE seq >= {k};"
        ))
        .map_err(e)?;
    }
    // Replay after the last indexed operation: (seq, end_ms, op id, entity root).
    let (mut seq, after_ms, after_op, mut root) = tx
        .query_row(
            "SELECT seq, end_ms, op, root FROM entity_ops ORDER BY seq DESC LIMIT 1",
            [],
            |r| {
                let root: Option<Vec<u8>> = r.get(3)?;
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                    root.as_deref().and_then(blob_id),
                ))
            },
        )
        .optional()
        .map_err(e)?
        .unwrap_or((0, i64::MIN, Vec::new(), None));
    let replay: Vec<(Vec<u8>, i64)> = {
        let mut st = tx
            .prepare(
                "SELECT id, end_ms FROM operations WHERE (end_ms, id) > (?1, ?2) ORDER BY end_ms, id",
            )
            .map_err(e)?;
        let rows = st
            .query_map(params![after_ms, after_op], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(e)?;
        rows.collect::<rusqlite::Result<_>>().map_err(e)?
    };
    let mut w = Writer::new(tx, path, bulk)?;
    for (op, end_ms) in replay {
        let id = blob_id(&op).ok_or_else(|| bad_row(path, "an operation id"))?;
        let state = repo.op_state(&id)?;
        let new_root = state.view.entities;
        seq += 1;
        if new_root != root {
            w.apply(repo, seq, root, new_root)?;
            root = new_root;
        }
        w.ops
            .execute(params![seq, op, end_ms, root.map(|r| r.0.to_vec())])
            .map_err(e)?;
    }
    Ok(())
}

fn blob_id(b: &[u8]) -> Option<Id> {
    Some(Id(b.try_into().ok()?))
}

fn bad_row(path: &Path, what: &str) -> VcsError {
    VcsError::Catalog {
        path: path.into(),
        reason: format!("{what} in the catalog is not 32 bytes; run `lifeos reindex`"),
    }
}

/// From this many changed entities in one operation on, the index's secondary indexes
/// are dropped and built again after the rows are in (sorting once beats a million
/// inserts at random places).
pub(crate) const BULK: usize = 50_000;

/// The indexes a bulk load builds again: every `CREATE INDEX` of migration 5 but the one
/// that closing versions reads.
fn rebuilt_indexes() -> impl Iterator<Item = (&'static str, &'static str)> {
    // Level 8 redefines the value index: a later definition replaces an earlier one.
    let mut defs: Vec<(&'static str, &'static str)> = Vec::new();
    for l in [
        include_str!("../../migrations/0005_entities.sql"),
        include_str!("../../migrations/0008_value_rows.sql"),
    ]
    .into_iter()
    .flat_map(str::lines)
    .filter(|l| l.starts_with("CREATE INDEX") && !l.contains("entity_versions_by_eid"))
    {
        let Some(name) = l.split_whitespace().nth(5) else {
            continue;
        };
        match defs.iter_mut().find(|d| d.0 == name) {
            Some(d) => d.1 = l,
            None => defs.push((name, l)),
        }
    }
    defs.into_iter()
}

/// Prepared statements for writing the index.
struct Writer<'a> {
    tx: &'a rusqlite::Transaction<'a>,
    bulk: usize,
    path: &'a Path,
    ops: rusqlite::Statement<'a>,
    close: rusqlite::Statement<'a>,
    close_all: rusqlite::Statement<'a>,
    version: rusqlite::Statement<'a>,
    value: rusqlite::Statement<'a>,
    link: rusqlite::Statement<'a>,
}

impl<'a> Writer<'a> {
    fn new(tx: &'a rusqlite::Transaction<'a>, path: &'a Path, bulk: usize) -> Result<Writer<'a>> {
        let p = |sql: &str| tx.prepare(sql).map_err(|e| db_err(path, e));
        Ok(Writer {
            tx,
            bulk,
            path,
            ops: p("INSERT INTO entity_ops (seq, op, end_ms, root) VALUES (?1, ?2, ?3, ?4)")?,
            close: p(&format!(
                "UPDATE entity_versions SET to_seq = ?1 WHERE eid = ?2 AND to_seq = {CURRENT}"
            ))?,
            close_all: p(&format!(
                "UPDATE entity_versions SET to_seq = ?1 WHERE to_seq = {CURRENT}"
            ))?,
            version: p(&format!(
                "INSERT INTO entity_versions (eid, type, object, from_seq, to_seq, changed)
                 VALUES (?1, ?2, ?3, ?4, {CURRENT}, ?5) RETURNING row"
            ))?,
            value: p(
                "INSERT INTO entity_values (row, eid, name, pos, rank, v) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?,
            link: p("INSERT INTO entity_links (row, rel, pos, target) VALUES (?1, ?2, ?3, ?4)")?,
        })
    }

    /// Records the change from entity root `old` to `new` as operation `seq`.
    fn apply(&mut self, repo: &Repo, seq: i64, old: Option<Id>, new: Option<Id>) -> Result<()> {
        let e = |e| db_err(self.path, e);
        if old.is_some() && new.is_none() {
            self.close_all.execute([seq]).map_err(e)?;
            return Ok(());
        }
        let changes = MerkleMap::changes(
            repo.store(),
            old.map(MerkleMap).as_ref(),
            new.map(MerkleMap).as_ref(),
        )?;
        let bulk = changes.len() >= self.bulk;
        if bulk {
            for (name, _) in rebuilt_indexes() {
                self.tx
                    .execute_batch(&format!("DROP INDEX IF EXISTS {name}"))
                    .map_err(e)?;
            }
        }
        for c in changes {
            if c.old.is_some() {
                // Ids are text in the index (keys are the ids' bytes).
                let eid = String::from_utf8_lossy(&c.key);
                self.close.execute(params![seq, eid]).map_err(e)?;
            }
            if let Some(obj) = c.new {
                let ent = repo.entity_object(&obj)?;
                let changed = match c.old {
                    Some(old) => {
                        lifeos_vcs::object::entity::changed_attrs(&repo.entity_object(&old)?, &ent)
                    }
                    None => ent.attrs.iter().map(|(n, _)| n.clone()).collect(),
                };
                self.insert(seq, &obj, &ent, &changed.join(","))?;
            }
        }
        if bulk {
            for (_, create) in rebuilt_indexes() {
                self.tx.execute_batch(create).map_err(e)?;
            }
        }
        Ok(())
    }

    fn insert(&mut self, seq: i64, obj: &Id, ent: &Entity, changed: &str) -> Result<()> {
        let e = |e| db_err(self.path, e);
        let row: i64 = self
            .version
            .query_row(params![ent.id, ent.kind, &obj.0[..], seq, changed], |r| {
                r.get(0)
            })
            .map_err(e)?;
        for (name, v) in &ent.attrs {
            if matches!(name.as_str(), "id" | "type") {
                continue; // queries read the entity's own id and type under these names
            }
            let (rank, v) = stored(v);
            self.value
                .execute(params![row, ent.id, name, 0, rank, v])
                .map_err(e)?;
        }
        let mut pos = 0;
        for (i, (rel, target)) in ent.links.iter().enumerate() {
            pos = if i > 0 && ent.links[i - 1].0 == *rel {
                pos + 1
            } else {
                0
            };
            self.link
                .execute(params![row, rel, pos, target])
                .map_err(e)?;
            // A relation is read as its targets where no attribute has its name.
            if ent.get(rel).is_none() && !matches!(rel.as_str(), "id" | "type") {
                self.value
                    .execute(params![row, ent.id, rel, pos, 0, target])
                    .map_err(e)?;
            }
        }
        Ok(())
    }
}

/// SQL text under construction and its numbered parameters.
#[derive(Default)]
struct Build {
    params: Vec<Sql>,
    aliases: usize,
}

impl Build {
    fn param(&mut self, v: Sql) -> String {
        self.params.push(v);
        format!("?{}", self.params.len())
    }

    fn alias(&mut self, prefix: &str) -> String {
        self.aliases += 1;
        format!("{prefix}{}", self.aliases)
    }

    /// What comparison `cmp` (none: any value will do) asks of one value, given the SQL
    /// of its rank and of the value: [`lifeos_entities::query::matches`] for one value.
    fn cond(&mut self, cmp: Option<(Op, &Value)>, rank: &str, v: &str) -> String {
        let Some((op, lit)) = cmp else {
            return "1".into();
        };
        let sym = match op {
            Op::Contains => {
                return match lit {
                    Value::Str(t) => {
                        let p = self.param(Sql::Text(t.to_lowercase()));
                        format!("({rank} = 0 AND instr({FOLD}({v}), {p}) > 0)")
                    }
                    _ => "0".into(),
                }
            }
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        };
        let (k, lit) = stored(lit);
        let p = self.param(lit);
        if op == Op::Ne {
            // Values that do not compare with the literal differ from it.
            format!("({rank} != {k} OR {v} != {p})")
        } else {
            format!("({rank} = {k} AND {v} {sym} {p})")
        }
    }

    /// Whether some value that `path` reaches from the entity row `ent` passes `cmp`
    /// ([`lifeos_entities::query::values`] in SQL; `?1` is the operation's place).
    fn path(&mut self, path: &[String], ent: &str, cmp: Option<(Op, &Value)>) -> String {
        match path {
            [] => "0".into(),
            [name] if name == "id" => self.cond(cmp, "0", &format!("{ent}.eid")),
            [name] if name == "type" => self.cond(cmp, "0", &format!("{ent}.type")),
            [name] => {
                let x = self.alias("x");
                let n = self.param(Sql::Text(name.clone()));
                let c = self.cond(cmp, &format!("{x}.rank"), &format!("{x}.v"));
                format!(
                    "EXISTS (SELECT 1 FROM entity_values {x} INDEXED BY entity_values_by_row
                     WHERE {x}.row = {ent}.row AND {x}.name = {n} AND {c})"
                )
            }
            [rel, rest @ ..] => {
                let (l, t) = (self.alias("l"), self.alias("t"));
                let r = self.param(Sql::Text(rel.clone()));
                let inner = self.path(rest, &t, cmp);
                format!(
                    "EXISTS (SELECT 1 FROM entity_links {l} INDEXED BY entity_links_by_row JOIN entity_versions {t}
                       ON {t}.eid = {l}.target AND {t}.from_seq <= ?1 AND {t}.to_seq > ?1
                     WHERE {l}.row = {ent}.row AND {l}.rel = {r} AND {inner})"
                )
            }
        }
    }

    /// The rows of `entity_values` whose value for `name` passes `op lit` (one of `=`,
    /// `<`, `<=`, `>`, `>=`), through the value index.
    fn rows(&mut self, name: &str, op: Op, lit: &Value) -> String {
        let x = self.alias("v");
        let n = self.param(Sql::Text(name.to_string()));
        let c = self.cond(Some((op, lit)), &format!("{x}.rank"), &format!("{x}.v"));
        format!(
            "SELECT {x}.row AS row FROM entity_values {x} INDEXED BY entity_values_by_value
             WHERE {x}.name = {n} AND {c}"
        )
    }

    fn filter(&mut self, f: &Filter, ent: &str) -> String {
        match f {
            Filter::And(a, b) => format!("({} AND {})", self.filter(a, ent), self.filter(b, ent)),
            Filter::Or(a, b) => format!("({} OR {})", self.filter(a, ent), self.filter(b, ent)),
            Filter::Not(a) => format!("(NOT {})", self.filter(a, ent)),
            Filter::Has(p) => self.path(p, ent, None),
            Filter::Cmp(p, op, v) => self.path(p, ent, Some((*op, v))),
        }
    }
}

/// The conditions every match of `f` must pass: its top-level `and`s.
fn conjuncts(f: &Filter) -> Vec<&Filter> {
    fn walk<'f>(f: &'f Filter, out: &mut Vec<&'f Filter>) {
        match f {
            Filter::And(x, y) => {
                walk(x, out);
                walk(y, out);
            }
            other => out.push(other),
        }
    }
    let mut out = Vec::new();
    walk(f, &mut out);
    out
}

/// A version as `entity_versions` and `entity_ops` give it: from_seq, to_seq, object,
/// changed, operation id, end time, description.
type VersionRow = (i64, i64, Vec<u8>, String, Vec<u8>, i64, String);

/// One version of an entity, as the index has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedVersion {
    /// The operation that made it.
    pub op: Id,
    /// The operation's end time, ms since the epoch.
    pub end_ms: i64,
    /// The operation's description.
    pub description: String,
    /// The entity's object after the operation (`None`: removed by it).
    pub object: Option<Id>,
    /// The attributes whose values differ from the previous version (`links` when its
    /// links did), sorted.
    pub changed: Vec<String>,
}

/// The entities a query selects, as object ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selected {
    /// In the query's order, limit applied.
    Ordered(Vec<Id>),
    /// Every match, in no order: the query orders by a path through links, which the
    /// caller sorts (and then limits) as the scan does.
    Unordered(Vec<Id>),
}

impl Catalog {
    /// Runs `f` inside one read transaction: what it reads is one state of the catalog.
    pub fn reading<T>(&self, f: impl FnOnce(&Catalog) -> Result<T>) -> Result<T> {
        let e = |e| db_err(&self.path, e);
        let step = |sql: &str| -> Result<()> {
            self.conn
                .prepare_cached(sql)
                .map_err(e)?
                .execute([])
                .map_err(e)?;
            Ok(())
        };
        step("BEGIN")?;
        let out = f(self);
        step("COMMIT")?;
        out
    }

    /// The place of operation `op` in the entity index (`None`: not indexed).
    pub fn entity_seq(&self, op: &Id) -> Result<Option<i64>> {
        let e = |e| db_err(&self.path, e);
        self.conn
            .prepare_cached("SELECT seq FROM entity_ops WHERE op = ?1")
            .map_err(e)?
            .query_row([&op.0[..]], |r| r.get(0))
            .optional()
            .map_err(e)
    }

    /// The object of entity `eid` in the view of the operation at `seq`.
    pub fn entity_at(&self, seq: i64, eid: &str) -> Result<Option<Id>> {
        let blob: Option<Vec<u8>> = self
            .conn
            .prepare_cached(
                "SELECT object FROM entity_versions WHERE eid = ?1 AND to_seq > ?2 AND from_seq <= ?2",
            )
            .and_then(|mut s| s.query_row(params![eid, seq], |r| r.get(0)).optional())
            .map_err(|e| db_err(&self.path, e))?;
        blob.map(|b| blob_id(&b).ok_or_else(|| bad_row(&self.path, "an entity object id")))
            .transpose()
    }

    /// Every version of entity `eid` in `--at` order, oldest first: the operation that
    /// made it (id, end time, description), its object (`None`: the operation removed
    /// it) and the attributes it changed (for a removal, empty: the caller knows the
    /// attributes of the version before).
    pub fn entity_versions(&self, eid: &str) -> Result<Vec<IndexedVersion>> {
        let e = |e| db_err(&self.path, e);
        let mut rows = self
            .conn
            .prepare_cached(
                "SELECT v.from_seq, v.to_seq, v.object, v.changed, o.op, o.end_ms, p.description
                 FROM entity_versions v JOIN entity_ops o ON o.seq = v.from_seq
                 JOIN operations p ON p.id = o.op
                 WHERE v.eid = ?1 ORDER BY v.from_seq",
            )
            .map_err(e)?;
        let mut op_at = self
            .conn
            .prepare_cached(
                "SELECT o.op, o.end_ms, p.description FROM entity_ops o JOIN operations p ON p.id = o.op
                 WHERE o.seq = ?1",
            )
            .map_err(e)?;
        let found: Vec<VersionRow> = rows
            .query_map([eid], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            })
            .map_err(e)?
            .collect::<rusqlite::Result<_>>()
            .map_err(e)?;
        let id = |b: &[u8], what| blob_id(b).ok_or_else(|| bad_row(&self.path, what));
        let mut out = Vec::with_capacity(found.len());
        for (i, (_, to, obj, changed, op, end_ms, description)) in found.iter().enumerate() {
            out.push(IndexedVersion {
                op: id(op, "an operation id")?,
                end_ms: *end_ms,
                description: description.clone(),
                object: Some(id(obj, "an entity object id")?),
                changed: changed
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(String::from)
                    .collect(),
            });
            let next = found.get(i + 1).map(|f| f.0);
            if *to != CURRENT && next != Some(*to) {
                let (op, end_ms, description): (Vec<u8>, i64, String) = op_at
                    .query_row([to], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .map_err(e)?;
                out.push(IndexedVersion {
                    op: id(&op, "an operation id")?,
                    end_ms,
                    description,
                    object: None,
                    changed: Vec::new(),
                });
            }
        }
        Ok(out)
    }

    /// The entities that `q` selects in the view of the operation at `seq`.
    pub fn select_entities(&self, seq: i64, q: &Query) -> Result<Selected> {
        let mut b = Build::default();
        b.param(Sql::Integer(seq));
        b.param(Sql::Text(q.kind.clone()));
        let live = "r.type = ?2 AND r.from_seq <= ?1 AND r.to_seq > ?1";
        let limit = q.limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let dir = |desc: bool| if desc { "DESC" } else { "ASC" };
        // In id order (by id, by type, or unordered) with an attribute that must equal a
        // value: the value index lists the rows holding it in id order, so the query
        // touches only those and stops at the limit, instead of reading every entity of
        // the type and testing each.
        let by_id_order = match q.order.as_ref().map(|(p, desc)| (p.as_slice(), *desc)) {
            None => Some(false),
            Some(([n], desc)) if n == "id" => Some(desc),
            Some(([n], _)) if n == "type" => Some(false),
            _ => None,
        };
        let conjuncts = q.filter.as_ref().map(conjuncts).unwrap_or_default();
        let equal = conjuncts.iter().enumerate().find_map(|(i, c)| match c {
            Filter::Cmp(path, Op::Eq, lit) => match path.as_slice() {
                [name] if !matches!(name.as_str(), "id" | "type") => Some((i, name, lit)),
                _ => None,
            },
            _ => None,
        });
        // That equality alone is best served by those rows: no other condition can be
        // more selective, so none is probed.
        let selective = match (by_id_order, equal) {
            (Some(_), Some(_)) if conjuncts.len() == 1 => None,
            _ => self.selective(q.filter.as_ref(), &mut b)?,
        };
        if let (None, Some(desc), Some((i, name, lit))) = (&selective, by_id_order, equal) {
            let n = b.param(Sql::Text(name.clone()));
            let (rank, v) = stored(lit);
            let v = b.param(v);
            let rest: Vec<String> = conjuncts
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, c)| b.filter(c, "r"))
                .collect();
            let rest = if rest.is_empty() {
                "1".to_string()
            } else {
                rest.join(" AND ")
            };
            return Ok(Selected::Ordered(self.distinct_objects(
                &format!(
                    "SELECT r.object FROM entity_values k INDEXED BY entity_values_by_value
                       CROSS JOIN entity_versions r ON r.row = k.row
                     WHERE k.name = {n} AND k.rank = {rank} AND k.v = {v} AND {live} AND {rest}
                     ORDER BY k.eid {}",
                    dir(desc)
                ),
                &b.params,
                q.limit,
            )?));
        }
        let f = q
            .filter
            .as_ref()
            .map_or_else(|| "1".to_string(), |f| b.filter(f, "r"));
        if let Some(drive) = selective {
            // Few rows pass one of the conditions: start from those, and let the caller
            // order the (few) matches.
            return Ok(Selected::Unordered(self.objects(
                &format!(
                    "SELECT r.object FROM ({drive}) d CROSS JOIN entity_versions r ON r.row = d.row
                     WHERE {live} AND {f}"
                ),
                &b.params,
            )?));
        }
        let by_id = |d: &str| {
            format!(
                "SELECT r.object FROM entity_versions r INDEXED BY entity_versions_by_type
                 WHERE {live} AND {f} ORDER BY r.eid {d} LIMIT {limit}"
            )
        };
        match &q.order {
            None => Ok(Selected::Ordered(self.objects(&by_id("ASC"), &b.params)?)),
            Some((p, desc)) => match p.as_slice() {
                [n] if n == "id" => Ok(Selected::Ordered(
                    self.objects(&by_id(dir(*desc)), &b.params)?,
                )),
                // Every candidate has the query's type: the order is the ids'.
                [n] if n == "type" => {
                    Ok(Selected::Ordered(self.objects(&by_id("ASC"), &b.params)?))
                }
                [n] => {
                    let n = b.param(Sql::Text(n.clone()));
                    let d = dir(*desc);
                    // Entities with a value for the name, by their first value...
                    let mut out = self.objects(
                        &format!(
                            "SELECT r.object FROM entity_values k INDEXED BY entity_values_by_value
                               CROSS JOIN entity_versions r ON r.row = k.row
                             WHERE k.name = {n} AND k.pos = 0 AND {live} AND {f}
                             ORDER BY k.rank {d}, k.v {d}, k.eid LIMIT {limit}"
                        ),
                        &b.params,
                    )?;
                    // ...then those without one, either way.
                    let left = if limit < 0 {
                        -1
                    } else {
                        limit - out.len() as i64
                    };
                    if left != 0 {
                        out.extend(self.objects(
                            &format!(
                                "SELECT r.object FROM entity_versions r WHERE {live} AND {f}
                                 AND NOT EXISTS (SELECT 1 FROM entity_values k INDEXED BY entity_values_by_row
                                                 WHERE k.row = r.row AND k.name = {n})
                                 ORDER BY r.eid LIMIT {left}"
                            ),
                            &b.params,
                        )?);
                    }
                    Ok(Selected::Ordered(out))
                }
                _ => Ok(Selected::Unordered(self.objects(
                    &format!("SELECT r.object FROM entity_versions r WHERE {live} AND {f}"),
                    &b.params,
                )?)),
            },
        }
    }

    /// Among the conditions every match must pass (the filter's top-level `and`s) that
    /// compare one attribute with `=`, `<`, `<=`, `>` or `>=`, the one fewest rows pass,
    /// if fewer than `self.selective` do: the SQL of those rows (parameters added to `b`).
    fn selective(&self, f: Option<&Filter>, b: &mut Build) -> Result<Option<String>> {
        let atoms = f.map(conjuncts).unwrap_or_default();
        let mut best: Option<(i64, &str, &Op, &Value)> = None;
        for atom in atoms {
            let Filter::Cmp(path, op, lit) = atom else {
                continue;
            };
            let [name] = path.as_slice() else { continue };
            if matches!(name.as_str(), "id" | "type") || matches!(op, Op::Ne | Op::Contains) {
                continue;
            }
            let mut probe = Build::default();
            let sql = probe.rows(name, *op, lit);
            let n: i64 = self
                .conn
                .query_row(
                    &format!("SELECT count(*) FROM ({sql} LIMIT {})", self.selective),
                    rusqlite::params_from_iter(&probe.params),
                    |r| r.get(0),
                )
                .map_err(|e| db_err(&self.path, e))?;
            if n < self.selective && best.is_none_or(|(m, ..)| n < m) {
                best = Some((n, name, op, lit));
            }
        }
        Ok(best.map(|(_, name, op, lit)| {
            format!("SELECT DISTINCT row FROM ({})", b.rows(name, *op, lit))
        }))
    }

    /// The objects of the rows `sql` returns, a row met again right after itself (one
    /// value at several places of a list) taken once, up to `limit` of them: rows are
    /// read only until the limit is reached.
    fn distinct_objects(&self, sql: &str, params: &[Sql], limit: Option<usize>) -> Result<Vec<Id>> {
        let e = |e| db_err(&self.path, e);
        let mut st = self.conn.prepare_cached(sql).map_err(e)?;
        let mut rows = st.query(rusqlite::params_from_iter(params)).map_err(e)?;
        let mut out: Vec<Id> = Vec::new();
        while limit.is_none_or(|n| out.len() < n) {
            let Some(row) = rows.next().map_err(e)? else {
                break;
            };
            let blob = row.get_ref(0).map_err(e)?.as_blob().ok();
            let id = blob
                .and_then(blob_id)
                .ok_or_else(|| bad_row(&self.path, "an entity object id"))?;
            if out.last() != Some(&id) {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// The objects of the rows `sql` returns (none of its queries returns one object
    /// twice in a row, so nothing is dropped).
    fn objects(&self, sql: &str, params: &[Sql]) -> Result<Vec<Id>> {
        self.distinct_objects(sql, params, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CatalogExt;
    use lifeos_entities::edit::EntityChange;
    use lifeos_store::Kind;
    use lifeos_vcs::layout::OP_HEADS_DIR;
    use lifeos_vcs::object::Operation;

    /// A small deterministic generator (xorshift), so a failure replays.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
            &xs[self.below(xs.len())]
        }
    }

    /// Values of every kind, with pairs that compare across kinds (a date and the moment
    /// it starts), text that looks like a date, and text that folds beyond ASCII.
    fn values() -> Vec<Value> {
        [
            "open",
            "done",
            "Ärger über Öl",
            "\"2024-10-04\"",
            "1",
            "-2.5",
            "0",
            "true",
            "false",
            "2024-10-04",
            "2024-10-14",
            "2024-10-04T00:00:00Z",
            "2024-11-01T08:30:00.123Z",
        ]
        .iter()
        .map(|t| match t.strip_prefix('"') {
            Some(s) => Value::Str(s.trim_end_matches('"').into()),
            None => Value::parse(t),
        })
        .collect()
    }

    /// The indexes a bulk import drops and creates again are those the migrations made,
    /// as the newest level defines them.
    #[test]
    fn a_bulk_import_rebuilds_the_indexes_the_migrations_define() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for (_, sql) in crate::MIGRATIONS {
            conn.execute_batch(sql).unwrap();
        }
        let indexes = |conn: &rusqlite::Connection| -> Vec<(String, String)> {
            let mut st = conn
                .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name")
                .unwrap();
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            rows.map(Result::unwrap).collect()
        };
        let migrated = indexes(&conn);
        for (name, create) in rebuilt_indexes() {
            conn.execute_batch(&format!("DROP INDEX {name}")).unwrap();
            conn.execute_batch(create).unwrap();
        }
        assert_eq!(indexes(&conn), migrated);
        let value_index = migrated
            .iter()
            .find(|(n, _)| n == "entity_values_by_value")
            .unwrap();
        assert!(value_index.1.contains("pos, row)"), "{value_index:?}");
    }

    const QUERIES: &[&str] = &[
        "task",
        r#"task where status = "open""#,
        r#"task where status != "open""#,
        "task where due < 2024-10-10",
        "task where due = 2024-10-04",
        "task where due >= 2024-10-04T00:00:00Z and not due > 2024-11-01",
        "task where n > 0 or not has due",
        r#"task where title contains "ÜBER""#,
        r#"task where status contains "PE" or n contains "1""#,
        r#"task where project.status = "open""#,
        r#"task where owner.title contains "öl" or owner.name = "Ann""#,
        "task where has project and not project.n = 1",
        r#"task where id contains "TASK" and type = "task""#,
        r#"task where title < "p" and has title"#,
        "task where has owner.owner",
        "task order by due",
        "task order by due desc limit 4",
        "task where has status order by status limit 2",
        "task order by project.n",
        "task order by project.status desc limit 3",
        "task order by id desc limit 5",
        "task order by title",
        "task order by owner desc",
        "task order by type limit 3",
        "task order by n desc limit 0",
        "project where n <= 1 order by n desc limit 3",
        r#"person where not name = "Ann" order by name"#,
        r#"task where status = "open" and n > 0 limit 2"#,
        r#"task where status = "open" order by id desc limit 3"#,
        "task where n = 1 order by type",
        r#"person where name = "Ann" and not has status limit 1"#,
    ];

    /// Publishes `view` after `parent` as an operation that ended at `end_ms`: what a
    /// process whose clock is behind leaves, or one that published late.
    fn publish_at(repo: &Repo, parent: Id, view: &crate::View, end_ms: i64) -> Id {
        let mut tx = repo.store().transaction().unwrap();
        let view = tx.write_object(Kind::View, &view.encode()).unwrap();
        let op = Operation {
            parents: vec![parent],
            view,
            start_ms: end_ms,
            end_ms,
            tz_offset_min: 0,
            user: "test".into(),
            host: "test".into(),
            description: "late".into(),
            events: lifeos_vcs::object::OpEvents::Inline(vec![]),
        };
        let id = tx.write_object(Kind::Operation, &op.encode()).unwrap();
        drop(tx.commit().unwrap());
        let heads = repo.dot_dir().join(OP_HEADS_DIR);
        std::fs::File::create(heads.join(id.to_hex())).unwrap();
        std::fs::remove_file(heads.join(parent.to_hex())).unwrap();
        id
    }

    /// Every query at every indexed operation, from the catalog; each checked against the
    /// scan of that operation's view.
    fn answers(repo: &Repo) -> Vec<Vec<String>> {
        let cat = repo.catalog().unwrap();
        // The same catalog with no condition selective enough to drive a query: the
        // ordered scans of the indexes.
        let mut scans = repo.catalog().unwrap();
        scans.selective = 0;
        let ops: Vec<Vec<u8>> = {
            let mut st = cat
                .conn
                .prepare("SELECT op FROM entity_ops ORDER BY seq")
                .unwrap();
            let rows = st.query_map([], |r| r.get(0)).unwrap();
            rows.map(Result::unwrap).collect()
        };
        let mut out = Vec::new();
        for op in ops {
            let op = blob_id(&op).unwrap();
            let state = repo.op_state(&op).unwrap();
            for q in QUERIES {
                let parsed = lifeos_entities::query::parse(q).unwrap();
                let ids = |hits: Vec<(Id, Entity)>| -> Vec<String> {
                    hits.into_iter().map(|(_, e)| e.id).collect()
                };
                let indexed = ids(repo.query_entities(&op, &state.view, &parsed).unwrap());
                let scanned = ids(repo.scan_entities(&state.view, &parsed).unwrap());
                assert_eq!(indexed, scanned, "{q} at operation {}", op.short(12));
                let seq = scans.entity_seq(&op).unwrap().unwrap();
                let ordered = ids(crate::entity_queries::query_in(
                    &scans,
                    seq,
                    &parsed,
                    &mut |o| repo.entity_object(o),
                )
                .unwrap());
                assert_eq!(
                    ordered,
                    scanned,
                    "{q} at operation {}, no driving condition",
                    op.short(12)
                );
                out.push(indexed);
            }
        }
        out
    }

    #[test]
    fn catalog_queries_answer_as_the_scan_at_every_operation_and_after_reindex() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let vals = values();
        let names = ["status", "due", "title", "n", "name"];
        let mut ids: Vec<String> = Vec::new();
        for step in 0..120 {
            let kind = *rng.pick(&["task", "task", "task", "person", "project"]);
            let change = match rng.below(if ids.is_empty() { 1 } else { 8 }) {
                0 | 1 => {
                    let mut attrs = vec![(
                        if kind == "task" { "title" } else { "name" }.to_string(),
                        rng.pick(&vals).clone(),
                    )];
                    for _ in 0..rng.below(4) {
                        attrs.push((rng.pick(&names).to_string(), rng.pick(&vals).clone()));
                    }
                    if kind == "person" && rng.below(3) == 0 {
                        attrs.push(("name".into(), Value::Str("Ann".into())));
                    }
                    (
                        None,
                        EntityChange::Add {
                            kind: kind.into(),
                            attrs,
                        },
                    )
                }
                2 | 3 => (
                    Some(rng.pick(&ids).clone()),
                    EntityChange::Set(vec![(
                        rng.pick(&names).to_string(),
                        rng.pick(&vals).clone(),
                    )]),
                ),
                4 => (
                    Some(rng.pick(&ids).clone()),
                    EntityChange::Unset(vec![rng.pick(&names).to_string()]),
                ),
                5 | 6 => (
                    Some(rng.pick(&ids).clone()),
                    EntityChange::Link {
                        rel: rng.pick(&["project", "owner", "title"]).to_string(),
                        target: rng.pick(&ids).clone(),
                    },
                ),
                _ => (Some(rng.pick(&ids).clone()), EntityChange::Remove),
            };
            match repo.change_entity(change.0.as_deref(), change.1) {
                Ok((_, id, Some(_))) => {
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                Ok((_, id, None)) => ids.retain(|i| *i != id),
                Err(VcsError::Refused(_)) => {} // a required attribute, a missing link target
                Err(e) => panic!("step {step}: {e}"),
            }
            if step % 15 == 14 {
                // A late operation: the view of an earlier one, ending before the head did.
                let head = repo.head().unwrap();
                let cat = repo.catalog().unwrap();
                let old: Vec<u8> = cat
                    .conn
                    .query_row(
                        "SELECT op FROM entity_ops WHERE seq = (SELECT max(seq) / 2 FROM entity_ops)",
                        [],
                        |r| r.get(0),
                    )
                    .unwrap();
                let old = repo.op_state(&blob_id(&old).unwrap()).unwrap();
                publish_at(&repo, head.id, &old.view, head.op.end_ms - 1);
                ids = match lifeos_vcs::object::entity::root_of(&old.view) {
                    Some(r) => r
                        .entries(repo.store())
                        .unwrap()
                        .into_iter()
                        .map(|(k, _)| String::from_utf8(k).unwrap())
                        .collect(),
                    None => Vec::new(),
                };
                ids.sort();
            }
            // Index as the operations come, so late ones rewind the index.
            repo.catalog().unwrap();
        }
        let before = answers(&repo);
        assert!(
            before.iter().any(|a| a.len() > 3),
            "the queries select something"
        );
        repo.reindex().unwrap();
        assert_eq!(
            answers(&repo),
            before,
            "reindex answers as the index built step by step"
        );
        // The same, built with every operation's rows loaded in bulk (indexes dropped and
        // built again).
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", repo.catalog_path().display()));
        }
        let mut cat = Catalog::open(&repo.catalog_path()).unwrap();
        cat.bulk = 0;
        cat.sync(&repo).unwrap();
        drop(cat);
        assert_eq!(
            answers(&repo),
            before,
            "a bulk-loaded index answers the same"
        );
    }
}
