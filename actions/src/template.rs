//! Templates of rule actions: `{field}` placeholders (`{{` and `}}` are literal braces)
//! rendered from an event's fields into the payload a person approves, in strings, JSON
//! bodies and shell lines (where a field is one quoted word, and a placeholder inside the
//! line's own quotes is refused).

use std::collections::BTreeMap;

use serde_json::Value as Json;

/// The placeholders of template `t` (`{name}`; `{{` and `}}` are literal braces).
pub(crate) fn placeholders(t: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find(['{', '}']) {
        let (c, after) = (rest.as_bytes()[i], &rest[i + 1..]);
        if after.starts_with(c as char) {
            rest = &after[1..];
            continue;
        }
        if c == b'}' {
            return Err(format!("a lone }} in {t:?} (write }}}} for a brace)"));
        }
        let end = after
            .find('}')
            .ok_or_else(|| format!("an unclosed {{ in {t:?}"))?;
        out.push(&after[..end]);
        rest = &after[end + 1..];
    }
    Ok(out)
}

/// Renders template `t` with `fields`.
pub fn render(t: &str, fields: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(t.len());
    let mut rest = t;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let (c, after) = (rest.as_bytes()[i], &rest[i + 1..]);
        if after.starts_with(c as char) {
            out.push(c as char);
            rest = &after[1..];
            continue;
        }
        match after.find('}').filter(|_| c == b'{') {
            Some(end) => {
                if let Some(v) = fields.get(&after[..end]) {
                    out.push_str(v);
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push(c as char);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The first placeholder of shell line `line` that stands inside the line's own quotes
/// (`'...'` or `"..."`), if one does.
pub(crate) fn quoted_placeholder(line: &str) -> Option<&str> {
    let b = line.as_bytes();
    let (mut single, mut double) = (false, false);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        // `{{` and `}}` are literal braces, in quotes or not.
        if (c == b'{' || c == b'}') && b.get(i + 1) == Some(&c) {
            i += 2;
            continue;
        }
        if c == b'{' {
            let end = line[i + 1..].find('}')?;
            if single || double {
                return Some(&line[i + 1..i + 1 + end]);
            }
            i += end + 2;
            continue;
        }
        match c {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            // An escaped character (not inside single quotes, where `\` is itself).
            b'\\' if !single => i += 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// `text` as one single-quoted `sh` word.
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Renders every string inside a JSON value.
pub(crate) fn render_json(v: &Json, fields: &BTreeMap<String, String>) -> Json {
    match v {
        Json::String(s) => Json::String(render(s, fields)),
        Json::Array(a) => Json::Array(a.iter().map(|x| render_json(x, fields)).collect()),
        Json::Object(o) => Json::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), render_json(x, fields)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Every string inside a JSON value.
pub(crate) fn json_strings<'v>(v: &'v Json, out: &mut Vec<&'v str>) {
    match v {
        Json::String(s) => out.push(s),
        Json::Array(a) => a.iter().for_each(|x| json_strings(x, out)),
        Json::Object(o) => o.values().for_each(|x| json_strings(x, out)),
        _ => {}
    }
}
