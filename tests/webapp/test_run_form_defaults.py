"""Every run form launches with its defaults on the demo data, or says in words what to do
first (issue 44): no form preselects a row that cannot serve it, and none answers "No policy
with id 0" to a person who changed nothing."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from annotate.models import Policy
from tests.helpers import as_a_browser_posts
from tests.policy_fixtures import tiny_policy_dir
from webapp.models import Run
from webapp.runs.forms import RunLaunchForm
from webapp.runs.kinds import all_kinds, get_kind

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings, tmp_path):
    """`make run`'s demo data once the default policy has trained (a tiny one stands in)."""
    settings.VAR_DIR = tmp_path
    path = tiny_policy_dir(tmp_path / "policies" / "default-bc")
    Policy.objects.create(name="default-bc", version="1", model_dir=str(path))
    call_command("load_demo", "--tasks", "3", "--samples", "2", stdout=io.StringIO())


def launch_every_form(client) -> tuple[list[str], dict[str, list[str]]]:
    """Each run form as GET renders it, posted untouched: the kinds that launched, and what the others said."""
    launched, told = [], {}
    for kind in [k.name for k in all_kinds()]:
        page = client.get(f"/runs/new/{kind}/")
        assert page.status_code == 200, kind
        before = Run.objects.count()
        response = client.post(f"/runs/new/{kind}/", as_a_browser_posts(page.context["form"]))
        if response.status_code == 302:
            assert Run.objects.count() == before + 1, kind
            launched.append(kind)
            continue
        assert response.status_code == 400, kind
        told[kind] = [message for _, _, message in response.context["form"].error_list()]
        assert told[kind], kind
        assert not any(re.search(r"with id 0\b", m) for m in told[kind]), (kind, told[kind])
    return launched, told


def test_every_run_form_launches_with_its_defaults_or_says_what_to_do_first(demo, client, admin_user):
    """One demo for every kind (the demo takes seconds to load): each form as Chromium posts it untouched."""
    client.force_login(admin_user)
    launched, told = launch_every_form(client)
    # On the demo data (no reward model, judge, loop or correction yet) these launch as they stand,
    # and the rest say what to make first.
    # The evaluation starts with best-of-n off while there is no reward model to choose with (issue 53).
    assert {"reward_model", "bc", "rollout", "dpo", "evaluation"} <= set(launched), (launched, told)
    assert all(re.search(r"\b(none|no \w+) yet\b", " ".join(m)) for k, m in told.items() if k != "sft"), told
    assert "no accepted correction" in told["sft"][0]


def test_the_reward_model_form_preselects_a_snapshot_that_can_train_one(demo, client, admin_user):
    from annotate.models import Campaign
    from annotate.services.datasets import SnapshotFilters, snapshot_create
    from rewardmodel.services import snapshot_problems

    # A newer snapshot too small to train a reward model (the demo's scripted campaign, no votes).
    small = snapshot_create(
        name="newer and too small",
        campaigns=[Campaign.objects.get(name="Demo: simulated labels")],
        filters=SnapshotFilters(include_synthetic=True),
        test_fraction=0.01,  # a test split of a pair or two
        created_by=admin_user,
    )
    assert snapshot_problems(small.pk)
    form = RunLaunchForm(get_kind("reward_model"))
    chosen = int(as_a_browser_posts(form)["snapshot_id"])
    assert chosen != small.pk and not snapshot_problems(chosen)
    labels = dict(form.fields["snapshot_id"].choices)
    assert "too few pairs" in labels[small.pk]


def test_a_run_trained_against_a_reward_model_starts_on_the_newest(demo):
    from annotate.models import DatasetSnapshot
    from rewardmodel.models import RewardModel

    snapshot = DatasetSnapshot.objects.get(name="Demo: simulated labels")
    older, newer = (
        RewardModel.objects.create(name=n, snapshot=snapshot, backbone="tiny", model_dir="/x") for n in "ab"
    )
    assert RewardModel.objects.order_by("-created_at").first() == newer
    for kind in ("ppo", "rloo", "grpo", "expert_iteration", "best_of_n", "evaluation"):
        form = RunLaunchForm(get_kind(kind))
        assert as_a_browser_posts(form)["reward_model_id"] == str(newer.pk), kind
    linked = RunLaunchForm(get_kind("ppo"), initial={"reward_model_id": str(older.pk)})
    assert as_a_browser_posts(linked)["reward_model_id"] == str(older.pk)  # a link's own value wins


def test_a_snapshot_too_small_for_a_reward_model_says_so_on_its_page(demo, client, admin_user):
    from annotate.models import Campaign
    from annotate.services.datasets import SnapshotFilters, snapshot_create

    demo_snapshot = Campaign.objects.get(name="Demo: simulated labels").snapshots.get()
    small = snapshot_create(
        name="too small",
        campaigns=[Campaign.objects.get(name="Demo: simulated labels")],
        filters=SnapshotFilters(include_synthetic=True),
        test_fraction=0.01,
        created_by=admin_user,
    )
    client.force_login(admin_user)
    warned = client.get(f"/annotate/datasets/{small.pk}/").content.decode()
    assert 'id="too-small-for-reward-model"' in warned and "needs at least 16 and 4" in warned
    assert (
        'id="too-small-for-reward-model"' not in client.get(f"/annotate/datasets/{demo_snapshot.pk}/").content.decode()
    )


