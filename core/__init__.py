"""Contracts every app shares, in plain Python with no Django (and importing nothing of the apps;
`make lint` checks it with import-linter, pyproject.toml):

- `json_input`: the one strict JSON reader (no NaN, 1e400, lone surrogates or NUL; bounded nesting)
- `ids`: ids and whole numbers read from request data (JSON integers or ASCII digits, in range)
- `problems`: a problem with input (a message, with its field or line), as forms and the API show it
- `votes`: a vote's direction and the one majority rule
- `intervals`: the intervals of every figure (a seeded percentile bootstrap; a share's at least Wilson's)
- `callbacks`: how a caller watches and steers a training job
- `configs`: a config declared once (fields with help), read one way by forms, the API and command lines
- `figures`: how a share and a rate are written where people read them
- `same_behaviour`: when two sides made the same tool calls and gave the same answer
- `config_ranges`: a config's numbers checked against their ranges, worded one way
- `markdown`: Markdown as people write it to HTML that is safe to show
- `parallel`: the data-parallel launcher of training jobs (processes, rank 0's events, stopping together)
- `ranks`: a training process's view of the others (the one data-parallel mechanism; loads torch)
"""
