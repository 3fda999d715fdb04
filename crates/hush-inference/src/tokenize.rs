//! Text to token ids for `hush embed --text`: the model's Hugging Face
//! `tokenizer.json`, read with Hugging Face's `tokenizers` crate (the same
//! Rust library the Python `tokenizers` package wraps), so a wheel user
//! needs no script and no Python tokenizer.
//!
//! Tokenisation is the client's and local: the text never leaves this
//! process; what a server of `hush embed --connect` learns is the padded
//! shape (sentences × longest sequence), as with `--ids`/`--mask`.
//!
//! The tokenizer file is untrusted input: its size is checked before it is
//! read ([`MAX_TOKENIZER_BYTES`]), a malformed file is a clear error, and the
//! ids it yields are checked against the model's vocabulary later (the
//! encoder runtimes refuse an id outside the embedding table).

use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// The largest `tokenizer.json` read (BERT's is 0.7 MB; multilingual
/// vocabularies reach ~20 MB).
pub const MAX_TOKENIZER_BYTES: u64 = 64 << 20;

/// The tokenizer for `--text`: `explicit` (`--tokenizer PATH`), else
/// `tokenizer.json` next to the model file.
pub fn tokenizer_path(model: Option<&Path>, explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let Some(m) = model else {
        return Err(Error::Config("--text with --connect needs --tokenizer PATH (the model's tokenizer.json; the model is at the server)".into()));
    };
    let p = m.parent().map(|d| d.join("tokenizer.json")).unwrap_or_else(|| PathBuf::from("tokenizer.json"));
    if !p.is_file() {
        return Err(Error::Config(format!(
            "--text: no tokenizer.json next to the model ({}); give the model's Hugging Face tokenizer with --tokenizer PATH",
            p.display()
        )));
    }
    Ok(p)
}

/// Token ids and token types per sentence (special tokens added as the
/// tokenizer's post-processor says, e.g. BERT's `[CLS] … [SEP]`), each cut
/// to at most `max_len` tokens; no padding.
pub struct Tokens {
    pub ids: Vec<Vec<u32>>,
    pub type_ids: Vec<Vec<u32>>,
}

/// Tokenises `texts` with the tokenizer at `path`.
pub fn encode(path: &Path, texts: &[String], max_len: usize) -> Result<Tokens> {
    if texts.is_empty() {
        return Err(Error::Input("--text: at least one sentence".into()));
    }
    if max_len < 2 {
        return Err(Error::Config(format!("--max-len {max_len}: at least 2 (room for the special tokens)")));
    }
    let meta = std::fs::metadata(path).map_err(|e| Error::Io(format!("tokenizer {}: {e}", path.display())))?;
    if meta.len() > MAX_TOKENIZER_BYTES {
        return Err(Error::Input(format!("tokenizer {}: {} bytes, more than the {} MiB hush reads", path.display(), meta.len(), MAX_TOKENIZER_BYTES >> 20)));
    }
    let bytes = std::fs::read(path).map_err(|e| Error::Io(format!("tokenizer {}: {e}", path.display())))?;
    let mut tk = tokenizers::Tokenizer::from_bytes(&bytes)
        .map_err(|e| Error::Input(format!("tokenizer {}: not a Hugging Face tokenizer.json ({e})", path.display())))?;
    tk.with_padding(None);
    tk.with_truncation(Some(tokenizers::TruncationParams { max_length: max_len, ..Default::default() }))
        .map_err(|e| Error::Config(format!("--max-len {max_len}: {e}")))?;
    let mut out = Tokens { ids: Vec::with_capacity(texts.len()), type_ids: Vec::with_capacity(texts.len()) };
    for (i, t) in texts.iter().enumerate() {
        let e = tk.encode(t.as_str(), true).map_err(|e| Error::Input(format!("--text {}: the tokenizer failed: {e}", i + 1)))?;
        if e.get_ids().is_empty() {
            return Err(Error::Input(format!("--text {}: no tokens", i + 1)));
        }
        out.ids.push(e.get_ids().to_vec());
        out.type_ids.push(e.get_type_ids().to_vec());
    }
    Ok(out)
}

