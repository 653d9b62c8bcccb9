//! lifeos-speech: what turns recordings into timestamped text.
//!
//! - [`audio`] decodes any supported container and codec as a stream, downmixed to mono
//!   and resampled to 16 kHz (the `ffmpeg` command covers codecs symphonia lacks);
//! - [`convert`] turns a CTranslate2 Whisper model into whisper.cpp's ggml file;
//! - [`models`] keeps installed models in a per-user directory, verified by sha256;
//! - `transcribe` (with the `whisper` feature) runs whisper.cpp over a recording in
//!   windows, keeping every segment's start and end.
//!
//! Nothing here prints; errors say what failed and what to do.

#![warn(missing_docs)]

pub mod align;
pub mod audio;
pub mod convert;
pub mod models;
#[cfg(feature = "whisper")]
pub mod transcribe;
pub mod window;

/// Whether this build can transcribe (it was built with whisper.cpp).
pub const ENABLED: bool = cfg!(feature = "whisper");

/// A span of speech: where it starts and ends in the recording, and what was said.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedText {
    /// Start, in milliseconds from the start of the recording.
    pub start_ms: u64,
    /// End, in milliseconds.
    pub end_ms: u64,
    /// The words.
    pub text: String,
}

/// Errors of decoding, model handling and transcription.
#[derive(Debug, thiserror::Error)]
pub enum SpeechError {
    /// The codec or container needs a decoder this machine lacks (the message says which
    /// and what to install).
    #[error("{0}")]
    Unsupported(String),
    /// The media is truncated or corrupt.
    #[error("{0}")]
    Decode(String),
    /// The container holds no audio track (a silent video, say).
    #[error("{0}")]
    NoAudio(String),
    /// A model could not be read, converted or verified.
    #[error("{0}")]
    Model(String),
    /// whisper.cpp failed.
    #[error("{0}")]
    Transcribe(String),
    /// Reading or writing a file failed.
    #[error("{0}")]
    Io(String),
}

/// Result alias.
pub type Result<T, E = SpeechError> = std::result::Result<T, E>;
