//! The examples at the end of every command's `--help` (and of its man page): one table,
//! checked by a test that every command has some and that each parses as that command.

use clap::CommandFactory;

use crate::Cli;

/// Examples by command path (`""` is `lifeos` itself): each a command line and what it
/// does.
const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "",
        &[
            ("lifeos init ~/library", "version a folder"),
            ("lifeos commit -m \"first\"", "record it"),
            (
                "lifeos search budget",
                "find a word in files, recordings and photos",
            ),
        ],
    ),
    (
        "init",
        &[
            ("lifeos init ~/library", "a repository for ~/library"),
            (
                "lifeos init --git",
                "here, sharing the folder with its git repository",
            ),
        ],
    ),
    (
        "commit",
        &[
            ("lifeos commit -m \"trip photos\"", "record every change"),
            (
                "lifeos commit notes/",
                "only what changed under notes/; the message from $EDITOR",
            ),
            (
                "lifeos commit --amend -m \"better message\"",
                "fold the changes into @",
            ),
        ],
    ),
    (
        "ls",
        &[
            (
                "lifeos ls photos/",
                "files of the newest commit under photos/",
            ),
            ("lifeos ls --at yesterday", "as they were yesterday"),
        ],
    ),
    (
        "cat",
        &[
            (
                "lifeos cat notes/plan.md -r @-",
                "a file as it was one commit ago",
            ),
            (
                "lifeos cat notes/plan.md --at \"2026-11-01 14:00\"",
                "as it was at a time",
            ),
        ],
    ),
    (
        "restore",
        &[
            (
                "lifeos restore notes/plan.md -r @-",
                "a file back into the folder, as a new commit",
            ),
            (
                "lifeos restore --to ../old -r v1",
                "a whole tree, elsewhere",
            ),
        ],
    ),
    (
        "log",
        &[
            ("lifeos log -n 10", "the ten newest commits"),
            (
                "lifeos log photos/cat.jpg",
                "commits that changed this file",
            ),
            ("lifeos log --all --graph", "every branch, merges drawn"),
        ],
    ),
    (
        "diff",
        &[
            ("lifeos diff", "the folder against @"),
            (
                "lifeos diff --from v1 --to @ --stat",
                "two revisions, one line per file",
            ),
            (
                "lifeos diff photos/a.jpg --visual changes.png",
                "an image's changed pixels",
            ),
        ],
    ),
    (
        "show",
        &[("lifeos show @-", "one commit and the files it changed")],
    ),
    (
        "status",
        &[("lifeos status", "what changed since the last commit")],
    ),
    ("branch", &[("lifeos branch list", "every branch")]),
    (
        "branch create",
        &[
            ("lifeos branch create trip", "a branch at @"),
            ("lifeos branch create fix -r @-", "at another commit"),
        ],
    ),
    (
        "branch set",
        &[("lifeos branch set trip -r @", "move a branch")],
    ),
    (
        "branch delete",
        &[(
            "lifeos branch delete trip",
            "delete a branch (its commits stay)",
        )],
    ),
    (
        "branch rename",
        &[("lifeos branch rename trip holiday", "rename a branch")],
    ),
    (
        "branch list",
        &[("lifeos branch list --json", "every branch, as JSON")],
    ),
    ("tag", &[("lifeos tag list", "every tag")]),
    (
        "tag create",
        &[
            ("lifeos tag create v1", "a tag at @"),
            ("lifeos tag create v1 -r @- --force", "move it"),
        ],
    ),
    ("tag delete", &[("lifeos tag delete v1", "delete a tag")]),
    (
        "tag list",
        &[("lifeos tag list", "every tag and its commit")],
    ),
    (
        "checkout",
        &[
            ("lifeos checkout trip", "switch to a branch"),
            ("lifeos checkout -r v1", "to a commit"),
        ],
    ),
    (
        "describe",
        &[
            (
                "lifeos describe -m \"better message\"",
                "reword @ (its change id stays)",
            ),
            (
                "lifeos describe -r @- -m \"older\"",
                "reword another commit",
            ),
        ],
    ),
    (
        "merge",
        &[(
            "lifeos merge trip",
            "three-way merge; conflicts are recorded",
        )],
    ),
    (
        "entity",
        &[(
            "lifeos entity add person name=\"Ann Lee\"",
            "record a person",
        )],
    ),
    (
        "entity add",
        &[
            (
                "lifeos entity add task title=\"Pay rent\" due=2026-12-10",
                "a task",
            ),
            (
                "lifeos entity add person --id person:ann name=Ann",
                "with an id of your choice",
            ),
        ],
    ),
    (
        "entity set",
        &[(
            "lifeos entity set task:pay-rent status=done",
            "change attributes",
        )],
    ),
    (
        "entity unset",
        &[(
            "lifeos entity unset task:pay-rent due",
            "remove an attribute",
        )],
    ),
    (
        "entity rm",
        &[(
            "lifeos entity rm task:pay-rent",
            "remove an entity (its history stays)",
        )],
    ),
    (
        "entity link",
        &[(
            "lifeos entity link task:pay-rent project project:move",
            "link two entities",
        )],
    ),
    (
        "entity unlink",
        &[(
            "lifeos entity unlink task:pay-rent project project:move",
            "remove a link",
        )],
    ),
    (
        "entity show",
        &[
            (
                "lifeos entity show person:ann --mentions",
                "an entity and where it is mentioned",
            ),
            (
                "lifeos entity show task:pay-rent --at \"last monday\"",
                "as it was",
            ),
        ],
    ),
    (
        "entity restore",
        &[(
            "lifeos entity restore task:pay-rent --at yesterday",
            "bring an old version back",
        )],
    ),
    (
        "entity history",
        &[(
            "lifeos entity history task:pay-rent",
            "every version and what changed",
        )],
    ),
    (
        "query",
        &[
            (
                "lifeos query 'task where status = \"open\" and due < 2026-12-10 order by due'",
                "open tasks due soon",
            ),
            (
                "lifeos query 'task where project.name = \"Move\"' --at 2026-11-01",
                "through a link, as of a date",
            ),
        ],
    ),
    (
        "op",
        &[("lifeos op log -n 5", "the five newest operations")],
    ),
    (
        "op log",
        &[(
            "lifeos op log -n 20",
            "the newest operations and their events",
        )],
    ),
    (
        "op show",
        &[
            ("lifeos op show", "the current operation"),
            ("lifeos op show 3f9c2a1b --json", "another, as JSON"),
        ],
    ),
    (
        "op restore",
        &[(
            "lifeos op restore 3f9c2a1b",
            "the whole repository as after that operation",
        )],
    ),
    (
        "actions",
        &[
            ("lifeos actions", "pending and recent actions"),
            ("lifeos actions --all --json", "every action, as JSON"),
        ],
    ),
    (
        "actions run",
        &[("lifeos actions run", "run what is approved")],
    ),
    (
        "actions show",
        &[(
            "lifeos actions show 71a6685408b1ec38",
            "an action's payload, hash and state",
        )],
    ),
    (
        "actions edit",
        &[(
            "lifeos actions edit 71a6685408b1ec38 --payload '{\"argv\": [\"true\"]}'",
            "change a pending payload (approval starts over)",
        )],
    ),
    (
        "actions resolve",
        &[(
            "lifeos actions resolve 71a6685408b1ec38 --ran",
            "say whether an uncertain action ran",
        )],
    ),
    (
        "approve",
        &[
            (
                "lifeos approve 71a6685408b1ec38 --ttl 2h",
                "approve for two hours",
            ),
            (
                "lifeos approve 71a6685408b1ec38 --run",
                "approve and run now",
            ),
        ],
    ),
    (
        "reject",
        &[("lifeos reject 71a6685408b1ec38", "refuse an action")],
    ),
    (
        "rollback",
        &[(
            "lifeos rollback 29666d5f6565",
            "propose undoing what an action did",
        )],
    ),
    (
        "watch",
        &[
            (
                "lifeos watch",
                "run time rules and follow the folder until stopped",
            ),
            ("lifeos watch --no-ingest", "without extracting text"),
            (
                "lifeos watch --index-only",
                "only track changes, so status and commit look at those paths alone",
            ),
        ],
    ),
    (
        "receipts",
        &[("lifeos receipts --json", "every receipt, as JSON")],
    ),
    (
        "receipt",
        &[("lifeos receipt show 29666d5f6565", "one receipt")],
    ),
    (
        "receipt show",
        &[(
            "lifeos receipt show 29666d5f6565 --json",
            "one receipt, as JSON",
        )],
    ),
    (
        "rules",
        &[("lifeos rules check", "check lifeos.rules.toml")],
    ),
    (
        "rules check",
        &[(
            "lifeos rules check lifeos.rules.toml",
            "parse errors with line and column",
        )],
    ),
    (
        "rules trust",
        &[("lifeos rules trust", "trust the rules as they are now")],
    ),
    (
        "git",
        &[(
            "lifeos git import ~/src/project",
            "import a git repository's history",
        )],
    ),
    (
        "git import",
        &[(
            "lifeos git import ~/src/project",
            "every branch and tag, with git's ids kept",
        )],
    ),
    (
        "git init",
        &[(
            "lifeos git init --colocate",
            "share this folder with a git repository",
        )],
    ),
    (
        "git clone",
        &[(
            "lifeos git clone https://example.org/repo.git work",
            "clone with git, then import",
        )],
    ),
    (
        "git fetch",
        &[("lifeos git fetch origin", "fetch with git, then import")],
    ),
    (
        "git push",
        &[("lifeos git push origin main", "export, then push with git")],
    ),
    (
        "git hooks",
        &[("lifeos git hooks status", "which hooks lifeos installed")],
    ),
    (
        "git hooks install",
        &[("lifeos git hooks install", "git's hooks fire lifeos rules")],
    ),
    (
        "git hooks uninstall",
        &[("lifeos git hooks uninstall", "remove lifeos's hooks")],
    ),
    (
        "git hooks status",
        &[("lifeos git hooks status", "which hooks are installed")],
    ),
    (
        "git hook",
        &[(
            "lifeos git hook post-commit",
            "what the installed hook runs",
        )],
    ),
    (
        "git filter",
        &[(
            "lifeos git filter install",
            "store large files through lifeos",
        )],
    ),
    (
        "git filter install",
        &[("lifeos git filter install", "set up git's lifeos filter")],
    ),
    (
        "git filter-process",
        &[(
            "lifeos git filter-process",
            "git starts it; not run by hand",
        )],
    ),
    (
        "git export",
        &[(
            "lifeos git export ../mirror.git",
            "write the history as a git repository",
        )],
    ),
    (
        "undo",
        &[(
            "lifeos undo",
            "revert the last operation; again to step further back",
        )],
    ),
    ("redo", &[("lifeos redo", "revert the last undo")]),
    (
        "reindex",
        &[("lifeos reindex", "rebuild the catalog from the objects")],
    ),
    (
        "ingest",
        &[
            ("lifeos ingest", "extract text from what is not indexed yet"),
            ("lifeos ingest --retry-failed", "try the failures again"),
            (
                "lifeos ingest --model whisper-base meetings/",
                "transcribe the recordings under meetings/ again with another model",
            ),
        ],
    ),
    (
        "extract",
        &[(
            "lifeos extract show meetings/standup.mp4",
            "what was said, with each passage's time range",
        )],
    ),
    (
        "extract show",
        &[
            (
                "lifeos extract show meetings/standup.mp4",
                "the transcript, each segment with its time range",
            ),
            (
                "lifeos extract show talk.mp4 --format srt",
                "SubRip subtitles on stdout, for a player: redirect them to talk.srt",
            ),
            (
                "lifeos extract show report.pdf --at 2026-03-01 --json",
                "a document's pages as they were on 1 March",
            ),
        ],
    ),
    (
        "extract list",
        &[
            (
                "lifeos extract list",
                "what is extracted, pending or failed",
            ),
            ("lifeos extract list photos/", "only under photos/"),
        ],
    ),
    (
        "search",
        &[
            ("lifeos search budget", "everywhere, newest versions"),
            (
                "lifeos search \"budget meeting\" --type video --path 'meetings/**'",
                "narrowed",
            ),
            (
                "lifeos search budget --at 2026-03-01",
                "as the library was on 1 March",
            ),
            (
                "lifeos search budget --all-history",
                "in every version ever committed",
            ),
        ],
    ),
    ("model", &[("lifeos model list", "installed speech models")]),
    (
        "model import",
        &[(
            "lifeos model import ggml-base.bin --default",
            "install a whisper model and use it",
        )],
    ),
    (
        "model list",
        &[("lifeos model list", "installed models and the default")],
    ),
    (
        "model default",
        &[("lifeos model default whisper-base", "use another model")],
    ),
    (
        "stats",
        &[(
            "lifeos stats",
            "logical and stored bytes, dedup ratio, chunks, packs",
        )],
    ),
    (
        "fsck",
        &[
            ("lifeos fsck", "verify every pack, chunk and object"),
            (
                "lifeos fsck --remote backup --read-data",
                "verify a remote, decrypting everything",
            ),
        ],
    ),
    ("remote", &[("lifeos remote list", "every remote")]),
    (
        "remote add",
        &[
            (
                "lifeos remote add backup s3://bucket/library",
                "an S3 remote, encrypted",
            ),
            ("lifeos remote add disk /mnt/usb/library", "a folder"),
        ],
    ),
    (
        "remote list",
        &[("lifeos remote list", "every remote and its URL")],
    ),
    (
        "remote remove",
        &[(
            "lifeos remote remove disk",
            "forget a remote (its data stays)",
        )],
    ),
    (
        "remote key",
        &[
            ("lifeos remote key backup", "add a passphrase"),
            ("lifeos remote key backup --replace", "change it"),
        ],
    ),
    (
        "push",
        &[("lifeos push backup", "upload what the remote lacks")],
    ),
    (
        "fetch",
        &[
            (
                "lifeos fetch backup",
                "download what is missing and merge its history",
            ),
            ("lifeos fetch --all-data", "complete a lazy clone"),
        ],
    ),
    (
        "pull",
        &[("lifeos pull backup", "fetch, then move the folder")],
    ),
    (
        "clone",
        &[(
            "lifeos clone s3://bucket/library ~/library --lazy",
            "history now, file data on demand",
        )],
    ),
    (
        "config",
        &[(
            "lifeos config list",
            "every setting and where it comes from",
        )],
    ),
    (
        "config get",
        &[("lifeos config get user.name", "one setting")],
    ),
    (
        "config set",
        &[
            (
                "lifeos config set user.name \"Ann Lee\" --user",
                "for every repository",
            ),
            ("lifeos config set ui.pager \"less -R\"", "for this one"),
        ],
    ),
    (
        "config unset",
        &[("lifeos config unset ui.pager", "back to the default")],
    ),
    (
        "config list",
        &[("lifeos config list --user", "the user's settings")],
    ),
    (
        "completions",
        &[(
            "lifeos completions bash",
            "the bash script on stdout, for bash-completion's folder",
        )],
    ),
    (
        "man",
        &[(
            "lifeos man --dir ~/.local/share/man/man1",
            "a page per command",
        )],
    ),
    (
        "gc",
        &[
            (
                "lifeos gc --dry-run",
                "what would be removed and the space it frees",
            ),
            ("lifeos gc", "remove what nothing refers to"),
        ],
    ),
];

