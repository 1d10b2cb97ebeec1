#!/usr/bin/env bash
# `make run`: the embedded default on one machine. SQLite and a filesystem Celery broker in the
# storage folder (var/, or ARBITER_VAR_DIR; DATABASE_URL / CELERY_BROKER_URL point elsewhere).
#
# The app answers within seconds: the set-up steps need no model (migrations, then `load_demo`:
# the demo users and the scripted and simulated demo campaigns, ready to label). The default
# policy is trained by a behaviour-cloning run on the worker (the Runs page shows its progress);
# when it succeeds, a rollout run fills the campaign "Demo: encyclopedia QA" with its
# trajectories. A later start reuses all of it, and picks up that chain where it stopped.
#
# Started in the background: gunicorn (log: var/web.log) and one Celery worker on both queues
# with the beat scheduler (log: var/worker.log; niced, so training leaves the web server the
# CPU it needs). Each set-up step is printed as it starts and ends; the URL and the demo users
# last, once /health answers. Ctrl-C, or SIGINT/SIGTERM/SIGHUP to the launcher, stops them all by
# PID and exits 0 (through scripts/launcher.py: see there why a shell cannot do it alone).
set -euo pipefail
# Everything the app writes (the SQLite database with its sessions, logs, the broker's messages,
# models) is for this user alone: another local user must not read a signed-in admin's session.
umask 077
cd "$(dirname "$0")/.."
BIN=.venv/bin
if [ -z "${ARBITER_LAUNCHER:-}" ]; then
  PY=$BIN/python; [ -x "$PY" ] || PY=python3
  exec "$PY" scripts/launcher.py "$(pwd)/scripts/run_embedded.sh" "$@"
fi
PORT="${PORT:-8000}"
HOST=127.0.0.1
setting() {  # a setting from the environment, else from .env (which arbiter/settings.py reads too)
  if [ -n "${!1:-}" ]; then echo "${!1}"; elif [ -f .env ]; then
    sed -n "s/^$1=[\"']\{0,1\}\([^\"']*\).*/\1/p" .env | tail -n 1
  fi
}
ARBITER_VAR_DIR="$(setting ARBITER_VAR_DIR)"
mkdir -p "${ARBITER_VAR_DIR:-var}"
ARBITER_VAR_DIR="$(cd "${ARBITER_VAR_DIR:-var}" && pwd)"
export ARBITER_VAR_DIR  # one storage folder for every process below
VAR="$ARBITER_VAR_DIR"
LOG="$VAR/start.log"
LOCK="$VAR/run_embedded.pid"

# One `make run` per storage folder: a second would share (and sweep) the first one's jobs.
if [ -f "$LOCK" ] && kill -0 "$(cat "$LOCK")" 2>/dev/null \
    && grep -q run_embedded "/proc/$(cat "$LOCK")/cmdline" 2>/dev/null; then
  echo "Arbiter is already running on $VAR (PID $(cat "$LOCK")); stop it first (Ctrl-C in its terminal)." >&2
  exit 1
fi
echo $$ >"$LOCK"

