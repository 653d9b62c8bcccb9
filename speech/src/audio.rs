//! Streamed audio decoding: any container and codec symphonia reads (WAV, MP3, FLAC, Ogg
//! Vorbis, AAC in MP4/M4A/MOV/MKV: the audio track of a video file), downmixed to mono and
//! resampled to 16 kHz with a windowed-sinc resampler, delivered in blocks so that memory
//! stays flat however long the recording is. Codecs symphonia cannot decode (Opus, as in
//! WebM and Ogg Opus files) go through the `ffmpeg` command when it is installed.

use std::io::{Read, Seek, SeekFrom};
use std::process::{Command, Stdio};

use rubato::{
    calculate_cutoff, Resampler, SincFixedIn, SincInterpolationParameters, SincInterpolationType,
    WindowFunction,
};
use symphonia::core::codecs::audio::well_known::{
    CODEC_ID_ALAC, CODEC_ID_MP1, CODEC_ID_MP2, CODEC_ID_OPUS, CODEC_ID_SPEEX, CODEC_ID_WAVPACK,
};
use symphonia::core::codecs::audio::{
    AudioCodecId, AudioCodecParameters, AudioDecoder, AudioDecoderOptions, CODEC_ID_NULL_AUDIO,
};
use symphonia::core::codecs::CodecParameters;
use symphonia::core::errors::Error as SymError;
use symphonia::core::formats::probe::Hint;
use symphonia::core::formats::{FormatOptions, FormatReader, Track};
use symphonia::core::io::{MediaSource, MediaSourceStream};
use symphonia::core::meta::MetadataOptions;

use crate::{Result, SpeechError};

/// The sample rate Whisper expects.
pub const RATE: u32 = 16_000;
/// Input frames per resampler call.
const RESAMPLE_CHUNK: usize = 4096;
/// Packets that fail to decode before the file counts as corrupt.
const MAX_BAD_PACKETS: usize = 16;

/// A seekable byte source: a file, or a file read from the store.
pub trait Source: Read + Seek + Send + Sync {}
impl<T: Read + Seek + Send + Sync> Source for T {}

/// What the decoder learned about a recording.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AudioInfo {
    /// The codec's short name ("aac", "mp3", "pcm", ...).
    pub codec: String,
    /// The source's sample rate.
    pub sample_rate: u32,
    /// The source's channel count.
    pub channels: u32,
    /// Decoded duration, in seconds.
    pub seconds: f64,
    /// Whether the `ffmpeg` command decoded it.
    pub via_ffmpeg: bool,
}

struct Sized<S>(S, Option<u64>);

impl<S: Read> Read for Sized<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}
impl<S: Seek> Seek for Sized<S> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.0.seek(pos)
    }
}
impl<S: Read + Seek + Send + Sync> MediaSource for Sized<S> {
    fn is_seekable(&self) -> bool {
        true
    }
    fn byte_len(&self) -> Option<u64> {
        self.1
    }
}

/// The short name of a codec ("aac", "pcm_s16le", ...), also for codecs this build
/// cannot decode ("opus").
pub fn codec_name(c: AudioCodecId) -> String {
    if let Some(d) = symphonia::default::get_codecs().get_audio_decoder(c) {
        return d.codec.info.short_name.to_string();
    }
    let known = [
        (CODEC_ID_OPUS, "opus"),
        (CODEC_ID_ALAC, "alac"),
        (CODEC_ID_WAVPACK, "wavpack"),
        (CODEC_ID_SPEEX, "speex"),
        (CODEC_ID_MP1, "mp1"),
        (CODEC_ID_MP2, "mp2"),
    ];
    match known.iter().find(|(t, _)| *t == c) {
        Some((_, n)) => n.to_string(),
        None => format!("{c}"),
    }
}

/// A symphonia stream over a seekable source of `len` bytes (MP4 files whose index
/// follows the media need the length to be read).
fn media_stream(source: Box<dyn Source>, len: Option<u64>) -> MediaSourceStream<'static> {
    MediaSourceStream::new(Box::new(Sized(source, len)), Default::default())
}

