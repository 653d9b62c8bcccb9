//! Naming an object by the start of its id: commits (by commit or change id), operations,
//! actions and receipts are all found here, so every front end answers a short, unknown
//! or ambiguous id the same way ([`VcsError::NoSuchId`], [`VcsError::AmbiguousId`]).

use crate::error::{Result, VcsError};

pub use crate::error::IdKind;

/// The one of `matches` that `prefix` names, if any: several is an error listing each
/// (as `show` writes it). An empty prefix names nothing.
pub fn at_most_one<T>(
    mut matches: Vec<T>,
    prefix: &str,
    kind: IdKind,
    show: impl Fn(&T) -> String,
) -> Result<Option<T>> {
    match matches.len() {
        _ if prefix.is_empty() => Ok(None),
        0 => Ok(None),
        1 => Ok(matches.pop()),
        _ => Err(VcsError::AmbiguousId {
            kind,
            prefix: prefix.into(),
            candidates: matches.iter().map(show).collect(),
        }),
    }
}

/// The one of `matches` that `prefix` names: none is an error naming the command that
/// lists the ids, several an error listing each (as `show` writes it).
pub fn exactly_one<T>(
    matches: Vec<T>,
    prefix: &str,
    kind: IdKind,
    show: impl Fn(&T) -> String,
) -> Result<T> {
    at_most_one(matches, prefix, kind, show)?.ok_or_else(|| VcsError::NoSuchId {
        kind,
        prefix: prefix.into(),
    })
}

/// Checks that `text` can be a prefix of an id written in hex: at least four hex digits.
/// Returns it in lower case.
pub fn hex_prefix(text: &str, kind: IdKind) -> Result<String> {
    let lower = text.to_ascii_lowercase();
    if lower.len() < 4 || !lower.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(VcsError::NotAnId {
            kind,
            text: text.into(),
        });
    }
    Ok(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind answers none, one and several the same way, in one error style.
    #[test]
    fn every_kind_answers_none_one_and_several_alike() {
        let ids = ["3f9c2a", "3f9d00", "7a0b11"];
        for kind in [
            IdKind::Revision,
            IdKind::Operation,
            IdKind::Action,
            IdKind::Receipt,
        ] {
            let find = |p: &str| -> Vec<&str> {
                ids.iter().copied().filter(|i| i.starts_with(p)).collect()
            };
            let show = |s: &&str| s.to_string();
            assert_eq!(exactly_one(find("7a"), "7a", kind, show).unwrap(), "7a0b11");
            let none = exactly_one(find("99"), "99", kind, show).unwrap_err();
            assert_eq!(
                none.to_string(),
                format!(
                    "no {} id starts with \"99\"; `{}` lists them",
                    kind.noun(),
                    kind.lister()
                )
            );
            let many = exactly_one(find("3f9"), "3f9", kind, show).unwrap_err();
            assert_eq!(
                many.to_string(),
                format!(
                    "{} \"3f9\" is ambiguous; it matches: 3f9c2a, 3f9d00",
                    kind.noun()
                )
            );
            assert_eq!(at_most_one(find(""), "", kind, show).unwrap(), None);
        }
        assert_eq!(hex_prefix("3F9C", IdKind::Operation).unwrap(), "3f9c");
        for bad in ["3f9", "zz99", "3f9c-"] {
            let e = hex_prefix(bad, IdKind::Operation).unwrap_err().to_string();
            assert_eq!(
                e,
                format!("{bad:?} is not an operation id (4 or more hex digits)")
            );
        }
    }
}
