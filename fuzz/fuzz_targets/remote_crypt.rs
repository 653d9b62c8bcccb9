//! What an encrypted remote hands back (key slots, sealed blobs): whatever the bytes, they
//! decode or are refused with an error, never a panic; a slot that decodes encodes back
//! to itself; nothing opens without the key it was sealed under.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_remote::crypt::{KeySlot, MasterKey};

fuzz_target!(|data: &[u8]| {
    if let Ok(slot) = KeySlot::decode(data) {
        assert_eq!(KeySlot::decode(&slot.encode()).expect("re-decodes"), slot);
    }
    let keys = MasterKey::generate().keys();
    assert!(keys.open(b"fuzz", data, "blob").is_err(), "bytes not sealed under this key opened");
});
