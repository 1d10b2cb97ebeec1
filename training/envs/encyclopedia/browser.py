"""A WebGPT-style text browser over a corpus.

Actions (one per turn, as text):
    search[query]   BM25 over the corpus: the top results with titles and snippets
    open[n]         open result n of the last search
    find[text]      the sentences of the open page that contain text
    quote[text]     keep a quote: counts only if the text is in the open page
    answer[text]    end the episode with this answer
Anything else is an invalid action: an error observation, and a step used. An episode ends
at the step limit, or when the same action repeats `loop_repeats` times in a row (a loop).
Every step is recorded in the canonical trajectory form (schema v1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.ids import ascii_digits
from training.envs.encyclopedia.corpus import Corpus, Document
from training.envs.encyclopedia.search import BM25Index

ACTION = re.compile(r"^\s*(search|open|find|quote|answer)\[(.*)\]\s*$", re.DOTALL)
TOOLS = ("search", "open", "find", "quote", "answer")


@dataclass
class BrowserConfig:
    max_steps: int = 8
    results: int = 4
    snippet_chars: int = 0  # 0: titles only
    page_chars: int = 600
    loop_repeats: int = 3


@dataclass
class StepResult:
    observation: str
    done: bool
    error: bool = False


@dataclass
class Episode:
    question: str
    steps: list[dict] = field(default_factory=list)
    answer: str | None = None
    quotes: list[str] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)  # texts of pages opened
    tool_errors: int = 0
    loop: bool = False
    truncated: bool = False
    actions: list[str] = field(default_factory=list)
    results: list[Document] = field(default_factory=list)  # the last search's hits, as `open[k]` numbers them
    page: Document | None = None  # the page open now, which `find[...]` and `quote[...]` read

    @property
    def done(self) -> bool:
        return self.answer is not None or self.loop or self.truncated


class TextBrowser:
    def __init__(self, corpus: Corpus, config: BrowserConfig | None = None, index: BM25Index | None = None):
        self.corpus = corpus
        self.config = config or BrowserConfig()
        self.index = index or BM25Index(corpus.documents)

    def reset(self, question: str) -> Episode:
        return Episode(question=question)

    def step(self, episode: Episode, action_text: str) -> StepResult:
        if episode.done:
            raise RuntimeError("the episode has ended")
        action_text = action_text.strip()
        episode.actions.append(action_text)
        match = ACTION.match(action_text)
        if match is None:
            result = self._record_error(
                episode, action_text, "Invalid action. Use search[...], open[n], find[...], quote[...] or answer[...]."
            )
        else:
            tool, arg = match.group(1), match.group(2).strip()
            result = getattr(self, f"_{tool}")(episode, arg)
        repeats = self.config.loop_repeats
        if not episode.done and len(episode.actions) >= repeats and len(set(episode.actions[-repeats:])) == 1:
            episode.loop = True
            result = StepResult(result.observation, True, result.error)
        if not episode.done and len(episode.actions) >= self.config.max_steps:
            episode.truncated = True
            result = StepResult(result.observation, True, result.error)
        return result

    # Tools -----------------------------------------------------------------

    def _record(
        self,
        episode: Episode,
        tool: str,
        arguments: dict,
        observation: str,
        *,
        error: bool = False,
        title: str | None = None,
    ) -> StepResult:
        episode.steps.append({"kind": "action", "tool": tool, "arguments": arguments})
        obs = {"kind": "observation", "tool": tool, "content": observation}
        if error:
            obs["is_error"] = True
            episode.tool_errors += 1
        if title:
            obs["title"] = title
        episode.steps.append(obs)
        return StepResult(observation, False, error)

    def _record_error(self, episode: Episode, raw: str, message: str) -> StepResult:
        episode.steps.append({"kind": "action", "tool": "invalid", "arguments": raw})
        episode.steps.append(
            {"kind": "observation", "tool": "invalid", "content": f"Error: {message}", "is_error": True}
        )
        episode.tool_errors += 1
        return StepResult(f"Error: {message}", False, True)

    def _search(self, episode: Episode, query: str) -> StepResult:
        if not query:
            return self._record(episode, "search", {"query": query}, "Error: empty query.", error=True)
        results = self.index.search(query, self.config.results)
        episode.results = results
        n = self.config.snippet_chars
        lines = [f"[{i}] {d.title}" + (f": {d.text[:n]}..." if n else "") for i, d in enumerate(results)]
        return self._record(episode, "search", {"query": query}, "\n".join(lines) or "No results.")

    def _open(self, episode: Episode, arg: str) -> StepResult:
        results = episode.results
        if not ascii_digits(arg) or int(arg) >= len(results):
            return self._record(episode, "open", {"n": arg}, f"Error: no result [{arg}] to open.", error=True)
        doc = results[int(arg)]
        episode.page = doc
        episode.opened.append(doc.text)
        return self._record(episode, "open", {"n": int(arg)}, doc.text[: self.config.page_chars], title=doc.title)

    def _find(self, episode: Episode, text: str) -> StepResult:
        page = episode.page
        if page is None or not text:
            return self._record(episode, "find", {"text": text}, "Error: open a page first.", error=True)
        hits = [s.strip() for s in re.split(r"(?<=[.!?])\s+", page.text) if text.lower() in s.lower()]
        return self._record(episode, "find", {"text": text}, "\n".join(hits) or "Not found on this page.")

    def _quote(self, episode: Episode, text: str) -> StepResult:
        page = episode.page
        if page is None or not text or text not in page.text:
            return self._record(
                episode, "quote", {"text": text}, "Error: that text is not in the open page.", error=True
            )
        episode.quotes.append(text)
        return self._record(episode, "quote", {"text": text}, "Quote saved.")

    def _answer(self, episode: Episode, text: str) -> StepResult:
        episode.answer = text
        episode.steps.append({"kind": "answer", "text": text, "quotes": list(episode.quotes)})
        return StepResult("", True)
