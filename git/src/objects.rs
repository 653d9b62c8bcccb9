//! Git's object forms: parsing git commits, trees and tags, and building the exact bytes
//! git hashes from lifeos objects.

use gix::ObjectId;
use lifeos_vcs::object::{change_id_str, Commit, EntryKind, Signature};

/// A git object kind, as lifeos writes and hashes them.
pub use gix::objs::Kind as GitKind;

/// The SHA-1 git gives `body` as an object of `kind`.
pub fn git_hash(kind: GitKind, body: &[u8]) -> ObjectId {
    let mut h = gix::hash::hasher(gix::hash::Kind::Sha1);
    h.update(kind.as_bytes());
    h.update(b" ");
    h.update(body.len().to_string().as_bytes());
    h.update(b"\0");
    h.update(body);
    h.try_finalize().expect("SHA-1 of in-memory bytes")
}

/// A git commit split into what lifeos keeps: tree, parents, the raw header bytes after
/// the parents (up to and including the blank line), and the message.
#[derive(Debug, PartialEq, Eq)]
pub struct RawCommit<'a> {
    /// The root tree.
    pub tree: ObjectId,
    /// The parents, in order.
    pub parents: Vec<ObjectId>,
    /// Everything between the `parent` lines and the message, byte for byte.
    pub header: &'a [u8],
    /// The message (possibly empty, possibly without a final newline).
    pub message: &'a [u8],
}

fn hex_line<'a>(data: &'a [u8], key: &[u8]) -> Option<(ObjectId, &'a [u8])> {
    let rest = data.strip_prefix(key)?;
    let (hex, rest) = (rest.get(..40)?, rest.get(40..)?);
    let rest = rest.strip_prefix(b"\n")?;
    Some((ObjectId::from_hex(hex).ok()?, rest))
}

