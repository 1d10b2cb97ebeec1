"""Writes of the annotation domain, by topic. Each public function is `@transaction.atomic`."""
