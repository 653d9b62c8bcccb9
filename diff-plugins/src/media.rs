//! Audio and video: container, codec, duration, sample rate, channels; and for the audio
//! (a video's audio track too) the time ranges whose loudness envelope differs.

use std::io::{Read, Seek};

use lifeos_speech::audio::{AudioStream, Next};
use lifeos_speech::SpeechError;

use crate::{
    clock, DiffError, DiffPlugin, FileDiff, Located, Location, Op, Options, Probe, ReadSeek, Side,
};

/// Envelope window.
const WINDOW_MS: u64 = 100;
/// Windows whose loudness differs by more than this (dB) are changed.
const CHANGED_DB: f32 = 3.0;
/// Windows within this (dB) count as the same when aligning versions.
const SAME_DB: f32 = 1.5;

/// The audio/video plugin.
pub struct MediaPlugin;

const EXTS: &[&str] = &[
    "wav", "mp3", "flac", "ogg", "oga", "m4a", "mp4", "m4v", "mov", "mkv", "webm", "aac", "opus",
    "aiff",
];

/// What a media file is, and its loudness envelope (dB per window).
#[derive(Debug, Clone, Default)]
pub struct MediaInfo {
    /// Container.
    pub container: String,
    /// Audio codec.
    pub codec: String,
    /// Sample rate (Hz).
    pub sample_rate: u32,
    /// Channels.
    pub channels: u32,
    /// Duration in ms.
    pub duration_ms: u64,
    /// Tracks in the container.
    pub tracks: usize,
    /// RMS loudness per window, dB.
    pub envelope: Vec<f32>,
    /// Video resolution (width, height), when the container has a video track.
    pub resolution: Option<(u32, u32)>,
}

fn read_u32(r: &mut dyn ReadSeek) -> Option<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).ok()?;
    Some(u32::from_be_bytes(b))
}

/// The video resolution of an MP4/MOV file, from the first track's `tkhd` box with one
/// (width and height are 16.16 fixed point, the last 8 bytes of the box).
fn mp4_resolution(r: &mut dyn ReadSeek) -> Option<(u32, u32)> {
    let end = r.seek(std::io::SeekFrom::End(0)).ok()?;
    lifeos_speech::audio::mp4_track(r, end, |r, trak| {
        let tkhd = lifeos_speech::audio::mp4_box(r, trak.0, trak.1, b"tkhd")?;
        if tkhd.1 - tkhd.0 < 8 {
            return None;
        }
        r.seek(std::io::SeekFrom::Start(tkhd.1 - 8)).ok()?;
        let (w, h) = (read_u32(r)? >> 16, read_u32(r)? >> 16);
        (w > 0 && h > 0).then_some((w, h))
    })
}

/// The video resolution of a Matroska/WebM file: PixelWidth (0xB0) and PixelHeight (0xBA)
/// right after the first Video element (0xE0) of the track entries, which come early.
fn mkv_resolution(r: &mut dyn ReadSeek) -> Option<(u32, u32)> {
    r.seek(std::io::SeekFrom::Start(0)).ok()?;
    let mut head = Vec::new();
    r.take(4 << 20).read_to_end(&mut head).ok()?;
    let video = head.iter().position(|b| *b == 0xE0)?;
    // An element's one-byte size (0x81..=0x84) and big-endian value.
    let uint = |at: usize| -> Option<(u32, usize)> {
        let first = *head.get(at)?;
        let len = (first & 0x7f) as usize;
        if first & 0x80 == 0 || len == 0 || len > 4 {
            return None;
        }
        let v = head
            .get(at + 1..at + 1 + len)?
            .iter()
            .fold(0u32, |a, b| (a << 8) | u32::from(*b));
        Some((v, at + 1 + len))
    };
    let (mut w, mut h) = (None, None);
    let mut i = video + 1;
    while i < head.len().min(video + 64) && (w.is_none() || h.is_none()) {
        let found = match head[i] {
            0xB0 => uint(i + 1).map(|(v, n)| (true, v, n)),
            0xBA => uint(i + 1).map(|(v, n)| (false, v, n)),
            _ => None,
        };
        match found {
            Some((true, v, n)) => (w, i) = (Some(v), n),
            Some((false, v, n)) => (h, i) = (Some(v), n),
            None => i += 1,
        }
    }
    w.zip(h)
}

