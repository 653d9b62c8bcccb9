//! Every object decoder: manifests, trees, commits, views, operations, the stat cache.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lifeos_store::Manifest::decode(data);
    let _ = lifeos_vcs::object::Tree::decode(data);
    let _ = lifeos_vcs::object::Commit::decode(data);
    let _ = lifeos_vcs::object::View::decode(data);
    let _ = lifeos_vcs::object::Operation::decode(data);
    let _ = lifeos_vcs::working_copy::WcState::decode(data);
});