/// The ids, attention mask and token types as three `sentences × longest`
/// arrays (right-padded with id 0, mask 0), as a Hugging Face tokenizer
/// with `padding=True` returns them.
pub fn padded(t: &Tokens) -> (Vec<usize>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let s = t.ids.iter().map(Vec::len).max().unwrap_or(0);
    let n = t.ids.len();
    let (mut ids, mut mask, mut types) = (vec![0.0; n * s], vec![0.0; n * s], vec![0.0; n * s]);
    for (r, (row, ty)) in t.ids.iter().zip(&t.type_ids).enumerate() {
        for (j, (&id, &tt)) in row.iter().zip(ty).enumerate() {
            ids[r * s + j] = id as f64;
            mask[r * s + j] = 1.0;
            types[r * s + j] = tt as f64;
        }
    }
    (vec![n, s], ids, mask, types)
}

/// Token files written for one `hush embed --text` run (ids, mask, token
/// types as `.npy`, the inputs every embed path reads); removed on drop.
pub struct TokenFiles {
    dir: PathBuf,
    pub ids: PathBuf,
    pub mask: PathBuf,
    pub types: PathBuf,
}

impl TokenFiles {
    pub fn write(t: &Tokens) -> Result<Self> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("hush-embed-text-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| Error::Io(format!("{}: {e}", dir.display())))?;
        let f = TokenFiles { ids: dir.join("ids.npy"), mask: dir.join("mask.npy"), types: dir.join("types.npy"), dir };
        let (shape, ids, mask, types) = padded(t);
        crate::npy::write(&f.ids, &shape, &ids)?;
        crate::npy::write(&f.mask, &shape, &mask)?;
        crate::npy::write(&f.types, &shape, &types)?;
        Ok(f)
    }
}

