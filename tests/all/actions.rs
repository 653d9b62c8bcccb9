//! Automations end to end: rules fired by `lifeos commit` and by git's hooks, approvals
//! pinned by hash with a TTL, a real HTTP server on 127.0.0.1, commands killed mid-way,
//! two processes racing to run one action, and bad rules.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{
    action_for, actions, fails, git, git_commit, json, ok, receipts, run, store_dir, wait_for,
    write, TestEnv,
};

/// An HTTP server on 127.0.0.1 that answers every request with `status` and keeps
/// what it was sent ("METHOD URL BODY").
fn server(status: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
    let server = tiny_http::Server::http("127.0.0.1:0").expect("a local port");
    let port = server.server_addr().to_ip().expect("an IP address").port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for mut req in server.incoming_requests() {
            let mut body = String::new();
            let _ = req.as_reader().read_to_string(&mut body);
            keep.lock()
                .unwrap()
                .push(format!("{} {} {body}", req.method(), req.url()));
            let _ =
                req.respond(tiny_http::Response::from_string("thanks").with_status_code(status));
        }
    });
    (port, got)
}

fn id(a: &serde_json::Value) -> String {
    a["id"].as_str().unwrap().to_string()
}

/// Writes `path` in the git work tree `dir` and commits everything with git.
fn git_commit_file(dir: &Path, path: &str, bytes: &[u8]) {
    write(dir, path, bytes);
    git(dir, &["add", "-A"]);
    git_commit(dir, &["-m", &format!("add {path}")]);
}

/// A temporary folder holding `work`, a git repository shared with lifeos, with lifeos's
/// hooks installed.
fn hooked_git_folder() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("work");
    std::fs::create_dir(&w).unwrap();
    git(&w, &["init", "-q", "-b", "main"]);
    ok(&w, &["init", "--git"]);
    ok(&w, &["git", "hooks", "install"]);
    (tmp, w)
}

#[test]
fn a_git_commit_proposes_an_http_action_that_posts_once_approved() {
    let (_tmp, w) = hooked_git_folder();
    let (port, posts) = server(200);
    let rules = format!(
        "[[rule]]\nname = \"invoices\"\non = \"commit\"\npaths = [\"invoices/*.pdf\"]\n[rule.http]\nurl = \"http://127.0.0.1:{port}/inbox\"\nbody = {{ file = \"{{path}}\", commit = \"{{commit}}\" }}\ntimeout = \"5s\"\nretries = 0\n"
    );
    git_commit_file(&w, "lifeos.rules.toml", rules.as_bytes());
    // Rules that came in through git fire only once trusted.
    git_commit_file(&w, "invoices/early.pdf", b"%PDF-1.4 early");
    assert!(actions(&w).is_empty());
    let trusted = ok(&w, &["rules", "trust"]);
    assert!(trusted.contains("Trusted lifeos.rules.toml"), "{trusted}");

    git_commit_file(&w, "invoices/x.pdf", b"%PDF-1.4 x");
    let a = action_for(&w, "invoices/x.pdf");
    assert_eq!(a["state"], "pending", "{a}");
    assert_eq!(a["kind"], "http");
    assert_eq!(a["payload"]["body"]["file"], "invoices/x.pdf");
    let canonical = serde_json::to_vec(&a["payload"]).unwrap();
    assert_eq!(
        a["payload_hash"],
        blake3::hash(&canonical).to_hex().as_str(),
        "the hash pins the payload's canonical JSON"
    );
    // Nothing runs before approval.
    assert!(ok(&w, &["actions", "run"]).contains("No approved actions"));
    assert!(posts.lock().unwrap().is_empty());

    ok(&w, &["approve", &id(&a)[..6]]);
    assert_eq!(action_for(&w, "invoices/x.pdf")["state"], "fresh");
    let ran = json(&w, &["actions", "run"]);
    assert_eq!(ran["ran"][0]["state"], "executed", "{ran}");
    {
        let got = posts.lock().unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("POST /inbox {"), "{got:?}");
        assert!(got[0].contains("\"file\":\"invoices/x.pdf\""), "{got:?}");
    }
    let r = receipts(&w);
    let done: Vec<_> = r.iter().filter(|r| r["action"] == a["id"]).collect();
    assert_eq!(done.len(), 1, "{r:?}");
    assert_eq!(done[0]["outcome"], "executed");
    assert_eq!(done[0]["status"], 200);
    assert_eq!(done[0]["payload_hash"], a["payload_hash"]);
    let shown = json(
        &w,
        &["receipt", "show", &done[0]["id"].as_str().unwrap()[..10]],
    );
    assert_eq!(shown["receipts"][0]["output_text"], "thanks");
    // The approval's TTL reads as `--ttl` takes it (it printed "for 86400000 ms").
    let text = ok(
        &w,
        &["receipt", "show", &done[0]["id"].as_str().unwrap()[..10]],
    );
    assert!(text.contains(" for 1d\n"), "{text}");

    // The same hook firing again proposes nothing new: a noop receipt, no second POST.
    ok(&w, &["git", "hook", "post-commit"]);
    let noops: Vec<_> = receipts(&w)
        .into_iter()
        .filter(|r| r["outcome"] == "noop")
        .collect();
    assert_eq!(noops.len(), 1, "{noops:?}");
    assert!(noops[0]["reason"]
        .as_str()
        .unwrap()
        .contains(a["id"].as_str().unwrap()));
    ok(&w, &["actions", "run"]);
    assert_eq!(posts.lock().unwrap().len(), 1);

    // A payload edited after approval is refused: payload_hash_mismatch.
    git_commit_file(&w, "invoices/y.pdf", b"%PDF-1.4 y");
    let y = id(&action_for(&w, "invoices/y.pdf"));
    let seen = action_for(&w, "invoices/y.pdf")["payload_hash"]
        .as_str()
        .unwrap()
        .to_string();
    let approved = ok(&w, &["approve", &y, "--hash", &seen[..12]]);
    assert!(
        approved.contains(&seen),
        "the pinned hash is shown: {approved}"
    );
    let evil = format!(
        r#"{{"kind":"http","url":"http://127.0.0.1:{port}/elsewhere","body":{{}},"timeout_ms":5000,"retries":0}}"#
    );
    ok(&w, &["actions", "edit", &y, "--payload", &evil]);
    assert_eq!(action_for(&w, "invoices/y.pdf")["state"], "tampered");
    // Approving what the person read before the edit does not approve the edit.
    let e = fails(&w, &["approve", &y, "--hash", &seen[..12]]);
    assert!(e.contains("changed since you read it"), "{e}");
    assert_eq!(action_for(&w, "invoices/y.pdf")["state"], "tampered");
    let ran = json(&w, &["actions", "run", &y]);
    assert_eq!(ran["ran"][0]["state"], "blocked", "{ran}");
    assert_eq!(ran["ran"][0]["reason"], "payload_hash_mismatch");
    assert_eq!(posts.lock().unwrap().len(), 1, "nothing was sent");

    // An approval older than its TTL is refused: approval_expired.
    git_commit_file(&w, "invoices/z.pdf", b"%PDF-1.4 z");
    let z = id(&action_for(&w, "invoices/z.pdf"));
    ok(&w, &["approve", &z, "--ttl", "1s"]);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(action_for(&w, "invoices/z.pdf")["state"], "expired");
    let out = run(&w, &["actions", "run", &z]);
    assert!(!out.status.success());
    let r = receipts(&w);
    let blocked: Vec<_> = r.iter().filter(|r| r["outcome"] == "blocked").collect();
    assert_eq!(blocked.len(), 2, "{r:?}");
    assert_eq!(blocked[1]["reason"], "approval_expired");
    assert_eq!(posts.lock().unwrap().len(), 1);
    // Approved again, it runs.
    ok(&w, &["approve", &z, "--run"]);
    assert_eq!(posts.lock().unwrap().len(), 2);

    // Every step is an operation: the op log is the audit trail.
    let log = ok(&w, &["op", "log"]);
    for what in [
        "propose actions of rule invoices",
        "approve action",
        "start action",
        "executed action",
        "block action",
    ] {
        assert!(log.contains(what), "{what} missing from:\n{log}");
    }
    let fsck = ok(&w, &["fsck"]);
    assert!(!fsck.contains("missing"), "{fsck}");
}

