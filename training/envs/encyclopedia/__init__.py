"""The built-in encyclopedia: a WebGPT-style text browser over a fictional encyclopedia
generated per seed (corpus, BM25 search, browser, rubric, scripted agent), and its
environment (environment.py)."""
