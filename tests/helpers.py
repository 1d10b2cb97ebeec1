"""Helpers that several test files share: builders, constants and users' environments. A test file
imports them from here, never from another test file (tests/test_layout.py checks); a fixture that
a folder's tests share lives in that folder's conftest.py. By area, in the order of the code:
annotate (campaigns, trajectory steps, exports), training (environments by dotted path, a
hand-built evaluation, the loop at test size, the MCP calculator), webapp (request bodies, a run)."""

import contextlib
import json
import shutil
import sys
from pathlib import Path

from django import forms
from django.conf import settings
from django.utils import timezone

from annotate.exports import iter_rows
from annotate.models import Comparison, Trajectory
from annotate.services.assignments import Verdict, assignment_next, judgement_submit
from tests.factories import CampaignFactory, PolicyFactory, TaskFactory, TrajectoryFactory, UserFactory
from tests.rewardmodel.rm_fixtures import TINY_RM
from training.envs.arithmetic import ArithmeticEnvironment
from training.envs.base import Environment, EnvTask, Rubric, Tool, ToolResult
from training.models import Evaluation, EvaluationEntry, EvaluationEpisode
from webapp.models import Run, RunMetric
from webapp.runs.forms import IdsField, RunLaunchForm

# --- Campaigns, labeled through the assignment engine --------------------------------------------


def make_campaign(n_comparisons=3, k=2, **kwargs):
    campaign = CampaignFactory(votes_per_comparison=k, **kwargs)
    for _ in range(n_comparisons):
        task = TaskFactory()
        a, b = TrajectoryFactory(task=task), TrajectoryFactory(task=task)
        Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b)
    return campaign


def imported_comparison_assignment(annotator):
    """`annotator`'s assignment of a new comparison of two imported trajectories (no environment:
    nothing is queued to replay a correction of it)."""
    campaign = CampaignFactory(votes_per_comparison=1)
    task = TaskFactory(environment="")
    Comparison.objects.create(
        campaign=campaign,
        task=task,
        trajectory_a=TrajectoryFactory(task=task),
        trajectory_b=TrajectoryFactory(task=task),
    )
    return assignment_next(campaign=campaign, annotator=annotator)


def annotators(n):
    return [UserFactory(roles=["annotator"]) for _ in range(n)]


def label_all(campaign, users, choice=2):
    for user in users:
        while (a := assignment_next(campaign=campaign, annotator=user)) is not None:
            judgement_submit(assignment_id=a.id, annotator=user, verdict=Verdict(choice=choice))


# --- Trajectory steps, and three runs of them that align (a start, a detour, a rejoin) -----------


def thought(text):
    return {"kind": "thought", "text": text}


def call(tool, **arguments):
    return {"kind": "action", "tool": tool, "arguments": arguments}


def seen(tool, content):
    return {"kind": "observation", "tool": tool, "content": content}


def answer(text):
    return {"kind": "answer", "text": text, "quotes": []}


START = [thought("Find the founder."), call("search", query="Veloran"), seen("search", "[0] Veloran Glassworks")]
REJOIN = [call("open", url="veloran"), seen("open", "Veloran was founded by Ilse Marrow."), answer("Ilse Marrow")]
DETOUR = [call("search", query="Veloran founder"), seen("search", "[0] nothing useful")]


# --- Exports -------------------------------------------------------------------------------------

# The steps and agent metadata of the exported snapshot (the `snapshot` and `agent_snapshot`
# fixtures, tests/annotate/conftest.py).
TOOL_STEPS = [
    {"kind": "thought", "text": "Search first."},
    {"kind": "action", "tool": "search", "arguments": {"query": "Veloran"}, "call_id": "c1"},
    {"kind": "action", "tool": "open", "arguments": {"n": 0}, "call_id": "c2"},
    {"kind": "observation", "tool": "search", "content": "[0] Veloran Glassworks", "call_id": "c1"},
    {"kind": "observation", "tool": "open", "content": "Founded by Ilse Marrow.", "call_id": "c2"},
    {"kind": "answer", "text": "Ilse Marrow", "quotes": ["Founded by Ilse Marrow."]},
]


SYSTEM_PROMPT = "You are Quillwort, a research agent. Cite what you open."
TOOLS = [  # as an OpenAI-chat import keeps them (trajectory metadata `tools`); each with its own parameters
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the corpus.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "open",
            "description": "Open a result.",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        },
    },
]