#[test]
fn http_servers_that_refuse_or_hang_give_failed_receipts() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    // A port nobody listens on, and a server that accepts and never answers.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let hanging = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hanging_port = hanging.local_addr().unwrap().port();
    let (err_port, posts) = server(503);
    let rules = format!(
        "[[rule]]\nname = \"refused\"\non = \"commit\"\npaths = [\"a/*\"]\n[rule.http]\nurl = \"http://127.0.0.1:{closed_port}/\"\nretries = 0\n\n[[rule]]\nname = \"hangs\"\non = \"commit\"\npaths = [\"b/*\"]\n[rule.http]\nurl = \"http://127.0.0.1:{hanging_port}/\"\ntimeout = \"1s\"\nretries = 2\n\n[[rule]]\nname = \"busy\"\non = \"commit\"\npaths = [\"c/*\"]\n[rule.http]\nurl = \"http://127.0.0.1:{err_port}/\"\ntimeout = \"2s\"\nretries = 1\n"
    );
    write(d, "lifeos.rules.toml", rules.as_bytes());
    ok(d, &["commit", "-m", "rules"]);
    ok(d, &["rules", "trust"]);
    for p in ["a/1", "b/1", "c/1"] {
        write(d, p, b"x");
    }
    ok(d, &["commit", "-m", "three"]);
    for a in actions(d) {
        ok(d, &["approve", &id(&a)]);
    }
    let start = Instant::now();
    let out = run(d, &["actions", "run"]);
    assert!(!out.status.success(), "failures make a failed exit");
    assert!(start.elapsed() < Duration::from_secs(20));
    let _keep = hanging;
    let by_path = |p: &str| {
        let a = action_for(d, p);
        receipts(d)
            .into_iter()
            .find(|r| r["action"] == a["id"])
            .unwrap()
    };
    let refused = by_path("a/1");
    assert_eq!(refused["outcome"], "failed");
    assert!(
        refused["reason"].as_str().unwrap().contains("POST"),
        "{refused}"
    );
    let hung = by_path("b/1");
    assert_eq!(hung["outcome"], "failed", "{hung}");
    // A request that may have arrived is never sent again, whatever `retries` says.
    assert!(
        hung["reason"].as_str().unwrap().contains("not sent again"),
        "{hung}"
    );
    let busy = by_path("c/1");
    assert_eq!(busy["outcome"], "failed");
    assert_eq!(busy["status"], 503);
    assert_eq!(posts.lock().unwrap().len(), 2, "one retry after a 503");
}

/// A new repository in `d` whose trusted rule runs `line` with `sh -c` for each new file
/// under `in/`, with one such file committed and its action approved; returns its id.
fn approved_shell_action(d: &Path, line: &str) -> String {
    let a = pending_shell_action(d, line);
    ok(d, &["approve", &a]);
    a
}

/// A repository whose rule proposed one shell action (`line`), not yet approved.
fn pending_shell_action(d: &Path, line: &str) -> String {
    ok(d, &["init"]);
    let rules = format!(
        "[[rule]]\nname = \"shell\"\non = \"commit\"\npaths = [\"in/*\"]\n[rule.run]\nargv = [{line:?}]\nshell = true\ntimeout = \"60s\"\n"
    );
    write(d, "lifeos.rules.toml", rules.as_bytes());
    ok(d, &["commit", "-m", "rules"]);
    ok(d, &["rules", "trust"]);
    write(d, "in/a", b"a");
    ok(d, &["commit", "-m", "a"]);
    id(&actions(d)[0])
}

/// `lifeos -q commit` still printed "rules: proposed action …": `-q` says only what was
/// asked for. The action is proposed all the same, and without `-q` it is said.
#[test]
fn quiet_commands_keep_rule_notices_to_themselves() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    pending_shell_action(d, "true");
    write(d, "in/b", b"b");
    let quiet = run(d, &["-q", "commit", "-m", "b"]);
    assert!(quiet.status.success());
    let said = String::from_utf8_lossy(&quiet.stderr);
    assert!(!said.contains("rules:"), "{said}");
    assert_eq!(actions(d).len(), 2, "the rule fired all the same");
    write(d, "in/c", b"c");
    let loud = run(d, &["commit", "-m", "c"]);
    assert!(
        String::from_utf8_lossy(&loud.stderr).contains("rules: proposed action"),
        "{loud:?}"
    );
}

#[test]
fn a_run_killed_mid_way_is_uncertain_and_never_run_again_blindly() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let outside = tempfile::tempdir().unwrap();
    let marks = outside.path().join("marks");
    let a = approved_shell_action(
        d,
        &format!("echo started >> {} && sleep 30", marks.display()),
    );
    let mut child = TestEnv::at(d).command(["actions", "run"]).spawn().unwrap();
    wait_for("the command to start", || marks.exists());
    assert_eq!(action_for(d, "in/a")["state"], "running");
    // kill -9: no chance to record anything.
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(action_for(d, "in/a")["state"], "uncertain");
    let out = ok(d, &["actions", "run"]);
    assert!(out.contains("No approved actions"), "{out}");
    let again = run(d, &["actions", "run", &a]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("uncertain"));
    assert_eq!(
        std::fs::read_to_string(&marks).unwrap(),
        "started\n",
        "not run again"
    );
    let r = receipts(d);
    assert_eq!(r.last().unwrap()["outcome"], "uncertain", "{r:?}");
    // The person says what happened.
    ok(d, &["actions", "resolve", &a, "--ran"]);
    assert_eq!(action_for(d, "in/a")["state"], "executed");
    // The uncertain receipt stays, and the answer is a receipt of its own.
    let r = receipts(d);
    let outcomes: Vec<&str> = r.iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["uncertain", "executed"], "{r:?}");
    assert!(
        r[1]["reason"].as_str().unwrap().contains("said it ran"),
        "{r:?}"
    );
    let e = fails(d, &["actions", "resolve", &a, "--did-not-run"]);
    assert!(e.contains("not uncertain"), "{e}");
}

