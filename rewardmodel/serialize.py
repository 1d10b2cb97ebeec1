"""One side of a preference pair as a plain-text transcript that fits a token budget.

The reward model reads each side as one text, the question included (TRL's implicit
prompt form)::

    Question: Who founded Veloran?
    Thought: search for it
    Action: search[Veloran]
    Observation: [0] Veloran Glassworks
    Answer: Ilse Marrow

A step is one assistant turn (its thought and actions) with the observations that answer
it; the answer is the final assistant message without tool calls, quotes included.

Truncation policy, applied in this order until the text has at most `max_tokens` tokens
(counted as TRL counts them: `len(tokenizer(text)["input_ids"])`, special tokens included):

(a) observations are cut to their first N characters, N as large as fits but not below
    `MIN_OBSERVATION_CHARS`;
(b) then whole steps are dropped, the middle ones first: the first step and the steps
    nearest the answer stay longest, a line "[... k steps omitted ...]" stands for the
    rest, and the observations of the steps kept grow back to the largest N that fits;
(c) then the question is cut;
(d) then every line is cut to its first N characters (labels kept), the answer included;
(e) then, as a last resort, the whole text is cut.
So the question and the final answer with its quotes are kept in full whenever they fit
together. A cut text ends with " [...]". Before all this, a body longer than
`MAX_CHARS_PER_TOKEN` characters per budget token (which no common tokenizer could fit) is
cut to that length. Special-token strings of the tokenizer are removed from the content,
so untrusted text cannot end a sequence early or pass for padding.

Cost: a text that fits is tokenized once. One that does not is tokenized once more line by
line with character offsets; each stage then searches on token counts estimated from
those offsets and checks its result with one real count (rarely two or three).

`episode_text(question, steps, ...)` serializes a stored trajectory (canonical steps) to
the same text `pair_text` gives for its exported messages, so a reward model scores
trajectories from the database exactly as it saw them in training.

Two views (`view`), one serializer for training, scoring and judging:

- `path` (the default): the whole episode, thoughts, actions and observations, as above;
- `evidence`: what WebGPT's reward model read: the question, the evidence the agent
  gathered and its answer, not how it got there. Each quote it saved is a "Quote:" line
  (the argument of a call to a tool whose name has "quote" in it), each tool result that
  was not an error a "Read:" line (the pages it opened, what it found); actions, thoughts
  and failed calls are left out. A model that reads this cannot score the path's look
  (its length, its errors): it can only check the answer against what was read.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field

from annotate import chat_messages

SERIALIZATION_VERSION = 1
VIEWS = ("path", "evidence")
MIN_OBSERVATION_CHARS = 80
MAX_CHARS_PER_TOKEN = 32  # no common tokenizer packs more characters of text into one token
CUT_MARK = " [...]"
_CHECKS = 6  # real counts per stage before moving on to the next stage

Limits = dict[str, int | None]  # line kind ("question", "observation", "*" for any) -> characters kept


@dataclass
class _Line:
    """One transcript line: a label that is never cut and a body that may be."""

    kind: str  # "question", "thought", "action", "observation", "answer", "marker" or "all"
    label: str
    body: str
    starts: list[int] = field(default_factory=list)  # start offset of each token of label + body

    def limit(self, limits: Limits) -> int | None:
        return limits.get(self.kind, limits.get("*"))

    def render(self, limits: Limits) -> str:
        n = self.limit(limits)
        if n is None or len(self.body) <= n:
            return self.label + self.body
        return self.label + self.body[:n] + CUT_MARK

    def tokens(self, limits: Limits, cut_tokens: int) -> int:
        """Estimated tokens of the rendered line: the tokens that start before the cut."""
        n = self.limit(limits)
        if n is None or len(self.body) <= n:
            return len(self.starts)
        return bisect_left(self.starts, len(self.label) + n) + cut_tokens


@dataclass
class _Transcript:
    question: list[_Line]
    steps: list[list[_Line]]
    answer: list[_Line]  # the final answer line, or none when the side has no answer

    def lines(self) -> list[_Line]:
        return [*self.question, *(line for step in self.steps for line in step), *self.answer]


def _argument_text(arguments) -> str:
    """`search[Veloran]` rather than `search[{"query": "Veloran"}]`: a lone argument is shown bare."""
    value = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return arguments
    if value is None:
        return ""
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _clean(text, specials: list[str]) -> str:
    text = (text or "").strip()
    for token in specials:
        text = text.replace(token, "")
    return text


def _transcript(prompt: list[dict], side: list[dict], specials: list[str], view: str = "path") -> _Transcript:
    if view == "evidence":
        return _evidence(prompt, side, specials)
    question = [
        _Line("question", "System: " if m["role"] == "system" else "Question: ", _clean(m["content"], specials))
        for m in prompt
    ]
    final = side[-1] if side and side[-1]["role"] == "assistant" and not side[-1].get("tool_calls") else None
    steps: list[list[_Line]] = []
    for message in side[:-1] if final else side:
        role, content = message["role"], _clean(message.get("content"), specials)
        if role == "assistant":
            step = [_Line("thought", "Thought: ", content)] if content else []
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                action = f"{function.get('name') or 'tool'}[{_argument_text(function.get('arguments'))}]"
                step.append(_Line("action", "Action: ", _clean(action, specials)))
            steps.append(step)
        else:  # a tool result, or a user turn in the middle of the episode
            if not steps:
                steps.append([])
            steps[-1].append(_Line("observation", "Observation: " if role == "tool" else "User: ", content))
    answer = [_Line("answer", "Answer: ", _clean(final["content"], specials))] if final else []
    return _Transcript(question, steps, answer)


def _evidence(prompt: list[dict], side: list[dict], specials: list[str]) -> _Transcript:
    """The evidence view (module docstring): the question, each quote saved and each tool
    result read, one step per assistant turn, and the answer."""
    question = [
        _Line("question", "Question: ", _clean(m["content"], specials)) for m in prompt if m["role"] != "system"
    ]
    final = side[-1] if side and side[-1]["role"] == "assistant" and not side[-1].get("tool_calls") else None
    steps: list[list[_Line]] = []
    quotes: dict[str, str] = {}  # call id -> the quoted text, kept once its result is not an error
    for message in side[:-1] if final else side:
        if message["role"] == "assistant":
            steps.append([])
            for index, call in enumerate(message.get("tool_calls") or []):
                function = call.get("function") or {}
                if "quote" in str(function.get("name") or "").lower():
                    quotes[str(call.get("id") or f"{len(steps)}:{index}")] = _argument_text(function.get("arguments"))
            continue
        if message["role"] != "tool":
            continue
        content = _clean(message.get("content"), specials)
        if not steps:
            steps.append([])
        quoted = quotes.pop(str(message.get("tool_call_id") or ""), None)
        if content.startswith("Error") or message.get("is_error"):
            continue
        if quoted is not None:
            steps[-1].append(_Line("action", "Quote: ", _clean(quoted, specials)))
        else:
            steps[-1].append(_Line("observation", "Read: ", content))
    steps = [step for step in steps if step]
    answer = [_Line("answer", "Answer: ", _clean(final["content"], specials))] if final else []
    return _Transcript(question, steps, answer)


def _largest(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """The largest v in [lo, hi] with ok(v), for ok true up to a threshold; None when ok(lo) is false."""
    if not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Fitter:
    """Counts tokens as TRL does and finds the least truncation that fits the budget."""

    def __init__(self, tokenizer, max_tokens: int):
        self.tokenizer = tokenizer
        self.budget = max_tokens
        self.special_tokens = len(tokenizer("")["input_ids"])
        self.newline_tokens = len(self._ids("\n"))
        self.cut_tokens = len(self._ids(CUT_MARK))
        self._markers: dict[int, _Line] = {}

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    def count(self, text: str) -> int:
        # verbose=False: counting a text longer than the model takes is the point, not a mistake to warn of.
        return len(self.tokenizer(text, verbose=False)["input_ids"])

    def measure(self, lines: list[_Line]) -> None:
        """Token start offsets of each line, in one batch call."""
        texts = [line.label + line.body for line in lines]
        if not texts:
            return
        if getattr(self.tokenizer, "is_fast", False):
            offsets = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)[
                "offset_mapping"
            ]
            for line, pairs in zip(lines, offsets, strict=True):
                line.starts = sorted(start for start, _ in pairs)
        else:  # no offsets from a slow tokenizer: spread its tokens evenly over the text
            ids_of = self.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
            for line, ids in zip(lines, ids_of, strict=True):
                size = len(line.label) + len(line.body)
                line.starts = [i * size // len(ids) for i in range(len(ids))]

    def estimate(self, lines: list[_Line], limits: Limits) -> int:
        body = sum(line.tokens(limits, self.cut_tokens) for line in lines)
        return self.special_tokens + body + self.newline_tokens * max(len(lines) - 1, 0)

    def search(self, lo: int, hi: int, layout: Callable[[int], tuple[list[_Line], Limits]]) -> tuple[int, str] | None:
        """The largest v in [lo, hi] whose layout fits: searched on estimates, checked by a real count."""
        target = self.budget
        for _ in range(_CHECKS):
            v = _largest(lo, hi, lambda v, target=target: self.estimate(*layout(v)) <= target)
            if v is None:
                return None
            text = _render(*layout(v))
            over = self.count(text) - self.budget
            if over <= 0:
                return v, text
            target -= over
        return None

    def marker(self, omitted: int) -> list[_Line]:
        """The line that stands for `omitted` dropped steps (none for none), measured once."""
        if omitted == 0:
            return []
        if omitted not in self._markers:
            line = _Line("marker", f"[... {omitted} step{'s' if omitted > 1 else ''} omitted ...]", "")
            self.measure([line])
            self._markers[omitted] = line
        return [self._markers[omitted]]


def _render(lines: list[_Line], limits: Limits) -> str:
    return "\n".join(line.render(limits) for line in lines)


def _cap(t: _Transcript, chars: int) -> None:
    """Cut bodies longer than any text that could fit, so a huge observation costs no more than a short one."""
    for line in t.lines():
        if len(line.body) > chars:
            line.body = line.body[:chars] + CUT_MARK


def _fit(t: _Transcript, fitter: _Fitter) -> str:
    full = _render(t.lines(), {})
    if len(full) <= fitter.budget * MAX_CHARS_PER_TOKEN and fitter.count(full) <= fitter.budget:
        return full
    fitter.measure(t.lines())
    n_steps = len(t.steps)

    def kept_lines(kept: int) -> list[_Line]:
        """The question, `kept` steps (the first one, then the ones nearest the answer) and the answer."""
        first = t.steps[:1] if kept else []
        last = t.steps[n_steps - kept + 1 :] if kept > 1 else []
        return [
            *t.question,
            *(line for step in first for line in step),
            *fitter.marker(n_steps - kept),
            *(line for step in last for line in step),
            *t.answer,
        ]

    longest = max((len(line.body) for line in t.lines() if line.kind == "observation"), default=0)
    floor = min(MIN_OBSERVATION_CHARS, longest)
    everything = kept_lines(n_steps)
    found = fitter.search(floor, longest, lambda n: (everything, {"observation": n}))  # (a)
    if found:
        return found[1]
    found = fitter.search(0, n_steps, lambda k: (kept_lines(k), {"observation": floor}))  # (b)
    if found:
        kept, text = found
        lines = kept_lines(kept)
        regrown = fitter.search(floor, longest, lambda n: (lines, {"observation": n}))
        return regrown[1] if regrown else text
    bare = kept_lines(0)
    asked = max((len(line.body) for line in t.question), default=0)
    found = fitter.search(0, asked, lambda n: (bare, {"question": n}))  # (c)
    if found:
        return found[1]
    longest_line = max(len(line.body) for line in bare)
    found = fitter.search(0, longest_line, lambda n: (bare, {"*": n}))  # (d)
    if found:
        return found[1]
    whole = _Line("all", "", _render(bare, {}))  # (e)
    fitter.measure([whole])
    found = fitter.search(0, len(whole.body), lambda n: ([whole], {"all": n}))
    if found:
        return found[1]
    raise ValueError(f"max_tokens={fitter.budget} leaves no room for any text with this tokenizer")


def pair_text(
    prompt_messages: list[dict], side_messages: list[dict], tokenizer, max_tokens: int, view: str = "path"
) -> str:
    """The transcript of one side (`chosen` or `rejected` in the `trl` export) with its question,
    in `view`, truncated as the module docstring says so that `tokenizer(text)` has at most
    `max_tokens` ids."""
    specials = [token for token in tokenizer.all_special_tokens if token]
    transcript = _transcript(prompt_messages, side_messages, specials, view)
    _cap(transcript, max_tokens * MAX_CHARS_PER_TOKEN)
    return _fit(transcript, _Fitter(tokenizer, max_tokens))


def episode_text(question: str, steps: list[dict], tokenizer, max_tokens: int, view: str = "path") -> str:
    """The same transcript for a stored trajectory: its question and canonical steps."""
    return pair_text(
        chat_messages.prompt_messages(question), chat_messages.steps_to_messages(steps), tokenizer, max_tokens, view
    )


def episode_text_full(question: str, steps: list[dict]) -> str:
    """The whole transcript of a stored trajectory, uncut (to check a tokenizer against, not to score)."""
    transcript = _transcript(chat_messages.prompt_messages(question), chat_messages.steps_to_messages(steps), [])
    return _render(transcript.lines(), {})
