//! Conversion of a CTranslate2 Whisper model (`model.bin` with its vocabulary) into
//! whisper.cpp's ggml model file.
//!
//! CTranslate2 fuses projections that ggml keeps apart: self-attention's query, key and
//! value are one `3n × n` matrix, cross-attention's key and value one `2n × n` matrix (with
//! zero biases for the key, which Whisper does not have). The ggml file also carries the
//! mel filterbank, computed here (Slaney-style, as librosa and openai-whisper compute it,
//! to the same float32 bits), and the byte-level BPE vocabulary as raw bytes.

use std::collections::HashMap;
use std::io::Write;

use crate::{Result, SpeechError};

/// ggml's file magic ("ggml" as a little-endian u32).
pub const GGML_MAGIC: u32 = 0x6767_6d6c;
/// Whisper's sample rate and FFT size, for the mel filterbank.
const N_FFT: usize = 400;

/// A CTranslate2 data type.
#[derive(Debug, Clone, Copy, PartialEq)]
enum DType {
    F32,
    I8,
    I16,
    I32,
    F16,
    Bf16,
}

impl DType {
    fn from_id(id: u8) -> Option<DType> {
        Some(match id {
            0 => DType::F32,
            1 => DType::I8,
            2 => DType::I16,
            3 => DType::I32,
            4 => DType::F16,
            5 => DType::Bf16,
            _ => return None,
        })
    }
    fn size(self) -> usize {
        match self {
            DType::I8 => 1,
            DType::I16 | DType::F16 | DType::Bf16 => 2,
            DType::F32 | DType::I32 => 4,
        }
    }
}

/// One variable of a CTranslate2 model.
#[derive(Debug, Clone)]
struct Var {
    shape: Vec<usize>,
    dtype: DType,
    data: Vec<u8>,
}

impl Var {
    fn scalar_int(&self) -> Option<i64> {
        match (self.dtype, self.data.as_slice()) {
            (DType::I8, [a]) => Some(*a as i8 as i64),
            (DType::I16, [a, b]) => Some(i16::from_le_bytes([*a, *b]) as i64),
            (DType::I32, [a, b, c, d]) => Some(i32::from_le_bytes([*a, *b, *c, *d]) as i64),
            _ => None,
        }
    }
    /// The values as float32.
    fn f32s(&self) -> Result<Vec<f32>> {
        Ok(match self.dtype {
            DType::F32 => self
                .data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            DType::F16 => self
                .data
                .chunks_exact(2)
                .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
                .collect(),
            DType::Bf16 => self
                .data
                .chunks_exact(2)
                .map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16))
                .collect(),
            other => return Err(unsupported_dtype(other)),
        })
    }
    /// The values as float16 bits (little-endian bytes).
    fn f16_bytes(&self) -> Result<Vec<u8>> {
        Ok(match self.dtype {
            DType::F16 => self.data.clone(),
            DType::F32 | DType::Bf16 => self
                .f32s()?
                .into_iter()
                .flat_map(|v| f32_to_f16(v).to_le_bytes())
                .collect(),
            other => return Err(unsupported_dtype(other)),
        })
    }
}

fn unsupported_dtype(d: DType) -> SpeechError {
    SpeechError::Model(format!(
        "this CTranslate2 model stores weights as {d:?}; only float16, bfloat16 and float32 \
         exports can be converted (export it again with --quantization float16)"
    ))
}

/// IEEE half to single precision.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalise.
            let mut e = 127 - 15 + 1;
            let mut m = m;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// Single to half precision, rounding to nearest even.
pub fn f32_to_f16(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rem = m & ((1 << shift) - 1);
        let mut r = m >> shift;
        if rem > half || (rem == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
        r += 1;
    }
    sign | r as u16
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| {
                SpeechError::Model(format!(
                    "model.bin is truncated or corrupt (needs {n} bytes at offset {})",
                    self.pos
                ))
            })?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn string(&mut self) -> Result<String> {
        let n = self.u16()? as usize;
        let s = self.take(n)?;
        let s = s.strip_suffix(&[0]).unwrap_or(s);
        Ok(String::from_utf8_lossy(s).into_owned())
    }
}

