"""Environments by name: the built-ins, a user's class by dotted path, or a package's entry point.

    get_environment("arithmetic")                           # built in
    get_environment("encyclopedia", seed=7)                 # built in, options passed to the class
    get_environment("encyclopedia-unseen")                  # a world no training step saw (seed 10,000)
    get_environment("encyclopedia-fresh")                   # a world behaviour cloning never imitates (seed 63)
    get_environment("mypackage.envs:TicketDesk")            # a user's class, by dotted path
    get_environment("ticket-desk")                          # an entry point in group "arbiter.environments"
    get_environment("mcp", server=[...], tasks="t.jsonl")   # tools from an MCP server (training/envs/mcp.py)

A deployment can also name configured environments (a built-in or a class with its
options, e.g. an MCP server and its tasks file): `configured` maps each name to
{"class": ..., "options": {...}}; Django reads it from settings.ARBITER_ENVIRONMENTS.

A name that is none of these is refused with the names that exist. Nothing needs editing
in Arbiter to add an environment.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from training.envs.base import FRESH_WORLD_SEED, Environment

ENTRY_POINT_GROUP = "arbiter.environments"
BUILT_IN = {
    "encyclopedia": "training.envs.encyclopedia.environment:EncyclopediaEnvironment",
    "arithmetic": "training.envs.arithmetic:ArithmeticEnvironment",
    # A known optimum (100% in two steps): where RL must learn what it is paid for (training/rl/sanity.py).
    "codeword": "training.envs.codeword:CodewordEnvironment",
    "mcp": "training.envs.mcp:MCPEnvironment",
}
# Built-in environments that are another built-in with options: a world no training step saw.
VARIANTS = {
    "encyclopedia-unseen": ("encyclopedia", {"seed": 10_000, "unseen": True}),
    # A training world behaviour cloning never imitates: where RL judges its checkpoints.
    "encyclopedia-fresh": ("encyclopedia", {"seed": FRESH_WORLD_SEED}),
}


def variant_of(environment: str, kind: str) -> str:
    """The environment's built-in variant of this kind ("unseen", "fresh") when it has one,
    else the environment itself."""
    name = f"{environment}-{kind}"
    return name if VARIANTS.get(name, ("",))[0] == environment else environment


class UnknownEnvironment(ValueError):
    """The name is not a built-in, an entry point or an importable Environment class."""


def _load(dotted: str) -> type:
    module_name, _, attr = dotted.partition(":") if ":" in dotted else dotted.rpartition(".")
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UnknownEnvironment(f"cannot import environment {dotted!r}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        raise UnknownEnvironment(f"{dotted!r} is not a subclass of training.envs.base.Environment")
    return cls


def environment_names(configured: dict | None = None) -> list[str]:
    """The configured environments, the built-ins and the installed entry points (dotted paths
    work too, unlisted). The MCP adapter needs a server, so only configured MCP environments count."""
    names = {*BUILT_IN, *VARIANTS, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)), *(configured or {})}
    return sorted(names - ({"mcp"} - set(configured or {})))


def environment_class(name: str) -> type[Environment]:
    if name in VARIANTS:
        return environment_class(VARIANTS[name][0])
    if name in BUILT_IN:
        return _load(BUILT_IN[name])
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return _load(ep.value)
    if "." in name or ":" in name:
        return _load(name)
    raise UnknownEnvironment(
        f"no environment {name!r}; known: {', '.join(environment_names())}, "
        "or give a class by dotted path (package.module:Class)"
    )


def get_environment(name: str, *, configured: dict | None = None, **options) -> Environment:
    """An instance of the environment called `name`, built with `options` (a configured
    environment's own options first)."""
    if configured and name in configured:
        entry = configured[name]
        if not isinstance(entry, dict) or not isinstance(entry.get("class", ""), str):
            raise UnknownEnvironment(f"configured environment {name!r}: give {{'class': ..., 'options': {{...}}}}")
        cls = environment_class(entry.get("class") or name)
        env = cls(**{**(entry.get("options") or {}), **options})
        env.name = name
        return env
    try:
        if name in VARIANTS:
            env = environment_class(name)(**{**VARIANTS[name][1], **options})
            env.name = name
            return env
        return environment_class(name)(**options)
    except TypeError as exc:
        raise UnknownEnvironment(f"environment {name!r} cannot be built with {sorted(options)}: {exc}") from None
