//! The history objects: trees, commits, views and operations, with their canonical
//! encodings (see `docs/FORMAT.md`). Decoders validate everything they accept, so a
//! hostile object (a tree entry named `..`, say) is refused when read.

use lifeos_store::enc::{DecodeError, Reader, Writer};
use lifeos_store::{Id, Kind};

/// Tree format version: 1, or 2 for a tree with a gitlink or a kept git form.
pub const TREE_VERSION: u8 = 2;
/// Commit format version: 1, or 2 for a commit with a kept git header.
pub const COMMIT_VERSION: u8 = 2;
/// View format version: 1, or 2 for a view with git refs.
pub const VIEW_VERSION: u8 = 4;
/// Git tag format version.
pub const GIT_TAG_VERSION: u8 = 1;
/// Operation format version: 1 with its events in itself, 2 with them in pages.
pub const OPERATION_VERSION: u8 = 2;
/// Event page format version.
pub const EVENT_PAGE_VERSION: u8 = 1;
/// Most events an operation holds in itself; with more, they are written in pages, so
/// that reading an operation (every command reads the head) does not decode them all.
pub const INLINE_EVENTS: usize = 256;
/// Events in one page (the last may hold fewer).
pub const EVENTS_PER_PAGE: usize = 1024;

/// What a tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A regular file with the executable bit.
    Executable,
    /// A symbolic link; the id names its target bytes.
    Symlink,
    /// A directory; the id names its tree.
    Dir,
    /// A git submodule (mode 160000): the id holds the commit's SHA-1 (see
    /// [`gitlink_id`]), which names no lifeos object.
    Gitlink,
}

/// The tree-entry id of a gitlink: the SHA-1 followed by 12 zero bytes.
pub fn gitlink_id(sha1: &[u8; 20]) -> Id {
    let mut b = [0u8; 32];
    b[..20].copy_from_slice(sha1);
    Id(b)
}

/// The SHA-1 a gitlink entry's id holds.
pub fn gitlink_sha1(id: &Id) -> [u8; 20] {
    id.0[..20].try_into().expect("20 bytes")
}

impl EntryKind {
    fn to_u8(self) -> u8 {
        match self {
            EntryKind::File => 1,
            EntryKind::Executable => 2,
            EntryKind::Symlink => 3,
            EntryKind::Dir => 4,
            EntryKind::Gitlink => 5,
        }
    }

    fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => EntryKind::File,
            2 => EntryKind::Executable,
            3 => EntryKind::Symlink,
            4 => EntryKind::Dir,
            5 => EntryKind::Gitlink,
            _ => return None,
        })
    }

    /// A short name for output.
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Executable => "executable",
            EntryKind::Symlink => "symlink",
            EntryKind::Dir => "dir",
            EntryKind::Gitlink => "gitlink",
        }
    }
}

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// The name: one path component, never empty, `.`, `..`, nor containing `/` or NUL.
    pub name: Vec<u8>,
    /// What it is.
    pub kind: EntryKind,
    /// File id, symlink target id, or subtree id.
    pub id: Id,
    /// File size, symlink target length, or total size of the files below a directory.
    pub size: u64,
}

/// A directory listing, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tree {
    /// Entries in strictly increasing name order.
    pub entries: Vec<TreeEntry>,
    /// The exact git tree object this tree was imported from, kept only when git's
    /// canonical form of `entries` would not reproduce it (an unsorted tree, mode
    /// `100664`, a zero-padded mode): export writes these bytes instead.
    pub git_raw: Option<Vec<u8>>,
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

impl Tree {
    /// Whether the tree needs version 2 of the encoding (a gitlink, or a kept git form).
    fn needs_v2(&self) -> bool {
        self.git_raw.is_some() || self.entries.iter().any(|e| e.kind == EntryKind::Gitlink)
    }

    /// The canonical encoding (version 1 unless the tree needs version 2, so trees
    /// without git quirks keep the ids they always had).
    pub fn encode(&self) -> Vec<u8> {
        let v2 = self.needs_v2();
        let mut w = Writer::with_header(Kind::Tree as u8, if v2 { 2 } else { 1 });
        w.uint(self.entries.len() as u64);
        for e in &self.entries {
            w.bytes(&e.name).u8(e.kind.to_u8()).id(&e.id).uint(e.size);
        }
        if v2 {
            write_opt_bytes(&mut w, self.git_raw.as_deref());
        }
        w.finish()
    }

    /// Decodes and validates a tree.
    pub fn decode(bytes: &[u8]) -> Result<Tree, DecodeError> {
        const W: &str = "tree";
        let mut r = Reader::new(bytes);
        let version = r.header(W, Kind::Tree as u8, TREE_VERSION)?;
        let n = r.count(W)?;
        let mut entries: Vec<TreeEntry> = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.bytes(W)?.to_vec();
            valid_name(&name).map_err(|e| DecodeError::new(W, e))?;
            if let Some(prev) = entries.last() {
                if prev.name >= name {
                    return Err(DecodeError::new(
                        W,
                        format!(
                            "entry {} is out of order or duplicated",
                            crate::path::display(&name)
                        ),
                    ));
                }
            }
            let k = r.u8(W)?;
            let kind = EntryKind::from_u8(k)
                .filter(|k| version >= 2 || *k != EntryKind::Gitlink)
                .ok_or_else(|| DecodeError::new(W, format!("unknown entry kind {k}")))?;
            let id = r.id(W)?;
            let size = r.uint(W)?;
            if kind == EntryKind::Gitlink && (id.0[20..] != [0; 12] || size != 0) {
                return Err(DecodeError::new(
                    W,
                    format!("gitlink {} holds no SHA-1", crate::path::display(&name)),
                ));
            }
            entries.push(TreeEntry {
                name,
                kind,
                id,
                size,
            });
        }
        let git_raw = if version >= 2 {
            read_opt_bytes(&mut r, W)?
        } else {
            None
        };
        r.finish(W)?;
        let tree = Tree { entries, git_raw };
        if version >= 2 && !tree.needs_v2() {
            return Err(DecodeError::new(
                W,
                "version 2 tree with nothing that needs it",
            ));
        }
        if tree.checked_total_size().is_none() {
            return Err(DecodeError::new(
                W,
                "entry sizes add up to more than 2^64 bytes",
            ));
        }
        Ok(tree)
    }

    fn checked_total_size(&self) -> Option<u64> {
        self.entries
            .iter()
            .filter(|e| !matches!(e.kind, EntryKind::Symlink | EntryKind::Gitlink))
            .try_fold(0u64, |acc, e| acc.checked_add(e.size))
    }

    /// Total size of the files below this tree (a decoded tree's sizes are known to fit;
    /// a sum that would not is capped at `u64::MAX`).
    pub fn total_size(&self) -> u64 {
        self.checked_total_size().unwrap_or(u64::MAX)
    }

    /// The entry named `name`.
    pub fn get(&self, name: &[u8]) -> Option<&TreeEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }
}

