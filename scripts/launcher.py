"""The front of `make run`: starts scripts/run_embedded.sh so that Ctrl-C, SIGINT or SIGTERM stop
it cleanly (exit status 0), however it was started.

    scripts/launcher.py scripts/run_embedded.sh   (run_embedded.sh starts itself through this)

Two things a shell script cannot do for itself (issue 53):
- In a terminal, Ctrl-C goes to the whole foreground process group, `make` included, and make
  dies of it (status 130, "Error 130") whatever the script then does. The script runs here in
  a process group of its own that is given the terminal, so Ctrl-C reaches it and the
  processes it started, never make; the terminal is handed back when it ends.
- Started in the background (`make run &`, nohup), it inherits SIGINT ignored, and bash cannot
  trap a signal ignored on entry: a SIGINT left the script running while its web server and
  workers died of it, and it restarted them. The script starts here with SIGINT at its default,
  and a SIGINT, SIGTERM or SIGHUP sent to this process is passed on to it, which stops the web
  server and the workers by their PIDs and exits 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _terminal() -> int | None:
    """The controlling terminal, when this process's group holds it (a foreground `make run`)."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        return None
    try:
        if os.tcgetpgrp(fd) == os.getpgrp():
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _give_terminal(fd: int, group: int) -> None:
    """Make `group` the terminal's foreground group (from a background group SIGTTOU would stop us)."""
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(fd, group)
    except OSError:
        pass  # the terminal went away: nothing to hand over
    finally:
        signal.signal(signal.SIGTTOU, previous)


def _child_setup() -> None:
    for sig in (*FORWARDED, signal.SIGQUIT, signal.SIGTTOU):
        signal.signal(sig, signal.SIG_DFL)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: scripts/launcher.py PROGRAM [ARG ...]", file=sys.stderr)
        return 2
    terminal = _terminal()
    env = {**os.environ, "ARBITER_LAUNCHER": str(os.getpid())}
    started: list[subprocess.Popen] = []  # a signal before the script exists waits for it (below)
    pending: list[int] = []

    def forward(signum, frame):
        if started:
            started[0].send_signal(signum)
        else:
            pending.append(signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    # Its own group only in a terminal (to take Ctrl-C away from make); otherwise it stays in this
    # one, so that a signal to the whole group (a test harness, a service manager) reaches it too.
    child = subprocess.Popen(argv, env=env, process_group=0 if terminal is not None else None, preexec_fn=_child_setup)
    started.append(child)
    for signum in pending:
        child.send_signal(signum)
    if terminal is not None:
        _give_terminal(terminal, child.pid)
    try:
        while True:
            try:
                status = child.wait()
                break
            except InterruptedError:
                continue
    finally:
        if terminal is not None:
            _give_terminal(terminal, os.getpgrp())
            os.close(terminal)
    if status < 0:  # killed by a signal it did not handle: stopped as asked, unless it was a crash
        return 0 if -status in FORWARDED else 128 - status
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