# Run with `python -c CHECK <filetype>` in an unzipped bundle: loads it with its dataset card's code.
CHECK = """
import json, re, sys
from pathlib import Path
card = Path("README.md").read_text()
found = re.search(r"```python\\n(.*?)```", card, re.S)
if found is None:  # an export with no rows: the card says so and prints no code
    assert "there is nothing to load" in card
    print(json.dumps({"all": {}, "columns": None}))
    sys.exit(0)
code = found.group(1)
names = {}
exec(code, names)
ds = names["ds"]
out = {"all": {split: ds[split].num_rows for split in ds}}
# Each split alone, with the same code narrowed to it.
for split in list(ds):
    alone = {}
    exec(re.sub(r"data_files=\\{[^}]*\\}", lambda m: "data_files={%r: %r}" % (split, f"data/{split}." + sys.argv[1]), code), alone)
    out[split] = alone["ds"][split].num_rows
out["columns"] = sorted(ds[list(ds)[0]].column_names)
print(json.dumps(out))
"""

# CHECK for several export folders in one fresh process (`python -c CHECK_EACH FILETYPE FOLDER...`):
# each card's code runs in its own folder with names of its own; prints {folder: CHECK's result}.
CHECK_EACH = f"""
import contextlib, io, json, os, sys
results = {{}}
for folder in sys.argv[2:]:
    os.chdir(folder)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            exec(compile({CHECK!r}, "card-check", "exec"), {{"__name__": "__main__"}})
        except SystemExit as stop:
            assert not stop.code, stop.code
    results[folder] = json.loads(printed.getvalue().strip().splitlines()[-1])
print(json.dumps(results))
"""


CHAT_TEMPLATE = (
    "{% if tools %}<|system|>toolbox {% for t in tools %}{{ t['function']['name'] }} {% endfor %}<|end|>\n{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] or '' }}"
    "{% if m['tool_calls'] %}{% for c in m['tool_calls'] %}<|call|>{{ c['function']['name'] }}"
    "{{ c['function']['arguments'] }}{% endfor %}{% endif %}<|end|>\n{% endfor %}"
)


def _tiny_tokenizer(texts):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["<unk>", "<pad>", "<eos>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_trainer_args(output_dir, *, steps: int = 2, batch: int = 2, max_length: int = 512) -> dict:
    """A TRL trainer config's settings for a tiny model's few steps on CPU: no bf16, no activation
    checkpointing, no reports, no saves."""
    return dict(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=batch,
        learning_rate=1e-3,
        bf16=False,
        gradient_checkpointing=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        max_length=max_length,
        dataset_num_proc=None,
    )


def _tiny_model_and_tokenizer(snapshot, fmt, model_class):
    from transformers import LlamaConfig, set_seed

    texts = [json.dumps(r) for r in iter_rows(snapshot, fmt)] + [
        "<|system|> <|user|> <|assistant|> <|tool|> <|call|> <|end|> toolbox"
    ]
    tokenizer = _tiny_tokenizer(texts)
    set_seed(0)
    extra = {"num_labels": 1} if model_class.__name__.endswith("SequenceClassification") else {}
    model = model_class(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            pad_token_id=tokenizer.pad_token_id,
            **extra,
        )
    )
    return model, tokenizer


# --- Users' environments, named by dotted path (tests.helpers:Counter) ---------------------------


