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
/// as sound; computed once per window for [`narrow`], [`split_sentences`] and
/// [`swallowed`].
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

    /// The frame that holds the time `ms` (from the window's start), at most the end.
    fn frame(&self, ms: u64) -> usize {
        ((ms / 10) as usize).min(self.rms.len())
    }
}

/// Frames of quiet that end a run of sound (a pause between sentences, not between words).
const PAUSE: usize = 30;
/// Whether speech goes on at frame `a`: the frame before is loud, and most of the
/// [`PAUSE`] frames before it (a stray loud frame in noise is not speech).
fn speaking(rms: &[f32], thr: f32, a: usize) -> bool {
    let before = &rms[a.saturating_sub(PAUSE)..a];
    a > 0
        && rms[a - 1] >= thr
        && before.iter().filter(|&&l| l >= thr).count() * 10 >= before.len() * 6
}

/// Frames over which a start of speech must hold.
const ONSET: usize = 10;

/// Whether sound starts and holds at frame `f`: it is loud, and 8 of the 10 frames from it.
fn onset(rms: &[f32], thr: f32, f: usize) -> bool {
    let next = &rms[f..(f + ONSET).min(rms.len())];
    rms[f] >= thr && next.iter().filter(|&&l| l >= thr).count() * 10 >= ONSET * 8
}

/// The first stretch of at least `min` quiet frames in `rms` from frame `from` after which
/// sound resumes: its first frame and the frame where sound resumes.
fn first_pause(rms: &[f32], thr: f32, from: usize, min: usize) -> Option<(usize, usize)> {
    let mut quiet_from = None;
    for (f, &level) in rms.iter().enumerate().skip(from) {
        if level >= thr {
            match quiet_from.take() {
                Some(q) if f - q >= min => return Some((q, f)),
                _ => {}
            }
        } else if quiet_from.is_none() {
            quiet_from = Some(f);
        }
    }
    None
}

/// Narrows `segs` (times relative to the window's start, in order) to the sound within
/// them.
///
/// A segment that Whisper starts while speech is still going on (most of the 300 ms before
/// its start is loud, and the last 10 ms), where that speech stops for a pause inside the
/// segment, starts after the pause: the sound before it is the end of the previous
/// segment's speech, whose end moves there. (Whisper's segment times are often whole
/// seconds; without this, such a segment starts in the previous sentence's last word, and
/// may look as if it spans a long silence.)
pub fn narrow(loud: &Loudness, segs: &mut [TimedText]) {
    let (rms, thr) = (&loud.rms, loud.thr);
    if segs.is_empty() || thr <= 0.0 {
        return;
    }
    let frames = rms.len();
    let starts: Vec<u64> = segs.iter().map(|s| s.start_ms).collect();
    for i in 0..segs.len() {
        let (mut a, b) = (loud.frame(segs[i].start_ms), loud.frame(segs[i].end_ms));
        let limit = starts
            .get(i + 1)
            .map_or(frames, |&n| loud.frame(n))
            .min(b + END_SLACK)
            .max(b);
        if i > 0 && a < b && speaking(rms, thr, a) {
            if let Some((quiet, next)) = first_pause(&rms[..b], thr, a, PAUSE) {
                let prev = &mut segs[i - 1];
                prev.end_ms = prev.end_ms.max(quiet as u64 * 10);
                a = next;
            }
        }
        let s = &mut segs[i];
        // Speech starts where sound holds (a stray loud frame in noise does not count);
        // failing that, at the first loud frame.
        let Some(first) = (a..b.max(a))
            .find(|&f| onset(rms, thr, f))
            .or_else(|| (a..b.max(a)).find(|&f| rms[f] >= thr))
        else {
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
                if quiet > PAUSE {
                    break;
                }
            }
        }
        s.start_ms = first as u64 * 10;
        s.end_ms = (last as u64 + 1) * 10;
    }
}

/// Frames of quiet between two sentences that Whisper put in one segment.
const SENTENCE_GAP: usize = 50;

/// The sentences of a segment's text: pieces ending in `.`, `?` or `!` before whitespace
/// (and the rest), trimmed.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut from = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if let Some(&(at, next)) = chars.peek() {
            if matches!(c, '.' | '?' | '!') && next.is_whitespace() {
                out.push(text[from..at].trim());
                from = at;
            }
        }
    }
    out.push(text[from..].trim());
    out.retain(|s| !s.is_empty());
    out
}

