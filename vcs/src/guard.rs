//! Names and symlink targets lifeos never writes into a folder.
//!
//! Trees arrive from outside: imported from git, fetched from another device or a storage
//! server. Whatever they hold, a checkout must never write a repository's own folder
//! (`.git`, `.lifeos`), in any spelling a file system would take for it, and never a
//! symlink that leads out of the folder or into those folders. Git refuses the same
//! names (`verify_path`, `is_ntfs_dotgit`, `is_hfs_dotgit` in git's `read-cache.c`,
//! `path.c` and `utf8.c`); the checks here follow them, and add `.lifeos`:
//!
//! - case is ignored (`.GIT`), as on the case-insensitive file systems of macOS and
//!   Windows, and as git does everywhere;
//! - NTFS drops trailing dots and spaces and reads `name:stream` as `name`
//!   (`.git. `, `.git::$INDEX_ALLOCATION`), and answers to 8.3 short names (`GIT~1`,
//!   `LIFEOS~1`);
//! - HFS+ ignores some invisible code points (`.g\u{200c}it`);
//! - `.gitmodules` may not be a symlink (git reads it from the folder).
//!
//! A symlink's target is checked by its text, from where the link is: it may climb with
//! leading `..` no higher than the folder's top, and then only descend, never through
//! `.git` or `.lifeos`. Every symlink lifeos writes passes this check, so by induction a
//! chain of them stays inside the folder too (a later `..` after a name could undo a
//! symlink's descent, so it is refused). See docs/SECURITY.md.

use crate::object::EntryKind;

/// Why a path is never written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A component is `.git` as some file system reads it.
    DotGit,
    /// A component is `.lifeos` as some file system reads it.
    DotLifeos,
    /// The path is `.gitmodules` (as some file system reads it) and a symlink.
    SymlinkedGitmodules,
    /// A symlink whose target is absolute.
    AbsoluteSymlink,
    /// A symlink whose target climbs above the folder's top.
    SymlinkOutside,
    /// A symlink whose target has `..` after a name (a symlink on the way could make it
    /// leave the folder).
    SymlinkClimbsAfterName,
    /// A symlink whose target leads into `.git` or `.lifeos`.
    SymlinkIntoRepositoryFolder,
    /// A symlink with an empty target, or one holding NUL.
    BadSymlinkTarget,
}

impl Refusal {
    /// What is wrong, for a message that names the path before it.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::DotGit => "is named as git's own folder (.git, in some spelling a file system reads as .git); lifeos never writes it",
            Refusal::DotLifeos => "is named as lifeos's own folder (.lifeos, in some spelling a file system reads as .lifeos); lifeos never writes it",
            Refusal::SymlinkedGitmodules => "is a .gitmodules that is a symlink, which git refuses to read through",
            Refusal::AbsoluteSymlink => "is a symlink to an absolute path, outside the folder",
            Refusal::SymlinkOutside => "is a symlink whose target climbs above the folder",
            Refusal::SymlinkClimbsAfterName => "is a symlink whose target has `..` after a name, which a symlink on its way could turn outside the folder",
            Refusal::SymlinkIntoRepositoryFolder => "is a symlink into a .git or .lifeos folder",
            Refusal::BadSymlinkTarget => "is a symlink with an empty target or a NUL byte in it",
        }
    }

    /// Whether the refusal is only that a symlink leads outside the folder (which a
    /// person may allow for their own folder), not into a repository's own folder.
    pub fn is_outside(self) -> bool {
        matches!(
            self,
            Refusal::AbsoluteSymlink | Refusal::SymlinkOutside | Refusal::SymlinkClimbsAfterName
        )
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason())
    }
}

/// Code points HFS+ ignores when it compares names (git's `next_hfs_char`).
fn hfs_ignorable(c: char) -> bool {
    matches!(
        c as u32,
        0x200c..=0x200f | 0x202a..=0x202e | 0x206a..=0x206f | 0xfeff
    )
}

