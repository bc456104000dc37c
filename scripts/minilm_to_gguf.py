#!/usr/bin/env python3
"""Convert sentence-transformers/all-MiniLM-L6-v2 (a BERT encoder: safetensors
+ tokenizer.json) into the GGUF file llama.cpp runs as a "bert" embedding model.

    minilm_to_gguf.py MODEL_DIR OUT.gguf

Standard library only (no torch, numpy or gguf package): the two formats are
small and fixed. safetensors is an 8-byte header length, a JSON header and raw
little-endian tensors; GGUF v3 is a header, key/values, tensor descriptions
and 32-byte aligned data. Weights stay F32, byte for byte as shipped, so the
output depends only on the input (the same file on every machine).

The names and keys follow llama.cpp's BERT support (src/models/bert.cpp,
src/llama-vocab.cpp's WPM tokenizer): WordPiece tokens are stored with the
"phantom space" convention ("##x" becomes "x", a word-initial "x" becomes
"\u2581x", special tokens unchanged), pooling is the mean (what the model's
1_Pooling/config.json says), attention is not causal.
"""

import json
import os
import struct
import sys

ALIGN = 32
# GGUF value types
U32, I32, F32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9
# ggml tensor type
GGML_F32 = 0
POOLING_MEAN = 1
TOKEN_NORMAL, TOKEN_CONTROL = 1, 3


def die(msg):
    sys.exit(f"minilm_to_gguf.py: {msg}")


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            out[name] = (info["dtype"], info["shape"], base + start, end - start)
        return out


def tensor_name(hf):
    """The llama.cpp name of a Hugging Face BERT tensor, or None to skip it."""
    simple = {
        "embeddings.word_embeddings.weight": "token_embd.weight",
        "embeddings.position_embeddings.weight": "position_embd.weight",
        "embeddings.token_type_embeddings.weight": "token_types.weight",
        "embeddings.LayerNorm.weight": "token_embd_norm.weight",
        "embeddings.LayerNorm.bias": "token_embd_norm.bias",
    }
    if hf in simple:
        return simple[hf]
    if not hf.startswith("encoder.layer."):
        return None  # position_ids, the pooler: unused for embeddings
    rest = hf[len("encoder.layer."):]
    layer, rest = rest.split(".", 1)
    parts = {
        "attention.self.query.": "attn_q.",
        "attention.self.key.": "attn_k.",
        "attention.self.value.": "attn_v.",
        "attention.output.dense.": "attn_output.",
        "attention.output.LayerNorm.": "attn_output_norm.",
        "intermediate.dense.": "ffn_up.",
        "output.dense.": "ffn_down.",
        "output.LayerNorm.": "layer_output_norm.",
    }
    for prefix, short in parts.items():
        if rest.startswith(prefix):
            return f"blk.{layer}.{short}{rest[len(prefix):]}"
    die(f"unexpected tensor {hf}")


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gguf_string(key) + struct.pack("<I", vtype)
    if vtype == U32:
        out += struct.pack("<I", value)
    elif vtype == I32:
        out += struct.pack("<i", value)
    elif vtype == F32:
        out += struct.pack("<f", value)
    elif vtype == BOOL:
        out += struct.pack("<?", value)
    elif vtype == STRING:
        out += gguf_string(value)
    else:
        die(f"unsupported type {vtype}")
    return out


def kv_array(key, etype, values):
    out = gguf_string(key) + struct.pack("<IIQ", ARRAY, etype, len(values))
    if etype == STRING:
        out += b"".join(gguf_string(v) for v in values)
    elif etype == I32:
        out += struct.pack(f"<{len(values)}i", *values)
    else:
        die(f"unsupported array type {etype}")
    return out


