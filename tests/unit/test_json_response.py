"""The JSON-RPC route's answers: orjson's bytes, and the stdlib's for what orjson refuses."""

from __future__ import annotations

import json

from entryway.service.strict_json import json_response


def test_an_answer_is_compact_json_with_its_status_and_headers() -> None:
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"status": "pending", "note": "é"}}
    response = json_response(answer, status_code=503, headers={"Retry-After": "2"})
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "2"
    assert response.media_type == "application/json"
    assert json.loads(response.body) == answer
    assert b" " not in response.body  # no padding, as the stdlib encoder was told too


def test_what_orjson_refuses_is_still_answered() -> None:
    answer = {"jsonrpc": "2.0", "id": 2**70, "result": None}  # past 64 bits
    response = json_response(answer)
    assert response.status_code == 200
    assert json.loads(response.body) == answer
