//! Narrowing transcript segments to where the sound is.
//!
//! Whisper's segment times are coarse: after silence, a segment (and its token times)
//! often starts where the silence started. Each segment is narrowed to the first and last
//! 10 ms frame within it whose loudness is above the recording's threshold; its end may
//! move up to a second later (never past the next segment's start), because Whisper also
//! closes segments early. A segment with no loud frame keeps its times.

use crate::audio::RATE;
use crate::TimedText;

const FRAME: usize = (RATE / 100) as usize;
/// How far past Whisper's end a segment may be extended, in frames.
const END_SLACK: usize = 100;

/// Root-mean-square loudness of each 10 ms frame.
fn frame_rms(samples: &[f32]) -> Vec<f32> {
    samples
        .chunks(FRAME)
        .map(|f| (f.iter().map(|s| s * s).sum::<f32>() / f.len() as f32).sqrt())
        .collect()
}

/// The loudness above which a frame counts as sound: 5% of the way from the quiet floor
/// (10th percentile) to the loud level (99th percentile).
fn threshold(rms: &[f32]) -> f32 {
    let mut sorted = rms.to_vec();
    sorted.sort_by(f32::total_cmp);
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q) as usize];
    let (floor, loud) = (at(0.10), at(0.99));
    floor + (loud - floor) * 0.05
}

/// The loudness of a window of samples, 10 ms frame by frame, and the level that counts
/// as sound; computed once per window for [`narrow`] and [`swallowed`].
pub struct Loudness {
    rms: Vec<f32>,
    thr: f32,
}

impl Loudness {
    /// The loudness of `samples`; `None` for less than one frame.
    pub fn of(samples: &[f32]) -> Option<Loudness> {
        if samples.len() < FRAME {
            return None;
        }
        let rms = frame_rms(samples);
        let thr = threshold(&rms);
        Some(Loudness { rms, thr })
    }
}

/// Narrows `segs` (times relative to the window's start, in order) to the sound within
/// them.
pub fn narrow(loud: &Loudness, segs: &mut [TimedText]) {
    let (rms, thr) = (&loud.rms, loud.thr);
    if segs.is_empty() || thr <= 0.0 {
        return;
    }
    let frames = rms.len();
    let to_frame = |ms: u64| ((ms / 10) as usize).min(frames);
    let starts: Vec<u64> = segs.iter().map(|s| s.start_ms).collect();
    for (i, s) in segs.iter_mut().enumerate() {
        let (a, b) = (to_frame(s.start_ms), to_frame(s.end_ms));
        let limit = starts
            .get(i + 1)
            .map_or(frames, |&n| to_frame(n))
            .min(b + END_SLACK)
            .max(b);
        let Some(first) = (a..b.max(a)).find(|&f| rms[f] >= thr) else {
            continue;
        };
        // The end: the last loud frame of the sound that runs on from within the segment.
        let mut last = (first..b).rev().find(|&f| rms[f] >= thr).unwrap_or(first);
        let mut quiet = 0;
        for (f, &level) in rms.iter().enumerate().take(limit).skip(b.max(first)) {
            if level >= thr {
                last = f;
                quiet = 0;
            } else {
                quiet += 1;
                if quiet > 30 {
                    break;
                }
            }
        }
        s.start_ms = first as u64 * 10;
        s.end_ms = (last as u64 + 1) * 10;
    }
}

/// Frames of quiet inside a segment that mark it as covering speech it does not hold.
const LONG_GAP: usize = 150;

