//! git's `lifeos` filter: large files live in lifeos's chunk store and git keeps a small
//! pointer to each. `lifeos git filter install` configures a long-running filter process
//! (`filter.lifeos.process`, pkt-line protocol version 2) and `.gitattributes`; [`serve`]
//! is that process. `clean` streams a file into the store and answers with a [`Pointer`];
//! `smudge` streams the content back, verified, or fails naming the file: git never gets
//! an empty or wrong file.
//!
//! Every new content is kept by an operation of its own (a `files.stored` event) published
//! before git is answered, so `lifeos gc` never drops what a git commit points to; the
//! repository lock is held only while one file is stored, never between requests (git runs
//! hooks, which run lifeos, while this process waits).

use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use lifeos_catalog::{Catalog, GitMapRow, GitObject};
use lifeos_store::Id;
use lifeos_vcs::object::Event;
use lifeos_vcs::Repo;

use crate::pointer::{Pointer, POINTER_MAX};
use crate::{GitError, Result};
use lifeos_catalog::CatalogExt;

/// The most data one pkt-line carries.
const MAX_DATA: usize = 65516;

/// Content above this many bytes passing through unfiltered is spooled to a temporary
/// file rather than held in memory.
const SPOOL_IN_MEMORY: usize = 8 << 20;

/// Reads pkt-lines into a buffer it owns.
struct PktReader<R> {
    r: R,
    buf: Vec<u8>,
}

/// One pkt-line.
enum Pkt {
    /// `0000`.
    Flush,
    /// Data, now in the reader's buffer.
    Data,
}

fn protocol(reason: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason.into())
}

impl<R: Read> PktReader<R> {
    /// The next packet, or `None` when git closed the stream between packets.
    fn next(&mut self) -> io::Result<Option<Pkt>> {
        let mut len = [0u8; 4];
        match self.r.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let len = std::str::from_utf8(&len)
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or_else(|| protocol(format!("bad pkt-line length {:?}", len)))?;
        match len {
            0 => Ok(Some(Pkt::Flush)),
            1..=4 => Err(protocol(format!("unexpected pkt-line {len:04x}"))),
            _ if len > MAX_DATA + 4 => Err(protocol(format!("pkt-line of {len} bytes"))),
            _ => {
                self.buf.resize(len - 4, 0);
                self.r.read_exact(&mut self.buf)?;
                Ok(Some(Pkt::Data))
            }
        }
    }

    /// Text lines up to a flush (their newlines removed); `None` at the end of input.
    fn lines(&mut self) -> io::Result<Option<Vec<String>>> {
        let mut out = Vec::new();
        loop {
            match self.next()? {
                None if out.is_empty() => return Ok(None),
                None => return Err(protocol("input ended inside a list")),
                Some(Pkt::Flush) => return Ok(Some(out)),
                Some(Pkt::Data) => {
                    let line = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
                    out.push(String::from_utf8_lossy(line).into_owned());
                }
            }
        }
    }

    /// The content packets up to the next flush, as a reader.
    fn content(&mut self) -> Content<'_, R> {
        // What the buffer holds now is the packet before the content.
        let pos = self.buf.len();
        Content {
            pkts: self,
            pos,
            done: false,
        }
    }
}

/// Splits pkt-line bytes into packets (`None` for a flush), as the filter process reads
/// them from git; an error for bytes that are not pkt-lines.
pub fn decode_packets(bytes: &[u8]) -> io::Result<Vec<Option<Vec<u8>>>> {
    let mut rd = PktReader {
        r: bytes,
        buf: Vec::new(),
    };
    let mut out = Vec::new();
    while let Some(p) = rd.next()? {
        out.push(match p {
            Pkt::Flush => None,
            Pkt::Data => Some(rd.buf.clone()),
        });
    }
    Ok(out)
}

/// Content sent as packets, read up to its flush.
struct Content<'a, R> {
    pkts: &'a mut PktReader<R>,
    pos: usize,
    done: bool,
}

impl<R: Read> Content<'_, R> {
    /// Reads and drops what is left (after a failure, so the stream stays in step).
    fn drain(&mut self) -> io::Result<()> {
        io::copy(self, &mut io::sink()).map(|_| ())
    }
}

