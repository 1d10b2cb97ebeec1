"""What the import does with a trace export, for the converters' unit tests (no database):
decode each line, split it into records, file them by trace in file order (through JSON, as
the on-disk grouping stores them), convert each trace, validate each trajectory."""

import json

from annotate.trajectory_formats import parse_trajectory


def import_by_trace(module, lines: list[str]) -> dict[str, list[tuple[dict, dict]]]:
    """{trace key: [(canonical, dropped), ...]} in order of each trace's first record."""
    groups: dict[str, list] = {}
    for number, line in enumerate(lines, start=1):
        for key, record in module.records(json.loads(line)):
            groups.setdefault(key, []).append((number, json.loads(json.dumps(record))))
    out = {}
    for key, records in groups.items():
        results = module.convert(records)
        for obj, _dropped in results:
            parse_trajectory(obj, format="canonical")
        out[key] = results
    return out


def import_all(module, lines: list[str]) -> list[tuple[dict, dict]]:
    return [result for results in import_by_trace(module, lines).values() for result in results]