/// The variables of a CTranslate2 `model.bin` (format versions 3 to 6), aliases resolved.
fn read_ct2(bytes: &[u8]) -> Result<(String, HashMap<String, Var>)> {
    let mut c = Cursor { b: bytes, pos: 0 };
    let version = c.u32()?;
    if !(3..=6).contains(&version) {
        return Err(SpeechError::Model(format!(
            "not a CTranslate2 model.bin this version reads (binary version {version}, \
             expected 3 to 6)"
        )));
    }
    let spec = c.string()?;
    let _revision = c.u32()?;
    let n = c.u32()?;
    let mut vars = HashMap::new();
    for _ in 0..n {
        let name = c.string()?;
        let rank = c.u8()? as usize;
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(c.u32()? as usize);
        }
        let (dtype, len) = if version >= 4 {
            let id = c.u8()?;
            let dtype = DType::from_id(id).ok_or_else(|| {
                SpeechError::Model(format!("variable {name}: unknown data type {id}"))
            })?;
            (dtype, c.u32()? as usize)
        } else {
            let size = c.u8()?;
            let count = c.u32()? as usize;
            let overflow = || SpeechError::Model(format!("variable {name}: size overflows"));
            let dtype = match size {
                4 => DType::F32,
                2 => DType::F16,
                1 => DType::I8,
                s => {
                    return Err(SpeechError::Model(format!(
                        "variable {name}: unknown item size {s}"
                    )))
                }
            };
            (
                dtype,
                count.checked_mul(size as usize).ok_or_else(overflow)?,
            )
        };
        let bytes = shape
            .iter()
            .try_fold(dtype.size(), |acc, d| acc.checked_mul(*d));
        if bytes != Some(len) {
            return Err(SpeechError::Model(format!(
                "variable {name}: {len} bytes for shape {shape:?} of {dtype:?}"
            )));
        }
        let data = c.take(len)?.to_vec();
        vars.insert(name, Var { shape, dtype, data });
    }
    if c.pos < bytes.len() {
        let aliases = c.u32()?;
        for _ in 0..aliases {
            let alias = c.string()?;
            let target = c.string()?;
            if let Some(v) = vars.get(&target).cloned() {
                vars.insert(alias, v);
            }
        }
    }
    Ok((spec, vars))
}

/// GPT-2's byte-to-character table, inverted: the byte each BPE character stands for.
fn byte_decoder() -> HashMap<char, u8> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xa1..=0xac)
        .chain(0xae..=0xff)
        .collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    bs.into_iter()
        .zip(cs)
        .map(|(b, c)| (char::from_u32(c).expect("valid"), b as u8))
        .collect()
}

/// The ordinary tokens (those before `<|endoftext|>`) as raw bytes. `vocab` is
/// `vocabulary.txt` (one token per line) or `vocabulary.json` (an array of strings).
pub fn vocabulary(vocab: &str) -> Result<Vec<Vec<u8>>> {
    let tokens: Vec<String> = if vocab.trim_start().starts_with('[') {
        serde_json::from_str(vocab)
            .map_err(|e| SpeechError::Model(format!("vocabulary.json: {e}")))?
    } else {
        vocab.split('\n').map(|l| l.to_string()).collect()
    };
    let end = tokens
        .iter()
        .position(|t| t == "<|endoftext|>")
        .ok_or_else(|| SpeechError::Model("the vocabulary has no <|endoftext|> token".into()))?;
    let dec = byte_decoder();
    Ok(tokens[..end]
        .iter()
        .map(
            |t| match t.chars().map(|c| dec.get(&c).copied()).collect() {
                Some(bytes) => bytes,
                None => t.as_bytes().to_vec(),
            },
        )
        .collect())
}

