//! The names entities use: the built-in types, what makes an attribute or relation name
//! valid, and the attributes derivation reserves. A leaf: editing, the schema and
//! derivation from files all read it.

use lifeos_vcs::error::{Result, VcsError};

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

/// Checks an attribute or relation name: a lowercase letter, then lowercase letters,
/// digits and `_`.
pub fn check_name(what: &str, name: &str) -> Result<()> {
    let mut b = name.bytes();
    let ok = b.next().is_some_and(|c| c.is_ascii_lowercase())
        && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_');
    if !ok {
        return Err(VcsError::Refused(format!(
            "{what} {name:?} is not a valid name (a lowercase letter, then lowercase letters, digits or _)"
        )));
    }
    if matches!(name, "id" | "type") {
        return Err(VcsError::Refused(format!(
            "{what} {name:?} is reserved: queries read it as the entity's own {name}"
        )));
    }
    Ok(())
}

/// Attributes every derived entity carries, naming where it came from.
pub const SOURCE_ATTRS: [&str; 4] = ["source_commit", "source_file", "source_line", "source_path"];