/// Who made a commit, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// Name.
    pub name: String,
    /// Email.
    pub email: String,
    /// Seconds since the Unix epoch.
    pub time: i64,
    /// Offset of the local time zone from UTC, in minutes.
    pub tz_offset_min: i32,
}

/// A commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The root tree.
    pub tree: Id,
    /// Parent commits (none for a root commit, two or more for a merge).
    pub parents: Vec<Id>,
    /// Stable across rewrites of the same change (16 random bytes).
    pub change_id: [u8; 16],
    /// Author.
    pub author: Signature,
    /// Committer.
    pub committer: Signature,
    /// The message, as given (not necessarily UTF-8).
    pub message: Vec<u8>,
    /// Extra git headers (name, value) kept so a git commit can be re-created byte for byte.
    pub extra_headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Paths a merge could not resolve, with the three versions (sorted by path).
    pub conflicts: Vec<Conflict>,
    /// For a commit imported from git: the raw bytes of the git commit between its
    /// `parent` lines and its message (author, committer, `encoding`, `gpgsig`, every
    /// other header in order, and the blank line if there was one), so export rebuilds
    /// the git commit byte for byte. `None` for commits made in lifeos, and dropped when
    /// a commit is rewritten.
    pub git_header: Option<Vec<u8>>,
}

/// A path a merge could not resolve: the tree holds a version with conflict markers (or
/// ours, for binary files); the three inputs are kept so nothing is lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Repository path (bytes).
    pub path: crate::path::BString,
    /// The merge base's version (file id), if it had one.
    pub base: Option<Id>,
    /// Our side's version.
    pub ours: Option<Id>,
    /// Their side's version.
    pub theirs: Option<Id>,
}

fn write_sig(w: &mut Writer, s: &Signature) {
    w.bytes(s.name.as_bytes())
        .bytes(s.email.as_bytes())
        .int(s.time)
        .int(i64::from(s.tz_offset_min));
}

fn read_sig(r: &mut Reader<'_>, what: &'static str) -> Result<Signature, DecodeError> {
    Ok(Signature {
        name: r.str(what)?.to_string(),
        email: r.str(what)?.to_string(),
        time: r.int(what)?,
        tz_offset_min: i32::try_from(r.int(what)?)
            .map_err(|_| DecodeError::new(what, "time zone offset out of range"))?,
    })
}

fn read_ids(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<Id>, DecodeError> {
    let n = r.count(what)?;
    (0..n).map(|_| r.id(what)).collect()
}

fn write_ids(w: &mut Writer, ids: &[Id]) {
    w.uint(ids.len() as u64);
    for id in ids {
        w.id(id);
    }
}

impl Commit {
    /// The canonical encoding (version 2 only for a commit with a git header).
    pub fn encode(&self) -> Vec<u8> {
        let version = if self.git_header.is_some() { 2 } else { 1 };
        let mut w = Writer::with_header(Kind::Commit as u8, version);
        w.id(&self.tree);
        write_ids(&mut w, &self.parents);
        w.raw(&self.change_id);
        write_sig(&mut w, &self.author);
        write_sig(&mut w, &self.committer);
        w.bytes(&self.message);
        w.uint(self.extra_headers.len() as u64);
        for (k, v) in &self.extra_headers {
            w.bytes(k).bytes(v);
        }
        w.uint(self.conflicts.len() as u64);
        for c in &self.conflicts {
            w.bytes(&c.path);
            write_opt_id(&mut w, &c.base);
            write_opt_id(&mut w, &c.ours);
            write_opt_id(&mut w, &c.theirs);
        }
        if let Some(h) = &self.git_header {
            w.bytes(h);
        }
        w.finish()
    }

    /// Decodes a commit.
    pub fn decode(bytes: &[u8]) -> Result<Commit, DecodeError> {
        const W: &str = "commit";
        let mut r = Reader::new(bytes);
        let version = r.header(W, Kind::Commit as u8, COMMIT_VERSION)?;
        let tree = r.id(W)?;
        let parents = read_ids(&mut r, W)?;
        let change_id: [u8; 16] = r.raw(W, 16)?.try_into().expect("16 bytes");
        let author = read_sig(&mut r, W)?;
        let committer = read_sig(&mut r, W)?;
        let message = r.bytes(W)?.to_vec();
        let n = r.count(W)?;
        let mut extra_headers = Vec::with_capacity(n);
        for _ in 0..n {
            extra_headers.push((r.bytes(W)?.to_vec(), r.bytes(W)?.to_vec()));
        }
        let n = r.count(W)?;
        let mut conflicts: Vec<Conflict> = Vec::with_capacity(n);
        for _ in 0..n {
            let path = crate::path::BString::from(r.bytes(W)?);
            if conflicts.last().is_some_and(|c| c.path >= path) {
                return Err(DecodeError::new(W, "conflict paths are not sorted"));
            }
            let base = read_opt_id(&mut r, W)?;
            let ours = read_opt_id(&mut r, W)?;
            let theirs = read_opt_id(&mut r, W)?;
            conflicts.push(Conflict {
                path,
                base,
                ours,
                theirs,
            });
        }
        let git_header = if version >= 2 {
            Some(r.bytes(W)?.to_vec())
        } else {
            None
        };
        r.finish(W)?;
        Ok(Commit {
            tree,
            parents,
            change_id,
            author,
            committer,
            message,
            extra_headers,
            conflicts,
            git_header,
        })
    }

    /// The first line of the message.
    pub fn summary(&self) -> String {
        let text = String::from_utf8_lossy(&self.message);
        text.lines().next().unwrap_or("").to_string()
    }
}

/// Renders a change id in the `k`–`z` alphabet (so it never looks like a commit id).
pub fn change_id_str(id: &[u8; 16]) -> String {
    id.iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .map(|n| (b'k' + n) as char)
        .collect()
}

/// Parses the `k`–`z` form of a change id prefix into nibbles.
pub fn is_change_id_prefix(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| (b'k'..=b'z').contains(&b))
}

/// The refs of the repository after an operation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct View {
    /// Commits with no descendants that are kept visible (sorted).
    pub heads: Vec<Id>,
    /// Branches: name and target commit (sorted by name).
    pub branches: Vec<(String, Id)>,
    /// Tags: name and target commit (sorted by name).
    pub tags: Vec<(String, Id)>,
    /// The branch the working folder is on.
    pub current_branch: Option<String>,
    /// The commit the working folder was last checked out from or committed as.
    pub wc_commit: Option<Id>,
    /// Git refs that are not plain branches or tags (`refs/pull/1/head`,
    /// `refs/remotes/...`), and annotated tags (`refs/tags/v1` naming a tag object); sorted
    /// by name.
    pub git_refs: Vec<GitRef>,
    /// The entity root: the [`crate::entity_map::EntityMap`] of every entity, once any
    /// was recorded.
    pub entities: Option<Id>,
    /// The action root: a map from action id to its newest [`crate::action`] record,
    /// once any was recorded.
    pub actions: Option<Id>,
}

