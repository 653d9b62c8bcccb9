//! Streaming content-defined chunking (FastCDC v2020) over any reader.

use std::io::Read;

use fastcdc::v2020::FastCDC;

use crate::config::Chunking;

/// The first buffer's size; it doubles while the stream fills it.
const FIRST_BUFFER: usize = 64 * 1024;

/// Cuts a byte stream into chunks whose boundaries depend only on content, so an insertion
/// changes only the chunks around it. Buffers at most four times the largest chunk; the
/// buffer grows as the stream proves long, so a short file does not pay for zeroing it.
pub struct Chunker<R> {
    src: R,
    params: Chunking,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    hasher: blake3::Hasher,
    total: u64,
}

impl<R: Read> Chunker<R> {
    /// A chunker over `src`.
    pub fn new(src: R, params: Chunking) -> Self {
        Chunker {
            src,
            params,
            buf: Vec::new(),
            start: 0,
            end: 0,
            eof: false,
            hasher: blake3::Hasher::new(),
            total: 0,
        }
    }

    fn fill(&mut self) -> std::io::Result<()> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let most = 4 * self.params.max_size as usize;
        while !self.eof {
            if self.end == self.buf.len() {
                if self.buf.len() >= most {
                    break;
                }
                let grown = (2 * self.buf.len()).max(FIRST_BUFFER).min(most);
                self.buf.resize(grown, 0);
            }
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.hasher.update(&self.buf[self.end..self.end + n]);
                    self.end += n;
                    self.total += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The next chunk, or `None` at the end of the stream.
    pub fn next_chunk(&mut self) -> std::io::Result<Option<&[u8]>> {
        if !self.eof && self.end - self.start < self.params.max_size as usize {
            self.fill()?;
        }
        let remaining = self.end - self.start;
        if remaining == 0 {
            return Ok(None);
        }
        let p = self.params;
        let cdc = FastCDC::new(
            &self.buf[self.start..self.end],
            p.min_size,
            p.avg_size,
            p.max_size,
        );
        let (_, cut) = cdc.cut(0, remaining);
        let cut = if cut == 0 { remaining } else { cut };
        let chunk = &self.buf[self.start..self.start + cut];
        self.start += cut;
        Ok(Some(chunk))
    }

    /// The BLAKE3 hash and length of everything read so far (the whole stream once
    /// [`Chunker::next_chunk`] has returned `None`).
    pub fn content_hash(&self) -> (crate::Id, u64) {
        (self.hasher.finalize().into(), self.total)
    }
}

/// The chunk lengths of `data` (for tests and tools).
pub fn chunk_lengths(data: &[u8], params: Chunking) -> Vec<usize> {
    let mut c = Chunker::new(data, params);
    let mut out = Vec::new();
    while let Some(ch) = c.next_chunk().expect("reading a slice cannot fail") {
        out.push(ch.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn small() -> Chunking {
        Chunking {
            min_size: 256,
            avg_size: 1024,
            max_size: 4096,
        }
    }

    fn pseudo_random(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn matches_whole_buffer_fastcdc() {
        let data = pseudo_random(300_000, 7);
        let p = small();
        let expect: Vec<usize> = FastCDC::new(&data, p.min_size, p.avg_size, p.max_size)
            .map(|c| c.length)
            .collect();
        assert_eq!(chunk_lengths(&data, p), expect);
    }

    /// A reader that hands out at most `step` bytes per read.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(out.len()).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_growing_buffer_cuts_where_the_whole_buffer_does() {
        // Default sizes: the buffer starts below the largest chunk and grows in steps
        // while short reads fill it.
        let p = Chunking::default();
        for len in [0, 1, 20_000, FIRST_BUFFER + 1, 5_000_000] {
            let data = pseudo_random(len, len as u64);
            let expect: Vec<usize> = FastCDC::new(&data, p.min_size, p.avg_size, p.max_size)
                .map(|c| c.length)
                .collect();
            let mut c = Chunker::new(
                Trickle {
                    data: &data,
                    step: 10_007,
                },
                p,
            );
            let mut got = Vec::new();
            while let Some(ch) = c.next_chunk().unwrap() {
                got.push(ch.len());
            }
            assert_eq!(got, expect, "{len} bytes");
            assert_eq!(c.content_hash(), (crate::Id::hash(&data), len as u64));
            assert!(c.buf.len() <= (4 * p.max_size as usize).max(FIRST_BUFFER));
        }
    }

    #[test]
    fn empty_stream_has_no_chunks() {
        assert!(chunk_lengths(&[], small()).is_empty());
    }

    proptest! {
        #[test]
        fn boundaries_are_stable_under_an_insertion(seed in any::<u64>(), at in 0usize..200_000, ins in proptest::collection::vec(any::<u8>(), 1..200)) {
            let p = small();
            let data = pseudo_random(200_000, seed);
            let mut edited = data[..at].to_vec();
            edited.extend_from_slice(&ins);
            edited.extend_from_slice(&data[at..]);
            let ends = |d: &[u8]| -> Vec<usize> {
                chunk_lengths(d, p).iter().scan(0, |acc, l| { *acc += l; Some(*acc) }).collect()
            };
            let a = ends(&data);
            let b = ends(&edited);
            // Every boundary before the insertion is unchanged, and boundaries resynchronise
            // after it: once re-aligned, every later boundary is an old one shifted.
            let before: Vec<_> = a.iter().copied().filter(|&e| e + p.max_size as usize <= at).collect();
            prop_assert!(before.iter().all(|e| b.contains(e)));
            let shifted: std::collections::HashSet<_> = b.iter().filter(|&&e| e > at + ins.len()).map(|e| e - ins.len()).collect();
            let after: Vec<_> = a.iter().filter(|&&e| e > at).collect();
            let first_kept = after.iter().position(|e| shifted.contains(e));
            if let Some(k) = first_kept {
                prop_assert!(after[k..].iter().all(|e| shifted.contains(e)), "boundaries diverge again after re-aligning");
                prop_assert!(after[k] - at <= 16 * p.max_size as usize, "re-aligned only {} bytes after the edit", after[k] - at);
            } else {
                prop_assert!(after.len() <= 16, "never re-aligned over {} boundaries", after.len());
            }
            prop_assert_eq!(b.iter().sum::<usize>() > 0, true);
            prop_assert_eq!(*b.last().unwrap(), edited.len());
        }

        #[test]
        fn chunks_respect_bounds(seed in any::<u64>(), n in 0usize..100_000) {
            let p = small();
            let lens = chunk_lengths(&pseudo_random(n, seed), p);
            prop_assert_eq!(lens.iter().sum::<usize>(), n);
            if let Some((_, body)) = lens.split_last() {
                prop_assert!(body.iter().all(|&l| l >= p.min_size as usize && l <= p.max_size as usize));
            }
        }
    }
}