/// Probes and decodes the first audio track into a loudness envelope, streaming. A
/// decoder that panics on hostile bytes is a fallback to the binary diff, not a crash.
pub fn analyse(side: &Side<'_>) -> Result<MediaInfo, DiffError> {
    lifeos_speech::audio::guard(
        || analyse_unguarded(side),
        |why| {
            DiffError::Fallback(format!(
                "{} cannot be read as audio or video: the decoder failed on it ({why})",
                side.path
            ))
        },
    )
}

fn analyse_unguarded(side: &Side<'_>) -> Result<MediaInfo, DiffError> {
    let fallback = |e: String| {
        DiffError::Fallback(format!(
            "{} cannot be read as audio or video: {e}",
            side.path
        ))
    };
    let mut reader = side.loader.reader()?;
    let resolution = match side.extension().as_str() {
        "mp4" | "m4v" | "mov" => mp4_resolution(&mut *reader),
        "mkv" | "webm" => mkv_resolution(&mut *reader),
        _ => None,
    };
    reader
        .seek(std::io::SeekFrom::Start(0))
        .map_err(|e| DiffError::Read {
            path: side.path.into(),
            reason: e.to_string(),
        })?;
    let container = match side.extension().as_str() {
        "m4a" | "mp4" | "m4v" | "mov" => "MP4".into(),
        "mkv" | "webm" => "Matroska".into(),
        "ogg" | "oga" | "opus" => "Ogg".into(),
        other => other.to_uppercase(),
    };
    let mut stream = match AudioStream::open(side.path, Box::new(reader), side.size) {
        Ok(s) => s,
        // A video whose container symphonia cannot open still has a resolution to compare.
        Err(SpeechError::Decode(_)) if resolution.is_some() => {
            return Ok(MediaInfo {
                container: side.extension().to_uppercase(),
                codec: "unknown".into(),
                resolution,
                ..Default::default()
            })
        }
        Err(SpeechError::NoAudio(_)) => {
            return Ok(MediaInfo {
                container,
                codec: "none (no audio track)".into(),
                resolution,
                ..Default::default()
            })
        }
        Err(SpeechError::Unsupported(codec)) => {
            return Err(DiffError::Fallback(format!(
                "{}: unsupported codec {codec}",
                side.path
            )))
        }
        Err(e) => return Err(fallback(e.to_string())),
    };
    let tracks = stream.tracks;
    let sample_rate = stream.info.sample_rate;
    let codec = stream.info.codec.clone();
    let per_window = (u64::from(sample_rate) * WINDOW_MS / 1000).max(1) as usize;
    let (mut acc, mut count, mut frames_total) = (0f64, 0usize, 0u64);
    let mut envelope = Vec::new();
    let mut channels = stream.info.channels;
    loop {
        let (ch, samples) = match stream.next_block().map_err(|e| fallback(e.to_string()))? {
            Next::End => break,
            Next::BadPacket(_) => continue,
            Next::BadContainer(e) => return Err(fallback(e)),
            Next::Samples {
                channels, samples, ..
            } => (channels.max(1), samples),
        };
        channels = ch as u32;
        for frame in samples.chunks(ch) {
            let mono = frame.iter().sum::<f32>() / ch as f32;
            acc += f64::from(mono * mono);
            count += 1;
            frames_total += 1;
            if count == per_window {
                envelope.push(db(acc / count as f64));
                acc = 0.0;
                count = 0;
            }
        }
    }
    if count > 0 {
        envelope.push(db(acc / count as f64));
    }
    let duration_ms = if sample_rate > 0 {
        frames_total * 1000 / u64::from(sample_rate)
    } else {
        0
    };
    Ok(MediaInfo {
        container,
        codec,
        sample_rate,
        channels,
        duration_ms,
        tracks,
        envelope,
        resolution,
    })
}

