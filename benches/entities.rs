//! Entities at scale, side by side with a plain SQLite table holding the same rows.
//!
//! `cargo bench --bench entities`. Builds (once, in a temp dir) a repository with
//! 1,000,000 tasks recorded in one transaction (reported as entities per second), then
//! measures: a commit of a JSON Lines file of 1,000,000 tasks read as entities by a
//! schema rule (entities per second), editing one entity through the library (one
//! published operation; median, p95, and the objects it writes, map nodes among them),
//! the catalog's indexing of them, and queries on the entities (now and `--at` the
//! import) against the same queries on a SQLite table of the same rows, with and without
//! an index made for the first query (medians from criterion, p95 of 50 runs printed),
//! then the same queries as whole processes, `lifeos query` against `sqlite3`. Under
//! `cargo test` it runs once on 2,000 entities as a smoke test.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use lifeos_catalog::CatalogExt;
use lifeos_entities::EntitiesExt;
use lifeos_entities::{Entity, EntityChange, Value};
use lifeos_store::{Id, Kind};
use lifeos_vcs::merkle_map::MerkleMap;
use lifeos_vcs::Repo;

/// 1,000,000 entities when benchmarking, 2,000 when `cargo test` runs the bench once;
/// `LIFEOS_BENCH_ENTITIES` sets another count (to profile one query on a small store).
fn count() -> usize {
    if let Some(n) = std::env::var("LIFEOS_BENCH_ENTITIES")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        n
    } else if std::env::args().any(|a| a == "--bench") {
        1_000_000
    } else {
        2_000
    }
}

fn task(i: usize) -> Entity {
    let status = if i.is_multiple_of(10) { "open" } else { "done" };
    let due = format!("2026-{:02}-{:02}", 1 + i % 12, 1 + i % 28);
    Entity {
        kind: "task".into(),
        id: format!("task:{i:07}"),
        attrs: vec![
            ("due".into(), Value::parse(&due)),
            ("status".into(), Value::Str(status.into())),
            ("title".into(), Value::Str(format!("task number {i}"))),
        ],
        links: vec![],
        conflicts: vec![],
    }
}

/// Records `n` tasks in one operation: entity objects in blocks, in the map's order (the
/// BLAKE3 of their ids) so that reading the map in order reads each block once; the map
/// built once.
fn import(repo: &Repo, n: usize) -> f64 {
    let start = Instant::now();
    let head = repo.head().unwrap();
    let mut tx = repo.store().transaction().unwrap();
    let mut order: Vec<(blake3::Hash, usize)> = (0..n)
        .map(|i| (blake3::hash(task(i).id.as_bytes()), i))
        .collect();
    order.sort_unstable_by_key(|(h, _)| *h.as_bytes());
    let mut edits = Vec::with_capacity(n);
    for (_, i) in order {
        let e = task(i);
        let (obj, _) = tx.write_grouped(Kind::Entity, &e.encode()).unwrap();
        edits.push((e.id.into_bytes(), Some(obj)));
    }
    let root = MerkleMap::build(&mut tx, &edits).unwrap();
    let mut view = head.view.clone();
    view.entities = Some(root.0);
    repo.publish(
        tx,
        &[head.id],
        view,
        "bench import",
        vec![],
        lifeos_vcs::repo::now_ms(),
    )
    .unwrap();
    n as f64 / start.elapsed().as_secs_f64()
}

/// The queries timed: a name, the lifeos query and the same query on the SQLite table.
const QUERIES: [(&str, &str, &str); 3] = [
    (
        "open tasks due before a date, first 20 by due",
        r#"task where status = "open" and due < 2026-03-10 order by due limit 20"#,
        "SELECT id, status, due, title FROM tasks WHERE status = 'open' AND due < '2026-03-10' ORDER BY due LIMIT 20",
    ),
    (
        "one task by title",
        r#"task where title = "task number 424242""#,
        "SELECT id, status, due, title FROM tasks WHERE title = 'task number 424242' ORDER BY id",
    ),
    (
        "first 20 open tasks by id",
        r#"task where status = "open" limit 20"#,
        "SELECT id, status, due, title FROM tasks WHERE status = 'open' ORDER BY id LIMIT 20",
    ),
];

