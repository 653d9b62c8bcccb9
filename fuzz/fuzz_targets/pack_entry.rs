//! A pack entry header and its stored bytes, as read from an untrusted pack; a block's
//! raw bytes are decoded into its members too.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_store::block::Block;
use lifeos_store::pack::{decode_entry, EntryHeader, ENTRY_HEADER_LEN};
use lifeos_store::{Id, Kind};

fuzz_target!(|data: &[u8]| {
    if data.len() < ENTRY_HEADER_LEN {
        return;
    }
    let h: [u8; ENTRY_HEADER_LEN] = data[..ENTRY_HEADER_LEN].try_into().unwrap();
    if let Ok(header) = EntryHeader::decode(&h) {
        // A delta's base: the fuzzer's own bytes, so frames made against them decode.
        let base = data[ENTRY_HEADER_LEN..].to_vec();
        let raw = decode_entry(&header, data[ENTRY_HEADER_LEN..].to_vec(), &mut |_| Ok(base.clone()));
        if let (Ok(raw), Kind::Block) = (raw, header.kind) {
            if let Ok(block) = Block::decode(raw) {
                let ids: Vec<Id> = block.members().map(|(id, _, _)| id).collect();
                for id in ids {
                    let (_, bytes) = block.get(&id).expect("a listed member");
                    assert_eq!(Id::hash(bytes), id);
                }
            }
        }
    }
});
