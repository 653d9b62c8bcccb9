//! How entity changes print, in `diff`, `op show` and `entity history`.

use lifeos_entities::{Entity, EntityDiff, Value as AttrValue};
use lifeos_store::Id;
use serde_json::{json, Value};

use crate::output::Style;

/// An entity's change between two views, as `lifeos.diff.v1` and `lifeos.op.v1` give it.
pub(crate) fn entity_diff_json(d: &EntityDiff) -> Value {
    let links = |ls: &[(String, String)]| -> Vec<Value> {
        ls.iter()
            .map(|(rel, target)| json!({"rel": rel, "target": target}))
            .collect()
    };
    json!({
        "id": d.id,
        "type": d.kind(),
        "change": change_name(d),
        "from": d.old.as_ref().map(|(o, _)| o.to_hex()),
        "to": d.new.as_ref().map(|(o, _)| o.to_hex()),
        "attrs": d.attrs.iter().map(|(n, a, b)| json!({"name": n, "old": opt_json(a), "new": opt_json(b)})).collect::<Vec<_>>(),
        "linked": links(&d.linked),
        "unlinked": links(&d.unlinked),
    })
}

fn change_name(d: &EntityDiff) -> &'static str {
    match (&d.old, &d.new) {
        (None, _) => "created",
        (_, None) => "removed",
        _ => "changed",
    }
}

/// Prints entity changes by attribute path: a line per entity, then one per attribute
/// (`name: old -> new`) and per link added (`+`) or removed (`-`).
pub(crate) fn print_entity_diffs(out: &mut dyn std::io::Write, diffs: &[EntityDiff], style: Style) {
    let shown = |v: &Option<AttrValue>| v.as_ref().map_or("(unset)".to_string(), AttrValue::render);
    for d in diffs {
        let _ = writeln!(
            out,
            "{}",
            style.id(&format!(
                "── entity {} ({}; {}) ──",
                d.id,
                change_name(d),
                d.kind()
            ))
        );
        for (n, a, b) in &d.attrs {
            let _ = writeln!(out, "  {n}: {} -> {}", shown(a), shown(b));
        }
        for (rel, target) in &d.linked {
            let _ = writeln!(out, "  + {rel} -> {target}");
        }
        for (rel, target) in &d.unlinked {
            let _ = writeln!(out, "  - {rel} -> {target}");
        }
    }
}

fn value_json(v: &AttrValue) -> Value {
    match v {
        AttrValue::Str(s) => json!(s),
        AttrValue::Num(n) => json!(n),
        AttrValue::Bool(b) => json!(b),
        AttrValue::Date(_) | AttrValue::DateTime(_) => json!(v.render()),
    }
}

fn opt_json(v: &Option<AttrValue>) -> Value {
    v.as_ref().map_or(Value::Null, value_json)
}

/// An entity as `lifeos.entity.v1` gives it.
pub(crate) fn entity_json(obj: &Id, e: &Entity) -> Value {
    json!({
        "id": e.id,
        "type": e.kind,
        "object": obj.to_hex(),
        "attrs": e.attrs.iter().map(|(n, v)| (n.clone(), value_json(v))).collect::<serde_json::Map<_, _>>(),
        "links": e.links.iter().map(|(rel, target)| json!({"rel": rel, "target": target})).collect::<Vec<_>>(),
        "conflicts": e.conflicts.iter().map(|c| json!({
            "attr": c.attr, "base": opt_json(&c.base), "ours": opt_json(&c.ours), "theirs": opt_json(&c.theirs),
        })).collect::<Vec<_>>(),
    })
}