impl<R: Read> Read for Content<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while !self.done && self.pos == self.pkts.buf.len() {
            match self.pkts.next()? {
                Some(Pkt::Flush) => self.done = true,
                Some(Pkt::Data) => self.pos = 0,
                None => return Err(protocol("input ended inside content")),
            }
        }
        if self.done {
            return Ok(0);
        }
        let n = out.len().min(self.pkts.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.pkts.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Writes pkt-lines.
struct PktWriter<W: Write> {
    w: W,
    buf: Vec<u8>,
}

impl<W: Write> PktWriter<W> {
    fn packet(&mut self, data: &[u8]) -> io::Result<()> {
        write!(self.w, "{:04x}", data.len() + 4)?;
        self.w.write_all(data)
    }

    fn flush_pkt(&mut self) -> io::Result<()> {
        self.w.write_all(b"0000")
    }

    /// Text lines, then a flush.
    fn lines(&mut self, lines: &[&str]) -> io::Result<()> {
        for l in lines {
            self.packet(format!("{l}\n").as_bytes())?;
        }
        self.flush_pkt()?;
        self.w.flush()
    }

    /// Sends what content is buffered.
    fn send_buffered(&mut self) -> io::Result<()> {
        let buf = std::mem::take(&mut self.buf);
        for part in buf.chunks(MAX_DATA) {
            self.packet(part)?;
        }
        self.buf = buf;
        self.buf.clear();
        Ok(())
    }

    /// Ends content: what is buffered, then a flush.
    fn end_content(&mut self) -> io::Result<()> {
        self.send_buffered()?;
        self.flush_pkt()
    }
}

/// Content written as packets of the most data each can carry.
impl<W: Write> Write for PktWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= MAX_DATA {
            let full = self.buf.len() / MAX_DATA * MAX_DATA;
            for part in self.buf[..full].chunks(MAX_DATA) {
                write!(self.w, "{:04x}", part.len() + 4)?;
                self.w.write_all(part)?;
            }
            self.buf.drain(..full);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

/// A writer that hashes and counts what passes through it.
struct Verify<'a, W: Write> {
    out: &'a mut W,
    hasher: blake3::Hasher,
    len: u64,
}

impl<W: Write> Write for Verify<'_, W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.out.write_all(data)?;
        self.hasher.update(data);
        self.len += data.len() as u64;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// What one filter process did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Served {
    /// Files cleaned whose content was new to lifeos (one operation each).
    pub stored: u64,
    /// Files cleaned whose content lifeos already kept.
    pub known: u64,
    /// Files smudged from lifeos's store.
    pub smudged: u64,
    /// Requests that failed (each reported through `report`).
    pub failed: u64,
}

/// The filter process: speaks git's long-running filter protocol (version 2) on `input`
/// and `output` until git closes `input`. A request that fails is answered
/// `status=error` and described through `report` (git shows the process's stderr); a
/// broken protocol ends the process with an error.
pub fn serve(
    repo: &Repo,
    input: impl Read,
    output: impl Write,
    report: &mut dyn FnMut(&str),
) -> Result<Served> {
    let mut rd = PktReader {
        r: io::BufReader::with_capacity(MAX_DATA + 4, input),
        buf: Vec::with_capacity(MAX_DATA),
    };
    let mut wr = PktWriter {
        w: io::BufWriter::with_capacity(MAX_DATA + 4, output),
        buf: Vec::with_capacity(2 * MAX_DATA),
    };
    let mut server = Server {
        repo,
        catalog: repo.catalog()?,
        served: Served::default(),
        report,
    };
    server.handshake(&mut rd, &mut wr).map_err(filter_err)?;
    loop {
        let Some(request) = rd.lines().map_err(filter_err)? else {
            return Ok(server.served);
        };
        let value = |key: &str| {
            request
                .iter()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_default()
                .to_string()
        };
        let (command, path) = (value("command"), value("pathname"));
        let mut content = rd.content();
        match command.as_str() {
            "clean" => server.clean(&path, &mut content, &mut wr),
            "smudge" => server.smudge(&path, &mut content, &mut wr),
            other => {
                content.drain().map_err(filter_err)?;
                (server.report)(&format!("{path}: unknown filter command {other:?}"));
                wr.lines(&["status=error"]).map_err(filter_err)
            }
        }?;
    }
}