/// The 95th percentile of 50 runs of `f`, in milliseconds.
/// The medians, in milliseconds, of runs of `a` and `b` taken in turns: 2,000 each, or as
/// many as 20 seconds allow (at least 21).
fn paired_medians(a: &mut dyn FnMut() -> usize, b: &mut dyn FnMut() -> usize) -> (f64, f64) {
    let start = Instant::now();
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    while ta.len() < 2000 && (ta.len() < 21 || start.elapsed().as_secs() < 20) {
        ta.push(time_ms(a));
        tb.push(time_ms(b));
    }
    ta.sort_by(f64::total_cmp);
    tb.sort_by(f64::total_cmp);
    (ta[ta.len() / 2], tb[tb.len() / 2])
}

/// How long one run of `f` takes, in milliseconds.
fn time_ms(f: &mut dyn FnMut() -> usize) -> f64 {
    let start = Instant::now();
    black_box(f());
    start.elapsed().as_secs_f64() * 1e3
}

fn p95_ms(f: &mut dyn FnMut() -> usize) -> f64 {
    let mut t: Vec<f64> = (0..50).map(|_| time_ms(f)).collect();
    t.sort_by(f64::total_cmp);
    t[47]
}

/// A plain SQLite table of the same `n` tasks, in a database file in `dir` set up as the
/// catalog is (WAL, synchronous NORMAL, a 32 MiB page cache): what a person could keep
/// their records in instead.
fn sqlite_table(dir: &std::path::Path, n: usize, index: bool) -> rusqlite::Connection {
    let db = rusqlite::Connection::open(dir.join(format!("tasks-{index}.sqlite"))).unwrap();
    db.pragma_update(None, "journal_mode", "WAL").unwrap();
    db.pragma_update(None, "synchronous", "NORMAL").unwrap();
    db.pragma_update(None, "cache_size", -32768).unwrap();
    db.execute_batch(
        "CREATE TABLE tasks (id TEXT PRIMARY KEY, status TEXT, due TEXT, title TEXT);",
    )
    .unwrap();
    if index {
        db.execute_batch("CREATE INDEX tasks_status_due ON tasks (status, due);")
            .unwrap();
    }
    let tx = db.unchecked_transaction().unwrap();
    {
        let mut ins = tx
            .prepare("INSERT INTO tasks VALUES (?1, ?2, ?3, ?4)")
            .unwrap();
        for i in 0..n {
            let e = task(i);
            let text = |name: &str| e.get(name).unwrap().render();
            ins.execute((&e.id, text("status"), text("due"), text("title")))
                .unwrap();
        }
    }
    tx.commit().unwrap();
    db
}

/// The queries as a person runs them: the whole `lifeos query` process, now and `--at`
/// the import, against the whole `sqlite3` command-line process on the plain table's
/// database (p50 and p95 of 30 runs each, taken in turns). Skipped, with a line that
/// says so, where `sqlite3` is not installed.
fn processes(dir: &std::path::Path, import_op: &Id, plain: &rusqlite::Connection) {
    let db = plain.path().unwrap().to_string();
    if std::process::Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_err()
    {
        println!("whole processes: sqlite3 is not installed; not compared");
        return;
    }
    let op = import_op.to_hex();
    for (name, q, sql) in QUERIES {
        let lifeos = env!("CARGO_BIN_EXE_lifeos");
        let sides: [(&str, &str, Vec<&str>); 3] = [
            ("lifeos query, now", lifeos, vec!["query", q, "--json"]),
            (
                "lifeos query --at the import",
                lifeos,
                vec!["query", q, "--at", op.as_str(), "--json"],
            ),
            (
                "sqlite3 on the plain table",
                "sqlite3",
                vec![db.as_str(), sql],
            ),
        ];
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); sides.len()];
        for _ in 0..30 {
            for ((_, program, args), t) in sides.iter().zip(&mut times) {
                let start = Instant::now();
                let out = std::process::Command::new(program)
                    .args(args)
                    .current_dir(dir)
                    .output()
                    .unwrap();
                t.push(start.elapsed().as_secs_f64() * 1e3);
                assert!(out.status.success(), "{program} {args:?}: {out:?}");
            }
        }
        for ((label, ..), t) in sides.iter().zip(&mut times) {
            t.sort_by(f64::total_cmp);
            println!(
                "{name}, whole process ({label}): p50 {:.2} ms, p95 {:.2} ms",
                t[t.len() / 2],
                t[t.len() * 95 / 100]
            );
        }
    }
}