/// A git ref kept in a view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitRef {
    /// The full ref name (`refs/pull/1/head`).
    pub name: String,
    /// What it names: the commit, or a [`GitTag`] object.
    pub target: Id,
    /// The commit `target` peels to (`target` itself for a commit).
    pub commit: Id,
}

/// A git annotated tag: the tag object's bytes, and the lifeos object it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitTag {
    /// The lifeos id of the tagged commit or tag.
    pub target: Id,
    /// Whether `target` is another tag (else a commit).
    pub target_is_tag: bool,
    /// The git tag object, byte for byte (its `object` line names the target's SHA-1).
    pub raw: Vec<u8>,
}

impl GitTag {
    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_header(Kind::GitTag as u8, GIT_TAG_VERSION);
        w.id(&self.target)
            .u8(u8::from(self.target_is_tag))
            .bytes(&self.raw);
        w.finish()
    }

    /// Decodes a git tag.
    pub fn decode(bytes: &[u8]) -> Result<GitTag, DecodeError> {
        const W: &str = "git tag";
        let mut r = Reader::new(bytes);
        r.header(W, Kind::GitTag as u8, GIT_TAG_VERSION)?;
        let target = r.id(W)?;
        let target_is_tag = match r.u8(W)? {
            0 => false,
            1 => true,
            x => return Err(DecodeError::new(W, format!("bad target flag {x}"))),
        };
        let raw = r.bytes(W)?.to_vec();
        r.finish(W)?;
        Ok(GitTag {
            target,
            target_is_tag,
            raw,
        })
    }
}

fn write_opt_bytes(w: &mut Writer, b: Option<&[u8]>) {
    match b {
        Some(b) => w.u8(1).bytes(b),
        None => w.u8(0),
    };
}

fn read_opt_bytes(r: &mut Reader<'_>, what: &'static str) -> Result<Option<Vec<u8>>, DecodeError> {
    match r.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(r.bytes(what)?.to_vec())),
        x => Err(DecodeError::new(what, format!("bad option flag {x}"))),
    }
}

fn write_refs(w: &mut Writer, refs: &[(String, Id)]) {
    w.uint(refs.len() as u64);
    for (n, id) in refs {
        w.bytes(n.as_bytes()).id(id);
    }
}

fn read_refs(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<(String, Id)>, DecodeError> {
    let n = r.count(what)?;
    let mut out: Vec<(String, Id)> = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.str(what)?.to_string();
        if out.last().is_some_and(|(p, _)| *p >= name) {
            return Err(DecodeError::new(what, "ref names are not sorted"));
        }
        out.push((name, r.id(what)?));
    }
    Ok(out)
}

impl View {
    /// The canonical encoding (version 4 only for a view with an action root, 3 for one
    /// with an entity root, 2 for one with git refs).
    pub fn encode(&self) -> Vec<u8> {
        let version = if self.actions.is_some() {
            4
        } else if self.entities.is_some() {
            3
        } else if !self.git_refs.is_empty() {
            2
        } else {
            1
        };
        let mut w = Writer::with_header(Kind::View as u8, version);
        write_ids(&mut w, &self.heads);
        write_refs(&mut w, &self.branches);
        write_refs(&mut w, &self.tags);
        match &self.current_branch {
            Some(b) => w.u8(1).bytes(b.as_bytes()),
            None => w.u8(0),
        };
        match &self.wc_commit {
            Some(c) => w.u8(1).id(c),
            None => w.u8(0),
        };
        if version >= 2 {
            w.uint(self.git_refs.len() as u64);
            for g in &self.git_refs {
                w.bytes(g.name.as_bytes()).id(&g.target).id(&g.commit);
            }
        }
        match (version, &self.entities) {
            (4, entities) => {
                write_opt_id(&mut w, entities);
            }
            (_, Some(root)) => {
                w.id(root);
            }
            _ => {}
        }
        if let Some(root) = &self.actions {
            w.id(root);
        }
        w.finish()
    }

    /// Decodes a view.
    pub fn decode(bytes: &[u8]) -> Result<View, DecodeError> {
        const W: &str = "view";
        let mut r = Reader::new(bytes);
        let version = r.header(W, Kind::View as u8, VIEW_VERSION)?;
        let heads = read_ids(&mut r, W)?;
        if heads.windows(2).any(|w| w[0] >= w[1]) {
            return Err(DecodeError::new(W, "heads are not sorted and unique"));
        }
        let branches = read_refs(&mut r, W)?;
        let tags = read_refs(&mut r, W)?;
        let current_branch = match r.u8(W)? {
            0 => None,
            1 => Some(r.str(W)?.to_string()),
            x => return Err(DecodeError::new(W, format!("bad option flag {x}"))),
        };
        let wc_commit = match r.u8(W)? {
            0 => None,
            1 => Some(r.id(W)?),
            x => return Err(DecodeError::new(W, format!("bad option flag {x}"))),
        };
        let mut git_refs: Vec<GitRef> = Vec::new();
        if version >= 2 {
            let n = r.count(W)?;
            for _ in 0..n {
                let name = r.str(W)?.to_string();
                if git_refs.last().is_some_and(|p| p.name >= name) {
                    return Err(DecodeError::new(W, "git ref names are not sorted"));
                }
                git_refs.push(GitRef {
                    name,
                    target: r.id(W)?,
                    commit: r.id(W)?,
                });
            }
            if version == 2 && git_refs.is_empty() {
                return Err(DecodeError::new(W, "version 2 view with no git refs"));
            }
        }
        let entities = match version {
            3 => Some(r.id(W)?),
            4 => read_opt_id(&mut r, W)?,
            _ => None,
        };
        let actions = if version >= 4 { Some(r.id(W)?) } else { None };
        r.finish(W)?;
        Ok(View {
            heads,
            branches,
            tags,
            current_branch,
            wc_commit,
            git_refs,
            entities,
            actions,
        })
    }

    /// Whether `self` and `other` differ at most in what operations only record (the
    /// action root, a ledger that undo and restore keep).
    pub fn same_but_records(&self, other: &View) -> bool {
        View {
            actions: None,
            ..self.clone()
        } == View {
            actions: None,
            ..other.clone()
        }
    }

