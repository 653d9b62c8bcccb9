//! A pack entry header and its stored bytes, as read from an untrusted pack.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_store::pack::{decode_entry, EntryHeader, ENTRY_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    if data.len() < ENTRY_HEADER_LEN {
        return;
    }
    let h: [u8; ENTRY_HEADER_LEN] = data[..ENTRY_HEADER_LEN].try_into().unwrap();
    if let Ok(header) = EntryHeader::decode(&h) {
        // A delta's base: the fuzzer's own bytes, so frames made against them decode.
        let base = data[ENTRY_HEADER_LEN..].to_vec();
        let _ = decode_entry(&header, data[ENTRY_HEADER_LEN..].to_vec(), &mut |_| Ok(base.clone()));
    }
});
