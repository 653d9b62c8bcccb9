//! A kept file index (`.lifeos/file_index/<tree>`, FORMAT 12.10) as search reads it: the
//! bytes after the header are the fuzzer's and the checksum is made to match, so the
//! bounds checks behind the checksum are what is tried. Whatever the bytes, the index is
//! refused or every question to it is answered, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_store::Id;
use lifeos_ingest::file_index::FileIndex;

fuzz_target!(|data: &[u8]| {
    let tree = Id([7; 32]);
    let mut b = b"LFIX\x01\x00\x00\x00".to_vec();
    b.extend_from_slice(&tree.0);
    b.extend_from_slice(data);
    let sum = Id::hash(&b);
    b.extend_from_slice(&sum.0);
    if let Some(index) = FileIndex::decode(b, &tree) {
        for k in 0..index.len() {
            let content = index.content(k);
            assert!(!index.path(k).is_empty());
            assert!(index.contains(&content) || index.files_of(&content).count() == 0);
            for f in index.files_of(&content) {
                assert!(f < index.len());
            }
        }
    }
});