fn db(mean_square: f64) -> f32 {
    (10.0 * (mean_square.max(1e-10)).log10()) as f32
}

fn same(a: f32, b: f32) -> bool {
    (a - b).abs() <= SAME_DB
}

/// Located changes between two loudness envelopes, in ms of the new version.
pub fn envelope_changes(a: &[f32], b: &[f32]) -> Vec<Located> {
    let ms = |w: usize| w as u64 * WINDOW_MS;
    let p = a.iter().zip(b).take_while(|(x, y)| same(**x, **y)).count();
    let max_s = a.len().min(b.len()) - p;
    let s = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_s)
        .take_while(|(x, y)| same(**x, **y))
        .count();
    let (ma, mb) = (p..a.len() - s, p..b.len() - s);
    let mut out = Vec::new();
    if ma.is_empty() && mb.is_empty() {
        return out;
    }
    if a.len() == b.len() {
        // Same length: the runs of windows that differ.
        let mut w = ma.start;
        while w < ma.end {
            if (a[w] - b[w]).abs() > CHANGED_DB {
                let start = w;
                while w < ma.end && (a[w] - b[w]).abs() > SAME_DB {
                    w += 1;
                }
                out.push(Located::new(
                    Op::Changed,
                    Location::Time {
                        start_ms: ms(start),
                        end_ms: ms(w),
                    },
                    format!(
                        "{}–{} changed",
                        clock(ms(start), false),
                        clock(ms(w), false)
                    ),
                ));
            } else {
                w += 1;
            }
        }
    } else if ma.is_empty() {
        let d = ms(mb.len());
        out.push(Located::new(
            Op::Added,
            Location::Time {
                start_ms: ms(mb.start),
                end_ms: ms(mb.end),
            },
            format!(
                "{:.1} s added at {}",
                d as f64 / 1000.0,
                clock(ms(mb.start), false)
            ),
        ));
    } else if mb.is_empty() {
        out.push(Located::new(
            Op::Removed,
            Location::Time {
                start_ms: ms(mb.start),
                end_ms: ms(mb.start),
            },
            format!(
                "{:.1} s removed at {} (old {}–{})",
                ms(ma.len()) as f64 / 1000.0,
                clock(ms(mb.start), false),
                clock(ms(ma.start), false),
                clock(ms(ma.end), false)
            ),
        ));
    } else {
        out.push(Located::new(
            Op::Changed,
            Location::Time {
                start_ms: ms(mb.start),
                end_ms: ms(mb.end),
            },
            format!(
                "{}–{} changed (was {}–{})",
                clock(ms(mb.start), false),
                clock(ms(mb.end), false),
                clock(ms(ma.start), false),
                clock(ms(ma.end), false)
            ),
        ));
    }
    out
}

impl DiffPlugin for MediaPlugin {
    fn name(&self) -> &str {
        "media"
    }