/// Downmixes to mono and resamples to [`RATE`], passing blocks of samples to a sink.
struct Conditioner<'a> {
    channels: usize,
    resampler: Option<SincFixedIn<f32>>,
    pending: Vec<f32>,
    /// Output samples still to drop: the resampler's delay, then any encoder priming.
    skip: usize,
    produced: u64,
    sink: &'a mut dyn FnMut(&[f32]) -> Result<()>,
}

impl<'a> Conditioner<'a> {
    fn new(
        rate: u32,
        channels: usize,
        priming_frames: u64,
        sink: &'a mut dyn FnMut(&[f32]) -> Result<()>,
    ) -> Result<Self> {
        let resampler = if rate == RATE {
            None
        } else {
            let window = WindowFunction::BlackmanHarris2;
            let params = SincInterpolationParameters {
                sinc_len: 128,
                f_cutoff: calculate_cutoff(128, window),
                interpolation: SincInterpolationType::Linear,
                oversampling_factor: 128,
                window,
            };
            Some(
                SincFixedIn::new(RATE as f64 / rate as f64, 1.0, params, RESAMPLE_CHUNK, 1)
                    .map_err(|e| SpeechError::Decode(format!("resampler: {e}")))?,
            )
        };
        let delay = resampler.as_ref().map_or(0, |r| r.output_delay());
        let priming = (priming_frames as f64 * RATE as f64 / rate as f64).round() as usize;
        Ok(Conditioner {
            channels: channels.max(1),
            resampler,
            pending: Vec::with_capacity(RESAMPLE_CHUNK * 2),
            skip: delay + priming,
            produced: 0,
            sink,
        })
    }

    /// Interleaved samples in.
    fn push(&mut self, interleaved: &[f32]) -> Result<()> {
        let ch = self.channels;
        let mono = interleaved
            .chunks_exact(ch)
            .map(|f| f.iter().sum::<f32>() / ch as f32);
        match self.resampler {
            None => {
                let block: Vec<f32> = mono.collect();
                self.emit(&block)
            }
            Some(_) => {
                self.pending.extend(mono);
                while self.pending.len() >= RESAMPLE_CHUNK {
                    let out = self.resample(Some(RESAMPLE_CHUNK))?;
                    self.pending.drain(..RESAMPLE_CHUNK);
                    self.emit(&out)?;
                }
                Ok(())
            }
        }
    }

    fn resample(&mut self, input: Option<usize>) -> Result<Vec<f32>> {
        let r = self.resampler.as_mut().expect("resampling");
        let out = match input {
            Some(n) if n == RESAMPLE_CHUNK => r.process(&[&self.pending[..n]], None),
            Some(n) => r.process_partial(Some(&[&self.pending[..n]]), None),
            None => r.process_partial::<&[f32]>(None, None),
        };
        out.map(|mut v| v.swap_remove(0))
            .map_err(|e| SpeechError::Decode(format!("resampler: {e}")))
    }

    fn emit(&mut self, block: &[f32]) -> Result<()> {
        let drop = self.skip.min(block.len());
        self.skip -= drop;
        let block = &block[drop..];
        if block.is_empty() {
            return Ok(());
        }
        self.produced += block.len() as u64;
        (self.sink)(block)
    }

    /// Flushes what the resampler holds; returns the samples delivered in all.
    fn finish(mut self, input_frames: u64, rate: u32) -> Result<u64> {
        if self.resampler.is_some() {
            // Samples the input accounts for, so the tail of zeros the flush adds is cut.
            let expected = (input_frames as f64 * RATE as f64 / rate as f64).round() as u64;
            let n = self.pending.len();
            if n > 0 {
                let out = self.resample(Some(n))?;
                self.pending.clear();
                self.emit_upto(&out, expected)?;
            }
            while self.produced < expected {
                let out = self.resample(None)?;
                if out.is_empty() {
                    break;
                }
                self.emit_upto(&out, expected)?;
            }
        }
        Ok(self.produced)
    }

