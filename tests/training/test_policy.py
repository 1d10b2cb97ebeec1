"""The default policy at tiny sizes, through the same chat interface as any model: token
layout, behaviour cloning, batched rollouts, loading."""

import pytest
import torch

from tests.training.chat_models import agent_spans
from training.envs.base import EpisodeRunner
from training.envs.encyclopedia.environment import EncyclopediaEnvironment
from training.policy.bc import BCConfig, batch_loss, demonstration_texts, demonstrations, play_demonstrations, train_bc
from training.policy.chat import ChatFormat
from training.policy.episodes import episode_tokens, play_scripted
from training.policy.layout import CHAT_TEMPLATE, LEGACY_TEMPLATES
from training.policy.model_io import PolicyLoadError, build_model, load_policy, save_policy, train_tokenizer
from training.policy.parsers import CompactParser
from training.policy.rollout import RolloutConfig, answer_branches, branchable, rollout

torch.set_num_threads(1)  # tests size their work for one thread (tests_env.py)
TINY = dict(hidden=48, layers=2, heads=2)


@pytest.fixture(scope="module")
def world():
    env = EncyclopediaEnvironment(seed=1, n_places=12, n_people=24, n_orgs=8)
    config = BCConfig(
        demos_per_task=2,
        extra_worlds=0,
        vocab_size=400,
        batch_size=8,
        max_steps=150,
        max_seconds=90,
        learning_rate=3e-3,
        warmup_steps=5,
        **TINY,
    )
    played = play_demonstrations(env, config)[:80]
    tokenizer = train_tokenizer(demonstration_texts(played), vocab_size=config.vocab_size)
    chat = ChatFormat.for_policy(tokenizer, parser="compact")
    return env, EpisodeRunner(env), played, config, tokenizer, chat


@pytest.fixture(scope="module")
def trained(world):
    env, runner, played, config, tokenizer, chat = world
    examples = demonstrations(chat, played)
    model = build_model(tokenizer, **TINY)
    before = [p.detach().clone() for p in model.parameters()]
    loss_before, _ = batch_loss(model, examples, list(range(8)), pad_id=tokenizer.pad_token_id, observation_weight=0.5)
    result = train_bc(model, tokenizer, examples, config)
    loss_after, _ = batch_loss(model, examples, list(range(8)), pad_id=tokenizer.pad_token_id, observation_weight=0.5)
    return model, examples, before, float(loss_before), float(loss_after), result


def test_agent_mask_covers_exactly_the_action_tokens(world):
    env, runner, _, _, tokenizer, chat = world
    task = env.tasks("train")[0]

    def script(task, state):
        return iter([("search", {"query": "Kessa"}), ("answer", {"text": "Kessa"})])

    episode = play_scripted(runner, task, script, CompactParser(list(runner.tools.values())))
    ids, mask = episode_tokens(chat, episode, [t.as_openai() for t in runner.tools.values()])
    assert tokenizer.decode([t for t, m in zip(ids, mask) if m]) == "search[ Kessa]<|end|>answer[ Kessa]<|end|>"
    context = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    assert context.startswith(f"<|bos|><|user|>{task.prompt}<|end|><|assistant|>")
    assert "<|tool|>" in context and "system" not in context  # the compact template leaves the system prompt out
    assert [s["kind"] for s in episode.steps] == ["action", "observation", "answer"]
    assert episode.steps[0]["arguments"] == {"query": "Kessa"}


def test_behaviour_cloning_changes_the_parameters_and_lowers_the_loss(trained):
    model, _, before, loss_before, loss_after, result = trained
    assert result["steps"] == 150 and all(torch.isfinite(p).all() for p in model.parameters())
    assert any(not torch.equal(b, a) for b, a in zip(before, model.parameters()))
    assert loss_after < loss_before * 0.7