#[test]
fn two_processes_running_one_action_run_it_once() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let outside = tempfile::tempdir().unwrap();
    let marks = outside.path().join("marks");
    let a = approved_shell_action(d, &format!("echo ran >> {} && sleep 1", marks.display()));
    let children: Vec<_> = (0..2)
        .map(|_| {
            TestEnv::at(d)
                .command(["actions", "run", &a])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        c.wait().unwrap();
    }
    assert_eq!(std::fs::read_to_string(&marks).unwrap(), "ran\n");
    let r = receipts(d);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["outcome"], "executed");
    // Receipts are a ledger: undoing the commit that proposed the action keeps them.
    ok(d, &["undo"]);
    assert!(!d.join("in/a").exists());
    assert_eq!(receipts(d).len(), 1);
}

#[test]
fn two_processes_approving_and_running_one_action_at_once_run_it_once() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let outside = tempfile::tempdir().unwrap();
    let marks = outside.path().join("marks");
    let a = pending_shell_action(d, &format!("echo ran >> {} && sleep 1", marks.display()));
    let children: Vec<_> = (0..2)
        .map(|_| {
            TestEnv::at(d)
                .command(["approve", &a, "--run"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<std::process::Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    // One process runs it; the other is refused and says why (it lost the approval or
    // the run to the first).
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let (won, lost): (Vec<_>, Vec<_>) = outs.iter().partition(|o| o.status.success());
    assert_eq!((won.len(), lost.len()), (1, 1), "{outs:?}");
    assert!(text(won[0]).contains("executed: exit status 0"), "{outs:?}");
    let refusal = text(lost[0]);
    assert!(
        refusal.contains("there is nothing to approve") || refusal.contains("nothing to do: it is"),
        "{refusal}"
    );
    assert_eq!(
        std::fs::read_to_string(&marks).unwrap(),
        "ran\n",
        "{outs:?}"
    );
    let r = receipts(d);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["outcome"], "executed");
}

#[test]
fn rules_are_checked_trusted_again_after_a_change_and_commands_fail_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    // Malformed rules: line and column.
    write(
        d,
        "lifeos.rules.toml",
        b"[[rule]]\nname = \"x\"\non = \"commit\"\npaths = [\"*\"\n",
    );
    let e = fails(d, &["rules", "check"]);
    // toml finds the unclosed array at the end of the input.
    assert!(e.contains("lifeos.rules.toml:5:1: invalid array"), "{e}");
    write(
        d,
        "lifeos.rules.toml",
        b"[[rule]]\nname = \"x\"\non = \"tuesday\"\n[rule.tag]\nname = \"t\"\n",
    );
    let e = fails(d, &["rules", "check"]);
    assert!(
        e.contains("unknown event \"tuesday\"") && e.contains("commit, hook"),
        "{e}"
    );

    let rules = "[[rule]]\nname = \"missing\"\non = \"commit\"\npaths = [\"m/*\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"/nonexistent/tool\"]\n\n[[rule]]\nname = \"hangs\"\non = \"commit\"\npaths = [\"h/*\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"sleep\", \"30\"]\ntimeout = \"500ms\"\n";
    write(d, "lifeos.rules.toml", rules.as_bytes());
    assert!(ok(d, &["rules", "check"]).contains("2 rules, all valid"));
    ok(d, &["commit", "-m", "rules"]);
    // Untrusted rules do not fire.
    write(d, "m/1", b"1");
    let out = TestEnv::at(d).run(&["commit", "-m", "m1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not trusted"));
    assert!(actions(d).is_empty());
    ok(d, &["rules", "trust"]);
    write(d, "m/2", b"2");
    write(d, "h/1", b"1");
    let start = Instant::now();
    ok(d, &["commit", "-m", "m2 h1"]);
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "the timeout stopped sleep"
    );
    let r = receipts(d);
    let missing = r.iter().find(|r| r["rule"] == "missing").unwrap();
    assert_eq!(missing["outcome"], "failed");
    assert!(
        missing["reason"].as_str().unwrap().contains("cannot start"),
        "{missing}"
    );
    let hung = r.iter().find(|r| r["rule"] == "hangs").unwrap();
    assert_eq!(hung["outcome"], "failed");
    assert!(
        hung["reason"].as_str().unwrap().contains("timed out"),
        "{hung}"
    );

    // A change to the rules needs trust again.
    write(d, "lifeos.rules.toml", format!("{rules}\n").as_bytes());
    ok(d, &["commit", "-m", "rules changed"]);
    write(d, "m/3", b"3");
    ok(d, &["commit", "-m", "m3"]);
    assert_eq!(
        actions(d)
            .iter()
            .filter(|a| a["event"]["path"] == "m/3")
            .count(),
        0
    );
    // Unknown ids are clear errors.
    let e = fails(d, &["approve", "ffffffff"]);
    assert!(e.contains("no action"), "{e}");
}