/// The mel filterbank Whisper uses: `n_mels` Slaney-scale triangles with Slaney area
/// normalisation over the `N_FFT / 2 + 1` bins of a 400-point FFT at 16 kHz, computed in
/// float64 and stored as float32 the way librosa does (so the bits match openai-whisper's
/// `mel_filters.npz`).
pub fn mel_filters(n_mels: usize) -> Vec<f32> {
    fn hz_to_mel(f: f64) -> f64 {
        let f_sp = 200.0 / 3.0;
        let min_log_hz = 1000.0;
        let min_log_mel = min_log_hz / f_sp;
        let logstep = 6.4f64.ln() / 27.0;
        if f >= min_log_hz {
            min_log_mel + (f / min_log_hz).ln() / logstep
        } else {
            f / f_sp
        }
    }
    fn mel_to_hz(m: f64) -> f64 {
        let f_sp = 200.0 / 3.0;
        let min_log_hz = 1000.0;
        let min_log_mel = min_log_hz / f_sp;
        let logstep = 6.4f64.ln() / 27.0;
        if m >= min_log_mel {
            min_log_hz * (logstep * (m - min_log_mel)).exp()
        } else {
            f_sp * m
        }
    }
    let bins = N_FFT / 2 + 1;
    let sr = 16_000.0;
    let fft: Vec<f64> = (0..bins)
        .map(|i| i as f64 * (sr / 2.0) / (bins - 1) as f64)
        .collect();
    let (lo, hi) = (hz_to_mel(0.0), hz_to_mel(sr / 2.0));
    let points = n_mels + 2;
    let mel_f: Vec<f64> = (0..points)
        .map(|i| mel_to_hz(lo + (hi - lo) * i as f64 / (points - 1) as f64))
        .collect();
    let mut w = vec![0f32; n_mels * bins];
    for i in 0..n_mels {
        let (d0, d1) = (mel_f[i + 1] - mel_f[i], mel_f[i + 2] - mel_f[i + 1]);
        let enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
        for (j, f) in fft.iter().enumerate() {
            let lower = -(mel_f[i] - f) / d0;
            let upper = (mel_f[i + 2] - f) / d1;
            // numpy's minimum and maximum, which keep the sign of a zero they return
            // (librosa's first weight is -0.0, and the bits should match).
            let m = if upper < lower { upper } else { lower };
            let tri = if m < 0.0 { 0.0 } else { m } as f32;
            w[i * bins + j] = (tri as f64 * enorm) as f32;
        }
    }
    w
}

/// Whisper's dimensions, as the ggml file header states them.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Hparams {
    /// Vocabulary size (51864 for English-only models, 51865 and up for multilingual).
    pub n_vocab: i32,
    /// Audio context (1500 frames for 30 s).
    pub n_audio_ctx: i32,
    /// Encoder width.
    pub n_audio_state: i32,
    /// Encoder attention heads.
    pub n_audio_head: i32,
    /// Encoder layers.
    pub n_audio_layer: i32,
    /// Text context.
    pub n_text_ctx: i32,
    /// Decoder width.
    pub n_text_state: i32,
    /// Decoder attention heads.
    pub n_text_head: i32,
    /// Decoder layers.
    pub n_text_layer: i32,
    /// Mel bins.
    pub n_mels: i32,
    /// Weight type (0 float32, 1 float16, others quantised).
    pub ftype: i32,
}

impl Hparams {
    /// Whether the model is multilingual.
    pub fn multilingual(&self) -> bool {
        self.n_vocab >= 51865
    }

    /// The model's conventional size name, from its encoder depth.
    pub fn size_name(&self) -> String {
        let base = match (self.n_audio_layer, self.n_audio_state) {
            (4, 384) => "tiny",
            (6, 512) => "base",
            (12, 768) => "small",
            (24, 1024) => "medium",
            (32, 1280) => "large",
            _ => "custom",
        };
        if self.multilingual() {
            base.to_string()
        } else {
            format!("{base}.en")
        }
    }

    fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for v in [
            self.n_vocab,
            self.n_audio_ctx,
            self.n_audio_state,
            self.n_audio_head,
            self.n_audio_layer,
            self.n_text_ctx,
            self.n_text_state,
            self.n_text_head,
            self.n_text_layer,
            self.n_mels,
            self.ftype,
        ] {
            out.write_all(&v.to_le_bytes())?;
        }
        Ok(())
    }
}