/// Splits a git commit object; `None` if it does not start with `tree` and `parent` lines.
pub fn parse_commit(data: &[u8]) -> Option<RawCommit<'_>> {
    let (tree, mut rest) = hex_line(data, b"tree ")?;
    let mut parents = Vec::new();
    while let Some((p, r)) = hex_line(rest, b"parent ") {
        parents.push(p);
        rest = r;
    }
    // Git accepts a commit with no blank line before the message: all of it is header.
    let (header, message) = match find(rest, b"\n\n") {
        Some(i) => rest.split_at(i + 2),
        None => (rest, &rest[rest.len()..]),
    };
    Some(RawCommit {
        tree,
        parents,
        header,
        message,
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The value of header `key` (its first line only), if the header has it.
pub fn header_value<'a>(header: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    header
        .split(|b| *b == b'\n')
        .find_map(|line| line.strip_prefix(key).and_then(|r| r.strip_prefix(b" ")))
}

/// Parses a git signature line's value (`Name <email> 1700000000 +0100`), leniently: what
/// does not parse becomes empty or zero (the raw line is kept for export anyway).
pub fn parse_signature(v: &[u8]) -> Signature {
    let lt = v.iter().position(|b| *b == b'<');
    let gt = v.iter().rposition(|b| *b == b'>');
    let (name, email, rest) = match (lt, gt) {
        (Some(l), Some(g)) if l < g => (
            v[..l].strip_suffix(b" ").unwrap_or(&v[..l]),
            &v[l + 1..g],
            &v[g + 1..],
        ),
        _ => (v, &b""[..], &b""[..]),
    };
    let mut it = rest.split(|b| *b == b' ').filter(|s| !s.is_empty());
    let time = it
        .next()
        .and_then(|t| std::str::from_utf8(t).ok()?.parse::<i64>().ok())
        .unwrap_or(0);
    let tz_offset_min = it.next().and_then(parse_tz).unwrap_or(0);
    Signature {
        name: String::from_utf8_lossy(name).into_owned(),
        email: String::from_utf8_lossy(email).into_owned(),
        time,
        tz_offset_min,
    }
}

fn parse_tz(tz: &[u8]) -> Option<i32> {
    let (sign, digits) = match tz.first()? {
        b'+' => (1, &tz[1..]),
        b'-' => (-1, &tz[1..]),
        _ => return None,
    };
    if digits.len() != 4 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = |s: &[u8]| i32::from(s[0] - b'0') * 10 + i32::from(s[1] - b'0');
    Some(sign * (n(&digits[..2]) * 60 + n(&digits[2..])))
}

/// Formats a signature as git writes it.
fn format_signature(s: &Signature) -> String {
    let sign = if s.tz_offset_min < 0 { '-' } else { '+' };
    let m = s.tz_offset_min.unsigned_abs();
    format!(
        "{} <{}> {} {sign}{:02}{:02}",
        s.name,
        s.email,
        s.time,
        m / 60,
        m % 60
    )
}

/// Parses a `change-id` header value (32 characters `k`–`z`, the form Jujutsu and lifeos
/// both write).
pub fn parse_change_id(v: &[u8]) -> Option<[u8; 16]> {
    if v.len() != 32 || !v.iter().all(|b| (b'k'..=b'z').contains(b)) {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in v.chunks(2).enumerate() {
        out[i] = ((pair[0] - b'k') << 4) | (pair[1] - b'k');
    }
    Some(out)
}

/// The change id of a git commit that has no `change-id` header: Jujutsu's rule (the
/// commit id's bytes 4..20, reversed, each byte's bits reversed), so both tools give an
/// imported commit the same change id.
pub fn change_id_from_sha(sha: &ObjectId) -> [u8; 16] {
    let b = sha.as_bytes();
    let mut out = [0u8; 16];
    for (o, x) in out.iter_mut().zip(b[4..20].iter().rev()) {
        *o = x.reverse_bits();
    }
    out
}

/// The extra header under which a commit at a shallow clone's boundary keeps its git
/// parents' ids (the 20-byte SHA-1s, concatenated), since lifeos holds no parents for it.
pub const SHALLOW_PARENTS: &[u8] = b"lifeos-shallow-parents";

/// The extra header recording a shallow boundary commit's git parents.
pub fn shallow_parents_header(parents: &[ObjectId]) -> (Vec<u8>, Vec<u8>) {
    (
        SHALLOW_PARENTS.to_vec(),
        parents
            .iter()
            .flat_map(|p| p.as_bytes().iter().copied())
            .collect(),
    )
}

/// The git parents a shallow boundary commit remembers, if `c` is one.
pub fn shallow_parents(c: &Commit) -> Option<Vec<ObjectId>> {
    let (_, v) = c.extra_headers.iter().find(|(k, _)| k == SHALLOW_PARENTS)?;
    v.chunks(20).map(|b| ObjectId::try_from(b).ok()).collect()
}

/// The git bytes of a lifeos commit, given its tree's and parents' SHA-1s: the kept git
/// header for a commit that came from git, else a deterministic form carrying the change
/// id as a `change-id` header.
pub fn commit_bytes(c: &Commit, tree: &ObjectId, parents: &[ObjectId]) -> Vec<u8> {
    let mut out = format!("tree {tree}\n").into_bytes();
    for p in parents {
        out.extend_from_slice(format!("parent {p}\n").as_bytes());
    }
    match &c.git_header {
        Some(h) => out.extend_from_slice(h),
        None => out.extend_from_slice(
            format!(
                "author {}\ncommitter {}\nchange-id {}\n\n",
                format_signature(&c.author),
                format_signature(&c.committer),
                change_id_str(&c.change_id)
            )
            .as_bytes(),
        ),
    }
    out.extend_from_slice(&c.message);
    out
}

/// A git tree entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitEntry<'a> {
    /// The mode as written (`100644`, `40000`, ...).
    pub mode: &'a [u8],
    /// The name.
    pub name: &'a [u8],
    /// The object.
    pub oid: ObjectId,
}

/// Parses a git tree object; `None` if it is malformed.
pub fn parse_tree(mut data: &[u8]) -> Option<Vec<GitEntry<'_>>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let sp = data.iter().position(|b| *b == b' ')?;
        let nul = data.iter().position(|b| *b == 0)?;
        if nul < sp {
            return None;
        }
        let oid = ObjectId::try_from(data.get(nul + 1..nul + 21)?).ok()?;
        out.push(GitEntry {
            mode: &data[..sp],
            name: &data[sp + 1..nul],
            oid,
        });
        data = &data[nul + 21..];
    }
    Some(out)
}

/// The lifeos entry kind of a git mode (`100664`, an old git's group-writable file mode,
/// is a file; its tree keeps its raw form).
pub fn kind_of_mode(mode: &[u8]) -> Option<EntryKind> {
    Some(match mode {
        b"100644" | b"100664" | b"0100644" => EntryKind::File,
        b"100755" | b"0100755" => EntryKind::Executable,
        b"120000" | b"0120000" => EntryKind::Symlink,
        b"40000" | b"040000" => EntryKind::Dir,
        b"160000" | b"0160000" => EntryKind::Gitlink,
        _ => return None,
    })
}

