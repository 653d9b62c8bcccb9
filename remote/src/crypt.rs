//! Encryption for what a repository keeps on a remote (`docs/FORMAT.md` section 18).
//!
//! A random master key seals every object and index the remote holds with
//! XChaCha20-Poly1305 and names them by a keyed BLAKE3 hash of their ids, so the remote's
//! operator sees sizes and counts, never content, and cannot tell which known files a person
//! holds. The master key is kept on the remote only wrapped, in key slots: each slot wraps it
//! with a key derived from one passphrase by Argon2id, so a passphrase is added or changed by
//! writing a slot, without touching the data it protects.

use argon2::{Algorithm, Argon2, Params, Version};
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, CHACHA20_POLY1305};
use zeroize::{Zeroize, Zeroizing};

use lifeos_store::codec::{DecodeError, Reader, Writer};
use lifeos_store::Id;

/// Bytes of a sealed blob's nonce.
pub const NONCE_LEN: usize = 24;
/// Bytes the AEAD tag adds to what it seals.
pub const TAG_LEN: usize = 16;
/// Bytes a sealed blob holds before its ciphertext: the version byte and the nonce.
pub const SEALED_HEAD: usize = 1 + NONCE_LEN;
/// The version byte a sealed blob starts with.
pub const SEALED_VERSION: u8 = 1;
/// The type tag of a key slot's encoding (FORMAT.md 1.5).
pub const KEY_SLOT_TAG: u8 = 0xC1;
/// The version of a key slot's encoding.
pub const KEY_SLOT_VERSION: u8 = 1;
/// Bytes of a key slot's salt.
pub const SALT_LEN: usize = 16;
/// The most memory a key slot may ask Argon2id for, in KiB (1 GiB): a slot written by
/// someone else cannot make opening it exhaust the machine.
pub const MAX_KDF_KIB: u32 = 1 << 20;

/// What went wrong sealing, opening or deriving keys.
#[derive(Debug, thiserror::Error)]
pub enum CryptError {
    /// The passphrase opens none of the key slots tried.
    #[error("wrong passphrase: it opens none of the remote's keys")]
    WrongPassphrase,
    /// A sealed blob failed authentication: damaged, or sealed under another key or for
    /// another place.
    #[error("{what}: authentication failed (it is damaged, or was written with another key)")]
    Unauthentic {
        /// What was being opened.
        what: String,
    },
    /// Bytes that are not a sealed blob or key slot at all.
    #[error("{what}: {reason}")]
    Malformed {
        /// What was being read.
        what: String,
        /// Why it is not one.
        reason: String,
    },
    /// Argon2id refused its parameters.
    #[error("deriving a key from the passphrase: {0}")]
    Kdf(String),
}

impl From<DecodeError> for CryptError {
    fn from(e: DecodeError) -> Self {
        CryptError::Malformed {
            what: "key slot".into(),
            reason: e.to_string(),
        }
    }
}

/// Argon2id's cost parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KdfParams {
    /// Memory, in KiB.
    pub mem_kib: u32,
    /// Passes over the memory.
    pub iterations: u32,
    /// Parallel lanes.
    pub lanes: u32,
}

impl Default for KdfParams {
    /// 64 MiB, 3 passes, one lane: RFC 9106's second recommended setting with one lane.
    fn default() -> Self {
        KdfParams {
            mem_kib: 64 * 1024,
            iterations: 3,
            lanes: 1,
        }
    }
}

impl KdfParams {
    /// The 32-byte key these parameters derive from `passphrase` and `salt`.
    fn derive(&self, passphrase: &[u8], salt: &[u8]) -> Result<Zeroizing<[u8; 32]>, CryptError> {
        let params = Params::new(self.mem_kib, self.iterations, self.lanes, Some(32))
            .map_err(|e| CryptError::Kdf(e.to_string()))?;
        let mut out = Zeroizing::new([0u8; 32]);
        Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password_into(passphrase, salt, &mut out[..])
            .map_err(|e| CryptError::Kdf(e.to_string()))?;
        Ok(out)
    }
}

/// The random key everything on an encrypted remote is sealed under.
#[derive(Clone, PartialEq, Eq)]
pub struct MasterKey([u8; 32]);

impl Drop for MasterKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

impl MasterKey {
    /// A new key from the operating system's random source.
    pub fn generate() -> MasterKey {
        let mut k = [0u8; 32];
        getrandom::fill(&mut k).expect("the OS random source is available");
        MasterKey(k)
    }

