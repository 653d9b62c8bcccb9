//! Entities through the real binary: record, change, link, show now and in the past,
//! history, undo, concurrent commands, gc, and the bad inputs.

use crate::common::*;

#[test]
fn entities_are_recorded_changed_linked_and_shown_as_they_were() {
    let repo = tempfile::tempdir().unwrap();
    let d = repo.path();
    TestEnv::at(d).now("2026-10-31T10:00:00Z").ok(&["init"]);
    let project = [
        "entity",
        "add",
        "project",
        "name=Move house",
        "--id",
        "project:move",
    ];
    TestEnv::at(d).now("2026-11-01T10:00:00Z").ok(&project);
    let task = [
        "entity",
        "add",
        "task",
        "title=Pack boxes",
        "due=2026-12-10",
        "estimate=2.5",
        "urgent=true",
    ];
    let added = TestEnv::at(d).now("2026-11-01T11:00:00Z").ok_json(&task);
    assert_eq!(added["schema"], "lifeos.entity.v1");
    let id = added["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("task:"), "{id}");
    assert_eq!(added["attrs"]["due"], "2026-12-10");
    assert_eq!(added["attrs"]["estimate"], 2.5);
    assert_eq!(added["attrs"]["urgent"], true);

    TestEnv::at(d).now("2026-11-02T10:00:00Z").ok(&[
        "entity",
        "link",
        &id,
        "project",
        "project:move",
    ]);
    TestEnv::at(d)
        .now("2026-11-03T10:00:00Z")
        .ok(&["entity", "set", &id, "status=done"]);
    TestEnv::at(d)
        .now("2026-11-04T10:00:00Z")
        .ok(&["entity", "unset", &id, "estimate"]);

    let shown = json(d, &["entity", "show", &id]);
    assert_eq!(shown["attrs"]["status"], "done");
    assert!(shown["attrs"].get("estimate").is_none(), "{shown}");
    assert_eq!(shown["links"][0]["target"], "project:move");
    let text = ok(d, &["entity", "show", &id]);
    assert!(
        text.contains("status = done") && text.contains("project -> project:move"),
        "{text}"
    );

    // As it was on 2 November: linked, not yet done.
    let then = json(d, &["entity", "show", &id, "--at", "2026-11-02T12:00:00Z"]);
    assert!(then["attrs"].get("status").is_none(), "{then}");
    assert_eq!(then["attrs"]["estimate"], 2.5);
    assert_eq!(then["links"][0]["rel"], "project");
    let err = fails(
        d,
        &[
            "entity",
            "show",
            "project:move",
            "--at",
            "2026-10-31T12:00:00Z",
        ],
    );
    assert!(err.contains("did not exist at"), "{err}");
    let err = fails(d, &["entity", "show", "project:move", "--at", "2026-10-01"]);
    assert!(err.contains("before the repository existed"), "{err}");

    // Every version, newest first, with what changed.
    let h = json(d, &["entity", "history", &id]);
    let versions = h["versions"].as_array().unwrap();
    let changed: Vec<String> = versions.iter().map(|v| v["changed"].to_string()).collect();
    assert_eq!(versions.len(), 4, "{h}");
    assert_eq!(
        versions[0]["changed"],
        serde_json::json!(["estimate"]),
        "{changed:?}"
    );
    assert_eq!(
        versions[1]["changed"],
        serde_json::json!(["status"]),
        "{changed:?}"
    );
    assert_eq!(
        versions[2]["changed"],
        serde_json::json!(["links"]),
        "{changed:?}"
    );
    assert_eq!(
        versions[3]["changed"],
        serde_json::json!(["due", "estimate", "title", "urgent"]),
        "{changed:?}"
    );

    // The operation log names the events.
    let ops = json(d, &["op", "log"]);
    let types: Vec<String> = ops["operations"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| {
            o["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["type"].as_str().unwrap().to_string())
        })
        .collect();
    for t in ["entity.created", "entity.linked", "entity.changed"] {
        assert!(types.iter().any(|x| x == t), "{t} missing from {types:?}");
    }
    let changed_event = ops["operations"][1]["events"][0].clone();
    assert_eq!(
        changed_event["paths"],
        serde_json::json!(["status"]),
        "{ops}"
    );

    // Removing, then undoing the removal.
    ok(d, &["entity", "rm", &id]);
    assert!(fails(d, &["entity", "show", &id]).contains("no entity"));
    ok(d, &["undo"]);
    assert_eq!(json(d, &["entity", "show", &id])["attrs"]["status"], "done");

    // gc keeps every entity and every version the op log reaches.
    let gc = json(d, &["gc"]);
    assert_eq!(gc["objects_removed"], 0, "{gc}");
    assert_eq!(json(d, &["fsck"])["ok"], true);
    let then = json(d, &["entity", "show", &id, "--at", "2026-11-02T12:00:00Z"]);
    assert_eq!(then["attrs"]["estimate"], 2.5);

    // Rollback as checkout: a new operation naming the object of 2 November.
    ok(
        d,
        &["entity", "restore", &id, "--at", "2026-11-02T12:00:00Z"],
    );
    let now = json(d, &["entity", "show", &id]);
    assert_eq!(now["object"], then["object"]);
    assert!(now["attrs"].get("status").is_none(), "{now}");
    let h = json(d, &["entity", "history", &id]);
    assert_eq!(
        h["versions"][0]["description"],
        format!("entity restore {id}")
    );
    assert_eq!(
        h["versions"][0]["changed"],
        serde_json::json!(["estimate", "status"])
    );
    let err = fails(d, &["entity", "restore", &id]);
    assert!(err.contains("needs --at"), "{err}");

    // Queries, through links, now and in the past; a parse error points at the token.
    let q = r#"task where project.name = "Move house" and estimate >= 2 order by due"#;
    let found = json(d, &["query", q]);
    assert_eq!(found["schema"], "lifeos.query.v1");
    assert_eq!(found["count"], 1, "{found}");
    assert_eq!(found["entities"][0]["id"], id.as_str());
    let before_link = json(d, &["query", q, "--at", "2026-11-01T12:00:00Z"]);
    assert_eq!(before_link["count"], 0, "{before_link}");
    assert_eq!(json(d, &["query", "project"])["count"], 1);
    let err = fails(d, &["query", "task where due <"]);
    let caret = format!("  {}^", " ".repeat("task where due <".len()));
    assert!(
        err.contains("expected a value") && err.lines().any(|l| l == caret),
        "{err}"
    );
}

#[test]
fn bad_entity_input_is_refused_and_changes_nothing() {
    let repo = repo(false);
    let d = repo.path();
    ok(
        d,
        &["entity", "add", "person", "name=Ann", "--id", "person:ann"],
    );
    let ops = op_count(d);
    let cases: [(&[&str], &str); 8] = [
        (
            &["entity", "add", "widget", "name=x"],
            "unknown entity type \"widget\"",
        ),
        (&["entity", "add", "task", "due=2026-12-10"], "needs title"),
        (
            &["entity", "add", "person", "name=Bo", "--id", "task:bo"],
            "is not person:NAME",
        ),
        (
            &["entity", "add", "person", "name=Ann", "--id", "person:ann"],
            "exists already",
        ),
        (
            &["entity", "set", "person:nobody", "x=1"],
            "no entity person:nobody",
        ),
        (
            &["entity", "set", "person:ann", "Bad-Name=1"],
            "not a valid name",
        ),
        (
            &["entity", "link", "person:ann", "knows", "person:nobody"],
            "no entity person:nobody",
        ),
        (
            &["entity", "unset", "person:ann", "name"],
            "name is required",
        ),
    ];
    for (args, want) in cases {
        let err = fails(d, args);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let err = fails(d, &["entity", "set", "person:ann", "no-equals-sign"]);
    assert!(err.contains("is not NAME=VALUE"), "{err}");
    assert_eq!(op_count(d), ops, "a refused change published an operation");
    assert_eq!(json(d, &["fsck"])["ok"], true);
}

/// Commands editing entities at the same time all keep their edits.
#[test]
fn concurrent_entity_commands_keep_every_edit() {
    let repo = repo(false);
    let d = repo.path();
    let ids: Vec<String> = (0..6)
        .map(|i| {
            json(d, &["entity", "add", "task", &format!("title=task {i}")])["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let children: Vec<_> = ids
        .iter()
        .map(|id| {
            TestEnv::at(d)
                .command(["entity", "set", id, &format!("note=edited {id}")])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    for id in &ids {
        let e = json(d, &["entity", "show", id]);
        assert_eq!(e["attrs"]["note"], format!("edited {id}"), "{e}");
    }
    assert_eq!(json(d, &["fsck"])["ok"], true);
}

/// `order by` sorts by the path's value (entities without one last), `desc` reverses,
/// `limit` cuts; an unknown type is an error; "0123" stays text.
#[test]
fn queries_order_limit_and_keep_text_that_is_not_a_number() {
    let repo = repo(false);
    let d = repo.path();
    let tasks = [
        ("task:c", Some("2026-12-03")),
        ("task:a", Some("2026-12-01")),
        ("task:b", Some("2026-12-02")),
        ("task:n", None),
    ];
    for (id, due) in tasks {
        let due_arg = due.map(|d| format!("due={d}"));
        let mut args = vec!["entity", "add", "task", "title=t", "--id", id];
        args.extend(due_arg.as_deref());
        ok(d, &args);
    }
    let ids = |q: &str| -> Vec<String> {
        json(d, &["query", q])["entities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        ids("task order by due"),
        ["task:a", "task:b", "task:c", "task:n"]
    );
    assert_eq!(
        ids("task order by due desc"),
        ["task:c", "task:b", "task:a", "task:n"]
    );
    assert_eq!(ids("task order by due limit 2"), ["task:a", "task:b"]);
    assert_eq!(ids("task where not has due"), ["task:n"]);
    assert!(fails(d, &["query", "tsk"]).contains("unknown entity type"));
    ok(d, &["entity", "set", "task:n", "zip=0123", "n=12"]);
    let e = json(d, &["entity", "show", "task:n"]);
    assert_eq!(e["attrs"]["zip"], "0123");
    assert_eq!(e["attrs"]["n"], 12.0);
}

/// `diff --from-at` and `op show` say what changed in the entities, attribute by
/// attribute; queries (answered from the catalog, now and `--at`) answer the same after
/// `lifeos reindex` rebuilds it.
#[test]
fn entity_changes_show_in_diff_and_op_show_and_queries_survive_reindex() {
    let repo = tempfile::tempdir().unwrap();
    let d = repo.path();
    TestEnv::at(d).now("2026-10-31T10:00:00Z").ok(&["init"]);
    let steps: [(&str, &[&str]); 5] = [
        (
            "2026-11-01T10:00:00Z",
            &[
                "entity",
                "add",
                "project",
                "name=Move",
                "--id",
                "project:move",
            ],
        ),
        (
            "2026-11-02T10:00:00Z",
            &[
                "entity",
                "add",
                "task",
                "title=Pack",
                "status=open",
                "due=2026-12-10",
                "--id",
                "task:pack",
            ],
        ),
        (
            "2026-11-02T11:00:00Z",
            &[
                "entity",
                "add",
                "task",
                "title=Call",
                "status=open",
                "due=2026-12-01",
                "--id",
                "task:call",
            ],
        ),
        (
            "2026-11-03T10:00:00Z",
            &["entity", "link", "task:pack", "project", "project:move"],
        ),
        (
            "2026-11-04T10:00:00Z",
            &["entity", "set", "task:pack", "status=done", "estimate=2"],
        ),
    ];
    for (now, args) in steps {
        TestEnv::at(d).now(now).ok(args);
    }

    let diff = json(d, &["diff", "--from-at", "2026-11-02T12:00:00Z"]);
    assert_eq!(diff["files"], serde_json::json!([]));
    let e = &diff["entities"];
    assert_eq!(e.as_array().unwrap().len(), 1, "{diff}");
    assert_eq!(e[0]["id"], "task:pack");
    assert_eq!(e[0]["change"], "changed");
    assert_eq!(
        e[0]["attrs"],
        serde_json::json!([
            {"name": "estimate", "old": null, "new": 2.0},
            {"name": "status", "old": "open", "new": "done"},
        ])
    );
    assert_eq!(
        e[0]["linked"],
        serde_json::json!([{"rel": "project", "target": "project:move"}])
    );
    let text = ok(d, &["diff", "--from-at", "2026-11-02T12:00:00Z"]);
    assert!(
        text.contains("── entity task:pack (changed; task) ──")
            && text.contains("  status: open -> done")
            && text.contains("  estimate: (unset) -> 2")
            && text.contains("  + project -> project:move"),
        "{text}"
    );
    // Between two moments, and from before the first entity: created.
    let early = json(
        d,
        &[
            "diff",
            "--from-at",
            "2026-10-31T12:00:00Z",
            "--to-at",
            "2026-11-01T12:00:00Z",
        ],
    );
    assert_eq!(early["from"], serde_json::json!({"no_commit": true}));
    assert_eq!(early["entities"][0]["id"], "project:move");
    assert_eq!(early["entities"][0]["change"], "created");

    let op = json(d, &["op", "show"]);
    assert_eq!(op["schema"], "lifeos.op.v1");
    assert_eq!(op["events"][0]["type"], "entity.changed");
    assert_eq!(op["entities"][0]["attrs"][1]["new"], "done");
    let text = ok(d, &["op", "show"]);
    assert!(text.contains("  status: open -> done"), "{text}");
    let first = json(d, &["op", "log"])["operations"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        json(d, &["op", "show", &first[..12]])["entities"],
        serde_json::json!([])
    );

    let queries = [
        vec!["query", r#"task where status = "open" order by due"#],
        vec!["query", r#"task where project.name = "Move""#],
        vec![
            "query",
            "task where has estimate or due < 2026-12-05 order by title desc",
        ],
        vec![
            "query",
            r#"task where status = "open""#,
            "--at",
            "2026-11-03T12:00:00Z",
        ],
        vec![
            "query",
            r#"task where project.name = "Move""#,
            "--at",
            "2026-11-02T12:00:00Z",
        ],
    ];
    let ids = |args: &[&str]| -> Vec<String> {
        json(d, args)["entities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    };
    let before: Vec<Vec<String>> = queries.iter().map(|q| ids(q)).collect();
    assert_eq!(
        before,
        [
            vec!["task:call"],
            vec!["task:pack"],
            vec!["task:pack", "task:call"],
            vec!["task:call", "task:pack"],
            vec![],
        ]
    );
    assert!(ok(d, &["reindex"]).contains("Rebuilt the catalog"));
    let after: Vec<Vec<String>> = queries.iter().map(|q| ids(q)).collect();
    assert_eq!(after, before);
}

/// Two operations that set the same attribute without seeing each other: the merge keeps
/// the newer one's value and records the conflict, which `entity show` reports, and the
/// older value is not lost from the record.
#[test]
fn the_same_attribute_set_concurrently_keeps_the_newer_value_and_a_conflict() {
    let repo = tempfile::tempdir().unwrap();
    let d = repo.path();
    TestEnv::at(d).now("2026-11-01T10:00:00Z").ok(&["init"]);
    TestEnv::at(d).now("2026-11-01T11:00:00Z").ok(&[
        "entity",
        "add",
        "task",
        "title=Pack",
        "status=open",
        "--id",
        "task:pack",
    ]);
    let heads = d.join(".lifeos/op_heads");
    let listing = || -> Vec<std::ffi::OsString> {
        let mut v: Vec<_> = std::fs::read_dir(&heads)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let base = listing();
    assert_eq!(base.len(), 1);
    TestEnv::at(d).now("2026-11-02T10:00:00Z").ok(&[
        "entity",
        "set",
        "task:pack",
        "status=waiting",
    ]);
    // The other process started from the same head: put it back and set the attribute
    // again, later, as that process would have.
    let first = listing();
    std::fs::remove_file(heads.join(&first[0])).unwrap();
    std::fs::File::create(heads.join(&base[0])).unwrap();
    TestEnv::at(d)
        .now("2026-11-02T12:00:00Z")
        .ok(&["entity", "set", "task:pack", "status=done"]);
    std::fs::File::create(heads.join(&first[0])).unwrap();
    assert_eq!(listing().len(), 2, "two concurrent heads");

    let e = json(d, &["entity", "show", "task:pack"]);
    assert_eq!(e["attrs"]["status"], "done", "the newer side wins: {e}");
    assert_eq!(
        e["conflicts"],
        serde_json::json!([{"attr": "status", "base": "open", "ours": "waiting", "theirs": "done"}])
    );
    let text = ok(d, &["entity", "show", "task:pack"]);
    assert!(
        text.contains("conflict on status: waiting and done (was open); kept done"),
        "{text}"
    );
    // Setting it again settles the conflict.
    ok(d, &["entity", "set", "task:pack", "status=done"]);
    assert_eq!(
        json(d, &["entity", "show", "task:pack"])["conflicts"],
        serde_json::json!([])
    );
}

/// Types declared in the committed `lifeos.schema.toml`: typed fields, enums, references
/// as links, required fields; each violation names the entity, the field and what was
/// expected, and records nothing. The schema in force is the committed one.
#[test]
fn a_committed_schema_declares_types_and_checks_every_field() {
    let repo = repo(false);
    let d = repo.path();
    write(
        d,
        "lifeos.schema.toml",
        br#"[types.book]
required = ["title", "author"]
fields.title = "string"
fields.pages = "number"
fields.finished = "date"
fields.format = { enum = ["paper", "ebook", "audio"] }
fields.author = { ref = "person" }
"#,
    );
    ok(d, &["commit", "-m", "book type"]);
    ok(
        d,
        &[
            "entity",
            "add",
            "person",
            "name=Frank",
            "--id",
            "person:frank",
        ],
    );
    ok(
        d,
        &["entity", "add", "person", "name=Ann", "--id", "person:ann"],
    );
    ok(
        d,
        &["entity", "add", "task", "title=Read", "--id", "task:read"],
    );
    let book = json(
        d,
        &[
            "entity",
            "add",
            "book",
            "title=1984",
            "pages=0328",
            "format=paper",
            "author=person:frank",
            "--id",
            "book:1984",
        ],
    );
    assert_eq!(
        book["attrs"]["title"], "1984",
        "a string field keeps text: {book}"
    );
    assert_eq!(book["attrs"]["pages"], 328.0);
    assert_eq!(
        book["links"],
        serde_json::json!([{"rel": "author", "target": "person:frank"}])
    );

    let before = op_count(d);
    for (args, says) in [
        (
            "entity add book title=Dune --id book:dune",
            "entity book:dune: a book needs author=...",
        ),
        (
            "entity add book title=Dune author=person:frank pages=many --id book:dune",
            "entity book:dune: field pages of a book must be a number, not \"many\"",
        ),
        (
            "entity add book title=Dune author=person:frank colour=red --id book:dune",
            "a book has no field colour",
        ),
        (
            "entity set book:1984 format=vinyl",
            "field format of a book must be one of paper, ebook, audio, not \"vinyl\"",
        ),
        (
            "entity set book:1984 finished=soon",
            "must be a date (2026-12-10)",
        ),
        (
            "entity set book:1984 author=task:read",
            "field author must link to a person; task:read is a task",
        ),
        (
            "entity set book:1984 author=person:zed",
            "person:zed, which does not exist",
        ),
        (
            "entity unlink book:1984 author person:frank",
            "a book needs author=...",
        ),
        (
            "entity add film title=Alien",
            "unknown entity type \"film\"",
        ),
    ] {
        let args: Vec<&str> = args.split(' ').collect();
        let err = fails(d, &args);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(op_count(d), before, "refused changes record nothing");

    // A reference set again replaces the link; queries follow it.
    ok(d, &["entity", "set", "book:1984", "author=person:ann"]);
    let shown = json(d, &["entity", "show", "book:1984"]);
    assert_eq!(
        shown["links"],
        serde_json::json!([{"rel": "author", "target": "person:ann"}])
    );
    let hits = json(d, &["query", r#"book where author.name = "Ann""#]);
    assert_eq!(hits["entities"][0]["id"], "book:1984");

    // An uncommitted schema is not in force; committed, it is.
    write(
        d,
        "lifeos.schema.toml",
        b"[types.film]\nfields.title = \"string\"\nrequired = [\"title\"]\n",
    );
    assert!(fails(d, &["entity", "add", "film", "title=Alien"]).contains("unknown entity type"));
    ok(d, &["commit", "-m", "films"]);
    ok(
        d,
        &["entity", "add", "film", "title=Alien", "--id", "film:alien"],
    );
    // A broken schema is reported with its line, and stops entity commands until fixed.
    write(
        d,
        "lifeos.schema.toml",
        b"[types.film]\nfields.title = \"text\"\n",
    );
    // It does not stop files from being recorded: the commit says what is wrong.
    let out = run(d, &["commit", "-m", "broken"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown field type \"text\""),
        "{out:?}"
    );
    let err = fails(d, &["entity", "add", "film", "title=Heat"]);
    assert!(
        err.contains("lifeos.schema.toml")
            && err.contains("type film, field title: unknown field type \"text\""),
        "{err}"
    );
}

/// Committed vCard and iCalendar files become contacts and events that cite their source;
/// editing a file and committing updates them, deleting it removes them, and a malformed
/// card is reported with its line while the rest are recorded. A `[[files]]` rule reads
/// CSV rows the same way.
#[test]
fn committed_vcards_events_and_csv_rows_become_entities_that_follow_the_file() {
    let repo = repo(false);
    let d = repo.path();
    let card = |uid: &str, name: &str, email: &str| {
        format!("BEGIN:VCARD\r\nVERSION:3.0\r\nUID:{uid}\r\nFN:{name}\r\nEMAIL:{email}\r\nEND:VCARD\r\n")
    };
    let vcf = format!(
        "{}{}BEGIN:VCARD\r\nVERSION:3.0\r\nEMAIL:no-name@example.org\r\nEND:VCARD\r\n",
        card("ann", "Ann Lee", "ann@example.org"),
        card("bo", "Bo Berg", "bo@example.org")
    );
    write(d, "people.vcf", vcf.as_bytes());
    write(
        d,
        "cal/work.ics",
        b"BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nUID:standup\nSUMMARY:Stand-up\nDTSTART:20261210T090000Z\nLOCATION:Room 4\nEND:VEVENT\nEND:VCALENDAR\n",
    );
    let stderr = TestEnv::at(d).ok_stderr(&["commit", "-m", "address book"]);
    assert!(
        stderr.contains("people.vcf:13: not recorded as an entity: no FN"),
        "{stderr}"
    );
    let commit = rev_id(d, "@");
    let contacts = json(d, &["query", "contact order by name"]);
    let names: Vec<&str> = contacts["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["attrs"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Ann Lee", "Bo Berg"]);
    let ann = &contacts["entities"][0];
    assert_eq!(ann["attrs"]["email"], "ann@example.org");
    assert_eq!(ann["attrs"]["source_path"], "people.vcf");
    assert_eq!(ann["attrs"]["source_line"], 1.0);
    assert_eq!(ann["attrs"]["source_commit"], commit.as_str());
    let ann_id = ann["id"].as_str().unwrap().to_string();
    let ev = json(d, &["query", r#"event where location = "Room 4""#]);
    assert_eq!(ev["entities"][0]["attrs"]["start"], "2026-12-10T09:00:00Z");
    assert_eq!(
        json(d, &["op", "log", "-n", "1"])["operations"][0]["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "entity.created")
            .count(),
        3
    );

    // Ann's email changes, Bo leaves: one entity changed, one removed; links made by hand
    // stay.
    ok(
        d,
        &[
            "entity",
            "add",
            "project",
            "name=Move",
            "--id",
            "project:move",
        ],
    );
    ok(d, &["entity", "link", &ann_id, "project", "project:move"]);
    write(
        d,
        "people.vcf",
        card("ann", "Ann Lee", "ann@lee.example").as_bytes(),
    );
    ok(d, &["commit", "-m", "ann moved"]);
    let shown = json(d, &["entity", "show", &ann_id]);
    assert_eq!(shown["attrs"]["email"], "ann@lee.example");
    assert_eq!(shown["attrs"]["source_commit"], rev_id(d, "@").as_str());
    assert_eq!(shown["links"][0]["target"], "project:move");
    let op = json(d, &["op", "show"]);
    let changes: Vec<&str> = op["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["change"].as_str().unwrap())
        .collect();
    assert_eq!(changes.len(), 2, "{op}");
    assert!(
        changes.contains(&"removed") && changes.contains(&"changed"),
        "{op}"
    );
    assert_eq!(json(d, &["query", "contact"])["count"], 1);
    // Deleting the file removes its entities; the history keeps them.
    std::fs::remove_file(d.join("people.vcf")).unwrap();
    ok(d, &["commit", "-m", "no address book"]);
    assert_eq!(json(d, &["query", "contact"])["count"], 0);
    assert!(
        json(d, &["entity", "history", &ann_id])["versions"]
            .as_array()
            .unwrap()
            .len()
            >= 3
    );

    // CSV rows under a rule, typed by the schema; a bad row is reported, the rest kept.
    write(
        d,
        "lifeos.schema.toml",
        b"[types.book]\nrequired = [\"title\"]\nfields.title = \"string\"\nfields.pages = \"number\"\nfields.isbn = \"string\"\n\n[[files]]\nglob = \"books/*.csv\"\ntype = \"book\"\nid = \"isbn\"\n",
    );
    write(
        d,
        "books/shelf.csv",
        b"isbn,title,pages\n0441013597,Dune,412\n0451524934,1984,many\n",
    );
    let stderr = TestEnv::at(d).ok_stderr(&["commit", "-m", "books"]);
    assert!(
        stderr.contains("books/shelf.csv:3: not recorded as an entity")
            && stderr.contains("must be a number"),
        "{stderr}"
    );
    let books = json(d, &["query", "book"]);
    assert_eq!(books["count"], 1);
    assert_eq!(
        books["entities"][0]["attrs"]["isbn"], "0441013597",
        "text stays text"
    );
    assert_eq!(books["entities"][0]["attrs"]["pages"], 412.0);
}

/// An iCalendar file's round of import, edit and delete with entities edited by hand in
/// between: an attribute set by hand that the file leaves alone stays, one the file
/// changes too takes the file's value and keeps both as a conflict (the commit warns),
/// links stay, an event removed by hand stays removed while its event is unchanged, and
/// deleting the file removes what is left.
#[test]
fn an_icalendar_round_keeps_hand_edits_and_reports_what_the_file_replaced() {
    let repo = repo(false);
    let d = repo.path();
    let event = |uid: &str, title: &str, start: &str, place: &str| {
        format!("BEGIN:VEVENT\nUID:{uid}\nSUMMARY:{title}\nDTSTART:{start}\nLOCATION:{place}\nEND:VEVENT\n")
    };
    let calendar = |events: &[String]| {
        format!(
            "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//lifeos test//EN\n{}END:VCALENDAR\n",
            events.concat()
        )
    };
    let standup = |place: &str| event("standup", "Stand-up", "20261210T090000Z", place);
    let review = |start: &str| event("review", "Review", start, "Room 2");
    let retro = event("retro", "Retro", "20261212T150000Z", "Room 3");
    write(
        d,
        "cal/work.ics",
        calendar(&[standup("Room 4"), review("20261211T100000Z"), retro.clone()]).as_bytes(),
    );
    ok(d, &["commit", "-m", "calendar"]);
    let id_of = |title: &str| {
        json(d, &["query", &format!("event where title = \"{title}\"")])["entities"][0]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (s, r, t) = (id_of("Stand-up"), id_of("Review"), id_of("Retro"));
    assert_eq!(
        json(d, &["entity", "show", &s])["attrs"]["source_line"],
        4.0
    );

    // By hand: a new attribute and a changed location on the stand-up, a link to a
    // project, a changed location on the review, and the retro removed.
    ok(
        d,
        &["entity", "add", "project", "name=Q4", "--id", "project:q4"],
    );
    ok(
        d,
        &["entity", "set", &s, "priority=high", "location=Room 9"],
    );
    ok(d, &["entity", "link", &s, "project", "project:q4"]);
    ok(d, &["entity", "set", &r, "location=Room 7"]);
    ok(d, &["entity", "rm", &t]);

    // The file moves the stand-up to Room 5 and the review an hour later.
    write(
        d,
        "cal/work.ics",
        calendar(&[standup("Room 5"), review("20261211T110000Z"), retro.clone()]).as_bytes(),
    );
    let said = TestEnv::at(d).ok_stderr(&["commit", "-m", "calendar moved"]);
    let warnings: Vec<&str> = said.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(
        warnings,
        [format!(
            "warning: cal/work.ics:4: {s}: location was set by hand to Room 9; the file's Room 5 \
             replaces it (both are kept as a conflict: lifeos entity show {s})"
        )],
        "{said}"
    );
    let shown = json(d, &["entity", "show", &s]);
    assert_eq!(shown["attrs"]["location"], "Room 5");
    assert_eq!(
        shown["attrs"]["priority"], "high",
        "kept: the file has none"
    );
    assert_eq!(shown["links"][0]["target"], "project:q4");
    assert_eq!(
        shown["conflicts"],
        serde_json::json!([{"attr": "location", "base": "Room 4", "ours": "Room 9", "theirs": "Room 5"}])
    );
    assert!(ok(d, &["entity", "show", &s])
        .contains("conflict on location: Room 9 and Room 5 (was Room 4); kept Room 5"));
    let shown = json(d, &["entity", "show", &r]);
    assert_eq!(shown["attrs"]["start"], "2026-12-11T11:00:00Z");
    assert_eq!(
        shown["attrs"]["location"], "Room 7",
        "the file left it alone"
    );
    assert_eq!(shown["conflicts"], serde_json::json!([]));
    assert!(fails(d, &["entity", "show", &t]).contains("no entity"));
    // The operation names what changed, by attribute.
    let op = json(d, &["op", "show"]);
    let changed: Vec<(&str, Vec<&str>)> = op["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let attrs = e["attrs"].as_array().unwrap();
            let names = attrs.iter().map(|a| a["name"].as_str().unwrap()).collect();
            (e["id"].as_str().unwrap(), names)
        })
        .collect();
    assert_eq!(changed.len(), 2, "{op}");
    assert!(
        changed.contains(&(r.as_str(), vec!["source_commit", "source_file", "start"])),
        "{op}"
    );

    // Setting the location again settles the conflict; a later edit of another event
    // leaves it alone and warns about nothing.
    ok(d, &["entity", "set", &s, "location=Room 5"]);
    assert_eq!(
        json(d, &["entity", "show", &s])["conflicts"],
        serde_json::json!([])
    );
    write(
        d,
        "cal/work.ics",
        calendar(&[standup("Room 5"), review("20261211T120000Z"), retro]).as_bytes(),
    );
    let said = TestEnv::at(d).ok_stderr(&["commit", "-m", "review later"]);
    assert!(!said.contains("warning"), "{said}");
    assert_eq!(
        json(d, &["entity", "show", &s])["attrs"]["priority"],
        "high"
    );

    // Deleting the file removes its events; their history stays, and `--at` reads them.
    std::fs::remove_file(d.join("cal/work.ics")).unwrap();
    ok(d, &["commit", "-m", "no calendar"]);
    assert_eq!(json(d, &["query", "event"])["count"], 0);
    let h = json(d, &["entity", "history", &s]);
    assert!(h["versions"][0]["entity"].is_null(), "{h}");
    let last = h["versions"][1]["operation"].as_str().unwrap();
    assert_eq!(
        json(d, &["entity", "show", &s, "--at", last])["attrs"]["priority"],
        "high"
    );
}

/// `entity unlink` removes one link with an `entity.unlinked` event; `op restore` puts
/// every entity back as an earlier operation had it, and `undo` takes the restore back.
#[test]
fn unlink_and_op_restore_cover_entities() {
    let repo = repo(false);
    let d = repo.path();
    ok(
        d,
        &[
            "entity",
            "add",
            "project",
            "name=Move",
            "--id",
            "project:move",
        ],
    );
    ok(
        d,
        &["entity", "add", "person", "name=Ann", "--id", "person:ann"],
    );
    ok(
        d,
        &["entity", "add", "task", "title=Pack", "--id", "task:pack"],
    );
    ok(
        d,
        &["entity", "link", "task:pack", "project", "project:move"],
    );
    ok(d, &["entity", "link", "task:pack", "owner", "person:ann"]);
    let linked_op = json(d, &["op", "log", "-n", "1"])["operations"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    ok(d, &["entity", "unlink", "task:pack", "owner", "person:ann"]);
    let shown = json(d, &["entity", "show", "task:pack"]);
    assert_eq!(
        shown["links"],
        serde_json::json!([{"rel": "project", "target": "project:move"}])
    );
    let op = json(d, &["op", "show"]);
    assert_eq!(op["events"][0]["type"], "entity.unlinked", "{op}");
    assert_eq!(op["entities"][0]["id"], "task:pack", "{op}");
    assert_eq!(
        op["entities"][0]["unlinked"],
        serde_json::json!([{"rel": "owner", "target": "person:ann"}])
    );
    assert_eq!(
        json(d, &["query", r#"task where owner.name = "Ann""#])["count"],
        0
    );
    let err = fails(d, &["entity", "unlink", "task:pack", "owner", "person:ann"]);
    assert!(err.contains("no link owner"), "{err}");

    // More changes, then the whole view back as it was after the second link.
    ok(d, &["entity", "set", "task:pack", "status=done"]);
    ok(d, &["entity", "rm", "person:ann"]);
    ok(
        d,
        &[
            "entity",
            "add",
            "place",
            "name=Attic",
            "--id",
            "place:attic",
        ],
    );
    ok(d, &["op", "restore", &linked_op[..12]]);
    let shown = json(d, &["entity", "show", "task:pack"]);
    assert!(shown["attrs"].get("status").is_none(), "{shown}");
    assert_eq!(shown["links"].as_array().unwrap().len(), 2, "{shown}");
    assert_eq!(
        json(d, &["entity", "show", "person:ann"])["attrs"]["name"],
        "Ann"
    );
    assert!(fails(d, &["entity", "show", "place:attic"]).contains("no entity"));
    assert_eq!(
        json(d, &["query", r#"task where owner.name = "Ann""#])["count"],
        1
    );
    // The restore is an operation like any other: its entity changes show, undo takes it
    // back.
    let restored = json(d, &["op", "show"]);
    assert_eq!(
        restored["entities"].as_array().unwrap().len(),
        3,
        "{restored}"
    );
    ok(d, &["undo"]);
    assert_eq!(
        json(d, &["entity", "show", "task:pack"])["attrs"]["status"],
        "done"
    );
    assert!(fails(d, &["entity", "show", "person:ann"]).contains("no entity"));
    assert_eq!(
        json(d, &["entity", "show", "place:attic"])["attrs"]["name"],
        "Attic"
    );
}

/// A JSON Lines file under a `[[files]]` rule, committed with `lifeos commit`: each line
/// an entity typed by the schema and citing its line; a bad line is reported with its
/// number and the rest recorded; an edited line changes one entity.
#[test]
fn a_committed_json_lines_file_becomes_entities_line_by_line() {
    let repo = repo(false);
    let d = repo.path();
    write(
        d,
        "lifeos.schema.toml",
        b"[types.visit]\nrequired = [\"place\"]\nfields.place = \"string\"\nfields.on = \"date\"\nfields.cost = \"number\"\nfields.paid = \"bool\"\nfields.ref = \"string\"\n\n[[files]]\nglob = \"log/*.jsonl\"\ntype = \"visit\"\nid = \"ref\"\n",
    );
    write(
        d,
        "log/visits.jsonl",
        concat!(
            "{\"ref\": \"v1\", \"place\": \"Dentist\", \"on\": \"2026-11-02\", \"cost\": 80, \"paid\": true}\n",
            "{\"ref\": \"v2\", \"place\": \"Library\", \"on\": \"2026-11-05\", \"cost\": \"0\"}\n",
            "{\"ref\": \"v3\", \"place\": \"Gym\", \"on\": \"last week\"}\n",
            "not json\n",
            "{\"ref\": \"v5\", \"place\": [\"a\"]}\n",
            "{\"ref\": \"v6\", \"place\": \"Bakery\", \"paid\": null}\n",
        )
        .as_bytes(),
    );
    let said = TestEnv::at(d).ok_stderr(&["commit", "-m", "visits"]);
    for (line, why) in [
        (
            3,
            "field on of a visit must be a date (2026-12-10), not \"last week\"",
        ),
        (4, "not JSON"),
        (5, "place: lists and objects are not attribute values"),
    ] {
        let prefix = format!("warning: log/visits.jsonl:{line}: not recorded as an entity: ");
        assert!(
            said.lines()
                .any(|l| l.starts_with(&prefix) && l.contains(why)),
            "{line}: {said}"
        );
    }
    assert_eq!(said.lines().filter(|l| l.starts_with("warning")).count(), 3);
    let visits = json(d, &["query", "visit order by ref"]);
    assert_eq!(visits["count"], 3, "{visits}");
    let first = &visits["entities"][0];
    assert_eq!(first["attrs"]["place"], "Dentist");
    assert_eq!(first["attrs"]["on"], "2026-11-02");
    assert_eq!(first["attrs"]["cost"], 80.0);
    assert_eq!(first["attrs"]["paid"], true);
    assert_eq!(first["attrs"]["source_path"], "log/visits.jsonl");
    assert_eq!(first["attrs"]["source_line"], 1.0);
    assert_eq!(
        visits["entities"][1]["attrs"]["cost"], 0.0,
        "text read as its type"
    );
    assert_eq!(visits["entities"][2]["attrs"]["source_line"], 6.0);
    assert!(visits["entities"][2]["attrs"].get("paid").is_none());
    assert_eq!(
        json(d, &["query", "visit where cost > 10"])["entities"][0]["attrs"]["ref"],
        "v1"
    );

    // One line edited: one entity changed, by attribute.
    let text = std::fs::read_to_string(d.join("log/visits.jsonl")).unwrap();
    write(
        d,
        "log/visits.jsonl",
        text.replace("\"cost\": 80", "\"cost\": 95").as_bytes(),
    );
    ok(d, &["commit", "-m", "dentist cost more"]);
    let op = json(d, &["op", "show"]);
    let entities = op["entities"].as_array().unwrap();
    assert_eq!(entities.len(), 1, "{op}");
    assert_eq!(entities[0]["change"], "changed");
    assert!(entities[0]["attrs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["name"] == "cost" && a["old"] == 80.0 && a["new"] == 95.0));
}

/// A commit that records more events than an operation holds in itself keeps them in
/// event pages: `op show` gives every one, `op log` the first 20 and how many more,
/// `fsck` and `gc` keep the pages, and `undo` takes the whole commit back.
#[test]
fn an_operation_with_thousands_of_events_keeps_them_in_pages() {
    let repo = repo(false);
    let d = repo.path();
    write(
        d,
        "lifeos.schema.toml",
        b"[[files]]\nglob = \"*.jsonl\"\ntype = \"task\"\nid = \"key\"\n",
    );
    let rows: String = (0..2500)
        .map(|i| format!("{{\"key\": \"k{i}\", \"title\": \"task {i}\"}}\n"))
        .collect();
    write(d, "tasks.jsonl", rows.as_bytes());
    ok(d, &["commit", "-m", "many tasks"]);
    let shown = json(d, &["op", "show"]);
    let events = shown["events"].as_array().unwrap();
    let created = events
        .iter()
        .filter(|e| e["type"] == "entity.created")
        .count();
    assert_eq!(created, 2500, "every event, from its pages");
    let total = events.len();
    let log = ok(d, &["op", "log", "-n", "1"]);
    assert_eq!(
        log.lines().filter(|l| l.starts_with("    - ")).count(),
        21,
        "{log}"
    );
    assert!(
        log.contains(&format!("- and {} more events (lifeos op show", total - 20)),
        "{log}"
    );
    assert_eq!(json(d, &["fsck"])["ok"], true);
    assert_eq!(json(d, &["gc"])["objects_removed"], 0);
    assert_eq!(
        json(d, &["op", "show"])["events"].as_array().unwrap().len(),
        total
    );
    assert_eq!(json(d, &["query", "task"])["count"], 2500);
    ok(d, &["undo"]);
    assert_eq!(json(d, &["query", "task"])["count"], 0);
    ok(d, &["redo"]);
    assert_eq!(
        json(d, &["query", "task where title = \"task 2499\""])["count"],
        1
    );
}
