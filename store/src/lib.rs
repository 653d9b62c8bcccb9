//! lifeos-store: the content-addressed store under every lifeos repository.
//!
//! Files are cut into content-defined chunks (FastCDC v2020), named by BLAKE3, compressed
//! with zstd and appended to pack files; an index of immutable layers finds any object with
//! one positioned read. Writes happen in [`Transaction`]s that become visible only when
//! committed, after their data is durable. The formats are specified in `docs/FORMAT.md`.

#![warn(missing_docs)]

pub mod block;
pub mod chunker;
pub mod codec;
pub mod config;
pub mod error;
pub mod fsck;
pub mod fsutil;
pub mod gc;
pub mod id;
pub mod index;
pub mod kind;
pub mod live;
pub mod manifest;
pub mod mutate;
pub mod pack;
pub mod par;
pub mod pipeline;
pub mod reader;
pub mod store;
#[cfg(test)]
mod test_data;

pub use config::StoreConfig;
pub use error::{Result, StoreError};
pub use id::{Id, IdMap, IdSet};
pub use kind::Kind;
pub use manifest::{ChunkRef, Manifest};
pub use store::{Fetched, ObjectSource, Store, StoreStats, StoredAs, Transaction, Written};

/// The buffer of every large file lifeos writes (packs, index layers, a checkout's
/// files). Linux 6.x gives a buffered write page-cache folios as large as the write: a
/// 1 MiB write asks for order-8 pages, and on a machine whose memory is fragmented it
/// can wait on compaction (640 MiB written 1 MiB at a time took 0.12 to 0.13 s in three
/// runs of five and 1.15 and 1.62 s in the other two; 256 KiB at a time took 0.13 to
/// 0.15 s every run).
pub const WRITE_BUFFER: usize = 256 << 10;
