#!/usr/bin/env python3
"""Write a tiny llama-architecture GGUF with random weights and a real tokenizer.

The tokenizer keys (vocabulary, merges, token types, special ids, pre-tokenizer)
are taken from a vocab-only GGUF of llama.cpp's models/ folder; the weights are
seeded random numbers. A server loading it tokenizes, decodes one token per step
and counts tokens exactly as with a trained model of the same tokenizer; only the
text is meaningless. Needs the `gguf` and `numpy` packages.

    python3 tiny_gguf.py VOCAB.gguf OUT.gguf
"""
import sys

import gguf
import numpy as np

# A chat template with a constant overhead per message, so that tests can
# predict the prompt tokens a chat request costs.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
EMBD, LAYERS, HEADS, FF, CONTEXT = 64, 2, 4, 128, 32768


def main(vocab_path: str, out_path: str) -> None:
    vocab = gguf.GGUFReader(vocab_path)
    out = gguf.GGUFWriter(out_path, arch="llama")
    n_vocab = 0
    for key, field in vocab.fields.items():
        if not key.startswith("tokenizer.") or key == "tokenizer.chat_template":
            continue
        value = field.contents()
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            out.add_key_value(key, value, field.types[0], sub_type=field.types[1])
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(value)
        else:
            out.add_key_value(key, value, field.types[0])
    if not n_vocab:
        sys.exit(f"{vocab_path}: no tokenizer.ggml.tokens")
    out.add_chat_template(CHAT_TEMPLATE)
    out.add_name(f"tiny-random-{n_vocab}")
    out.add_context_length(CONTEXT)
    out.add_embedding_length(EMBD)
    out.add_block_count(LAYERS)
    out.add_feed_forward_length(FF)
    out.add_head_count(HEADS)
    out.add_head_count_kv(HEADS)
    out.add_rope_dimension_count(EMBD // HEADS)
    out.add_rope_freq_base(10000.0)
    out.add_layer_norm_rms_eps(1e-5)
    out.add_vocab_size(n_vocab)
    out.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    rng = np.random.default_rng(0)

    def weights(rows: int, cols: int, scale: float) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    ones = np.ones(EMBD, dtype=np.float32)
    out.add_tensor("token_embd.weight", weights(n_vocab, EMBD, 1.0).astype(np.float16))
    out.add_tensor("output_norm.weight", ones)
    # An untied, low-variance head keeps sampling varied instead of echoing
    # the previous token.
    out.add_tensor("output.weight", weights(n_vocab, EMBD, 0.1).astype(np.float16))
    for i in range(LAYERS):
        p = f"blk.{i}."
        s = 1.0 / np.sqrt(EMBD)
        out.add_tensor(p + "attn_norm.weight", ones)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            out.add_tensor(p + name + ".weight", weights(EMBD, EMBD, s))
        out.add_tensor(p + "ffn_norm.weight", ones)
        out.add_tensor(p + "ffn_gate.weight", weights(FF, EMBD, s))
        out.add_tensor(p + "ffn_up.weight", weights(FF, EMBD, s))
        out.add_tensor(p + "ffn_down.weight", weights(EMBD, FF, 1.0 / np.sqrt(FF)))
    out.write_header_to_file()
    out.write_kv_data_to_file()
    out.write_tensors_to_file()
    out.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
