//! Text the user types: revsets, `--at` times and entity queries.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = lifeos_vcs::revset::parse(s);
        let now: jiff::Zoned = "2026-12-02T15:30:00+01:00[Europe/Paris]".parse().unwrap();
        let _ = lifeos_vcs::moment::parse_when(s, &now);
        if let Err(e) = lifeos_entities::query::parse(s) {
            // The error points inside the query (or at its end).
            assert!(e.at <= s.len());
        }
    }
});
