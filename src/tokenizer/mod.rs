//! Tokenizers: the BPE encodings that ship inside `tiktoken-rs` (no
//! download), or any Hugging Face `tokenizer.json`, by path or by model
//! name from the local Hugging Face cache.
//!
//! Token counts are what tracekit promises to get exactly right (a prompt
//! of `input_length` tokens, content hashes over 512-token blocks), so every
//! tool that counts tokens goes through this one type. Special tokens are
//! never added and never recognised in text: `<|endoftext|>` in a prompt is
//! ordinary text, as a server sees it in a completions prompt.

mod hub;
mod o200k;

use std::path::Path;

use tiktoken_rs::CoreBPE;

use crate::error::{Error, Result};

/// The tokenizer used when none is named.
pub const DEFAULT: &str = "o200k_base";

/// Built-in tokenizer names, for help texts and errors.
pub const BUILTIN: &[&str] = &["o200k_base", "cl100k_base", "r50k_base"];

enum Kind {
    Bpe(CoreBPE, Encoding),
    HuggingFace(Box<tokenizers::Tokenizer>),
}

/// Which built-in encoding a `Kind::Bpe` is (decided once, at load).
#[derive(Clone, Copy, PartialEq)]
enum Encoding {
    O200k,
    Cl100k,
    R50k,
}

/// A loaded tokenizer.
pub struct Tokenizer {
    name: String,
    kind: Kind,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("name", &self.name)
            .finish()
    }
}

impl Tokenizer {
    /// Load a built-in encoding by name (`o200k_base`, `cl100k_base`,
    /// `r50k_base`, alias `gpt2`), a `tokenizer.json` file by path, or the
    /// `tokenizer.json` of a model (`ORG/NAME`) in the local Hugging Face
    /// cache.
    pub fn load(spec: &str) -> Result<Tokenizer> {
        let builtin = match spec {
            "o200k_base" => Some((tiktoken_rs::o200k_base(), Encoding::O200k)),
            "cl100k_base" => Some((tiktoken_rs::cl100k_base(), Encoding::Cl100k)),
            "r50k_base" | "gpt2" => Some((tiktoken_rs::r50k_base(), Encoding::R50k)),
            _ => None,
        };
        if let Some((bpe, encoding)) = builtin {
            let bpe = bpe.map_err(|e| Error::msg(format!("cannot load tokenizer {spec}: {e}")))?;
            return Ok(Tokenizer {
                name: spec.to_string(),
                kind: Kind::Bpe(bpe, encoding),
            });
        }
        let mut path = Path::new(spec).to_path_buf();
        if !path.exists() && hub::is_model_name(spec) {
            let cache = hub::cache_dir();
            match cache.as_deref().and_then(|c| hub::find(c, spec)) {
                Some(found) => path = found,
                None => {
                    let looked = match &cache {
                        Some(c) => format!(
                            "{}/snapshots/*/tokenizer.json",
                            hub::model_dir(c, spec).display()
                        ),
                        None => "no cache directory: HF_HUB_CACHE, HF_HOME and HOME are unset"
                            .to_string(),
                    };
                    return Err(Error::msg(format!(
                        "tokenizer `{spec}` is neither a built-in ({}), nor an existing file, nor a model \
                         in the local Hugging Face cache (looked for {looked}; the cache is \
                         HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else \
                         ~/.cache/huggingface/hub); nothing is \
                         downloaded: fetch it first (huggingface-cli download {spec} tokenizer.json) \
                         or give the file's path",
                        BUILTIN.join(", ")
                    )));
                }
            }
        }
        let path = path.as_path();
        if !path.exists() {
            return Err(Error::msg(format!(
                "tokenizer `{spec}` is neither a built-in ({}) nor an existing tokenizer.json file",
                BUILTIN.join(", ")
            )));
        }
        let mut hf = tokenizers::Tokenizer::from_file(path).map_err(|e| {
            Error::msg(format!(
                "cannot load tokenizer {spec}: {e} (expected a Hugging Face tokenizer.json)"
            ))
        })?;
        // Padding and truncation are a model's input settings (sentence
        // embedders ship `Fixed` padding to 128 and truncation at 128 or
        // 512), not the text's tokens: a count needs neither.
        hf.with_padding(None);
        hf.with_truncation(None)
            .map_err(|e| Error::msg(format!("cannot load tokenizer {spec}: {e}")))?;
        Ok(Tokenizer {
            name: spec.to_string(),
            kind: Kind::HuggingFace(Box::new(hf)),
        })
    }