#[test]
fn rollback_undoes_an_internal_action_and_proposes_the_compensation_of_an_external_one() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    write(d, "notes/plan.md", b"v1\n");
    ok(d, &["commit", "-m", "plan v1"]);
    let v1_op = json(d, &["op", "log"])["operations"][0]["id"]
        .as_str()
        .unwrap()[..12]
        .to_string();
    let (port, posts) = server(200);
    let rules = format!(
        "[[rule]]\nname = \"reset plan\"\non = \"commit\"\npaths = [\"reset\"]\napproval = \"auto\"\n[rule.restore]\npath = \"notes/plan.md\"\nat = \"{v1_op}\"\n\n[[rule]]\nname = \"announce\"\non = \"commit\"\npaths = [\"news/*\"]\n[rule.http]\nurl = \"http://127.0.0.1:{port}/post\"\nbody = {{ file = \"{{path}}\" }}\n[rule.compensate.http]\nurl = \"http://127.0.0.1:{port}/retract\"\nbody = {{ file = \"{{path}}\" }}\n"
    );
    write(d, "lifeos.rules.toml", rules.as_bytes());
    ok(d, &["commit", "-m", "rules"]);
    ok(d, &["rules", "trust"]);
    write(d, "notes/plan.md", b"v2\n");
    ok(d, &["commit", "-m", "plan v2"]);

    // The rule restores the plan as it was (an internal action, approved by the rule).
    write(d, "reset", b"");
    ok(d, &["commit", "-m", "reset"]);
    assert_eq!(std::fs::read(d.join("notes/plan.md")).unwrap(), b"v1\n");
    let r = receipts(d);
    let restored = r.iter().find(|r| r["rule"] == "reset plan").unwrap();
    assert_eq!(restored["outcome"], "executed", "{restored}");

    // Rollback is checkout: a new operation brings back what was there before.
    let rid = restored["id"].as_str().unwrap()[..12].to_string();
    let out = ok(d, &["rollback", &rid]);
    assert!(out.contains("executed"), "{out}");
    assert_eq!(std::fs::read(d.join("notes/plan.md")).unwrap(), b"v2\n");
    let comp = actions(d)
        .into_iter()
        .find(|a| a["payload"]["kind"] == "restore" && a["id"] != restored["action"])
        .unwrap();
    assert_eq!(comp["state"], "executed");
    assert_eq!(comp["compensates"], restored["action"], "{comp}");
    let e = fails(d, &["rollback", &rid]);
    assert!(e.contains("rolled back already"), "{e}");

    // An external action: its rule's compensate action is proposed, and waits.
    write(d, "news/a.txt", b"hello");
    ok(d, &["commit", "-m", "news"]);
    let a = id(&action_for(d, "news/a.txt"));
    ok(d, &["approve", &a, "--run"]);
    let sent = receipts(d)
        .into_iter()
        .find(|r| r["action"] == a.as_str())
        .unwrap();
    let out = ok(d, &["rollback", sent["id"].as_str().unwrap()]);
    assert!(out.contains("Proposed action"), "{out}");
    assert_eq!(
        posts.lock().unwrap().len(),
        1,
        "nothing sent before approval"
    );
    let pending: Vec<_> = actions(d)
        .into_iter()
        .filter(|x| x["state"] == "pending")
        .collect();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(
        pending[0]["payload"]["url"],
        format!("http://127.0.0.1:{port}/retract")
    );
    ok(d, &["approve", &id(&pending[0]), "--run"]);
    let got = posts.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    assert!(
        got[1].starts_with("POST /retract {\"file\":\"news/a.txt\"}"),
        "{got:?}"
    );
    // A failed or blocked action has nothing to roll back.
    let e = fails(d, &["rollback", "ffff"]);
    assert!(e.contains("no receipt"), "{e}");
}

#[test]
fn branches_tags_entities_and_extracted_text_fire_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    let outside = tempfile::tempdir().unwrap();
    let marks = outside.path().join("marks");
    let m = marks.display();
    let rules = format!(
        "[[rule]]\nname = \"releases\"\non = \"branch\"\nnames = [\"release/*\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"echo branch {{name}} >> {m}\"]\nshell = true\n\n\
         [[rule]]\nname = \"tags\"\non = \"tag\"\napproval = \"auto\"\n[rule.run]\nargv = [\"echo tag {{name}} >> {m}\"]\nshell = true\n\n\
         [[rule]]\nname = \"task status\"\non = \"entity\"\ntypes = [\"task\"]\nattributes = [\"status\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"echo {{type}} {{change}} {{attributes}} >> {m}\"]\nshell = true\n\n\
         [[rule]]\nname = \"budget talk\"\non = \"ingest\"\npaths = [\"notes/*.md\"]\nphrase = \"budget meeting\"\napproval = \"auto\"\n[rule.run]\nargv = [\"echo said {{path}}: {{match}} >> {m}\"]\nshell = true\n\n\
         [[rule]]\nname = \"amounts\"\non = \"ingest\"\npaths = [\"notes/*.md\"]\nkinds = [\"markdown\"]\nmatch = \"[0-9]+ EUR\"\napproval = \"auto\"\n[rule.run]\nargv = [\"echo amount {{path}}: {{match}} >> {m}\"]\nshell = true\n"
    );
    write(d, "lifeos.rules.toml", rules.as_bytes());
    ok(d, &["commit", "-m", "rules"]);
    ok(d, &["rules", "trust"]);
    let lines = || {
        std::fs::read_to_string(&marks)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect::<Vec<_>>()
    };

    ok(d, &["branch", "create", "release/1"]);
    ok(d, &["branch", "create", "scratch"]);
    ok(d, &["tag", "create", "v1"]);
    assert_eq!(lines(), ["branch release/1", "tag v1"]);

    let task = json(
        d,
        &["entity", "add", "task", "title=pay rent", "status=open"],
    );
    let tid = task["id"].as_str().unwrap().to_string();
    ok(d, &["entity", "set", &tid, "status=done"]);
    ok(d, &["entity", "set", &tid, "title=pay the rent"]);
    assert_eq!(
        lines()[2..],
        ["task created status,title", "task changed status"]
    );
    // The same change made again is a new event, not a duplicate.
    ok(d, &["entity", "set", &tid, "title=pay rent"]);
    ok(d, &["entity", "set", &tid, "status=open"]);
    ok(d, &["entity", "set", &tid, "status=done"]);
    assert_eq!(lines()[4..], ["task changed status", "task changed status"]);
    assert_eq!(
        lines().iter().filter(|l| l.starts_with("task")).count(),
        4,
        "{:?}",
        lines()
    );
    let lines_before = lines().len();

    write(
        d,
        "notes/a.md",
        b"# Monday\n\nThe Budget Meeting moved to Friday.\n",
    );
    write(d, "notes/b.md", b"# Tuesday\n\nNothing about money.\n");
    write(d, "notes/c.md", b"# Wednesday\n\nRent is 950 EUR now.\n");
    ok(d, &["commit", "-m", "notes"]);
    let mut said = lines()[lines_before..].to_vec();
    said.sort();
    assert_eq!(
        said,
        [
            "amount notes/c.md: 950 EUR",
            "said notes/a.md: Budget Meeting"
        ]
    );
    // Every one of them left a receipt.
    assert_eq!(receipts(d).len(), 8);
}

#[test]
fn watch_commits_an_edit_fires_rules_and_stops_cleanly_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    let outside = tempfile::tempdir().unwrap();
    let marks = outside.path().join("marks");
    let ticks = outside.path().join("ticks");
    let rules = format!(
        "[[rule]]\nname = \"notes\"\non = \"commit\"\npaths = [\"notes/*\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"echo committed {{path}} >> {}\"]\nshell = true\n\n\
         [[rule]]\nname = \"tick\"\non = \"time\"\nevery = \"1s\"\napproval = \"auto\"\n[rule.run]\nargv = [\"echo tick {{time}} >> {}\"]\nshell = true\n",
        marks.display(),
        ticks.display()
    );
    write(d, "lifeos.rules.toml", rules.as_bytes());
    ok(d, &["commit", "-m", "rules"]);
    let log_path = outside.path().join("watch.log");
    let mut watcher = TestEnv::at(d)
        .command(["watch", "--quiet-period", "300ms", "--no-ingest"])
        .stdout(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    wait_for("the watcher to start", || log().contains("watching"));
    assert!(log().contains("0 time rules"), "{}", log());
    // Rules trusted while it runs are scheduled at once.
    ok(d, &["rules", "trust"]);
    wait_for("the watcher to read the trusted rules", || {
        log().contains("rules trusted again: 1 time rules")
    });
    write(d, "notes/a.md", b"remember the milk\n");
    wait_for("the edit to be committed and the rule to run", || {
        std::fs::read_to_string(&marks).is_ok_and(|m| m.contains("committed notes/a.md"))
    });
    wait_for("a time rule slot", || ticks.exists());
    // SIGTERM: it stops between steps and says so.
    // SAFETY: signals the watcher this test started.
    unsafe { libc::kill(watcher.id() as libc::pid_t, libc::SIGTERM) };
    let status = watcher.wait().unwrap();
    assert!(status.success(), "{status}\n{}", log());
    let out = log();
    assert!(out.contains("committed "), "{out}");
    assert!(out.trim_end().ends_with("stopped"), "{out}");
    let history = ok(d, &["log"]);
    assert!(
        history.contains("changes seen by lifeos watch"),
        "{history}"
    );
    assert_eq!(
        std::fs::read_dir(d.join(".lifeos/op_heads"))
            .unwrap()
            .count(),
        1,
        "no half-published operation"
    );
    assert!(!ok(d, &["fsck"]).contains("missing"));
}