def test_behaviour_cloning_gives_the_same_policy_whatever_threads_the_process_has(world):
    """BCConfig.threads pins the threads training uses, so a machine with more cores (or a
    worker that set its own) builds the same weights from the same seed."""
    env, runner, played, config, tokenizer, chat = world
    examples = demonstrations(chat, played)[:32]
    short = BCConfig(**{**config.__dict__, "max_steps": 12, "max_seconds": 0.0})  # a wall-time cut is not reproducible
    weights = []
    for process_threads in (1, 2):
        torch.set_num_threads(process_threads)
        model = build_model(tokenizer, seed=5, **TINY)
        train_bc(model, tokenizer, examples, short)
        weights.append([p.detach().clone() for p in model.parameters()])
        assert torch.get_num_threads() == process_threads  # the process's own setting is given back
    torch.set_num_threads(1)
    assert all(torch.equal(a, b) for a, b in zip(*weights))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_batched_rollouts_equal_unbatched_ones_for_the_same_seeds(world, trained, temperature):
    env, runner, _, _, tokenizer, chat = world
    model = trained[0]
    chosen = env.tasks("dev")[:6]
    config = RolloutConfig(temperature=temperature, max_action_tokens=16, batch_size=6)
    batched = rollout(model, tokenizer, runner, chosen, config, seeds=list(range(100, 106)), chat=chat)
    alone = [
        rollout(
            model,
            tokenizer,
            runner,
            [t],
            RolloutConfig(temperature=temperature, max_action_tokens=16, batch_size=1),
            seeds=[100 + i],
            chat=chat,
        )[0]
        for i, t in enumerate(chosen)
    ]
    assert [e.ids for e in batched] == [e.ids for e in alone]
    assert [e.steps for e in batched] == [e.steps for e in alone]
    for a, b in zip(batched, alone):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_rollout_action_mask_and_logprobs_cover_exactly_the_agent_tokens(world, trained):
    env, runner, _, _, tokenizer, chat = world
    episodes = rollout(
        trained[0],
        tokenizer,
        runner,
        env.tasks("dev")[:4],
        RolloutConfig(temperature=1.0, max_action_tokens=16, batch_size=4),
        chat=chat,
    )
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    for e in episodes:
        assert len(e.ids) == len(e.agent_mask) == len(e.logprobs)
        spans = agent_spans(e)
        turns = [m["content"] for m in e.messages if m["role"] == "assistant"]
        assert [tokenizer.decode([t for t in s if t != end]) for s in spans] == turns
        assert all(lp <= 0 for lp, m in zip(e.logprobs, e.agent_mask) if m)
        assert all(lp == 0 for lp, m in zip(e.logprobs, e.agent_mask) if not m)
        assert e.outcome is not None and e.outcome.parts["steps"] == len(turns)


def test_answer_branches_share_the_path_and_sample_only_the_final_turn_afresh(world, trained):
    env, runner, _, _, tokenizer, chat = world
    config = RolloutConfig(temperature=1.0, max_action_tokens=16, batch_size=16)
    tasks = env.tasks("train")[:16]
    sources = rollout(trained[0], tokenizer, runner, tasks, config, seeds=list(range(16)), chat=chat)
    found, unreplayable = answer_branches(
        trained[0], tokenizer, runner, sources, config, branches=3, seeds=list(range(16)), chat=chat
    )
    assert unreplayable == 0 and any(found)
    for source, branches in zip(sources, found):
        assert len(branches) == (3 if branchable(source) else 0)
        if not branches:
            continue
        path = source.steps[:-1]  # every step before the answer
        for branch in branches:
            assert branch.task is source.task and branch.steps[: len(path)] == path
            mask = "".join(map(str, source.agent_mask)).rstrip("0")
            cut = len(mask.rstrip("1"))  # where the source's final turn (its last run of agent tokens) begins
            assert branch.ids[:cut] == source.ids[:cut] and branch.agent_mask[:cut] == source.agent_mask[:cut]
            assert branch.agent_mask[cut] == 1  # the branch's own turn starts there
            assert len(branch.ids) == len(branch.agent_mask) == len(branch.logprobs)
            assert branch.outcome is not None
    assert any(b.ids != source.ids for source, bs in zip(sources, found) for b in bs)  # resampled, not copied
    # Seeded: the same call gives the same branches.
    again, _ = answer_branches(
        trained[0], tokenizer, runner, sources, config, branches=3, seeds=list(range(16)), chat=chat
    )
    assert [[b.ids for b in bs] for bs in again] == [[b.ids for b in bs] for bs in found]


