"""Trace formats: agent runs logged by tracing tools, as canonical v1 trajectories.

Plain Python, no Django. A tracing tool writes one run of an agent as many records (spans,
runs, observations) that can arrive in any order and interleaved with other runs' records,
so these formats are read in two passes (`grouping.TraceGroups`): every record is filed
under its trace id in a temporary on-disk index, then each trace is read back whole and
converted. Memory holds one trace at a time, whatever the file's size.

Each format is a module with:

- `NAME` (the `--format` value) and `TITLE` (for people);
- `looks_like(obj) -> bool`: whether one decoded line is this format (detection);
- `records(obj) -> Iterator[(trace_key, record)]`: one decoded line split into records,
  each filed under its trace; raises `TrajectoryFormatError` with the reason;
- `convert(records) -> list[(canonical, dropped)]`: one trace's records (in file order) as
  canonical v1 objects, one per agent run in it, each with what was left out on purpose
  (`{kind: count}`); raises `TrajectoryFormatError` naming the record at fault.

`transcript.Transcript` turns model calls and tool executions into steps; `spans` reads
OpenTelemetry exports (OTLP JSON, or a span per line) and orders a span tree.
"""