/// A successful answer carrying `content`.
fn send_content<W: Write>(wr: &mut PktWriter<W>, mut content: impl Read) -> io::Result<()> {
    wr.lines(&["status=success"])?;
    io::copy(&mut content, wr)?;
    wr.end_content()?;
    wr.lines(&[])
}

fn filter_err(e: io::Error) -> GitError {
    GitError::Filter {
        reason: format!("talking to git: {e}"),
    }
}

struct Server<'a> {
    repo: &'a Repo,
    catalog: Catalog,
    served: Served,
    report: &'a mut dyn FnMut(&str),
}

impl Server<'_> {
    fn handshake<R: Read, W: Write>(
        &mut self,
        rd: &mut PktReader<R>,
        wr: &mut PktWriter<W>,
    ) -> io::Result<()> {
        let hello = rd.lines()?.unwrap_or_default();
        if hello.first().map(String::as_str) != Some("git-filter-client")
            || !hello.iter().any(|l| l == "version=2")
        {
            return Err(protocol(format!(
                "expected git-filter-client version=2, got {hello:?}"
            )));
        }
        wr.lines(&["git-filter-server", "version=2"])?;
        let offered = rd.lines()?.unwrap_or_default();
        let ours: Vec<&str> = ["capability=clean", "capability=smudge"]
            .into_iter()
            .filter(|c| offered.iter().any(|o| o == c))
            .collect();
        wr.lines(&ours)
    }

    /// Answers `clean`: the pointer of the content, stored first when new.
    fn clean<R: Read, W: Write>(
        &mut self,
        path: &str,
        content: &mut Content<'_, R>,
        wr: &mut PktWriter<W>,
    ) -> Result<()> {
        let mut head = Vec::new();
        content
            .by_ref()
            .take(POINTER_MAX as u64 + 1)
            .read_to_end(&mut head)
            .map_err(filter_err)?;
        // Already a pointer (a file checked out without the filter), or empty: kept as is.
        let answer = if head.is_empty() || Pointer::parse(&head).is_some() {
            content.drain().map_err(filter_err)?;
            Ok(head)
        } else {
            self.store(path, io::Cursor::new(head).chain(&mut *content))
                .map(|p| p.text().into_bytes())
        };
        match answer {
            Ok(bytes) => send_content(wr, &bytes[..]).map_err(filter_err),
            Err(e) => {
                content.drain().map_err(filter_err)?;
                self.served.failed += 1;
                (self.report)(&format!("{path}: cannot store it in lifeos: {e}"));
                wr.lines(&["status=error"]).map_err(filter_err)
            }
        }
    }

    /// Stores `src` and keeps it with an operation unless lifeos already does.
    fn store(&mut self, path: &str, src: impl Read) -> Result<Pointer> {
        let start = lifeos_vcs::repo::now_ms();
        let mut tx = self.repo.store().transaction()?;
        let (id, size) = tx.store_reader(src, Path::new(path))?;
        let pointer = Pointer { id, size };
        if self.catalog.git_sha1(&id, GitObject::Pointer)?.is_some() {
            self.served.known += 1;
            return Ok(pointer);
        }
        let head = self.repo.head()?;
        self.repo.publish(
            tx,
            &[head.id],
            head.view.clone(),
            &format!("git filter: stored {path} ({size} bytes)"),
            vec![Event::FilesStored { files: vec![id] }],
            start,
        )?;
        // Recorded once the operation keeping the content is published.
        self.catalog.git_record(&[pointer_row(pointer)])?;
        self.served.stored += 1;
        Ok(pointer)
    }

    /// Answers `smudge`: the content a pointer names, verified; anything that is not a
    /// pointer passes through unchanged.
    fn smudge<R: Read, W: Write>(
        &mut self,
        path: &str,
        content: &mut Content<'_, R>,
        wr: &mut PktWriter<W>,
    ) -> Result<()> {
        let mut spool = tempfile::SpooledTempFile::new(SPOOL_IN_MEMORY);
        io::copy(content, &mut spool).map_err(filter_err)?;
        let mut head = Vec::new();
        spool.rewind().map_err(filter_err)?;
        Read::by_ref(&mut spool)
            .take(POINTER_MAX as u64 + 1)
            .read_to_end(&mut head)
            .map_err(filter_err)?;
        let Some(pointer) = Pointer::parse(&head) else {
            return send_content(wr, (&head[..]).chain(spool)).map_err(filter_err);
        };
        // git never asks for such a path; a git that did would get nothing from lifeos.
        if lifeos_vcs::path::in_repository_dir(path.as_bytes()) {
            self.served.failed += 1;
            (self.report)(&format!(
                "{path}: is named as a repository's own folder (.git or .lifeos); lifeos writes nothing there"
            ));
            return wr.lines(&["status=error"]).map_err(filter_err);
        }
        if let Err(why) = self.available(&pointer) {
            self.served.failed += 1;
            (self.report)(&format!("{path}: {why}"));
            return wr.lines(&["status=error"]).map_err(filter_err);
        }
        wr.lines(&["status=success"]).map_err(filter_err)?;
        let mut out = Verify {
            out: wr,
            hasher: blake3::Hasher::new(),
            len: 0,
        };
        let read = self.repo.store().read_file(&pointer.id, &mut out);
        let (hash, len) = (Id::from(out.hasher.finalize()), out.len);
        wr.end_content().map_err(filter_err)?;
        let failure = match read {
            Err(e) => Some(format!("reading its content from lifeos failed: {e}")),
            Ok(_) if hash != pointer.id || len != pointer.size => Some(format!(
                "lifeos returned {len} bytes hashing to {}, not the {} bytes of blake3:{}",
                hash.to_hex(),
                pointer.size,
                pointer.id.to_hex()
            )),
            Ok(_) => None,
        };
        match failure {
            Some(why) => {
                self.served.failed += 1;
                (self.report)(&format!(
                    "{path}: {why}; run `lifeos fsck` to find what is damaged"
                ));
                wr.lines(&["status=error"]).map_err(filter_err)
            }
            None => {
                self.served.smudged += 1;
                wr.lines(&[]).map_err(filter_err)
            }
        }
    }

    /// Whether the content `pointer` names is in the store, or why not.
    fn available(&self, pointer: &Pointer) -> std::result::Result<(), String> {
        match self.repo.store().file_chunks(&pointer.id) {
            Ok(m) if m.size() == pointer.size => Ok(()),
            Ok(m) => Err(format!(
                "its pointer says {} bytes but lifeos holds blake3:{} as {} bytes; the pointer was edited",
                pointer.size,
                pointer.id.to_hex(),
                m.size()
            )),
            Err(lifeos_store::StoreError::Missing(_)) => Err(format!(
                "its content (blake3:{}, {} bytes) is not in the lifeos repository at {}; \
                 it is kept by the lifeos repository where the file was added: check it out \
                 there, or bring that repository's .lifeos here, then run `git checkout -- <path>` again",
                pointer.id.to_hex(),
                pointer.size,
                self.repo.dot_dir().display()
            )),
            Err(e) => Err(format!("lifeos cannot read its content: {e}")),
        }
    }
}

