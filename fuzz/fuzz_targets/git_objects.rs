//! The git object parsers the import runs on bytes from any git repository: commits,
//! signatures, change ids, trees and their modes, annotated tags.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_git::form;

fuzz_target!(|data: &[u8]| {
    if let Some(c) = form::parse_commit(data) {
        for key in [&b"author"[..], b"committer", b"change-id"] {
            if let Some(v) = form::header_value(c.header, key) {
                let _ = form::parse_signature(v);
                let _ = form::parse_change_id(v);
            }
        }
    }
    if let Some(entries) = form::parse_tree(data) {
        for e in &entries {
            let _ = form::kind_of_mode(e.mode);
        }
    }
    let _ = form::parse_tag(data);
    let _ = form::parse_signature(data);
});
