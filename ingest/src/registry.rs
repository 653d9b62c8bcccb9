//! Which extractor reads a file: by extension, then, for a name that does not tell, by
//! its first bytes. It sits above the extractors (documents and images in
//! [`crate::extractor`], recordings in [`crate::speech`]).

use std::sync::Arc;

use crate::extractor::{looks_like_text, Extractor, Html, Image, Markdown, Pdf, Subtitles, Text};
use crate::speech::{is_recording, Engine, Media};

/// The extractor for a file, by extension and then by content: `None` for content no
/// extractor reads (it is still found by name). `speech` gives the loaded speech model,
/// if any (asked only for recordings and videos).
pub fn choose(
    path: &str,
    head: &dyn Fn() -> Vec<u8>,
    ocr: &dyn Fn() -> bool,
    speech: &dyn Fn() -> Option<Arc<Engine>>,
) -> Option<Box<dyn Extractor>> {
    Some(match lifeos_speech::audio::extension(path).as_str() {
        "md" | "markdown" => Box::new(Markdown),
        "html" | "htm" | "xhtml" => Box::new(Html),
        "srt" | "vtt" => Box::new(Subtitles),
        "pdf" => Box::new(Pdf),
        "png" | "jpg" | "jpeg" | "gif" | "webp" | "tif" | "tiff" | "bmp" => {
            Box::new(Image { ocr: ocr() })
        }
        _ if is_recording(path) => Box::new(Media { engine: speech() }),
        // Only a file whose name does not tell is read (its first bytes) to decide.
        _ => {
            let head = head();
            let image = image::guess_format(&head).is_ok_and(|f| {
                matches!(
                    f,
                    image::ImageFormat::Png | image::ImageFormat::Jpeg | image::ImageFormat::Gif
                )
            });
            if head.starts_with(b"%PDF-") {
                Box::new(Pdf)
            } else if image {
                Box::new(Image { ocr: ocr() })
            } else if looks_like_text(&head) {
                Box::new(Text)
            } else {
                return None;
            }
        }
    })
}
