"""Campaign writes."""
from __future__ import annotations

from django.db import transaction

from annotate.models import Campaign
from webapp import json_input
from webapp.errors import ArbiterError


@transaction.atomic
def campaign_get_or_create(*, name: str, created_by=None) -> tuple[Campaign, bool]:
    """The campaign called `name`, created with default settings if it does not exist."""
    name = name.strip()
    if not name:
        raise ArbiterError("A campaign needs a name.")
    if len(name) > 200:
        raise ArbiterError("A campaign name has at most 200 characters.")
    try:
        json_input.check(name)
    except json_input.JsonInputError as exc:
        raise ArbiterError(f"The campaign name cannot be stored: {exc}.") from None
    return Campaign.objects.get_or_create(name=name, defaults={"created_by": created_by})