def test_a_cloned_policy_beats_a_random_one_on_the_rubric(world, trained):
    env, runner, _, _, tokenizer, chat = world
    evaluation = (env.tasks("dev") + env.tasks("eval"))[:24]
    config = RolloutConfig(temperature=0.0, max_action_tokens=24, batch_size=24)
    cloned = rollout(trained[0], tokenizer, runner, evaluation, config, chat=chat)
    random = rollout(build_model(tokenizer, seed=123, **TINY), tokenizer, runner, evaluation, config, chat=chat)

    # At this size and training time the cloned policy has learnt the action format, not
    # yet the answers (the full-size policy's success is measured by the benchmark): it
    # makes far fewer malformed calls than a random policy of the same shape.
    def error_rate(eps):
        return sum(e.outcome.parts["tool_errors"] for e in eps) / sum(e.outcome.parts["steps"] for e in eps)

    assert error_rate(random) > 0.95
    assert error_rate(cloned) < error_rate(random) - 0.2


def test_policy_directories_round_trip_and_non_causal_lms_are_refused(world, trained, tmp_path):
    *_, tokenizer, _ = world
    save_policy(trained[0], tokenizer, tmp_path / "policy", tool_parser="compact")
    model, loaded = load_policy(tmp_path / "policy")
    assert loaded.decode(loaded("search[x]<|end|>", add_special_tokens=False)["input_ids"]) == "search[x]<|end|>"
    assert ChatFormat.for_policy(loaded, tmp_path / "policy").parser_name == "compact"
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in trained[0].parameters())
    with pytest.raises(PolicyLoadError, match="no config.json"):
        load_policy(tmp_path)
    from transformers import T5Config

    T5Config(d_model=8, d_ff=8, num_layers=1, num_heads=1, d_kv=8, vocab_size=10).save_pretrained(tmp_path / "t5")
    with pytest.raises(PolicyLoadError, match="not a causal language model"):
        load_policy(tmp_path / "t5")


def test_a_policy_saved_with_the_old_template_loads_with_the_current_one(world, trained, tmp_path):
    *_, tokenizer, _ = world
    tokenizer.chat_template = LEGACY_TEMPLATES[0]
    try:
        save_policy(trained[0], tokenizer, tmp_path / "old")
    finally:
        tokenizer.chat_template = CHAT_TEMPLATE
    assert load_policy(tmp_path / "old")[1].chat_template == CHAT_TEMPLATE


def test_behaviour_cloning_keeps_the_checkpoint_its_judge_scores_best(world):
    """The judge is called every dev_every steps and at the end; the model ends with the best
    checkpoint's weights (a later one wins a tie), and the figures say which was kept."""
    from dataclasses import replace

    env, runner, played, config, tokenizer, chat = world
    examples = demonstrations(chat, played)
    model = build_model(tokenizer, **TINY)
    seen, weights = [], {}

    def judge(m):
        step = 10 * (len(seen) + 1)
        seen.append(step)
        weights[step] = [p.detach().clone() for p in m.parameters()]
        return {10: 0.2, 20: 0.5, 30: 0.5, 40: 0.1}[step]

    result = train_bc(model, tokenizer, examples, replace(config, max_steps=40, dev_every=10), judge=judge)
    assert seen == [10, 20, 30, 40] and result["kept_step"] == 30 and result["kept_dev_greedy"] == 0.5
    assert result["dev_curve"] == [(10, 0.2), (20, 0.5), (30, 0.5), (40, 0.1)]
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), weights[30]))
    assert not all(torch.equal(p, q) for p, q in zip(model.parameters(), weights[40]))