    /// The commit a branch points at.
    pub fn branch(&self, name: &str) -> Option<Id> {
        self.branches
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, id)| *id)
    }

    /// The commit a tag points at.
    pub fn tag(&self, name: &str) -> Option<Id> {
        self.tags.iter().find(|(n, _)| n == name).map(|(_, id)| *id)
    }

    /// Points branch `name` at `target` (or removes it), keeping the list sorted.
    pub fn set_branch(&mut self, name: &str, target: Option<Id>) {
        set_ref(&mut self.branches, name, target);
    }

    /// The git ref named `name`.
    pub fn git_ref(&self, name: &str) -> Option<&GitRef> {
        self.git_refs
            .binary_search_by(|g| g.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.git_refs[i])
    }

    /// Sets git ref `name` (or removes it), keeping the list sorted.
    pub fn set_git_ref(&mut self, name: &str, target: Option<(Id, Id)>) {
        match (
            self.git_refs
                .binary_search_by(|g| g.name.as_str().cmp(name)),
            target,
        ) {
            (Ok(i), Some((target, commit))) => {
                self.git_refs[i].target = target;
                self.git_refs[i].commit = commit;
            }
            (Ok(i), None) => {
                self.git_refs.remove(i);
            }
            (Err(i), Some((target, commit))) => self.git_refs.insert(
                i,
                GitRef {
                    name: name.to_string(),
                    target,
                    commit,
                },
            ),
            (Err(_), None) => {}
        }
    }

    /// Points tag `name` at `target` (or removes it), keeping the list sorted.
    pub fn set_tag(&mut self, name: &str, target: Option<Id>) {
        set_ref(&mut self.tags, name, target);
    }

    /// Every commit the view names directly.
    pub fn referenced_commits(&self) -> Vec<Id> {
        let mut v: Vec<Id> = self.heads.clone();
        v.extend(self.branches.iter().map(|(_, id)| *id));
        v.extend(self.tags.iter().map(|(_, id)| *id));
        v.extend(self.wc_commit);
        v.extend(self.git_refs.iter().map(|g| g.commit));
        v.sort();
        v.dedup();
        v
    }
}

fn set_ref(refs: &mut Vec<(String, Id)>, name: &str, target: Option<Id>) {
    match (refs.binary_search_by(|(n, _)| n.as_str().cmp(name)), target) {
        (Ok(i), Some(t)) => refs[i].1 = t,
        (Ok(i), None) => {
            refs.remove(i);
        }
        (Err(i), Some(t)) => refs.insert(i, (name.to_string(), t)),
        (Err(_), None) => {}
    }
}

/// A typed event recorded by an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The repository was created.
    RepoInitialized,
    /// A commit was made.
    CommitCreated {
        /// The new commit.
        commit: Id,
    },
    /// A branch was created, moved or deleted.
    BranchMoved {
        /// Branch name.
        name: String,
        /// Old target.
        from: Option<Id>,
        /// New target.
        to: Option<Id>,
    },
    /// A tag was created, moved or deleted.
    TagMoved {
        /// Tag name.
        name: String,
        /// Old target.
        from: Option<Id>,
        /// New target.
        to: Option<Id>,
    },
    /// The working folder was switched to a commit.
    CheckedOut {
        /// The commit.
        commit: Id,
    },
    /// Paths were restored from a commit.
    PathRestored {
        /// The path restored (empty for everything; bytes).
        path: crate::path::BString,
        /// The commit it came from.
        commit: Id,
    },
    /// Several concurrent operations were merged.
    OperationsMerged,
    /// An operation was undone.
    Undo {
        /// The undone operation.
        op: Id,
    },
    /// An undo was reverted: the view is again as it was before it.
    Redo {
        /// The undo operation reverted.
        op: Id,
    },
    /// The view of an earlier operation was restored.
    OpRestored {
        /// The operation whose view was restored.
        op: Id,
    },
    /// A commit was rewritten (same change, new content or message).
    CommitRewritten {
        /// The old commit.
        from: Id,
        /// The new commit.
        to: Id,
    },
    /// Content was extracted from files for search (ingest results).
    ContentExtracted {
        /// The [`Extract`] objects written.
        results: Vec<Id>,
    },
    /// Files were stored without a tree naming them (the content of files git's `lifeos`
    /// filter cleaned); the operation keeps them reachable.
    FilesStored {
        /// The files (their content ids).
        files: Vec<Id>,
    },
    /// History was imported from a git repository.
    GitImported {
        /// The repository (its path, bytes).
        source: crate::path::BString,
        /// How many commits were new.
        commits: u64,
    },
    /// An entity was recorded for the first time (or again after it was removed).
    EntityCreated {
        /// The entity's id.
        id: String,
        /// The entity object.
        entity: Id,
    },
    /// An entity's attributes changed.
    EntityChanged {
        /// The entity's id.
        id: String,
        /// The attributes set, changed or removed, sorted.
        paths: Vec<String>,
        /// The entity object before.
        from: Id,
        /// The entity object after.
        to: Id,
    },
    /// A link from an entity was added (`linked`) or removed.
    EntityLinked {
        /// The entity the link is from.
        id: String,
        /// The relation.
        rel: String,
        /// The entity the link is to.
        target: String,
        /// Whether the link was added (else removed).
        linked: bool,
        /// The entity object after.
        entity: Id,
    },
    /// An entity was removed.
    EntityRemoved {
        /// The entity's id.
        id: String,
        /// Its last object.
        entity: Id,
    },
    /// A record of an automation's action was written ([`crate::action`]).
    ActionRecorded {
        /// The action's id.
        action: String,
        /// The record.
        record: Id,
    },
}

pub(crate) fn write_opt_id(w: &mut Writer, id: &Option<Id>) {
    match id {
        Some(id) => w.u8(1).id(id),
        None => w.u8(0),
    };
}

pub(crate) fn read_opt_id(
    r: &mut Reader<'_>,
    what: &'static str,
) -> Result<Option<Id>, DecodeError> {
    match r.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(r.id(what)?)),
        x => Err(DecodeError::new(what, format!("bad option flag {x}"))),
    }
}

