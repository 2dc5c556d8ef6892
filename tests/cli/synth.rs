use serde_json::Value;

use crate::util::{Cmd, TestDir, data, hash_ids as ids, run_stdin};
use tracekit::tokenizer::Tokenizer;

/// The first `n` records of the Mooncake conversation trace.
fn conversation(n: usize) -> String {
    let text = std::fs::read_to_string(data("conversation_trace.jsonl")).unwrap();
    text.lines().take(n).map(|l| format!("{l}\n")).collect()
}

fn synth(args: &[&str], input: &str) -> Vec<Value> {
    let run = run_stdin("trace-synth", args, input);
    run.ok();
    run.json_lines()
}

#[test]
fn prompts_have_exactly_input_length_tokens_and_share_prefixes() {
    let input = conversation(60);
    let originals: Vec<Value> = input
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for name in ["o200k_base", "r50k_base"] {
        let tok = Tokenizer::load(name).unwrap();
        let out = synth(&["--tokenizer", name], &input);
        assert_eq!(out.len(), originals.len());
        let tokens: Vec<Vec<u32>> = out
            .iter()
            .map(|r| tok.encode(r["text_input"].as_str().unwrap()).unwrap())
            .collect();
        for ((o, r), t) in originals.iter().zip(&out).zip(&tokens) {
            let len = o["input_length"].as_u64().unwrap();
            assert_eq!(t.len() as u64, len, "{name}");
            assert_eq!(r["observed"]["prompt_tokens"], o["input_length"]);
            assert!(r.get("input_length").is_none() && r.get("hash_ids").is_none());
            assert_eq!(r["output_length"], o["output_length"]);
        }
        // Every pair: equal leading ids ⇒ equal leading tokens; the first
        // differing block differs.
        for i in 0..originals.len() {
            for j in 0..i {
                let (a, b) = (ids(&originals[i]), ids(&originals[j]));
                let k = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
                let shared = (k * 512).min(tokens[i].len()).min(tokens[j].len());
                assert_eq!(tokens[i][..shared], tokens[j][..shared]);
                if k < a.len() && k < b.len() {
                    let end = ((k + 1) * 512).min(tokens[i].len()).min(tokens[j].len());
                    assert_ne!(tokens[i][k * 512..end], tokens[j][k * 512..end]);
                }
            }
        }
    }
}

#[test]
fn same_seed_same_prompts_other_seed_other_prompts() {
    let input = conversation(5);
    let a = synth(&[], &input);
    assert_eq!(a, synth(&[], &input));
    assert_ne!(a, synth(&["--seed", "7"], &input));
}

#[test]
fn messages_and_token_ids_forms() {
    let input = conversation(3);
    let m = synth(&["--format", "messages"], &input);
    let t = synth(&[], &input);
    assert_eq!(m[0]["messages"][0]["role"], "user");
    assert_eq!(m[0]["messages"][0]["content"], t[0]["text_input"]);
    let ids = synth(&["--token-ids"], &input);
    let tok = Tokenizer::load("o200k_base").unwrap();
    let want: Vec<Value> = tok
        .encode(t[1]["text_input"].as_str().unwrap())
        .unwrap()
        .into_iter()
        .map(Value::from)
        .collect();
    assert_eq!(ids[1]["prompt_token_ids"].as_array().unwrap(), &want);
    // What synth writes is a valid canonical trace.
    let text: String = ids.iter().map(|v| format!("{v}\n")).collect();
    Cmd::new("trace-validate")
        .arg("--check")
        .stdin(text)
        .run()
        .ok();
}

#[test]
fn records_with_a_prompt_pass_through_byte_identical() {
    let input = "{\"timestamp\": 1.50, \"text_input\": \"hi\", \"output_length\": 3}\n";
    let run = run_stdin("trace-synth", &[], input);
    run.ok();
    assert_eq!(run.stdout_str(), input);
}

