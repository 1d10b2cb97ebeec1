"""An admin uploads an OpenTelemetry GenAI trace export on the Import page into a campaign, and
the comparison it builds shows each agent's system prompt and tools, folded, on the labeling
screen."""

import json

import pytest

from annotate.models import Comparison, Trajectory
from tests.browser.conftest import login, screenshot
from tests.factories import CampaignFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROMPT = "Weather in Paris, and do I need an umbrella?"
SYSTEM = "You are a weather bot. Answer in one sentence."
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]


def _attr(key: str, value) -> dict:
    text = value if isinstance(value, str) else json.dumps(value)
    return {"key": key, "value": {"stringValue": text}}


def _text(role: str, text: str) -> dict:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _agent_run(trace: str, version: str, weather: str, answer: str, t0: int) -> list[dict]:
    """The spans of one `invoke_agent` run: a model call asking for the weather, the tool, the answer."""
    call = {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "id": f"call-{version}", "name": "get_weather", "arguments": {"city": "Paris"}}
        ],
    }
    result = {"role": "tool", "parts": [{"type": "tool_call_response", "id": f"call-{version}", "response": weather}]}

    def span(n, name, parent, attributes):
        return {
            "traceId": trace,
            "spanId": f"{n:016x}",
            "parentSpanId": parent,
            "name": name,
            "startTimeUnixNano": str(t0 + n * 1_000_000),
            "endTimeUnixNano": str(t0 + n * 1_000_000 + 500),
            "attributes": attributes,
        }

    root = f"{1:016x}"
    return [
        span(
            1,
            "invoke_agent weather-bot",
            "",
            [
                _attr("gen_ai.operation.name", "invoke_agent"),
                _attr("gen_ai.agent.name", "weather-bot"),
                _attr("gen_ai.agent.version", version),
            ],
        ),
        span(
            2,
            "chat gpt-4o",
            root,
            [
                _attr("gen_ai.operation.name", "chat"),
                _attr("gen_ai.request.model", "gpt-4o"),
                _attr("gen_ai.system_instructions", [{"type": "text", "content": SYSTEM}]),
                _attr("gen_ai.tool.definitions", TOOLS),
                _attr("gen_ai.input.messages", [_text("user", PROMPT)]),
                _attr("gen_ai.output.messages", [call]),
            ],
        ),
        span(
            3,
            "execute_tool get_weather",
            root,
            [
                _attr("gen_ai.operation.name", "execute_tool"),
                _attr("gen_ai.tool.name", "get_weather"),
                _attr("gen_ai.tool.call.id", f"call-{version}"),
                _attr("gen_ai.tool.call.result", weather),
            ],
        ),
        span(
            4,
            "chat gpt-4o",
            root,
            [
                _attr("gen_ai.operation.name", "chat"),
                _attr("gen_ai.request.model", "gpt-4o"),
                _attr("gen_ai.system_instructions", [{"type": "text", "content": SYSTEM}]),
                _attr("gen_ai.input.messages", [_text("user", PROMPT), call, result]),
                _attr("gen_ai.output.messages", [_text("assistant", answer)]),
            ],
        ),
    ]


def _export(path):
    """Two versions of the agent on the same question, their spans in one OTLP line each,
    children written before their parents as an exporter does."""
    lines = []
    for trace, version, weather, answer, t0 in [
        ("4bf92f3577b34da6a3ce929d0e0e4736", "1", "rain, 14°C", "Rainy and 14°C: take an umbrella.", 10**18),
        ("0af7651916cd43dd8448eb211c80319c", "2", "rain, 14°C", "It is sunny.", 10**18 + 10**9),
    ]:
        spans = _agent_run(trace, version, weather, answer, t0)
        lines.append(
            {
                "resourceSpans": [
                    {
                        "resource": {"attributes": [_attr("service.name", "weather-svc")]},
                        "scopeSpans": [{"scope": {"name": "agent"}, "spans": spans[::-1]}],
                    }
                ]
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_an_otel_export_uploaded_into_a_campaign_is_labelled_with_the_agents_setup_shown(page, live_server, tmp_path):
    UserFactory(username="adm", roles=["admin", "annotator"])
    CampaignFactory(name="Weather bots", votes_per_comparison=1)
    login(page, live_server, "adm")

    page.click("nav >> text=Import")
    page.set_input_files("input[name=file]", str(_export(tmp_path / "spans.otlp.jsonl")))
    page.select_option("select[name=format]", "otel")
    page.select_option("select[name=campaign]", label="Weather bots")
    page.click("button:has-text('Import')")
    page.wait_for_selector("text=Imported 2 trajectories")
    assert page.locator("text=1 comparisons built").count() == 1
    screenshot(page, "import-otel-succeeded")
    assert Trajectory.objects.filter(metadata__source_format="otel").count() == 2
    comparison = Comparison.objects.get()
    assert comparison.trajectory_a.metadata["tools"] == TOOLS

    page.goto(f"{live_server.url}/annotate/campaigns/{comparison.campaign_id}/label/")
    setup = page.locator("details.agent-setup")
    assert setup.count() == 1  # both versions were given the same prompt and tools: shown once
    summary = setup.locator("summary").first
    assert "system prompt and 1 tool" in summary.inner_text() and "get_weather" in summary.inner_text()
    assert not page.get_by_text(SYSTEM).is_visible()  # folded
    summary.click()
    assert page.get_by_text(SYSTEM).is_visible()
    assert page.get_by_text("Current weather for a city.").is_visible()
    assert page.locator(".prompt", has_text=PROMPT).is_visible()
    screenshot(page, "label-agent-setup-open")
    assert not page.js_errors