    fn emit_upto(&mut self, block: &[f32], expected: u64) -> Result<()> {
        let pending_skip = self.skip.min(block.len());
        let room = expected.saturating_sub(self.produced) as usize + pending_skip;
        self.emit(&block[..block.len().min(room)])
    }
}

/// Decodes `source` (a file named `name`, whose extension is a hint) to 16 kHz mono,
/// calling `sink` with consecutive blocks. `reopen` gives the bytes again from the start
/// for the `ffmpeg` fallback.
pub fn decode(
    name: &str,
    reopen: &dyn Fn() -> std::io::Result<(Box<dyn Source>, u64)>,
    sink: &mut dyn FnMut(&[f32]) -> Result<()>,
) -> Result<AudioInfo> {
    let (source, len) = reopen().map_err(|e| SpeechError::Io(format!("reading {name}: {e}")))?;
    match unpanicked(name, || decode_symphonia(name, source, len, sink)) {
        Err(SpeechError::Unsupported(codec)) => match ffmpeg() {
            Some(bin) => decode_ffmpeg(&bin, name, reopen, &codec, sink),
            None => Err(SpeechError::Unsupported(format!(
                "unsupported codec: {codec} (install ffmpeg)"
            ))),
        },
        other => other,
    }
}

/// Runs `f` on untrusted bytes; a panic in it (a demuxer or decoder; symphonia 0.5's
/// ADTS reader overflows on some hostile files) becomes `on_panic(message)`, not a crash.
pub fn guard<T, E>(
    f: impl FnOnce() -> std::result::Result<T, E>,
    on_panic: impl FnOnce(String) -> E,
) -> std::result::Result<T, E> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let why = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(on_panic(why))
    })
}

fn unpanicked<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    guard(f, |why| {
        SpeechError::Decode(format!(
            "{name}: corrupt media: the decoder failed on it ({why})"
        ))
    })
}

/// Encoder priming of AAC in an MP4/MOV file, in source frames: the first edit's media
/// time (what players skip), read from the file's `elst` box. symphonia does not apply
/// it, so without this every timestamp would be late by ~50 ms.
fn mp4_priming(src: &mut dyn Source, len: u64) -> Option<u64> {
    mp4_track(src, len, |src, trak| {
        is_sound_track(src, trak.0, trak.1).then(|| {
            let edts = mp4_box(src, trak.0, trak.1, b"edts")?;
            let elst = mp4_box(src, edts.0, edts.1, b"elst")?;
            first_media_time(src, elst)
        })
    })
    .flatten()
}

/// The first value `f` gives for a track (the body of a `moov/trak` box, as start and
/// end offsets) of an MP4-family file of `len` bytes.
pub fn mp4_track<T>(
    src: &mut dyn Source,
    len: u64,
    mut f: impl FnMut(&mut dyn Source, (u64, u64)) -> Option<T>,
) -> Option<T> {
    let moov = mp4_box(src, 0, len, b"moov")?;
    let mut pos = moov.0;
    while let Some(trak) = mp4_box(src, pos, moov.1, b"trak") {
        if let Some(v) = f(src, trak) {
            return Some(v);
        }
        pos = trak.1;
    }
    None
}

/// The media time of the first non-empty edit of an `elst` box's body.
fn first_media_time(src: &mut dyn Source, (start, end): (u64, u64)) -> Option<u64> {
    src.seek(SeekFrom::Start(start)).ok()?;
    let mut b = vec![0u8; (end - start).min(64) as usize];
    src.read_exact(&mut b).ok()?;
    let version = *b.first()?;
    let count = u32::from_be_bytes(b.get(4..8)?.try_into().ok()?);
    let mut off = 8;
    // An empty edit (media time -1) first is a delay, not priming; skip it.
    for _ in 0..count.min(2) {
        let (media_time, next) = if version == 1 {
            let t = i64::from_be_bytes(b.get(off + 8..off + 16)?.try_into().ok()?);
            (t, off + 20)
        } else {
            let t = i32::from_be_bytes(b.get(off + 4..off + 8)?.try_into().ok()?) as i64;
            (t, off + 12)
        };
        if media_time >= 0 {
            return Some(media_time as u64);
        }
        off = next;
    }
    None
}

