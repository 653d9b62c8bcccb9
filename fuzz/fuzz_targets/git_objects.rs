//! The git object parsers the import runs on bytes from any git repository: commits,
//! signatures, change ids, trees and their modes, annotated tags.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_git::objects;

fuzz_target!(|data: &[u8]| {
    if let Some(c) = objects::parse_commit(data) {
        for key in [&b"author"[..], b"committer", b"change-id"] {
            if let Some(v) = objects::header_value(c.header, key) {
                let _ = objects::parse_signature(v);
                let _ = objects::parse_change_id(v);
            }
        }
    }
    if let Some(entries) = objects::parse_tree(data) {
        for e in &entries {
            let _ = objects::kind_of_mode(e.mode);
        }
    }
    let _ = objects::parse_tag(data);
    let _ = objects::parse_signature(data);
});
