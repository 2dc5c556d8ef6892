//! `/v1/embeddings`: the prompt as `input`, one whole answer of `data`
//! (the embedding vectors) and `usage`, nothing generated: as vLLM's
//! `bench serve` (its `openai-embeddings` backend) and AIPerf (its
//! `embeddings` endpoint) send and measure them, the request's latency is
//! its end-to-end time; there is no first token to time.

use serde::de::MapAccess;
use serde_json::{Value, json};

use super::read::{self, Lenient, Scan, deserialize_leniently};
use super::{About, Answer, Api, Piece, Reply};

pub struct Embeddings;

/// Numbers in the simulated server's vectors.
const DIMENSIONS: u64 = 8;

impl Api for Embeddings {
    /// Token ids, else the text, as the completions API takes them.
    fn about(&self) -> About {
        About::prompt("/v1/embeddings", "input", "the embeddings API takes an input")
            .no_results("no embeddings in the answer")
    }

    fn read<'a>(&self, bytes: &'a [u8]) -> serde_json::Result<Answer<'a>> {
        read::answer(bytes, scan).map(|DataAnswer(a)| a)
    }

    /// A string, or an array of token ids and strings.
    fn read_prompt<'v>(&self, body: &'v Value) -> Option<Vec<Piece<'v>>> {
        super::text_or_tokens(body.get("input")?)
    }

    /// vLLM's answer: a vector of the prompt (`seed`), and `usage` with
    /// `completion_tokens` 0.
    fn answer(&self, reply: &Reply) -> Value {
        let vector: Vec<f64> = (0..DIMENSIONS)
            .map(|k| {
                let unit = crate::hash::unit_interval(crate::hash::mix(reply.seed ^ k));
                // Four decimals keep the body short.
                (unit * 20_000.0).round() / 10_000.0 - 1.0
            })
            .collect();
        json!({
            "id": format!("embd-{}", reply.n), "object": "list", "created": 0,
            "model": reply.model,
            "data": [{"index": 0, "object": "embedding", "embedding": vector}],
            "usage": {
                "prompt_tokens": reply.prompt_tokens, "total_tokens": reply.prompt_tokens,
                "completion_tokens": 0, "prompt_tokens_details": null,
            },
        })
    }
}

/// The single pass: `data` is counted, not read (its vectors are skipped).
fn scan(b: &[u8]) -> Option<DataAnswer<'_>> {
    read::scan(b, b"data", |s, a| {
        a.results = data(s)?;
        Some(())
    })
    .map(DataAnswer)
}

/// The length of `data`, when it is an array.
fn data(s: &mut Scan) -> Option<Option<usize>> {
    if s.peek()? != b'[' {
        s.skip()?;
        return Some(None);
    }
    let mut n = 0;
    s.array(|s| {
        n += 1;
        s.skip()
    })?;
    Some(Some(n))
}

/// An answer of `data`, as serde reads it.
#[derive(Default)]
struct DataAnswer<'a>(Answer<'a>);

/// `data`: its length, for an array.
#[derive(Default)]
struct Data(Option<usize>);

deserialize_leniently!(DataAnswer<'de>, Data);

impl<'de> Lenient<'de> for DataAnswer<'de> {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        read::answer_members(map, "data", |map, a| {
            a.results = map.next_value::<Data>()?.0;
            Ok(())
        })
        .map(DataAnswer)
    }
}

