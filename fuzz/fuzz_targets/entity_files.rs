//! Files read as entities on commit (vCard, iCalendar, CSV and JSON Lines under a schema
//! rule) and the schema file itself: whatever the bytes, they are read or reported, never
//! a panic, and every reported line is inside the file.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_entities::from_files::read_file;
use lifeos_entities::schema::Schema;

const RULES: &str = "[types.book]\nfields.title = \"string\"\nfields.pages = \"number\"\nfields.when = \"datetime\"\nfields.kind = { enum = [\"a\", \"b\"] }\n\n[[files]]\nglob = \"*.csv\"\ntype = \"book\"\nid = \"title\"\n\n[[files]]\nglob = \"*.jsonl\"\ntype = \"task\"\n";

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = Schema::parse(s);
    }
    let schema = Schema::parse(RULES).expect("the rules parse");
    let lines = data.iter().filter(|b| **b == b'\n').count() as u64 + 1;
    for path in ["a.vcf", "a.ics", "a.csv", "a.jsonl"] {
        let got = read_file(&schema, path.as_bytes(), data);
        for (line, _) in &got.skipped {
            assert!(*line <= lines, "{path}: line {line} of {lines}");
        }
        for e in &got.entities {
            assert!(e.line >= 1 && e.line <= lines, "{path}: line {} of {lines}", e.line);
        }
    }
});
