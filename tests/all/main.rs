//! The end-to-end tests: the real `lifeos` binary on real files, in one test binary (one
//! link for all of them). Each file here is a module; `tests/common` holds what they
//! share, [`common::TestEnv`] first, and is also read by the benches.

#[path = "../common/mod.rs"]
mod common;

mod actions;
mod compat;
mod diff;
mod entities;
mod faults;
mod git;
mod history;
mod hostile;
mod remotes;
mod safety;
mod screens;
mod search;
mod snapshot_restore;
mod speech;

/// A file in this folder that no `mod` line names would never be compiled, and its tests
/// would silently not run.
#[test]
fn every_file_here_is_a_module() {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/all");
    let main = std::fs::read_to_string(here.join("main.rs")).unwrap();
    let declared: Vec<&str> = main
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&here).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let module = match name.strip_suffix(".rs") {
            Some(m) => m,
            // A folder is a module too, through its mod.rs.
            None if path.join("mod.rs").is_file() => &name,
            None => continue,
        };
        if module != "main" && !declared.contains(&module) {
            missing.push(name.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "not declared with `mod` in tests/all/main.rs: {missing:?}"
    );
}