def main():
    if len(sys.argv) != 3:
        die("usage: minilm_to_gguf.py MODEL_DIR OUT.gguf")
    src, dest = sys.argv[1], sys.argv[2]
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(src, "tokenizer.json")) as f:
        tokenizer = json.load(f)
    pooling_path = os.path.join(src, "1_Pooling", "config.json")
    if os.path.exists(pooling_path):
        with open(pooling_path) as f:
            if not json.load(f).get("pooling_mode_mean_tokens"):
                die("the model's pooling is not the mean")
    if config.get("model_type") != "bert":
        die(f"not a BERT model: {config.get('model_type')}")

    vocab = tokenizer["model"]["vocab"]
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        die("tokenizer.json's vocabulary ids are not 0..n")
    special = {t["content"] for t in tokenizer.get("added_tokens", []) if t.get("special")}
    tokens, types = [], []
    for tok, _ in by_id:
        if tok in special:
            tokens.append(tok)
            types.append(TOKEN_CONTROL)
        elif tok.startswith("##"):
            tokens.append(tok[2:])
            types.append(TOKEN_NORMAL)
        else:
            tokens.append("\u2581" + tok)
            types.append(TOKEN_NORMAL)

    def special_id(name):
        return vocab[name]

    lowercase = bool((tokenizer.get("normalizer") or {}).get("lowercase", True))
    meta = [
        kv("general.architecture", STRING, "bert"),
        kv("general.name", STRING, "all-MiniLM-L6-v2"),
        kv("general.alignment", U32, ALIGN),
        kv("bert.context_length", U32, config["max_position_embeddings"]),
        kv("bert.embedding_length", U32, config["hidden_size"]),
        kv("bert.feed_forward_length", U32, config["intermediate_size"]),
        kv("bert.block_count", U32, config["num_hidden_layers"]),
        kv("bert.attention.head_count", U32, config["num_attention_heads"]),
        kv("bert.attention.layer_norm_epsilon", F32, config["layer_norm_eps"]),
        kv("bert.attention.causal", BOOL, False),
        kv("bert.pooling_type", U32, POOLING_MEAN),
        kv("tokenizer.ggml.model", STRING, "bert"),
        kv("tokenizer.ggml.pre", STRING, "default"),
        kv_array("tokenizer.ggml.tokens", STRING, tokens),
        kv_array("tokenizer.ggml.token_type", I32, types),
        kv("tokenizer.ggml.token_type_count", U32, config.get("type_vocab_size", 2)),
        kv("tokenizer.ggml.normalizer.lowercase", BOOL, lowercase),
        kv("tokenizer.ggml.bos_token_id", U32, special_id("[CLS]")),
        kv("tokenizer.ggml.cls_token_id", U32, special_id("[CLS]")),
        kv("tokenizer.ggml.seperator_token_id", U32, special_id("[SEP]")),
        kv("tokenizer.ggml.unknown_token_id", U32, special_id("[UNK]")),
        kv("tokenizer.ggml.padding_token_id", U32, special_id("[PAD]")),
        kv("tokenizer.ggml.mask_token_id", U32, special_id("[MASK]")),
        kv("tokenizer.ggml.add_bos_token", BOOL, True),
        kv("tokenizer.ggml.add_sep_token", BOOL, True),
    ]

    weights_path = os.path.join(src, "model.safetensors")
    tensors = []
    for hf, (dtype, shape, start, size) in sorted(read_safetensors(weights_path).items()):
        name = tensor_name(hf)
        if name is None:
            continue
        if dtype != "F32":
            die(f"{hf}: dtype {dtype}, expected F32")
        tensors.append((name, shape, start, size))
    tensors.sort(key=lambda t: t[0])

    infos = b""
    offset = 0
    placed = []
    for name, shape, start, size in tensors:
        dims = list(reversed(shape))  # ggml lists the fastest dimension first
        infos += gguf_string(name) + struct.pack("<I", len(dims))
        infos += b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", GGML_F32, offset)
        placed.append((offset, start, size))
        offset += size
        offset += (-offset) % ALIGN

    header = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(meta))
    head = header + b"".join(meta) + infos
    head += b"\0" * ((-len(head)) % ALIGN)

    tmp = dest + ".part"
    with open(weights_path, "rb") as w, open(tmp, "wb") as out:
        out.write(head)
        written = 0
        for at, start, size in placed:
            out.write(b"\0" * (at - written))
            w.seek(start)
            out.write(w.read(size))
            written = at + size
    os.replace(tmp, dest)


if __name__ == "__main__":
    main()
