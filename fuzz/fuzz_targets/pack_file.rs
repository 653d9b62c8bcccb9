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
        for (h, off) in entries.iter().take(100) {
            let _ = lifeos_store::pack::read_entry(&f, &path, "p", *off, &h.id);
        }
    }
});
