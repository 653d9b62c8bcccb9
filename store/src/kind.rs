//! What a stored entry is: the kind byte of every pack entry, index row and footer row
//! (FORMAT 2).

/// What a stored entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(clippy::derive_ord_xor_partial_ord)]
pub enum Kind {
    /// Raw file bytes cut by the chunker; id = BLAKE3 of the bytes. A file of one chunk
    /// is stored as just that chunk (its file id is the chunk id).
    Chunk = 1,
    /// The chunk list of a file of several chunks; id = BLAKE3 of the whole file.
    Manifest = 2,
    /// A directory listing.
    Tree = 3,
    /// A commit.
    Commit = 4,
    /// An operation of the operation log.
    Operation = 5,
    /// A view (the refs after an operation).
    View = 6,
    /// The text extracted from a file by one extractor (segments, or why it failed).
    Extract = 7,
    /// A git annotated tag, kept byte for byte with the lifeos id of what it tags.
    GitTag = 8,
    /// Many small objects compressed together ([`crate::block`]); id = BLAKE3 of the
    /// block's raw encoding. Its members are indexed under their own ids and kinds, at
    /// the block's offset.
    Block = 9,
    /// A node of a Merkle map keyed by entity id (the entity root of a view).
    MapNode = 10,
    /// An entity: a typed record with attributes and links.
    Entity = 11,
    /// A record of an automation's action: its proposal, approval, start or receipt.
    Action = 12,
    /// A page of the events of an operation that has too many to hold in itself.
    EventPage = 13,
}

impl Kind {
    /// Decodes a kind byte.
    pub fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Chunk,
            2 => Kind::Manifest,
            3 => Kind::Tree,
            4 => Kind::Commit,
            5 => Kind::Operation,
            6 => Kind::View,
            7 => Kind::Extract,
            8 => Kind::GitTag,
            9 => Kind::Block,
            10 => Kind::MapNode,
            11 => Kind::Entity,
            12 => Kind::Action,
            13 => Kind::EventPage,
            _ => return None,
        })
    }

    /// The kind's name in messages and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Chunk => "chunk",
            Kind::Manifest => "file manifest",
            Kind::Tree => "tree",
            Kind::Commit => "commit",
            Kind::Operation => "operation",
            Kind::View => "view",
            Kind::Extract => "extract",
            Kind::GitTag => "git tag",
            Kind::Block => "block",
            Kind::MapNode => "entity map node",
            Kind::Entity => "entity",
            Kind::Action => "action",
            Kind::EventPage => "event page",
        }
    }
}