/// Reads and checks a ggml Whisper file's header and walks its tensors to the end, so a
/// truncated or foreign file is refused before it is installed.
pub fn check_ggml(bytes: &[u8]) -> Result<Hparams> {
    let bad = |what: &str| SpeechError::Model(format!("not a whisper.cpp ggml model: {what}"));
    let mut c = Cursor { b: bytes, pos: 0 };
    if c.u32().map_err(|_| bad("too short"))? != GGML_MAGIC {
        return Err(bad("wrong magic number"));
    }
    let mut h = [0i32; 11];
    for v in &mut h {
        *v = c.u32()? as i32;
    }
    let hp = Hparams {
        n_vocab: h[0],
        n_audio_ctx: h[1],
        n_audio_state: h[2],
        n_audio_head: h[3],
        n_audio_layer: h[4],
        n_text_ctx: h[5],
        n_text_state: h[6],
        n_text_head: h[7],
        n_text_layer: h[8],
        n_mels: h[9],
        ftype: h[10],
    };
    if h[..10].iter().any(|&v| v <= 0) || hp.n_vocab > 1_000_000 {
        return Err(bad("implausible dimensions"));
    }
    let (n_mel, n_fft) = (c.u32()? as usize, c.u32()? as usize);
    c.take(n_mel.saturating_mul(n_fft).saturating_mul(4))?;
    let words = c.u32()?;
    for _ in 0..words {
        let n = c.u32()? as usize;
        c.take(n)?;
    }
    let mut tensors = 0;
    while c.pos < bytes.len() {
        let dims = c.u32()? as usize;
        let name_len = c.u32()? as usize;
        let ftype = c.u32()?;
        if dims == 0 || dims > 4 {
            return Err(bad("a tensor with an impossible shape"));
        }
        let mut count = 1usize;
        for _ in 0..dims {
            count = count.saturating_mul(c.u32()? as usize);
        }
        c.take(name_len)?;
        let size = match ftype {
            0 => count.saturating_mul(4),
            1 => count.saturating_mul(2),
            // Quantised blocks: their size depends on the type; trust the rest.
            _ => return Ok(hp),
        };
        c.take(size)?;
        tensors += 1;
    }
    if tensors == 0 {
        return Err(bad("no tensors"));
    }
    Ok(hp)
}

/// A ggml tensor to write: its name, its PyTorch shape, and float32 or float16 data.
struct Tensor {
    name: String,
    shape: Vec<usize>,
    f16: bool,
    data: Vec<u8>,
}