impl<'de> Lenient<'de> for Data {
    fn seq<A: serde::de::SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut n = 0;
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
            n += 1;
        }
        Ok(Data(Some(n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Given;
    use crate::error::FieldError;

    /// The error, the number of results, the usage.
    type Seen = (Option<Value>, Option<usize>, Option<[Option<u64>; 3]>);

    fn seen(a: Answer) -> Seen {
        assert!(!a.content && a.finish_reason.is_none());
        let usage = a
            .usage
            .map(|u| [u.prompt_tokens, u.completion_tokens, u.cached_tokens]);
        (a.error, a.results, usage)
    }

    /// What vLLM sends (vllm/entrypoints/pooling/embed/protocol.py, as
    /// Starlette writes JSON), an OpenAI-style answer, and odd ones.
    const SHAPES: [&str; 4] = [
        r#"{"id":"embd-5b3c","object":"list","created":1732000000,"model":"BAAI/bge-small-en-v1.5","data":[{"index":0,"object":"embedding","embedding":[0.0123,-0.0456,1e-05,-9.5367431640625e-07]}],"usage":{"prompt_tokens":7,"total_tokens":7,"completion_tokens":0,"prompt_tokens_details":null}}"#,
        r#"{"object":"list","data":[{"object":"embedding","embedding":[0.5,-0.25],"index":0},{"object":"embedding","embedding":"AAAAPw==","index":1}],"model":"text-embedding-3-small","usage":{"prompt_tokens":3,"total_tokens":3}}"#,
        r#" { "data" : [ ] , "usage" : { "prompt_tokens" : 0 } } "#,
        r#"{"data":"none","usage":{"prompt_tokens":18446744073709551615,"completion_tokens":1.5}}"#,
    ];

    #[test]
    fn reads_the_number_of_embeddings_and_the_usage() {
        let read = |text: &str| seen(Embeddings.read(text.as_bytes()).unwrap());
        assert_eq!(read(SHAPES[0]), (None, Some(1), Some([Some(7), Some(0), None])));
        assert_eq!(read(SHAPES[1]), (None, Some(2), Some([Some(3), None, None])));
        assert_eq!(read(SHAPES[2]), (None, Some(0), Some([Some(0), None, None])));
        assert_eq!(
            read(SHAPES[3]),
            (None, None, Some([Some(u64::MAX), None, None]))
        );
        assert_eq!(
            read(r#"{"error":{"message":"too long","code":400},"data":[]}"#),
            (
                Some(json!({"message":"too long","code":400})),
                Some(0),
                None
            )
        );
        assert!(Embeddings.read(br#"{"data":["#).is_err());
    }

    /// The usual answers take the single pass, and mangled answers never
    /// tell it and serde apart.
    #[test]
    fn the_single_pass_reads_what_serde_reads() {
        let slow = |b: &[u8]| serde_json::from_slice::<DataAnswer>(b).ok().map(|a| seen(a.0));
        crate::json::differential::hold_usual(&SHAPES, |b| scan(b).map(|a| seen(a.0)), slow, 5);
    }

    #[test]
    fn the_body_takes_an_input_and_no_conversation() {
        let mut out = Vec::new();
        let text = Given {
            messages: None,
            text: Some("a b"),
            token_ids: None,
        };
        Embeddings.prompt(&text).unwrap().write(&mut out);
        assert_eq!(out, br#""a b""#);
        let messages = serde_json::value::RawValue::from_string("[]".into()).unwrap();
        let chat = Given {
            messages: Some(&messages),
            text: None,
            token_ids: None,
        };
        assert_eq!(
            Embeddings.prompt(&chat).err().unwrap().to_string(),
            FieldError::new(
                "messages",
                "a conversation needs --endpoint chat (the embeddings API takes an input)"
            )
            .to_string()
        );
    }

    #[test]
    fn the_simulated_answer_is_vllms_shape() {
        let reply = Reply {
            n: 3,
            model: "m",
            text: "",
            seed: 9,
            prompt_tokens: 4,
            completion_tokens: 0,
            cached_tokens: 0,
        };
        let body = Embeddings.answer(&reply).to_string();
        let vector = body
            .split_once(r#""embedding":["#)
            .and_then(|(_, rest)| rest.split_once(']'))
            .unwrap()
            .0;
        assert_eq!(vector.split(',').count(), 8);
        assert_eq!(
            body.replace(vector, "V"),
            r#"{"id":"embd-3","object":"list","created":0,"model":"m","data":[{"index":0,"object":"embedding","embedding":[V]}],"usage":{"prompt_tokens":4,"total_tokens":4,"completion_tokens":0,"prompt_tokens_details":null}}"#
        );
        assert_eq!(seen(Embeddings.read(body.as_bytes()).unwrap()).1, Some(1));
    }
}