/// The body (start, end) of the first MP4 box of `kind` among the boxes in
/// `start..end` (32- and 64-bit sizes, and size 0 for "to the end"). A box that claims to
/// run past the end is cut there, as demuxers read truncated files.
pub fn mp4_box(src: &mut dyn Source, start: u64, end: u64, kind: &[u8; 4]) -> Option<(u64, u64)> {
    let mut pos = start;
    while pos + 8 <= end {
        src.seek(SeekFrom::Start(pos)).ok()?;
        let mut h = [0u8; 8];
        src.read_exact(&mut h).ok()?;
        let mut size = u32::from_be_bytes(h[..4].try_into().ok()?) as u64;
        let mut header = 8;
        if size == 1 {
            let mut l = [0u8; 8];
            src.read_exact(&mut l).ok()?;
            size = u64::from_be_bytes(l);
            header = 16;
        } else if size == 0 {
            size = end - pos;
        }
        if size < header {
            return None;
        }
        let size = size.min(end - pos);
        if &h[4..8] == kind {
            return Some((pos + header, pos + size));
        }
        pos += size;
    }
    None
}

fn is_sound_track(src: &mut dyn Source, start: u64, end: u64) -> bool {
    (|| {
        let mdia = mp4_box(src, start, end, b"mdia")?;
        let hdlr = mp4_box(src, mdia.0, mdia.1, b"hdlr")?;
        src.seek(SeekFrom::Start(hdlr.0 + 8)).ok()?;
        let mut t = [0u8; 4];
        src.read_exact(&mut t).ok()?;
        Some(&t == b"soun")
    })()
    .unwrap_or(false)
}

/// The extension of a path's last component, in ASCII lowercase: the text after its last
/// `.` (`""` without one; `.bashrc` has the extension `bashrc`).
pub fn extension(path: &str) -> String {
    path.rsplit('/')
        .next()
        .and_then(|n| n.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default()
}

/// A recording opened for decoding: its container, the first audio track this build can
/// decode, and a decoder for it.
pub struct AudioStream {
    name: String,
    format: Box<dyn FormatReader>,
    decoder: Box<dyn AudioDecoder>,
    track_id: u32,
    samples: Vec<f32>,
    /// What the container says about the track (`seconds` is its declared length).
    pub info: AudioInfo,
    /// The frames the container declares, if it does.
    pub declared_frames: Option<u64>,
    /// Tracks of every kind in the container.
    pub tracks: usize,
    /// Encoder priming to drop, in source frames: AAC decoders emit it, and the MP4 edit
    /// list says how much (symphonia does not apply it).
    pub priming: u64,
}

/// What the next packet of an [`AudioStream`] gave.
#[derive(Debug)]
pub enum Next<'a> {
    /// Decoded audio: interleaved samples of `channels` channels at `rate` Hz.
    Samples {
        /// Sample rate.
        rate: u32,
        /// Channels.
        channels: usize,
        /// The samples, interleaved.
        samples: &'a [f32],
    },
    /// A packet the decoder rejected; the stream goes on.
    BadPacket(String),
    /// The container could not be read further (damaged or cut short).
    BadContainer(String),
    /// The end of the stream.
    End,
}

fn audio_params(t: &Track) -> Option<&AudioCodecParameters> {
    match &t.codec_params {
        Some(CodecParameters::Audio(a)) if a.codec != CODEC_ID_NULL_AUDIO => Some(a),
        _ => None,
    }
}

