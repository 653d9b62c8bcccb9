//! The checks of names and symlink targets lifeos never writes (`vcs/src/guard.rs`):
//! whatever the bytes, they answer without a panic, and what they accept is safe. A name
//! accepted is never `.git` or `.lifeos` as NTFS or HFS+ reads it (checked against
//! simple folds of it); a symlink target accepted, resolved lexically from where the link
//! is, never leaves the folder's top and never names a repository folder.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_vcs::guard::{check_name, check_path, check_symlink, is_repository_name};
use lifeos_vcs::EntryKind;

/// `name` as NTFS reads it (case folded, trailing dots and spaces and any stream name
/// dropped) and as HFS+ reads it (case folded, its ignorable code points removed): no
/// file system does both at once.
fn folds(name: &[u8]) -> [Vec<u8>; 2] {
    let text = String::from_utf8_lossy(name);
    let ntfs = text
        .split(':')
        .next()
        .unwrap_or_default()
        .trim_end_matches(['.', ' '])
        .to_ascii_lowercase();
    let hfs: String = text
        .chars()
        .filter(|c| !matches!(*c as u32, 0x200c..=0x200f | 0x202a..=0x202e | 0x206a..=0x206f | 0xfeff))
        .collect();
    [ntfs.into_bytes(), hfs.to_ascii_lowercase().into_bytes()]
}

fuzz_target!(|data: &[u8]| {
    let (path, target) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    for name in path.split(|b| *b == b'/') {
        let accepted = check_name(name, EntryKind::File).is_ok();
        if accepted {
            for f in folds(name) {
                assert!(f != b".git" && f != b".lifeos", "{name:?} accepted");
            }
            assert!(!is_repository_name(name));
        }
    }
    let _ = check_path(path, EntryKind::Symlink);
    if check_symlink(path, target).is_ok() {
        let mut at: Vec<&[u8]> = path.split(|b| *b == b'/').filter(|c| !c.is_empty()).collect();
        at.pop();
        for part in target.split(|b| *b == b'/') {
            match part {
                b"" | b"." => {}
                b".." => {
                    assert!(at.pop().is_some(), "{target:?} from {path:?} leaves the top");
                }
                n => {
                    assert!(!is_repository_name(n), "{target:?} names a repository folder");
                    at.push(n);
                }
            }
        }
    }
});