impl Event {
    /// The event's type name, as in `op log --json` (`commit.created`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::RepoInitialized => "repo.initialized",
            Event::CommitCreated { .. } => "commit.created",
            Event::BranchMoved { .. } => "branch.moved",
            Event::TagMoved { .. } => "tag.moved",
            Event::CheckedOut { .. } => "working_copy.checked_out",
            Event::PathRestored { .. } => "path.restored",
            Event::OperationsMerged => "operations.merged",
            Event::Undo { .. } => "operation.undone",
            Event::Redo { .. } => "operation.redone",
            Event::OpRestored { .. } => "operation.restored",
            Event::CommitRewritten { .. } => "commit.rewritten",
            Event::ContentExtracted { .. } => "content.extracted",
            Event::GitImported { .. } => "git.imported",
            Event::FilesStored { .. } => "files.stored",
            Event::EntityCreated { .. } => "entity.created",
            Event::EntityChanged { .. } => "entity.changed",
            Event::EntityLinked { linked: true, .. } => "entity.linked",
            Event::EntityLinked { linked: false, .. } => "entity.unlinked",
            Event::EntityRemoved { .. } => "entity.removed",
            Event::ActionRecorded { .. } => "action.recorded",
        }
    }

    /// Whether the event only records objects beside the view (ingest results, files
    /// stored for git's filter): `undo` steps over operations made of such events.
    pub fn records_only(&self) -> bool {
        matches!(
            self,
            Event::ContentExtracted { .. }
                | Event::FilesStored { .. }
                | Event::ActionRecorded { .. }
        )
    }

    fn encode(&self, w: &mut Writer) {
        match self {
            Event::RepoInitialized => {
                w.u8(1);
            }
            Event::CommitCreated { commit } => {
                w.u8(2).id(commit);
            }
            Event::BranchMoved { name, from, to } | Event::TagMoved { name, from, to } => {
                w.u8(if matches!(self, Event::BranchMoved { .. }) {
                    3
                } else {
                    4
                })
                .bytes(name.as_bytes());
                write_opt_id(w, from);
                write_opt_id(w, to);
            }
            Event::CheckedOut { commit } => {
                w.u8(5).id(commit);
            }
            Event::PathRestored { path, commit } => {
                w.u8(6).bytes(path).id(commit);
            }
            Event::OperationsMerged => {
                w.u8(7);
            }
            Event::Undo { op } => {
                w.u8(8).id(op);
            }
            Event::OpRestored { op } => {
                w.u8(9).id(op);
            }
            Event::Redo { op } => {
                w.u8(19).id(op);
            }
            Event::CommitRewritten { from, to } => {
                w.u8(10).id(from).id(to);
            }
            Event::ContentExtracted { results } => {
                w.u8(11);
                write_ids(w, results);
            }
            Event::GitImported { source, commits } => {
                w.u8(12).bytes(source).uint(*commits);
            }
            Event::FilesStored { files } => {
                w.u8(13);
                write_ids(w, files);
            }
            Event::EntityCreated { id, entity } => {
                w.u8(14).bytes(id.as_bytes()).id(entity);
            }
            Event::EntityChanged {
                id,
                paths,
                from,
                to,
            } => {
                w.u8(15).bytes(id.as_bytes()).uint(paths.len() as u64);
                for p in paths {
                    w.bytes(p.as_bytes());
                }
                w.id(from).id(to);
            }
            Event::EntityLinked {
                id,
                rel,
                target,
                linked,
                entity,
            } => {
                w.u8(16)
                    .bytes(id.as_bytes())
                    .bytes(rel.as_bytes())
                    .bytes(target.as_bytes())
                    .u8(u8::from(*linked))
                    .id(entity);
            }
            Event::EntityRemoved { id, entity } => {
                w.u8(17).bytes(id.as_bytes()).id(entity);
            }
            Event::ActionRecorded { action, record } => {
                w.u8(18).bytes(action.as_bytes()).id(record);
            }
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Event, DecodeError> {
        const W: &str = "operation event";
        Ok(match r.u8(W)? {
            1 => Event::RepoInitialized,
            2 => Event::CommitCreated { commit: r.id(W)? },
            t @ (3 | 4) => {
                let name = r.str(W)?.to_string();
                let from = read_opt_id(r, W)?;
                let to = read_opt_id(r, W)?;
                if t == 3 {
                    Event::BranchMoved { name, from, to }
                } else {
                    Event::TagMoved { name, from, to }
                }
            }
            5 => Event::CheckedOut { commit: r.id(W)? },
            6 => Event::PathRestored {
                path: r.bytes(W)?.into(),
                commit: r.id(W)?,
            },
            7 => Event::OperationsMerged,
            8 => Event::Undo { op: r.id(W)? },
            9 => Event::OpRestored { op: r.id(W)? },
            19 => Event::Redo { op: r.id(W)? },
            10 => Event::CommitRewritten {
                from: r.id(W)?,
                to: r.id(W)?,
            },
            11 => Event::ContentExtracted {
                results: read_ids(r, W)?,
            },
            12 => Event::GitImported {
                source: r.bytes(W)?.into(),
                commits: r.uint(W)?,
            },
            13 => Event::FilesStored {
                files: read_ids(r, W)?,
            },
            14 => Event::EntityCreated {
                id: r.str(W)?.to_string(),
                entity: r.id(W)?,
            },
            15 => {
                let id = r.str(W)?.to_string();
                let n = r.count(W)?;
                let mut paths = Vec::with_capacity(n);
                for _ in 0..n {
                    paths.push(r.str(W)?.to_string());
                }
                Event::EntityChanged {
                    id,
                    paths,
                    from: r.id(W)?,
                    to: r.id(W)?,
                }
            }
            16 => Event::EntityLinked {
                id: r.str(W)?.to_string(),
                rel: r.str(W)?.to_string(),
                target: r.str(W)?.to_string(),
                linked: match r.u8(W)? {
                    0 => false,
                    1 => true,
                    x => return Err(DecodeError::new(W, format!("bad link flag {x}"))),
                },
                entity: r.id(W)?,
            },
            17 => Event::EntityRemoved {
                id: r.str(W)?.to_string(),
                entity: r.id(W)?,
            },
            18 => Event::ActionRecorded {
                action: r.str(W)?.to_string(),
                record: r.id(W)?,
            },
            t => {
                return Err(DecodeError::new(
                    W,
                    format!("unknown event type {t} (written by a newer lifeos?)"),
                ))
            }
        })
    }
}

/// Extract format version.
pub const EXTRACT_VERSION: u8 = 1;

/// Where a segment of extracted text is in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anchor {
    /// The whole file (metadata, names).
    File,
    /// Lines `start..=end` (1-based).
    Lines {
        /// First line.
        start: u32,
        /// Last line.
        end: u32,
    },
    /// A page (1-based).
    Page(u32),
    /// A time range in milliseconds.
    Time {
        /// Start.
        start_ms: u64,
        /// End.
        end_ms: u64,
    },
    /// An image region in pixels.
    Region {
        /// Left.
        x: u32,
        /// Top.
        y: u32,
        /// Width.
        w: u32,
        /// Height.
        h: u32,
    },
}

/// One searchable piece of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// What it is: `text`, `section`, `cue`, `page`, `ocr`, `metadata`.
    pub kind: String,
    /// Where it is.
    pub anchor: Anchor,
    /// Its text (secrets already redacted).
    pub text: String,
    /// Extra metadata as a JSON object text ("" if none).
    pub meta: String,
}

/// What one extractor found in one file: the unit of ingest, keyed by (file, extractor,
/// version) and stored as an object so that a rebuilt catalog never extracts again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extract {
    /// The file's content id.
    pub file: Id,
    /// Extractor name.
    pub extractor: String,
    /// Extractor version.
    pub version: u32,
    /// The segments, or why extraction failed.
    pub outcome: Result<Vec<Segment>, String>,
}

