"""The OpenAPI schema builds without a warning, validates, and documents each operation truthfully."""

from __future__ import annotations

from collections import defaultdict

import pytest
import yaml
from django.core.management import call_command
from openapi_spec_validator import validate

from tests.conftest import token_client


@pytest.fixture(scope="module")
def schema(tmp_path_factory):
    path = tmp_path_factory.mktemp("schema") / "schema.yaml"
    # --fail-on-warn: any drf-spectacular warning (a name collision, an unknown type) fails here.
    call_command("spectacular", "--fail-on-warn", "--file", str(path))
    return yaml.safe_load(path.read_text())


def _operations(schema):
    for path, item in schema["paths"].items():
        for method, op in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                yield path, method, op


def test_the_schema_is_valid_openapi(schema):
    validate(schema)


def test_no_request_component_is_shared_by_two_operations(schema):
    users = defaultdict(set)
    for path, method, op in _operations(schema):
        for media in op.get("requestBody", {}).get("content", {}).values():
            ref = media.get("schema", {}).get("$ref")
            if ref:
                users[ref].add(f"{method.upper()} {path}")
    shared = {ref: ops for ref, ops in users.items() if len(ops) > 1}
    assert not shared, shared
    names = {ref.rsplit("/", 1)[1] for ref in users}
    assert {
        "JudgementSubmitInput",
        "AssignmentSkipInput",
        "DatasetListCreateInput",
        "RunListCreateInput",
        "ImportUploadInput",
    } <= names


def test_the_request_bodies_document_the_real_fields(schema):
    components = schema["components"]["schemas"]
    assert set(components["DatasetListCreateInput"]["properties"]) >= {"name", "campaigns", "seed", "test_fraction"}
    assert set(components["RunListCreateInput"]["properties"]) >= {"kind", "config", "idempotency_key"}
    assert set(components["AssignmentSkipInput"]["properties"]) == {"reason"}
    seed = components["DatasetListCreateInput"]["properties"]["seed"]
    assert seed["maximum"] == 2**31 - 1 and seed["minimum"] == 0


def test_every_integer_input_has_a_range(schema):
    """Integers in request bodies and parameters have both bounds, so 2**63 is refused at the edge."""
    unbounded = []

    def walk(node, where):
        if isinstance(node, dict):
            if node.get("type") == "integer" and not ("maximum" in node and "minimum" in node):
                unbounded.append(where)
            for key, value in node.items():
                walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    requests = {
        ref.rsplit("/", 1)[1]
        for _, _, op in _operations(schema)
        for media in op.get("requestBody", {}).get("content", {}).values()
        if (ref := media.get("schema", {}).get("$ref"))
    }
    for name in requests:
        walk(schema["components"]["schemas"][name], name)
    for path, method, op in _operations(schema):
        for param in op.get("parameters", []):
            if param["in"] == "query":
                walk(param.get("schema", {}), f"{method} {path} ?{param['name']}")
    assert not unbounded, unbounded


def test_every_operation_documents_its_errors_with_one_shape(schema):
    error = schema["components"]["schemas"]["Error"]
    assert error["required"] == ["detail"]
    for path, method, op in _operations(schema):
        for code in ("400", "401", "403", "404"):
            ref = op["responses"][code]["content"]["application/json"]["schema"]["$ref"]
            assert ref == "#/components/schemas/Error", (method, path, code)
        assert any(code.startswith("2") for code in op["responses"]), (method, path)


def test_the_agreement_route_has_a_response_schema_that_matches_it(schema, researcher):
    from tests.helpers import make_campaign

    op = schema["paths"]["/api/v1/campaigns/{campaign_id}/agreement"]["get"]
    ref = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    documented = set(schema["components"]["schemas"][ref]["properties"])
    campaign = make_campaign(n_comparisons=1)
    body = token_client(researcher).get(f"/api/v1/campaigns/{campaign.id}/agreement").json()
    assert set(body) == documented
