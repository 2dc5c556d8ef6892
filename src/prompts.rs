//! Prompts synthesized from `input_length` and `hash_ids`, exact to the
//! token: the library behind trace-synth and trace-replay's prompts.
//!
//! The building material is a list of words that are each one token of the
//! chosen tokenizer, written with a leading space (` apple`). Pre-tokenizers
//! of BPE tokenizers split text before each space-led word, so a string of
//! such words is exactly one token per word, whatever words meet at block
//! boundaries. A block's words are a function of (seed, block id, position)
//! only, so the same id gives the same block in every record and every run.

use crate::error::{Error, FieldError, Result};
use crate::hash::{mix, stable_hash};
use crate::record::Record;
use crate::tokenizer::Tokenizer;

/// The seed used when none is given.
pub const DEFAULT_SEED: u64 = 20_261_122;

/// Most words kept from a vocabulary or corpus: enough that blocks never
/// repeat by chance, few enough to build quickly.
const MAX_WORDS: usize = 8192;

/// Words of fewer letters are often merged with neighbours by some
/// tokenizers; longer ones are rarely single tokens.
const WORD_LETTERS: std::ops::RangeInclusive<usize> = 3..=12;

/// One word of the building material: its text (with the leading space)
/// and its token id.
#[derive(Clone, Debug)]
struct Word {
    text: String,
    id: u32,
}

/// Makes prompts for one tokenizer, seed and block size.
#[derive(Debug)]
pub struct Synthesizer {
    words: Vec<Word>,
    seed: u64,
    block_size: u64,
    tokenizer_name: String,
}

/// A synthesized prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    /// The text, starting with a space.
    pub text: String,
    /// Its token ids under the synthesizer's tokenizer.
    pub token_ids: Vec<u32>,
}

impl Synthesizer {
    /// Build the word list from the tokenizer's vocabulary, or from a
    /// corpus text when one is given (its words that are single tokens).
    pub fn new(
        tokenizer: &Tokenizer,
        seed: u64,
        block_size: u64,
        corpus: Option<&str>,
    ) -> Result<Synthesizer> {
        let candidates: Vec<String> = match corpus {
            Some(text) => {
                let mut seen = std::collections::HashSet::new();
                text.split(|c: char| !c.is_ascii_alphabetic())
                    .map(str::to_ascii_lowercase)
                    .filter(|w| WORD_LETTERS.contains(&w.len()) && seen.insert(w.clone()))
                    .collect()
            }
            None => vocabulary_words(tokenizer)?,
        };
        let mut words = Vec::new();
        for w in candidates {
            if words.len() == MAX_WORDS {
                break;
            }
            let text = format!(" {w}");
            let ids = tokenizer.encode(&text)?;
            if ids.len() != 1 {
                continue;
            }
            // Twice in a row must stay two tokens: the pre-tokenizer splits
            // at the space.
            if tokenizer.count(&format!("{text}{text}"))? != 2 {
                continue;
            }
            words.push(Word { text, id: ids[0] });
        }
        if words.len() < 64 {
            return Err(Error::msg(format!(
                "tokenizer {} ({} model) has too few single-token words ({}) to build prompts from{}",
                tokenizer.name(),
                tokenizer.model_kind(),
                words.len(),
                if corpus.is_some() {
                    "; give a larger --corpus"
                } else {
                    ""
                }
            )));
        }
        let synth = Synthesizer {
            words,
            seed,
            block_size,
            tokenizer_name: tokenizer.name().to_string(),
        };
        synth.check_exact(tokenizer)?;
        Ok(synth)
    }

