//! Structured data (JSON, YAML, TOML): changes by key path, independent of formatting and
//! key order.

use serde_json::Value;

use crate::{DiffError, DiffPlugin, FileDiff, Located, Location, Op, Options, Probe, Side};

/// Largest version parsed.
pub const MAX_STRUCTURED: u64 = 32 << 20;
/// At most this many changes are listed (the summary still counts all).
const MAX_LISTED: usize = 10_000;

/// The structured-data plugin.
pub struct StructuredPlugin;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Format {
    Json,
    Yaml,
    Toml,
}

fn format_of(ext: &str) -> Option<Format> {
    match ext {
        "json" | "geojson" | "jsonld" => Some(Format::Json),
        "yaml" | "yml" => Some(Format::Yaml),
        "toml" => Some(Format::Toml),
        _ => None,
    }
}

fn parse(side: Option<&Side<'_>>, format: Format) -> Result<Value, DiffError> {
    let Some(s) = side else {
        return Ok(Value::Null);
    };
    let bytes = s.load_within(MAX_STRUCTURED, "structured")?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| DiffError::Fallback(format!("{} is not UTF-8: {e}", s.path)))?;
    let invalid =
        |e: String| DiffError::Fallback(format!("{} is not valid {format:?}: {e}", s.path));
    match format {
        Format::Json => serde_json::from_str(text).map_err(|e| invalid(e.to_string())),
        Format::Yaml => serde_yaml::from_str::<Value>(text).map_err(|e| invalid(e.to_string())),
        Format::Toml => toml::from_str::<toml::Value>(text)
            .map_err(|e| invalid(e.to_string()))
            .and_then(|v| serde_json::to_value(v).map_err(|e| invalid(e.to_string()))),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 120 {
        format!(
            "{}…",
            &s[..s
                .char_indices()
                .take_while(|(i, _)| *i < 117)
                .last()
                .map_or(0, |(i, c)| i + c.len_utf8())]
        )
    } else {
        s
    }
}

fn child(path: &str, key: &str) -> String {
    if key
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
        && !key.is_empty()
    {
        format!("{path}.{key}")
    } else {
        format!("{path}[{}]", Value::String(key.into()))
    }
}

fn push(out: &mut Vec<Located>, total: &mut usize, l: Located) {
    *total += 1;
    if out.len() < MAX_LISTED {
        out.push(l);
    }
}

/// Every difference between two values, by key path.
pub fn compare(path: &str, a: &Value, b: &Value, out: &mut Vec<Located>, total: &mut usize) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                let p = child(path, k);
                match y.get(k) {
                    Some(vb) => compare(&p, va, vb, out, total),
                    None => push(
                        out,
                        total,
                        Located::new(
                            Op::Removed,
                            Location::KeyPath { path: p.clone() },
                            format!("{p} removed"),
                        )
                        .values(Some(short(va)), None),
                    ),
                }
            }
            for (k, vb) in y {
                if !x.contains_key(k) {
                    let p = child(path, k);
                    push(
                        out,
                        total,
                        Located::new(
                            Op::Added,
                            Location::KeyPath { path: p.clone() },
                            format!("{p} added"),
                        )
                        .values(None, Some(short(vb))),
                    );
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let p = format!("{path}[{i}]");
                match (x.get(i), y.get(i)) {
                    (Some(va), Some(vb)) => compare(&p, va, vb, out, total),
                    (Some(va), None) => push(
                        out,
                        total,
                        Located::new(
                            Op::Removed,
                            Location::KeyPath { path: p.clone() },
                            format!("{p} removed"),
                        )
                        .values(Some(short(va)), None),
                    ),
                    (None, Some(vb)) => push(
                        out,
                        total,
                        Located::new(
                            Op::Added,
                            Location::KeyPath { path: p.clone() },
                            format!("{p} added"),
                        )
                        .values(None, Some(short(vb))),
                    ),
                    (None, None) => {}
                }
            }
        }
        _ if a == b => {}
        _ => push(
            out,
            total,
            Located::new(
                Op::Changed,
                Location::KeyPath { path: path.into() },
                format!("{path}: {} → {}", short(a), short(b)),
            )
            .values(Some(short(a)), Some(short(b))),
        ),
    }
}

impl DiffPlugin for StructuredPlugin {
    fn name(&self) -> &str {
        "structured"
    }

    fn score(&self, probe: &Probe<'_>) -> Option<u8> {
        format_of(&probe.extension).map(|_| crate::BY_EXTENSION)
    }

    fn diff(
        &self,
        old: Option<&Side<'_>>,
        new: Option<&Side<'_>>,
        _opts: &Options,
    ) -> Result<FileDiff, DiffError> {
        let side = new.or(old).expect("a side");
        let format = format_of(&side.extension()).expect("scored by extension");
        let a = parse(old, format)?;
        let b = parse(new, format)?;
        let mut changes = Vec::new();
        let mut total = 0;
        compare("$", &a, &b, &mut changes, &mut total);
        let count = |op: Op| changes.iter().filter(|c| c.op == op).count();
        let summary = if total == 0 {
            "no change in content (formatting or key order only)".into()
        } else {
            format!(
                "{total} changes by key path: {} changed, {} added, {} removed",
                count(Op::Changed),
                count(Op::Added),
                count(Op::Removed)
            )
        };
        let mut notes = Vec::new();
        if total > changes.len() {
            notes.push(format!(
                "only the first {} of {total} changes are listed",
                changes.len()
            ));
        }
        Ok(FileDiff {
            plugin: format!("{format:?}").to_lowercase(),
            summary,
            changes,
            notes,
            visual: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_paths_ignore_order() {
        let a = json!({"server": {"port": 8080, "host": "a"}, "list": [1, 2], "gone": true});
        let b = json!({"list": [1, 3, 4], "server": {"host": "a", "port": 9090}, "new key": null});
        let mut out = Vec::new();
        let mut total = 0;
        compare("$", &a, &b, &mut out, &mut total);
        let texts: Vec<&str> = out.iter().map(|c| c.text.as_str()).collect();
        assert!(texts.contains(&"$.server.port: 8080 → 9090"), "{texts:?}");
        assert!(texts.contains(&"$.list[1]: 2 → 3"));
        assert!(texts.contains(&"$.list[2] added"));
        assert!(texts.contains(&"$.gone removed"));
        assert!(texts.contains(&"$[\"new key\"] added"));
        assert_eq!(total, 5);
    }
}