class Counter(Environment):
    """A user's environment, defined here as a user would in their own package."""

    name = "counter"

    def tasks(self, split):
        return [
            EnvTask(external_id=f"count-{split}-{n}", prompt=f"Press until {n}.", reference=str(n), split=split)
            for n in (2, 3)
        ]

    def tools(self):
        return [
            Tool("press", "Add one.", {"type": "object", "properties": {}, "additionalProperties": False}),
            Tool(
                "answer",
                "Say the count.",
                {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            ),
        ]

    def start(self, task):
        return {"count": 0}

    def call(self, state, tool, arguments):
        if tool == "answer":
            return ToolResult(arguments["text"], done=True, answer=arguments["text"])
        state["count"] += 1
        return ToolResult(str(state["count"]))

    def outcome(self, state, episode):
        correct = episode.answer == episode.task.reference
        return Rubric(correct=correct, utility=float(correct), parts={"presses": state["count"]})


class Catalog(Environment):
    """A user's environment with no demonstrator, as a new user first writes one."""

    name = "catalog"

    def tasks(self, split):
        return [
            EnvTask(external_id=f"cat-{i:03d}", prompt=f"Price of item {i}?", reference=str(i), split=split)
            for i in range(12)
        ]

    def tools(self):
        return [Tool("answer", "Answer.", {"type": "object", "properties": {"text": {"type": "string"}}})]

    def call(self, state, tool, arguments):
        return ToolResult(arguments.get("text", ""), done=True, answer=arguments.get("text", ""))

    def outcome(self, state, episode):
        return Rubric(correct=False, utility=0.0)


# --- A hand-built evaluation ---------------------------------------------------------------------


def figure(mean, low, high, tasks=40, episodes=80):
    return {"mean": mean, "low": low, "high": high, "tasks": tasks, "episodes": episodes}


def steps(text: str) -> list[dict]:
    return [
        {"kind": "action", "tool": "search", "arguments": {"query": text}},
        {"kind": "observation", "tool": "search", "content": f"[0] {text}"},
        {"kind": "answer", "text": text, "quotes": []},
    ]


class Built:
    """A hand-built evaluation: the start, best-of-4 over it, and a PPO checkpoint, on 4 tasks.

    Sample 0 outcomes (sampled): start  F F T F;  PPO  T F T T  (they differ on tasks 0 and 3).
    Task 2: both answered with the same steps (an identical pair). Best-of-4's sample 0 is the
    start's own episode on every task. On task 3 the PPO episode was stored first (lower id).
    """

    def __init__(self):
        self.start = PolicyFactory(name="bc", version="1")
        self.ppo_run = Run.objects.create(kind="ppo", name="ppo against rm", status="succeeded")
        self.best = PolicyFactory(
            name="ppo-run",
            version="iter-0002",
            parent=self.start,
            run=self.ppo_run,
            metadata={"ppo": {"iteration": 2, "run_id": self.ppo_run.pk, "best": True, "dev": {"success": 0.4}}},
        )
        self.last = PolicyFactory(
            name="ppo-run",
            version="iter-0004",
            parent=self.start,
            run=self.ppo_run,
            metadata={"ppo": {"iteration": 4, "run_id": self.ppo_run.pk, "best": False, "dev": {"success": 0.3}}},
        )
        for step, values in enumerate(
            [
                {"objective/rm_score": 0.1, "objective/kl": 0.0, "eval/dev_success": 0.2},
                {"objective/rm_score": 0.3, "objective/kl": 1.0},
                {"objective/rm_score": 0.5, "objective/kl": 4.0, "eval/dev_success": 0.4},
                {"objective/rm_score": 0.8, "objective/kl": 9.0},
                {
                    "objective/rm_score": 1.0,
                    "objective/kl": 16.0,
                    "eval/dev_success": 0.3,
                    "eval/overoptimization": 1.0,
                },
            ]
        ):
            RunMetric.objects.create(run=self.ppo_run, step=step, values=values)
        self.evaluation = Evaluation.objects.create(
            name="bc vs ppo",
            split="eval",
            reference_policy=self.start,
            config={
                "split": "eval",
                "tasks": 4,
                "samples": 2,
                "temperature": 1.0,
                "greedy": True,
                "best_of_n": [4],
                "seed": 0,
            },
        )
        self.base = EvaluationEntry.objects.create(
            evaluation=self.evaluation,
            label="bc@1 (start)",
            policy=self.start,
            is_baseline=True,
            position=0,
            metrics={
                "sampled": {
                    "success": figure(0.25, 0.0, 0.5),
                    "f1": figure(0.3125, 0.05, 0.6),
                    "steps": figure(7.5, 6.0, 9.0),
                    "kl": figure(0.0, 0.0, 0.0),
                },
                "greedy": {"success": figure(0.5, 0.0, 1.0, episodes=4)},
            },
        )
        self.bon = EvaluationEntry.objects.create(
            evaluation=self.evaluation,
            label="best-of-4 over bc@1",
            policy=self.start,
            n=4,
            position=1,
            kind=EvaluationEntry.Kind.BEST_OF_N,
            metrics={
                "sampled": {
                    "success": figure(0.25, 0.0, 0.5),
                    "rm_score": figure(0.9, 0.6, 1.2),
                    "kl": figure(0.636, 0.636, 0.636),
                }
            },
        )
        self.ppo = EvaluationEntry.objects.create(
            evaluation=self.evaluation,
            label="PPO best by dev",
            policy=self.best,
            position=2,
            metrics={
                "sampled": {
                    "success": figure(0.75, 0.5, 1.0),
                    "rm_score": figure(0.412, 0.1, 0.7),
                    "tool_errors": figure(1.25, 0.5, 2.0),
                    "kl": figure(2.5, 1.5, 3.5),
                },
                "greedy": {"success": figure(0.75, 0.25, 1.0, episodes=4)},
            },
        )
        self.tasks = [
            TaskFactory(prompt=f"Who founded glassworks {i}?", reference_answer=f"Founder {i}") for i in range(4)
        ]
        start_correct, ppo_correct = [False, False, True, False], [True, False, True, True]
        self.sample0 = {}  # (entry, task index) -> trajectory
        for i, task in enumerate(self.tasks):
            order = (
                [("ppo", ppo_correct[i]), ("base", start_correct[i])]
                if i == 3
                else [("base", start_correct[i]), ("ppo", ppo_correct[i])]
            )
            for side, correct in order:
                entry, policy = (self.base, self.start) if side == "base" else (self.ppo, self.best)
                for mode, samples in (("sampled", 2), ("greedy", 1)):
                    for sample in range(samples):
                        text = (
                            f"same answer {i} {mode}" if i == 2 and sample == 0 else f"{side} {mode} {sample} task {i}"
                        )
                        trajectory = TrajectoryFactory(
                            task=task, policy=policy, steps=steps(text), outcome={"correct": correct, "steps": 2}
                        )
                        EvaluationEpisode.objects.create(
                            entry=entry,
                            task=task,
                            trajectory=trajectory,
                            mode=mode,
                            sample=sample,
                            correct=correct,
                            rm_score=0.5 if side == "ppo" else -0.25,
                        )
                        if sample == 0 and mode == "sampled":
                            self.sample0[(side, i)] = trajectory
            EvaluationEpisode.objects.create(
                entry=self.bon,
                task=task,
                trajectory=self.sample0[("base", i)],
                mode="sampled",
                sample=0,
                correct=start_correct[i],
            )

    def url(self, suffix=""):
        return f"/training/evaluations/{self.evaluation.pk}/{suffix}"


# --- The whole loop (run_pipeline) at test size, and what a run of it leaves ---------------------

# Two wrong answers told apart by their errors: at this size nearly every answer is wrong, and the
# loop's default (a tie) would leave the reward model too few pairs (the refusal says so).
# RL at test size: two small iterations, each judged on 12 dev tasks (not the default 160).
TINY_PPO = {
    "iterations": 2,
    "episodes_per_iteration": 8,
    "minibatch_size": 4,
    "eval_every": 1,
    "eval_samples": 1,
    "dev_tasks": 12,
    "rollout_batch_size": 8,
}
# Dev tasks and episodes: RL's (the loop judges both methods on the same ones).
TINY_EXIT = {"rounds": 1, "tasks_per_round": 8, "samples": 2, "rollout_batch_size": 8}
PIPELINE = [
    "--rollout-tasks",
    "32",
    "--samples-per-task",
    "3",
    "--annotators",
    "2",
    "--eval-tasks",
    "4",
    "--eval-samples",
    "1",
    "--annotator-wrong-pairs",
    "errors",
    "--best-of-n",
    "2",
    "--reward-model",
    json.dumps({**TINY_RM, "epochs": 1}),
    "--ppo",
    json.dumps(TINY_PPO),
    "--expert-iteration",
    json.dumps(TINY_EXIT),
]
# run_pipeline's settings for a loop of seconds with RL alone (one annotator, one PPO iteration).
TINY_LOOP_ARGUMENTS = [
    "--rollout-tasks",
    "24",
    "--annotator-wrong-pairs",
    "steps",
    "--annotators",
    "1",
    "--eval-tasks",
    "2",
    "--eval-samples",
    "1",
    "--best-of-n",
    "",
    "--audit-size",
    "1",
    "--audit-disagreements",
    "1",
    "--reward-model",
    json.dumps({**TINY_RM, "epochs": 1}),
    "--ppo",
    json.dumps({**TINY_PPO, "iterations": 1}),
    "--methods",
    "rl",
]


def assert_the_loop_ran(environment_name: str, tool: str, policy) -> None:
    runs = {run.kind: run for run in Run.objects.all()}
    assert set(runs) == {"rollout", "reward_model", "ppo", "expert_iteration", "evaluation"}
    assert all(run.status == "succeeded" for run in runs.values()), {k: r.error for k, r in runs.items()}
    assert runs["expert_iteration"].config["fresh_worlds"] is False  # a bring-your-own environment has no seeds
    assert runs["rollout"].summary["environment"] == environment_name and runs["rollout"].summary["comparisons"] > 0
    stored = Trajectory.objects.filter(policy=policy).select_related("task")
    assert stored and {t.task.environment for t in stored} == {environment_name}
    calls = [s for t in stored for s in t.steps if s["kind"] == "action" and s["tool"] == tool]
    assert calls and all(isinstance(s["arguments"], dict) and s.get("call_id") for s in calls)
    assert all(tool in {spec["function"]["name"] for spec in t.metadata["tools"]} for t in stored)
    checkpoint = runs["ppo"].summary["last_policy_id"]
    assert checkpoint and runs["ppo"].summary["iterations"] == 2
    evaluation = Evaluation.objects.get()
    assert evaluation.config["environment"] == environment_name
    exit_run = runs["expert_iteration"].summary
    assert exit_run["rounds"] == 1 and exit_run["last_policy_id"]
    # start, best-of-2, PPO best and last, expert iteration's kept and last (one entry where they are one)
    assert evaluation.entries.count() == 4 + len({exit_run["best_policy_id"], exit_run["last_policy_id"]})


# --- The MCP calculator (mcp_calculator_server.py), as a deployment configures it ----------------

SCRIPT = Path(__file__).parent / "training" / "mcp_calculator_server.py"
SERVER = [sys.executable, str(SCRIPT)]


def calculator_policy(path: Path) -> Path:
    """A tiny policy cloned on the arithmetic demonstrations (no database): it calls `calculate`."""
    from training.policy.bc import BCConfig, demonstration_texts, demonstrations, play_demonstrations, train_bc
    from training.policy.chat import ChatFormat
    from training.policy.model_io import build_model, save_policy, train_tokenizer

    env = ArithmeticEnvironment(seed=11, n_tasks=60)
    config = BCConfig(
        environment="arithmetic",
        hidden=48,
        layers=2,
        heads=2,
        vocab_size=400,
        max_steps=150,
        extra_worlds=0,
        demos_per_task=2,
        learning_rate=3e-3,
        warmup_steps=5,
    )
    played = play_demonstrations(env, config, parser="compact")
    tokenizer = train_tokenizer(demonstration_texts(played), vocab_size=config.vocab_size)
    model = build_model(tokenizer, hidden=48, layers=2, heads=2)
    train_bc(model, tokenizer, demonstrations(ChatFormat.for_policy(tokenizer, parser="compact"), played), config)
    return save_policy(model, tokenizer, path, tool_parser="compact")


def calculator_environments(root: Path, *, http_port: int | None = None) -> dict:
    """The environments a deployment configures: the calculator over stdio (and HTTP), one whose
    server dies on its 4th tool call every life, and the arithmetic environment at 60 tasks."""
    tasks = root / "tasks.jsonl"
    problems = ArithmeticEnvironment(seed=11, n_tasks=60)
    tasks.write_text(
        "".join(
            json.dumps({"external_id": t.external_id, "prompt": t.prompt, "reference": t.reference, "split": t.split})
            + "\n"
            for split in ("train", "dev", "eval")
            for t in problems.tasks(split)
        )
    )
    return {
        "calc-stdio": {"class": "mcp", "options": {"server": SERVER, "tasks": str(tasks)}},
        **(
            {
                "calc-http": {
                    "class": "mcp",
                    "options": {"server": f"http://127.0.0.1:{http_port}/mcp", "tasks": str(tasks)},
                }
            }
            if http_port
            else {}
        ),
        "calc-dying": {
            "class": "mcp",
            "options": {
                "server": SERVER,
                "tasks": str(tasks),
                "restarts": 1,
                "server_env": {"ARBITER_TEST_CRASH_AFTER": "3"},
            },
        },
        "arith-small": {"class": "arithmetic", "options": {"seed": 11, "n_tasks": 60}},
    }


# --- Request bodies: one trajectory in each JSON import format, and what no route can store ------

CANONICAL = {
    "schema": "arbiter.trajectory/v1",
    "task": {"external_id": "t-1", "prompt": "Who?", "reference_answer": "A", "environment": "", "split": "train"},
    "agent": {"name": "agent", "version": "1"},
    "steps": [
        {"kind": "thought", "text": "hm"},
        {"kind": "action", "tool": "search", "arguments": {"q": "x"}},
        {"kind": "observation", "tool": "search", "content": "found"},
        {"kind": "answer", "text": "A", "quotes": ["found"]},
    ],
    "outcome": {"correct": True, "steps": 4},
    "metadata": {"tags": ["a"]},
}
OPENAI = {
    "task": {"external_id": "t-2"},
    "agent": {"name": "oa"},
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Who?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        {"role": "assistant", "content": "A"},
    ],
    "tools": [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}],
}
ANTHROPIC = {
    "task": {"external_id": "t-3"},
    "agent": {"name": "an"},
    "system": "Be brief.",
    "messages": [
        {"role": "user", "content": "Who?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "search", "input": {"q": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "found"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A"}]},
    ],
}