/// The git map row of a pointer.
fn pointer_row(p: Pointer) -> GitMapRow {
    GitMapRow {
        sha1: p.git_sha1(),
        kind: GitObject::Pointer,
        id: p.id,
        size: p.size,
    }
}

/// The git map rows of every file the filter stored, from the operation log (for
/// `lifeos reindex`).
pub fn pointer_rows(repo: &Repo) -> Result<Vec<GitMapRow>> {
    let mut rows = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut ops = repo.op_heads()?;
    while let Some(id) = ops.pop() {
        if !seen.insert(id) {
            continue;
        }
        let op = repo.operation(&id)?;
        ops.extend(op.parents.iter().copied());
        for e in repo.events(&op)?.iter() {
            if let Event::FilesStored { files } = e {
                for f in files {
                    let size = repo.store().file_chunks(f)?.size();
                    rows.push(pointer_row(Pointer { id: *f, size }));
                }
            }
        }
    }
    Ok(rows)
}

/// Which paths the work tree's root `.gitattributes` sends through the `lifeos` filter
/// (gitattributes matching, last match wins; nested `.gitattributes` files are not read).
pub struct FilterAttributes {
    search: gix_attributes::Search,
    /// Reused by every match, initialised once for the `filter` attribute.
    outcome: gix_attributes::search::Outcome,
}