/// Converts CTranslate2 Whisper `model.bin` bytes and its vocabulary into a ggml file.
pub fn ct2_to_ggml(model: &[u8], vocab: &str, out: &mut dyn Write) -> Result<Hparams> {
    let (spec, vars) = read_ct2(model)?;
    if !spec.is_empty() && spec != "WhisperSpec" {
        return Err(SpeechError::Model(format!(
            "this CTranslate2 model is a {spec}, not a Whisper model"
        )));
    }
    let get = |name: &str| {
        vars.get(name).ok_or_else(|| {
            SpeechError::Model(format!("the model has no variable {name}: not Whisper?"))
        })
    };
    let int = |name: &str| -> Result<i32> {
        get(name)?
            .scalar_int()
            .map(|v| v as i32)
            .ok_or_else(|| SpeechError::Model(format!("{name} is not an integer")))
    };
    let layers = |prefix: &str| {
        (0..)
            .take_while(|i| {
                vars.contains_key(&format!(
                    "{prefix}/layer_{i}/self_attention/layer_norm/gamma"
                ))
            })
            .count() as i32
    };
    let emb = get("decoder/embeddings/weight")?;
    let enc_pos = get("encoder/position_encodings/encodings")?;
    let dec_pos = get("decoder/position_encodings/encodings")?;
    let conv1 = get("encoder/conv1/weight")?;
    let dim = |v: &Var, i: usize| v.shape.get(i).copied().unwrap_or(0) as i32;
    let hp = Hparams {
        n_vocab: dim(emb, 0),
        n_audio_ctx: dim(enc_pos, 0),
        n_audio_state: dim(enc_pos, 1),
        n_audio_head: int("encoder/num_heads")?,
        n_audio_layer: layers("encoder"),
        n_text_ctx: dim(dec_pos, 0),
        n_text_state: dim(dec_pos, 1),
        n_text_head: int("decoder/num_heads")?,
        n_text_layer: layers("decoder"),
        n_mels: dim(conv1, 1),
        ftype: 1,
    };
    if hp.n_audio_layer == 0 || hp.n_text_layer == 0 || hp.n_mels == 0 {
        return Err(SpeechError::Model(
            "the model has no encoder or decoder layers".into(),
        ));
    }
    let words = vocabulary(vocab)?;

    // Tensor builders: a whole variable, or rows `r` of a fused one.
    let whole = |ct: &str, name: &str, f16: bool| -> Result<Tensor> {
        let v = get(ct)?;
        rows(v, name, 0..v.shape.first().copied().unwrap_or(0), f16)
    };
    let part = |ct: &str, name: &str, k: usize, of: usize| -> Result<Tensor> {
        let v = get(ct)?;
        let n = v.shape.first().copied().unwrap_or(0) / of;
        rows(v, name, k * n..(k + 1) * n, v.shape.len() > 1)
    };
    let mut t: Vec<Tensor> = Vec::new();
    for (i, ct) in ["encoder/conv1", "encoder/conv2"].iter().enumerate() {
        t.push(whole(
            &format!("{ct}/weight"),
            &format!("encoder.conv{}.weight", i + 1),
            true,
        )?);
        let mut b = whole(
            &format!("{ct}/bias"),
            &format!("encoder.conv{}.bias", i + 1),
            false,
        )?;
        b.shape.push(1);
        t.push(b);
    }
    t.push(whole(
        "encoder/position_encodings/encodings",
        "encoder.positional_embedding",
        false,
    )?);
    t.push(whole(
        "encoder/layer_norm/gamma",
        "encoder.ln_post.weight",
        false,
    )?);
    t.push(whole(
        "encoder/layer_norm/beta",
        "encoder.ln_post.bias",
        false,
    )?);
    t.push(whole(
        "decoder/embeddings/weight",
        "decoder.token_embedding.weight",
        true,
    )?);
    t.push(whole(
        "decoder/position_encodings/encodings",
        "decoder.positional_embedding",
        false,
    )?);
    t.push(whole(
        "decoder/layer_norm/gamma",
        "decoder.ln.weight",
        false,
    )?);
    t.push(whole("decoder/layer_norm/beta", "decoder.ln.bias", false)?);
    let norm = |t: &mut Vec<Tensor>, ct: &str, name: &str| -> Result<()> {
        t.push(whole(
            &format!("{ct}/gamma"),
            &format!("{name}.weight"),
            false,
        )?);
        t.push(whole(
            &format!("{ct}/beta"),
            &format!("{name}.bias"),
            false,
        )?);
        Ok(())
    };
    let linear = |t: &mut Vec<Tensor>, ct: &str, name: &str| -> Result<()> {
        t.push(whole(
            &format!("{ct}/weight"),
            &format!("{name}.weight"),
            true,
        )?);
        t.push(whole(
            &format!("{ct}/bias"),
            &format!("{name}.bias"),
            false,
        )?);
        Ok(())
    };
    // Query, key (no bias) and value, from `of` fused parts starting at part `first`.
    let qkv = |t: &mut Vec<Tensor>, fused: &str, name: &str, first: usize, of: usize| {
        for (k, which) in ["query", "key", "value"].iter().enumerate().skip(first) {
            let k = k - first;
            t.push(part(
                &format!("{fused}/weight"),
                &format!("{name}.{which}.weight"),
                k,
                of,
            )?);
            if *which != "key" {
                t.push(part(
                    &format!("{fused}/bias"),
                    &format!("{name}.{which}.bias"),
                    k,
                    of,
                )?);
            }
        }
        Result::Ok(())
    };
    for side in ["encoder", "decoder"] {
        let n = if side == "encoder" {
            hp.n_audio_layer
        } else {
            hp.n_text_layer
        };
        for i in 0..n {
            let ct = format!("{side}/layer_{i}");
            let g = format!("{side}.blocks.{i}");
            norm(
                &mut t,
                &format!("{ct}/self_attention/layer_norm"),
                &format!("{g}.attn_ln"),
            )?;
            qkv(
                &mut t,
                &format!("{ct}/self_attention/linear_0"),
                &format!("{g}.attn"),
                0,
                3,
            )?;
            linear(
                &mut t,
                &format!("{ct}/self_attention/linear_1"),
                &format!("{g}.attn.out"),
            )?;
            norm(
                &mut t,
                &format!("{ct}/ffn/layer_norm"),
                &format!("{g}.mlp_ln"),
            )?;
            linear(&mut t, &format!("{ct}/ffn/linear_0"), &format!("{g}.mlp.0"))?;
            linear(&mut t, &format!("{ct}/ffn/linear_1"), &format!("{g}.mlp.2"))?;
            if side == "decoder" {
                norm(
                    &mut t,
                    &format!("{ct}/attention/layer_norm"),
                    &format!("{g}.cross_attn_ln"),
                )?;
                linear(
                    &mut t,
                    &format!("{ct}/attention/linear_0"),
                    &format!("{g}.cross_attn.query"),
                )?;
                qkv(
                    &mut t,
                    &format!("{ct}/attention/linear_1"),
                    &format!("{g}.cross_attn"),
                    1,
                    2,
                )?;
                linear(
                    &mut t,
                    &format!("{ct}/attention/linear_2"),
                    &format!("{g}.cross_attn.out"),
                )?;
            }
        }
    }

    let io = |e: std::io::Error| SpeechError::Io(format!("writing the ggml model: {e}"));
    out.write_all(&GGML_MAGIC.to_le_bytes()).map_err(io)?;
    hp.write(out).map_err(io)?;
    let n_mels = hp.n_mels as usize;
    out.write_all(&(n_mels as i32).to_le_bytes()).map_err(io)?;
    out.write_all(&((N_FFT / 2 + 1) as i32).to_le_bytes())
        .map_err(io)?;
    let mel: Vec<u8> = mel_filters(n_mels)
        .into_iter()
        .flat_map(f32::to_le_bytes)
        .collect();
    out.write_all(&mel).map_err(io)?;
    out.write_all(&(words.len() as i32).to_le_bytes())
        .map_err(io)?;
    for w in &words {
        out.write_all(&(w.len() as i32).to_le_bytes()).map_err(io)?;
        out.write_all(w).map_err(io)?;
    }
    for x in &t {
        out.write_all(&(x.shape.len() as i32).to_le_bytes())
            .map_err(io)?;
        out.write_all(&(x.name.len() as i32).to_le_bytes())
            .map_err(io)?;
        out.write_all(&(x.f16 as i32).to_le_bytes()).map_err(io)?;
        for d in x.shape.iter().rev() {
            out.write_all(&(*d as i32).to_le_bytes()).map_err(io)?;
        }
        out.write_all(x.name.as_bytes()).map_err(io)?;
        out.write_all(&x.data).map_err(io)?;
    }
    Ok(hp)
}