    /// Refuse a tokenizer under which the words do not stay one token each
    /// once written side by side (a model whose pre-tokenizer does not
    /// split at spaces merges across them): a sample prompt must encode
    /// to exactly its words' ids, whatever the model type.
    fn check_exact(&self, tokenizer: &Tokenizer) -> Result<()> {
        const SAMPLE: u64 = 2048;
        let p = self.prompt(SAMPLE, None, 0);
        let got = tokenizer.encode(&p.text)?;
        if got == p.token_ids {
            return Ok(());
        }
        let at = got
            .iter()
            .zip(&p.token_ids)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(p.token_ids.len()));
        let words: Vec<&str> = p.text.split(' ').skip(1).collect();
        let around = words[at.saturating_sub(1)..(at + 2).min(words.len())].join(" ");
        Err(Error::msg(format!(
            "tokenizer {} ({} model) does not keep space-led words apart: {SAMPLE} of its \
             single-token words written together give {} tokens, not {SAMPLE} (first at word \
             {at}, {:?}); prompts of exact length cannot be built from it",
            tokenizer.name(),
            tokenizer.model_kind(),
            got.len(),
            around,
        )))
    }

    /// Tokens per block.
    pub fn block_size(&self) -> u64 {
        self.block_size
    }

    /// The tokenizer the prompts are exact for.
    pub fn tokenizer_name(&self) -> &str {
        &self.tokenizer_name
    }

    /// Word indices of a prompt: block k is a function of `hash_ids[k]`;
    /// without `hash_ids`, of `unique_key` and k, in a space of ids that
    /// trace ids do not reach. The last block is the prefix of its id's
    /// full block.
    fn word_indices(
        &self,
        input_length: u64,
        hash_ids: Option<&[u64]>,
        unique_key: u64,
        mut each: impl FnMut(usize),
    ) {
        let n = self.words.len() as u64;
        let mut left = input_length;
        let mut k = 0u64;
        while left > 0 {
            let block = match hash_ids {
                Some(ids) => mix(ids[k as usize] ^ 0x5EED_0000_0000_0000),
                None => mix(stable_hash(unique_key, b"unique") ^ mix(k)),
            };
            let block_seed = mix(self.seed ^ block);
            let len = left.min(self.block_size);
            for pos in 0..len {
                each((mix(block_seed.wrapping_add(pos)) % n) as usize);
            }
            left -= len;
            k += 1;
        }
    }

    /// The prompt of a record: `input_length` tokens, with the block
    /// structure of `hash_ids` when given (its length must be
    /// `ceil(input_length / block_size)`; the caller checks).
    pub fn prompt(&self, input_length: u64, hash_ids: Option<&[u64]>, unique_key: u64) -> Prompt {
        let mut text = String::with_capacity(input_length as usize * 8);
        let mut token_ids = Vec::with_capacity(input_length as usize);
        self.word_indices(input_length, hash_ids, unique_key, |i| {
            let w = &self.words[i];
            text.push_str(&w.text);
            token_ids.push(w.id);
        });
        Prompt { text, token_ids }
    }

    /// Only the text of [`Synthesizer::prompt`].
    pub fn prompt_text(
        &self,
        input_length: u64,
        hash_ids: Option<&[u64]>,
        unique_key: u64,
    ) -> String {
        let mut text = String::with_capacity(input_length as usize * 8);
        self.word_indices(input_length, hash_ids, unique_key, |i| {
            text.push_str(&self.words[i].text);
        });
        text
    }
}

/// How a synthesized prompt is written into a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PromptForm {
    /// `text_input`.
    Text,
    /// `messages`: one user message.
    Messages,
    /// `prompt_token_ids`, for servers that take token ids.
    TokenIds,
}

/// Does the record still need a prompt? It does when it has
/// `input_length` and none of the other input modes.
pub fn needs_prompt(rec: &Record) -> bool {
    rec.input_mode() == Some(crate::record::InputMode::Length)
}

/// The prompt a record asks for, checking `hash_ids` against
/// `input_length`; `None` when the record needs none.
pub fn prompt_for(
    rec: &Record,
    synth: &Synthesizer,
    unique_key: u64,
) -> Result<Option<Prompt>, FieldError> {
    if !needs_prompt(rec) {
        return Ok(None);
    }
    let Some(len) = rec.input_length()? else {
        return Ok(None);
    };
    let ids = rec.hash_ids()?;
    if let Some(ids) = &ids {
        crate::record::check_block_count(ids.len(), len, synth.block_size)?;
    }
    Ok(Some(synth.prompt(len, ids.as_deref(), unique_key)))
}

/// Add a synthesized prompt to a record that needs one (see
/// [`needs_prompt`]): the prompt replaces `input_length` and `hash_ids`
/// (one input mode per record), and the length moves to
/// `observed.prompt_tokens`, over any figure there: replay reads it as the
/// length asked for, and the prompt is exactly that long. Returns whether a
/// prompt was added.
pub fn add_prompt(
    rec: &mut Record,
    synth: &Synthesizer,
    form: PromptForm,
    unique_key: u64,
) -> Result<bool, FieldError> {
    let Some(prompt) = prompt_for(rec, synth, unique_key)? else {
        return Ok(false);
    };
    let len = prompt.token_ids.len() as u64;
    rec.remove("input_length");
    rec.remove("hash_ids");
    match form {
        PromptForm::Text => rec.set("text_input", &prompt.text),
        PromptForm::Messages => rec.set(
            "messages",
            &serde_json::json!([{"role": "user", "content": prompt.text}]),
        ),
        PromptForm::TokenIds => rec.set("prompt_token_ids", &prompt.token_ids),
    }
    let mut observed = match rec.get("observed") {
        Some(raw) => serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(raw.get())
            .map_err(|_| FieldError::new("observed", "is not an object"))?,
        None => serde_json::Map::new(),
    };
    observed.insert("prompt_tokens".into(), serde_json::Value::from(len));
    rec.set("observed", &observed);
    Ok(true)
}

