"""What the dataset card's length count costs, and whether it counts as TRL does (issue 53).

    .venv/bin/python benchmarks/export_length_count.py --rows 1000 --words 300

Builds a tokenizer the way the default policy's is built (byte-level BPE trained here, with its
chat template), and `--rows` preference pairs of agent trajectories whose observations hold
`--words` words, as the `trl` and `trl_text` exports write them. Then times
`annotate.export_lengths.length_counts` on each format (the `tokenizers` library and jinja2,
no transformers), and checks every row's token counts against transformers'
`apply_chat_template` / `tokenizer(text)`, which TRL's RewardTrainer calls: the mismatches must
be 0. No database is used.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arbiter.settings")

WORDS = ("search", "result", "river", "bridge", "stone", "answer", "north", "quillwort", "1987", "ferry")


def _steps(rng: random.Random, words: int) -> list[dict]:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return [
        {"kind": "thought", "text": "I should look it up."},
        {"kind": "action", "tool": "search", "arguments": {"query": rng.choice(WORDS)}},
        {"kind": "observation", "tool": "search", "content": text},
        {"kind": "answer", "text": rng.choice(WORDS)},
    ]


def _rows(n: int, words: int) -> tuple[list[dict], list[dict]]:
    from annotate.chat_messages import messages_to_text, prompt_messages, steps_to_messages

    rng = random.Random(0)
    chat, text = [], []
    for i in range(n):
        prompt = prompt_messages(f"Which {rng.choice(WORDS)} is by the {rng.choice(WORDS)}?", "Be brief.")
        chosen = steps_to_messages(_steps(rng, rng.randint(words // 4, 2 * words)))
        rejected = steps_to_messages(_steps(rng, rng.randint(words // 4, 2 * words)))
        chat.append({"prompt": prompt, "chosen": chosen, "rejected": rejected, "tools": "null"})
        text.append(
            {
                "prompt": messages_to_text(prompt),
                "chosen": messages_to_text(chosen),
                "rejected": messages_to_text(rejected),
            }
        )
    return chat, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--words", type=int, default=300, help="typical words of an observation")
    args = parser.parse_args()
    import django

    django.setup()
    from transformers import AutoTokenizer

    from annotate.export_lengths import TRL_MAX_LENGTH, length_counts, load_policy_tokenizer, row_texts
    from annotate.models import Policy
    from training.policy.model_io import train_tokenizer

    chat_rows, text_rows = _rows(args.rows, args.words)
    with tempfile.TemporaryDirectory() as folder:
        corpus = [json.dumps(r) for r in chat_rows[:200]]
        train_tokenizer(corpus, vocab_size=2048).save_pretrained(folder)
        counter = load_policy_tokenizer(Policy(name="bench", model_dir=folder))
        oracle = AutoTokenizer.from_pretrained(folder)
        report = {"rows": args.rows, "words": args.words, "max_length": TRL_MAX_LENGTH}
        for fmt, rows in (("trl", chat_rows), ("trl_text", text_rows)):
            started = time.perf_counter()
            counts = length_counts(iter(rows), fmt, counter)
            seconds = time.perf_counter() - started
            mismatches = 0
            for row in rows:
                if fmt == "trl":
                    theirs = [
                        len(
                            oracle.apply_chat_template(row["prompt"] + row[s], tokenize=True, return_dict=True)[
                                "input_ids"
                            ]
                        )
                        for s in ("chosen", "rejected")
                    ]
                else:
                    eos = oracle.eos_token
                    theirs = [
                        len(oracle(text=row["prompt"] + row[s] + eos)["input_ids"]) for s in ("chosen", "rejected")
                    ]
                ours = counter.lengths([row_texts(row, fmt, counter)], special=fmt == "trl_text")[0]
                mismatches += ours != theirs
            report[fmt] = {
                "seconds": round(seconds, 2),
                "rows_per_s": round(args.rows / seconds),
                "dropped": counts["dropped"],
                "mismatches_against_transformers": mismatches,
            }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