impl AudioStream {
    /// Opens `source` (a file named `name`, whose extension is a hint) of `len` bytes.
    /// A file with only tracks this build cannot decode is [`SpeechError::Unsupported`]
    /// with the codec's name.
    pub fn open(name: &str, mut source: Box<dyn Source>, len: u64) -> Result<AudioStream> {
        let corrupt = |what: String| SpeechError::Decode(format!("{name}: {what}"));
        let ext = extension(name);
        let mp4 = matches!(ext.as_str(), "mp4" | "m4a" | "m4v" | "mov" | "3gp" | "aac");
        let priming = if mp4 {
            let p = mp4_priming(source.as_mut(), len);
            source
                .seek(SeekFrom::Start(0))
                .map_err(|e| SpeechError::Io(format!("reading {name}: {e}")))?;
            p
        } else {
            None
        };
        let mss = media_stream(source, Some(len));
        let mut hint = Hint::new();
        hint.with_extension(&ext);
        let format = symphonia::default::get_probe()
            .probe(
                &hint,
                mss,
                FormatOptions::default(),
                MetadataOptions::default(),
            )
            .map_err(|e| match e {
                SymError::Unsupported(_) if matches!(ext.as_str(), "webm" | "opus") => {
                    SpeechError::Unsupported(if ext == "webm" { "webm" } else { "opus" }.into())
                }
                SymError::Unsupported(_) => {
                    corrupt("not an audio or video format lifeos reads".into())
                }
                e => corrupt(format!("unreadable container: {e}")),
            })?;
        let tracks = format.tracks().len();
        let registry = symphonia::default::get_codecs();
        let audio: Vec<&Track> = format
            .tracks()
            .iter()
            .filter(|t| audio_params(t).is_some())
            .collect();
        let Some(track) = audio.iter().find(|t| {
            audio_params(t).is_some_and(|a| registry.get_audio_decoder(a.codec).is_some())
        }) else {
            return Err(match audio.first().and_then(|t| audio_params(t)) {
                Some(a) => SpeechError::Unsupported(codec_name(a.codec)),
                None => SpeechError::NoAudio(format!("{name}: no audio track")),
            });
        };
        let params = audio_params(track)
            .ok_or_else(|| SpeechError::NoAudio(format!("{name}: no audio track")))?;
        let codec = codec_name(params.codec);
        let rate = params.sample_rate.unwrap_or(0);
        let declared_frames = track.num_frames;
        let info = AudioInfo {
            seconds: match (declared_frames, rate) {
                (Some(n), r) if r > 0 => n as f64 / r as f64,
                _ => 0.0,
            },
            codec: codec.clone(),
            sample_rate: rate,
            channels: params.channels.as_ref().map_or(0, |c| c.count() as u32),
            via_ffmpeg: false,
        };
        let decoder = registry
            .make_audio_decoder(params, &AudioDecoderOptions::default())
            .map_err(|e| corrupt(format!("cannot decode {codec}: {e}")))?;
        let track_id = track.id;
        Ok(AudioStream {
            name: name.to_string(),
            format,
            decoder,
            track_id,
            samples: Vec::new(),
            info,
            declared_frames,
            tracks,
            // AAC decoders also emit the encoder's priming; the container says how much.
            priming: if codec == "aac" {
                priming.unwrap_or(0)
            } else {
                0
            },
        })
    }

    /// Decodes the next packet of the track.
    pub fn next_block(&mut self) -> Result<Next<'_>> {
        let corrupt = |name: &str, what: String| SpeechError::Decode(format!("{name}: {what}"));
        loop {
            let packet = match self.format.next_packet() {
                Ok(Some(p)) => p,
                Ok(None) | Err(SymError::ResetRequired) => return Ok(Next::End),
                Err(SymError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    return Ok(Next::End)
                }
                Err(SymError::IoError(e)) => {
                    return Err(corrupt(&self.name, format!("read error: {e}")))
                }
                Err(e) => return Ok(Next::BadContainer(e.to_string())),
            };
            if packet.track_id != self.track_id {
                continue;
            }
            match self.decoder.decode(&packet) {
                Ok(d) => {
                    if d.frames() == 0 {
                        continue;
                    }
                    let rate = d.spec().rate();
                    let channels = d.spec().channels().count();
                    d.copy_to_vec_interleaved(&mut self.samples);
                    return Ok(Next::Samples {
                        rate,
                        channels,
                        samples: &self.samples,
                    });
                }
                Err(SymError::DecodeError(e)) => return Ok(Next::BadPacket(e.to_string())),
                Err(SymError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    return Ok(Next::End)
                }
                Err(e) => {
                    return Err(corrupt(
                        &self.name,
                        format!("cannot decode {}: {e}", self.info.codec),
                    ))
                }
            }
        }
    }
}