/// The paths `lifeos status` lists as changed, with their letter.
fn changed(d: &Path) -> Vec<String> {
    let mut out: Vec<String> = ok(d, &["status"])
        .lines()
        .filter(|l| l.len() > 2 && l.as_bytes()[1] == b' ' && "AMD".contains(&l[..1]))
        .map(str::to_owned)
        .collect();
    out.sort();
    out
}

/// Starts `lifeos watch --index-only` in `d`, logging to `log`, and waits until it answers.
fn start_monitor(d: &Path, log: &Path) -> std::process::Child {
    let child = TestEnv::at(d)
        .command(["watch", "--index-only"])
        .stdout(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    wait_for("the monitor to start", || {
        std::fs::read_to_string(log).is_ok_and(|l| l.contains("watching"))
    });
    child
}

#[test]
fn a_monitor_killed_in_the_middle_of_changes_leaves_status_and_commit_right() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    for i in 0..300 {
        write(
            d,
            &format!("photos/{}/{i}.jpg", i % 10),
            format!("photo {i}").as_bytes(),
        );
    }
    ok(d, &["commit", "-m", "photos"]);
    let outside = tempfile::tempdir().unwrap();
    let log = outside.path().join("monitor.log");
    let mut monitor = start_monitor(d, &log);
    // A second one is refused while it runs.
    let second = fails(d, &["watch", "--index-only"]);
    assert!(second.contains("already watches this folder"), "{second}");
    assert_eq!(changed(d), Vec::<String>::new());
    assert!(d.join(".lifeos/wc_monitor").exists(), "the token is saved");
    write(d, "photos/3/3.jpg", b"edited");
    write(d, "albums/new/1.jpg", b"new");
    assert_eq!(changed(d), ["A albums/new/1.jpg", "M photos/3/3.jpg"]);
    // Files change while the monitor is killed.
    let writer = {
        let d = d.to_path_buf();
        std::thread::spawn(move || {
            for i in 0..300 {
                write(
                    &d,
                    &format!("photos/{}/{i}.jpg", i % 10),
                    format!("changed {i}").as_bytes(),
                );
                if i % 50 == 0 {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(10));
    // SAFETY: kills the monitor this test started.
    unsafe { libc::kill(monitor.id() as libc::pid_t, libc::SIGKILL) };
    monitor.wait().unwrap();
    writer.join().unwrap();
    let mut expected: Vec<String> = (0..300)
        .map(|i| format!("M photos/{}/{i}.jpg", i % 10))
        .collect();
    expected.push("A albums/new/1.jpg".into());
    expected.sort();
    assert_eq!(changed(d), expected, "every change, the monitor dead");
    // A new monitor starts over the dead one's socket and lock.
    let mut monitor = start_monitor(d, &log);
    assert_eq!(changed(d), expected);
    ok(d, &["commit", "-m", "everything"]);
    assert_eq!(changed(d), Vec::<String>::new());
    std::fs::remove_file(d.join("photos/0/0.jpg")).unwrap();
    std::fs::rename(d.join("photos/1"), d.join("photos/one")).unwrap();
    write(d, "photos/one/31.jpg", b"edited after the move");
    let mut expected: Vec<String> = (0..30)
        .flat_map(|k| {
            let i = k * 10 + 1;
            let new = format!("A photos/one/{i}.jpg");
            [format!("D photos/1/{i}.jpg"), new]
        })
        .collect();
    expected.push("D photos/0/0.jpg".into());
    expected.sort();
    assert_eq!(changed(d), expected);
    ok(d, &["commit", "-m", "moved"]);
    // The truth, from every file's content: nothing differs from what was committed.
    std::fs::remove_file(d.join(".lifeos/wc_state")).unwrap();
    std::fs::remove_file(d.join(".lifeos/wc_monitor")).unwrap();
    assert_eq!(changed(d), Vec::<String>::new());
    assert_eq!(
        ok(d, &["cat", "photos/one/31.jpg"]),
        "edited after the move"
    );
    // SAFETY: signals the monitor this test started.
    unsafe { libc::kill(monitor.id() as libc::pid_t, libc::SIGTERM) };
    assert!(monitor.wait().unwrap().success());
    assert!(
        !d.join(".lifeos/monitor.sock").exists(),
        "the socket goes with it"
    );
}

#[test]
fn watch_ingests_what_it_commits_fires_ingest_rules_and_stops_on_sigint() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    let outside = tempfile::tempdir().unwrap();
    let marks = outside.path().join("marks");
    let rules = format!(
        "[[rule]]\nname = \"budget talk\"\non = \"ingest\"\npaths = [\"notes/*.md\"]\nphrase = \"budget meeting\"\napproval = \"auto\"\n[rule.run]\nargv = [\"echo said {{path}}: {{match}} >> {}\"]\nshell = true\n",
        marks.display()
    );
    write(d, "lifeos.rules.toml", rules.as_bytes());
    ok(d, &["commit", "-m", "rules"]);
    ok(d, &["rules", "trust"]);
    // A commit no longer indexes what it read, so only the watcher's own ingest can make
    // the note searchable and fire the ingest rule.
    let cfg = d.join(".lifeos/config");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[ingest]\nafter_commit = false\n");
    std::fs::write(&cfg, text).unwrap();
    let log_path = outside.path().join("watch.log");
    let mut watcher = TestEnv::at(d)
        .command(["watch", "--quiet-period", "300ms"])
        .stdout(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    wait_for("the watcher to start", || log().contains("watching"));
    write(
        d,
        "notes/q3.md",
        b"# Q3\nThe budget meeting moved to Friday.\n",
    );
    wait_for(
        "the note to be committed, indexed and its rule to run",
        || std::fs::read_to_string(&marks).is_ok_and(|m| m.contains("said notes/q3.md")),
    );
    // What the watcher committed is searchable.
    let hits = json(d, &["search", "budget meeting"]);
    assert_eq!(hits["hits"][0]["path"], "notes/q3.md", "{hits}");
    // SIGINT (Ctrl-C) stops it as SIGTERM does.
    // SAFETY: signals the watcher this test started.
    unsafe { libc::kill(watcher.id() as libc::pid_t, libc::SIGINT) };
    let status = watcher.wait().unwrap();
    assert!(status.success(), "{status}\n{}", log());
    assert!(log().trim_end().ends_with("stopped"), "{}", log());
    assert_eq!(
        std::fs::read_dir(d.join(".lifeos/op_heads"))
            .unwrap()
            .count(),
        1,
        "no half-published operation"
    );
    assert_eq!(
        std::fs::read_to_string(&marks).unwrap(),
        "said notes/q3.md: budget meeting\n",
        "once"
    );
}

#[test]
fn an_entity_action_adds_a_task_and_rollback_removes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    let rules = "[[rule]]\nname = \"inbox\"\non = \"commit\"\npaths = [\"inbox/*\"]\napproval = \"auto\"\n[rule.entity]\nchange = \"add\"\ntype = \"task\"\nattrs = { title = \"File {path}\", status = \"open\" }\n\n[[rule]]\nname = \"index\"\non = \"commit\"\npaths = [\"inbox/*\"]\napproval = \"auto\"\n[rule.ingest]\n";
    write(d, "lifeos.rules.toml", rules.as_bytes());
    ok(d, &["commit", "-m", "rules"]);
    ok(d, &["rules", "trust"]);
    write(d, "inbox/letter.pdf", b"%PDF-1.4");
    ok(d, &["commit", "-m", "letter"]);
    let q = json(d, &["query", "task where status = \"open\""]);
    let found = q["entities"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{q}");
    assert_eq!(found[0]["attrs"]["title"], "File inbox/letter.pdf", "{q}");
    let r = receipts(d);
    let indexed = r.iter().find(|r| r["rule"] == "index").unwrap();
    assert_eq!(indexed["outcome"], "executed", "{indexed}");
    assert!(
        indexed["reason"]
            .as_str()
            .unwrap()
            .contains("files extracted"),
        "{indexed}"
    );
    let e = fails(d, &["rollback", indexed["id"].as_str().unwrap()]);
    assert!(e.contains("nothing to undo"), "{e}");
    let receipt = r.iter().find(|r| r["rule"] == "inbox").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let tid = found[0]["id"].as_str().unwrap().to_string();

    // An entity set action, and its rollback.
    let more = format!("{rules}\n[[rule]]\nname = \"close\"\non = \"commit\"\npaths = [\"done/*\"]\napproval = \"auto\"\n[rule.entity]\nchange = \"set\"\nid = \"{tid}\"\nattrs = {{ status = \"done\", note = \"closed by {{path}}\" }}\n");
    write(d, "lifeos.rules.toml", more.as_bytes());
    ok(d, &["commit", "-m", "close rule"]);
    ok(d, &["rules", "trust"]);
    write(d, "done/letter", b"");
    ok(d, &["commit", "-m", "done"]);
    let shown = json(d, &["entity", "show", &tid]);
    assert_eq!(shown["attrs"]["status"], "done", "{shown}");
    assert_eq!(shown["attrs"]["note"], "closed by done/letter", "{shown}");
    let closed = receipts(d)
        .into_iter()
        .find(|r| r["rule"] == "close")
        .unwrap();
    assert_eq!(closed["outcome"], "executed", "{closed}");
    ok(d, &["rollback", closed["id"].as_str().unwrap()]);
    let shown = json(d, &["entity", "show", &tid]);
    assert_eq!(shown["attrs"]["status"], "open", "{shown}");
    assert!(shown["attrs"]["note"].is_null(), "{shown}");

    ok(d, &["rollback", &receipt]);
    let q = json(d, &["query", "task"]);
    assert!(q["entities"].as_array().unwrap().is_empty(), "{q}");
}

#[test]
fn rules_in_a_cloned_repository_do_not_run_until_trusted() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    git(&src, &["init", "-q", "-b", "main"]);
    let outside = tempfile::tempdir().unwrap();
    let marks = outside.path().join("marks");
    let rules = format!(
        "[[rule]]\nname = \"anything\"\non = \"commit\"\npaths = [\"**\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"echo ran >> {}\"]\nshell = true\n",
        marks.display()
    );
    git_commit_file(&src, "lifeos.rules.toml", rules.as_bytes());
    ok(tmp.path(), &["git", "clone", src.to_str().unwrap(), "copy"]);
    let copy = tmp.path().join("copy");
    write(&copy, "a.txt", b"a");
    let out = TestEnv::at(&copy).run(&["commit", "-m", "a"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not trusted"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(actions(&copy).is_empty());
    assert!(!marks.exists(), "a rule from elsewhere ran untrusted");
    ok(&copy, &["rules", "trust"]);
    write(&copy, "b.txt", b"b");
    ok(&copy, &["commit", "-m", "b"]);
    assert_eq!(std::fs::read_to_string(&marks).unwrap(), "ran\n");
}

/// Regression: a `run` action fired by a git hook ran again each time the hook fired
/// again, because the event it got on stdin named the operation it was seen at. It also
/// checks what a command gets: the event as JSON on stdin and in LIFEOS_EVENT, each field
/// as LIFEOS_<FIELD>, its working folder, and its output capped and redacted with the
/// repository's own patterns.
#[test]
fn a_hook_fired_twice_runs_a_command_once_with_the_event_on_stdin() {
    let (tmp, w) = hooked_git_folder();
    let config = store_dir(&w).join("config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[ingest]\nredact = [\"INTERNAL-[0-9]{4}\"]\n");
    std::fs::write(&config, text).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path().display();
    let line = format!(
        "cat > {o}/stdin-$LIFEOS_SHORT.json; printf %s \\\"$LIFEOS_EVENT\\\" > {o}/env-$LIFEOS_SHORT.json; echo \\\"$LIFEOS_EVENT_NAME $LIFEOS_HOOK $(basename $(pwd))\\\" >> {o}/marks; echo password=hunter2 INTERNAL-1234; head -c 5000 /dev/zero | tr '\\\\0' x"
    );
    let pushes = outside.path().join("pushes");
    let ref_updates = outside.path().join("ref-updates");
    let rules = format!(
        "[[rule]]\nname = \"after commit\"\non = \"hook\"\nhook = \"post-commit\"\napproval = \"auto\"\n[rule.run]\nargv = [\"{line}\"]\nshell = true\ncwd = \"tools\"\noutput_cap = 1000\n\n\
         [[rule]]\nname = \"git branches\"\non = \"branch\"\nnames = [\"feature/*\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"echo branch {{name}} >> {p}\"]\nshell = true\n\n\
         [[rule]]\nname = \"before push\"\non = \"hook\"\nhook = \"pre-push\"\napproval = \"auto\"\n[rule.run]\nargv = [\"echo pushing to {{args}} >> {p}\"]\nshell = true\n\n\
         [[rule]]\nname = \"ref updates\"\non = \"hook\"\nhook = \"reference-transaction\"\napproval = \"auto\"\n[rule.run]\nargv = [\"echo {{input}} >> {r}\"]\nshell = true\n",
        p = pushes.display(),
        r = ref_updates.display()
    );
    std::fs::create_dir(w.join("tools")).unwrap();
    write(&w, "tools/keep", b"");
    git_commit_file(&w, "lifeos.rules.toml", rules.as_bytes());
    ok(&w, &["rules", "trust"]);
    git_commit_file(&w, "a.txt", b"a");
    let marks = outside.path().join("marks");
    assert_eq!(
        std::fs::read_to_string(&marks).unwrap(),
        "hook post-commit tools\n"
    );
    // The hook fires again (git runs it twice, a person runs it by hand): nothing runs.
    ok(&w, &["git", "hook", "post-commit"]);
    ok(&w, &["git", "hook", "post-commit"]);
    ok(&w, &["actions", "run"]);
    assert_eq!(
        std::fs::read_to_string(&marks).unwrap(),
        "hook post-commit tools\n",
        "ran once"
    );
    // git's own commits fire reference-transaction too; these are the post-commit ones.
    let r: Vec<serde_json::Value> = receipts(&w)
        .into_iter()
        .filter(|r| r["rule"] == "after commit")
        .collect();
    let outcomes: Vec<&str> = r.iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["executed", "noop", "noop"], "{r:?}");
    // A duplicate's receipt names its rule and event like any other.
    assert_eq!(r[1]["rule"], "after commit", "{r:?}");
    assert_eq!(r[1]["event"]["hook"], "post-commit", "{r:?}");

    let stdin_file = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("stdin-"))
        .unwrap();
    let stdin: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&stdin_file).unwrap()).unwrap();
    assert_eq!(stdin["event"], "hook", "{stdin}");
    assert_eq!(stdin["hook"], "post-commit", "{stdin}");
    assert_eq!(stdin["branch"], "main", "{stdin}");
    let env_file = stdin_file.to_string_lossy().replace("stdin-", "env-");
    let env: serde_json::Value = serde_json::from_slice(&std::fs::read(env_file).unwrap()).unwrap();
    assert_eq!(env, stdin, "LIFEOS_EVENT is the event as JSON");

    let shown = json(
        &w,
        &["receipt", "show", &r[0]["id"].as_str().unwrap()[..12]],
    );
    let text = shown["receipts"][0]["output_text"].as_str().unwrap();
    assert!(text.contains("password=[REDACTED]"), "{text}");
    assert!(
        !text.contains("INTERNAL-1234"),
        "the repository's pattern: {text}"
    );
    assert!(text.contains("[output cut at 1000 bytes]"), "{text}");
    assert!(text.len() < 1200, "{}", text.len());

    // A branch git made fires the branch rules; pre-push tells where it pushes.
    git(&w, &["branch", "feature/x"]);
    let bare = tmp.path().join("bare.git");
    git(
        tmp.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(&w, &["remote", "add", "origin", bare.to_str().unwrap()]);
    git(&w, &["push", "-q", "origin", "main"]);
    assert_eq!(
        std::fs::read_to_string(&pushes).unwrap(),
        format!("branch feature/x\npushing to origin {}\n", bare.display())
    );
    // Two ref updates at the same commit are two events: the hook's input tells them apart.
    git(&w, &["branch", "feature/y"]);
    let updates = std::fs::read_to_string(&ref_updates).unwrap();
    assert!(
        updates.contains("refs/heads/feature/x") && updates.contains("refs/heads/feature/y"),
        "{updates}"
    );
}

/// Regression: a tag or branch action whose event names no commit deleted the ref
/// instead of setting it. Built-in tag and branch actions set refs, and rollback puts
/// them back.
#[test]
fn tag_and_branch_actions_set_refs_roll_back_and_never_delete_for_an_event_without_a_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    let outside = tempfile::tempdir().unwrap();
    let marks = outside.path().join("marks");
    let rules = format!("[[rule]]\nname = \"mark\"\non = \"commit\"\npaths = [\"releases/*\"]\napproval = \"auto\"\n[rule.tag]\nname = \"released-{{short}}\"\n\n\
         [[rule]]\nname = \"follow\"\non = \"commit\"\npaths = [\"releases/*\"]\napproval = \"auto\"\n[rule.branch]\nname = \"latest-release\"\n\n\
         [[rule]]\nname = \"tagged\"\non = \"tag\"\nnames = [\"released-*\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"echo tagged {{name}} >> {}\"]\nshell = true\n\n\
         [[rule]]\nname = \"no commit here\"\non = \"entity\"\ntypes = [\"task\"]\napproval = \"auto\"\n[rule.tag]\nname = \"keep\"\n", marks.display());
    write(d, "lifeos.rules.toml", rules.as_bytes());
    ok(d, &["commit", "-m", "rules"]);
    ok(d, &["rules", "trust"]);
    ok(d, &["tag", "create", "keep"]);
    let tags = || json(d, &["tag", "list"]);
    let keep_before = tags().to_string();
    assert!(keep_before.contains("keep"), "{keep_before}");

    write(d, "releases/1.txt", b"one");
    ok(d, &["commit", "-m", "release one"]);
    let head = json(d, &["log", "-n", "1"]);
    let commit = head["commits"][0]["commit"].as_str().unwrap().to_string();
    let tag = format!("released-{}", &commit[..12]);
    let t = tags().to_string();
    assert!(t.contains(&tag), "{t}");
    let b = json(d, &["branch", "list"]).to_string();
    assert!(b.contains("latest-release"), "{b}");
    // What an action did fires no rule (rules never set each other off); what a person
    // does, does.
    assert!(!marks.exists(), "a rule fired on a tag another rule made");
    ok(d, &["tag", "create", "released-by-hand"]);
    assert_eq!(
        std::fs::read_to_string(&marks).unwrap(),
        "tagged released-by-hand\n"
    );

    // An entity event names no commit: the tag rule is skipped, and `keep` survives.
    let out = TestEnv::at(d).run(&["entity", "add", "task", "title=x"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("names no commit"), "{err}");
    assert!(tags().to_string().contains("\"keep\""), "{}", tags());

    // Rollback of the tag action deletes the tag it made (it was not there before).
    let r = receipts(d);
    let marked = r.iter().find(|r| r["rule"] == "mark").unwrap();
    assert_eq!(marked["outcome"], "executed", "{marked}");
    assert!(marked["effect_operation"].is_string(), "{marked}");
    ok(d, &["rollback", marked["id"].as_str().unwrap()]);
    assert!(!tags().to_string().contains(&tag), "{}", tags());
    let after = receipts(d);
    let marked = after.iter().find(|r| r["rule"] == "mark").unwrap();
    assert_eq!(
        marked["compensated_by"].as_array().unwrap().len(),
        1,
        "{marked}"
    );
}

/// Rules a merge brings in are rules from elsewhere: they wait for trust like an edit.
#[test]
fn rules_changed_by_a_merge_wait_for_trust() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["init"]);
    let outside = tempfile::tempdir().unwrap();
    let marks = outside.path().join("marks");
    let rule = |word: &str| {
        format!(
            "[[rule]]\nname = \"note\"\non = \"commit\"\npaths = [\"a/*\"]\napproval = \"auto\"\n[rule.run]\nargv = [\"echo {word} >> {}\"]\nshell = true\n",
            marks.display()
        )
    };
    write(d, "lifeos.rules.toml", rule("mine").as_bytes());
    ok(d, &["commit", "-m", "rules"]);
    ok(d, &["rules", "trust"]);
    ok(d, &["branch", "create", "other"]);
    ok(d, &["checkout", "other"]);
    write(d, "lifeos.rules.toml", rule("theirs").as_bytes());
    ok(d, &["commit", "-m", "their rules"]);
    ok(d, &["checkout", "main"]);
    write(d, "a/1", b"1");
    ok(d, &["commit", "-m", "a1"]);
    assert_eq!(std::fs::read_to_string(&marks).unwrap(), "mine\n");
    ok(d, &["merge", "other"]);
    write(d, "a/2", b"2");
    let out = TestEnv::at(d).run(&["commit", "-m", "a2"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not trusted"), "{err}");
    assert_eq!(std::fs::read_to_string(&marks).unwrap(), "mine\n");
    ok(d, &["rules", "trust"]);
    write(d, "a/3", b"3");
    ok(d, &["commit", "-m", "a3"]);
    assert_eq!(std::fs::read_to_string(&marks).unwrap(), "mine\ntheirs\n");
}

/// The state of the action for `path` as `lifeos actions --json` gives it at `now`.
fn state_at(d: &Path, now: &str, path: &str) -> String {
    let v = TestEnv::at(d).now(now).ok_json(&["actions"]);
    v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["event"]["path"] == path)
        .unwrap_or_else(|| panic!("no action for {path}: {v}"))["state"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn an_approval_nears_its_expiry_and_a_rejected_action_never_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let outside = tempfile::tempdir().unwrap();
    let marks = outside.path().join("marks");
    let a = approved_shell_action(d, &format!("echo ran >> {}", marks.display()));
    // Approved again for two hours: fresh, then nearing expiry in its last quarter, then
    // expired.
    ok(d, &["approve", &a, "--ttl", "2h"]);
    let expires: jiff::Timestamp = action_for(d, "in/a")["approval"]["expires"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let at = |minutes: i64| (expires + jiff::SignedDuration::from_mins(minutes)).to_string();
    assert_eq!(state_at(d, &at(-60), "in/a"), "fresh");
    assert_eq!(state_at(d, &at(-20), "in/a"), "nearing_expiry");
    assert_eq!(state_at(d, &at(1), "in/a"), "expired");

    // Rejected: never run, whether all approved actions run or it is named.
    ok(d, &["reject", &a]);
    assert_eq!(action_for(d, "in/a")["state"], "rejected");
    let out = ok(d, &["actions", "run"]);
    assert!(out.contains("No approved actions"), "{out}");
    let named = run(d, &["actions", "run", &a]);
    assert!(
        String::from_utf8_lossy(&named.stdout).contains("rejected"),
        "{}",
        String::from_utf8_lossy(&named.stdout)
    );
    assert!(!marks.exists(), "a rejected action ran");
    let again = fails(d, &["approve", &a]);
    assert!(
        again.contains("is rejected: there is nothing to approve"),
        "{again}"
    );
    assert!(fails(d, &["reject", &a]).contains("too late to reject"));
    assert!(receipts(d).is_empty(), "{:?}", receipts(d));
    // The rejection is an operation of its own.
    let ops = json(d, &["op", "log", "-n", "5"]);
    assert!(
        ops["operations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["description"]
                .as_str()
                .unwrap()
                .starts_with("reject action")),
        "{ops}"
    );
}

#[test]
fn an_uncertain_action_said_not_to_have_run_runs_again_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let outside = tempfile::tempdir().unwrap();
    let (marks, go) = (outside.path().join("marks"), outside.path().join("go"));
    let a = approved_shell_action(
        d,
        &format!(
            "echo started >> {} && until [ -e {} ]; do sleep 0.1; done",
            marks.display(),
            go.display()
        ),
    );
    let mut child = TestEnv::at(d).command(["actions", "run"]).spawn().unwrap();
    wait_for("the command to start", || marks.exists());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(action_for(d, "in/a")["state"], "uncertain");
    // The person says it did not run: it waits again, still approved.
    ok(d, &["actions", "resolve", &a, "--did-not-run"]);
    assert_eq!(action_for(d, "in/a")["state"], "fresh");
    let r = receipts(d);
    let outcomes: Vec<&str> = r.iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["uncertain", "failed"], "{r:?}");
    assert!(
        r[1]["reason"]
            .as_str()
            .unwrap()
            .contains("said it did not run"),
        "{r:?}"
    );
    std::fs::write(&go, b"").unwrap();
    let out = ok(d, &["actions", "run"]);
    assert!(out.contains("executed"), "{out}");
    assert_eq!(
        std::fs::read_to_string(&marks).unwrap(),
        "started\nstarted\n"
    );
    assert_eq!(action_for(d, "in/a")["state"], "executed");
}

#[test]
fn post_checkout_post_merge_and_post_rewrite_hooks_fire_their_rules() {
    let (_tmp, w) = hooked_git_folder();
    let outside = tempfile::tempdir().unwrap();
    let marks = outside.path().join("marks");
    let rule = |hook: &str| {
        format!(
            "[[rule]]\nname = \"{hook}\"\non = \"hook\"\nhook = \"{hook}\"\napproval = \"auto\"\n[rule.run]\nargv = [\"echo {hook} {{args}} >> {m}\"]\nshell = true\n\n",
            m = marks.display()
        )
    };
    let rules: String = ["post-checkout", "post-merge", "post-rewrite"]
        .map(rule)
        .concat();
    git_commit_file(&w, "lifeos.rules.toml", rules.as_bytes());
    ok(&w, &["rules", "trust"]);
    git(&w, &["checkout", "-q", "-b", "side"]);
    git_commit_file(&w, "side.txt", b"side");
    git(&w, &["checkout", "-q", "main"]);
    git(&w, &["merge", "-q", "--no-edit", "side"]);
    git_commit(&w, &["--amend", "-m", "amended"]);
    let lines: Vec<String> = std::fs::read_to_string(&marks)
        .unwrap()
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            format!("{} {}", w[0], w[w.len() - 1])
        })
        .collect();
    // Checking out side and back (a branch checkout, flag 1), the merge (a fast-forward,
    // not a squash), the amend.
    assert_eq!(
        lines,
        [
            "post-checkout 1",
            "post-checkout 1",
            "post-merge 0",
            "post-rewrite amend"
        ],
        "{:?}",
        std::fs::read_to_string(&marks)
    );
}
