//! The history objects: trees, commits, views and operations, with their canonical
//! encodings (see `docs/FORMAT.md`). Decoders validate everything they accept, so a
//! hostile object (a tree entry named `..`, say) is refused when read. One file per kind;
//! everything is re-exported here.

pub mod action;
mod codec;
mod commit;
pub mod entity;
mod event;
mod extract;
mod git;
mod operation;
mod tree;
mod view;

pub(crate) use codec::{read_opt_id, write_opt_id};
pub use commit::*;
pub use event::*;
pub use extract::*;
pub use git::*;
pub use operation::*;
pub use tree::*;
pub use view::*;

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_store::Id;
    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            any::<u8>().prop_filter("no / or NUL", |b| *b != b'/' && *b != 0),
            1..12,
        )
        .prop_filter("not . or ..", |n| n != b"." && n != b"..")
    }

    fn id() -> impl Strategy<Value = Id> {
        any::<[u8; 32]>().prop_map(Id)
    }

    fn sig() -> impl Strategy<Value = Signature> {
        (".{0,12}", ".{0,12}", any::<i64>(), -1000i32..1000).prop_map(
            |(name, email, time, tz_offset_min)| Signature {
                name,
                email,
                time,
                tz_offset_min,
            },
        )
    }

    proptest! {
        #[test]
        fn tree_round_trip(entries in proptest::collection::btree_map(name(), (1u8..6, id(), 0..u64::MAX / 32), 0..20), git_raw in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))) {
            let entries: Vec<TreeEntry> = entries.into_iter().map(|(name, (k, id, size))| {
                let kind = EntryKind::from_u8(k).unwrap();
                if kind == EntryKind::Gitlink {
                    TreeEntry { name, kind, id: gitlink_id(&id.0[..20].try_into().unwrap()), size: 0 }
                } else {
                    TreeEntry { name, kind, id, size }
                }
            }).collect();
            let tree = Tree { entries, git_raw };
            let bytes = tree.encode();
            // Version 1 unless something needs version 2, so older trees keep their ids.
            prop_assert_eq!(bytes[1] == 2, tree.needs_v2());
            prop_assert_eq!(Tree::decode(&bytes).unwrap(), tree);
        }

        /// Sizes that add up past 2^64 made `total_size` overflow; such a tree is refused.
        #[test]
        fn tree_with_overflowing_sizes_is_refused(big in u64::MAX / 2 + 1..=u64::MAX) {
            let entry = |n: &[u8]| TreeEntry { name: n.to_vec(), kind: EntryKind::File, id: Id::hash(n), size: big };
            let tree = Tree { entries: vec![entry(b"a"), entry(b"b")], git_raw: None };
            prop_assert!(Tree::decode(&tree.encode()).unwrap_err().to_string().contains("2^64"));
            prop_assert_eq!(tree.total_size(), u64::MAX);
        }

        #[test]
        fn commit_round_trip(tree in id(), parents in proptest::collection::vec(id(), 0..3), change in any::<[u8; 16]>(), a in sig(), c in sig(), message in proptest::collection::vec(any::<u8>(), 0..100), git_header in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..60))) {
            let commit = Commit { tree, parents, change_id: change, author: a, committer: c, message, extra_headers: vec![(b"gpgsig".to_vec(), b"sig".to_vec())],
                conflicts: vec![Conflict { path: "a.txt".into(), base: None, ours: Some(Id::hash(b"o")), theirs: Some(Id::hash(b"t")) }], git_header };
            let bytes = commit.encode();
            prop_assert_eq!(bytes[1] == 2, commit.git_header.is_some());
            prop_assert_eq!(Commit::decode(&bytes).unwrap(), commit);
        }

        #[test]
        fn view_and_operation_round_trip(heads in proptest::collection::vec(id(), 0..3), branches in proptest::collection::btree_map("[a-z]{1,8}", id(), 0..4), wc in proptest::option::of(id()), desc in ".{0,30}", start in any::<i64>(), end in any::<i64>(), git_refs in proptest::collection::btree_map("refs/[a-z/]{1,12}", (id(), id()), 0..4), entities in proptest::option::of(id()), actions in proptest::option::of(id())) {
            let git_refs = git_refs.into_iter().map(|(name, (target, commit))| GitRef { name, target, commit }).collect();
            let view = View { heads, branches: branches.into_iter().collect(), tags: vec![], current_branch: Some("main".into()), wc_commit: wc, git_refs, entities, actions };
            let mut view = view;
            view.heads.sort();
            view.heads.dedup();
            prop_assert_eq!(View::decode(&view.encode()).unwrap(), view.clone());
            let op = Operation { parents: view.heads.clone(), view: Id::hash(b"v"), start_ms: start, end_ms: end, tz_offset_min: 60, user: "u".into(), host: "h".into(), description: desc, events: OpEvents::Inline(vec![
                Event::RepoInitialized, Event::CommitCreated { commit: Id::hash(b"c") },
                Event::BranchMoved { name: "main".into(), from: None, to: wc }, Event::TagMoved { name: "v1".into(), from: wc, to: None },
                Event::CheckedOut { commit: Id::hash(b"c") }, Event::PathRestored { path: "a/b".into(), commit: Id::hash(b"c") },
                Event::OperationsMerged, Event::Undo { op: Id::hash(b"o") }, Event::Redo { op: Id::hash(b"u") }, Event::OpRestored { op: Id::hash(b"o") },
                Event::CommitRewritten { from: Id::hash(b"a"), to: Id::hash(b"b") },
                Event::EntityCreated { id: "task:a".into(), entity: Id::hash(b"e") },
                Event::EntityChanged { id: "task:a".into(), paths: vec!["due".into(), "title".into()], from: Id::hash(b"e"), to: Id::hash(b"f") },
                Event::EntityLinked { id: "task:a".into(), rel: "project".into(), target: "project:b".into(), linked: true, entity: Id::hash(b"f") },
                Event::EntityRemoved { id: "task:a".into(), entity: Id::hash(b"f") },
                Event::GitImported { source: b"/src/\xffrepo.git"[..].into(), commits: 2618 },
                Event::FilesStored { files: vec![Id::hash(b"f"), Id::hash(b"g")] },
            ]) };
            prop_assert_eq!(Operation::decode(&op.encode()).unwrap(), op.clone());
            // The same events in a page, and an operation naming its pages.
            let OpEvents::Inline(events) = &op.events else { unreachable!() };
            prop_assert_eq!(&decode_event_page(&encode_event_page(events)).unwrap(), events);
            let count = (EVENTS_PER_PAGE + 1) as u64;
            let paged = Operation { events: OpEvents::Paged { count, pages: vec![Id::hash(b"p1"), Id::hash(b"p2")] }, ..op };
            prop_assert_eq!(Operation::decode(&paged.encode()).unwrap(), paged.clone());
            let wrong = Operation { events: OpEvents::Paged { count, pages: vec![Id::hash(b"p1")] }, ..paged };
            prop_assert!(Operation::decode(&wrong.encode()).unwrap_err().to_string().contains("do not fill 1 pages"));
        }

        /// Valid objects, damaged: past the header and into every field's checks.
        #[test]
        fn damaged_objects_never_panic(
            which in 0usize..5,
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6),
        ) {
            let e = |n: &[u8], k| TreeEntry { name: n.to_vec(), kind: k, id: Id::hash(n), size: 7 };
            let sig = Signature { name: "Ann".into(), email: "a@x".into(), time: 1_700_000_000, tz_offset_min: 60 };
            let valid = match which {
                0 => Tree { entries: vec![e(b"a", EntryKind::File), e(b"b\xff", EntryKind::Dir), e(b"c", EntryKind::Symlink),
                    TreeEntry { name: b"d".to_vec(), kind: EntryKind::Gitlink, id: gitlink_id(&[3; 20]), size: 0 }], git_raw: Some(b"raw".to_vec()) }.encode(),
                1 => Commit { tree: Id::hash(b"t"), parents: vec![Id::hash(b"p")], change_id: [7; 16], author: sig.clone(), committer: sig,
                    message: b"msg".to_vec(), extra_headers: vec![(b"k".to_vec(), b"v".to_vec())],
                    conflicts: vec![Conflict { path: "a/b".into(), base: None, ours: Some(Id::hash(b"o")), theirs: None }], git_header: Some(b"author x".to_vec()) }.encode(),
                2 => View { heads: vec![Id::hash(b"h")], branches: vec![("main".into(), Id::hash(b"m"))], tags: vec![("v1".into(), Id::hash(b"v"))],
                    current_branch: Some("main".into()), wc_commit: Some(Id::hash(b"w")),
                    git_refs: vec![GitRef { name: "refs/pull/1/head".into(), target: Id::hash(b"g"), commit: Id::hash(b"g") }], entities: Some(Id::hash(b"e")), actions: Some(Id::hash(b"a")) }.encode(),
                3 => GitTag { target: Id::hash(b"c"), target_is_tag: false, raw: b"object 00\ntype commit\n".to_vec() }.encode(),
                _ => Operation { parents: vec![Id::hash(b"p")], view: Id::hash(b"v"), start_ms: 1, end_ms: 2, tz_offset_min: 0, user: "u".into(), host: "h".into(),
                    description: "d".into(), events: OpEvents::Inline(vec![Event::PathRestored { path: b"x\xff"[..].into(), commit: Id::hash(b"c") }, Event::ContentExtracted { results: vec![Id::hash(b"x")] }, Event::FilesStored { files: vec![Id::hash(b"f")] }]) }.encode(),
            };
            let data = lifeos_store::mutate::mutate(&valid, &edits);
            let _ = Tree::decode(&data);
            let _ = Commit::decode(&data);
            let _ = View::decode(&data);
            let _ = Operation::decode(&data);
            let _ = Extract::decode(&data);
            let _ = GitTag::decode(&data);
        }

        #[test]
        fn decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Tree::decode(&data);
            let _ = Commit::decode(&data);
            let _ = View::decode(&data);
            let _ = Operation::decode(&data);
            let _ = decode_event_page(&data);
            let _ = GitTag::decode(&data);
        }
    }

    #[test]
    fn git_tag_round_trip() {
        let t = GitTag {
            target: Id::hash(b"c"),
            target_is_tag: true,
            raw: b"object 1234\ntype tag\n\nmsg".to_vec(),
        };
        assert_eq!(GitTag::decode(&t.encode()).unwrap(), t);
    }

    /// Version 2 is only for what needs it: a decoder refuses a version 2 object with
    /// nothing that needs version 2, so each content has exactly one encoding (one id).
    #[test]
    fn version_2_without_need_is_refused() {
        let tree = Tree {
            entries: vec![],
            git_raw: None,
        }
        .encode();
        let mut v2 = tree.clone();
        v2[1] = 2;
        v2.push(0);
        assert!(Tree::decode(&v2)
            .unwrap_err()
            .to_string()
            .contains("nothing that needs it"));
        let view = View {
            heads: vec![],
            branches: vec![],
            tags: vec![],
            current_branch: None,
            wc_commit: None,
            git_refs: vec![],
            entities: None,
            actions: None,
        }
        .encode();
        let mut v2 = view.clone();
        v2[1] = 2;
        v2.push(0);
        assert!(View::decode(&v2)
            .unwrap_err()
            .to_string()
            .contains("no git refs"));
    }

    #[test]
    fn gitlink_is_refused_in_a_version_1_tree() {
        let mut t = Tree {
            entries: vec![TreeEntry {
                name: b"sub".to_vec(),
                kind: EntryKind::Gitlink,
                id: gitlink_id(&[9; 20]),
                size: 0,
            }],
            git_raw: None,
        }
        .encode();
        t[1] = 1;
        assert!(Tree::decode(&t)
            .unwrap_err()
            .to_string()
            .contains("unknown entry kind 5"));
    }

    #[test]
    fn extract_round_trip() {
        let e = Extract {
            file: Id::hash(b"f"),
            extractor: "markdown".into(),
            version: 1,
            outcome: Ok(vec![
                Segment {
                    kind: "section".into(),
                    anchor: Anchor::Lines { start: 3, end: 9 },
                    text: "budget".into(),
                    meta: String::new(),
                },
                Segment {
                    kind: "page".into(),
                    anchor: Anchor::Page(7),
                    text: "p".into(),
                    meta: "{}".into(),
                },
                Segment {
                    kind: "cue".into(),
                    anchor: Anchor::Time {
                        start_ms: 7900,
                        end_ms: 12100,
                    },
                    text: "c".into(),
                    meta: String::new(),
                },
                Segment {
                    kind: "ocr".into(),
                    anchor: Anchor::Region {
                        x: 1,
                        y: 2,
                        w: 3,
                        h: 4,
                    },
                    text: "o".into(),
                    meta: String::new(),
                },
                Segment {
                    kind: "metadata".into(),
                    anchor: Anchor::File,
                    text: "m".into(),
                    meta: String::new(),
                },
            ]),
        };
        assert_eq!(Extract::decode(&e.encode()).unwrap(), e);
        let f = Extract {
            outcome: Err("truncated".into()),
            ..e
        };
        assert_eq!(Extract::decode(&f.encode()).unwrap(), f);
        assert!(Extract::decode(&f.encode()[..10]).is_err());
    }

    #[test]
    fn hostile_tree_names_are_refused() {
        for bad in [&b".."[..], b".", b"", b"a/b", b"/abs", b"nul\0"] {
            let t = Tree {
                entries: vec![TreeEntry {
                    name: bad.to_vec(),
                    kind: EntryKind::File,
                    id: Id::hash(b""),
                    size: 0,
                }],
                git_raw: None,
            };
            assert!(Tree::decode(&t.encode()).is_err(), "{bad:?} accepted");
        }
        let dup = Tree {
            entries: vec![
                TreeEntry {
                    name: b"a".to_vec(),
                    kind: EntryKind::Symlink,
                    id: Id::hash(b"/etc"),
                    size: 4,
                },
                TreeEntry {
                    name: b"a".to_vec(),
                    kind: EntryKind::Dir,
                    id: Id::hash(b""),
                    size: 0,
                },
            ],
            git_raw: None,
        };
        assert!(Tree::decode(&dup.encode()).is_err());
    }
}