# Bodies that are not JSON Arbiter can store, whatever the route.
RAW_BODIES = {
    "array nested 1,000 deep": "[" * 1000 + "]" * 1000,
    "object nested 1,000 deep": '{"a":' * 1000 + "1" + "}" * 1000,
    "NaN": '{"choice": NaN, "name": NaN}',
    "Infinity": '{"seed": Infinity}',
    "-Infinity": '{"seed": -Infinity}',
    "1e400": '{"seed": 1e400, "test_fraction": 1e400}',
    "lone surrogate": '{"name": "\\ud800", "reason": "\\udfff", "kind": "\\ud800"}',
    "NUL in text": '{"name": "a\\u0000b", "reason": "a\\u0000b"}',
    "5,000-digit integer": '{"seed": ' + "9" * 5000 + "}",
    "not JSON": "{not json",
    "bytes that are not UTF-8": b'{"name": "\xff\xfe"}',
    "a string": '"x"',
    "a number": "5",
    "null": "null",
}


# --- A finished run ------------------------------------------------------------------------------

TRAIN_METRICS = (
    "loss",
    "accuracy",
    "margin",
    "num_tokens",
    "learning_rate",
    "grad_norm",
    "epoch",
    "rewards/chosen",
    "rewards/rejected",
    "mean_token_accuracy",
)