fn mode_of_kind(kind: EntryKind) -> &'static [u8] {
    match kind {
        EntryKind::File => b"100644",
        EntryKind::Executable => b"100755",
        EntryKind::Symlink => b"120000",
        EntryKind::Dir => b"40000",
        EntryKind::Gitlink => b"160000",
    }
}

/// Git's canonical tree bytes for entries (name, kind, SHA-1), in git's order (a
/// directory sorts as if its name ended in `/`).
pub fn tree_bytes(entries: &[(&[u8], EntryKind, ObjectId)]) -> Vec<u8> {
    let key = |name: &[u8], kind: EntryKind| {
        let mut k = name.to_vec();
        if kind == EntryKind::Dir {
            k.push(b'/');
        }
        k
    };
    let mut sorted: Vec<&(&[u8], EntryKind, ObjectId)> = entries.iter().collect();
    sorted.sort_by_key(|(n, k, _)| key(n, *k));
    let mut out = Vec::new();
    for (name, kind, oid) in sorted {
        out.extend_from_slice(mode_of_kind(*kind));
        out.push(b' ');
        out.extend_from_slice(name);
        out.push(0);
        out.extend_from_slice(oid.as_bytes());
    }
    out
}

/// The `object` and `type` of a git tag object.
pub fn parse_tag(data: &[u8]) -> Option<(ObjectId, &[u8])> {
    let (oid, rest) = hex_line(data, b"object ")?;
    let rest = rest.strip_prefix(b"type ")?;
    let end = rest.iter().position(|b| *b == b'\n')?;
    Some((oid, &rest[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_splits_and_rebuilds_byte_for_byte() {
        let raw = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\
parent 1111111111111111111111111111111111111111\n\
parent 2222222222222222222222222222222222222222\n\
author A U Thor <a@x> 1700000000 -0000\n\
committer \xffC <c@x> 1700000001 +0530\n\
encoding ISO-8859-1\n\
gpgsig -----BEGIN-----\n \n abc\n -----END-----\n\
\n\
message without final newline";
        let c = parse_commit(raw).unwrap();
        assert_eq!(c.parents.len(), 2);
        assert!(c.header.ends_with(b"-----END-----\n\n"));
        assert_eq!(c.message, b"message without final newline");
        let author = parse_signature(header_value(c.header, b"author").unwrap());
        assert_eq!(
            (author.name.as_str(), author.email.as_str()),
            ("A U Thor", "a@x")
        );
        assert_eq!((author.time, author.tz_offset_min), (1_700_000_000, 0));
        let committer = parse_signature(header_value(c.header, b"committer").unwrap());
        assert_eq!(committer.tz_offset_min, 330);
        let commit = Commit {
            tree: lifeos_store::Id::hash(b"t"),
            parents: vec![],
            change_id: [0; 16],
            author,
            committer,
            message: c.message.to_vec(),
            extra_headers: vec![],
            conflicts: vec![],
            git_header: Some(c.header.to_vec()),
        };
        assert_eq!(commit_bytes(&commit, &c.tree, &c.parents), raw.to_vec());
    }

    #[test]
    fn a_commit_without_a_blank_line_is_all_header() {
        let raw = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor a <a> 1 +0000\ncommitter a <a> 1 +0000\n";
        let c = parse_commit(raw).unwrap();
        assert_eq!(c.message, b"");
        assert_eq!(c.header.len(), raw.len() - 46);
    }

    #[test]
    fn change_ids_follow_jujutsu() {
        let id = [0x12u8; 16];
        assert_eq!(parse_change_id(change_id_str(&id).as_bytes()), Some(id));
        assert_eq!(parse_change_id(b"kkkk"), None);
        let sha = ObjectId::from_hex(b"000000000102030405060708090a0b0c0d0e0f10").unwrap();
        let c = change_id_from_sha(&sha);
        assert_eq!(c[0], 0x10u8.reverse_bits());
        assert_eq!(c[15], 0x01u8.reverse_bits());
    }

    #[test]
    fn the_empty_tree_has_git_s_id() {
        assert_eq!(
            git_hash(GitKind::Tree, &tree_bytes(&[])).to_string(),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
    }

    #[test]
    fn trees_sort_directories_as_if_they_ended_in_a_slash() {
        let z = ObjectId::null(gix::hash::Kind::Sha1);
        let t = tree_bytes(&[
            (b"a.b", EntryKind::File, z),
            (b"a", EntryKind::Dir, z),
            (b"a-", EntryKind::File, z),
        ]);
        let names: Vec<&[u8]> = parse_tree(&t).unwrap().iter().map(|e| e.name).collect();
        assert_eq!(names, [&b"a-"[..], b"a.b", b"a"]);
    }
}