/// Commits a JSON Lines file of `n` tasks under a `[[files]]` rule, as a person's bulk
/// import does; returns entities per second (the whole commit: snapshot, rows read and
/// typed, entity objects and map written, published).
fn import_json_lines(n: usize) -> f64 {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
    repo.add_commit_hook(std::sync::Arc::new(
        lifeos_entities::from_files::DeriveEntities,
    ));
    std::fs::write(
        dir.path().join("lifeos.schema.toml"),
        "[[files]]\nglob = \"tasks.jsonl\"\ntype = \"task\"\nid = \"key\"\n",
    )
    .unwrap();
    let mut f =
        std::io::BufWriter::new(std::fs::File::create(dir.path().join("tasks.jsonl")).unwrap());
    for i in 0..n {
        let e = task(i);
        let text = |name: &str| e.get(name).unwrap().render();
        writeln!(
            f,
            r#"{{"key":"{i}","title":"{}","status":"{}","due":"{}"}}"#,
            text("title"),
            text("status"),
            text("due")
        )
        .unwrap();
    }
    drop(f);
    let wc = repo.lock_working_copy().unwrap();
    let opts = lifeos_vcs::commit::CommitOptions {
        message: b"tasks",
        ..Default::default()
    };
    let start = Instant::now();
    repo.commit_working_copy(&wc, &opts, &lifeos_vcs::working_copy::NoProgress)
        .unwrap();
    let rate = n as f64 / start.elapsed().as_secs_f64();
    assert!(repo.head().unwrap().view.entities.is_some());
    rate
}

/// A repository holding one task edited `versions - 1` times after it was added (one
/// operation each).
fn edited(versions: usize) -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
    let add = EntityChange::Add {
        kind: "task".into(),
        attrs: vec![("title".into(), Value::Str("edited often".into()))],
    };
    repo.change_entity(Some("task:often"), add).unwrap();
    for v in 1..versions {
        let set = EntityChange::Set(vec![("n".into(), Value::Num(v as f64))]);
        repo.change_entity(Some("task:often"), set).unwrap();
    }
    (dir, repo)
}

