"""Django glue for environments: the ones this deployment knows (built-ins, entry points and
settings.ARBITER_ENVIRONMENTS), built once per process, and the checks run configs share.

Only workers, commands and tests build environments; the web process never does
(webapp/process_role.py): there a check reads names only, and the worker runs the full one
when the run starts (`RunKind.start_check`). Each build stores the environment's tools
(`EnvironmentTools`), which the labeling screen reads."""

from __future__ import annotations

import atexit
import json
import logging
import threading

from django.conf import settings
from django.utils import timezone

from annotate.models import EnvironmentTools
from training.envs.base import Environment, EnvTask, EpisodeRunner
from training.envs.registry import UnknownEnvironment, environment_names, get_environment
from training.envs.sampling import spread_prefix
from webapp.process_role import is_web_process

log = logging.getLogger(__name__)
_built: dict[str, Environment] = {}
_lock = threading.Lock()


@atexit.register
def environments_close() -> None:
    """Close every environment this process built (an MCP server is stopped cleanly, before the
    interpreter tears down the threads its connection runs in)."""
    with _lock:
        built = list(_built.values())
        _built.clear()
    for env in built:
        try:
            env.close()
        except Exception:  # noqa: BLE001 - shutting down: one that fails to close must not stop the others
            pass


class NotInTheWebProcess(RuntimeError):
    """An environment was asked for in the web process, which never starts one."""


def environments_here() -> bool:
    """Whether this process may build environments: not the web process."""
    return not is_web_process()


def _configured() -> dict:
    return getattr(settings, "ARBITER_ENVIRONMENTS", {}) or {}


def _dotted_path_allowed(name: str, configured: dict) -> bool:
    """A class by dotted path is imported only from the modules the deployment allows
    (settings.ARBITER_ENVIRONMENT_MODULES): a run config is input, and importing a module runs it."""
    if name in configured or name in environment_names(configured) or not ("." in name or ":" in name):
        return True
    module = name.split(":", 1)[0]
    return any(
        module == prefix or module.startswith(prefix + ".")
        for prefix in getattr(settings, "ARBITER_ENVIRONMENT_MODULES", ())
    )


def _not_known(name: str, configured: dict) -> str:
    return (
        f"{name!r} is not an environment this deployment knows ({', '.join(environment_names(configured))}); "
        f"a class by dotted path must be in a module listed in ARBITER_ENVIRONMENT_MODULES, or be named in "
        f"ARBITER_ENVIRONMENTS_FILE"
    )


def environment_get(name: str) -> Environment:
    """The environment called `name`, built once per process (an encyclopedia builds its index,
    an MCP environment starts its server). Raises UnknownEnvironment with the reason."""
    configured = _configured()
    if not _dotted_path_allowed(name, configured):
        raise UnknownEnvironment(_not_known(name, configured))
    key = json.dumps([name, configured.get(name)], sort_keys=True, default=str)
    return _cached(key, lambda: get_environment(name, configured=configured))


def _cached(key: str, build) -> Environment:
    """The environment built under `key`, built again when it no longer serves calls (an MCP
    server that died since): a launch check never passes on a dead connection."""
    if not environments_here():
        raise NotInTheWebProcess(
            "the web process never starts an environment; a worker plays it (docs/environments.md)"
        )
    with _lock:
        env = _built.get(key)
        if env is not None and not env.alive():
            _built.pop(key)
            try:
                env.close()
            except Exception:  # noqa: BLE001 - it is being replaced because it is broken
                pass
            env = None
        if env is None:
            env = _built[key] = build()
            tools_store(env)
        return env


