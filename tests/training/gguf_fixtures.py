"""A tiny GGUF file as llama.cpp's converter writes one (the `gguf` package's GGUFWriter, the
writer convert_hf_to_gguf.py uses): a random tiny Llama with a byte-level BPE tokenizer, the
SmolLM2-Instruct chat template, and Q8_0 weights, so conversion dequantizes as it does for a
real quantized model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.training.chat_models import chat_model_dir
from training.policy.gguf import SMOLLM2_TEMPLATE

# transformers' names -> GGUF's (llama.cpp's tensor map for the Llama architecture).
TENSORS = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
}
LAYER = {
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
}


def _permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp stores q and k with their rotary halves interleaved (its converter's permute)."""
    rows = weights.shape[0]
    return weights.reshape(heads, 2, rows // heads // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def tiny_gguf(path: Path, envs, *, template: str = SMOLLM2_TEMPLATE, architecture: str = "llama") -> Path:
    """Write a tiny GGUF file at `path` (made once per path) and return it."""
    if path.exists():
        return path
    import gguf
    import torch
    from safetensors.torch import load_file

    source = chat_model_dir(path.parent / "hf-source", "smollm2", envs, hidden=32, layers=1)
    config = json.loads((source / "config.json").read_text())
    tokenizer = json.loads((source / "tokenizer.json").read_text())
    weights = {k: v.to(torch.float32).numpy() for k, v in load_file(source / "model.safetensors").items()}

    writer = gguf.GGUFWriter(path, architecture)
    writer.add_name("Tiny SmolLM2-style test model")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_rope_freq_base(config.get("rope_theta", 10000.0))
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)

    vocab = tokenizer["model"]["vocab"]
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    added = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    for token, index in added.items():
        while len(tokens) <= index:
            tokens.append(f"[PAD{len(tokens)}]")
        tokens[index] = token
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t in added else gguf.TokenType.NORMAL for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(added["<|im_start|>"])
    writer.add_eos_token_id(added["<|im_end|>"])
    writer.add_pad_token_id(added["<|im_end|>"])
    writer.add_chat_template(template)

    names = dict(TENSORS)
    for layer in range(config["num_hidden_layers"]):
        names |= {f"model.layers.{layer}.{k}": f"blk.{layer}.{v}" for k, v in LAYER.items()}
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    for name, array in weights.items():
        if name not in names:
            continue
        if name.endswith("q_proj.weight"):
            array = _permute(array, heads)
        elif name.endswith("k_proj.weight"):
            array = _permute(array, kv_heads)
        if array.ndim == 2:  # matrices quantized as a real file's are; norms stay float32
            writer.add_tensor(
                names[name],
                gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0),
                raw_dtype=gguf.GGMLQuantizationType.Q8_0,
            )
        else:
            writer.add_tensor(names[name], array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