/// The first segment that spans a long silence (1.5 s) with sound after it, and that
/// silence's start and end in milliseconds. Whisper sometimes ends its decoding of a
/// 30-second chunk after the first sentence and stretches that sentence's segment over
/// the rest of the chunk, whose speech it then never transcribes; the speech after the
/// gap must be transcribed again.
pub fn swallowed(loud: &Loudness, segs: &[TimedText]) -> Option<(usize, u64, u64)> {
    let (rms, thr) = (&loud.rms, loud.thr);
    let frames = rms.len();
    for (i, s) in segs.iter().enumerate() {
        let (a, b) = (
            ((s.start_ms / 10) as usize).min(frames),
            ((s.end_ms / 10) as usize).min(frames),
        );
        let mut quiet_from = None;
        for (f, &level) in rms.iter().enumerate().take(b).skip(a) {
            if level >= thr {
                if let Some(q) = quiet_from.take() {
                    if f - q >= LONG_GAP {
                        return Some((i, q as u64 * 10, f as u64 * 10));
                    }
                }
            } else if quiet_from.is_none() {
                quiet_from = Some(f);
            }
        }
    }
    None
}

/// Where to end a window of `samples` so that no word is cut: the middle of the quietest
/// 200 ms in its last 30% (a pause, in speech), in samples.
pub fn quiet_cut(samples: &[f32]) -> usize {
    let rms = frame_rms(samples);
    let span = 20;
    let from = rms.len() * 7 / 10;
    if rms.len() < from + span {
        return samples.len();
    }
    let mut best = (f32::INFINITY, rms.len());
    let mut sum: f32 = rms[from..from + span].iter().sum();
    for start in from..=rms.len() - span {
        if start > from {
            sum += rms[start + span - 1] - rms[start - 1];
        }
        // Ties go to the earliest span, so the cut falls where a pause begins.
        if sum < best.0 - 1e-6 {
            best = (sum, start);
        }
    }
    ((best.1 + span / 2) * FRAME).min(samples.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(secs: f32) -> Vec<f32> {
        (0..(secs * RATE as f32) as usize)
            .map(|i| (i as f32 * 0.05).sin() * 0.5)
            .collect()
    }

    #[test]
    fn segments_narrow_to_the_sound() {
        // 3 s of silence, 2 s of sound, 4 s of silence, 1.5 s of sound.
        let mut s = vec![0.0; 3 * RATE as usize];
        s.extend(tone(2.0));
        s.extend(vec![0.0; 4 * RATE as usize]);
        s.extend(tone(1.5));
        let seg = |a, b| TimedText {
            start_ms: a,
            end_ms: b,
            text: "x".into(),
        };
        let mut segs = vec![seg(0, 7000), seg(7000, 10_000)];
        narrow(&Loudness::of(&s).unwrap(), &mut segs);
        assert_eq!((segs[0].start_ms, segs[0].end_ms), (3000, 5000));
        // Whisper closed the second segment early: it runs on to the end of the sound.
        assert_eq!((segs[1].start_ms, segs[1].end_ms), (9000, 10_500));
    }

    #[test]
    fn windows_end_in_a_pause() {
        // Sound until 8.0 s, a pause until 8.6 s, sound again to 10 s.
        let mut s = tone(8.0);
        s.extend(vec![0.0; (0.6 * RATE as f32) as usize]);
        s.extend(tone(1.4));
        let cut = quiet_cut(&s) as f32 / RATE as f32;
        assert!((8.0..=8.6).contains(&cut), "cut at {cut} s");
    }

    #[test]
    fn a_segment_over_a_long_silence_is_found() {
        let mut s = tone(1.0);
        s.extend(vec![0.0; 2 * RATE as usize]);
        s.extend(tone(1.0));
        let seg = TimedText {
            start_ms: 0,
            end_ms: 4000,
            text: "x".into(),
        };
        assert_eq!(
            swallowed(&Loudness::of(&s).unwrap(), std::slice::from_ref(&seg)),
            Some((0, 1000, 3000))
        );
        let short = TimedText {
            end_ms: 1000,
            ..seg
        };
        assert_eq!(swallowed(&Loudness::of(&s).unwrap(), &[short]), None);
    }

    #[test]
    fn silence_keeps_times() {
        let s = vec![0.0; RATE as usize];
        let mut segs = vec![TimedText {
            start_ms: 0,
            end_ms: 1000,
            text: "x".into(),
        }];
        narrow(&Loudness::of(&s).unwrap(), &mut segs);
        assert_eq!((segs[0].start_ms, segs[0].end_ms), (0, 1000));
    }
}