fn history(c: &mut Criterion) {
    let versions = if count() == 1_000_000 { 10_000 } else { 100 };
    let start = Instant::now();
    let (_dir, repo) = edited(versions);
    println!(
        "recorded {versions} versions of one entity in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let start = Instant::now();
    assert_eq!(repo.entity_history("task:often").unwrap().len(), versions);
    println!(
        "first history (the catalog indexes {versions} operations): {:.2} s",
        start.elapsed().as_secs_f64()
    );
    let mut g = c.benchmark_group("entities");
    g.sample_size(20);
    let mut f = || repo.entity_history("task:often").unwrap().len();
    g.bench_function(
        format!("history of one entity with {versions} versions"),
        |b| b.iter(|| black_box(f())),
    );
    println!(
        "history of one entity with {versions} versions: p95 {:.3} ms",
        p95_ms(&mut f)
    );
    g.finish();
}

fn entities(c: &mut Criterion) {
    let n = count();
    println!(
        "committed a JSON Lines file of {n} tasks: {:.0} entities/s",
        import_json_lines(n)
    );
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::init(dir.path(), lifeos_store::StoreConfig::default()).unwrap();
    let rate = import(&repo, n);
    println!("imported {n} entities: {rate:.0} entities/s");
    let store = repo.store().stats().unwrap();
    println!(
        "stored {} bytes ({} packs, index {} bytes)",
        store.pack_bytes + store.index_bytes,
        store.packs,
        store.index_bytes
    );

    // Nodes written by one edit among n.
    let root = MerkleMap(repo.head().unwrap().view.entities.unwrap());
    let mut tx = repo.store().transaction().unwrap();
    let (_, written) = root
        .apply(&mut tx, &[(b"task:0000042".to_vec(), Some(Id::hash(b"x")))])
        .unwrap();
    drop(tx);
    println!("one edit among {n} entities writes {written} map nodes");

    // Every object the library call writes (entity, map nodes, view, operation), counted
    // in the store's index, and the edit's p95.
    let mut v = 0u64;
    let mut edit = || {
        v += 1;
        let change = EntityChange::Set(vec![("estimate".into(), Value::Num(v as f64))]);
        repo.change_entity(Some("task:0000042"), change).unwrap();
        1
    };
    let objects = |repo: &Repo| {
        let s = repo.store().stats().unwrap();
        s.objects + s.chunks
    };
    let before = objects(&repo);
    edit();
    println!(
        "one edit among {n} entities (library call) writes {} objects in all",
        objects(&repo) - before
    );
    println!(
        "edit one of {n} (library call, one operation): p95 {:.3} ms",
        p95_ms(&mut edit)
    );

    let mut g = c.benchmark_group("entities");
    g.sample_size(20);
    g.bench_function(
        format!("edit one of {n} (library call, one operation)"),
        |b| b.iter(|| black_box(edit())),
    );
    // The first catalog use indexes the entities (the import and the edits since).
    let start = Instant::now();
    drop(repo.catalog().unwrap());
    println!(
        "catalog indexed {n} entities in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let head = repo.head().unwrap();
    let mut first = head.id;
    while repo.operation(&first).unwrap().description != "bench import" {
        first = repo.operation(&first).unwrap().parents[0];
    }
    let past = repo.op_state(&first).unwrap();
    let with_index = sqlite_table(dir.path(), n, true);
    let plain = sqlite_table(dir.path(), n, false);
    g.sample_size(20);
    for (name, q, sql) in QUERIES {
        let q = lifeos_entities::query::parse(q).unwrap();
        let mut run = |label: &str, f: &mut dyn FnMut() -> usize| {
            g.bench_function(format!("{name} over {n} ({label})"), |b| {
                b.iter(|| black_box(f()))
            });
            println!("{name} over {n} ({label}): p95 {:.3} ms", p95_ms(f));
        };
        run("lifeos, now", &mut || {
            repo.query_entities(&head.id, &head.view, &q).unwrap().len()
        });
        run("lifeos, --at the import", &mut || {
            repo.query_entities(&past.id, &past.view, &q).unwrap().len()
        });
        // As the SQLite side runs: on a connection opened once.
        let mut open = repo.entity_queries().unwrap();
        run("lifeos, now, catalog kept open", &mut || {
            open.run(&head.id, &head.view, &q).unwrap().len()
        });
        run("lifeos, --at the import, catalog kept open", &mut || {
            open.run(&past.id, &past.view, &q).unwrap().len()
        });
        // Whole rows, as the lifeos query returns whole entities.
        let whole_rows = |stmt: &mut rusqlite::Statement<'_>| {
            let rows: Vec<(String, String, String, String)> = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            rows.len()
        };
        for (label, db) in [
            ("SQLite table with an index on (status, due)", &with_index),
            ("SQLite table, no index", &plain),
        ] {
            let mut stmt = db.prepare(sql).unwrap();
            run(label, &mut || whole_rows(&mut stmt));
        }
        // The ratio to the plain table, from runs that alternate, so that the load of a
        // shared machine weighs on both sides alike.
        let mut stmt = plain.prepare(sql).unwrap();
        let (ours, theirs) = paired_medians(
            &mut || open.run(&head.id, &head.view, &q).unwrap().len(),
            &mut || whole_rows(&mut stmt),
        );
        println!(
            "{name} over {n}, alternating runs: lifeos (catalog kept open) median {:.1} µs, SQLite table (no index) {:.1} µs, ratio {:.2}",
            ours * 1e3,
            theirs * 1e3,
            ours / theirs
        );
    }
    drop(with_index);
    processes(dir.path(), &first, &plain);
    if n <= 100_000 {
        let q = lifeos_entities::query::parse(QUERIES[0].1).unwrap();
        g.bench_function(
            format!("{} over {n} (scan of every entity)", QUERIES[0].0),
            |b| b.iter(|| black_box(repo.scan_entities(&head.view, &q).unwrap().len())),
        );
    }
    g.finish();
}

criterion_group!(benches, history, entities);
criterion_main!(benches);