#[test]
fn wrong_block_count_names_record_and_hints_block_size() {
    let input = "{\"timestamp\":0,\"input_length\":600,\"output_length\":1,\"hash_ids\":[1]}\n";
    let run = run_stdin("trace-synth", &[], input);
    run.code(2).stderr_is(
        "trace-synth: <stdin>:1: error: field `hash_ids`: has 1 block, but input_length 600 needs \
         ceil(600 / 512) = 2; if the trace uses another block size, give --block-size\n",
    );
    let run = run_stdin(
        "trace-synth",
        &["--tokenizer", "no/such/tokenizer.json"],
        input,
    );
    run.code(2);
    run.stderr_has("no/such/tokenizer.json");
}

/// Two records sharing their first 512-token block, synthesized with the
/// tokenizer at `path` as ids and as text: the lengths are exact, the
/// shared block is the same ids, the other blocks differ, and the text
/// encodes to exactly those ids.
fn assert_exact_lengths(path: &str) {
    let input = "{\"timestamp\":0,\"input_length\":700,\"output_length\":2,\"hash_ids\":[1,2]}\n\
                 {\"timestamp\":1,\"input_length\":600,\"output_length\":2,\"hash_ids\":[1,3]}\n";
    let out = synth(&["--token-ids", "--tokenizer", path], input);
    let ids: Vec<Vec<u64>> = out
        .iter()
        .map(|r| {
            r["prompt_token_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect()
        })
        .collect();
    assert_eq!((ids[0].len(), ids[1].len()), (700, 600), "{path}");
    assert_eq!(ids[0][..512], ids[1][..512], "{path}");
    assert_ne!(ids[0][512..600], ids[1][512..600], "{path}");
    let tok = Tokenizer::load(path).unwrap();
    let text = synth(&["--tokenizer", path], input);
    for (r, want) in text.iter().zip(&ids) {
        let got = tok.encode(r["text_input"].as_str().unwrap()).unwrap();
        let got: Vec<u64> = got.iter().map(|&i| u64::from(i)).collect();
        assert_eq!(got, *want, "{path}");
    }
}

#[test]
fn a_hugging_face_tokenizer_file_gives_exact_lengths() {
    // A WordLevel tokenizer.json: the `tokenizers` crate's own format.
    assert_exact_lengths(data("wordlevel-tokenizer.json").to_str().unwrap());
}

#[test]
fn every_tokenizer_json_model_type_gives_exact_lengths() {
    // Small tokenizer.json files written for the tests, one per model type:
    // WordPiece (BERT's normalizer and pre-tokenizer, with the fixed
    // padding and truncation at 16 that sentence embedders ship, which a
    // count must ignore), Unigram and BPE with Metaspace (SentencePiece's
    // forms), and byte-level BPE (GPT-2's).
    for name in [
        "wordpiece-padded",
        "unigram",
        "bpe-metaspace",
        "bpe-bytelevel",
    ] {
        assert_exact_lengths(data(&format!("tokenizers/{name}.json")).to_str().unwrap());
    }
}

#[test]
fn a_tokenizer_that_merges_words_is_refused_with_the_reason() {
    // WordLevel, with a pre-tokenizer that keeps a b-word and the c-word
    // after it together (one unknown token): each word alone is one token,
    // side by side they are not.
    let path = data("tokenizers/wordlevel-merging.json");
    let path = path.to_str().unwrap();
    let run = run_stdin(
        "trace-synth",
        &["--tokenizer", path],
        "{\"timestamp\":0,\"input_length\":7,\"output_length\":2}\n",
    );
    run.code(2).stderr_is(format!(
        "trace-synth: error: tokenizer {path} (WordLevel model) does not keep space-led words \
         apart: 2048 of its single-token words written together give 1537 tokens, not 2048 \
         (first at word 0, \"bili ceni\"); prompts of exact length cannot be built from it\n"
    ));
}

#[test]
fn the_prompt_length_replaces_a_stale_observed_prompt_tokens() {
    // As after `trace-rescale --input-scale` on a trace made before it
    // dropped stale figures: production's 600 no longer describes the prompt.
    let out = synth(
        &[],
        "{\"input_length\":7,\"output_length\":3,\"observed\":{\"ttft_ms\":9,\"prompt_tokens\":600,\"status\":\"ok\"}}\n",
    );
    assert_eq!(
        out[0]["observed"],
        serde_json::json!({"ttft_ms": 9, "prompt_tokens": 7, "status": "ok"})
    );
    assert_eq!(
        serde_json::to_string(&out[0]["observed"]).unwrap(),
        r#"{"ttft_ms":9,"prompt_tokens":7,"status":"ok"}"#
    );
}

#[test]
fn rescaled_then_synthesized_prompts_are_asked_for_at_their_new_length() {
    let rescaled = run_stdin(
        "trace-rescale",
        &["--input-scale", "20"],
        "{\"input_length\":3,\"output_length\":2,\"observed\":{\"prompt_tokens\":3}}\n",
    );
    rescaled.ok();
    let out = synth(&[], &rescaled.stdout_str());
    assert_eq!(out[0]["observed"]["prompt_tokens"], 60);
    let tok = Tokenizer::load("o200k_base").unwrap();
    assert_eq!(
        tok.encode(out[0]["text_input"].as_str().unwrap())
            .unwrap()
            .len(),
        60
    );
}

#[test]
fn a_model_name_is_found_in_the_local_hugging_face_cache() {
    let dir = TestDir::new("synth-hf-cache");
    let model = dir.join("hub/models--acme--tiny");
    for snapshot in ["abc123", "def456"] {
        std::fs::create_dir_all(model.join("snapshots").join(snapshot)).unwrap();
    }
    // refs/main names the snapshot to use; the other has a file that is
    // not a tokenizer, which would fail the run if it were read.
    std::fs::copy(
        data("wordlevel-tokenizer.json"),
        model.join("snapshots/abc123/tokenizer.json"),
    )
    .unwrap();
    std::fs::write(model.join("snapshots/def456/tokenizer.json"), "{}").unwrap();
    std::fs::create_dir_all(model.join("refs")).unwrap();
    std::fs::write(model.join("refs/main"), "abc123\n").unwrap();
    let input = "{\"input_length\":9,\"output_length\":2,\"hash_ids\":[4]}\n";
    let by_name = Cmd::new("trace-synth")
        .args(["--token-ids", "--tokenizer", "acme/tiny"])
        .env("HF_HOME", dir.path.to_str().unwrap())
        .env("HF_HUB_CACHE", "")
        .stdin(input)
        .run();
    by_name.ok();
    let file = data("wordlevel-tokenizer.json");
    let by_path = synth(
        &["--token-ids", "--tokenizer", file.to_str().unwrap()],
        input,
    );
    assert_eq!(by_name.json_lines(), by_path);
    assert_eq!(by_path[0]["prompt_token_ids"].as_array().unwrap().len(), 9);

    let missing = Cmd::new("trace-synth")
        .args(["--tokenizer", "acme/other"])
        .env("HF_HOME", dir.path.to_str().unwrap())
        .env("HF_HUB_CACHE", "")
        .stdin(input)
        .run();
    missing.code(2).stderr_is(format!(
        "trace-synth: error: tokenizer `acme/other` is neither a built-in (o200k_base, \
         cl100k_base, r50k_base), nor an existing file, nor a model in the local Hugging \
         Face cache (looked for {}/hub/models--acme--other/snapshots/*/tokenizer.json; the \
         cache is HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else \
         ~/.cache/huggingface/hub); nothing is downloaded: fetch it first (huggingface-cli \
         download acme/other tokenizer.json) or give the file's path\n",
        dir.path.display()
    ));
}
