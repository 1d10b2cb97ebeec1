"""Judges, the annotation side: what labeling reads of a judge's votes and what they are worth.

- `votes.py`: storing a judge's votes, the vote shown after submit or filled into the form,
  and a campaign's queue ordered by the judges (routing);
- `agreement.py`: a judge measured against people (plain Python, no Django);
- `quality.py`: the judge panels of a campaign's quality page (rows read for `agreement`).

The models (`Judge`, `JudgeVote`, `JudgeCall`) are annotate's (annotate/models.py): a judge's
votes count toward a comparison's k votes and go into the datasets beside people's, so
labeling reads them. Everything that calls a model (the chat client, the prompt, the run,
the pages and the API) is training/judges/; docs/judges.md tells the whole feature.
"""
