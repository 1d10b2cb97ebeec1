"""The embedded broker: kombu's filesystem transport, made safe for a scheduler and workers in
separate processes.

kombu's own `_put` creates the message file and then writes it, and `_get` moves whatever file it
lists, locks or not: a reader can take a message that is still empty or half-written, fail to
decode it, and the worker dies ("Unrecoverable error: JSONDecodeError"). Here a message is written
under a name no reader lists and renamed into the queue folder when complete (a rename within one
folder is atomic), and a reader that still finds a file it cannot decode moves it to `bad/` and
logs it, instead of dying on it.

Used when `CELERY_BROKER_URL` is `filesystem://` (arbiter/settings.py); Redis and RabbitMQ
deployments never load it.
"""

from __future__ import annotations

import logging
import os
import uuid
from queue import Empty
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

PARTIAL = ".part"  # a message being written: its name does not end in ".<queue>.msg"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue):
        wanted = f"{queue}.msg"
        taken_dir = self.processed_folder  # in the broker's folder: a rename, never a copy
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            taken = os.path.join(taken_dir, name)
            try:
                os.rename(os.path.join(self.data_folder_in, name), taken)
            except OSError:
                continue  # another worker took it first
            try:
                with open(taken, "rb") as f:
                    payload = f.read()
            except OSError as exc:
                raise filesystem.ChannelError(f"Cannot read file {taken!r} from queue.") from exc
            try:
                message = loads(bytes_to_str(payload))
            except ValueError:  # JSONDecodeError and UnicodeDecodeError both are
                self._set_aside(taken, name)
                continue
            if not self.store_processed:
                os.remove(taken)
            return message
        raise Empty()

    def _set_aside(self, path: str, name: str) -> None:
        bad = os.path.join(os.path.dirname(self.processed_folder.rstrip(os.sep)), "bad")
        os.makedirs(bad, exist_ok=True)
        os.replace(path, os.path.join(bad, name))
        logger.error("broker: message %s could not be decoded; kept in %s and skipped", name, bad)


class Transport(filesystem.Transport):
    Channel = Channel
