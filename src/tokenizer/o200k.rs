//! A fast path for o200k_base on ASCII text: the pre-tokenizer's pattern
//! matched by hand, and the ids of each piece kept per thread.
//!
//! tiktoken-rs spends most of its time in its backtracking regex (the
//! pattern has a look-ahead), about 40 MB/s here. On ASCII the pattern's
//! character classes are simple byte ranges, and natural text repeats its
//! pieces (words with their leading space), so splitting by hand and
//! looking pieces up runs several times faster. Text with any other byte
//! goes to tiktoken-rs whole. Tests check pieces against the pattern and
//! ids against tiktoken-rs on random text.
//!
//! The pattern, alternatives tried in order at each position:
//! ```text
//! 1 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! 2 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! 3 \p{N}{1,3}
//! 4  ?[^\s\p{L}\p{N}]+[\r\n/]*
//! 5 \s*[\r\n]+
//! 6 \s+(?!\S)
//! 7 \s+
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use tiktoken_rs::CoreBPE;

/// Token ids of ASCII `text`, or `None` if it is not ASCII.
pub fn encode(bpe: &CoreBPE, text: &str) -> Option<Vec<u32>> {
    if !text.is_ascii() {
        return None;
    }
    let bytes = text.as_bytes();
    let mut ids = Vec::with_capacity(text.len() / 4 + 1);
    PIECES.with_borrow_mut(|cache| {
        if cache.len() > MAX_PIECES {
            cache.clear();
        }
        for_each_piece(bytes, |piece| match cache.get(piece) {
            Some(known) => ids.extend_from_slice(known),
            None => {
                // A piece on its own is one piece of the pattern again.
                let piece_ids = bpe.encode_ordinary(std::str::from_utf8(piece).expect("ASCII"));
                ids.extend_from_slice(&piece_ids);
                cache.insert(piece.into(), piece_ids.into());
            }
        });
    });
    Some(ids)
}

/// Pieces cached per thread before the cache starts over (tens of MB).
const MAX_PIECES: usize = 1 << 19;

/// Ids of pieces seen, by piece.
type PieceIds = HashMap<Box<[u8]>, Box<[u32]>, BuildHasherDefault<PieceHasher>>;

thread_local! {
    static PIECES: RefCell<PieceIds> = RefCell::default();
}

/// A cheap hash for short pieces (std's default is built to resist
/// chosen collisions, which a local cache does not need).
#[derive(Default)]
struct PieceHasher(u64);

impl std::hash::Hasher for PieceHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Class {
    Upper,
    Lower,
    Digit,
    Newline,
    Space,
    Other,
}

fn class(b: u8) -> Class {
    match b {
        b'A'..=b'Z' => Class::Upper,
        b'a'..=b'z' => Class::Lower,
        b'0'..=b'9' => Class::Digit,
        b'\r' | b'\n' => Class::Newline,
        // \s in ASCII: tab, line tab, form feed and space (and \r \n).
        b'\t' | 0x0b | 0x0c | b' ' => Class::Space,
        _ => Class::Other,
    }
}

fn is_letter(b: u8) -> bool {
    b.is_ascii_alphabetic()
}

/// Call `f` with each piece of ASCII `text`, in order.
pub fn for_each_piece(text: &[u8], mut f: impl FnMut(&[u8])) {
    let n = text.len();
    let mut i = 0;
    while i < n {
        let c = class(text[i]);
        let end = match c {
            Class::Upper | Class::Lower => letters(text, i),
            Class::Digit => {
                let mut j = i + 1;
                while j < n && j < i + 3 && text[j].is_ascii_digit() {
                    j += 1;
                }
                j
            }
            // 1 or 2 with the optional first character.
            Class::Space | Class::Other if i + 1 < n && is_letter(text[i + 1]) => {
                letters(text, i + 1)
            }
            // 4, with its optional space.
            Class::Other => punctuation(text, i),
            Class::Space if text[i] == b' ' && i + 1 < n && class(text[i + 1]) == Class::Other => {
                punctuation(text, i + 1)
            }
            Class::Space | Class::Newline => whitespace(text, i),
        };
        f(&text[i..end]);
        i = end;
    }
}

