//! A whole pack file: its footer and a scan of its entries.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.pack");
    std::fs::write(&path, data).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    let _ = lifeos_store::pack::read_footer(&f, &path);
    if let Ok((entries, _)) = lifeos_store::pack::scan(&f, &path) {
        // A delta's base: an entry of the same pack, read without bases of its own.
        let mut base = |id: &lifeos_store::Id| {
            let (_, off) = entries.iter().find(|(h, _)| h.id == *id).ok_or("no such base")?;
            lifeos_store::pack::read_entry(&f, &path, "p", *off, id, &mut |_| {
                Err("a base of a base".to_string())
            })
            .map(|(_, raw)| raw)
            .map_err(|e| e.to_string())
        };
        for (h, off) in entries.iter().take(100) {
            let _ = lifeos_store::pack::read_entry(&f, &path, "p", *off, &h.id, &mut base);
        }
    }
});