/// What a recording is (codec, rate, channels, duration from the container), without
/// decoding it. Codecs this build cannot decode are described too.
pub fn probe(
    name: &str,
    reopen: &dyn Fn() -> std::io::Result<(Box<dyn Source>, u64)>,
) -> Result<AudioInfo> {
    let (source, len) = reopen().map_err(|e| SpeechError::Io(format!("reading {name}: {e}")))?;
    match unpanicked(name, || {
        AudioStream::open(name, source, len).map(|o| o.info)
    }) {
        Ok(info) => Ok(info),
        Err(SpeechError::Unsupported(codec)) => Ok(AudioInfo {
            codec,
            ..AudioInfo::default()
        }),
        Err(e) => Err(e),
    }
}

fn decode_symphonia(
    name: &str,
    source: Box<dyn Source>,
    len: u64,
    sink: &mut dyn FnMut(&[f32]) -> Result<()>,
) -> Result<AudioInfo> {
    let corrupt = |what: String| SpeechError::Decode(format!("{name}: {what}"));
    let mut stream = AudioStream::open(name, source, len)?;
    let (priming, declared_frames) = (stream.priming, stream.declared_frames);
    let mut info = stream.info.clone();
    let mut cond: Option<Conditioner> = None;
    let mut frames_in: u64 = 0;
    let mut bad = 0usize;
    let mut truncated = false;
    loop {
        match stream.next_block()? {
            Next::End => break,
            Next::BadContainer(e) => {
                bad += 1;
                if bad > MAX_BAD_PACKETS {
                    return Err(corrupt(format!("corrupt stream: {e}")));
                }
                truncated = true;
                break;
            }
            Next::BadPacket(e) => {
                bad += 1;
                if bad > MAX_BAD_PACKETS {
                    return Err(corrupt(format!("corrupt {} stream: {e}", info.codec)));
                }
            }
            Next::Samples {
                rate,
                channels,
                samples,
            } => {
                if cond.is_none() {
                    info.sample_rate = rate;
                    info.channels = channels as u32;
                    cond = Some(Conditioner::new(rate, channels, priming, sink)?);
                }
                frames_in += (samples.len() / channels.max(1)) as u64;
                if let Some(c) = cond.as_mut() {
                    c.push(samples)?;
                }
            }
        }
    }
    let Some(cond) = cond else {
        return Err(corrupt("no audio could be decoded".into()));
    };
    if let Some(n) = declared_frames {
        // Allow for priming, padding and a last partial packet.
        if frames_in + 4096 + priming < n {
            truncated = true;
        }
    }
    if truncated {
        return Err(corrupt(format!(
            "truncated: the stream ends after {:.1} s of {}",
            frames_in as f64 / info.sample_rate.max(1) as f64,
            declared_frames.map_or("a longer recording".into(), |n| format!(
                "{:.1} s",
                n as f64 / info.sample_rate.max(1) as f64
            ))
        )));
    }
    let produced = cond.finish(frames_in.saturating_sub(priming), info.sample_rate)?;
    info.seconds = produced as f64 / RATE as f64;
    Ok(info)
}

/// The `ffmpeg` command, if installed (`LIFEOS_FFMPEG` names another).
pub fn ffmpeg() -> Option<std::path::PathBuf> {
    let bin = std::env::var_os("LIFEOS_FFMPEG").unwrap_or_else(|| "ffmpeg".into());
    let ok = Command::new(&bin)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| bin.into())
}

