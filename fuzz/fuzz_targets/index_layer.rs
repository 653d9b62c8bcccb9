//! An index layer file: opening it and looking ids up must fail cleanly, never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00112233445566778899aabbccddeeff.idx");
    std::fs::write(&path, data).unwrap();
    if let Ok(layer) = lifeos_store::index::Layer::open(&path) {
        let _ = layer.verify_checksum();
        for b in [0u8, 0x7f, 0xff] {
            let _ = layer.lookup(&lifeos_store::Id([b; 32]));
        }
        if let Ok(rows) = layer.rows() {
            for r in rows.take(1000) {
                let _ = r;
            }
        }
    }
});
