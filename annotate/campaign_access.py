"""Who may label a campaign, and what a campaign asks of a verdict: the rules that the campaign
services, the assignment engine, the verdict's parser and the pages all read (plain reads, no
writes), kept below them so none of them imports another to learn these."""

from __future__ import annotations

from django.db.models import Q

from annotate.models import Campaign
from webapp.roles import Role, user_has_role

SCALES = range(2, 11)  # a dimension is rated on 1..scale


def dimensions_of(campaign: Campaign) -> list[dict]:
    """A campaign's dimensions as objects, whatever form they were stored in."""
    return [
        {"name": d, "scale": 5, "description": "", "required": False}
        if isinstance(d, str)
        else {"required": False, **d}
        for d in campaign.dimensions or []
    ]


def campaign_may_label(*, campaign: Campaign, user) -> bool:
    """Annotators may label a campaign open to everyone with the role, or whose pool has them;
    admins may label any."""
    if user_has_role(user, Role.ADMIN):
        return True
    if not user_has_role(user, Role.ANNOTATOR):
        return False
    return not campaign.pool_only or campaign.pool.filter(pk=user.pk).exists()


def campaigns_labelable_by(user):
    """The campaigns `user` may label (any status): a queryset."""
    campaigns = Campaign.objects.all()
    if user_has_role(user, Role.ADMIN):
        return campaigns
    if not user_has_role(user, Role.ANNOTATOR):
        return campaigns.none()
    return campaigns.filter(Q(pool_only=False) | Q(pool=user)).distinct()
