"""A correction made in the browser ends up in training (issue 33): an annotator fixes a side on
the labeling screen, an admin accepts it on the Corrections page, freezes it in a snapshot,
launches an SFT and a DPO run from the run forms (on a real worker), and evaluates both beside
an RL run's policy on the same held-out tasks: the head-to-head table answers which wins, and a
blind human evaluation puts DPO against the RL policy."""

from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from annotate.models import Correction, DatasetSnapshot, Policy
from tests.browser.conftest import login, screenshot
from tests.factories import CampaignFactory, UserFactory
from tests.helpers import WORKER_JOB_MS
from tests.policy_fixtures import tiny_policy_dir
from training.models import Evaluation, HumanEvaluation
from training.simulation import scripted_trajectories_generate
from webapp.models import Run
from webapp.runs.services import run_launch

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TINY_RL = {
    "iterations": 1,
    "episodes_per_iteration": 8,
    "minibatch_size": 4,
    "rollout_batch_size": 8,
    "eval_every": 1,
    "eval_samples": 1,
    "dev_tasks": 4,
}


def _launch_from_the_form(page, live_server, kind: str, start: Policy, snapshot: DatasetSnapshot) -> Run:
    page.goto(f"{live_server.url}/runs/new/{kind}/")
    page.select_option("select[name=policy_id]", str(start.pk))
    page.select_option("select[name=snapshot_id]", str(snapshot.pk))
    page.fill("input[name=max_steps]", "2")
    page.fill("input[name=batch_size]", "2")
    page.fill("input[name=threads]", "1")
    page.get_by_role("button", name="Launch").click()
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=WORKER_JOB_MS)
    run = Run.objects.filter(kind=kind).get()
    expect(page.locator("#lineage")).to_contain_text(
        f"output policy: {Policy.objects.get(pk=run.summary['policy_id'])}"
    )
    return run


def test_a_correction_from_the_browser_trains_sft_and_dpo_evaluated_beside_rl(page, live_server, celery_worker_process):
    campaign = CampaignFactory(votes_per_comparison=1)
    scripted_trajectories_generate(campaign=campaign, n_tasks=2, samples_per_agent=2, seed=3)
    start = Policy.objects.create(
        name="tiny-start",
        model_dir=str(tiny_policy_dir(Path(settings.VAR_DIR) / "policies" / "tiny-browser-start")),
    )
    boss = UserFactory(username="boss", roles=["admin"])
    UserFactory(username="ann", roles=["annotator"])

    # The annotator fixes the answer of the side in front of them.
    login(page, live_server, "ann")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.pk}/label/")
    page.keyboard.press("x")
    page.locator("#correction-form textarea[name=answer]").fill("Ilse Marrow")
    page.locator("#correction-form textarea[name=answer]").press("Control+Enter")
    # The worker plays it in the encyclopedia (the web process only queues it); the screen says when.
    expect(page.locator("#correction-stored")).to_contain_text("played in the environment", timeout=WORKER_JOB_MS)
    fix = Correction.objects.get()
    rl = run_launch(  # RL against the rubric, on the worker while people work
        kind="ppo", user=boss, config={"policy_id": start.pk, "reward": "rubric", **TINY_RL}
    )

    # The admin accepts it and freezes it in a snapshot (every task in training: one correction).
    page.context.clear_cookies()
    admin = page
    login(admin, live_server, "boss")
    admin.goto(f"{live_server.url}/annotate/corrections/{fix.pk}/")
    admin.get_by_role("button", name="Accept").click()
    expect(admin.locator("body")).to_contain_text("accepted")
    admin.goto(f"{live_server.url}/annotate/datasets/")
    admin.fill("input[name=name]", "with the fix")
    admin.get_by_label("Filter Campaigns").fill(campaign.name)
    admin.locator("#field-campaigns label.check", has_text=campaign.name).click()
    admin.fill("input[name=test_fraction]", "0")
    admin.click("button:has-text('Create snapshot')")
    admin.wait_for_selector("#content-hash")
    snapshot = DatasetSnapshot.objects.get(name="with the fix")
    assert snapshot.stats["corrections"] == 1

    # SFT and DPO from the run forms, on the worker.
    sft = _launch_from_the_form(admin, live_server, "sft", start, snapshot)
    dpo = _launch_from_the_form(admin, live_server, "dpo", start, snapshot)
    assert sft.summary["train_rows"] == dpo.summary["train_rows"] == 1

    # Both beside the RL run's policy on the same held-out tasks.
    admin.goto(f"{live_server.url}/runs/new/evaluation/")
    admin.select_option("select[name=baseline_policy_id]", str(start.pk))
    admin.get_by_label("Filter Policies").fill("")
    for run in (sft, dpo):
        label = str(Policy.objects.get(pk=run.summary["policy_id"]))
        admin.locator("#field-policy_ids label.check", has_text=label).click()
    expect(admin.locator("select[name=rl_run_id] option[value='%d']" % rl.pk)).to_have_count(1, timeout=WORKER_JOB_MS)
    admin.select_option("select[name=rl_run_id]", str(rl.pk))
    admin.fill("input[name=tasks]", "2")
    admin.fill("input[name=samples]", "1")
    admin.fill("input[name=best_of_n]", "")
    admin.get_by_role("button", name="Launch").click()
    expect(admin.locator("#run-status")).to_have_text("succeeded", timeout=WORKER_JOB_MS)
    evaluation = Evaluation.objects.get()
    admin.goto(f"{live_server.url}/training/evaluations/{evaluation.pk}/")
    table = admin.locator("#head-to-head-table")
    expect(table).to_contain_text("SFT")
    expect(table).to_contain_text("DPO")
    expect(table).to_contain_text("PPO")
    screenshot(admin, "corrections-into-training")

    # People, blind: DPO against the RL policy.
    entries = {e.policy_id: e for e in evaluation.entries.all()}
    dpo_entry = entries[dpo.summary["policy_id"]]
    rl_entry = next(e for e in entries.values() if e.policy.run_id == rl.pk)
    admin.select_option("#human-evaluation-form select[name=candidate]", str(dpo_entry.pk))
    admin.select_option("#human-evaluation-form select[name=against]", str(rl_entry.pk))
    admin.click("button:has-text('Build a blind campaign')")
    built = HumanEvaluation.objects.filter(candidate=dpo_entry, baseline=rl_entry)
    expect(admin.locator("#human-evaluations, .error")).to_be_visible()
    assert built.exists() or "did exactly what" in admin.content()  # a tiny policy may play as the other
    assert not page.js_errors