def test_a_form_needing_a_policy_while_the_first_one_trains_names_the_run_to_wait_for(
    client, admin_user, settings, tmp_path
):
    settings.VAR_DIR = tmp_path
    training = Run.objects.create(kind="bc", name="Policy default-bc", status="running", progress=0.06)
    client.force_login(admin_user)
    page = client.get("/runs/new/sft/")
    response = client.post("/runs/new/sft/", as_a_browser_posts(page.context["form"]))
    told = " ".join(m for _, _, m in response.context["form"].error_list())
    assert f"still training in run #{training.pk} (running, 6%)" in told


@pytest.fixture
def own_policy_demo(settings, tmp_path):
    """The demo data where the admin registered a policy of their own and never trained the default one."""
    settings.VAR_DIR = tmp_path
    path = tiny_policy_dir(tmp_path / "policies" / "mine")
    Policy.objects.create(name="my-agent", version="1", model_dir=str(path))
    call_command("load_demo", "--tasks", "3", "--samples", "2", stdout=io.StringIO())


def test_every_run_form_launches_with_its_defaults_for_an_admin_with_a_policy_of_their_own(
    own_policy_demo, client, admin_user
):
    """The reward model shares the admin's policy's tokenizer (issue 53: it looked for the default
    policy only, and refused its defaults with "no policy to share a tokenizer with")."""
    client.force_login(admin_user)
    launched, told = launch_every_form(client)
    assert {"reward_model", "bc", "rollout", "dpo", "evaluation"} <= set(launched), (launched, told)
    run = Run.objects.filter(kind="reward_model").latest("created_at")
    assert run.config["tokenizer_dir"] == Policy.objects.get(name="my-agent").model_dir


def test_rl_forms_with_no_policy_yet_say_what_to_do_not_no_policy_with_id_0(client, admin_user, settings, tmp_path):
    """PPO, RLOO and GRPO have two policy pickers (the start and its KL reference, both 0 by default):
    with no policy yet they said "No policy with id 0." beside "no policy yet" (issue 53)."""
    from rewardmodel.models import RewardModel

    settings.VAR_DIR = tmp_path
    call_command("load_demo", "--tasks", "3", "--samples", "2", stdout=io.StringIO())
    from annotate.models import DatasetSnapshot

    RewardModel.objects.create(name="rm", snapshot=DatasetSnapshot.objects.first(), backbone="tiny", model_dir="/x")
    client.force_login(admin_user)
    for kind in ("ppo", "rloo", "grpo"):
        page = client.get(f"/runs/new/{kind}/")
        response = client.post(f"/runs/new/{kind}/", as_a_browser_posts(page.context["form"]))
        assert response.status_code == 400, kind
        told = [m for _, _, m in response.context["form"].error_list()]
        assert any("no policy yet" in m for m in told), (kind, told)
        assert not any(re.search(r"with id 0\b", m) for m in told), (kind, told)


def test_forms_start_on_a_policy_of_a_succeeded_run_never_a_cancelled_runs_checkpoint(demo, admin_user, tmp_path):
    """A cancelled PPO run's step-0 checkpoint, the newest policy, was the evaluation's preselected
    baseline (issue 53). Policies of runs that did not succeed come last, and say so."""
    default = Policy.objects.get(name="default-bc")
    cancelled = Run.objects.create(kind="ppo", name="PPO", status="cancelled", created_by=admin_user)
    succeeded = Run.objects.create(kind="ppo", name="PPO", status="succeeded", created_by=admin_user)
    step0 = Policy.objects.create(
        name="ppo-cancelled",
        version="iter-0000",
        model_dir=default.model_dir,
        run=cancelled,
        metadata={"ppo": {"iteration": 0, "best": True}},
    )
    for kind, field in (("evaluation", "baseline_policy_id"), ("ppo", "policy_id"), ("best_of_n", "policy_id")):
        form = RunLaunchForm(get_kind(kind))
        assert as_a_browser_posts(form)[field] == str(default.pk), kind
        labels = dict(form.fields[field].choices)
        assert labels[step0.pk].endswith(f"(run #{cancelled.pk} cancelled)"), labels
    # A succeeded RL run's best checkpoint is a policy to start from; its other checkpoints come after it.
    last = Policy.objects.create(
        name="ppo-ok",
        version="iter-0002",
        model_dir=default.model_dir,
        run=succeeded,
        metadata={"ppo": {"iteration": 2, "best": False}},
    )
    best = Policy.objects.create(
        name="ppo-ok",
        version="iter-0001",
        model_dir=default.model_dir,
        run=succeeded,
        metadata={"ppo": {"iteration": 1, "best": True}},
    )
    order = [pk for pk, _ in RunLaunchForm(get_kind("evaluation")).fields["baseline_policy_id"].choices]
    assert order.index(best.pk) < order.index(default.pk) < order.index(last.pk) < order.index(step0.pk)