/// The command line definition with the examples attached.
pub fn command() -> clap::Command {
    attach(Cli::command(), "")
}

fn attach(mut cmd: clap::Command, path: &str) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        let sub = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        cmd = cmd.mut_subcommand(&name, |s| attach(s, &sub));
    }
    match EXAMPLES.iter().find(|(p, _)| *p == path) {
        Some((_, lines)) => cmd.after_help(render(lines)),
        None => cmd,
    }
}

fn render(lines: &[(&str, &str)]) -> String {
    let width = lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let mut out = String::from("Examples:\n");
    for (line, what) in lines {
        out.push_str(&format!("  {line:width$}  # {what}\n"));
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command path, `""` for `lifeos` itself.
    fn paths(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        out.push(path.to_string());
        for s in cmd.get_subcommands() {
            let sub = if path.is_empty() {
                s.get_name().to_string()
            } else {
                format!("{path} {}", s.get_name())
            };
            paths(s, &sub, out);
        }
    }

    /// The subcommand path a parsed command line reached.
    fn reached(m: &clap::ArgMatches) -> String {
        let mut parts = Vec::new();
        let mut m = m;
        while let Some((name, sub)) = m.subcommand() {
            parts.push(name.to_string());
            m = sub;
        }
        parts.join(" ")
    }

    #[test]
    fn every_command_has_examples_that_parse_as_that_command() {
        let cmd = command();
        let mut all = Vec::new();
        paths(&cmd, "", &mut all);
        let missing: Vec<&String> = all
            .iter()
            .filter(|p| !EXAMPLES.iter().any(|(q, _)| q == p))
            .collect();
        assert!(
            missing.is_empty(),
            "commands without examples: {missing:#?}"
        );
        for (path, lines) in EXAMPLES {
            assert!(all.iter().any(|p| p == path), "no command {path:?}");
            assert!(!lines.is_empty(), "{path:?}");
            for (line, what) in *lines {
                assert!(!what.is_empty(), "{line}");
                let args = shlex::split(line).unwrap_or_else(|| panic!("quoting in {line}"));
                assert_eq!(args[0], "lifeos", "{line}");
                let m = command()
                    .try_get_matches_from(&args)
                    .unwrap_or_else(|e| panic!("{line}: {e}"));
                // A group's examples may show its subcommands.
                let got = reached(&m);
                assert!(
                    path.is_empty() || got == *path || got.starts_with(&format!("{path} ")),
                    "{line} runs {got:?}, not {path:?}"
                );
            }
        }
    }
}
