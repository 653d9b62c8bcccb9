//! Untrusted speech inputs: a CTranslate2 model.bin with its vocabulary, a ggml model
//! file, and media bytes under every recording extension. Converting, checking and
//! decoding must fail cleanly, never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lifeos_speech::audio::{self, Source};

fuzz_target!(|data: &[u8]| {
    let mut sink = Vec::new();
    let _ = lifeos_speech::convert::ct2_to_ggml(data, "a\nb\n<|endoftext|>", &mut sink);
    let _ = lifeos_speech::convert::check_ggml(data);
    let _ = lifeos_speech::convert::vocabulary(&String::from_utf8_lossy(data));
    for ext in ["wav", "mp3", "flac", "ogg", "m4a", "mp4", "mkv"] {
        let name = format!("x.{ext}");
        let open = || {
            let src: Box<dyn Source> = Box::new(std::io::Cursor::new(data.to_vec()));
            Ok((src, data.len() as u64))
        };
        let _ = audio::probe(&name, &open);
        // Bounded: a tiny input can claim hours of audio; stop after a minute of samples.
        let mut n = 0usize;
        let _ = audio::decode(&name, &open, &mut |b| {
            n += b.len();
            if n > audio::RATE as usize * 60 {
                return Err(lifeos_speech::SpeechError::Decode("enough".into()));
            }
            Ok(())
        });
    }
});
