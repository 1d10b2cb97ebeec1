"""Writes of the annotation domain, by topic. Each public function is atomic: `@transaction.atomic`,
or, for the labeling cycle on PostgreSQL, statements each atomic on its own (labeling_sql.py)."""
