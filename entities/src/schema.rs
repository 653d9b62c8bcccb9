//! The entity schema: user-defined types (and typed fields for the built-in ones),
//! declared in `lifeos.schema.toml` at the root of the folder. The file is tracked like
//! any other, so the schema in force is the one committed at `@`: versioned, diffable
//! and restorable. See `docs/FORMAT.md` (7.10).
//!
//! ```toml
//! [types.book]
//! required = ["title"]
//! fields.title = "string"
//! fields.pages = "number"
//! fields.finished = "date"
//! fields.format = { enum = ["paper", "ebook", "audio"] }
//! fields.author = { ref = "person" }
//! ```

use std::collections::BTreeMap;

use lifeos_vcs::object::entity::{Entity, Value};

use crate::names::{check_name, BUILTIN_TYPES, SOURCE_ATTRS};
use lifeos_store::Id;
use lifeos_vcs::commit::Unstored;
use lifeos_vcs::error::{Result, VcsError};
use lifeos_vcs::object::View;
use lifeos_vcs::repo::Repo;

/// The schema file's path in the folder.
pub const SCHEMA_FILE: &str = "lifeos.schema.toml";

/// A field's declared type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldType {
    /// Text.
    String,
    /// A number.
    Number,
    /// `true` or `false`.
    Bool,
    /// A calendar date.
    Date,
    /// A moment (a date is taken as its start, UTC).
    DateTime,
    /// One of a fixed set of texts.
    Enum(Vec<String>),
    /// A link to an entity of this type (the field is a relation, not an attribute).
    Ref(String),
}

impl FieldType {
    fn describe(&self) -> String {
        match self {
            FieldType::String => "text".into(),
            FieldType::Number => "a number".into(),
            FieldType::Bool => "true or false".into(),
            FieldType::Date => "a date (2026-12-10)".into(),
            FieldType::DateTime => "a moment (2026-12-10T09:00:00Z)".into(),
            FieldType::Enum(vs) => format!("one of {}", vs.join(", ")),
            FieldType::Ref(t) => format!("the id of a {t}"),
        }
    }
}

/// A declared type.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TypeDef {
    /// Its fields, by name.
    pub fields: BTreeMap<String, FieldType>,
    /// The fields every entity of the type must have.
    pub required: Vec<String>,
}

/// A rule that reads the rows of CSV or JSON Lines files as entities (7.11).
#[derive(Debug, Clone)]
pub struct FileRule {
    /// The glob, as written.
    pub glob: String,
    matcher: globset::GlobMatcher,
    /// The type of the entities.
    pub kind: String,
    /// The field whose value keys a row's entity across versions of the file (else the
    /// row's line).
    pub id: Option<String>,
}