    /// The keys this master key gives: one seals, one names.
    pub fn keys(&self) -> Keys {
        let seal = Zeroizing::new(blake3::derive_key("lifeos remote 2026-12 seal", &self.0));
        Keys {
            seal,
            names: Zeroizing::new(blake3::derive_key("lifeos remote 2026-12 names", &self.0)),
        }
    }
}

/// The working keys of an encrypted remote.
#[derive(Clone)]
pub struct Keys {
    seal: Zeroizing<[u8; 32]>,
    names: Zeroizing<[u8; 32]>,
}

impl Keys {
    /// Seals `plain` for the place `context` names (it is authenticated, not stored: a
    /// blob moved to another place does not open there). Layout: [`SEALED_VERSION`], a
    /// random nonce of [`NONCE_LEN`] bytes, then the ciphertext with its tag.
    pub fn seal(&self, context: &[u8], plain: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(SEALED_HEAD + plain.len() + TAG_LEN);
        out.resize(SEALED_HEAD, 0);
        out.extend_from_slice(plain);
        self.seal_in_place(context, &mut out, 0);
        out
    }

    /// Seals in place: `buf[start + SEALED_HEAD..]` is the plaintext, and the
    /// [`SEALED_HEAD`] bytes before it are the caller's room for the version and nonce.
    /// Afterwards `buf[start..]` is the sealed blob [`Keys::seal`] would have made, tag
    /// appended, with no copy of the plaintext made.
    pub fn seal_in_place(&self, context: &[u8], buf: &mut Vec<u8>, start: usize) {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).expect("the OS random source is available");
        buf[start] = SEALED_VERSION;
        buf[start + 1..start + SEALED_HEAD].copy_from_slice(&nonce);
        let (key, nonce) = self.xchacha(&nonce);
        let tag = key
            .seal_in_place_separate_tag(nonce, Aad::from(context), &mut buf[start + SEALED_HEAD..])
            .expect("ChaCha20-Poly1305 seals any message that fits in memory");
        buf.extend_from_slice(tag.as_ref());
    }

    /// Opens a blob sealed by [`Keys::seal`] for `context`; `what` names it in errors.
    pub fn open(&self, context: &[u8], sealed: &[u8], what: &str) -> Result<Vec<u8>, CryptError> {
        let mut buf = sealed.to_vec();
        let plain = self.open_in_place(context, &mut buf, what)?;
        buf.truncate(plain.end);
        buf.drain(..plain.start);
        Ok(buf)
    }

    /// Opens a sealed blob where it lies: on success the plaintext is
    /// `sealed[returned range]`; on failure `sealed` holds nothing of it (the tag is
    /// checked as the bytes are decrypted, and a blob that does not authenticate is
    /// zeroed before the error returns).
    pub fn open_in_place(
        &self,
        context: &[u8],
        sealed: &mut [u8],
        what: &str,
    ) -> Result<std::ops::Range<usize>, CryptError> {
        check_sealed(sealed, what)?;
        let end = sealed.len() - TAG_LEN;
        let (head, rest) = sealed.split_at_mut(SEALED_HEAD);
        let (body, tag) = rest.split_at_mut(end - SEALED_HEAD);
        let tag = Tag::try_from(&*tag).expect("the tag is TAG_LEN bytes");
        let nonce: &[u8; NONCE_LEN] = head[1..].try_into().expect("the nonce is NONCE_LEN bytes");
        let (key, nonce) = self.xchacha(nonce);
        key.open_in_place_separate_tag(nonce, Aad::from(context), tag, body, 0..)
            .map_err(|_| CryptError::Unauthentic { what: what.into() })?;
        Ok(SEALED_HEAD..end)
    }

    /// XChaCha20-Poly1305 for one extended nonce, as the ChaCha20-Poly1305 (RFC 8439)
    /// key and nonce it stands for: the subkey is HChaCha20 of the key and the nonce's
    /// first 16 bytes, the nonce four zero bytes then the extended nonce's last 8
    /// (draft-irtf-cfrg-xchacha). ring's ChaCha20-Poly1305 seals the peer library twice
    /// as fast as the RustCrypto crate on this machine (0.26 s against 0.49 s for
    /// 655 MiB in 64 KiB messages); the bytes are the same, which a test checks.
    fn xchacha(&self, nonce: &[u8; NONCE_LEN]) -> (LessSafeKey, Nonce) {
        let (head, tail) = nonce.split_at(16);
        let head: &[u8; 16] = head.try_into().expect("16 bytes");
        let mut subkey =
            chacha20::hchacha::<chacha20::cipher::consts::U10>((&*self.seal).into(), head.into());
        let key =
            LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &subkey).expect("a 32-byte key"));
        // ring keeps its own copy of the subkey, which it does not clear when dropped.
        subkey.as_mut_slice().zeroize();
        let mut short = [0u8; 12];
        short[4..].copy_from_slice(tail);
        (key, Nonce::assume_unique_for_key(short))
    }

    /// The name an object with id `id` has on the remote: BLAKE3 keyed by the naming key,
    /// so a name says nothing about the content without the key.
    pub fn name(&self, id: &Id) -> Id {
        Id(*blake3::keyed_hash(&self.names, &id.0).as_bytes())
    }
}