/// Alternatives 1 and 2 from the first letter at `i`: capitals, then small
/// letters, then a contraction. (On ASCII they differ only in needing a
/// small or a capital letter; a run of letters always satisfies one.)
fn letters(text: &[u8], i: usize) -> usize {
    let n = text.len();
    let mut j = i;
    while j < n && text[j].is_ascii_uppercase() {
        j += 1;
    }
    while j < n && text[j].is_ascii_lowercase() {
        j += 1;
    }
    if j < n && text[j] == b'\'' {
        let at = |k: usize| text.get(j + k).map(u8::to_ascii_lowercase);
        match (at(1), at(2)) {
            (Some(b's' | b't' | b'm' | b'd'), _) => return j + 2,
            (Some(b'r' | b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => return j + 3,
            _ => {}
        }
    }
    j
}

/// Alternative 4 from its first non-space character at `i`.
fn punctuation(text: &[u8], i: usize) -> usize {
    let n = text.len();
    let mut j = i;
    while j < n && class(text[j]) == Class::Other {
        j += 1;
    }
    while j < n && matches!(text[j], b'\r' | b'\n' | b'/') {
        j += 1;
    }
    j
}

/// Alternatives 5 to 7 on the run of whitespace from `i`.
fn whitespace(text: &[u8], i: usize) -> usize {
    let n = text.len();
    let mut j = i;
    let mut last_newline = None;
    while j < n && matches!(class(text[j]), Class::Space | Class::Newline) {
        if class(text[j]) == Class::Newline {
            last_newline = Some(j);
        }
        j += 1;
    }
    match last_newline {
        // 5: the run up to its last newline.
        Some(k) => k + 1,
        // 6: all of it at the end, else all but its last character, which
        // then starts the next piece; 7: a single character.
        None if j == n || j - i == 1 => j,
        None => j - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fragments whose joins exercise every alternative and its edges.
    const PARTS: &[&str] = &[
        " ", "  ", "\n", "\r\n", "\r", "\t", "\x0b", "\x0c", " \n ", "a", "Ab", "ABC", "abc", "'s",
        "'S", "'re", "'LL", "'ve", "'d", "'m", "'t", "'x", "'", "1", "12", "1234", ".", "/",
        "!/\n", "?!", "\x00", "\x1f", "\x7f", "-", "_", "a_b", "(", "\"", " .", " 1", "x'", "IT'S",
        "\n/", " /", "'rE", "'l",
    ];

    fn random_texts(seed: u64, count: usize) -> Vec<String> {
        let mut state = seed;
        let mut below = |n: usize| {
            state = crate::hash::mix(state);
            (state % n as u64) as usize
        };
        (0..count)
            .map(|_| {
                let k = below(14);
                (0..k).map(|_| PARTS[below(PARTS.len())]).collect()
            })
            .collect()
    }

    #[test]
    fn pieces_are_the_patterns_matches() {
        let pattern = fancy_regex::Regex::new(concat!(
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ))
        .unwrap();
        for (case, text) in random_texts(1, 20_000).iter().enumerate() {
            let mut mine = Vec::new();
            for_each_piece(text.as_bytes(), |p| mine.push(p.to_vec()));
            let theirs: Vec<Vec<u8>> = pattern
                .find_iter(text)
                .map(|m| m.unwrap().as_str().as_bytes().to_vec())
                .collect();
            assert_eq!(mine, theirs, "case {case}: {text:?}");
        }
    }

    #[test]
    fn ids_are_tiktokens() {
        let bpe = tiktoken_rs::o200k_base().unwrap();
        for (case, text) in random_texts(2, 5_000).iter().enumerate() {
            // Twice: the second time from the cache.
            for _ in 0..2 {
                let ids = encode(&bpe, text).unwrap();
                assert_eq!(ids, bpe.encode_ordinary(text), "case {case}: {text:?}");
            }
        }
        assert_eq!(encode(&bpe, "café"), None);
    }
}