impl FilterAttributes {
    /// Reads `<workdir>/.gitattributes`; `None` when it names no `filter=lifeos`.
    pub fn load(workdir: &Path) -> Result<Option<FilterAttributes>> {
        let path = workdir.join(".gitattributes");
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(GitError::Filter {
                    reason: format!("reading {}: {e}", path.display()),
                })
            }
        };
        if !String::from_utf8_lossy(&bytes).contains("filter=lifeos") {
            return Ok(None);
        }
        let mut search = gix_attributes::Search::default();
        let mut collection = gix_attributes::search::MetadataCollection::default();
        search
            .add_patterns_buffer(&bytes, path.clone(), Some(workdir), &mut collection, true)
            .map_err(|e| GitError::Filter {
                reason: format!("reading {}: {e}", path.display()),
            })?;
        let mut outcome = gix_attributes::search::Outcome::default();
        outcome.initialize_with_selection(&collection, ["filter"]);
        Ok(Some(FilterAttributes { search, outcome }))
    }

    /// Whether the file at repository path `path` has `filter=lifeos`.
    pub fn filters(&mut self, path: &[u8]) -> bool {
        self.outcome.reset();
        self.search.pattern_matching_relative_path(
            path.into(),
            gix_attributes::glob::pattern::Case::Sensitive,
            Some(false),
            &mut self.outcome,
        );
        self.outcome.iter_selected().any(|m| {
            matches!(m.assignment.state, gix_attributes::StateRef::Value(v) if v.as_bstr() == "lifeos")
        })
    }
}

/// What `install` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The git config file written.
    pub config: PathBuf,
    /// Whether the filter's settings there changed.
    pub config_changed: bool,
    /// The attributes file.
    pub attributes: PathBuf,
    /// Patterns added to it (those already there are not repeated).
    pub added: Vec<String>,
}

/// The attributes a filtered pattern gets.
const ATTRIBUTES: &str = "filter=lifeos -text";

