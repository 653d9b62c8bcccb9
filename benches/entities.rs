//! Entities at scale, side by side with a plain SQLite table holding the same rows.
//!
//! `cargo bench --bench entities`. Builds (once, in a temp dir) a repository with
//! 1,000,000 tasks recorded in one transaction (reported as entities per second), then
//! measures: editing one entity through the library (one published operation), the
//! number of map nodes one edit writes, and a filtered, ordered query on the entities
//! against the same query on a SQLite table of the same rows. Under `cargo test` it runs
//! once on 2,000 entities as a smoke test.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use lifeos_store::{Id, Kind};
use lifeos_vcs::entity::{Entity, EntityChange, Value};
use lifeos_vcs::entity_map::EntityMap;
use lifeos_vcs::Repo;

fn count() -> usize {
    if std::env::args().any(|a| a == "--bench") {
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
    let root = EntityMap::build(&mut tx, &edits).unwrap();
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

fn sqlite_table(n: usize) -> rusqlite::Connection {
    let db = rusqlite::Connection::open_in_memory().unwrap();
    db.execute_batch(
        "CREATE TABLE tasks (id TEXT PRIMARY KEY, status TEXT, due TEXT, title TEXT);
         CREATE INDEX tasks_status_due ON tasks (status, due);",
    )
    .unwrap();
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

fn entities(c: &mut Criterion) {
    let n = count();
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
    let root = EntityMap(repo.head().unwrap().view.entities.unwrap());
    let mut tx = repo.store().transaction().unwrap();
    let (_, written) = root
        .apply(&mut tx, &[(b"task:0000042".to_vec(), Some(Id::hash(b"x")))])
        .unwrap();
    drop(tx);
    println!("one edit among {n} entities writes {written} map nodes");

    let mut g = c.benchmark_group("entities");
    g.sample_size(20);
    let mut v = 0u64;
    g.bench_function(
        format!("edit one of {n} (library call, one operation)"),
        |b| {
            b.iter(|| {
                v += 1;
                let change = EntityChange::Set(vec![("estimate".into(), Value::Num(v as f64))]);
                black_box(repo.change_entity(Some("task:0000042"), change).unwrap());
            })
        },
    );
    let q = lifeos_vcs::query::parse(
        r#"task where status = "open" and due < 2026-03-10 order by due limit 20"#,
    )
    .unwrap();
    let view = repo.head().unwrap().view;
    g.sample_size(10);
    if n <= 100_000 {
        g.bench_function(format!("query over {n} (lifeos)"), |b| {
            b.iter(|| black_box(repo.query_entities(&view, &q).unwrap().len()))
        });
    } else {
        // A query reads every entity of the view (no catalog index yet): seconds a run,
        // too slow for criterion's samples, so one run is timed.
        let start = Instant::now();
        let hits = repo.query_entities(&view, &q).unwrap().len();
        println!(
            "query over {n} (lifeos, one run): {:.3} s, {hits} results",
            start.elapsed().as_secs_f64()
        );
    }
    let db = sqlite_table(n);
    let mut stmt = db
        .prepare(
            "SELECT id FROM tasks WHERE status = 'open' AND due < '2026-03-10' ORDER BY due LIMIT 20",
        )
        .unwrap();
    g.bench_function(format!("query over {n} (plain SQLite table)"), |b| {
        b.iter(|| {
            let rows: Vec<String> = stmt
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            black_box(rows.len())
        })
    });
    g.finish();
}

criterion_group!(benches, entities);
criterion_main!(benches);