WEB="" WORKER="" DEMO=""
finish() {  # wait up to `grace` seconds for a signalled process, then SIGKILL it and its children
  local pid=$1 grace=$2
  [ -n "$pid" ] || return 0
  for _ in $(seq $((grace * 4))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" $(pgrep -P "$pid") 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  # A second Ctrl-C while stopping must not leave the processes behind: the stop takes at most 13 s.
  trap '' INT TERM HUP
  trap - EXIT
  if [ -n "$WEB$WORKER" ]; then echo; echo "Stopping the web server and the workers ..."; fi
  [ -z "$WEB" ] || kill -TERM "$WEB" 2>/dev/null || true
  [ -z "$DEMO" ] || kill -TERM "$DEMO" 2>/dev/null || true
  # SIGQUIT is Celery's cold shutdown: a training run stops now instead of running to its end
  # (a warm shutdown waits for it); the next start fails that run and queues it again. The
  # embedded beat takes ~5 s more to stop, so after 3 s a worker is killed outright.
  local pid
  for pid in $WORKER; do kill -QUIT "$pid" 2>/dev/null || true; done
  finish "$WEB" 10
  for pid in $WORKER; do finish "$pid" 3; done
  rm -f "$LOCK"
}
trap cleanup EXIT
# Ctrl-C is how `make run` is stopped: a normal end (exit 0, after `cleanup`). Closing the
# terminal (SIGHUP) stops it the same way.
trap 'exit 0' INT TERM HUP

began=$SECONDS
say() {  # one line of progress, with the seconds since the start
  printf '  [%3d s] %s\n' $((SECONDS - began)) "$1"
}

echo "Starting Arbiter (set-up log: $LOG) ..."
: >"$LOG"
# Migrations, static files and, for this folder's own database and broker, the jobs cut off by the
# last stop, in one process (a Django start each would cost seconds): it prints each step's name
# as the step starts. Their only worker is started below, so a job still marked running was cut
# off when the last `make run` stopped: failing it lets load_demo start the default policy's
# training again instead of waiting on a run nobody executes. (A shared database may have other
# workers: there the scheduled sweep decides.)
ORPHANED=""
[ -n "$(setting CELERY_BROKER_URL)$(setting DATABASE_URL)" ] || ORPHANED="--orphaned"
if ! $BIN/python manage.py embedded_setup $ORPHANED --log "$LOG" 2>>"$LOG" \
    | while IFS= read -r line; do say "$line"; done; then
  echo "make run: the set-up failed; its output (from $LOG):" >&2
  tail -n 40 "$LOG" >&2
  exit 1
fi
# Demo users, the campaigns that need no model, and the default policy's run (queued once), while
# the servers start (on two cores the two overlap; the banner waits for both).
say "demo users, campaigns and the default policy's training run ..."
$BIN/python manage.py load_demo >"$VAR/demo.txt" 2>>"$LOG" </dev/null &
DEMO=$!

# Three processes, each restarted if it dies (at most RESTARTS times in RESTART_WINDOW seconds,
# saying why in this terminal): gunicorn; a housekeeping worker on the `default` queue (imports,
# fills, snapshots, and the beat scheduler's stale-job sweeps, so none of them waits behind
# training); a training worker on the `gpu` queue (niced, so training leaves the web server the
# CPU it needs). A worker that keeps dying is left stopped and the web server stays up: the
# Runs page then says no worker is alive.
RESTARTS="${ARBITER_RESTARTS:-5}" RESTART_WINDOW="${ARBITER_RESTART_WINDOW:-600}"
declare -A PID STARTS LOGFILE
start_web() {
  $BIN/gunicorn arbiter.wsgi --bind "$HOST:$PORT" --workers 2 --threads 4 --logger-class webapp.gunicorn_logging.RedactingLogger \
    --access-logfile "$VAR/web.log" --error-logfile "$VAR/web.log" </dev/null &
  PID[web]=$!
}
start_housekeeping() {
  $BIN/celery -A arbiter worker -Q default --concurrency 2 --loglevel INFO --beat \
    --schedule "$VAR/celerybeat-schedule" --logfile "$VAR/worker-housekeeping.log" \
    --hostname "housekeeping@%h" >>"$VAR/worker-housekeeping.log" 2>&1 </dev/null &
  PID[housekeeping]=$!
}
start_training() {
  nice -n 10 $BIN/celery -A arbiter worker -Q gpu --concurrency 1 --loglevel INFO \
    --logfile "$VAR/worker-training.log" --hostname "training@%h" >>"$VAR/worker-training.log" 2>&1 </dev/null &
  PID[training]=$!
}
LOGFILE=([web]="$VAR/web.log" [housekeeping]="$VAR/worker-housekeeping.log" [training]="$VAR/worker-training.log")
for name in web housekeeping training; do STARTS[$name]=""; "start_$name"; done
WEB=${PID[web]} WORKER="${PID[housekeeping]} ${PID[training]}"
say "web server (PID ${PID[web]}), housekeeping worker (PID ${PID[housekeeping]}) and training worker (PID ${PID[training]}) started"
say "waiting for the web server to answer on http://$HOST:$PORT/ ..."

why() {  # among the last lines of a process's log, the last one that says what went wrong
  tail -n 60 "${LOGFILE[$1]}" 2>/dev/null | grep -E "Unrecoverable|CRITICAL|ERROR|[A-Za-z]+Error:|Killed" \
    | tail -n 1 | cut -c1-300
}
supervise() {  # called every second: restart what died, within the bound
  local name pid status now recent
  for name in web housekeeping training; do
    pid=${PID[$name]}
    [ -n "$pid" ] || continue
    kill -0 "$pid" 2>/dev/null && continue
    status=0; wait "$pid" 2>/dev/null || status=$?
    now=$SECONDS recent=""
    for t in ${STARTS[$name]}; do [ $((now - t)) -lt "$RESTART_WINDOW" ] && recent="$recent $t"; done
    echo "make run: the $name process stopped (exit status $status) at $(date +%H:%M:%S)." >&3
    [ -z "$(why "$name")" ] || echo "  its log (${LOGFILE[$name]}) ends: $(why "$name")" >&3
    if [ "$(wc -w <<<"$recent")" -ge "$RESTARTS" ]; then
      echo "  it was restarted $RESTARTS time(s) in the last $((RESTART_WINDOW / 60)) minutes already: not restarting it again." >&3
      PID[$name]=""
      [ "$name" != web ] || exit 1
      echo "  The web server stays up; the Runs page shows that no worker is alive. Restart make run once fixed." >&3
      continue
    fi
    STARTS[$name]="$recent $now"
    echo "  restarting it ($(($(wc -w <<<"$recent") + 1)) of $RESTARTS in $((RESTART_WINDOW / 60)) minutes)." >&3
    "start_$name"
  done
  WEB=${PID[web]} WORKER="${PID[housekeeping]} ${PID[training]}"
}

answers() { $BIN/python -c "import urllib.request as u; u.urlopen('http://$HOST:$PORT/health', timeout=2)" 2>/dev/null; }
deadline=$((SECONDS + 180))
until answers; do
  if ! kill -0 "${PID[web]}" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
    echo "make run: the web server did not answer on port $PORT (in use? set PORT=...); from $VAR/web.log:" >&2
    tail -n 20 "$VAR/web.log" >&2
    exit 1
  fi
  sleep 0.2
done
say "the web server answers"
if ! wait "$DEMO"; then
  echo "make run: load_demo failed; from $LOG:" >&2
  cat "$VAR/demo.txt" >&2
  tail -n 40 "$LOG" >&2
  exit 1
fi
DEMO=""
say "demo data ready"

cat <<EOF

============================================================================
  Arbiter is running at http://$HOST:$PORT/

$(sed 's/^/  /' "$VAR/demo.txt")

  Logs: $VAR/web.log, $VAR/worker-housekeeping.log, $VAR/worker-training.log.
  Ctrl-C stops the server and the workers.
============================================================================
EOF
# Until Ctrl-C: every second, restart whatever stopped (within the bound). What supervise says goes
# to fd 3 (the terminal); bash's own "Killed" notices for reaped children are not shown.
exec 3>&2
while true; do sleep 1; supervise; done 2>/dev/null