def make_run(admin) -> Run:
    """A finished reward-model run: ten train/* metrics over 30 steps, one eval point, a nested result,
    and artifacts: a file and a folder in its folder, and a model kept elsewhere."""
    run = Run.objects.create(
        kind="reward_model",
        name="reward model on sim data",
        status="succeeded",
        attempt=1,
        created_by=admin,
        progress=1.0,
        device="CPU (2 threads)",
        worker="vm",
        started_at=timezone.now(),
        finished_at=timezone.now(),
        config={"snapshot_id": 1, "epochs": 3.0, "hidden": 128, "heads": 4},
        summary={
            "reward_model_id": 0,
            "test": {"accuracy": 0.8123, "ece": 0.0431, "n": 40},
            "train": {"pairs": 1234, "steps": 30, "seconds": 93.27},
            "reliability": [0.5, 0.61, 0.7],
        },
    )
    for step in range(1, 31):
        values = {
            f"train/{name}": value
            for name, value in zip(
                TRAIN_METRICS,
                (
                    2.0 / step,
                    0.5 + step / 70,
                    step / 10,
                    7000.0 * step,
                    1e-4 * (1 - step / 31),
                    1.5 + (step % 4) / 3,
                    step / 10,
                    0.1 * step,
                    -0.1 * step,
                    0.3 + step / 60,
                ),
            )
        }
        RunMetric.objects.create(run=run, step=step, values=values)
    RunMetric.objects.create(run=run, step=30, values={"eval/accuracy": 0.8123})
    folder = Path(settings.VAR_DIR) / "runs" / str(run.pk)
    shutil.rmtree(folder, ignore_errors=True)  # a run of an earlier test session may have had this id
    (folder / "ppo" / "checkpoints" / "iter-0002").mkdir(parents=True, exist_ok=True)
    (folder / "ppo" / "checkpoints" / "iter-0002" / "config.json").write_text('{"hidden": 128}')
    (folder / "ppo" / "checkpoints" / "iter-0002" / "model.safetensors").write_bytes(b"\0" * 2048)
    (folder / "report.json").write_text(json.dumps({"accuracy": 0.8123}))
    outside = Path(settings.VAR_DIR) / "registry" / f"run{run.pk}-rm"
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "config.json").write_text("{}")
    Run.objects.filter(pk=run.pk).update(
        artifacts=[
            {"name": "report", "path": str(folder / "report.json"), "bytes": 20},
            {"name": "checkpoints", "path": str(folder / "ppo" / "checkpoints"), "bytes": 2063},
            {"name": "reward model", "path": str(outside), "bytes": 2},
        ]
    )
    run.refresh_from_db()
    return run


