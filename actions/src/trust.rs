//! Which rules file is trusted on this machine (kept in `.lifeos`, never in a tree), and
//! the key that seals approvals made here.

use super::*;

impl<'r> Actions<'r> {
    /// The rules file at `@` (its id and text), if there is one.
    pub fn rules_at_head(&self) -> Result<Option<(Id, String)>> {
        match self.rules_id_at_head()? {
            Some(id) => Ok(Some((id, self.rules_text(&id)?))),
            None => Ok(None),
        }
    }

    /// The id of the rules file at `@`, if there is one (its text is not read).
    pub(crate) fn rules_id_at_head(&self) -> Result<Option<Id>> {
        let head = self.repo.head()?;
        let Some(tree) = self.repo.at_tree(&head.view)? else {
            return Ok(None);
        };
        Ok(self
            .repo
            .lookup_path(&tree, RULES_FILE.as_bytes())?
            .map(|e| e.id))
    }

    /// The text of rules file `id`.
    pub(crate) fn rules_text(&self, id: &Id) -> Result<String> {
        let mut bytes = Vec::new();
        self.repo.store().read_file(id, &mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The trusted rules at `@` and their index, or why none fire: `Err(Some(id))` when
    /// the rules file `id` is not trusted, `Err(None)` when there is none.
    pub(crate) fn trusted_index(
        &self,
    ) -> Result<std::result::Result<(Id, rules_index::RulesIndex), Option<Id>>> {
        let Some(id) = self.rules_id_at_head()? else {
            return Ok(Err(None));
        };
        if self.trusted()? != Some(id) {
            return Ok(Err(Some(id)));
        }
        let path = self.repo.dot_dir().join(rules_index::INDEX_FILE);
        if let Some(ix) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| rules_index::RulesIndex::decode(&t))
            .filter(|ix| ix.rules_file == id)
        {
            return Ok(Ok((id, ix)));
        }
        let rules = Rules::parse(&self.rules_text(&id)?).map_err(ActionsError::Rules)?;
        let ix = rules_index::RulesIndex::of(&rules, id);
        // Derived data: a failure to keep it only costs reading the rules next time.
        let _ = lifeos_store::fsutil::write_atomic(&path, ix.encode().as_bytes());
        Ok(Ok((id, ix)))
    }

    /// The file that pins the trusted rules file (local, never versioned).
    pub fn trust_file(&self) -> std::path::PathBuf {
        self.repo.dot_dir().join(TRUST_FILE)
    }

    /// The ids of the rules files trusted here, oldest first (the current one last).
    pub(crate) fn trust_history(&self) -> Result<Vec<Id>> {
        let path = self.trust_file();
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(t.lines().filter_map(|l| Id::from_hex(l.trim())).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(ActionsError::Io {
                what: "reading",
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// The trusted rules file's id, if one was trusted.
    pub fn trusted(&self) -> Result<Option<Id>> {
        Ok(self.trust_history()?.last().copied())
    }

    /// Whether rules file `id` was ever trusted here: only its actions run here.
    pub fn was_trusted(&self, id: &Id) -> Result<bool> {
        Ok(self.trust_history()?.contains(id))
    }

    /// Trusts the rules file at `@` (checked first): its rules may fire until it changes.
    /// The folder's file must be that one (no uncommitted change), so what a person
    /// checked with `lifeos rules check` is what is trusted; with `expected`, its id must
    /// also start with that.
    pub fn trust(&self, expected: Option<&str>) -> Result<(Id, Rules)> {
        let (id, text) = self.rules_at_head()?.ok_or_else(|| {
            ActionsError::NotFound(format!(
                "no {RULES_FILE} at @: write one and commit it, then trust it"
            ))
        })?;
        if let Some(e) = expected.filter(|e| e.is_empty() || !id.has_hex_prefix(e)) {
            return Err(ActionsError::Refused(format!(
                "{RULES_FILE} at @ is {}, not {e:?}: it changed since you checked it; check it again with `lifeos rules check`",
                id.to_hex()
            )));
        }
        let here = self.repo.workdir().join(RULES_FILE);
        match std::fs::read(&here) {
            Ok(bytes) if Id::hash(&bytes) != id => {
                return Err(ActionsError::Refused(format!(
                    "{RULES_FILE} in the folder differs from the one at @ ({}): commit it (or restore it) first, so that what you checked is what is trusted",
                    id.short(12)
                )))
            }
            _ => {}
        }
        let rules = Rules::parse(&text).map_err(ActionsError::Rules)?;
        let mut history = self.trust_history()?;
        history.retain(|h| *h != id);
        history.push(id);
        let text: String = history
            .iter()
            .map(|h| format!("{}\n", h.to_hex()))
            .collect();
        lifeos_store::fsutil::write_atomic(&self.trust_file(), text.as_bytes())?;
        Ok((id, rules))
    }

    /// This repository's approval key, made the first time (32 random bytes, readable by
    /// the owner alone).
    pub(crate) fn approval_key(&self) -> Result<[u8; 32]> {
        let got = self.key.get_or_init(|| {
            let path = self.repo.dot_dir().join(APPROVAL_KEY_FILE);
            let read = |p: &std::path::Path| {
                std::fs::read(p)
                    .ok()
                    .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
            };
            if let Some(k) = read(&path) {
                return Ok(k);
            }
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).map_err(|e| format!("no random bytes for a key: {e}"))?;
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            // Another process making it at once: its key stands.
            match std::fs::File::options()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut f) => {
                    f.write_all(&key)
                        .and_then(|()| f.sync_all())
                        .map_err(|e| format!("writing {}: {e}", path.display()))?;
                    Ok(key)
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    read(&path).ok_or_else(|| format!("{} is damaged", path.display()))
                }
                Err(e) => Err(format!("creating {}: {e}", path.display())),
            }
        });
        got.clone().map_err(ActionsError::Refused)
    }

    /// `r` (an approval) sealed with this repository's key.
    pub(crate) fn sealed(&self, mut r: ActionRecord) -> Result<ActionRecord> {
        let key = self.approval_key()?;
        let seal = Id::from(blake3::keyed_hash(&key, &r.encode()));
        if let Stage::Approved { seal: s, .. } = &mut r.stage {
            *s = Some(seal);
        }
        Ok(r)
    }

    /// Whether approval `a` was sealed by this repository (made here, by a person or a
    /// rule trusted here).
    pub fn sealed_here(&self, a: &state::Approval) -> bool {
        let Stage::Approved {
            seal: Some(seal), ..
        } = &a.record.stage
        else {
            return false;
        };
        let Ok(key) = self.approval_key() else {
            return false;
        };
        let mut bare = a.record.clone();
        if let Stage::Approved { seal: s, .. } = &mut bare.stage {
            *s = None;
        }
        Id::from(blake3::keyed_hash(&key, &bare.encode())) == *seal
    }
}
