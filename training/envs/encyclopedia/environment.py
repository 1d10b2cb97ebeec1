"""The encyclopedia browser (training/envs/encyclopedia/) through the environment interface.

The WebGPT-style text browser over a fictional encyclopedia generated per seed, with its
tools declared as OpenAI function tools: `search(query)`, `open(n)`, `find(text)`,
`quote(text)` and `answer(text)`. The browser's own observations and rubric are used as
they are; the episode limits are the runner's (`training.envs.base.EpisodeRunner`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from training.envs.base import TRAINING_SEEDS, Environment, EnvTask, EpisodeRecord, Rubric, Tool, ToolResult
from training.envs.compact import NotACall, compact_call
from training.envs.encyclopedia.browser import BrowserConfig, TextBrowser
from training.envs.encyclopedia.corpus import generate_corpus, generate_tasks
from training.envs.encyclopedia.habits import HABIT_NOTES, asked_occupation, situation_of
from training.envs.encyclopedia.rubric import score
from training.envs.encyclopedia.scripted import ScriptedAgent
from training.envs.mistakes import Habits, Mistakes

UNLIMITED = 10**9  # the browser's own limits are switched off: the runner's apply
UNSEEN_SEEDS_FROM = 10_000  # held-out worlds: seeds from here on, sharing no name with any training world


@cache
def training_world_names(**corpus_options) -> frozenset[str]:
    """Every name word of every world training may see (TRAINING_SEEDS)."""
    return frozenset().union(*(generate_corpus(seed=s, **corpus_options).names for s in TRAINING_SEEDS))


def _text_tool(name: str, description: str, field: str = "text") -> Tool:
    return Tool(
        name,
        description,
        {
            "type": "object",
            "properties": {field: {"type": "string"}},
            "required": [field],
            "additionalProperties": False,
        },
    )


class EncyclopediaEnvironment(Environment):
    name = "encyclopedia"
    description = "A WebGPT-style text browser over a fictional encyclopedia generated per seed."
    system_prompt = (
        "Answer the question from the encyclopedia: search, open a result, find or quote what "
        "supports the answer, then answer."
    )

    def __init__(self, *, seed: int = 0, unseen: bool = False, config: BrowserConfig | None = None, **corpus_options):
        """`corpus_options` size the generated world (n_places, n_people, n_orgs: training/envs/encyclopedia/corpus.py).

        `unseen`: a held-out world (seed UNSEEN_SEEDS_FROM or above) whose names are none of
        the training worlds', so its questions test reading, not memory."""
        if unseen and seed < UNSEEN_SEEDS_FROM:
            raise ValueError(
                f"an unseen world's seed is {UNSEEN_SEEDS_FROM} or above (training may see seeds "
                f"below {TRAINING_SEEDS.stop})"
            )
        self.seed, self.unseen = seed, unseen
        exclude = training_world_names(**corpus_options) if unseen else frozenset()
        corpus = generate_corpus(seed=seed, exclude=exclude, **corpus_options)
        if unseen:
            assert not corpus.names & exclude, "an unseen world shares a name with a training world"
        self._specs = generate_tasks(corpus, seed=seed)
        config = replace(config or BrowserConfig(), max_steps=UNLIMITED, loop_repeats=UNLIMITED)
        self.browser = TextBrowser(corpus, config)
        self._situations = {t.external_id: self._situation(t) for t in self._specs}

    def _situation(self, spec) -> str:
        """The task's habit situation (training/envs/encyclopedia/habits.py): for a question about
        a person with a namesake, which of the two a search for the name puts first."""
        name = self.browser.corpus.facts.get(spec.entity, {}).get("name")
        top = self.browser.index.search(name, 1) if name and asked_occupation(spec.question) else []
        return situation_of(spec.question, top[0].title if top else None)

    def tasks(self, split: str) -> list[EnvTask]:
        return [
            EnvTask(
                external_id=t.external_id,
                prompt=t.question,
                reference=t.answer,
                split=t.split,
                metadata={
                    "environment": self.name,
                    "seed": self.seed,
                    "unseen": self.unseen,
                    "qtype": t.qtype,
                    "hops": t.hops,
                    "situation": self._situations[t.external_id],
                    **(
                        {"habit": HABIT_NOTES[self._situations[t.external_id]]}
                        if self._situations[t.external_id] in HABIT_NOTES
                        else {}
                    ),
                },
            )
            for t in self._specs
            if t.split == split
        ]

    def tools(self) -> list[Tool]:
        return [
            _text_tool("search", "Search the encyclopedia; returns numbered results.", "query"),
            Tool(
                "open",
                "Open result n of the last search.",
                {
                    "type": "object",
                    "properties": {"n": {"type": "integer", "minimum": 0}},
                    "required": ["n"],
                    "additionalProperties": False,
                },
            ),
            _text_tool("find", "The sentences of the open page that contain the text."),
            _text_tool("quote", "Keep a quote from the open page as evidence."),
            _text_tool("answer", "Give the final answer and end the episode."),
        ]

    def start(self, task: EnvTask):
        return self.browser.reset(task.prompt)

    def call(self, state, tool: str, arguments: dict) -> ToolResult:
        argument = next(iter(arguments.values()))
        result = self.browser.step(state, f"{tool}[{argument}]")
        if tool == "answer":
            return ToolResult(str(argument), done=True, answer=str(argument))
        return ToolResult(result.observation, error=result.error)

    def vocabulary_texts(self) -> list[str]:
        return [d.text for d in self.browser.corpus.documents]

    def demonstrator(self, *, seed: int = 0, mistakes=None, habits=None, **options):
        """The scripted agent (training/envs/encyclopedia/scripted.py) with its deliberate slips
        (`mistakes`) and habits (`habits`, none unless given): its text actions as tool calls, and
        an action that is no tool call as written."""

        agent = ScriptedAgent(self.browser.corpus, mistakes or Mistakes(), seed=seed, habits=habits or Habits.none())
        specs = {t.external_id: t for t in self._specs}
        tools = self.tools()

        def turns(task: EnvTask, state):
            for action in agent.actions(self.browser, state, specs[task.external_id]):
                try:
                    yield compact_call(action, tools)
                except NotACall:  # a deliberate malformed action, written as it is
                    yield action

        return turns

    def outcome(self, state, episode: EpisodeRecord) -> Rubric:
        graded = score(
            answer=episode.answer,
            reference=episode.task.reference,
            quotes=state.quotes,
            opened=state.opened,
            steps=episode.calls,
            tool_errors=episode.tool_errors,
            loop=episode.loop,
        )
        parts = {k: v for k, v in graded.as_dict().items() if k not in ("correct", "utility")}
        return Rubric(correct=graded.correct, utility=graded.utility, parts=parts)
