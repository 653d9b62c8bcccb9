//! Where a repository's remotes are (`.lifeos/remotes.toml`) and how a remote URL becomes
//! a backend.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::backend::{Backend, DirBackend};

use crate::{RemoteError, Result};

/// The file, in `.lifeos`, that lists the remotes.
pub const REMOTES_FILE: &str = "remotes.toml";
/// The folder, in `.lifeos`, of what is kept per remote (its cached indexes).
pub const REMOTES_DIR: &str = "remotes";

/// One configured remote.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteSpec {
    /// `s3://bucket/prefix`, `file:///path` or an absolute path.
    pub url: String,
    /// The S3 endpoint (default: `AWS_ENDPOINT_URL`, else AWS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The S3 region (default: `AWS_REGION`, else `us-east-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Whether a remote created by a push is encrypted (default: yes for S3, no for a
    /// directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypt: Option<bool>,
    /// Whether this repository is a lazy clone of the remote: file chunks not here are
    /// read from it when needed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lazy: bool,
    /// What the remote was when this repository first opened it; every later open is
    /// refused if it differs (a server cannot turn encryption off, or swap the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<Seen>,
}

/// What a remote's config said when this repository first opened it: kept in
/// `remotes.toml`, in the store, where no tree, branch or server writes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seen {
    /// The layout version.
    pub format: u32,
    /// Whether everything on it was sealed.
    pub encrypted: bool,
    /// Its key check (FORMAT 19.1), for an encrypted remote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_check: Option<String>,
}

impl RemoteSpec {
    /// Whether a push that creates the remote encrypts it (and whether, the first time it
    /// is opened, it must be encrypted).
    pub fn encrypts(&self) -> bool {
        self.encrypt
            .unwrap_or(matches!(parse_url(&self.url), Ok(Url::S3 { .. })))
    }

    /// What opening the remote must find.
    pub fn expect(&self) -> crate::Expect<'_> {
        crate::Expect {
            seen: self.seen.as_ref(),
            encrypted: self.encrypts(),
        }
    }
}

/// The remotes of a repository.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Remotes {
    /// By name.
    #[serde(default)]
    pub remote: BTreeMap<String, RemoteSpec>,
}

impl Remotes {
    /// Reads `.lifeos/remotes.toml` (none yet: no remotes).
    pub fn load(dot: &Path) -> Result<Remotes> {
        let path = dot.join(REMOTES_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Remotes::default()),
            Err(e) => {
                return Err(RemoteError::BadRemotesFile {
                    path,
                    reason: e.to_string(),
                })
            }
        };
        toml::from_str(&text).map_err(|e| RemoteError::BadRemotesFile {
            path,
            reason: e.to_string(),
        })
    }

    /// Writes them back (atomically).
    pub fn save(&self, dot: &Path) -> Result<()> {
        let text = toml::to_string(self).expect("remotes serialise");
        lifeos_store::fsutil::write_atomic(&dot.join(REMOTES_FILE), text.as_bytes())?;
        Ok(())
    }

    /// The remote called `name`.
    pub fn get(&self, name: &str) -> Result<&RemoteSpec> {
        self.remote
            .get(name)
            .ok_or_else(|| RemoteError::Unknown(name.to_string()))
    }

    /// The remote a command means: `name`, or the only one (`origin` when there is none,
    /// which is then an unknown remote). With several and no name it guesses none: a
    /// push that went to whichever remote is called `origin` once a second one was added
    /// sent the history where the person did not say.
    pub fn choose(&self, name: Option<&str>) -> Result<(String, &RemoteSpec)> {
        let name = match name {
            Some(n) => n.to_string(),
            None if self.remote.len() == 1 => {
                self.remote.keys().next().cloned().unwrap_or_default()
            }
            None if self.remote.is_empty() => "origin".to_string(),
            None => return Err(RemoteError::Unnamed(self.remote.keys().cloned().collect())),
        };
        let spec = self.get(&name)?;
        Ok((name, spec))
    }
}

/// Checks a remote's name: letters, digits, `-`, `_` and `.`, not starting with `.`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(RemoteError::BadUrl {
            url: name.to_string(),
            reason: "a remote's name is 1 to 64 letters, digits, `-`, `_` and `.`, not starting with `.`".into(),
        })
    }
}

/// A parsed remote URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Url {
    /// A directory.
    Dir(PathBuf),
    /// A bucket of an S3-compatible store, and a prefix in it (empty or ending in `/`).
    S3 {
        /// The bucket.
        bucket: String,
        /// The prefix.
        prefix: String,
    },
}

/// Parses `s3://bucket/prefix`, `file:///path` or an absolute path.
pub fn parse_url(url: &str) -> Result<Url> {
    let bad = |reason: &str| RemoteError::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("it names no bucket (s3://BUCKET/PREFIX)"));
        }
        let prefix = prefix.trim_matches('/');
        if !prefix.is_empty() {
            crate::backend::check_key(prefix).map_err(|e| bad(&e.to_string()))?;
        }
        let prefix = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        return Ok(Url::S3 {
            bucket: bucket.to_string(),
            prefix,
        });
    }
    let path = url.strip_prefix("file://").unwrap_or(url);
    if url.contains("://") && !url.starts_with("file://") {
        return Err(bad("lifeos reaches remotes by s3://, file:// or a path"));
    }
    if !path.starts_with('/') {
        return Err(bad("a directory remote is an absolute path"));
    }
    Ok(Url::Dir(PathBuf::from(path)))
}

/// The backend of a remote.
pub fn backend(spec: &RemoteSpec) -> Result<Box<dyn Backend>> {
    match parse_url(&spec.url)? {
        Url::Dir(p) => Ok(Box::new(DirBackend::open(&p)?)),
        Url::S3 { bucket, prefix } => Ok(Box::new(crate::s3::S3Backend::new(
            &bucket,
            &prefix,
            spec.endpoint.as_deref(),
            spec.region.as_deref(),
        )?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_hostile_ones_are_refused() {
        assert_eq!(
            parse_url("s3://b/some/prefix/").unwrap(),
            Url::S3 {
                bucket: "b".into(),
                prefix: "some/prefix/".into()
            }
        );
        assert_eq!(
            parse_url("file:///mnt/x").unwrap(),
            Url::Dir("/mnt/x".into())
        );
        assert_eq!(parse_url("/mnt/x").unwrap(), Url::Dir("/mnt/x".into()));
        assert!(parse_url("s3:///x").is_err());
        assert!(parse_url("s3://b/../x").is_err());
        assert!(parse_url("relative").is_err());
        assert!(parse_url("ftp://x").is_err());
        assert!(check_name("origin").is_ok());
        assert!(check_name("../x").is_err());
    }
}