/// Splits segments that hold several sentences at the pauses between them: when a
/// segment's sentences are exactly as many as its runs of sound separated by pauses of
/// 500 ms or more, each sentence becomes a segment with its run's times. (Whisper
/// sometimes gives two sentences one segment, which would leave the second without its
/// start.) Any other segment is kept as it is.
pub fn split_sentences(loud: &Loudness, segs: Vec<TimedText>) -> Vec<TimedText> {
    let (rms, thr) = (&loud.rms, loud.thr);
    let mut out = Vec::with_capacity(segs.len());
    for s in segs {
        let parts = sentences(&s.text);
        if parts.len() < 2 || thr <= 0.0 {
            out.push(s);
            continue;
        }
        let (a, b) = (loud.frame(s.start_ms), loud.frame(s.end_ms));
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for f in (a..b).filter(|&f| rms[f] >= thr) {
            match runs.last_mut() {
                Some(r) if f - r.1 <= SENTENCE_GAP => r.1 = f,
                _ => runs.push((f, f)),
            }
        }
        if runs.len() == parts.len() {
            out.extend(parts.iter().zip(&runs).map(|(text, r)| TimedText {
                start_ms: r.0 as u64 * 10,
                end_ms: (r.1 as u64 + 1) * 10,
                text: text.to_string(),
            }));
        } else {
            out.push(s);
        }
    }
    out
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
    for (i, s) in segs.iter().enumerate() {
        let (a, b) = (loud.frame(s.start_ms), loud.frame(s.end_ms));
        if let Some((q, f)) = first_pause(&rms[..b], thr, a, LONG_GAP) {
            return Some((i, q as u64 * 10, f as u64 * 10));
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
    fn a_segment_started_in_the_last_word_before_a_pause_starts_after_it() {
        // Sound until 2.5 s, a pause until 3.5 s, sound until 5 s; Whisper put the
        // boundary at 2 s, inside the first sentence's last word.
        let mut s = tone(2.5);
        s.extend(vec![0.0; RATE as usize]);
        s.extend(tone(1.5));
        let seg = |a, b| TimedText {
            start_ms: a,
            end_ms: b,
            text: "x".into(),
        };
        let mut segs = vec![seg(0, 2000), seg(2000, 5000)];
        narrow(&Loudness::of(&s).unwrap(), &mut segs);
        assert_eq!((segs[0].start_ms, segs[0].end_ms), (0, 2500));
        assert_eq!((segs[1].start_ms, segs[1].end_ms), (3500, 5000));
        // Speech that goes on without a pause keeps Whisper's boundary.
        let s = tone(5.0);
        let mut segs = vec![seg(0, 2000), seg(2000, 5000)];
        narrow(&Loudness::of(&s).unwrap(), &mut segs);
        assert_eq!(segs[1].start_ms, 2000);
    }

    #[test]
    fn two_sentences_in_one_segment_are_split_at_the_pause_between_them() {
        let mut s = tone(1.0);
        s.extend(vec![0.0; RATE as usize]);
        s.extend(tone(1.0));
        let loud = Loudness::of(&s).unwrap();
        let seg = |text: &str| TimedText {
            start_ms: 0,
            end_ms: 3000,
            text: text.into(),
        };
        let split = split_sentences(&loud, vec![seg("One two. Three four?")]);
        let got: Vec<(u64, u64, &str)> = split
            .iter()
            .map(|t| (t.start_ms, t.end_ms, t.text.as_str()))
            .collect();
        assert_eq!(got, [(0, 1000, "One two."), (2000, 3000, "Three four?")]);
        // As many sentences as runs of sound, or the segment stays whole.
        for text in ["One two three four.", "One. Two. Three."] {
            assert_eq!(split_sentences(&loud, vec![seg(text)])[0].text, text);
        }
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
    fn a_click_in_the_silence_does_not_start_the_segment() {
        // 2 s of silence with one loud 10 ms frame at 1 s, then 1 s of sound.
        let mut s = vec![0.0; 2 * RATE as usize];
        let click = RATE as usize;
        s[click..click + FRAME].fill(0.5);
        s.extend(tone(1.0));
        let mut segs = vec![TimedText {
            start_ms: 0,
            end_ms: 3000,
            text: "x".into(),
        }];
        narrow(&Loudness::of(&s).unwrap(), &mut segs);
        assert_eq!((segs[0].start_ms, segs[0].end_ms), (2000, 3000));
    }

    #[test]
    fn sentences_end_at_a_stop_before_whitespace() {
        assert_eq!(
            sentences("Is it 3.5? Yes!  Done. and… more"),
            ["Is it 3.5?", "Yes!", "Done.", "and… more"]
        );
        assert_eq!(sentences("  "), Vec::<&str>::new());
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
