//! The repository config (`.lifeos/config`, TOML). Its store sections are fixed when the
//! repository is created: chunking parameters decide chunk ids, so they never change.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{IoContext, Result, StoreError};

/// The config format version this code writes and reads.
pub const CONFIG_FORMAT: u32 = 1;

/// FastCDC (v2020) chunk size bounds in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunking {
    /// Smallest chunk, except the last of a file.
    pub min_size: u32,
    /// Target average chunk size.
    pub avg_size: u32,
    /// Largest chunk.
    pub max_size: u32,
}

impl Default for Chunking {
    fn default() -> Self {
        Chunking {
            min_size: 16 * 1024,
            avg_size: 64 * 1024,
            max_size: 256 * 1024,
        }
    }
}

/// Compression settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compression {
    /// zstd level for chunks and objects.
    pub zstd_level: i32,
}

impl Default for Compression {
    fn default() -> Self {
        Compression { zstd_level: 3 }
    }
}

/// Pack file settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Packs {
    /// A pack is closed once it reaches this many bytes.
    pub target_size: u64,
    /// `gc` rewrites a pack once this share of its bytes is unreachable.
    pub gc_garbage_threshold: f64,
}

impl Default for Packs {
    fn default() -> Self {
        Packs {
            target_size: 64 * 1024 * 1024,
            gc_garbage_threshold: 0.2,
        }
    }
}

/// The store's part of the repository config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreConfig {
    /// Config format version ([`CONFIG_FORMAT`]).
    pub format: u32,
    /// Chunking parameters.
    pub chunking: Chunking,
    /// Compression.
    #[serde(default)]
    pub compression: Compression,
    /// Packs.
    #[serde(default)]
    pub packs: Packs,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            format: CONFIG_FORMAT,
            chunking: Chunking::default(),
            compression: Compression::default(),
            packs: Packs::default(),
        }
    }
}

impl StoreConfig {
    /// Checks that the values can be used.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.format != CONFIG_FORMAT {
            return Err(format!(
                "format {} is not supported (this lifeos reads format {CONFIG_FORMAT})",
                self.format
            ));
        }
        let c = self.chunking;
        if !(64..=c.avg_size.min(1 << 20)).contains(&c.min_size)
            || !(256..=4 << 20).contains(&c.avg_size)
            || !(c.avg_size.max(1024)..=16 << 20).contains(&c.max_size)
        {
            return Err(format!(
                "chunking sizes must satisfy 64 <= min <= 1 MiB, 256 <= avg <= 4 MiB, 1 KiB <= max <= 16 MiB, min <= avg <= max (got {}/{}/{})",
                c.min_size, c.avg_size, c.max_size
            ));
        }
        if !(1..=22).contains(&self.compression.zstd_level) {
            return Err(format!(
                "zstd_level {} is outside 1..=22",
                self.compression.zstd_level
            ));
        }
        if !(0.0..=1.0).contains(&self.packs.gc_garbage_threshold) {
            return Err("packs.gc_garbage_threshold must be between 0 and 1".into());
        }
        if self.packs.target_size < 1024 * 1024 || self.packs.target_size > 1 << 31 {
            return Err("packs.target_size must be between 1 MiB and 2 GiB".into());
        }
        Ok(())
    }

    /// Reads the store sections of a config file.
    pub fn load(path: &Path) -> Result<StoreConfig> {
        let text = std::fs::read_to_string(path).io("reading", path)?;
        let cfg: StoreConfig = toml::from_str(&text).map_err(|e| StoreError::BadConfig {
            path: path.into(),
            reason: e.to_string(),
        })?;
        cfg.validate().map_err(|reason| StoreError::BadConfig {
            path: path.into(),
            reason,
        })?;
        Ok(cfg)
    }

    /// The TOML text of this config.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("config serialises")
    }
}