impl Drop for TokenFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BERT-style WordPiece tokenizer.json (lower-casing BertNormalizer,
    /// BertPreTokenizer, `[CLS] $A [SEP]` template) over `vocab`.
    pub(crate) fn wordpiece_json(vocab: &[&str]) -> String {
        let v: serde_json::Map<String, serde_json::Value> = vocab.iter().enumerate().map(|(i, w)| (w.to_string(), serde_json::json!(i))).collect();
        let id = |w: &str| vocab.iter().position(|x| *x == w).unwrap();
        let added: Vec<serde_json::Value> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
            .iter()
            .map(|t| serde_json::json!({ "id": id(t), "content": t, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true }))
            .collect();
        serde_json::json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": { "type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true },
            "pre_tokenizer": { "type": "BertPreTokenizer" },
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [{ "SpecialToken": { "id": "[CLS]", "type_id": 0 } }, { "Sequence": { "id": "A", "type_id": 0 } }, { "SpecialToken": { "id": "[SEP]", "type_id": 0 } }],
                "pair": [{ "SpecialToken": { "id": "[CLS]", "type_id": 0 } }, { "Sequence": { "id": "A", "type_id": 0 } }, { "SpecialToken": { "id": "[SEP]", "type_id": 0 } },
                         { "Sequence": { "id": "B", "type_id": 1 } }, { "SpecialToken": { "id": "[SEP]", "type_id": 1 } }],
                "special_tokens": {
                    "[CLS]": { "id": "[CLS]", "ids": [id("[CLS]")], "tokens": ["[CLS]"] },
                    "[SEP]": { "id": "[SEP]", "ids": [id("[SEP]")], "tokens": ["[SEP]"] }
                }
            },
            "decoder": { "type": "WordPiece", "prefix": "##", "cleanup": true },
            "model": { "type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": v }
        })
        .to_string()
    }

    pub(crate) const VOCAB: &[&str] = &["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "un", "##aff", "##able", "!", ",", "a", "dog", "##s", "run"];

    fn tmp(name: &str, body: &[u8]) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hush-tokenize-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("tokenizer.json");
        std::fs::write(&p, body).unwrap();
        p
    }

    fn words(ids: &[u32]) -> Vec<&'static str> {
        ids.iter().map(|&i| VOCAB[i as usize]).collect()
    }

    /// WordPiece as BERT defines it (Devlin et al. 2019, §A.2 / Wu et al.
    /// 2016): lower-cased, split on whitespace and punctuation, greedy
    /// longest-match sub-words with `##`, unknown words as `[UNK]`, wrapped
    /// in `[CLS] … [SEP]`; truncation keeps the special tokens.
    #[test]
    fn wordpiece_sentences_padding_and_truncation() {
        let p = tmp("wp", wordpiece_json(VOCAB).as_bytes());
        let texts: Vec<String> = ["The cat sat on the mat!", "Unaffable dogs, RUN", "zebra", ""].iter().map(|s| s.to_string()).collect();
        let t = encode(&p, &texts, 128).unwrap();
        assert_eq!(words(&t.ids[0]), ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "!", "[SEP]"]);
        assert_eq!(words(&t.ids[1]), ["[CLS]", "un", "##aff", "##able", "dog", "##s", ",", "run", "[SEP]"]);
        assert_eq!(words(&t.ids[2]), ["[CLS]", "[UNK]", "[SEP]"]);
        assert_eq!(words(&t.ids[3]), ["[CLS]", "[SEP]"]);
        assert!(t.type_ids.iter().flatten().all(|&x| x == 0));
        let (shape, ids, mask, types) = padded(&t);
        assert_eq!(shape, [4, 9]);
        assert_eq!(&mask[18..27], &[1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(&ids[18..27], &[2.0, 1.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert!(types.iter().all(|&x| x == 0.0));
        // truncation: at most max_len tokens, [SEP] kept
        let t = encode(&p, &texts[..1], 4).unwrap();
        assert_eq!(words(&t.ids[0]), ["[CLS]", "the", "cat", "[SEP]"]);
        // the files every embed path reads
        let full = encode(&p, &texts, 128).unwrap();
        let f = TokenFiles::write(&full).unwrap();
        let rows = crate::encoder::read_tokens(&f.ids, &f.mask).unwrap();
        assert_eq!(rows, full.ids);
        let dir = f.ids.parent().unwrap().to_path_buf();
        drop(f);
        assert!(!dir.exists(), "the token files are removed");
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    #[test]
    fn bad_tokenizers_and_arguments_are_clear_errors() {
        let p = tmp("bad", b"{not json");
        let e = encode(&p, &["x".into()], 16).err().unwrap().to_string();
        assert!(e.contains("not a Hugging Face tokenizer.json"), "{e}");
        let p = tmp("empty", b"{}");
        assert!(encode(&p, &["x".into()], 16).is_err());
        let good = tmp("args", wordpiece_json(VOCAB).as_bytes());
        assert!(encode(&good, &[], 16).err().unwrap().to_string().contains("at least one sentence"));
        assert!(encode(&good, &["x".into()], 1).err().unwrap().to_string().contains("--max-len"));
        let missing = good.parent().unwrap().join("nope").join("tokenizer.json");
        assert!(encode(&missing, &["x".into()], 16).err().unwrap().to_string().contains("nope"));
        // where the tokenizer is looked for
        let model = good.parent().unwrap().join("model.onnx");
        assert_eq!(tokenizer_path(Some(&model), None).unwrap(), good);
        let e = tokenizer_path(Some(Path::new("/nonexistent-dir/m.onnx")), None).err().unwrap().to_string();
        assert!(e.contains("--tokenizer PATH") && e.contains("/nonexistent-dir/tokenizer.json"), "{e}");
        assert!(tokenizer_path(None, None).err().unwrap().to_string().contains("--connect needs --tokenizer"));
        assert_eq!(tokenizer_path(None, Some(Path::new("t.json"))).unwrap(), PathBuf::from("t.json"));
        for n in ["bad", "empty", "args"] {
            let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("hush-tokenize-{}-{n}", std::process::id())));
        }
    }
}
