"""Write annotate/fixtures/demo_trajectories.jsonl: the demo's sample trajectories.

Hand-written agents over a tiny fictional encyclopedia, three per task, of mixed
quality (correct with a quote, a wrong page opened, a guess without evidence), in both
import formats. Deterministic; run it again after changing it:

    .venv/bin/python scripts/make_demo_trajectories.py
"""

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "annotate" / "fixtures" / "demo_trajectories.jsonl"

FACTS = [
    (
        "Who founded the Veloran Glassworks?",
        "Ilse Marrow",
        "Veloran Glassworks",
        "Orvin Tesk",
        "The Veloran Glassworks was founded in 1822 by Ilse Marrow in the port of Kessa.",
    ),
    (
        "In which city was the composer Tamsin Quell born?",
        "Drevholm",
        "Tamsin Quell",
        "Ostrava Vale",
        "Tamsin Quell (1790-1851) was a composer born in Drevholm, on the river Anse.",
    ),
    (
        "What river flows through Drevholm?",
        "the Anse",
        "Drevholm",
        "the Morrow",
        "Drevholm is a market town on the river Anse, known for its bell foundry.",
    ),
    (
        "Which society did Orvin Tesk lead?",
        "the Halvard Society",
        "Orvin Tesk",
        "the Kessa Guild",
        "Orvin Tesk was a surveyor who led the Halvard Society from 1840 to 1855.",
    ),
    (
        "When was the Kessa lighthouse built?",
        "1794",
        "Kessa lighthouse",
        "1822",
        "The Kessa lighthouse was built in 1794 to guard the harbour mouth.",
    ),
    (
        "Who was the first director of the Halvard Society?",
        "Mara Vey",
        "Halvard Society",
        "Orvin Tesk",
        "The Halvard Society was established in 1811; its first director was Mara Vey.",
    ),
    (
        "Which instrument did Tamsin Quell play?",
        "the viola",
        "Tamsin Quell",
        "the harp",
        "Quell played the viola in the Drevholm court orchestra before turning to composition.",
    ),
    (
        "What is the Veloran Glassworks known for?",
        "blue lens glass",
        "Veloran Glassworks",
        "mirrors",
        "The Glassworks became known across the coast for its blue lens glass.",
    ),
]


def canonical(i, question, answer, title, page, steps, final, quotes, correct, name, version):
    n_err = sum(1 for s in steps if s.get("is_error"))
    return {
        "schema": "arbiter.trajectory/v1",
        "task": {
            "external_id": f"demo-{i:02d}",
            "prompt": question,
            "reference_answer": answer,
            "environment": "encyclopedia",
            "split": "train",
        },
        "agent": {"name": name, "version": version},
        "steps": steps + [{"kind": "answer", "text": final, "quotes": quotes}],
        "outcome": {
            "correct": correct,
            "steps": len(steps) + 1,
            "tool_errors": n_err,
            "utility": (10 if correct else 0) - (len(steps) + 1) - 5 * n_err,
        },
        "metadata": {"demo": True},
    }


def good(i, q, a, title, wrong_answer, sentence):
    steps = [
        {"kind": "thought", "text": f"I need the article about {title}."},
        {"kind": "action", "tool": "search", "arguments": {"query": title}},
        {
            "kind": "observation",
            "tool": "search",
            "content": f"[0] {title}: {sentence[:60]}...\n[1] Kessa (port): a harbour town on the west coast.",
        },
        {"kind": "action", "tool": "open", "arguments": {"n": 0}},
        {"kind": "observation", "tool": "open", "title": title, "content": sentence + " <b>See also</b>: Kessa."},
        {"kind": "action", "tool": "quote", "arguments": {"text": sentence}},
        {"kind": "observation", "tool": "quote", "content": "Quote saved."},
    ]
    return canonical(
        i, q, a, title, sentence, steps, a[0].upper() + a[1:] + ".", [sentence], True, "scripted-agent", "demo"
    )


def wrong_page(i, q, a, title, wrong_answer, sentence):
    other = "Kessa (port)"
    other_text = f"Kessa is a harbour town. It is mentioned with {wrong_answer} in old records."
    steps = [
        {"kind": "action", "tool": "search", "arguments": {"query": q}},
        {"kind": "observation", "tool": "search", "content": f"[0] {title}\n[1] {other}"},
        {"kind": "action", "tool": "open", "arguments": {"n": 1}},
        {"kind": "observation", "tool": "open", "title": other, "content": other_text},
    ]
    return canonical(
        i,
        q,
        a,
        title,
        sentence,
        steps,
        wrong_answer[0].upper() + wrong_answer[1:] + ".",
        [f"It is mentioned with {wrong_answer}"],
        False,
        "scripted-agent",
        "demo-noisy",
    )


def chat_guess(i, q, a, title, wrong_answer, sentence):
    """An OpenAI chat transcript: a malformed call, then a guess without evidence."""
    return {
        "messages": [
            {"role": "system", "content": "You are a research agent with search and open tools."},
            {"role": "user", "content": q},
            {
                "role": "assistant",
                "content": "Searching two phrasings at once.",
                "tool_calls": [
                    {
                        "id": f"c{i}a",
                        "type": "function",
                        "function": {"name": "search", "arguments": json.dumps({"query": title})},
                    },
                    {"id": f"c{i}b", "type": "function", "function": {"name": "open", "arguments": "{n: 3"}},
                ],
            },
            {"role": "tool", "tool_call_id": f"c{i}a", "content": f"[0] {title}\n[1] Drevholm"},
            {"role": "tool", "tool_call_id": f"c{i}b", "content": "Error: arguments are not valid JSON."},
            {"role": "assistant", "content": f"I believe it is {wrong_answer}."},
        ],
        "task": {"external_id": f"demo-{i:02d}", "prompt": q},
        "agent": {"name": "chat-agent", "version": "demo"},
        "outcome": {"correct": False, "steps": 6, "tool_errors": 1, "utility": 0 - 6 - 5},
    }


def main() -> None:
    lines = []
    for i, fact in enumerate(FACTS):
        for make in (good, wrong_page, chat_guess):
            lines.append(json.dumps(make(i, *fact), ensure_ascii=False))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} trajectories to {OUT}")


if __name__ == "__main__":
    main()
