"""The policy at tiny sizes: token layout, behaviour cloning, batched rollouts, loading."""
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from training.env.browser import TextBrowser
from training.env.corpus import generate_corpus, generate_tasks
from training.policy.bc import BCConfig, batch_loss, demonstration_texts, demonstrations, train_bc
from training.policy.layout import encode, episode_tokens
from training.policy.model_io import PolicyLoadError, build_model, load_policy, save_policy, train_tokenizer
from training.policy.rollout import RolloutConfig, rollout

torch.set_num_threads(1)  # tests size their work for one thread (tests_env.py)
ROOT = Path(__file__).resolve().parents[2]
TINY = dict(hidden=48, layers=2, heads=2)


@pytest.fixture(scope="module")
def world():
    corpus = generate_corpus(seed=1, n_places=12, n_people=24, n_orgs=8)
    tasks = generate_tasks(corpus, seed=1)
    config = BCConfig(demos_per_task=2, extra_worlds=0, vocab_size=400, batch_size=8, max_steps=150, max_seconds=90,
                      learning_rate=3e-3, warmup_steps=5, **TINY)
    train = [t for t in tasks if t.split == "train"][:40]
    tokenizer = train_tokenizer(demonstration_texts(corpus, train, config), vocab_size=config.vocab_size)
    return corpus, tasks, train, config, tokenizer


@pytest.fixture(scope="module")
def trained(world):
    corpus, tasks, train, config, tokenizer = world
    examples = demonstrations(corpus, train, tokenizer, config)
    model = build_model(tokenizer, **TINY)
    before = [p.detach().clone() for p in model.parameters()]
    loss_before, _ = batch_loss(model, examples, list(range(8)), pad_id=tokenizer.pad_token_id, observation_weight=0.5)
    result = train_bc(model, tokenizer, examples, config)
    loss_after, _ = batch_loss(model, examples, list(range(8)), pad_id=tokenizer.pad_token_id, observation_weight=0.5)
    return model, examples, before, float(loss_before), float(loss_after), result


def test_agent_mask_covers_exactly_the_action_tokens(world):
    *_, tokenizer = world
    ids, mask = episode_tokens(tokenizer, "Who?", [("search[Kessa]", "[0] Kessa: a port"), ("answer[Kessa]", None)])
    agent_text = tokenizer.decode([t for t, m in zip(ids, mask) if m])
    assert agent_text == "search[Kessa]<|end|>answer[Kessa]<|end|>"
    assert tokenizer.decode(ids).startswith("<|bos|><|user|>Who?<|end|><|assistant|>")


def test_behaviour_cloning_changes_the_parameters_and_lowers_the_loss(trained):
    model, _, before, loss_before, loss_after, result = trained
    assert result["steps"] == 150 and all(torch.isfinite(p).all() for p in model.parameters())
    assert any(not torch.equal(b, a) for b, a in zip(before, model.parameters()))
    assert loss_after < loss_before * 0.7


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_batched_rollouts_equal_unbatched_ones_for_the_same_seeds(world, trained, temperature):
    corpus, tasks, _, _, tokenizer = world
    model = trained[0]
    browser = TextBrowser(corpus)
    chosen = tasks[:6]
    config = RolloutConfig(temperature=temperature, max_action_tokens=16, batch_size=6)
    batched = rollout(model, tokenizer, browser, chosen, config, seeds=list(range(100, 106)))
    alone = [rollout(model, tokenizer, browser, [t], RolloutConfig(temperature=temperature, max_action_tokens=16,
                                                                   batch_size=1), seeds=[100 + i])[0]
             for i, t in enumerate(chosen)]
    assert [e.ids for e in batched] == [e.ids for e in alone]
    assert [e.episode.actions for e in batched] == [e.episode.actions for e in alone]
    for a, b in zip(batched, alone):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_the_rollout_experiment_whose_rows_do_not_wait_plays_the_same_episodes(world, trained):
    """benchmarks/experiments/rollout_rows.py is timed against the product; the comparison
    only means something while both play the same episodes (here with row refills)."""
    spec = importlib.util.spec_from_file_location("rollout_rows", ROOT / "benchmarks" / "experiments" / "rollout_rows.py")
    rows = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = rows
    spec.loader.exec_module(rows)
    corpus, tasks, _, _, tokenizer = world
    browser, seeds = TextBrowser(corpus), list(range(200, 208))
    product = rollout(trained[0], tokenizer, browser, tasks[:8], RolloutConfig(max_action_tokens=16, batch_size=3),
                      seeds=seeds)
    experiment = rows.rollout(trained[0], tokenizer, browser, tasks[:8],
                              RolloutConfig(max_action_tokens=16, batch_size=3), seeds=seeds)
    assert [e.ids for e in experiment] == [e.ids for e in product]
    assert [e.agent_mask for e in experiment] == [e.agent_mask for e in product]
    assert [e.outcome for e in experiment] == [e.outcome for e in product]