/// Whether `name` is `.needle` to HFS+: case-insensitive, ignorable code points skipped.
fn is_hfs_dot(name: &[u8], needle: &str) -> bool {
    // Without code points to ignore, HFS+ compares as NTFS's long form does (which every
    // caller checks too): the common case, decided without decoding.
    if name.is_ascii() {
        return false;
    }
    let Ok(text) = std::str::from_utf8(name) else {
        // HFS+ names are UTF-8; git reads malformed UTF-8 as "cannot be .git".
        return false;
    };
    let mut chars = text.chars().filter(|c| !hfs_ignorable(*c));
    if chars.next() != Some('.') {
        return false;
    }
    let mut want = needle.chars();
    loop {
        match (want.next(), chars.next()) {
            (Some(a), Some(b)) if a.eq_ignore_ascii_case(&b) => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// Whether what follows a match leaves it the same name to NTFS: only dots and spaces,
/// up to the end or a `:` (an alternate data stream of the same file).
fn ntfs_rest_is_empty(rest: &[u8]) -> bool {
    for b in rest {
        match b {
            b':' => return true,
            b' ' | b'.' => {}
            _ => return false,
        }
    }
    true
}

/// Whether `name` is `.needle` to NTFS by its long name: case-insensitive, with trailing
/// dots and spaces or a stream name.
fn is_ntfs_dot_long(name: &[u8], needle: &str) -> bool {
    let needle = needle.as_bytes();
    name.strip_prefix(b".").is_some_and(|rest| {
        rest.len() >= needle.len()
            && rest[..needle.len()].eq_ignore_ascii_case(needle)
            && ntfs_rest_is_empty(&rest[needle.len()..])
    })
}

/// Whether `name` is `.needle` to NTFS: case-insensitive, with trailing dots and spaces or
/// a stream name, or an 8.3 short name of it (`NEEDLE~1` to `~4`, first six letters; or
/// the hashed form `fallback~N` Windows uses after those, where git knows it).
fn is_ntfs_dot(name: &[u8], needle: &str, fallback: Option<&str>) -> bool {
    if name.starts_with(b".") {
        return is_ntfs_dot_long(name, needle);
    }
    let needle = needle.as_bytes();
    let short = &needle[..needle.len().min(6)];
    if name.len() >= short.len() + 2
        && name[..short.len()].eq_ignore_ascii_case(short)
        && name[short.len()] == b'~'
        && (b'1'..=b'4').contains(&name[short.len() + 1])
    {
        return ntfs_rest_is_empty(&name[short.len() + 2..]);
    }
    let Some(prefix) = fallback.map(str::as_bytes) else {
        return false;
    };
    // The fall-back short name: up to six letters of `prefix`, `~`, a digit 1-9, digits,
    // eight characters in all (git's `is_ntfs_dot_generic`).
    let mut i = 0;
    let mut saw_tilde = false;
    while i < 8 {
        let Some(&b) = name.get(i) else {
            return false;
        };
        if saw_tilde {
            if !b.is_ascii_digit() {
                return false;
            }
        } else if b == b'~' {
            i += 1;
            if !name.get(i).is_some_and(|d| (b'1'..=b'9').contains(d)) {
                return false;
            }
            saw_tilde = true;
        } else if i >= 6 || b >= 0x80 || !prefix.get(i).is_some_and(|p| p.eq_ignore_ascii_case(&b))
        {
            return false;
        }
        i += 1;
    }
    ntfs_rest_is_empty(&name[i..])
}

/// Whether `name` is `.needle` on some file system: compared exactly without case, as
/// NTFS compares it, or as HFS+ does.
fn is_dot_name(name: &[u8], needle: &str, ntfs_fallback: Option<&str>) -> bool {
    is_ntfs_dot(name, needle, ntfs_fallback) || is_hfs_dot(name, needle)
}

/// Whether `name` is `.git` to some file system (git's `is_ntfs_dotgit` and
/// `is_hfs_dotgit`: `GIT~1` is git's only short name, as `.git` is made first).
pub fn is_dot_git(name: &[u8]) -> bool {
    let ntfs_short = name.len() >= 5
        && name[..5].eq_ignore_ascii_case(b"git~1")
        && ntfs_rest_is_empty(&name[5..]);
    ntfs_short || is_ntfs_dot_long(name, "git") || is_hfs_dot(name, "git")
}

/// Whether `name` is `.lifeos` to some file system.
pub fn is_dot_lifeos(name: &[u8]) -> bool {
    is_dot_name(name, "lifeos", None)
}

/// Whether `name` is a repository's own folder (`.git` or `.lifeos`) to some file system:
/// never recorded, never written.
pub fn is_repository_name(name: &[u8]) -> bool {
    is_dot_git(name) || is_dot_lifeos(name)
}

/// Checks one name of a tree entry of `kind` (the leaf's kind; `Dir` for the folders on a
/// path). Names are also checked for `.`, `..`, `/` and NUL when trees are decoded.
pub fn check_name(name: &[u8], kind: EntryKind) -> Result<(), Refusal> {
    if is_dot_git(name) {
        return Err(Refusal::DotGit);
    }
    if is_dot_lifeos(name) {
        return Err(Refusal::DotLifeos);
    }
    if kind == EntryKind::Symlink && is_dot_name(name, "gitmodules", Some("gi7eba")) {
        return Err(Refusal::SymlinkedGitmodules);
    }
    Ok(())
}

/// Checks every component of repository path `path`, whose last one is of `kind`.
pub fn check_path(path: &[u8], kind: EntryKind) -> Result<(), Refusal> {
    let mut parts = path.split(|b| *b == b'/').peekable();
    while let Some(part) = parts.next() {
        let k = if parts.peek().is_none() {
            kind
        } else {
            EntryKind::Dir
        };
        check_name(part, k)?;
    }
    Ok(())
}

/// Checks the target of the symlink at repository path `path`: relative, climbing with
/// leading `..` no higher than the folder's top, then only descending, never into `.git`
/// or `.lifeos`.
pub fn check_symlink(path: &[u8], target: &[u8]) -> Result<(), Refusal> {
    if target.is_empty() || target.contains(&0) {
        return Err(Refusal::BadSymlinkTarget);
    }
    if target.split(|b| *b == b'/').any(is_repository_name) {
        return Err(Refusal::SymlinkIntoRepositoryFolder);
    }
    if target.starts_with(b"/") {
        return Err(Refusal::AbsoluteSymlink);
    }
    // Folders above the link: the components of its path but its own name.
    let mut depth = path.split(|b| *b == b'/').filter(|c| !c.is_empty()).count() as i64 - 1;
    let mut named = false;
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." if named => return Err(Refusal::SymlinkClimbsAfterName),
            b".." => {
                depth -= 1;
                if depth < 0 {
                    return Err(Refusal::SymlinkOutside);
                }
            }
            _ => named = true,
        }
    }
    // Climbing back down into the folders on the link's own path can reach `.git` or
    // `.lifeos` only by naming them, which was checked.
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Spellings git's own tests (t0060, t1450) and the CVEs use for `.git`.
    const DOT_GIT: &[&[u8]] = &[
        b".git",
        b".GIT",
        b".Git",
        b".git.",
        b".git ",
        b".git. .",
        b".git::$INDEX_ALLOCATION",
        b".git:stream",
        b"git~1",
        b"GIT~1",
        b"GIT~1. ",
        b".g\xe2\x80\x8cit",
        b".\xe2\x80\x8bgit",
        b".gi\xef\xbb\xbft",
        b"\xe2\x80\x8e.git",
    ];

    #[test]
    fn every_spelling_of_dot_git_is_refused() {
        for name in DOT_GIT {
            // U+200B (zero width space) is not one HFS+ ignores: git lets it through.
            let expect = !name.starts_with(b".\xe2\x80\x8b");
            assert_eq!(
                check_name(name, EntryKind::File) == Err(Refusal::DotGit),
                expect,
                "{}",
                String::from_utf8_lossy(name)
            );
        }
        for ok in [
            &b".gitignore"[..],
            b".github",
            b".gitattributes",
            b"git",
            b"git~2",
            b".git-blame-ignore-revs",
            b"x.git",
            b".gitx",
        ] {
            assert_eq!(check_name(ok, EntryKind::File), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn every_spelling_of_dot_lifeos_is_refused() {
        for name in [
            &b".lifeos"[..],
            b".LIFEOS",
            b".LifeOS",
            b".lifeos.",
            b".lifeos  ",
            b".lifeos:x",
            b"LIFEOS~1",
            b"lifeos~4",
            b".life\xe2\x80\x8dos",
            b"\xef\xbb\xbf.lifeos",
        ] {
            assert_eq!(
                check_name(name, EntryKind::Dir),
                Err(Refusal::DotLifeos),
                "{}",
                String::from_utf8_lossy(name)
            );
        }
        for ok in [&b".lifeosignore"[..], b"lifeos", b"lifeos~5", b".lifeos-x"] {
            assert_eq!(check_name(ok, EntryKind::File), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn gitmodules_may_be_a_file_but_not_a_symlink() {
        for name in [
            &b".gitmodules"[..],
            b".GITMODULES",
            b".gitmodules . ",
            b"GITMOD~1",
            b"gi7eba~9",
            b"gi7eb~12",
            b".git\xe2\x80\x8cmodules",
        ] {
            assert_eq!(check_name(name, EntryKind::File), Ok(()));
            assert_eq!(
                check_name(name, EntryKind::Symlink),
                Err(Refusal::SymlinkedGitmodules),
                "{}",
                String::from_utf8_lossy(name)
            );
        }
    }

    #[test]
    fn a_path_is_refused_for_any_component() {
        assert_eq!(
            check_path(b"a/b/.git/config", EntryKind::File),
            Err(Refusal::DotGit)
        );
        assert_eq!(
            check_path(b"sub/.git", EntryKind::File),
            Err(Refusal::DotGit)
        );
        assert_eq!(
            check_path(b"A/.LIFEOS/x", EntryKind::File),
            Err(Refusal::DotLifeos)
        );
        assert_eq!(
            check_path(b"a/.gitmodules", EntryKind::Symlink),
            Err(Refusal::SymlinkedGitmodules)
        );
        assert_eq!(check_path(b".gitmodules/x", EntryKind::Symlink), Ok(()));
        assert_eq!(check_path(b"notes/plan.md", EntryKind::File), Ok(()));
    }

    #[test]
    fn symlinks_stay_inside_the_folder() {
        type Case<'a> = (&'a [u8], &'a [u8], Result<(), Refusal>);
        let cases: &[Case] = &[
            (b"a", b"b", Ok(())),
            (b"d/a", b"../b", Ok(())),
            (b"d/e/a", b"../../f/g", Ok(())),
            (b"d/a", b"./x/./y", Ok(())),
            (b"a", b"../x", Err(Refusal::SymlinkOutside)),
            (b"d/a", b"../../x", Err(Refusal::SymlinkOutside)),
            (b"a", b"/etc/passwd", Err(Refusal::AbsoluteSymlink)),
            (
                b"a",
                b"/x/.git/hooks",
                Err(Refusal::SymlinkIntoRepositoryFolder),
            ),
            (
                b"a",
                b"d/../.git",
                Err(Refusal::SymlinkIntoRepositoryFolder),
            ),
            (b"a", b"d/../b", Err(Refusal::SymlinkClimbsAfterName)),
            (b"d/up", b"..", Ok(())),
            (b"x", b"d/up/..", Err(Refusal::SymlinkClimbsAfterName)),
            (
                b"A",
                b".git/hooks",
                Err(Refusal::SymlinkIntoRepositoryFolder),
            ),
            (
                b"d/h",
                b"../.GIT",
                Err(Refusal::SymlinkIntoRepositoryFolder),
            ),
            (
                b"l",
                b"x/.lifeos/config",
                Err(Refusal::SymlinkIntoRepositoryFolder),
            ),
            (b"a", b"", Err(Refusal::BadSymlinkTarget)),
        ];
        for (path, target, want) in cases {
            assert_eq!(
                check_symlink(path, target),
                *want,
                "{} -> {}",
                String::from_utf8_lossy(path),
                String::from_utf8_lossy(target)
            );
        }
    }

    /// Resolves `target` of the link at `path` lexically, as the file system would if no
    /// component were a symlink: `None` when it leaves the top.
    fn resolve(path: &[u8], target: &[u8]) -> Option<Vec<Vec<u8>>> {
        let mut at: Vec<Vec<u8>> = path.split(|b| *b == b'/').map(<[u8]>::to_vec).collect();
        at.pop();
        for part in target.split(|b| *b == b'/') {
            match part {
                b"" | b"." => {}
                b".." => {
                    at.pop()?;
                }
                n => at.push(n.to_vec()),
            }
        }
        Some(at)
    }

    proptest! {
        /// A target the check lets through never leaves the top or names a repository
        /// folder, whichever link path it is at.
        #[test]
        fn an_accepted_symlink_resolves_inside(
            depth in 0usize..4,
            parts in proptest::collection::vec(
                prop_oneof![Just(b"..".to_vec()), Just(b".".to_vec()), Just(b"a".to_vec()),
                            Just(b".git".to_vec()), Just(b"".to_vec())], 0..6),
        ) {
            let mut path = vec![b"d".to_vec(); depth];
            path.push(b"link".to_vec());
            let path = path.join(&b'/');
            let target = parts.join(&b'/');
            if check_symlink(&path, &target).is_ok() {
                let inside = resolve(&path, &target);
                prop_assert!(inside.is_some());
                prop_assert!(inside.unwrap().iter().all(|c| !is_repository_name(c)));
            }
        }

        /// `.git` as git itself (through gitoxide's port of its checks) sees it.
        #[test]
        fn dot_git_agrees_with_git(name in "[.gGiItT~1 :\u{200c}\u{feff}a]{1,8}") {
            let ours = is_dot_git(name.as_bytes());
            let git = matches!(
                gix_validate::path::component(
                    name.as_bytes().into(),
                    None,
                    gix_validate::path::component::Options {
                        protect_windows: false,
                        protect_hfs: true,
                        protect_ntfs: true,
                    },
                ),
                Err(gix_validate::path::component::Error::DotGitDir)
            );
            prop_assert_eq!(ours, git, "{:?}", name);
        }

        /// `.gitmodules` symlinks as git sees them.
        #[test]
        fn gitmodules_agrees_with_git(name in "[.gGiItTmMoOdDuUlLeEsS~17ab :]{1,12}") {
            let ours = check_name(name.as_bytes(), EntryKind::Symlink)
                == Err(Refusal::SymlinkedGitmodules);
            let git = matches!(
                gix_validate::path::component(
                    name.as_bytes().into(),
                    Some(gix_validate::path::component::Mode::Symlink),
                    gix_validate::path::component::Options {
                        protect_windows: false,
                        protect_hfs: true,
                        protect_ntfs: true,
                    },
                ),
                Err(gix_validate::path::component::Error::SymlinkedGitModules)
            );
            prop_assert_eq!(ours, git, "{:?}", name);
        }
    }
}
