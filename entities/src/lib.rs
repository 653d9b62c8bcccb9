//! lifeos-entities: a person's records (people, tasks, events, places, ...) as typed,
//! linked objects whose history is the operation log.
//!
//! The entity object and its merge rule are part of the object format
//! ([`lifeos_vcs::object::entity`]); this crate is what entities mean:
//! - [`schema`]: the types, fields and file rules a repository declares
//!   (`lifeos.schema.toml`);
//! - [`edit`]: reading, changing and diffing entities ([`EntitiesExt`] on a repository);
//! - [`from_files`]: the entities of vCard, iCalendar, CSV and JSON Lines files, kept up
//!   to date by a commit hook ([`from_files::DeriveEntities`]);
//! - [`query`]: the query language and its reference evaluation (the catalog answers the
//!   same queries from its index).

#![warn(missing_docs)]

pub mod edit;
pub mod from_files;
pub mod names;
pub mod query;
pub mod schema;

pub use edit::{EntitiesExt, EntityChange, EntityDiff};
pub use lifeos_vcs::object::entity::{AttrConflict, Entity, Value};
