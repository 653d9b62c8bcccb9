//! Images: format, dimensions, EXIF fields, and what changed in the pixels: the share of
//! pixels changed and the regions, or, when sizes differ, a perceptual-hash distance.

use std::io::Cursor;

use image::{DynamicImage, GenericImageView, ImageFormat, Rgba, RgbaImage};

use crate::{DiffError, DiffPlugin, FileDiff, Located, Location, Op, Options, Probe, Side};

/// Largest encoded image read.
pub const MAX_IMAGE_BYTES: u64 = 256 << 20;
/// A channel difference at or below this is noise (re-encoding).
const THRESHOLD: u8 = 24;
/// Pixels are grouped in cells of this size to find changed regions.
const CELL: u32 = 8;

/// The image plugin.
pub struct ImagePlugin;

/// The formats this plugin decodes, recognised by their magic bytes (BMP's two-letter
/// magic is too weak to trust without the extension).
fn sniff(head: &[u8], ext: &str) -> Option<ImageFormat> {
    let f = image::guess_format(head).ok()?;
    match f {
        ImageFormat::Png
        | ImageFormat::Jpeg
        | ImageFormat::Gif
        | ImageFormat::WebP
        | ImageFormat::Tiff => Some(f),
        ImageFormat::Bmp if ext == "bmp" => Some(f),
        _ => None,
    }
}

struct Decoded {
    format: String,
    image: DynamicImage,
    exif: Vec<(String, String)>,
}

fn decode(side: &Side<'_>) -> Result<Decoded, DiffError> {
    let bytes = side.load_within(MAX_IMAGE_BYTES, "image")?;
    let fallback = |e: String| {
        DiffError::Fallback(format!("{} cannot be decoded as an image: {e}", side.path))
    };
    let format = image::guess_format(&bytes).map_err(|e| fallback(e.to_string()))?;
    let mut reader = image::ImageReader::with_format(Cursor::new(&bytes[..]), format);
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(1 << 30);
    limits.max_image_width = Some(30_000);
    limits.max_image_height = Some(30_000);
    reader.limits(limits);
    let image = reader.decode().map_err(|e| fallback(e.to_string()))?;
    Ok(Decoded {
        format: format!("{format:?}").to_uppercase(),
        image,
        exif: exif_fields(&bytes),
    })
}

/// EXIF fields worth comparing: date taken, camera, GPS, orientation.
pub fn exif_fields(bytes: &[u8]) -> Vec<(String, String)> {
    use exif::Tag;
    exif_values(
        bytes,
        &[
            ("date taken", Tag::DateTimeOriginal),
            ("camera make", Tag::Make),
            ("camera model", Tag::Model),
            ("orientation", Tag::Orientation),
            ("GPS latitude", Tag::GPSLatitude),
            ("GPS latitude ref", Tag::GPSLatitudeRef),
            ("GPS longitude", Tag::GPSLongitude),
            ("GPS longitude ref", Tag::GPSLongitudeRef),
        ],
    )
}

/// The values of the named EXIF `tags` an image has (primary image), for people: with
/// their units, without quotes; none if the image has no readable EXIF.
pub fn exif_values(bytes: &[u8], tags: &[(&str, exif::Tag)]) -> Vec<(String, String)> {
    let Ok(e) = exif::Reader::new().read_from_container(&mut Cursor::new(bytes)) else {
        return Vec::new();
    };
    tags.iter()
        .filter_map(|(name, tag)| {
            e.get_field(*tag, exif::In::PRIMARY).map(|f| {
                (
                    name.to_string(),
                    f.display_value()
                        .with_unit(&e)
                        .to_string()
                        .trim_matches('"')
                        .to_string(),
                )
            })
        })
        .collect()
}

/// A 64-bit difference hash (9×8 grey thumbnail, one bit per horizontal gradient).
pub fn dhash(img: &DynamicImage) -> u64 {
    let small = img
        .resize_exact(9, 8, image::imageops::FilterType::Triangle)
        .to_luma8();
    let mut h = 0u64;
    for y in 0..8 {
        for x in 0..8 {
            h = (h << 1) | u64::from(small.get_pixel(x, y)[0] < small.get_pixel(x + 1, y)[0]);
        }
    }
    h
}

