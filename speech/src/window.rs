//! Windows over a long recording: samples are buffered up to a window's length, each
//! window ends at a pause ([`crate::align::quiet_cut`]) and is transcribed on its own,
//! and its segments' times are moved to the recording's time. Memory is bounded by the
//! window, and times run on across windows.

use crate::audio::RATE;
use crate::{Result, TimedText};

/// Transcribes one window: its segments, with times from the window's start.
pub type Transcribe<'a> = dyn FnMut(&[f32]) -> Result<Vec<TimedText>> + 'a;

/// The windowing state of one recording.
pub struct Windows {
    window: usize,
    buf: Vec<f32>,
    /// Position of `buf[0]` in the recording, in samples.
    offset: u64,
    out: Vec<TimedText>,
}

impl Windows {
    /// Windows of `window_secs` (at least 10).
    pub fn new(window_secs: u32) -> Windows {
        Windows {
            window: (window_secs.max(10) * RATE) as usize,
            buf: Vec::new(),
            offset: 0,
            out: Vec::new(),
        }
    }

    /// More samples of the recording; full windows are transcribed with `run`.
    pub fn push(&mut self, samples: &[f32], run: &mut Transcribe<'_>) -> Result<()> {
        self.buf.extend_from_slice(samples);
        while self.buf.len() >= self.window {
            self.window_done(false, run)?;
        }
        Ok(())
    }

    /// Seconds of the recording transcribed so far.
    pub fn position_secs(&self) -> f64 {
        self.offset as f64 / RATE as f64
    }

    /// The end of the recording: every segment, in order.
    pub fn finish(mut self, run: &mut Transcribe<'_>) -> Result<Vec<TimedText>> {
        if !self.buf.is_empty() {
            self.window_done(true, run)?;
        }
        Ok(self.out)
    }

    fn window_done(&mut self, last: bool, run: &mut Transcribe<'_>) -> Result<()> {
        // A window ends in a pause, so no word is split between two windows.
        let consumed = if last {
            self.buf.len()
        } else {
            crate::align::quiet_cut(&self.buf[..self.window])
        };
        let segs = run(&self.buf[..consumed])?;
        let base_ms = self.offset * 1000 / RATE as u64;
        self.out.extend(segs.into_iter().map(|mut s| {
            s.start_ms += base_ms;
            s.end_ms += base_ms;
            s
        }));
        self.buf.drain(..consumed);
        self.offset += consumed as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for Whisper: one segment per run of sound in the window.
    fn sounds(samples: &[f32]) -> Result<Vec<TimedText>> {
        let ms = |i: usize| (i as u64 * 1000) / RATE as u64;
        let mut out = Vec::new();
        let mut start = None;
        for (i, s) in samples.iter().chain([&0.0]).enumerate() {
            match (s.abs() > 0.01, start) {
                (true, None) => start = Some(i),
                (false, Some(a)) => {
                    out.push(TimedText {
                        start_ms: ms(a),
                        end_ms: ms(i),
                        text: "x".into(),
                    });
                    start = None;
                }
                _ => {}
            }
        }
        Ok(out)
    }

    #[test]
    fn windows_end_in_pauses_and_times_run_on() {
        // 37 s: 1.5 s of sound starting 1.2 s into every 4 s (1.2, 5.2, 9.2, ... 33.2 s),
        // so sounds cross the 10, 20 and 30 s marks a fixed window would cut at.
        let rate = RATE as usize;
        let at = |ms: u64| ms as usize * rate / 1000;
        let mut rec = vec![0.0f32; 37 * rate];
        for k in 0..9u64 {
            for s in &mut rec[at(k * 4000 + 1200)..at(k * 4000 + 2700)] {
                *s = 0.5;
            }
        }
        let mut w = Windows::new(10);
        let mut windows = Vec::new();
        let mut run = |s: &[f32]| {
            windows.push(s.len());
            sounds(s)
        };
        // Fed in uneven blocks, as a decoder delivers them.
        for block in rec.chunks(12_345) {
            w.push(block, &mut run).unwrap();
        }
        let segs = w.finish(&mut run).unwrap();
        assert!(windows.len() >= 4, "windows of {windows:?} samples");
        assert!(windows.iter().all(|&n| n <= 10 * rate));
        let spans: Vec<(u64, u64)> = segs.iter().map(|s| (s.start_ms, s.end_ms)).collect();
        let want: Vec<(u64, u64)> = (0..9).map(|k| (k * 4000 + 1200, k * 4000 + 2700)).collect();
        assert_eq!(spans, want, "no sound split or shifted by a window's edge");
    }
}