/// Sets up the filter in the git repository with work tree `workdir`: the
/// `filter.lifeos.process` and `filter.lifeos.required` settings of its own config,
/// running `lifeos`, and a `.gitattributes` line for each of `patterns`. Running it again
/// changes nothing. (The store that keeps the filtered content belongs inside `.git`:
/// [`crate::store_home::store_into_git`].)
pub fn install(workdir: &Path, lifeos: &Path, patterns: &[String]) -> Result<Installed> {
    if let Some(p) = patterns
        .iter()
        .find(|p| p.is_empty() || p.chars().any(char::is_whitespace) || p.starts_with('#'))
    {
        return Err(GitError::Filter {
            reason: format!(
                "pattern {p:?} cannot be a .gitattributes pattern (empty, a comment, or with spaces)"
            ),
        });
    }
    let git = crate::repo::open_git(workdir)?;
    let config = git.common_dir().join("config");
    let mut file =
        gix::config::File::from_path_no_includes(config.clone(), gix::config::Source::Local)
            .map_err(crate::gix_err("reading git's config"))?;
    let process = format!(
        "'{}' git filter-process",
        lifeos.display().to_string().replace('\'', r"'\''")
    );
    let mut config_changed = false;
    for (key, value) in [("process", process.as_str()), ("required", "true")] {
        let now = file.raw_value_by("filter", Some("lifeos".into()), key).ok();
        if now.as_deref().map(|v| v.as_ref()) != Some(value.as_bytes()) {
            file.set_raw_value_by("filter", Some("lifeos".into()), key, value)
                .map_err(crate::gix_err("setting the filter in git's config"))?;
            config_changed = true;
        }
    }
    if config_changed {
        let mut bytes = Vec::new();
        file.write_to(&mut bytes)
            .map_err(crate::gix_err("writing git's config"))?;
        lifeos_store::fsutil::write_atomic(&config, &bytes)?;
    }
    let attributes = git
        .workdir()
        .ok_or_else(|| GitError::Filter {
            reason: format!(
                "{} is a bare repository: the filter needs a work tree",
                git.git_dir().display()
            ),
        })?
        .join(".gitattributes");
    let mut text = match std::fs::read(&attributes) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            return Err(GitError::Filter {
                reason: format!("reading {}: {e}", attributes.display()),
            })
        }
    };
    let present: Vec<String> = String::from_utf8_lossy(&text)
        .lines()
        .filter(|l| l.split_whitespace().skip(1).any(|a| a == "filter=lifeos"))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    let mut added = Vec::new();
    for p in patterns {
        if present.contains(p) || added.contains(p) {
            continue;
        }
        if !text.is_empty() && !text.ends_with(b"\n") {
            text.push(b'\n');
        }
        text.extend_from_slice(format!("{p} {ATTRIBUTES}\n").as_bytes());
        added.push(p.clone());
    }
    if !added.is_empty() {
        lifeos_store::fsutil::write_atomic(&attributes, &text)?;
    }
    Ok(Installed {
        config,
        config_changed,
        attributes,
        added,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_gitattributes_decides_which_paths_are_filtered() {
        let dir = tempfile::tempdir().unwrap();
        assert!(FilterAttributes::load(dir.path()).unwrap().is_none());
        std::fs::write(
            dir.path().join(".gitattributes"),
            "*.bin filter=lifeos -text\nmedia/** filter=lifeos\nmedia/keep.txt -filter\n*.txt text\n",
        )
        .unwrap();
        let mut a = FilterAttributes::load(dir.path()).unwrap().unwrap();
        for (path, filtered) in [
            (&b"big.bin"[..], true),
            (b"deep/dir/big.bin", true),
            (b"media/talk.mp4", true),
            (b"media/keep.txt", false),
            (b"notes.txt", false),
            (b"bin", false),
        ] {
            assert_eq!(
                a.filters(path),
                filtered,
                "{}",
                String::from_utf8_lossy(path)
            );
        }
    }

    #[test]
    fn pointer_text_round_trips_and_only_the_exact_text_is_a_pointer() {
        let p = Pointer {
            id: Id::hash(b"content"),
            size: 7,
        };
        assert_eq!(Pointer::parse(p.text().as_bytes()), Some(p));
        let text = p.text();
        assert!(text.starts_with("version https://lifeos.dev/spec/pointer/v1\noid blake3:"));
        for bad in [
            text.trim_end().to_string(),
            text.replace("size 7", "size 07"),
            text.replace("size 7", "size +7"),
            text.replace("blake3:", "sha256:"),
            format!("{text}extra 1\n"),
            text.to_uppercase(),
        ] {
            assert_eq!(Pointer::parse(bad.as_bytes()), None, "{bad:?}");
        }
    }

    fn pkt(data: &[u8]) -> Vec<u8> {
        let mut v = format!("{:04x}", data.len() + 4).into_bytes();
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn content_is_read_across_packets_up_to_the_flush() {
        let mut input = pkt(b"pathname=x\n");
        input.extend(b"0000");
        input.extend(pkt(b"hello "));
        input.extend(pkt(b"world"));
        input.extend(b"0000");
        input.extend(pkt(b"next\n"));
        input.extend(b"0000");
        let mut rd = PktReader {
            r: &input[..],
            buf: Vec::new(),
        };
        assert_eq!(rd.lines().unwrap(), Some(vec!["pathname=x".to_string()]));
        let mut got = Vec::new();
        rd.content().read_to_end(&mut got).unwrap();
        assert_eq!(got, b"hello world");
        assert_eq!(rd.lines().unwrap(), Some(vec!["next".to_string()]));
        assert!(rd.lines().unwrap().is_none());
    }

    #[test]
    fn bad_packets_are_errors_not_panics() {
        for input in [&b"00"[..], b"zzzz", b"0003", b"ffff", b"0010abc"] {
            let mut rd = PktReader {
                r: input,
                buf: Vec::new(),
            };
            let mut got = Vec::new();
            assert!(rd.content().read_to_end(&mut got).is_err(), "{input:?}");
        }
    }

    #[test]
    fn written_content_is_cut_into_full_packets() {
        let data: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
        let mut out = Vec::new();
        {
            let mut wr = PktWriter {
                w: &mut out,
                buf: Vec::new(),
            };
            wr.write_all(&data[..1000]).unwrap();
            wr.write_all(&data[1000..]).unwrap();
            wr.end_content().unwrap();
        }
        let sizes: Vec<Option<usize>> = decode_packets(&out)
            .unwrap()
            .iter()
            .map(|p| p.as_ref().map(Vec::len))
            .collect();
        assert_eq!(
            sizes,
            vec![
                Some(MAX_DATA),
                Some(MAX_DATA),
                Some(150_000 - 2 * MAX_DATA),
                None
            ]
        );
        let mut rd = PktReader {
            r: &out[..],
            buf: Vec::new(),
        };
        let mut back = Vec::new();
        rd.content().read_to_end(&mut back).unwrap();
        assert_eq!(back, data);
    }
}
