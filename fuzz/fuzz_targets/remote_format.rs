//! What a remote hands back (its config, pack indexes, heads, pack objects), on a plain
//! remote and an encrypted one: whatever the bytes, they decode or are refused with an
//! error, never a panic; an index that decodes encodes back to the same rows; an object
//! that decodes is exactly the bytes its id names.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_remote::format::{
    decode_head, decode_index, decode_object, encode_index, RemoteConfig,
};
use lifeos_remote::crypt::MasterKey;
use lifeos_store::{Id, Kind};

fuzz_target!(|data: &[u8]| {
    let _ = RemoteConfig::decode(data);
    if let Ok(rows) = decode_index(None, "p", data.to_vec()) {
        let again = decode_index(None, "p", encode_index(None, "p", &rows)).expect("re-decodes");
        assert_eq!(again, rows);
    }
    let _ = decode_head(None, "heads/00", data.to_vec());
    let id = Id::hash(b"fuzz");
    if let Ok(raw) = decode_object(None, &id, Kind::Chunk, data.to_vec()) {
        assert_eq!(Id::hash(&raw), id, "an object decoded to bytes its id does not name");
    }
    if let Some((kind, rest)) = data.split_first() {
        if let Some(kind) = Kind::from_u8(*kind) {
            let raw_id = Id::hash(rest);
            let _ = decode_object(None, &raw_id, kind, rest.to_vec());
        }
    }
    let keys = MasterKey::generate().keys();
    assert!(decode_index(Some(&keys), "p", data.to_vec()).is_err());
    assert!(decode_head(Some(&keys), "heads/00", data.to_vec()).is_err());
    assert!(decode_object(Some(&keys), &id, Kind::Chunk, data.to_vec()).is_err());
});