impl Extract {
    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_header(Kind::Extract as u8, EXTRACT_VERSION);
        w.id(&self.file)
            .bytes(self.extractor.as_bytes())
            .uint(u64::from(self.version));
        match &self.outcome {
            Ok(segs) => {
                w.u8(1).uint(segs.len() as u64);
                for s in segs {
                    w.bytes(s.kind.as_bytes());
                    match s.anchor {
                        Anchor::File => w.u8(0),
                        Anchor::Lines { start, end } => {
                            w.u8(1).uint(u64::from(start)).uint(u64::from(end))
                        }
                        Anchor::Page(p) => w.u8(2).uint(u64::from(p)),
                        Anchor::Time { start_ms, end_ms } => w.u8(3).uint(start_ms).uint(end_ms),
                        Anchor::Region { x, y, w: rw, h } => w
                            .u8(4)
                            .uint(u64::from(x))
                            .uint(u64::from(y))
                            .uint(u64::from(rw))
                            .uint(u64::from(h)),
                    };
                    w.bytes(s.text.as_bytes()).bytes(s.meta.as_bytes());
                }
            }
            Err(reason) => {
                w.u8(0).bytes(reason.as_bytes());
            }
        }
        w.finish()
    }

    /// Decodes an extract.
    pub fn decode(bytes: &[u8]) -> Result<Extract, DecodeError> {
        const W: &str = "extract";
        let mut r = Reader::new(bytes);
        r.header(W, Kind::Extract as u8, EXTRACT_VERSION)?;
        let file = r.id(W)?;
        let extractor = r.str(W)?.to_string();
        let small =
            |v: u64| u32::try_from(v).map_err(|_| DecodeError::new(W, "value out of range"));
        let version = small(r.uint(W)?)?;
        let outcome = match r.u8(W)? {
            1 => {
                let n = r.count(W)?;
                let mut segs = Vec::with_capacity(n);
                for _ in 0..n {
                    let kind = r.str(W)?.to_string();
                    let anchor = match r.u8(W)? {
                        0 => Anchor::File,
                        1 => Anchor::Lines {
                            start: small(r.uint(W)?)?,
                            end: small(r.uint(W)?)?,
                        },
                        2 => Anchor::Page(small(r.uint(W)?)?),
                        3 => Anchor::Time {
                            start_ms: r.uint(W)?,
                            end_ms: r.uint(W)?,
                        },
                        4 => Anchor::Region {
                            x: small(r.uint(W)?)?,
                            y: small(r.uint(W)?)?,
                            w: small(r.uint(W)?)?,
                            h: small(r.uint(W)?)?,
                        },
                        t => return Err(DecodeError::new(W, format!("unknown anchor {t}"))),
                    };
                    let text = r.str(W)?.to_string();
                    let meta = r.str(W)?.to_string();
                    segs.push(Segment {
                        kind,
                        anchor,
                        text,
                        meta,
                    });
                }
                Ok(segs)
            }
            0 => Err(r.str(W)?.to_string()),
            x => return Err(DecodeError::new(W, format!("bad outcome flag {x}"))),
        };
        r.finish(W)?;
        Ok(Extract {
            file,
            extractor,
            version,
            outcome,
        })
    }
}

/// An operation: one change to the repository, with the view it produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// Parent operations (several after concurrent writers were merged).
    pub parents: Vec<Id>,
    /// The view after this operation.
    pub view: Id,
    /// Start time, milliseconds since the Unix epoch.
    pub start_ms: i64,
    /// End time, milliseconds since the Unix epoch.
    pub end_ms: i64,
    /// Local time zone offset, minutes.
    pub tz_offset_min: i32,
    /// User name.
    pub user: String,
    /// Host name.
    pub host: String,
    /// What was done, in words (the command line).
    pub description: String,
    /// What changed, typed.
    pub events: OpEvents,
}

/// An operation's events: in the operation itself, or (more than [`INLINE_EVENTS`]) in
/// event pages it names, read when asked for (`Repo::events`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpEvents {
    /// The events themselves.
    Inline(Vec<Event>),
    /// How many events, and the pages holding them, in order.
    Paged {
        /// Events in all pages.
        count: u64,
        /// The pages' ids (objects of kind `EventPage`).
        pages: Vec<Id>,
    },
}

impl OpEvents {
    /// How many events.
    pub fn len(&self) -> u64 {
        match self {
            OpEvents::Inline(e) => e.len() as u64,
            OpEvents::Paged { count, .. } => *count,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Encodes one page of an operation's events.
pub fn encode_event_page(events: &[Event]) -> Vec<u8> {
    let mut w = Writer::with_header(Kind::EventPage as u8, EVENT_PAGE_VERSION);
    w.uint(events.len() as u64);
    for e in events {
        e.encode(&mut w);
    }
    w.finish()
}

/// Decodes one page of an operation's events.
pub fn decode_event_page(bytes: &[u8]) -> Result<Vec<Event>, DecodeError> {
    const W: &str = "event page";
    let mut r = Reader::new(bytes);
    r.header(W, Kind::EventPage as u8, EVENT_PAGE_VERSION)?;
    let n = r.count(W)?;
    let events = (0..n)
        .map(|_| Event::decode(&mut r))
        .collect::<Result<_, _>>()?;
    r.finish(W)?;
    Ok(events)
}

impl Operation {
    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        // Version 1 while the events are inline, so such an operation encodes as it
        // always did.
        let version = match self.events {
            OpEvents::Inline(_) => 1,
            OpEvents::Paged { .. } => OPERATION_VERSION,
        };
        let mut w = Writer::with_header(Kind::Operation as u8, version);
        write_ids(&mut w, &self.parents);
        w.id(&self.view)
            .int(self.start_ms)
            .int(self.end_ms)
            .int(i64::from(self.tz_offset_min))
            .bytes(self.user.as_bytes())
            .bytes(self.host.as_bytes())
            .bytes(self.description.as_bytes());
        match &self.events {
            OpEvents::Inline(events) => {
                w.uint(events.len() as u64);
                for e in events {
                    e.encode(&mut w);
                }
            }
            OpEvents::Paged { count, pages } => {
                w.uint(*count);
                write_ids(&mut w, pages);
            }
        }
        w.finish()
    }

    /// Decodes an operation.
    pub fn decode(bytes: &[u8]) -> Result<Operation, DecodeError> {
        const W: &str = "operation";
        let mut r = Reader::new(bytes);
        let version = r.header(W, Kind::Operation as u8, OPERATION_VERSION)?;
        let parents = read_ids(&mut r, W)?;
        let view = r.id(W)?;
        let start_ms = r.int(W)?;
        let end_ms = r.int(W)?;
        let tz_offset_min = i32::try_from(r.int(W)?)
            .map_err(|_| DecodeError::new(W, "time zone offset out of range"))?;
        let user = r.str(W)?.to_string();
        let host = r.str(W)?.to_string();
        let description = r.str(W)?.to_string();
        let events = if version == 1 {
            let n = r.count(W)?;
            OpEvents::Inline(
                (0..n)
                    .map(|_| Event::decode(&mut r))
                    .collect::<Result<_, _>>()?,
            )
        } else {
            let count = r.uint(W)?;
            let pages = read_ids(&mut r, W)?;
            if pages.is_empty() || count.div_ceil(EVENTS_PER_PAGE as u64) != pages.len() as u64 {
                return Err(DecodeError::new(
                    W,
                    format!("{count} events do not fill {} pages", pages.len()),
                ));
            }
            OpEvents::Paged { count, pages }
        };
        r.finish(W)?;
        Ok(Operation {
            parents,
            view,
            start_ms,
            end_ms,
            tz_offset_min,
            user,
            host,
            description,
            events,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            any::<u8>().prop_filter("no / or NUL", |b| *b != b'/' && *b != 0),
            1..12,
        )
        .prop_filter("not . or ..", |n| n != b"." && n != b"..")
    }

    fn id() -> impl Strategy<Value = Id> {
        any::<[u8; 32]>().prop_map(Id)
    }

    fn sig() -> impl Strategy<Value = Signature> {
        (".{0,12}", ".{0,12}", any::<i64>(), -1000i32..1000).prop_map(
            |(name, email, time, tz_offset_min)| Signature {
                name,
                email,
                time,
                tz_offset_min,
            },
        )
    }

    proptest! {
        #[test]
        fn tree_round_trip(entries in proptest::collection::btree_map(name(), (1u8..6, id(), 0..u64::MAX / 32), 0..20), git_raw in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))) {
            let entries: Vec<TreeEntry> = entries.into_iter().map(|(name, (k, id, size))| {
                let kind = EntryKind::from_u8(k).unwrap();
                if kind == EntryKind::Gitlink {
                    TreeEntry { name, kind, id: gitlink_id(&id.0[..20].try_into().unwrap()), size: 0 }
                } else {
                    TreeEntry { name, kind, id, size }
                }
            }).collect();
            let tree = Tree { entries, git_raw };
            let bytes = tree.encode();
            // Version 1 unless something needs version 2, so older trees keep their ids.
            prop_assert_eq!(bytes[1] == 2, tree.needs_v2());
            prop_assert_eq!(Tree::decode(&bytes).unwrap(), tree);
        }

        /// Sizes that add up past 2^64 made `total_size` overflow; such a tree is refused.
        #[test]
        fn tree_with_overflowing_sizes_is_refused(big in u64::MAX / 2 + 1..=u64::MAX) {
            let entry = |n: &[u8]| TreeEntry { name: n.to_vec(), kind: EntryKind::File, id: Id::hash(n), size: big };
            let tree = Tree { entries: vec![entry(b"a"), entry(b"b")], git_raw: None };
            prop_assert!(Tree::decode(&tree.encode()).unwrap_err().to_string().contains("2^64"));
            prop_assert_eq!(tree.total_size(), u64::MAX);
        }

        #[test]
        fn commit_round_trip(tree in id(), parents in proptest::collection::vec(id(), 0..3), change in any::<[u8; 16]>(), a in sig(), c in sig(), message in proptest::collection::vec(any::<u8>(), 0..100), git_header in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..60))) {
            let commit = Commit { tree, parents, change_id: change, author: a, committer: c, message, extra_headers: vec![(b"gpgsig".to_vec(), b"sig".to_vec())],
                conflicts: vec![Conflict { path: "a.txt".into(), base: None, ours: Some(Id::hash(b"o")), theirs: Some(Id::hash(b"t")) }], git_header };
            let bytes = commit.encode();
            prop_assert_eq!(bytes[1] == 2, commit.git_header.is_some());
            prop_assert_eq!(Commit::decode(&bytes).unwrap(), commit);
        }