def test_rollout_action_mask_and_logprobs_cover_exactly_the_agent_tokens(world, trained):
    corpus, tasks, _, _, tokenizer = world
    episodes = rollout(trained[0], tokenizer, TextBrowser(corpus), tasks[:4], RolloutConfig(temperature=1.0,
                       max_action_tokens=16, batch_size=4))
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    for e in episodes:
        assert len(e.ids) == len(e.agent_mask) == len(e.logprobs)
        spans, current = [], []
        for token, m in zip(e.ids, e.agent_mask):
            if m:
                current.append(token)
            elif current:
                spans.append(current)
                current = []
        if current:
            spans.append(current)
        decoded = [tokenizer.decode([t for t in s if t != end]).strip() for s in spans]
        assert decoded == e.episode.actions
        assert all(lp <= 0 for lp, m in zip(e.logprobs, e.agent_mask) if m)
        assert all(lp == 0 for lp, m in zip(e.logprobs, e.agent_mask) if not m)
        assert e.outcome is not None


def test_a_cloned_policy_beats_a_random_one_on_the_rubric(world, trained):
    corpus, tasks, _, _, tokenizer = world
    evaluation = [t for t in tasks if t.split != "train"][:24]
    browser = TextBrowser(corpus)
    config = RolloutConfig(temperature=0.0, max_action_tokens=24, batch_size=24)
    cloned = rollout(trained[0], tokenizer, browser, evaluation, config)
    random_model = build_model(tokenizer, seed=123, **TINY)
    random = rollout(random_model, tokenizer, browser, evaluation, config)
    # At this size and training time the cloned policy has learnt the action format, not
    # yet the answers (the full-size policy's success is measured by the benchmark): it
    # makes far fewer invalid actions than a random policy of the same shape.
    error_rate = lambda eps: sum(e.outcome.tool_errors for e in eps) / sum(e.outcome.steps for e in eps)  # noqa: E731
    assert error_rate(random) > 0.95
    assert error_rate(cloned) < error_rate(random) - 0.2


def test_policy_directories_round_trip_and_non_causal_lms_are_refused(world, trained, tmp_path):
    *_, tokenizer = world
    save_policy(trained[0], tokenizer, tmp_path / "policy")
    model, loaded = load_policy(tmp_path / "policy")
    assert loaded.decode(encode(loaded, "search[x]<|end|>")) == "search[x]<|end|>"
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in trained[0].parameters())
    with pytest.raises(PolicyLoadError, match="no config.json"):
        load_policy(tmp_path)
    from transformers import T5Config

    T5Config(d_model=8, d_ff=8, num_layers=1, num_heads=1, d_kv=8, vocab_size=10).save_pretrained(tmp_path / "t5")
    with pytest.raises(PolicyLoadError, match="not a causal language model"):
        load_policy(tmp_path / "t5")