def tools_store(env: Environment, *, strict: bool = False) -> None:
    """Keep the tools of a just-built environment where the web process reads them. A build does
    not fail for want of a database (plain ML code builds environments too): the write is
    skipped, with a log line, unless `strict` (the describe job, whose purpose it is)."""
    from django.db import DatabaseError, transaction

    try:
        tools = [tool.as_openai() for tool in EpisodeRunner(env).tools.values()]
        fields = {"tools": tools, "error": ""}
    except Exception as exc:  # noqa: BLE001 - a user's environment may fail to list its tools in any way
        fields = {"tools": None, "error": f"its tools could not be listed: {type(exc).__name__}: {exc}"[:2000]}
    try:
        with transaction.atomic():  # a savepoint: a failed write leaves the caller's transaction usable
            EnvironmentTools.objects.update_or_create(
                name=env.name, defaults={**fields, "described_at": timezone.now()}
            )
    except (DatabaseError, RuntimeError) as exc:  # RuntimeError: no database in this context at all
        if strict:
            raise
        log.info("the tools of %s were not stored: %s", env.name, exc)


def environment_describe(name: str) -> None:
    """Build the environment called `name` (a worker's job) so its tools are stored; one that
    cannot be built is stored with the reason, for the pages to show."""
    try:  # stored again even where it was built before: that description may be long gone
        tools_store(environment_get(name), strict=True)
    except Exception as exc:  # noqa: BLE001 - a user's environment may fail to start in any way
        EnvironmentTools.objects.update_or_create(
            name=name,
            defaults={"tools": None, "error": f"{type(exc).__name__}: {exc}"[:2000], "described_at": timezone.now()},
        )


def environment_world(name: str, seed: int) -> Environment:
    """The environment called `name` built from `seed` (another world of it), once per process.
    Raises UnknownEnvironment when the environment takes no seed."""
    environment_get(name)  # the same checks as the environment itself
    key = json.dumps([name, _configured().get(name), seed], sort_keys=True, default=str)
    return _cached(key, lambda: get_environment(name, configured=_configured(), seed=seed))


def environment_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in environment_names(_configured())]


def environment_name_problems(name: str, *, field: str = "environment") -> list[str]:
    """Why `name` is no environment of this deployment, told from names alone (the web process's
    check: nothing is imported or started)."""
    configured = _configured()
    if not name or not isinstance(name, str):
        return [f"{field}: the name of an environment."]
    if name in environment_names(configured) or name in configured:
        return []
    if ("." in name or ":" in name) and _dotted_path_allowed(name, configured):
        return []
    return [f"{field}: {_not_known(name, configured)}"]


def environment_problems(name: str, *, field: str = "environment") -> list[str]:
    """Why `name` cannot be used: its name, and, where environments are built (not the web
    process), whether it starts."""
    if not environments_here():
        return environment_name_problems(name, field=field)
    try:
        environment_get(name)
    except UnknownEnvironment as exc:
        return [f"{field}: {exc}"]
    except Exception as exc:  # noqa: BLE001 - a user's environment may fail to start in any way
        return [f"{field}: environment {name!r} could not be started: {exc}"]
    return []


def environment_tasks(env: Environment, split: str, limit: int = 0, *, task_ids: list[str] = ()) -> list[EnvTask]:
    """The tasks of a split in their fixed order, or the named ones (external ids) when given.
    With `limit` above 0 and below the split's size, `limit` of them (in that order) holding
    every kind of question in proportion (training/envs/sampling.py `spread_prefix`): ids group
    a kind together, so the first 64 of a world's eval tasks held three of its five kinds."""
    tasks = env.tasks(split)
    if task_ids:
        by_id = {t.external_id: t for t in tasks}
        return [by_id[i] for i in task_ids if i in by_id]
    chosen = {id(t) for t in spread_prefix(tasks, limit)}
    return [t for t in tasks if id(t) in chosen]  # in the split's order, as before


def task_problems(env: Environment, split: str, task_ids: list[str], *, field: str = "task_ids") -> list[str]:
    """Each named task that is not a task of this environment's split, with the reason."""
    known = {t.external_id for t in env.tasks(split)}
    problems = []
    for task_id in task_ids:
        if task_id in known:
            continue
        other = next(
            (s for s in ("train", "dev", "eval") if s != split and any(t.external_id == task_id for t in env.tasks(s))),
            None,
        )
        problems.append(
            f"{field}: {task_id!r} is in the {other} split of {env.name}, not in {split}."
            if other
            else f"{field}: {task_id!r} is not a task of environment {env.name!r}."
        )
    return problems[:20]


def parse_task_ids(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