    /// Whether a newline followed by a character other than whitespace or
    /// `/` always ends a pre-tokenizer piece, so that text cut there
    /// tokenizes to the same ids in parts as whole. True of cl100k_base and
    /// o200k_base, whose patterns put nothing after a newline in a piece
    /// but more newlines (and, in o200k_base, `/`), and end a run of
    /// whitespace at its last newline (`\s*[\r\n]+`) whatever follows; not
    /// of r50k_base (`\s+(?!\S)` looks past the cut) nor of tokenizer.json
    /// files (unknown rules).
    pub fn splits_after_newlines(&self) -> bool {
        matches!(self.kind, Kind::Bpe(_, Encoding::O200k | Encoding::Cl100k))
    }

    /// The kind of model: the built-in encodings are byte-level BPE; a
    /// tokenizer.json says its own (BPE, WordPiece, WordLevel, Unigram).
    pub fn model_kind(&self) -> &'static str {
        use tokenizers::models::ModelWrapper;
        match &self.kind {
            Kind::Bpe(..) => "byte-level BPE",
            Kind::HuggingFace(hf) => match hf.get_model() {
                ModelWrapper::BPE(_) => "BPE",
                ModelWrapper::WordPiece(_) => "WordPiece",
                ModelWrapper::WordLevel(_) => "WordLevel",
                ModelWrapper::Unigram(_) => "Unigram",
            },
        }
    }

    /// The name or path it was loaded from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Token ids of `text`, with no special tokens added or recognised.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        match &self.kind {
            Kind::Bpe(bpe, Encoding::O200k) => {
                Ok(o200k::encode(bpe, text).unwrap_or_else(|| bpe.encode_ordinary(text)))
            }
            Kind::Bpe(bpe, _) => Ok(bpe.encode_ordinary(text)),
            Kind::HuggingFace(hf) => hf
                .encode(text, false)
                .map(|enc| enc.get_ids().to_vec())
                .map_err(|e| Error::msg(format!("tokenizer {}: {e}", self.name))),
        }
    }

    /// Number of tokens of `text`.
    pub fn count(&self, text: &str) -> Result<usize> {
        match &self.kind {
            // o200k_base counts fastest by its own encode.
            Kind::Bpe(bpe, Encoding::Cl100k | Encoding::R50k) => Ok(bpe.count_ordinary(text)),
            _ => self.encode(text).map(|ids| ids.len()),
        }
    }

    /// Text of token ids. Ids that end inside a multi-byte character decode
    /// with replacement characters; callers that need exact round trips
    /// choose their tokens so that this never happens.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        match &self.kind {
            Kind::Bpe(bpe, _) => bpe
                .decode(ids)
                .map_err(|e| Error::msg(format!("tokenizer {}: {e}", self.name))),
            Kind::HuggingFace(hf) => hf
                .decode(ids, false)
                .map_err(|e| Error::msg(format!("tokenizer {}: {e}", self.name))),
        }
    }

    /// Size of the vocabulary (ids are below this), special tokens included.
    pub fn vocab_size(&self) -> usize {
        match &self.kind {
            // tiktoken-rs does not expose the table size; these are the
            // published sizes of the built-in encodings.
            Kind::Bpe(_, Encoding::O200k) => 200_019,
            Kind::Bpe(_, Encoding::Cl100k) => 100_277,
            Kind::Bpe(_, Encoding::R50k) => 50_257,
            Kind::HuggingFace(hf) => hf.get_vocab_size(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_encodings_count_known_strings() {
        // GPT-2: "hello world" is [31373, 995]; cl100k: [15339, 1917].
        let gpt2 = Tokenizer::load("r50k_base").unwrap();
        assert_eq!(gpt2.encode("hello world").unwrap(), vec![31373, 995]);
        let cl = Tokenizer::load("cl100k_base").unwrap();
        assert_eq!(cl.encode("hello world").unwrap(), vec![15339, 1917]);
        // Special tokens are text: more than one token.
        assert!(gpt2.count("<|endoftext|>").unwrap() > 1);
        assert_eq!(gpt2.decode(&[31373, 995]).unwrap(), "hello world");
    }

    #[test]
    fn unknown_tokenizer_is_a_clear_error() {
        let err = Tokenizer::load("nope.json").unwrap_err().to_string();
        assert_eq!(
            err,
            "error: tokenizer `nope.json` is neither a built-in (o200k_base, cl100k_base, r50k_base) nor an existing tokenizer.json file"
        );
    }
}