/// Checks a sealed blob's version and length.
fn check_sealed(sealed: &[u8], what: &str) -> Result<(), CryptError> {
    let malformed = |reason: String| CryptError::Malformed {
        what: what.into(),
        reason,
    };
    match sealed.first() {
        None => return Err(malformed("empty".into())),
        Some(&SEALED_VERSION) => {}
        Some(v) => {
            return Err(malformed(format!(
                "sealed with format version {v}, which this lifeos does not read (it reads {SEALED_VERSION}); upgrade lifeos"
            )))
        }
    }
    if sealed.len() < 1 + NONCE_LEN + TAG_LEN {
        return Err(malformed(format!(
            "{} bytes, shorter than the {} of an empty sealed blob",
            sealed.len(),
            1 + NONCE_LEN + TAG_LEN
        )));
    }
    Ok(())
}

/// The master key wrapped under a key derived from one passphrase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySlot {
    /// Argon2id's parameters for this slot.
    pub params: KdfParams,
    /// Argon2id's salt.
    pub salt: [u8; SALT_LEN],
    /// The master key, sealed (as [`Keys::seal`] lays it out) under the derived key.
    pub wrapped: Vec<u8>,
}

impl KeySlot {
    /// The Argon2id work opening it takes: KiB of memory times passes.
    pub fn work(&self) -> u64 {
        u64::from(self.params.mem_kib) * u64::from(self.params.iterations)
    }

    /// Wraps `master` under `passphrase` with a fresh salt.
    pub fn create(
        master: &MasterKey,
        passphrase: &[u8],
        params: KdfParams,
    ) -> Result<KeySlot, CryptError> {
        let mut salt = [0u8; SALT_LEN];
        getrandom::fill(&mut salt).expect("the OS random source is available");
        let kek = params.derive(passphrase, &salt)?;
        let keys = wrapping_keys(&kek);
        let aad = slot_context(&params, &salt);
        Ok(KeySlot {
            params,
            salt,
            wrapped: keys.seal(&aad, &master.0),
        })
    }

    /// The master key, if `passphrase` is this slot's.
    pub fn open(&self, passphrase: &[u8]) -> Result<MasterKey, CryptError> {
        check_params(&self.params)?;
        let kek = self.params.derive(passphrase, &self.salt)?;
        let keys = wrapping_keys(&kek);
        let aad = slot_context(&self.params, &self.salt);
        let raw = match keys.open(&aad, &self.wrapped, "key slot") {
            Ok(raw) => Zeroizing::new(raw),
            Err(CryptError::Unauthentic { .. }) => return Err(CryptError::WrongPassphrase),
            Err(e) => return Err(e),
        };
        let key: [u8; 32] = raw[..].try_into().map_err(|_| CryptError::Malformed {
            what: "key slot".into(),
            reason: format!("the wrapped key is {} bytes, not 32", raw.len()),
        })?;
        Ok(MasterKey(key))
    }

    /// The slot's encoding (FORMAT.md 18.2).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_header(KEY_SLOT_TAG, KEY_SLOT_VERSION);
        w.uint(u64::from(self.params.mem_kib))
            .uint(u64::from(self.params.iterations))
            .uint(u64::from(self.params.lanes))
            .raw(&self.salt)
            .bytes(&self.wrapped);
        w.finish()
    }

    /// Reads a slot written by [`KeySlot::encode`].
    pub fn decode(bytes: &[u8]) -> Result<KeySlot, CryptError> {
        const W: &str = "key slot";
        let mut r = Reader::new(bytes);
        r.header(W, KEY_SLOT_TAG, KEY_SLOT_VERSION)?;
        let small = |v: u64| {
            u32::try_from(v).map_err(|_| DecodeError::new(W, format!("{v} is out of range")))
        };
        let params = KdfParams {
            mem_kib: small(r.uint(W)?)?,
            iterations: small(r.uint(W)?)?,
            lanes: small(r.uint(W)?)?,
        };
        check_params(&params)?;
        let salt: [u8; SALT_LEN] = r
            .raw(W, SALT_LEN)?
            .try_into()
            .expect("raw returned SALT_LEN bytes");
        let wrapped = r.bytes(W)?.to_vec();
        r.finish(W)?;
        Ok(KeySlot {
            params,
            salt,
            wrapped,
        })
    }
}

