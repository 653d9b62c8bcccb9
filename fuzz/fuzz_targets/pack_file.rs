//! A whole pack file: its footer with the members of its blocks, and a scan of its
//! entries, each read and verified.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_store::pack::{read_entry, read_rows, scan};

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.pack");
    std::fs::write(&path, data).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    let _ = read_rows(&f, &path);
    if let Ok((entries, _)) = scan(&f, &path) {
        // A delta's base: an entry of the same pack, read without bases of its own.
        let mut base = |id: &lifeos_store::Id| {
            let (h, off) = entries.iter().find(|(h, _)| h.id == *id).ok_or("no such base")?;
            read_entry(&f, &path, "p", *off, h, id, &mut |_| Err("a base of a base".to_string()))
                .map_err(|e| e.to_string())
        };
        for (h, off) in entries.iter().take(100) {
            let _ = read_entry(&f, &path, "p", *off, h, &h.id, &mut base);
        }
    }
});
