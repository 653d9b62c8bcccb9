//! Every object decoder: manifests, trees, commits, views, operations, event pages, extracts,
//! git tags, entity map nodes, entities, action records, the stat cache and the folder move
//! journal.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lifeos_store::Manifest::decode(data);
    let _ = lifeos_vcs::object::Tree::decode(data);
    let _ = lifeos_vcs::object::Commit::decode(data);
    let _ = lifeos_vcs::object::View::decode(data);
    let _ = lifeos_vcs::object::Operation::decode(data);
    let _ = lifeos_vcs::object::decode_event_page(data);
    let _ = lifeos_vcs::object::Extract::decode(data);
    let _ = lifeos_vcs::object::GitTag::decode(data);
    let _ = lifeos_vcs::merkle_map::check_node(data);
    let _ = lifeos_vcs::object::entity::Entity::decode(data);
    let _ = lifeos_vcs::object::action::ActionRecord::decode(data);
    let _ = lifeos_vcs::working_copy::WcState::decode(data);
    let _ = lifeos_vcs::working_copy::moves::MoveJournal::decode(data);
});
