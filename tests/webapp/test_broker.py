"""The embedded broker (webapp/broker.py): a reader never sees a message before it is whole, and a
message it cannot decode is set aside instead of killing the worker."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kombu import Connection

TRANSPORT = "webapp.broker:Transport"
ROOT = Path(__file__).resolve().parents[2]


def _connection(root: Path) -> Connection:
    for sub in ("queue", "processed"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return Connection(
        "filesystem://",
        transport=TRANSPORT,
        transport_options={
            "data_folder_in": str(root / "queue"),
            "data_folder_out": str(root / "queue"),
            "processed_folder": str(root / "processed"),
            "store_processed": False,
        },
    )


def test_a_message_goes_through_whole(tmp_path):
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue("default")
        queue.put({"task": "x", "args": [1, "é"]})
        message = queue.get(timeout=1)
        assert message.payload == {"task": "x", "args": [1, "é"]}
        message.ack()
        queue.close()
    assert list((tmp_path / "queue").iterdir()) == []
    assert list((tmp_path / "processed").iterdir()) == []


def test_a_message_being_written_is_not_read(tmp_path):
    with _connection(tmp_path) as conn:
        channel = conn.default_channel
        # What a writer leaves while it writes (and what a crashed writer leaves behind).
        (tmp_path / "queue" / "1_abc.default.msg.part").write_bytes(b'{"half": ')
        with pytest.raises(Exception) as caught:
            channel._get("default")
        assert type(caught.value).__name__ == "Empty"
        assert (tmp_path / "queue" / "1_abc.default.msg.part").exists()
        assert channel._size("default") == 0


def test_an_undecodable_message_is_set_aside_and_the_next_one_read(tmp_path, caplog):
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue("default")
        (tmp_path / "queue" / "0_broken.default.msg").write_bytes(b"")  # older than any real one
        queue.put({"n": 1})
        message = queue.get(timeout=1)
        assert message.payload == {"n": 1}
        message.ack()
        queue.close()
    assert (tmp_path / "bad" / "0_broken.default.msg").exists()
    assert "could not be decoded" in caplog.text


def test_a_reader_racing_writers_gets_every_message_once(tmp_path):
    """Two writers and one reader on one folder: with kombu's own transport the reader takes
    files as they are created, before their bytes are written."""
    count, received = 400, []
    with _connection(tmp_path) as reader:
        channel = reader.default_channel

        def write(offset: int) -> None:
            with _connection(tmp_path) as writer:
                for i in range(count // 2):
                    writer.default_channel._put("default", {"i": offset + i, "pad": "x" * 2000})

        writers = [threading.Thread(target=write, args=(k * count // 2,)) for k in range(2)]
        for w in writers:
            w.start()
        while len(received) < count:
            try:
                received.append(channel._get("default")["i"])
            except Exception as exc:  # Empty while the writers catch up
                assert type(exc).__name__ == "Empty", exc
                if not any(w.is_alive() for w in writers) and channel._size("default") == 0:
                    break
        for w in writers:
            w.join()
    assert sorted(received) == list(range(count))
    assert not (tmp_path / "bad").exists()


def test_the_embedded_default_uses_this_transport(tmp_path):
    """`make run` (no CELERY_BROKER_URL) sends and takes messages through this transport."""
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "DATABASE_URL")}
    env["ARBITER_VAR_DIR"] = str(tmp_path)
    code = (
        "import django; django.setup(); from arbiter.celery import app; "
        "c = app.connection_for_write(); print(app.conf.broker_transport, type(c.transport).__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [TRANSPORT, "webapp.broker"]