/// Refuses parameters that would make opening a slot unreasonably costly, or that
/// Argon2id does not take.
fn check_params(p: &KdfParams) -> Result<(), CryptError> {
    let bad = |reason: String| CryptError::Malformed {
        what: "key slot".into(),
        reason,
    };
    if p.mem_kib > MAX_KDF_KIB {
        return Err(bad(format!(
            "it asks for {} MiB of memory to derive its key, more than the {} MiB lifeos allows",
            p.mem_kib / 1024,
            MAX_KDF_KIB / 1024
        )));
    }
    if !(1..=16).contains(&p.lanes) || !(1..=64).contains(&p.iterations) {
        return Err(bad(format!(
            "Argon2id with {} lanes and {} passes is outside what lifeos allows (1-16 lanes, 1-64 passes)",
            p.lanes, p.iterations
        )));
    }
    Ok(())
}

/// The sealing keys of a key-encryption key (no naming key is needed for a slot).
fn wrapping_keys(kek: &[u8; 32]) -> Keys {
    Keys {
        seal: Zeroizing::new(*kek),
        names: Zeroizing::new([0; 32]),
    }
}

/// What a slot's wrapped key is bound to: its parameters and salt, so that neither can be
/// changed without the slot failing to open.
fn slot_context(p: &KdfParams, salt: &[u8; SALT_LEN]) -> Vec<u8> {
    let mut w = Writer::default();
    w.raw(b"lifeos key slot")
        .uint(u64::from(p.mem_kib))
        .uint(u64::from(p.iterations))
        .uint(u64::from(p.lanes))
        .raw(salt);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Cheap parameters: the tests check behaviour, not cost.
    const FAST: KdfParams = KdfParams {
        mem_kib: 64,
        iterations: 1,
        lanes: 1,
    };

    #[test]
    fn sealed_blobs_open_only_under_their_key_and_place() {
        let keys = MasterKey::generate().keys();
        let sealed = keys.seal(b"pack p1", b"the budget meeting moved to Friday");
        assert_eq!(
            keys.open(b"pack p1", &sealed, "p1").unwrap(),
            b"the budget meeting moved to Friday"
        );
        assert!(
            !sealed.windows(6).any(|w| w == b"budget"),
            "no plaintext in the blob"
        );
        // Sealing twice gives different bytes (a fresh nonce each time).
        assert_ne!(
            sealed,
            keys.seal(b"pack p1", b"the budget meeting moved to Friday")
        );
        let moved = keys.open(b"pack p2", &sealed, "p2").unwrap_err();
        assert!(matches!(moved, CryptError::Unauthentic { .. }), "{moved}");
        let other = MasterKey::generate().keys();
        assert!(matches!(
            other.open(b"pack p1", &sealed, "p1"),
            Err(CryptError::Unauthentic { .. })
        ));
        for at in [0, 1, 30, sealed.len() - 1] {
            let mut bad = sealed.clone();
            bad[at] ^= 1;
            let err = keys.open(b"pack p1", &bad, "p1").unwrap_err().to_string();
            assert!(err.starts_with("p1: "), "{err}");
        }
        let short = keys
            .open(b"pack p1", &sealed[..20], "p1")
            .unwrap_err()
            .to_string();
        assert!(short.contains("shorter"), "{short}");
    }

    #[test]
    fn names_hide_ids_and_depend_on_the_key() {
        let id = Id::hash(b"a photo many people have");
        let a = MasterKey::generate().keys();
        let b = MasterKey::generate().keys();
        assert_ne!(a.name(&id), id);
        assert_eq!(a.name(&id), a.name(&id));
        assert_ne!(a.name(&id), b.name(&id));
    }

    #[test]
    fn key_slots_open_with_their_passphrase_only() {
        let master = MasterKey::generate();
        let slot = KeySlot::create(&master, b"correct horse", FAST).unwrap();
        let read = KeySlot::decode(&slot.encode()).unwrap();
        assert_eq!(read, slot);
        assert_eq!(read.open(b"correct horse").unwrap(), master);
        assert!(matches!(
            read.open(b"correct hors"),
            Err(CryptError::WrongPassphrase)
        ));
        // A second passphrase wraps the same key: adding one re-seals nothing else.
        let second = KeySlot::create(&master, b"battery staple", FAST).unwrap();
        assert_eq!(second.open(b"battery staple").unwrap(), master);
        // Lowering the cost written in a slot makes it fail, not open cheaply.
        let mut cheaper = slot.clone();
        cheaper.params.iterations = 2;
        assert!(matches!(
            cheaper.open(b"correct horse"),
            Err(CryptError::WrongPassphrase)
        ));
    }

    #[test]
    fn hostile_key_slots_are_refused_before_any_work() {
        let master = MasterKey::generate();
        let mut slot = KeySlot::create(&master, b"pw", FAST).unwrap();
        slot.params.mem_kib = 64 << 20;
        let err = KeySlot::decode(&slot.encode()).unwrap_err().to_string();
        assert!(err.contains("65536 MiB"), "{err}");
        slot.params.mem_kib = 64;
        slot.params.lanes = 0;
        assert!(KeySlot::decode(&slot.encode()).is_err());
        let mut bytes = KeySlot::create(&master, b"pw", FAST).unwrap().encode();
        bytes[1] = 9;
        let err = KeySlot::decode(&bytes).unwrap_err().to_string();
        assert!(err.contains("format version 9"), "{err}");
    }

    proptest! {
        #[test]
        fn seal_then_open_is_the_identity(
            context in proptest::collection::vec(any::<u8>(), 0..40),
            plain in proptest::collection::vec(any::<u8>(), 0..2000),
        ) {
            let keys = MasterKey([7; 32]).keys();
            let sealed = keys.seal(&context, &plain);
            prop_assert_eq!(sealed.len(), plain.len() + 1 + NONCE_LEN + TAG_LEN);
            prop_assert_eq!(keys.open(&context, &sealed, "blob").unwrap(), plain.clone());
            // Sealed in place after other bytes, it is a blob that opens in place, and
            // the bytes before it are untouched.
            let before = &context[..context.len().min(7)];
            let mut buf = before.to_vec();
            buf.resize(before.len() + SEALED_HEAD, 0);
            buf.extend_from_slice(&plain);
            keys.seal_in_place(&context, &mut buf, before.len());
            prop_assert_eq!(&buf[..before.len()], before);
            let blob = &mut buf[before.len()..];
            prop_assert_eq!(blob.len(), sealed.len());
            let range = keys.open_in_place(&context, blob, "blob").unwrap();
            prop_assert_eq!(&blob[range], plain.as_slice());
        }

        /// The blobs are XChaCha20-Poly1305 exactly as the RustCrypto crate computes
        /// it (what earlier lifeos wrote): each opens the other's.
        #[test]
        fn sealed_blobs_are_xchacha20_poly1305(
            context in proptest::collection::vec(any::<u8>(), 0..40),
            plain in proptest::collection::vec(any::<u8>(), 0..2000),
            key in any::<[u8; 32]>(),
        ) {
            use chacha20poly1305::aead::{Aead, KeyInit, Payload};
            let keys = MasterKey(key).keys();
            let theirs = chacha20poly1305::XChaCha20Poly1305::new((&*keys.seal).into());
            let sealed = keys.seal(&context, &plain);
            let nonce = chacha20poly1305::XNonce::from_slice(&sealed[1..SEALED_HEAD]);
            let opened = theirs
                .decrypt(nonce, Payload { msg: &sealed[SEALED_HEAD..], aad: &context })
                .unwrap();
            prop_assert_eq!(&opened, &plain);
            let mut by_them = sealed[..SEALED_HEAD].to_vec();
            by_them.extend(theirs.encrypt(nonce, Payload { msg: &plain, aad: &context }).unwrap());
            prop_assert_eq!(&by_them, &sealed);
            prop_assert_eq!(keys.open(&context, &by_them, "blob").unwrap(), plain);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let keys = MasterKey([7; 32]).keys();
            let _ = keys.open(b"x", &bytes, "blob");
            if let Ok(slot) = KeySlot::decode(&bytes) {
                prop_assert_eq!(KeySlot::decode(&slot.encode()).unwrap(), slot);
            }
        }
    }
}
