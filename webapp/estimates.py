"""Figures measured once and said in more than one place: the one source of each.

The home page shows them and tests/webapp/test_start_estimate.py checks that the README says
the same words, so the two cannot drift apart again (issue 53: the home page said "15-25
minutes" where the README said 6.5).
"""

from __future__ import annotations

# The default policy's behaviour cloning on the first `make run` (1,500 steps at one torch thread):
# 6.5 minutes idle, 7.3 under make run's own labeling traffic, 13 beside `stress-ng --cpu 2`
# (benchmarks/RESULTS.md, issue 27).
DEFAULT_POLICY_TRAINING = "about 6.5 minutes on an idle 2-core machine, up to 13 minutes on a busy one"
