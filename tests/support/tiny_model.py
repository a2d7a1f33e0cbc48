"""A tiny random-weight llama GGUF for fast, deterministic protocol tests against real llama.cpp.

Output is gibberish: use it to assert protocol and structure, never meaning.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

TINY_MODEL_ALIAS = "tiny-test-model"
TINY_CONTEXT_LENGTH = 2048

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_EMBED = 64
_HEADS = 4
_FFN = 128
_LAYERS = 2
_SEED = 1234

# Word pieces besides the byte fallback, so ordinary text does not tokenize byte by byte.
_PIECES = (
    [chr(c) for c in range(ord("a"), ord("z") + 1)]
    + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    + [str(d) for d in range(10)]
    + list('{}[]":,.!?-_ ')
    + ["\u2581" + w for w in ("the", "a", "to", "and", "you", "is", "it", "hello", "name", "sword", "memory")]
    + ["\u2581"]
)


def _vocabulary() -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and types of the SPM vocabulary (ids are list positions)."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    for byte in range(256):
        tokens.append(f"<0x{byte:02X}>")
        # Typed CONTROL, these bytes still tokenize input but never appear in output text:
        # 0x00-0x1F so grammar-constrained JSON never holds raw control chars; 0x80-0xFF because a
        # random model emits broken UTF-8 with them, which a stream then holds back (no deltas for
        # seconds) or drops. Output is therefore printable ASCII, and newlines. The newline stays a
        # byte: llama-server feeds the generation prompt (`<|im_start|>assistant\n`) to a grammar as
        # text, and a CONTROL newline renders as nothing (the grammar refuses the request).
        printable = 0x20 <= byte < 0x80 or byte == 0x0A
        types.append(gguf.TokenType.BYTE if printable else gguf.TokenType.CONTROL)
    tokens += ["<|im_start|>", "<|im_end|>"]
    types += [gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    scores = [0.0] * len(tokens)
    for rank, piece in enumerate(_PIECES):
        tokens.append(piece)
        types.append(gguf.TokenType.NORMAL)
        scores.append(-float(rank) / 10.0 if len(piece) == 1 else 1.0)
    return tokens, scores, [int(t) for t in types]


STUCK_BYTE = 0xF0  # the lead byte of a 4-byte UTF-8 sequence


def write_tiny_model(path: Path, *, context_length: int = TINY_CONTEXT_LENGTH, endless: bool = False,
                     stuck_utf8: bool = False) -> Path:
    """Write the tiny llama-architecture GGUF (F32, 64-dim, 2 layers, ChatML template) to `path`.

    `endless`: the model (practically) never picks `<|im_end|>` on its own, so a free-text reply runs
    to max_tokens (for tests that need a long stream); grammars still end it.
    `stuck_utf8`: the model emits only the byte 0xF0, forever: llama-cpp-python holds incomplete UTF-8
    back, so a stream sends no text at all while it decodes (and slows down, re-decoding every token:
    the "no visible text" failure the stall detection is for).
    """
    path = Path(path)
    tokens, scores, types = _vocabulary()
    if stuck_utf8:
        types[tokens.index(f"<0x{STUCK_BYTE:02X}>")] = int(gguf.TokenType.BYTE)
    im_end = tokens.index("<|im_end|>")
    rng = np.random.default_rng(_SEED)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_name("tiny-test-model")
    writer.add_context_length(context_length)
    writer.add_embedding_length(_EMBED)
    writer.add_block_count(_LAYERS)
    writer.add_feed_forward_length(_FFN)
    writer.add_head_count(_HEADS)
    writer.add_head_count_kv(_HEADS)
    writer.add_rope_dimension_count(_EMBED // _HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(im_end)
    writer.add_add_bos_token(False)
    # No "▁" before the text after a special token: llama-server feeds the generation prompt to a grammar
    # token by token and refuses one that renders as "<|im_start|> assistant".
    writer.add_add_space_prefix(False)
    writer.add_chat_template(CHATML_TEMPLATE)

    vocab = len(tokens)
    embeddings = weight(vocab, _EMBED)
    output = weight(vocab, _EMBED)
    if stuck_utf8:
        # Every position carries the same hidden state (equal embeddings; the blocks add nothing, see
        # `block`), and only the stuck byte's output row sees it: its logit is 64, every other one 0.
        embeddings[:] = 1.0
        output[:] = 0.0
        output[tokens.index(f"<0x{STUCK_BYTE:02X}>")] = 1.0
    writer.add_tensor("token_embd.weight", embeddings)
    writer.add_tensor("output_norm.weight", np.ones(_EMBED, dtype=np.float32))
    if endless:
        # Logit 0 for every control token (end-of-turn ones included) against ~N(0, 1.6) rivals over
        # ~350 tokens: never the pick.
        output[[i for i, t in enumerate(types) if t in (gguf.TokenType.CONTROL, gguf.TokenType.UNKNOWN)]] = 0.0
    elif not stuck_utf8:
        # The same for the tokens that render as nothing (control bytes, <s>, <unk>): a reply is visible text,
        # or ends (<|im_end|> keeps its row).
        silent = [i for i, t in enumerate(types) if t in (gguf.TokenType.CONTROL, gguf.TokenType.UNKNOWN)]
        output[[i for i in silent if i != im_end]] = 0.0
    writer.add_tensor("output.weight", output)
    for layer in range(_LAYERS):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", np.ones(_EMBED, dtype=np.float32))
        scale = 0.0 if stuck_utf8 else 1.0  # zero projections: the residual stream passes unchanged
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{block}.{name}.weight", weight(_EMBED, _EMBED) * scale)
        writer.add_tensor(f"{block}.ffn_norm.weight", np.ones(_EMBED, dtype=np.float32))
        writer.add_tensor(f"{block}.ffn_gate.weight", weight(_FFN, _EMBED))
        writer.add_tensor(f"{block}.ffn_up.weight", weight(_FFN, _EMBED))
        writer.add_tensor(f"{block}.ffn_down.weight", weight(_EMBED, _FFN) * scale)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
