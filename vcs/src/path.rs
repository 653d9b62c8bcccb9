//! Repository paths: `/`-separated names that are bytes, never assumed to be UTF-8. Git
//! histories and old file systems bring names that are not valid UTF-8; they are kept
//! exactly, end to end, and only shown to people in an escaped form.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use bstr::{BStr, BString, ByteSlice};

use crate::error::{Result, VcsError};

/// The display form of a repository path: the path itself when it is printable UTF-8;
/// otherwise in double quotes, with `"` and `\` escaped, control characters as `\t`,
/// `\n`, `\r` or `\xNN`, and every byte that is not valid UTF-8 as `\xNN`, so that two
/// names differing only in such bytes never look the same (git quotes names likewise).
pub fn display(p: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(p) {
        Ok(s) if !s.chars().any(char::is_control) && !s.starts_with('"') => Cow::Borrowed(s),
        _ => Cow::Owned(quote(p)),
    }
}

fn quote(p: &[u8]) -> String {
    let mut out = String::with_capacity(p.len() + 8);
    out.push('"');
    for chunk in p.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() => {
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.push_str(&format!("\\x{b:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}

/// `prefix/name`, or `name` at the root.
pub fn join(prefix: &[u8], name: &[u8]) -> BString {
    let mut out = BString::from(Vec::with_capacity(prefix.len() + 1 + name.len()));
    if !prefix.is_empty() {
        out.extend_from_slice(prefix);
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

/// Whether `path` is `dir` itself or below it; every path is below the root (empty).
pub fn is_under(path: &[u8], dir: &[u8]) -> bool {
    dir.is_empty()
        || path == dir
        || (path.len() > dir.len() && path.starts_with(dir) && path[dir.len()] == b'/')
}

/// Whether repository path `p` is, or is inside, a folder where a repository keeps its
/// own files: a component named `.git` or `.lifeos` at any depth, in any spelling a file
/// system reads as one of them ([`crate::guard::is_repository_name`]). A snapshot never
/// records such a path, and a move of the folder never writes or removes one, whatever
/// a tree (imported from git, fetched from another device) holds.
pub fn in_repository_dir(p: &[u8]) -> bool {
    p.split(|b| *b == b'/')
        .any(crate::guard::is_repository_name)
}

/// Checks that `name` is a safe single path component.
pub fn valid_name(name: &[u8]) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty name".into());
    }
    if name == b"." || name == b".." {
        return Err(format!(
            "name {:?} is not allowed",
            String::from_utf8_lossy(name)
        ));
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(format!(
            "name {:?} contains '/' or NUL",
            String::from_utf8_lossy(name)
        ));
    }
    Ok(())
}

/// The file system path of repository path `p` below `root`.
pub fn in_folder(root: &Path, p: &[u8]) -> PathBuf {
    root.join(OsStr::from_bytes(p))
}

/// Splits a repository path given by a person or a program into validated components
/// (none for the root): empty components and `.` are dropped, `..`, NUL and empty names
/// are refused.
pub fn split(path: &[u8]) -> Result<Vec<&[u8]>> {
    path.split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(|c| {
            valid_name(c).map_err(|reason| VcsError::BadPath {
                path: display(path).into_owned(),
                reason,
            })?;
            Ok(c)
        })
        .collect()
}

/// The canonical form of a repository path (components joined by `/`).
pub fn clean(path: &[u8]) -> Result<BString> {
    Ok(BString::from(split(path)?.join(&b'/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_only_what_needs_it() {
        assert_eq!(display(b"notes/plan.md"), "notes/plan.md");
        assert_eq!(display(b"caf\xc3\xa9.txt"), "café.txt");
        assert_eq!(display(b"caf\xe9.txt"), "\"caf\\xe9.txt\"");
        assert_ne!(display(b"a\xff"), display(b"a\xfe"));
        assert_eq!(display(b"tab\there"), "\"tab\\there\"");
        assert_eq!(display(b"\"q"), "\"\\\"q\"");
    }

    #[test]
    fn repository_folders_are_dot_lifeos_and_dot_git_at_any_depth() {
        let inside: &[(&[u8], bool)] = &[
            (b".lifeos", true),
            (b".lifeos/op_heads/x", true),
            (b".git/hooks/post-checkout", true),
            (b"sub/.git/config", true),
            (b"sub/.lifeos/x", true),
            (b".git", true),
            (b"sub/.git", true),
            (b"sub/.lifeos", true),
            (b"a/.GIT/hooks/x", true),
            (b"GIT~1/config", true),
            (b"notes/a.md", false),
            (b".lifeosignore", false),
            (b"x.lifeos/a", false),
            (b".github/workflows/ci.yml", false),
        ];
        for (p, yes) in inside {
            assert_eq!(in_repository_dir(p), *yes, "{}", display(p));
        }
    }

    #[test]
    fn split_refuses_escapes() {
        assert!(split(b"a/../b").is_err());
        assert_eq!(split(b"./a//b/").unwrap(), vec![&b"a"[..], &b"b"[..]]);
        assert_eq!(clean(b"/x/\xff/").unwrap(), BString::from(&b"x/\xff"[..]));
        assert!(is_under(b"a/b", b"a") && !is_under(b"ab", b"a") && is_under(b"x", b""));
    }
}