/// Regions of changed pixels, and the number of changed pixels. Pixels are grouped by
/// the 8×8 cells they fall in, and cells that touch (also diagonally) form one region;
/// each region's box is the exact bounding box of its changed pixels.
pub fn changed_regions(a: &RgbaImage, b: &RgbaImage) -> (u64, Vec<(u32, u32, u32, u32)>) {
    let (w, h) = b.dimensions();
    let (cw, ch) = (w.div_ceil(CELL), h.div_ceil(CELL));
    // Per cell, the bounding box (x0, y0, x1, y1 inclusive) of its changed pixels.
    let mut cells: Vec<Option<(u32, u32, u32, u32)>> = vec![None; (cw * ch) as usize];
    let mut changed = 0u64;
    for (x, y, pb) in b.enumerate_pixels() {
        let pa = a.get_pixel(x, y);
        if pa
            .0
            .iter()
            .zip(pb.0.iter())
            .any(|(p, q)| p.abs_diff(*q) > THRESHOLD)
        {
            changed += 1;
            let cell = &mut cells[((y / CELL) * cw + x / CELL) as usize];
            *cell = Some(match *cell {
                None => (x, y, x, y),
                Some((x0, y0, x1, y1)) => (x0.min(x), y0.min(y), x1.max(x), y1.max(y)),
            });
        }
    }
    let mut seen = vec![false; cells.len()];
    let mut boxes = Vec::new();
    for start in 0..cells.len() {
        if cells[start].is_none() || seen[start] {
            continue;
        }
        let (mut x0, mut y0, mut x1, mut y1) = (u32::MAX, u32::MAX, 0, 0);
        let mut stack = vec![start];
        seen[start] = true;
        while let Some(c) = stack.pop() {
            if let Some((bx0, by0, bx1, by1)) = cells[c] {
                x0 = x0.min(bx0);
                y0 = y0.min(by0);
                x1 = x1.max(bx1);
                y1 = y1.max(by1);
            }
            let (cx, cy) = (c as u32 % cw, c as u32 / cw);
            for (dx, dy) in [
                (-1i32, 0i32),
                (1, 0),
                (0, -1),
                (0, 1),
                (-1, -1),
                (1, 1),
                (-1, 1),
                (1, -1),
            ] {
                let (nx, ny) = (cx as i32 + dx, cy as i32 + dy);
                if nx < 0 || ny < 0 || nx >= cw as i32 || ny >= ch as i32 {
                    continue;
                }
                let n = (ny as u32 * cw + nx as u32) as usize;
                if cells[n].is_some() && !seen[n] {
                    seen[n] = true;
                    stack.push(n);
                }
            }
        }
        boxes.push((x0, y0, x1 - x0 + 1, y1 - y0 + 1));
    }
    boxes.sort_by_key(|b| std::cmp::Reverse(u64::from(b.2) * u64::from(b.3)));
    (changed, boxes)
}

/// The new image, dimmed, with each changed region outlined in red, as PNG.
fn visual(b: &RgbaImage, boxes: &[(u32, u32, u32, u32)]) -> Option<Vec<u8>> {
    let mut img = b.clone();
    for p in img.pixels_mut() {
        for c in 0..3 {
            p.0[c] = (u16::from(p.0[c]) * 2 / 5 + 40) as u8;
        }
    }
    let red = Rgba([255, 32, 32, 255]);
    for &(x, y, w, h) in boxes {
        for t in 0..2u32 {
            for i in x..x + w {
                for yy in [
                    y + t.min(h.saturating_sub(1)),
                    (y + h).saturating_sub(1 + t),
                ] {
                    if i < img.width() && yy < img.height() {
                        img.put_pixel(i, yy, red);
                    }
                }
            }
            for j in y..y + h {
                for xx in [
                    x + t.min(w.saturating_sub(1)),
                    (x + w).saturating_sub(1 + t),
                ] {
                    if xx < img.width() && j < img.height() {
                        img.put_pixel(xx, j, red);
                    }
                }
            }
        }
    }
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Png).ok()?;
    Some(out.into_inner())
}

impl DiffPlugin for ImagePlugin {
    fn name(&self) -> &str {
        "image"
    }

    fn score(&self, probe: &Probe<'_>) -> Option<u8> {
        crate::score_by(
            sniff(probe.head, &probe.extension).is_some(),
            matches!(
                probe.extension.as_str(),
                "png" | "jpg" | "jpeg" | "gif" | "bmp" | "webp" | "tif" | "tiff"
            ),
        )
    }

