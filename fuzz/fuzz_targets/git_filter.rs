//! What git's `lifeos` filter process reads from git: pkt-lines, and pointers (from any
//! repository's blobs).
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_git::filter::decode_packets;
use lifeos_git::pointer::Pointer;

fuzz_target!(|data: &[u8]| {
    if let Some(p) = Pointer::parse(data) {
        // Only the exact text is a pointer.
        assert_eq!(p.text().as_bytes(), data);
    }
    if let Ok(packets) = decode_packets(data) {
        for p in packets.iter().flatten() {
            assert!(!p.is_empty() && p.len() <= 65516);
            let _ = Pointer::parse(p);
        }
    }
});