/// Rows `r` of a variable (all of it for a vector) as a tensor named `name`, in float16
/// when `f16` and the variable has two or more dimensions, otherwise float32.
fn rows(v: &Var, name: &str, r: std::ops::Range<usize>, f16: bool) -> Result<Tensor> {
    let bad = |what: &str| SpeechError::Model(format!("{name}: {what} (shape {:?})", v.shape));
    let Some((_, inner)) = v.shape.split_first() else {
        return Err(bad("a weight with no dimensions"));
    };
    // The shape was checked against the data when the model was read, so these products
    // fit; the slice is still taken with `get` so a hostile model is an error.
    let row = inner
        .iter()
        .try_fold(v.dtype.size(), |acc, d| acc.checked_mul(*d))
        .ok_or_else(|| bad("a size that overflows"))?;
    let f16 = f16 && v.shape.len() > 1;
    let mut shape = v.shape.clone();
    shape[0] = r.len();
    let data = r
        .start
        .checked_mul(row)
        .zip(r.end.checked_mul(row))
        .and_then(|(a, b)| v.data.get(a..b))
        .ok_or_else(|| bad("rows out of range"))?;
    let sub = Var {
        shape: shape.clone(),
        dtype: v.dtype,
        data: data.to_vec(),
    };
    let data = if f16 {
        sub.f16_bytes()?
    } else {
        sub.f32s()?.into_iter().flat_map(f32::to_le_bytes).collect()
    };
    Ok(Tensor {
        name: name.to_string(),
        shape,
        f16,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeos_store::mutate::mutate;
    use proptest::prelude::*;

    #[test]
    fn half_precision_round_trips() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                continue;
            }
            assert_eq!(f32_to_f16(f), h, "{h:#06x} -> {f}");
        }
        assert_eq!(f32_to_f16(1.0 + 1.0 / 4096.0), 0x3c00); // ties to even
        assert_eq!(f32_to_f16(1e9), 0x7c00);
    }

    #[test]
    fn mel_filterbank_is_slaney() {
        let m = mel_filters(80);
        assert_eq!(m.len(), 80 * 201);
        // Each triangle has unit area in Hz (Slaney normalisation), within the grid's step.
        let step = 8000.0 / 200.0;
        for i in 0..80 {
            let area: f32 = m[i * 201..(i + 1) * 201].iter().sum::<f32>() * step;
            assert!((area - 1.0).abs() < 0.35, "filter {i}: {area}");
        }
        assert_eq!(m[1], 0.024_862_595);
    }

    #[test]
    fn byte_level_tokens_decode_to_bytes() {
        let v = vocabulary("!\nĠthe\nâĢĻ\n<|endoftext|>\n<|en|>").unwrap();
        assert_eq!(
            v,
            vec![
                b"!".to_vec(),
                b" the".to_vec(),
                "\u{2019}".as_bytes().to_vec()
            ]
        );
    }

    /// A CTranslate2 `model.bin` (version 6) holding `vars`: name, shape, data type id
    /// and data.
    fn ct2(vars: &[(&str, &[u32], u8, &[u8])]) -> Vec<u8> {
        let mut b = Vec::new();
        let string = |b: &mut Vec<u8>, s: &str| {
            b.extend_from_slice(&(s.len() as u16 + 1).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
            b.push(0);
        };
        b.extend_from_slice(&6u32.to_le_bytes());
        string(&mut b, "WhisperSpec");
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&(vars.len() as u32).to_le_bytes());
        for (name, shape, dtype, data) in vars {
            string(&mut b, name);
            b.push(shape.len() as u8);
            for d in *shape {
                b.extend_from_slice(&d.to_le_bytes());
            }
            b.push(*dtype);
            b.extend_from_slice(&(data.len() as u32).to_le_bytes());
            b.extend_from_slice(data);
        }
        b
    }

    /// A shape whose product overflows was multiplied unchecked (a panic in debug
    /// builds, a wrong size check in release ones).
    #[test]
    fn an_overflowing_shape_is_refused() {
        let m = ct2(&[("w", &[u32::MAX, u32::MAX, u32::MAX], 0, &[0; 4])]);
        let e = read_ct2(&m).unwrap_err().to_string();
        assert!(e.contains("bytes for shape"), "{e}");
    }

    /// A weight with no dimensions (rank 0) was indexed as if it had rows.
    #[test]
    fn a_rank_zero_weight_is_an_error() {
        let m = ct2(&[
            ("decoder/embeddings/weight", &[], 0, &[0; 4]),
            ("encoder/position_encodings/encodings", &[1, 1], 0, &[0; 4]),
            ("decoder/position_encodings/encodings", &[1, 1], 0, &[0; 4]),
            ("encoder/conv1/weight", &[], 0, &[0; 4]),
        ]);
        let (_, vars) = read_ct2(&m).unwrap();
        let v = &vars["decoder/embeddings/weight"];
        let e = rows(v, "decoder.token_embedding.weight", 0..0, true)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no dimensions"), "{e}");
        let mut out = Vec::new();
        assert!(ct2_to_ggml(&m, "!", &mut out).is_err());
    }

    proptest! {
        #[test]
        fn ct2_reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = read_ct2(&bytes);
            let _ = check_ggml(&bytes);
        }

        /// A small valid model, damaged: shapes, types and lengths that lie.
        #[test]
        fn damaged_models_never_panic(edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6)) {
            let m = ct2(&[
                ("decoder/embeddings/weight", &[2, 2], 0, &[0; 16]),
                ("encoder/num_heads", &[], 3, &[1, 0, 0, 0]),
                ("encoder/conv1/weight", &[2, 1, 1], 4, &[0; 4]),
            ]);
            let damaged = mutate(&m, &edits);
            let _ = read_ct2(&damaged);
            let mut out = Vec::new();
            let _ = ct2_to_ggml(&damaged, "!\n\"", &mut out);
        }
    }
}