def processes_with_env(key: str, value: str) -> list[int]:
    """PIDs of the live processes whose environment has `key=value` (Linux /proc): how a test
    finds what a run started, to check that nothing outlives it."""
    wanted, found = f"{key}={value}".encode(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def replays_run() -> int:
    """Play every queued correction replay as the worker's job does (training/tasks.py); returns
    how many ran. The web process only queues them."""
    from annotate.models import CorrectionReplay
    from annotate.services.corrections import correction_replay_run
    from training.envs.replay import EnvironmentReplayer

    queued = list(CorrectionReplay.objects.filter(status=CorrectionReplay.Status.QUEUED).values_list("pk", flat=True))
    for pk in queued:
        correction_replay_run(job_id=pk, replayer=EnvironmentReplayer())
    return len(queued)


# --- Run forms ------------------------------------------------------------------------------------


def as_a_browser_posts(form: RunLaunchForm) -> dict:
    """The form's fields as Chromium submits them untouched: a select's selected option (the
    first where none is), ticked boxes, checked switches, the other inputs' values."""
    data = {}
    for name, field in form.fields.items():
        initial = form.get_initial_for_field(field, name)
        if isinstance(field, IdsField):
            data[name] = field.prepare_value(initial or [])
        elif isinstance(field, forms.ChoiceField):
            values = [str(v) for v, _ in field.choices]
            data[name] = str(initial) if str(initial) in values else values[0]
        elif isinstance(field, forms.BooleanField):
            if initial:
                data[name] = "on"
        else:
            data[name] = "" if initial is None else str(initial)
    return data


MCP_CALCULATOR_SERVER = [sys.executable, str(Path(__file__).parent / "training" / "mcp_calculator_server.py")]


def mcp_arithmetic_tasks(path: Path, *, seed: int = 5, n_tasks: int = 20) -> Path:
    """A tasks file (JSON lines) of arithmetic tasks for the MCP calculator server's environment."""
    tasks = ArithmeticEnvironment(seed=seed, n_tasks=n_tasks)
    rows = [
        {"external_id": t.external_id, "prompt": t.prompt, "reference": t.reference, "split": t.split}
        for split in ("train", "dev", "eval")
        for t in tasks.tasks(split)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@contextlib.contextmanager
def served_policy(policy_dir, name: str, *, api_key: str | None = None):
    """A policy behind `serve_policy`'s server (training/policy/serving_http.py) on 127.0.0.1, in a
    thread; yields its address (http://127.0.0.1:PORT) and stops it after."""
    import threading

    from training.policy.serving import PolicyServer
    from training.policy.serving_http import serve

    httpd = serve(PolicyServer(policy_dir, name=name, threads=1), "127.0.0.1", 0, api_key=api_key)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def at_the_same_moment(call, clients: int = 2) -> tuple[list, list[str]]:
    """Run `call()` in `clients` threads released together (each on its own database
    connection, closed after): (what the calls returned, in the order they ended; repr of what
    they raised). For the tests of two clients doing the same thing at once."""
    import threading

    from django.db import connection

    barrier, results, errors = threading.Barrier(clients), [], []

    def client():
        try:
            barrier.wait(timeout=10)
            results.append(call())
        except Exception as exc:  # reported to the test, with the other clients' outcomes
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results, errors


# How long a browser test waits for a job on the real worker (a run to succeed, a correction to be
# played): a few seconds idle, but a run of the suite beside `stress-ng --cpu 2` once took over 60 s
# for a one-iteration PPO run (benchmarks/RESULTS.md, issue 56). The wait ends as soon as it is done.
WORKER_JOB_MS = 240_000