        #[test]
        fn view_and_operation_round_trip(heads in proptest::collection::vec(id(), 0..3), branches in proptest::collection::btree_map("[a-z]{1,8}", id(), 0..4), wc in proptest::option::of(id()), desc in ".{0,30}", start in any::<i64>(), end in any::<i64>(), git_refs in proptest::collection::btree_map("refs/[a-z/]{1,12}", (id(), id()), 0..4), entities in proptest::option::of(id()), actions in proptest::option::of(id())) {
            let git_refs = git_refs.into_iter().map(|(name, (target, commit))| GitRef { name, target, commit }).collect();
            let view = View { heads, branches: branches.into_iter().collect(), tags: vec![], current_branch: Some("main".into()), wc_commit: wc, git_refs, entities, actions };
            let mut view = view;
            view.heads.sort();
            view.heads.dedup();
            prop_assert_eq!(View::decode(&view.encode()).unwrap(), view.clone());
            let op = Operation { parents: view.heads.clone(), view: Id::hash(b"v"), start_ms: start, end_ms: end, tz_offset_min: 60, user: "u".into(), host: "h".into(), description: desc, events: OpEvents::Inline(vec![
                Event::RepoInitialized, Event::CommitCreated { commit: Id::hash(b"c") },
                Event::BranchMoved { name: "main".into(), from: None, to: wc }, Event::TagMoved { name: "v1".into(), from: wc, to: None },
                Event::CheckedOut { commit: Id::hash(b"c") }, Event::PathRestored { path: "a/b".into(), commit: Id::hash(b"c") },
                Event::OperationsMerged, Event::Undo { op: Id::hash(b"o") }, Event::Redo { op: Id::hash(b"u") }, Event::OpRestored { op: Id::hash(b"o") },
                Event::CommitRewritten { from: Id::hash(b"a"), to: Id::hash(b"b") },
                Event::EntityCreated { id: "task:a".into(), entity: Id::hash(b"e") },
                Event::EntityChanged { id: "task:a".into(), paths: vec!["due".into(), "title".into()], from: Id::hash(b"e"), to: Id::hash(b"f") },
                Event::EntityLinked { id: "task:a".into(), rel: "project".into(), target: "project:b".into(), linked: true, entity: Id::hash(b"f") },
                Event::EntityRemoved { id: "task:a".into(), entity: Id::hash(b"f") },
                Event::GitImported { source: b"/src/\xffrepo.git"[..].into(), commits: 2618 },
                Event::FilesStored { files: vec![Id::hash(b"f"), Id::hash(b"g")] },
            ]) };
            prop_assert_eq!(Operation::decode(&op.encode()).unwrap(), op.clone());
            // The same events in a page, and an operation naming its pages.
            let OpEvents::Inline(events) = &op.events else { unreachable!() };
            prop_assert_eq!(&decode_event_page(&encode_event_page(events)).unwrap(), events);
            let count = (EVENTS_PER_PAGE + 1) as u64;
            let paged = Operation { events: OpEvents::Paged { count, pages: vec![Id::hash(b"p1"), Id::hash(b"p2")] }, ..op };
            prop_assert_eq!(Operation::decode(&paged.encode()).unwrap(), paged.clone());
            let wrong = Operation { events: OpEvents::Paged { count, pages: vec![Id::hash(b"p1")] }, ..paged };
            prop_assert!(Operation::decode(&wrong.encode()).unwrap_err().to_string().contains("do not fill 1 pages"));
        }