    fn score(&self, probe: &Probe<'_>) -> Option<u8> {
        let h = probe.head;
        let magic = (h.len() >= 12
            && (&h[..4] == b"RIFF" && &h[8..12] == b"WAVE" || &h[4..8] == b"ftyp"))
            || h.starts_with(b"ID3")
            || h.starts_with(b"fLaC")
            || h.starts_with(b"OggS")
            || h.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]);
        crate::score_by(magic, EXTS.contains(&probe.extension.as_str()))
    }

    fn diff(
        &self,
        old: Option<&Side<'_>>,
        new: Option<&Side<'_>>,
        _opts: &Options,
    ) -> Result<FileDiff, DiffError> {
        let res = |m: &MediaInfo| {
            m.resolution
                .map(|(w, h)| format!("{w}×{h}"))
                .unwrap_or_else(|| "no video".into())
        };
        let describe = |m: &MediaInfo| {
            let video = m
                .resolution
                .map(|(w, h)| format!(" {w}×{h}"))
                .unwrap_or_default();
            format!(
                "{}{video} {} {} Hz {} ch {}",
                m.container,
                m.codec,
                m.sample_rate,
                m.channels,
                clock(m.duration_ms, true)
            )
        };
        let (a, b) = match (old, new) {
            (Some(o), Some(n)) => (analyse(o)?, analyse(n)?),
            (None, Some(n)) => {
                let m = analyse(n)?;
                return Ok(FileDiff {
                    plugin: "media".into(),
                    summary: format!("new media: {}", describe(&m)),
                    ..FileDiff::default()
                });
            }
            (Some(o), None) => {
                let m = analyse(o)?;
                return Ok(FileDiff {
                    plugin: "media".into(),
                    summary: format!("media removed: {}", describe(&m)),
                    ..FileDiff::default()
                });
            }
            (None, None) => unreachable!("a side exists"),
        };
        let mut changes = Vec::new();
        let mut field = |name: &str, x: String, y: String| {
            if x != y {
                changes.push(
                    Located::new(
                        Op::Changed,
                        Location::Field { name: name.into() },
                        format!("{name} {x} → {y}"),
                    )
                    .values(Some(x), Some(y)),
                );
            }
        };
        field("container", a.container.clone(), b.container.clone());
        field("codec", a.codec.clone(), b.codec.clone());
        field(
            "sample rate",
            a.sample_rate.to_string(),
            b.sample_rate.to_string(),
        );
        field("channels", a.channels.to_string(), b.channels.to_string());
        field(
            "duration",
            clock(a.duration_ms, true),
            clock(b.duration_ms, true),
        );
        field("resolution", res(&a), res(&b));
        let mut notes = Vec::new();
        if a.sample_rate == b.sample_rate {
            changes.extend(envelope_changes(&a.envelope, &b.envelope));
        } else {
            notes.push("sample rates differ; loudness envelopes compared by time".into());
            changes.extend(envelope_changes(&a.envelope, &b.envelope));
        }
        let ranges = changes
            .iter()
            .filter(|c| matches!(c.at, Location::Time { .. }))
            .count();
        let summary = format!(
            "{} → {}: {} differ{}",
            describe(&a),
            describe(&b),
            crate::counted(ranges, "time range", "time ranges"),
            if ranges == 1 { "s" } else { "" }
        );
        Ok(FileDiff {
            plugin: "media".into(),
            summary,
            changes,
            notes,
            visual: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mp4_box(kind: &[u8], body: &[u8]) -> Vec<u8> {
        let mut v = ((body.len() + 8) as u32).to_be_bytes().to_vec();
        v.extend_from_slice(kind);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn reads_mp4_and_mkv_resolution() {
        let mut tkhd = vec![0u8; 76];
        tkhd.extend_from_slice(&(1920u32 << 16).to_be_bytes());
        tkhd.extend_from_slice(&(1080u32 << 16).to_be_bytes());
        let file = [
            mp4_box(b"ftyp", b"isom\0\0\0\0"),
            mp4_box(b"moov", &mp4_box(b"trak", &mp4_box(b"tkhd", &tkhd))),
        ]
        .concat();
        assert_eq!(
            mp4_resolution(&mut std::io::Cursor::new(file)),
            Some((1920, 1080))
        );
        let mkv = [
            &[0x1a, 0x45, 0xdf, 0xa3, 0x80][..],
            &[0xE0, 0x88, 0xB0, 0x82, 0x05, 0x00, 0xBA, 0x82, 0x02, 0xD0],
        ]
        .concat();
        assert_eq!(
            mkv_resolution(&mut std::io::Cursor::new(mkv)),
            Some((1280, 720))
        );
    }

    #[test]
    fn envelope_ranges() {
        let a: Vec<f32> = (0..100).map(|i| -20.0 - (i % 7) as f32).collect();
        let mut b = a.clone();
        for x in &mut b[41..47] {
            *x += 12.0;
        }
        let c = envelope_changes(&a, &b);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].at,
            Location::Time {
                start_ms: 4100,
                end_ms: 4700
            }
        );
        let mut d = a.clone();
        d.splice(70..70, std::iter::repeat_n(-60.0, 32));
        let c = envelope_changes(&a, &d);
        assert_eq!(c[0].op, Op::Added);
        assert_eq!(c[0].text, "3.2 s added at 00:07");
    }
}