/// Lower-case ASCII words that the vocabulary holds as one token with a
/// leading space, in id order (so the list is the same on every machine).
fn vocabulary_words(tokenizer: &Tokenizer) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for id in 0..tokenizer.vocab_size() as u32 {
        if out.len() >= MAX_WORDS * 2 {
            break;
        }
        let Ok(text) = tokenizer.decode(&[id]) else {
            continue;
        };
        // Byte-level BPE decodes to " word"; SentencePiece-style to "word".
        let word = text.strip_prefix(' ').unwrap_or(&text);
        if WORD_LETTERS.contains(&word.len()) && word.bytes().all(|b| b.is_ascii_lowercase()) {
            out.push(word.to_string());
        }
    }
    Ok(out)
}

/// Build the synthesizer that trace-synth and trace-replay flags describe.
pub fn synthesizer(
    tokenizer: &str,
    seed: u64,
    block_size: u64,
    corpus: Option<&std::path::Path>,
) -> Result<Synthesizer> {
    let tok = Tokenizer::load(tokenizer)?;
    let corpus = match corpus {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
            Error::msg(format!(
                "{}: cannot read corpus: {}",
                path.display(),
                crate::error::io_message(&e)
            ))
        })?),
        None => None,
    };
    Synthesizer::new(&tok, seed, block_size, corpus.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synth(name: &str) -> (Tokenizer, Synthesizer) {
        let t = Tokenizer::load(name).unwrap();
        let s = Synthesizer::new(&t, DEFAULT_SEED, 512, None).unwrap();
        (t, s)
    }

    #[test]
    fn exact_length_for_every_builtin_tokenizer() {
        for name in crate::tokenizer::BUILTIN {
            let (t, s) = synth(name);
            let mut state = 1u64;
            for _ in 0..40 {
                state = mix(state);
                let len = state % 3000;
                let blocks = len.div_ceil(512);
                let ids: Vec<u64> = (0..blocks).map(|k| (state >> 7) % 5 + k).collect();
                let p = s.prompt(len, Some(&ids), 0);
                assert_eq!(t.encode(&p.text).unwrap(), p.token_ids, "{name} {len}");
                assert_eq!(p.token_ids.len() as u64, len);
                assert_eq!(s.prompt_text(len, Some(&ids), 0), p.text);
            }
        }
    }

    #[test]
    fn shared_ids_share_tokens_and_differ_after() {
        let (_, s) = synth("r50k_base");
        let a = s.prompt(1300, Some(&[1, 2, 3]), 0);
        let b = s.prompt(1200, Some(&[1, 2, 9]), 1);
        assert_eq!(a.token_ids[..1024], b.token_ids[..1024]);
        assert!(b.text.starts_with(&a.text[..a.text.len() / 2]));
        assert_ne!(a.token_ids[1024..1100], b.token_ids[1024..1100]);
        // A short last block is the prefix of the full one.
        let full = s.prompt(1536, Some(&[1, 2, 3]), 5);
        assert_eq!(full.token_ids[..1300], a.token_ids[..]);
    }

    #[test]
    fn unique_prompts_share_no_leading_block() {
        let (_, s) = synth("r50k_base");
        let a = s.prompt(600, None, 1);
        let b = s.prompt(600, None, 2);
        assert_ne!(a.token_ids[..512], b.token_ids[..512]);
        assert_eq!(a, s.prompt(600, None, 1));
    }

    #[test]
    fn seed_changes_blocks() {
        let t = Tokenizer::load("r50k_base").unwrap();
        let a = Synthesizer::new(&t, 1, 512, None).unwrap();
        let b = Synthesizer::new(&t, 2, 512, None).unwrap();
        assert_ne!(a.prompt(512, Some(&[7]), 0), b.prompt(512, Some(&[7]), 0));
    }
}