    fn diff(
        &self,
        old: Option<&Side<'_>>,
        new: Option<&Side<'_>>,
        opts: &Options,
    ) -> Result<FileDiff, DiffError> {
        let (a, b) = match (old, new) {
            (Some(o), Some(n)) => (decode(o)?, decode(n)?),
            (None, Some(n)) => {
                let d = decode(n)?;
                let (w, h) = d.image.dimensions();
                return Ok(FileDiff {
                    plugin: "image".into(),
                    summary: format!("new {} image, {w}×{h}", d.format),
                    ..FileDiff::default()
                });
            }
            (Some(o), None) => {
                let d = decode(o)?;
                let (w, h) = d.image.dimensions();
                return Ok(FileDiff {
                    plugin: "image".into(),
                    summary: format!("{} image removed, {w}×{h}", d.format),
                    ..FileDiff::default()
                });
            }
            (None, None) => unreachable!("a side exists"),
        };
        let mut changes = Vec::new();
        let field = |name: &str| Location::Field { name: name.into() };
        if a.format != b.format {
            changes.push(
                Located::new(
                    Op::Changed,
                    field("format"),
                    format!("format {} → {}", a.format, b.format),
                )
                .values(Some(a.format.clone()), Some(b.format.clone())),
            );
        }
        let (da, db) = (a.image.dimensions(), b.image.dimensions());
        if da != db {
            changes.push(
                Located::new(
                    Op::Changed,
                    field("dimensions"),
                    format!("dimensions {}×{} → {}×{}", da.0, da.1, db.0, db.1),
                )
                .values(
                    Some(format!("{}×{}", da.0, da.1)),
                    Some(format!("{}×{}", db.0, db.1)),
                ),
            );
        }
        for (name, va) in &a.exif {
            match b.exif.iter().find(|(n, _)| n == name) {
                Some((_, vb)) if vb != va => changes.push(
                    Located::new(
                        Op::Changed,
                        field(name),
                        format!("EXIF {name}: {va} → {vb}"),
                    )
                    .values(Some(va.clone()), Some(vb.clone())),
                ),
                None => changes.push(
                    Located::new(
                        Op::Removed,
                        field(name),
                        format!("EXIF {name} removed ({va})"),
                    )
                    .values(Some(va.clone()), None),
                ),
                _ => {}
            }
        }
        for (name, vb) in &b.exif {
            if !a.exif.iter().any(|(n, _)| n == name) {
                changes.push(
                    Located::new(Op::Added, field(name), format!("EXIF {name} added ({vb})"))
                        .values(None, Some(vb.clone())),
                );
            }
        }
        let mut visual_png = None;
        let summary = if da == db {
            let (ra, rb) = (a.image.to_rgba8(), b.image.to_rgba8());
            let (n, boxes) = changed_regions(&ra, &rb);
            let share = 100.0 * n as f64 / (f64::from(db.0) * f64::from(db.1)).max(1.0);
            for &(x, y, w, h) in &boxes {
                changes.push(Located::new(
                    Op::Changed,
                    Location::Region { x, y, w, h },
                    format!("pixels changed in {w}×{h} at ({x}, {y})"),
                ));
            }
            if opts.visual {
                visual_png = visual(&rb, &boxes);
            }
            if n == 0 {
                format!(
                    "{}×{} {}: pixels identical{}",
                    db.0,
                    db.1,
                    b.format,
                    if changes.is_empty() {
                        " (re-encoded)"
                    } else {
                        ""
                    }
                )
            } else {
                format!(
                    "{}×{} {}: {share:.2}% of pixels changed in {}",
                    db.0,
                    db.1,
                    b.format,
                    crate::counted(boxes.len(), "region", "regions")
                )
            }
        } else {
            let dist = (dhash(&a.image) ^ dhash(&b.image)).count_ones();
            let ratio = |d: (u32, u32)| f64::from(d.0) / f64::from(d.1.max(1));
            let kind = if (ratio(da) - ratio(db)).abs() < 0.01 {
                if dist <= 10 {
                    "resized"
                } else {
                    "resized and edited"
                }
            } else if dist <= 20 {
                "cropped or reframed"
            } else {
                "replaced by a different picture"
            };
            changes.push(Located::new(
                Op::Changed,
                field("perceptual hash"),
                format!("perceptual-hash distance {dist}/64: {kind}"),
            ));
            format!(
                "{}×{} → {}×{}: {kind} (perceptual-hash distance {dist}/64)",
                da.0, da.1, db.0, db.1
            )
        };
        Ok(FileDiff {
            plugin: "image".into(),
            summary,
            changes,
            notes: Vec::new(),
            visual: visual_png,
        })
    }
}
