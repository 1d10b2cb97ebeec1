#!/usr/bin/env bash
# `make run`: the embedded default on one machine. SQLite and a filesystem Celery broker
# under var/ (unless DATABASE_URL / CELERY_BROKER_URL say otherwise), the default policy
# trained once (about 5 minutes, with a progress bar; reused afterwards), demo data loaded
# once, one worker on both queues (with the beat scheduler) in the background, gunicorn in the foreground.
# Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
PORT="${PORT:-8000}"
mkdir -p var

$BIN/python manage.py migrate --noinput -v0
$BIN/python manage.py collectstatic --noinput -v0
$BIN/python manage.py train_policy
$BIN/python manage.py load_demo

# --beat: the scheduler in the same process sweeps jobs whose worker died (webapp/jobs.py).
$BIN/celery -A webapp worker -Q default,gpu --concurrency 1 --loglevel INFO --beat \
  --schedule var/celerybeat-schedule --logfile var/worker.log --hostname "embedded@%h" &
WORKER=$!
trap 'kill "$WORKER" 2>/dev/null || true; wait "$WORKER" 2>/dev/null || true' EXIT INT TERM

echo
echo "Arbiter is running at http://127.0.0.1:${PORT}/  (worker log: var/worker.log; Ctrl-C stops)"
echo
$BIN/gunicorn webapp.wsgi --bind "127.0.0.1:${PORT}" --workers 2 --threads 4 \
  --access-logfile - --error-logfile -