fn decode_ffmpeg(
    bin: &std::path::Path,
    name: &str,
    reopen: &dyn Fn() -> std::io::Result<(Box<dyn Source>, u64)>,
    codec: &str,
    sink: &mut dyn FnMut(&[f32]) -> Result<()>,
) -> Result<AudioInfo> {
    let (mut source, _) = reopen().map_err(|e| SpeechError::Io(format!("reading {name}: {e}")))?;
    let mut child = Command::new(bin)
        .args([
            "-nostdin",
            "-hide_banner",
            "-loglevel",
            "error",
            "-i",
            "pipe:0",
        ])
        .args(["-vn", "-ac", "1", "-ar", "16000", "-f", "f32le", "pipe:1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| SpeechError::Decode(format!("{name}: running ffmpeg: {e}")))?;
    let mut stdin = child.stdin.take().expect("piped");
    let feeder = std::thread::spawn(move || {
        // ffmpeg may stop reading early (an error); that is reported from its status.
        let _ = std::io::copy(&mut source, &mut stdin);
    });
    let mut stderr = child.stderr.take().expect("piped");
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut stdout = child.stdout.take().expect("piped");
    let mut bytes = vec![0u8; 64 * 1024];
    let mut carry = Vec::new();
    let mut samples = Vec::new();
    let mut total: u64 = 0;
    let mut sink_err = None;
    loop {
        let n = match stdout.read(&mut bytes) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(SpeechError::Decode(format!("{name}: reading ffmpeg: {e}"))),
        };
        carry.extend_from_slice(&bytes[..n]);
        let whole = carry.len() / 4 * 4;
        samples.clear();
        samples.extend(
            carry[..whole]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
        carry.drain(..whole);
        total += samples.len() as u64;
        if let Err(e) = sink(&samples) {
            sink_err = Some(e);
            let _ = child.kill();
            break;
        }
    }
    let _ = feeder.join();
    let status = child
        .wait()
        .map_err(|e| SpeechError::Decode(format!("{name}: ffmpeg: {e}")))?;
    let err = err_reader.join().unwrap_or_default();
    if let Some(e) = sink_err {
        return Err(e);
    }
    if !status.success() || total == 0 {
        return Err(SpeechError::Decode(format!(
            "{name}: ffmpeg could not decode it: {}",
            err.lines().last().unwrap_or("no audio")
        )));
    }
    Ok(AudioInfo {
        codec: codec.to_string(),
        sample_rate: RATE,
        channels: 1,
        seconds: total as f64 / RATE as f64,
        via_ffmpeg: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(rate: u32, channels: u16, samples: &[i16]) -> Vec<u8> {
        let data = samples.len() * 2;
        let mut v = Vec::new();
        v.extend_from_slice(b"RIFF");
        v.extend_from_slice(&(36 + data as u32).to_le_bytes());
        v.extend_from_slice(b"WAVEfmt ");
        v.extend_from_slice(&16u32.to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&channels.to_le_bytes());
        v.extend_from_slice(&rate.to_le_bytes());
        v.extend_from_slice(&(rate * channels as u32 * 2).to_le_bytes());
        v.extend_from_slice(&(channels * 2).to_le_bytes());
        v.extend_from_slice(&16u16.to_le_bytes());
        v.extend_from_slice(b"data");
        v.extend_from_slice(&(data as u32).to_le_bytes());
        for s in samples {
            v.extend_from_slice(&s.to_le_bytes());
        }
        v
    }

    fn run(name: &str, bytes: Vec<u8>) -> Result<(AudioInfo, Vec<f32>)> {
        let mut out = Vec::new();
        let info = decode(
            name,
            &|| {
                let n = bytes.len() as u64;
                Ok((
                    Box::new(std::io::Cursor::new(bytes.clone())) as Box<dyn Source>,
                    n,
                ))
            },
            &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            },
        )?;
        Ok((info, out))
    }

    /// A click 1.25 s into a 44.1 kHz stereo file lands at 1.25 s after resampling.
    #[test]
    fn resampling_keeps_time_and_length() {
        let rate = 44_100;
        let mut s = vec![0i16; rate as usize * 2 * 3];
        let at = (rate as f64 * 1.25) as usize;
        for i in 0..40 {
            s[(at + i) * 2] = 20_000;
            s[(at + i) * 2 + 1] = 20_000;
        }
        let (info, out) = run("click.wav", wav(rate, 2, &s)).unwrap();
        assert_eq!((info.sample_rate, info.channels), (44_100, 2));
        assert!((out.len() as i64 - 48_000).abs() <= 2, "{}", out.len());
        let peak = out
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .unwrap()
            .0;
        assert!((peak as i64 - 20_000).abs() < 32, "peak at {peak}");
    }

    proptest::proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048),
            ext in proptest::sample::select(vec!["wav", "mp3", "flac", "ogg", "m4a", "mp4", "mkv"]),
        ) {
            let _ = run(&format!("x.{ext}"), bytes);
        }
    }

    /// symphonia 0.5's ADTS reader subtracts the sync word's offset twice and overflows
    /// when the first AAC frame starts past the middle of the file.
    #[test]
    fn adts_sync_late_in_a_file_is_an_error_not_a_panic() {
        let mut b = vec![0u8; 100];
        b.extend_from_slice(&[0xFF, 0xF1, 0x50, 0x80, 0x01, 0xFF, 0xFC]);
        b.extend_from_slice(&[0u8; 10]);
        for ext in ["aac", "m4a", "mp3"] {
            let e = run(&format!("late.{ext}"), b.clone())
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(&format!("late.{ext}: ")), "{e}");
        }
    }

    /// Inputs on which the `speech_inputs` fuzz target aborted with symphonia 0.5, each a
    /// panic inside a demuxer: an ADTS sync word past the middle of a 35-byte file
    /// (subtraction overflow), an MP4 whose `esds` box holds no ES descriptor (an
    /// `unwrap`), and a damaged Matroska file ("invalid position" assertion). They are
    /// decoded here without the panic guard: each must be an error naming the file.
    #[test]
    fn regression_fuzz_findings_are_errors_without_the_panic_guard() {
        let mut late_adts = vec![0u8; 18];
        late_adts.extend_from_slice(&[0xFF, 0xF1, 0x50, 0x80, 0x01, 0xFF, 0xFC]);
        late_adts.extend_from_slice(&[0u8; 10]);
        let inputs: [(&str, Vec<u8>); 3] = [
            ("late", late_adts),
            (
                "esds",
                include_bytes!("../testdata/fuzz-esds-without-es-descriptor.m4a").to_vec(),
            ),
            (
                "ebml",
                include_bytes!("../testdata/fuzz-mkv-invalid-position.mkv").to_vec(),
            ),
        ];
        for (stem, b) in inputs {
            for ext in ["aac", "m4a", "mp4", "mp3", "wav", "mkv"] {
                let name = format!("{stem}.{ext}");
                let src: Box<dyn Source> = Box::new(std::io::Cursor::new(b.clone()));
                let mut n = 0usize;
                let r = decode_symphonia(&name, src, b.len() as u64, &mut |block| {
                    n += block.len();
                    Ok(())
                });
                if let Err(e) = r {
                    assert!(e.to_string().starts_with(&format!("{name}: ")), "{e}");
                }
            }
        }
    }

    #[test]
    fn truncated_and_garbage_are_errors() {
        let s = vec![1000i16; 16_000 * 4];
        let mut w = wav(16_000, 1, &s);
        w.truncate(w.len() / 3);
        let e = run("cut.wav", w).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
        let e = run("noise.mp3", vec![0x5a; 10_000])
            .unwrap_err()
            .to_string();
        assert!(e.contains("noise.mp3"), "{e}");
    }
}
