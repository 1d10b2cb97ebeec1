"""A small environment with a known optimum, to check that RL learns what it is paid for.

Each task hides one word in each of a few boxes of different colours and asks for the word
in one of them ("What word is in the red box?"). The agent has `look(box)` ("The red box
holds the word kelp.") and `answer(text)`. Looking in the asked box and answering its word is right every time in
two steps: the optimum is 100% success, and nothing else reaches it (a guess is right one
time in `len(WORDS)`). The words are drawn per task, so nothing can be memorised: a policy
must copy the colour from the question and the word from what it read.

The scripted demonstrator makes the two mistakes RL has to unlearn: it looks in the wrong
box and answers that box's word (`wrong_box`, 30% by default), or looks in the right box
and answers a guess instead of what it read (`guess`, 30%). A guess is right one time in
`words` (4), so a policy cloned from it is right a little over half the time at T=1, and
RL from that start has over 40 points to gain, on tasks it has never seen (tests and
benchmarks/rl_sanity.py; docs/ppo.md "Does RL learn what it is paid for?").
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from training.envs.base import ANSWER_TOOL, Environment, EnvTask, EpisodeRecord, Rubric, Tool, ToolResult
from training.envs.utility import episode_utility

WORDS = (
    "kelp rook fern moth lark vole pike wren reed mint sage dune "
    "flint cove glen moss heron otter plum quail raven slate thorn umber "
    "vale wasp yarrow birch cedar dawn ember frost grove hazel iris jade"
).split()
COLOURS = ("red", "blue", "green", "amber", "violet", "grey")
SPLIT_OF = ["train"] * 7 + ["dev"] + ["eval"] * 2


@dataclass
class _State:
    task: EnvTask
    looked: list[str]


class CodewordEnvironment(Environment):
    name = "codeword"
    description = "Find the word in the box the question names (a known optimum: 100% in two steps)."
    system_prompt = "Look in the box the question names, then answer the word it holds."

    def __init__(self, *, seed: int = 0, n_tasks: int = 3000, boxes: int = 4, words: int = 4):
        if not 2 <= boxes <= len(COLOURS) or not 2 <= words <= len(WORDS):
            raise ValueError(f"boxes: 2 to {len(COLOURS)}; words: 2 to {len(WORDS)}")
        self.seed, self.colours, self.words = seed, COLOURS[:boxes], WORDS[:words]
        rng = random.Random(f"codeword:{seed}")
        self._tasks = []
        for i in range(n_tasks):
            words = dict(zip(self.colours, rng.choices(self.words, k=boxes)))
            asked = rng.choice(self.colours)
            self._tasks.append(
                EnvTask(
                    external_id=f"codeword-{seed}-{i}",
                    prompt=f"What word is in the {asked} box?",
                    reference=words[asked],
                    split=SPLIT_OF[i % len(SPLIT_OF)],
                    metadata={"environment": self.name, "seed": seed, "boxes": words, "asked": asked},
                )
            )

    def tasks(self, split: str) -> list[EnvTask]:
        return [t for t in self._tasks if t.split == split]

    def tools(self) -> list[Tool]:
        return [
            Tool(
                "look",
                "Look in a box (by its colour) and read the word it holds.",
                {
                    "type": "object",
                    "properties": {"box": {"type": "string", "enum": list(self.colours)}},
                    "required": ["box"],
                    "additionalProperties": False,
                },
            ),
            ANSWER_TOOL,
        ]

    def start(self, task: EnvTask) -> _State:
        return _State(task=task, looked=[])

    def call(self, state: _State, tool: str, arguments: dict) -> ToolResult:
        if tool == "answer":
            return ToolResult(arguments["text"], done=True, answer=arguments["text"])
        box = arguments["box"]  # one of the colours: the runner checked it against the schema's enum
        state.looked.append(box)
        return ToolResult(f"The {box} box holds the word {state.task.metadata['boxes'][box]}.")

    def demonstrator(self, *, seed: int = 0, wrong_box: float = 0.3, guess: float = 0.3, **options):
        """The scripted agent behaviour cloning imitates, with its two mistakes (module docstring).
        Every episode has the same shape (look, then answer), so a batch of behaviour cloning,
        bucketed by length, mixes right and wrong ones."""
        rng = random.Random(f"codeword-demo:{seed}")

        def turns(task: EnvTask, state: _State):
            words, asked = task.metadata["boxes"], task.metadata["asked"]
            u = rng.random()
            box = rng.choice([c for c in words if c != asked]) if u < wrong_box else asked
            yield "look", {"box": box}
            yield "answer", {"text": rng.choice(self.words) if wrong_box <= u < wrong_box + guess else words[box]}

        return turns

    def vocabulary_texts(self) -> list[str]:
        return [
            f"What word is in the {c} box? The {c} box holds the word {w}." for c in self.colours for w in self.words
        ]

    def outcome(self, state: _State, episode: EpisodeRecord) -> Rubric:
        correct = (episode.answer or "").strip().lower() == episode.task.reference
        utility = episode_utility(correct, episode)
        return Rubric(
            correct=correct,
            utility=utility,
            parts={"looked_right_box": episode.task.metadata["asked"] in state.looked},
        )