        /// Valid objects, damaged: past the header and into every field's checks.
        #[test]
        fn damaged_objects_never_panic(
            which in 0usize..5,
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6),
        ) {
            let e = |n: &[u8], k| TreeEntry { name: n.to_vec(), kind: k, id: Id::hash(n), size: 7 };
            let sig = Signature { name: "Ann".into(), email: "a@x".into(), time: 1_700_000_000, tz_offset_min: 60 };
            let valid = match which {
                0 => Tree { entries: vec![e(b"a", EntryKind::File), e(b"b\xff", EntryKind::Dir), e(b"c", EntryKind::Symlink),
                    TreeEntry { name: b"d".to_vec(), kind: EntryKind::Gitlink, id: gitlink_id(&[3; 20]), size: 0 }], git_raw: Some(b"raw".to_vec()) }.encode(),
                1 => Commit { tree: Id::hash(b"t"), parents: vec![Id::hash(b"p")], change_id: [7; 16], author: sig.clone(), committer: sig,
                    message: b"msg".to_vec(), extra_headers: vec![(b"k".to_vec(), b"v".to_vec())],
                    conflicts: vec![Conflict { path: "a/b".into(), base: None, ours: Some(Id::hash(b"o")), theirs: None }], git_header: Some(b"author x".to_vec()) }.encode(),
                2 => View { heads: vec![Id::hash(b"h")], branches: vec![("main".into(), Id::hash(b"m"))], tags: vec![("v1".into(), Id::hash(b"v"))],
                    current_branch: Some("main".into()), wc_commit: Some(Id::hash(b"w")),
                    git_refs: vec![GitRef { name: "refs/pull/1/head".into(), target: Id::hash(b"g"), commit: Id::hash(b"g") }], entities: Some(Id::hash(b"e")), actions: Some(Id::hash(b"a")) }.encode(),
                3 => GitTag { target: Id::hash(b"c"), target_is_tag: false, raw: b"object 00\ntype commit\n".to_vec() }.encode(),
                _ => Operation { parents: vec![Id::hash(b"p")], view: Id::hash(b"v"), start_ms: 1, end_ms: 2, tz_offset_min: 0, user: "u".into(), host: "h".into(),
                    description: "d".into(), events: OpEvents::Inline(vec![Event::PathRestored { path: b"x\xff"[..].into(), commit: Id::hash(b"c") }, Event::ContentExtracted { results: vec![Id::hash(b"x")] }, Event::FilesStored { files: vec![Id::hash(b"f")] }]) }.encode(),
            };
            let data = lifeos_store::mutate::mutate(&valid, &edits);
            let _ = Tree::decode(&data);
            let _ = Commit::decode(&data);
            let _ = View::decode(&data);
            let _ = Operation::decode(&data);
            let _ = Extract::decode(&data);
            let _ = GitTag::decode(&data);
        }

        #[test]
        fn decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Tree::decode(&data);
            let _ = Commit::decode(&data);
            let _ = View::decode(&data);
            let _ = Operation::decode(&data);
            let _ = decode_event_page(&data);
            let _ = GitTag::decode(&data);
        }
    }

    #[test]
    fn git_tag_round_trip() {
        let t = GitTag {
            target: Id::hash(b"c"),
            target_is_tag: true,
            raw: b"object 1234\ntype tag\n\nmsg".to_vec(),
        };
        assert_eq!(GitTag::decode(&t.encode()).unwrap(), t);
    }

    /// Version 2 is only for what needs it: a decoder refuses a version 2 object with
    /// nothing that needs version 2, so each content has exactly one encoding (one id).
    #[test]
    fn version_2_without_need_is_refused() {
        let tree = Tree {
            entries: vec![],
            git_raw: None,
        }
        .encode();
        let mut v2 = tree.clone();
        v2[1] = 2;
        v2.push(0);
        assert!(Tree::decode(&v2)
            .unwrap_err()
            .to_string()
            .contains("nothing that needs it"));
        let view = View {
            heads: vec![],
            branches: vec![],
            tags: vec![],
            current_branch: None,
            wc_commit: None,
            git_refs: vec![],
            entities: None,
            actions: None,
        }
        .encode();
        let mut v2 = view.clone();
        v2[1] = 2;
        v2.push(0);
        assert!(View::decode(&v2)
            .unwrap_err()
            .to_string()
            .contains("no git refs"));
    }

    #[test]
    fn gitlink_is_refused_in_a_version_1_tree() {
        let mut t = Tree {
            entries: vec![TreeEntry {
                name: b"sub".to_vec(),
                kind: EntryKind::Gitlink,
                id: gitlink_id(&[9; 20]),
                size: 0,
            }],
            git_raw: None,
        }
        .encode();
        t[1] = 1;
        assert!(Tree::decode(&t)
            .unwrap_err()
            .to_string()
            .contains("unknown entry kind 5"));
    }

    #[test]
    fn extract_round_trip() {
        let e = Extract {
            file: Id::hash(b"f"),
            extractor: "markdown".into(),
            version: 1,
            outcome: Ok(vec![
                Segment {
                    kind: "section".into(),
                    anchor: Anchor::Lines { start: 3, end: 9 },
                    text: "budget".into(),
                    meta: String::new(),
                },
                Segment {
                    kind: "page".into(),
                    anchor: Anchor::Page(7),
                    text: "p".into(),
                    meta: "{}".into(),
                },
                Segment {
                    kind: "cue".into(),
                    anchor: Anchor::Time {
                        start_ms: 7900,
                        end_ms: 12100,
                    },
                    text: "c".into(),
                    meta: String::new(),
                },
                Segment {
                    kind: "ocr".into(),
                    anchor: Anchor::Region {
                        x: 1,
                        y: 2,
                        w: 3,
                        h: 4,
                    },
                    text: "o".into(),
                    meta: String::new(),
                },
                Segment {
                    kind: "metadata".into(),
                    anchor: Anchor::File,
                    text: "m".into(),
                    meta: String::new(),
                },
            ]),
        };
        assert_eq!(Extract::decode(&e.encode()).unwrap(), e);
        let f = Extract {
            outcome: Err("truncated".into()),
            ..e
        };
        assert_eq!(Extract::decode(&f.encode()).unwrap(), f);
        assert!(Extract::decode(&f.encode()[..10]).is_err());
    }

    #[test]
    fn hostile_tree_names_are_refused() {
        for bad in [&b".."[..], b".", b"", b"a/b", b"/abs", b"nul\0"] {
            let t = Tree {
                entries: vec![TreeEntry {
                    name: bad.to_vec(),
                    kind: EntryKind::File,
                    id: Id::hash(b""),
                    size: 0,
                }],
                git_raw: None,
            };
            assert!(Tree::decode(&t.encode()).is_err(), "{bad:?} accepted");
        }
        let dup = Tree {
            entries: vec![
                TreeEntry {
                    name: b"a".to_vec(),
                    kind: EntryKind::Symlink,
                    id: Id::hash(b"/etc"),
                    size: 4,
                },
                TreeEntry {
                    name: b"a".to_vec(),
                    kind: EntryKind::Dir,
                    id: Id::hash(b""),
                    size: 0,
                },
            ],
            git_raw: None,
        };
        assert!(Tree::decode(&dup.encode()).is_err());
    }
}
