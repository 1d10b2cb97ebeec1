"""factory_boy factories for the domain rows."""

import factory
from django.contrib.auth import get_user_model

from annotate import models
from annotate.trajectory_formats import behaviour_hash, content_hash
from webapp.roles import Role, user_role_set


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "pw-for-tests-1")

    @factory.post_generation
    def roles(self, create, extracted, **kwargs):
        self.save()
        if extracted:
            user_role_set(user=self, roles=[Role(r) for r in extracted])


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Task

    external_id = factory.Sequence(lambda n: f"task-{n}")
    prompt = factory.Sequence(lambda n: f"Question {n}?")


class PolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Policy

    name = factory.Sequence(lambda n: f"policy-{n}")


def _steps(n):
    return [
        {"kind": "action", "tool": "search", "arguments": {"query": f"q{n}"}},
        {"kind": "observation", "tool": "search", "content": f"result {n}"},
        {"kind": "answer", "text": f"answer {n}"},
    ]


class TrajectoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Trajectory

    task = factory.SubFactory(TaskFactory)
    policy = factory.SubFactory(PolicyFactory)
    steps = factory.Sequence(_steps)
    answer = factory.LazyAttribute(lambda o: o.steps[-1].get("text", ""))
    num_steps = factory.LazyAttribute(lambda o: len(o.steps))
    content_hash = factory.LazyAttribute(
        lambda o: content_hash(
            task={"external_id": o.task.external_id, "prompt": o.task.prompt},
            agent={"name": o.policy.name, "version": o.policy.version},
            steps=o.steps,
            answer=o.answer,
        )
    )
    behaviour_hash = factory.LazyAttribute(lambda o: behaviour_hash(steps=o.steps, answer=o.answer))


class CampaignFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Campaign

    name = factory.Sequence(lambda n: f"campaign-{n}")