def test_the_dev_judge_reads_a_world_no_stage_trains_on(world):
    from dataclasses import replace

    from training.envs.worlds import STREAM_SEEDS_FROM
    from training.policy.bc import dev_judge

    env, runner, played, config, tokenizer, chat = world
    built = []

    def make_env(seed):
        built.append(seed)
        return EncyclopediaEnvironment(seed=seed, n_places=12, n_people=24, n_orgs=8)

    judge, where = dev_judge(env, replace(config, extra_worlds=2, dev_tasks=5), tokenizer, chat, make_env=make_env)
    assert built and built[0] >= STREAM_SEEDS_FROM and f"5 tasks of world {built[0]}" == where
    assert 0.0 <= judge(build_model(tokenizer, **TINY)) <= 1.0
    judge, where = dev_judge(env, replace(config, dev_tasks=5), tokenizer, chat)  # no other worlds: the dev split
    assert where == f"5 tasks of {env.name} dev split"


@pytest.mark.parametrize(
    "scores, patience, steps, kept",
    [
        ({10: 0.1, 20: 0.2, 30: 0.3, 40: 0.4}, 1, 40, 40),  # still learning: on to the cap (20 + 20)
        ({10: 0.1, 20: 0.2, 30: 0.15}, 1, 30, 20),  # the block after the end did not beat it: stop, keep step 20
        ({10: 0.3, 20: 0.2}, 1, 20, 10),  # not learning at the end: no more steps
        # patience 2 (the default): one judgement below the best does not stop it (a filtered
        # behaviour cloning once stopped at 9% right after 14%, as it began to read) ...
        ({10: 0.1, 20: 0.2, 30: 0.15, 40: 0.3}, 2, 40, 40),
        # ... two in a row do
        ({10: 0.1, 20: 0.2, 30: 0.15, 40: 0.18}, 2, 40, 20),
        ({10: 0.3, 20: 0.2}, 2, 20, 10),
    ],
)
def test_behaviour_cloning_goes_on_while_the_checkpoint_at_the_end_is_the_best_so_far(
    world, scores, patience, steps, kept
):
    from dataclasses import replace

    env, runner, played, config, tokenizer, chat = world
    examples = demonstrations(chat, played)
    model = build_model(tokenizer, **TINY)
    judged = []

    def judge(m):
        judged.append(10 * (len(judged) + 1))
        return scores[judged[-1]]

    settings = replace(config, max_steps=20, dev_every=10, extend_steps=20, warmup_steps=2, extend_patience=patience)
    result = train_bc(model, tokenizer, examples, settings, judge=judge)
    assert result["steps"] == steps and judged == sorted(scores)[: len(judged)] and result["kept_step"] == kept


def test_a_child_whose_tokenizer_file_was_written_again_shares_its_parents_tokenizer(tmp_path):
    """Issue 45: transformers re-serialises tokenizer.json when a fine-tuned child is saved
    (another version: other key order and spacing); the evaluation compares what tokenizers
    do, so a registered model's descendants are evaluated against it. A tokenizer trained
    on other text is still told apart, and so is a changed chat template."""
    import json
    import shutil

    from tests.policy_fixtures import tiny_policy_dir
    from training.policy.model_io import same_tokenizer, train_tokenizer

    parent = tiny_policy_dir(tmp_path / "parent")
    child = tmp_path / "child"
    shutil.copytree(parent, child)
    data = json.loads((child / "tokenizer.json").read_text())
    (child / "tokenizer.json").write_text(json.dumps(data, indent=4, sort_keys=True))  # as another version writes it
    assert (child / "tokenizer.json").read_bytes() != (parent / "tokenizer.json").read_bytes()
    assert same_tokenizer(parent, child)

    other = tmp_path / "other"
    shutil.copytree(parent, other)
    train_tokenizer(["completely different words here"] * 50, vocab_size=300).save_pretrained(other)
    assert not same_tokenizer(parent, other)
    templated = tmp_path / "templated"
    shutil.copytree(child, templated)
    (templated / "chat_template.jinja").write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    assert not same_tokenizer(parent, templated)