/// The schema in force: the built-in types (open: any attribute) and the declared ones
/// (closed: only their fields), and the rules that read files as entities.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// Declared types, by name (a built-in type declared here gets typed fields).
    pub types: BTreeMap<String, TypeDef>,
    /// `[[files]]` rules, in file order.
    pub files: Vec<FileRule>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default)]
    types: BTreeMap<String, FileType>,
    #[serde(default)]
    files: Vec<FileRuleDoc>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRuleDoc {
    glob: String,
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileType {
    #[serde(default)]
    fields: BTreeMap<String, FileField>,
    #[serde(default)]
    required: Vec<String>,
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum FileField {
    Name(String),
    Enum {
        #[serde(rename = "enum")]
        values: Vec<String>,
    },
    Ref {
        #[serde(rename = "ref")]
        to: String,
    },
}

fn bad(msg: String) -> VcsError {
    VcsError::Refused(format!("{SCHEMA_FILE}: {msg}"))
}

impl Schema {
    /// Reads a schema file's text: each type and field name valid, each field type known,
    /// each reference to a known type, each required field declared.
    pub fn parse(text: &str) -> Result<Schema> {
        let doc: FileDoc = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|s| {
                    let line = text[..s.start].matches('\n').count() + 1;
                    let col = text[..s.start]
                        .rfind('\n')
                        .map_or(s.start, |n| s.start - n - 1)
                        + 1;
                    format!("line {line}, column {col}: ")
                })
                .unwrap_or_default();
            bad(format!("{at}{}", e.message()))
        })?;
        let mut types = BTreeMap::new();
        for (name, t) in &doc.types {
            check_name("type", name).map_err(|e| bad(e.to_string()))?;
            let mut fields = BTreeMap::new();
            for (f, ty) in &t.fields {
                check_name("field", f).map_err(|e| bad(format!("type {name}: {e}")))?;
                let ty = match ty {
                    FileField::Name(n) => match n.as_str() {
                        "string" => FieldType::String,
                        "number" => FieldType::Number,
                        "bool" => FieldType::Bool,
                        "date" => FieldType::Date,
                        "datetime" => FieldType::DateTime,
                        other => {
                            return Err(bad(format!(
                                "type {name}, field {f}: unknown field type {other:?}; the types are string, number, bool, date, datetime, {{ enum = [...] }} and {{ ref = \"TYPE\" }}"
                            )))
                        }
                    },
                    FileField::Enum { values } if values.is_empty() => {
                        return Err(bad(format!("type {name}, field {f}: an enum needs at least one value")))
                    }
                    FileField::Enum { values } => FieldType::Enum(values.clone()),
                    FileField::Ref { to } => FieldType::Ref(to.clone()),
                };
                fields.insert(f.clone(), ty);
            }
            for r in &t.required {
                if !fields.contains_key(r) {
                    return Err(bad(format!(
                        "type {name}: required field {r} is not among its fields"
                    )));
                }
            }
            types.insert(
                name.clone(),
                TypeDef {
                    fields,
                    required: t.required.clone(),
                },
            );
        }
        let mut schema = Schema {
            types,
            files: Vec::new(),
        };
        for r in doc.files {
            let lower = r.glob.to_ascii_lowercase();
            if !(lower.ends_with(".csv") || lower.ends_with(".jsonl")) {
                return Err(bad(format!(
                    "files rule {:?}: the glob must end in .csv or .jsonl",
                    r.glob
                )));
            }
            schema
                .check_type(&r.kind)
                .map_err(|e| bad(format!("files rule {:?}: {e}", r.glob)))?;
            let matcher = globset::GlobBuilder::new(&r.glob)
                .literal_separator(true)
                .build()
                .map_err(|e| bad(format!("files rule {:?}: {e}", r.glob)))?
                .compile_matcher();
            schema.files.push(FileRule {
                glob: r.glob,
                matcher,
                kind: r.kind,
                id: r.id,
            });
        }
        for (name, t) in &schema.types {
            for (f, ty) in &t.fields {
                if let FieldType::Ref(to) = ty {
                    if !schema.is_type(to) {
                        return Err(bad(format!(
                            "type {name}, field {f}: refers to unknown type {to:?}"
                        )));
                    }
                }
            }
        }
        Ok(schema)
    }

    /// The first `[[files]]` rule whose glob matches `path`.
    pub fn file_rule(&self, path: &[u8]) -> Option<&FileRule> {
        let p = std::str::from_utf8(path).ok()?;
        self.files.iter().find(|r| r.matcher.is_match(p))
    }

    /// Whether `kind` is a type: built-in or declared.
    pub fn is_type(&self, kind: &str) -> bool {
        self.types.contains_key(kind) || BUILTIN_TYPES.iter().any(|(t, _)| *t == kind)
    }

    /// Every type's name, sorted.
    pub fn type_names(&self) -> Vec<String> {
        let mut v: Vec<String> = BUILTIN_TYPES
            .iter()
            .map(|(t, _)| t.to_string())
            .chain(self.types.keys().cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Checks that `kind` is a type; the error lists them.
    pub fn check_type(&self, kind: &str) -> Result<()> {
        if self.is_type(kind) {
            return Ok(());
        }
        Err(VcsError::Refused(format!(
            "unknown entity type {kind:?}; the types are {} (declare others in {SCHEMA_FILE})",
            self.type_names().join(", ")
        )))
    }

    /// The declared type of field `name` of `kind`, if the schema declares it.
    pub fn field(&self, kind: &str, name: &str) -> Option<&FieldType> {
        self.types.get(kind)?.fields.get(name)
    }

    /// Reads `text` typed on the command line for field `name` of entity `id` (type
    /// `kind`): as the declared type says, or, for an undeclared field of an open type,
    /// as [`Value::parse`] does.
    pub fn parse_value(&self, id: &str, kind: &str, name: &str, text: &str) -> Result<Value> {
        let Some(ty) = self.field(kind, name) else {
            return Ok(Value::parse(text));
        };
        let v = match ty {
            FieldType::String | FieldType::Enum(_) | FieldType::Ref(_) => {
                Value::Str(text.to_string())
            }
            FieldType::Number => match Value::parse(text) {
                n @ Value::Num(_) => n,
                _ => match text.parse::<f64>() {
                    Ok(n) if n.is_finite() => Value::Num(if n == 0.0 { 0.0 } else { n }),
                    _ => Value::Str(text.to_string()),
                },
            },
            FieldType::Bool | FieldType::Date | FieldType::DateTime => Value::parse(text),
        };
        let v = match (ty, v) {
            (FieldType::DateTime, Value::Date(d)) => Value::DateTime(d.saturating_mul(86_400_000)),
            (_, v) => v,
        };
        self.check_value(id, kind, name, &v)?;
        Ok(v)
    }

    fn check_value(&self, id: &str, kind: &str, name: &str, v: &Value) -> Result<()> {
        let Some(ty) = self.field(kind, name) else {
            return Ok(());
        };
        let ok = match (ty, v) {
            (FieldType::String, Value::Str(_))
            | (FieldType::Number, Value::Num(_))
            | (FieldType::Bool, Value::Bool(_))
            | (FieldType::Date, Value::Date(_))
            | (FieldType::DateTime, Value::DateTime(_)) => true,
            (FieldType::Enum(vs), Value::Str(s)) => vs.contains(s),
            // An id: whether it names an entity of the type is checked on the link.
            (FieldType::Ref(_), Value::Str(_)) => true,
            _ => false,
        };
        if ok {
            return Ok(());
        }
        let got = match v {
            Value::Str(s) => format!("{s:?}"),
            other => other.render(),
        };
        Err(VcsError::Refused(format!(
            "entity {id}: field {name} of a {kind} must be {}, not {got}",
            ty.describe()
        )))
    }

    /// Checks an entity about to be recorded against its type: every attribute declared
    /// (for a declared type) and of its declared type, every required field present,
    /// every reference field a link to an entity of the declared type (`type_of` gives an
    /// entity's type, `None` when there is no such entity).
    pub fn check(
        &self,
        e: &Entity,
        type_of: &mut dyn FnMut(&str) -> Result<Option<String>>,
    ) -> Result<()> {
        self.check_type(&e.kind)?;
        let Some(def) = self.types.get(&e.kind) else {
            return Ok(());
        };
        let builtin_required = BUILTIN_TYPES
            .iter()
            .find(|(t, _)| *t == e.kind)
            .map(|(_, r)| *r);
        for (name, v) in &e.attrs {
            match def.fields.get(name) {
                Some(FieldType::Ref(to)) => {
                    return Err(VcsError::Refused(format!(
                        "entity {}: field {name} links to a {to}: give it as {name}={to}:ID (a link), not a value",
                        e.id
                    )))
                }
                Some(_) => self.check_value(&e.id, &e.kind, name, v)?,
                None if Some(name.as_str()) == builtin_required => {}
                // Where an entity read from a file came from (7.11).
                None if SOURCE_ATTRS.contains(&name.as_str()) => {}
                None => {
                    return Err(VcsError::Refused(format!(
                        "entity {}: a {} has no field {name} (its fields: {}; declared in {SCHEMA_FILE})",
                        e.id,
                        e.kind,
                        def.fields.keys().cloned().collect::<Vec<_>>().join(", ")
                    )))
                }
            }
        }
        for (rel, target) in &e.links {
            if let Some(FieldType::Ref(to)) = def.fields.get(rel) {
                match type_of(target)? {
                    Some(t) if t == *to => {}
                    Some(t) => {
                        return Err(VcsError::Refused(format!(
                            "entity {}: field {rel} must link to a {to}; {target} is a {t}",
                            e.id
                        )))
                    }
                    None => {
                        return Err(VcsError::Refused(format!(
                            "entity {}: field {rel} links to {target}, which does not exist",
                            e.id
                        )))
                    }
                }
            }
        }
        for r in &def.required {
            let present = match def.fields.get(r) {
                Some(FieldType::Ref(_)) => e.links.iter().any(|(rel, _)| rel == r),
                _ => e.get(r).is_some(),
            };
            if !present {
                return Err(VcsError::Refused(format!(
                    "entity {}: a {} needs {r}=... (it is required by {SCHEMA_FILE})",
                    e.id, e.kind
                )));
            }
        }
        Ok(())
    }
}

/// The schema in force in `view`: `lifeos.schema.toml` as committed at `@` (the
/// built-in types alone when there is none).
pub fn in_view(repo: &Repo, view: &View) -> Result<Schema> {
    let Some(tree) = repo.at_tree(view)? else {
        return Ok(Schema::default());
    };
    match repo.lookup_path(&tree, SCHEMA_FILE.as_bytes())? {
        Some(entry) => {
            let mut bytes = Vec::new();
            repo.store().read_file(&entry.id, &mut bytes)?;
            Schema::from_bytes(bytes)
        }
        None => Ok(Schema::default()),
    }
}

/// The schema of tree `tree`, written by `tx` or stored (a commit being recorded).
pub(crate) fn in_tx(
    repo: &Repo,
    tx: &lifeos_store::Transaction<'_>,
    tree: &lifeos_store::Id,
    unstored: &lifeos_vcs::commit::Unstored<'_>,
) -> Result<Schema> {
    match repo.lookup_path_tx(tx, tree, SCHEMA_FILE.as_bytes())? {
        Some(entry) => Schema::from_bytes(file_bytes(
            repo,
            SCHEMA_FILE.as_bytes(),
            &entry.id,
            unstored,
        )?),
        None => Ok(Schema::default()),
    }
}

impl Schema {
    fn from_bytes(bytes: Vec<u8>) -> Result<Schema> {
        let text = String::from_utf8(bytes).map_err(|_| bad("is not UTF-8 text".into()))?;
        Schema::parse(&text)
    }
}

/// Reads the file `id` at `path`: from `unstored` (written by the transaction being
/// recorded), from the folder when it still holds exactly that content, else from
/// the store.
pub(crate) fn file_bytes(
    repo: &Repo,
    path: &[u8],
    id: &Id,
    unstored: &Unstored<'_>,
) -> Result<Vec<u8>> {
    if let Some(bytes) = unstored.get(id) {
        return Ok(bytes.to_vec());
    }
    if let Ok(bytes) = std::fs::read(lifeos_vcs::path::in_folder(repo.workdir(), path)) {
        if Id::hash(&bytes) == *id {
            return Ok(bytes);
        }
    }
    let mut out = Vec::new();
    repo.store().read_file(id, &mut out).map_err(|e| {
        VcsError::Refused(format!(
            "{} changed while it was being committed ({e}); commit again",
            lifeos_vcs::path::display(path)
        ))
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOKS: &str = r#"
[types.book]
required = ["title", "author"]
fields.title = "string"
fields.pages = "number"
fields.finished = "date"
fields.format = { enum = ["paper", "ebook"] }
fields.author = { ref = "person" }
"#;

    fn book(attrs: &[(&str, Value)], links: &[(&str, &str)]) -> Entity {
        lifeos_vcs::testing::entity("book", "book:dune", attrs, links)
    }

    #[test]
    fn declared_types_are_checked_field_by_field() {
        let s = Schema::parse(BOOKS).unwrap();
        assert!(s.is_type("book") && s.is_type("task") && !s.is_type("film"));
        let mut people = |id: &str| -> Result<Option<String>> {
            Ok(match id {
                "person:frank" => Some("person".into()),
                "task:x" => Some("task".into()),
                _ => None,
            })
        };
        let title = ("title", Value::Str("Dune".into()));
        let good = book(
            &[title.clone(), ("pages", Value::Num(412.0))],
            &[("author", "person:frank")],
        );
        s.check(&good, &mut people).unwrap();
        for (e, says) in [
            (book(std::slice::from_ref(&title), &[]), "needs author"),
            (
                book(
                    &[title.clone(), ("pages", Value::Str("many".into()))],
                    &[("author", "person:frank")],
                ),
                "field pages of a book must be a number, not \"many\"",
            ),
            (
                book(
                    &[title.clone(), ("colour", Value::Str("red".into()))],
                    &[("author", "person:frank")],
                ),
                "has no field colour",
            ),
            (
                book(
                    &[title.clone(), ("format", Value::Str("vinyl".into()))],
                    &[("author", "person:frank")],
                ),
                "one of paper, ebook",
            ),
            (
                book(std::slice::from_ref(&title), &[("author", "task:x")]),
                "must link to a person; task:x is a task",
            ),
            (
                book(std::slice::from_ref(&title), &[("author", "person:zed")]),
                "person:zed, which does not exist",
            ),
        ] {
            let err = s.check(&e, &mut people).unwrap_err().to_string();
            assert!(err.contains(says) && err.contains("book:dune"), "{err}");
        }
        // Text for a string field stays text; a number field reads numbers only.
        assert_eq!(
            s.parse_value("book:dune", "book", "title", "1984").unwrap(),
            Value::Str("1984".into())
        );
        assert_eq!(
            s.parse_value("book:dune", "book", "pages", "0412").unwrap(),
            Value::Num(412.0)
        );
        assert!(s
            .parse_value("book:dune", "book", "finished", "soon")
            .is_err());
        assert_eq!(
            s.parse_value("book:dune", "task", "pages", "0412").unwrap(),
            Value::Str("0412".into())
        );
    }

    #[test]
    fn schema_errors_name_the_line_the_type_and_the_field() {
        for (text, says) in [
            (
                "[types.book]\nfields.pages = \"integer\"\n",
                "unknown field type \"integer\"",
            ),
            (
                "[types.book]\nfields.author = { ref = \"writer\" }\n",
                "unknown type \"writer\"",
            ),
            (
                "[types.book]\nrequired = [\"title\"]\n",
                "required field title",
            ),
            ("[types.Book]\n", "not a valid name"),
            (
                "[types.book]\nfields.x = { enum = [] }\n",
                "at least one value",
            ),
            ("[types.book]\nfeilds.x = \"string\"\n", "line 2"),
        ] {
            let e = Schema::parse(text).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains(SCHEMA_FILE), "{text}: {e}");
        }
    }
}
