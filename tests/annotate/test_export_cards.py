"""Every export format, as JSONL and Parquet, loads with the code its own dataset card prints,
run in a clean Python process from the unzipped bundle: all splits together and each alone."""

import json
import os
import subprocess
import sys
import zipfile

import pytest

from annotate.export_schemas import FILETYPES, FORMATS, SCHEMAS, features_of
from annotate.exports import export_zip
from tests.helpers import CHECK

pytestmark = pytest.mark.django_db


def test_features_match_what_datasets_reads_from_the_arrow_schema():
    from datasets import Features

    for fmt in FORMATS:
        assert features_of(fmt) == Features.from_arrow_schema(SCHEMAS[fmt]).to_dict(), fmt


@pytest.mark.parametrize("filetype", FILETYPES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_loads_with_its_cards_code_in_a_clean_process(agent_snapshot, tmp_path, fmt, filetype):
    bundle = export_zip(agent_snapshot, fmt, filetype, tmp_path / "bundle.zip")
    folder = tmp_path / "unzipped"
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_DATASETS_CACHE=str(tmp_path / "hf" / "datasets"))
    done = subprocess.run(
        [sys.executable, "-c", CHECK, filetype], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    rows = (
        {
            split: n
            for split, n in (
                (s, sum(1 for _ in open(folder / f"data/{s}.{filetype}")))
                for s in ("train", "test")
                if (folder / f"data/{s}.{filetype}").exists()
            )
        }
        if filetype == "jsonl"
        else None
    )
    assert set(out["all"]) == {
        name.split("/")[1].split(".")[0] for name in manifest["files"] if name.startswith("data/")
    }
    for split, n in out["all"].items():
        assert out[split] == n > 0
        if rows is not None:
            assert rows[split] == n
    assert out["columns"] == sorted(SCHEMAS[fmt].names)
