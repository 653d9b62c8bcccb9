//! lifeos-ingest: the knowledge layer. Extractors turn files into cited segments (lines,
//! pages, time ranges, image regions), ingest runs them once per (file content, extractor,
//! version) and records the results as objects, and search answers queries over them
//! with citations, for the library as it is or as it was.

#![warn(missing_docs)]

pub mod extractor;
pub mod extracts;
pub mod file_index;
pub mod files;
pub mod terms;
pub use lifeos_vcs::redact;
pub mod registry;
pub mod run;
pub mod search;
pub mod settings;
pub mod speech;

/// Errors of ingest and search.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// From the history layer.
    #[error(transparent)]
    Vcs(#[from] lifeos_vcs::VcsError),
    /// From the store.
    #[error(transparent)]
    Store(#[from] lifeos_store::StoreError),
    /// A table of the repository config that ingest reads (`[ingest]` or `[speech]`) is
    /// invalid.
    #[error("repository config [{table}]: {message}")]
    Config {
        /// The table.
        table: String,
        /// What is wrong, and where.
        message: String,
    },
    /// A search query has nothing to search for, or cannot be used.
    #[error("{0}")]
    Query(String),
    /// The speech model asked for cannot be used (not installed, damaged, or no speech
    /// support in this build).
    #[error("speech model {model}: {reason}")]
    Model {
        /// The model's name.
        model: String,
        /// Why.
        reason: String,
    },
}

/// Result alias.
pub type Result<T, E = IngestError> = std::result::Result<T, E>;
