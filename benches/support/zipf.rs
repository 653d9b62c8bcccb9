//! Text for the search benches: words drawn as in natural text, and percentiles.

/// The first words of the vocabulary (the most common).
const WORDS: &[&str] = &[
    "budget",
    "quarterly",
    "meeting",
    "launch",
    "plan",
    "invoice",
    "friday",
    "garden",
    "travel",
    "photo",
    "family",
    "review",
    "design",
    "release",
    "archive",
    "music",
    "recipe",
    "camera",
    "project",
    "notes",
    "team",
    "report",
    "summary",
    "contract",
    "holiday",
    "school",
    "doctor",
    "insurance",
    "tax",
    "rent",
    "car",
    "bike",
    "train",
    "flight",
    "hotel",
    "dinner",
];

/// Words from a 20,000-word vocabulary (the named words first, then `w<k>`), drawn with
/// a Zipf-like (log-uniform) distribution as in natural text: a few words are very
/// common, most are rare.
pub fn text(rng: &mut u64, n: usize) -> String {
    const VOCAB: f64 = 20_000.0;
    (0..n)
        .map(|_| {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            let u = (*rng % 1_000_000) as f64 / 1_000_000.0;
            let k = (VOCAB.powf(u) - 1.0) as usize;
            WORDS
                .get(k)
                .map(|w| w.to_string())
                .unwrap_or_else(|| format!("w{k}"))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `p` quantile (0 to 1) of `v`.
fn percentile(v: &[f64], p: f64) -> f64 {
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// Latencies in milliseconds as "p50 …, p95 …, max …".
pub fn latencies(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    format!(
        "p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms",
        percentile(&ms, 0.5),
        percentile(&ms, 0.95),
        percentile(&ms, 1.0)
    )
}

/// Query `i` of a run, in FTS5 syntax: one word, two words, or a two-word phrase, in
/// turn, drawn as [`text`] draws them.
pub fn fts_query(rng: &mut u64, i: usize) -> String {
    match i % 3 {
        0 => format!("\"{}\"", text(rng, 1)),
        1 => format!("\"{}\" \"{}\"", text(rng, 1), text(rng, 1)),
        _ => format!("\"{}\"", text(rng, 2)),
    }
}
