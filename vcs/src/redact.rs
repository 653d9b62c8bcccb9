//! Redaction of obvious secrets before anything is stored or indexed.

use regex::Regex;

/// The default patterns: private keys, cloud and service tokens, JWTs, and the value in
/// `password=...`-like assignments.
pub const DEFAULT_PATTERNS: &[&str] = &[
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b",
    r"\bsk-[A-Za-z0-9_-]{20,}",
    r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
];

/// Keys whose values are secrets in `key = value` or `key: value`, alone or as a part of
/// a name joined by `_` (`AWS_SECRET_ACCESS_KEY=...`, `LIFEOS_PASSPHRASE=...` as `env`
/// prints them).
const ASSIGNMENT: &str = r#"(?i)\b((?:[a-z0-9]+_)*(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key|client[_-]?secret)(?:_[a-z0-9]+)*)(\s*[=:]\s*)("[^"\n]*"|'[^'\n]*'|[^\s,;]+)"#;

/// What replaces a secret.
pub const MARK: &str = "[REDACTED]";

/// A set of redaction patterns.
pub struct Redactor {
    patterns: Vec<Regex>,
    assignment: Regex,
}

impl Redactor {
    /// What the repository whose `.lifeos` folder is `dot_dir` redacts: the default
    /// patterns plus the `redact` patterns of its config's `[ingest]` table, as ingest
    /// applies them to extracted text. A config that cannot be read, or whose patterns
    /// are not valid, is an error: nothing should be stored unredacted because of it.
    pub fn configured(dot_dir: &std::path::Path) -> Result<Redactor, String> {
        let path = dot_dir.join("config");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let config: toml::Table =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let extra = match config.get("ingest").and_then(|i| i.get("redact")) {
            None => Vec::new(),
            Some(toml::Value::Array(all)) => all
                .iter()
                .map(|p| p.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or("repository config [ingest]: redact is not a list of strings")?,
            Some(_) => return Err("repository config [ingest]: redact is not a list".into()),
        };
        Redactor::new(&extra)
    }

    /// The default patterns plus `extra` (from the repository config).
    pub fn new(extra: &[String]) -> Result<Redactor, String> {
        let mut patterns = Vec::new();
        for p in DEFAULT_PATTERNS
            .iter()
            .copied()
            .chain(extra.iter().map(String::as_str))
        {
            patterns.push(Regex::new(p).map_err(|e| format!("bad redaction pattern {p:?}: {e}"))?);
        }
        Ok(Redactor {
            patterns,
            assignment: Regex::new(ASSIGNMENT).expect("valid pattern"),
        })
    }

    /// `text` with every secret replaced by [`MARK`]. A secret spanning several lines
    /// keeps its line breaks, so line numbers after it stay right.
    pub fn redact(&self, text: &str) -> String {
        let mut out = self
            .assignment
            .replace_all(text, format!("${{1}}${{2}}{MARK}").as_str())
            .into_owned();
        for p in &self.patterns {
            out = p
                .replace_all(&out, |c: &regex::Captures<'_>| {
                    format!("{MARK}{}", "\n".repeat(c[0].matches('\n').count()))
                })
                .into_owned();
        }
        out
    }

    /// A JSON object text with every string value redacted (keys and structure kept).
    pub fn redact_json(&self, json: &str) -> String {
        fn walk(r: &Redactor, v: &mut serde_json::Value) {
            match v {
                serde_json::Value::String(s) => *s = r.redact(s),
                serde_json::Value::Array(a) => a.iter_mut().for_each(|x| walk(r, x)),
                serde_json::Value::Object(o) => o.values_mut().for_each(|x| walk(r, x)),
                _ => {}
            }
        }
        match serde_json::from_str::<serde_json::Value>(json) {
            Ok(mut v) => {
                walk(self, &mut v);
                v.to_string()
            }
            Err(_) => self.redact(json),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_replaced() {
        let r = Redactor::new(&[]).unwrap();
        let t = "key AKIAABCDEFGHIJKLMNOP and password = hunter2, token: 'abc def'\n-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----";
        let o = r.redact(t);
        assert!(
            !o.contains("AKIAABCDEFGHIJKLMNOP")
                && !o.contains("hunter2")
                && !o.contains("abc def")
                && !o.contains("MIIB"),
            "{o}"
        );
        assert!(o.contains("password = [REDACTED]"), "{o}");
        let pem = "a\n-----BEGIN PRIVATE KEY-----\nx\ny\n-----END PRIVATE KEY-----\nb";
        assert_eq!(r.redact(pem), "a\n[REDACTED]\n\n\n\nb");
        assert_eq!(
            r.redact_json(r#"{"heading":"token: x"}"#),
            r#"{"heading":"token: [REDACTED]"}"#
        );
        let custom = Redactor::new(&["INTERNAL-[0-9]{4}".into()]).unwrap();
        assert_eq!(custom.redact("ticket INTERNAL-1234"), "ticket [REDACTED]");
    }

    /// L2: what `env` prints of a process's secrets is redacted by default.
    #[test]
    fn environment_secrets_are_replaced() {
        let r = Redactor::new(&[]).unwrap();
        let env = "LIFEOS_PASSPHRASE=correct-horse\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI\nGITHUB_TOKEN=abc123\nPATH=/usr/bin\ntokenizer = bert\n";
        let o = r.redact(env);
        for secret in ["correct-horse", "wJalrXUtnFEMI", "abc123"] {
            assert!(!o.contains(secret), "{o}");
        }
        assert!(
            o.contains("PATH=/usr/bin") && o.contains("tokenizer = bert"),
            "{o}"
        );
    }
}
