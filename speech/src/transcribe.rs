//! Transcription with whisper.cpp (through whisper-rs): 16 kHz mono samples in, segments
//! with their start and end out, a long recording in windows ([`crate::window`]).

use std::path::Path;

use whisper_rs::{FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters};

use crate::audio::RATE;
use crate::window::Windows;
use crate::{Result, SpeechError, TimedText};

/// A loaded model.
pub struct Transcriber {
    ctx: WhisperContext,
    threads: usize,
    multilingual: bool,
}

fn whisper_err(what: &str) -> impl Fn(whisper_rs::WhisperError) -> SpeechError + '_ {
    move |e| SpeechError::Transcribe(format!("{what}: {e}"))
}

impl Transcriber {
    /// Loads a ggml model file; `threads` is whisper.cpp's thread count per transcription.
    pub fn load(path: &Path, threads: usize, multilingual: bool) -> Result<Transcriber> {
        static QUIET: std::sync::Once = std::sync::Once::new();
        // whisper.cpp logs to stderr; its hooks send that to the (absent) log backend.
        QUIET.call_once(whisper_rs::install_logging_hooks);
        let p = path
            .to_str()
            .ok_or_else(|| SpeechError::Model(format!("{}: not UTF-8", path.display())))?;
        // Flash attention stays off (whisper-rs's default, not whisper.cpp's): on this
        // project's 2-core machine it made tiny.en 15% and base 60% slower
        // (benches/peer/wer.sh, docs/BENCHMARKS.md) for a few words of accuracy.
        let ctx = WhisperContext::new_with_params(p, WhisperContextParameters::default()).map_err(
            |e| {
                SpeechError::Model(format!(
                    "whisper.cpp cannot load {}: {e}; import the model again",
                    path.display()
                ))
            },
        )?;
        Ok(Transcriber {
            ctx,
            threads: threads.max(1),
            multilingual,
        })
    }

    /// A streaming session over one recording, with windows of `window_secs`.
    pub fn session(&self, window_secs: u32) -> Result<Session<'_>> {
        Ok(Session {
            t: self,
            state: self
                .ctx
                .create_state()
                .map_err(whisper_err("creating a whisper state"))?,
            windows: Windows::new(window_secs),
        })
    }

    /// Segments of `samples`, narrowed to their sound. Where Whisper stretched a segment
    /// over a long silence and dropped the speech after it, that speech is transcribed
    /// again from where it starts.
    fn run(&self, state: &mut whisper_rs::WhisperState, samples: &[f32]) -> Result<Vec<TimedText>> {
        let mut out = Vec::new();
        let mut from = 0usize;
        let loud = crate::align::Loudness::of(samples);
        // Each rerun starts after a silence of 1.5 s or more, so they are few.
        for _ in 0..64 {
            let base = (from as u64 * 1000) / RATE as u64;
            let mut segs = self.run_once(state, &samples[from..])?;
            for s in &mut segs {
                s.start_ms += base;
                s.end_ms += base;
            }
            if let Some(l) = &loud {
                crate::align::narrow(l, &mut segs);
                segs = crate::align::split_sentences(l, segs);
            }
            match loud
                .as_ref()
                .and_then(|l| crate::align::swallowed(l, &segs))
            {
                Some((i, gap_start, gap_end)) => {
                    segs.truncate(i + 1);
                    segs[i].end_ms = gap_start;
                    out.extend(segs);
                    let next = ((gap_end.saturating_sub(200)) * RATE as u64 / 1000) as usize;
                    if next <= from || next >= samples.len() {
                        break;
                    }
                    from = next;
                }
                None => {
                    out.extend(segs);
                    break;
                }
            }
        }
        Ok(out)
    }

    fn run_once(
        &self,
        state: &mut whisper_rs::WhisperState,
        samples: &[f32],
    ) -> Result<Vec<TimedText>> {
        let mut p = FullParams::new(SamplingStrategy::Greedy { best_of: 1 });
        p.set_n_threads(self.threads as i32);
        p.set_language(Some(if self.multilingual { "auto" } else { "en" }));
        p.set_print_progress(false);
        p.set_print_realtime(false);
        p.set_print_special(false);
        p.set_print_timestamps(false);
        state
            .full(p, samples)
            .map_err(whisper_err("transcribing"))?;
        let mut out = Vec::new();
        for seg in state.as_iter() {
            let text = seg
                .to_str_lossy()
                .map_err(whisper_err("reading a segment"))?
                .trim()
                .to_string();
            if text.is_empty() {
                continue;
            }
            let (t0, t1) = (seg.start_timestamp(), seg.end_timestamp());
            out.push(TimedText {
                start_ms: t0.max(0) as u64 * 10,
                end_ms: t1.max(0) as u64 * 10,
                text,
            });
        }
        Ok(out)
    }
}

/// Transcription of one recording, fed in blocks, in windows.
pub struct Session<'a> {
    t: &'a Transcriber,
    state: whisper_rs::WhisperState,
    windows: Windows,
}

impl Session<'_> {
    /// More samples of the recording.
    pub fn push(&mut self, samples: &[f32]) -> Result<()> {
        let (t, state) = (self.t, &mut self.state);
        self.windows.push(samples, &mut |w| t.run(state, w))
    }

    /// Seconds of the recording transcribed so far.
    pub fn position_secs(&self) -> f64 {
        self.windows.position_secs()
    }

    /// The end of the recording: every segment, in order.
    pub fn finish(mut self) -> Result<Vec<TimedText>> {
        let (t, state) = (self.t, &mut self.state);
        self.windows.finish(&mut |w| t.run(state, w))
    }
}
