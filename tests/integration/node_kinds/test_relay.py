"""The relay itself: each kind refuses what its real counterpart refuses, in the words
those nodes use, and forwards the rest to a real anvil. Spoken to in raw JSON-RPC, so a
retry or a fallback of the node client cannot hide a refusal the relay failed to make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import orjson

from entryway.devnet.anvil import AnvilProcess
from tests.node_kinds.fixtures import RelayFactory
from tests.node_kinds.relay import NodeRelay

ADDRESS = "0x" + "42" * 20
CALL = {"to": ADDRESS, "data": "0x"}
JSON = {"content-type": "application/json"}


async def post(url: str, payload: Any) -> tuple[int, dict[str, str], Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=orjson.dumps(payload), headers=JSON) as response,
    ):
        return response.status, dict(response.headers), orjson.loads(await response.read())


def call(method: str, *params: Any, id_: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": list(params)}


async def answer(relay: NodeRelay, method: str, *params: Any) -> dict[str, Any]:
    status, _, body = await post(relay.url, call(method, *params))
    assert status == 200
    return dict(body)


async def test_anvil_kind_forwards_everything_and_counts_it(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "anvil")
    head = int((await answer(relay, "eth_blockNumber"))["result"], 16)
    assert "result" in await answer(relay, "anvil_mine", "0x2")
    assert int((await answer(relay, "eth_blockNumber"))["result"], 16) == head + 2
    assert relay.calls == {"eth_blockNumber": 2, "anvil_mine": 1}
    assert relay.forwarded == relay.calls
    assert not relay.refused


async def test_hosted_kind_refuses_dev_methods_and_untraced_calls(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted")
    for method in ("anvil_mine", "evm_snapshot", "hardhat_mine", "debug_getRawBlock"):
        refused = await answer(relay, method)
        assert refused["error"]["code"] == -32601, method
    untraced = await answer(relay, "debug_traceCall", CALL, "latest", {})
    assert untraced["error"]["code"] == -32602
    assert "tracer is required" in untraced["error"]["message"]
    struct_logs = await answer(relay, "debug_traceCall", CALL, "latest", {"disableStack": True})
    assert "tracer is required" in struct_logs["error"]["message"]
    script = await answer(relay, "debug_traceCall", CALL, "latest", {"tracer": "{result: 1}"})
    assert "JavaScript tracer is not supported" in script["error"]["message"]
    native = await answer(relay, "debug_traceCall", CALL, "latest", {"tracer": "erc7562Tracer"})
    assert 'tracer "erc7562Tracer" is not supported' in native["error"]["message"]
    for tracer in ("callTracer", "prestateTracer"):
        traced = await answer(relay, "debug_traceCall", CALL, "latest", {"tracer": tracer})
        assert "result" in traced, tracer
    # Allowed, so passed on: anvil itself has no 4byteTracer, and says so.
    await answer(relay, "debug_traceCall", CALL, "latest", {"tracer": "4byteTracer"})
    assert relay.forwarded == {"debug_traceCall": 3}


async def test_public_kind_has_no_debug_namespace(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "public")
    traced = await answer(relay, "debug_traceCall", CALL, "latest", {"tracer": "callTracer"})
    assert traced["error"]["code"] == -32601
    assert "result" in await answer(relay, "eth_call", CALL, "latest")


async def test_capped_log_range_and_results(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_log_range=10)
    await post(standalone_anvil.rpc_url, call("anvil_mine", "0x14"))
    within = await answer(relay, "eth_getLogs", {"fromBlock": "0x1", "toBlock": "0xa"})
    assert within["result"] == []
    over = await answer(relay, "eth_getLogs", {"fromBlock": "0x1", "toBlock": "0xb"})
    assert over["error"]["message"].startswith("block range too large")
    from_tag = await answer(relay, "eth_getLogs", {"fromBlock": "earliest"})
    assert "block range too large" in from_tag["error"]["message"]
    relay.limits.max_log_range = 1_000_000
    assert "result" in await answer(relay, "eth_getLogs", {"fromBlock": "earliest"})
    relay.limits.max_log_results = -1  # even no log is one too many
    too_many = await answer(relay, "eth_getLogs", {"fromBlock": "0x1", "toBlock": "0x2"})
    assert too_many["error"]["message"] == "query returned more than -1 results"
    assert relay.refused == {"eth_getLogs": 3}


async def test_capped_batches(standalone_anvil: AnvilProcess, node_relays: RelayFactory) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_batch=3)
    three = [call("eth_chainId", id_=i) for i in range(3)]
    _, _, answers = await post(relay.url, three)
    assert [a["id"] for a in answers] == [0, 1, 2]
    assert all(a["result"] == hex(31337) for a in answers)
    _, _, refused = await post(relay.url, [*three, call("eth_chainId", id_=3)])
    assert isinstance(refused, dict)
    assert "batch size too large" in refused["error"]["message"]
    relay.limits.batch_refusal = "each"
    _, _, each = await post(relay.url, [*three, call("eth_chainId", id_=3)])
    assert [a["error"]["code"] for a in each] == [-32600] * 4
    relay.limits.max_batch = 0
    _, _, none = await post(relay.url, three[:1])
    assert "not supported" in none[0]["error"]["message"]
    assert relay.batch_sizes == [3, 4, 4, 1]


async def test_a_batch_is_checked_call_by_call(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted")
    _, _, answers = await post(
        relay.url,
        [call("eth_chainId", id_=7), call("anvil_mine", id_=8), call("net_version", id_=9)],
    )
    assert answers[0]["result"] == hex(31337)
    assert answers[1]["error"]["code"] == -32601
    assert answers[2]["result"] == "31337"
    assert relay.forwarded == {"eth_chainId": 1, "net_version": 1}


async def test_burst_limit_answers_429_with_retry_after(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted")
    relay.throttle(burst=2, per_s=0.01, retry_after_s=3)
    statuses = [(await post(relay.url, call("eth_chainId")))[0] for _ in range(3)]
    assert statuses == [200, 200, 429]
    status, headers, body = await post(relay.url, call("eth_blockNumber"))
    assert status == 429
    assert headers["Retry-After"] == "3"
    assert body["error"]["code"] == 429
    assert relay.throttled == {"eth_chainId": 1, "eth_blockNumber": 1}
    relay.throttle(burst=100, per_s=100)
    relay.limits.throttle_next = 1
    assert (await post(relay.url, call("eth_chainId")))[0] == 429
    assert (await post(relay.url, call("eth_chainId")))[0] == 200


async def test_missing_methods_tags_and_overrides(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(
        standalone_anvil.rpc_url,
        "public",
        missing_methods={"eth_feeHistory"},
        missing_block_tags={"safe", "finalized"},
        state_overrides=False,
    )
    assert (await answer(relay, "eth_feeHistory", "0x1", "latest", []))["error"]["code"] == -32601
    for tag in ("safe", "finalized"):
        refused = await answer(relay, "eth_getBlockByNumber", tag, False)
        assert f'"{tag}"' in refused["error"]["message"]
    overridden = await answer(relay, "eth_call", CALL, "latest", {ADDRESS: {"code": "0x00"}})
    assert overridden["error"]["code"] == -32602
    assert "result" in await answer(relay, "eth_getBlockByNumber", "latest", False)


async def test_geth_kind_plays_the_native_tracer_with_a_script(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, tmp_path: Path
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "geth")
    relay.erc7562_tracer = tmp_path / "absent.js"
    options = {"tracer": "erc7562Tracer", "tracerConfig": {"marker": 7}}
    missing = await answer(relay, "debug_traceCall", CALL, "latest", options)
    assert "erc7562Tracer is not available" in missing["error"]["message"]
    script = tmp_path / "tracer.js"
    script.write_text(
        "{seen: 0, setup: function(config) { this.marker = config.marker; },"
        " step: function(log, db) { this.seen++; }, fault: function(log, db) {},"
        " result: function(ctx, db) { return {marker: this.marker, kind: 'script'}; }}"
    )
    relay.erc7562_tracer = script
    traced = await answer(relay, "debug_traceCall", CALL, "latest", options)
    assert traced["result"] == {"marker": 7, "kind": "script"}
    assert "result" in await answer(relay, "anvil_mine", "0x1")


async def test_writes_are_recorded(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted")
    sent = await answer(relay, "eth_sendRawTransaction", "0x02abcd")
    assert "error" in sent  # not a transaction; the node said so, and it was sent once
    assert relay.writes == ["0x02abcd"]
    assert relay.forwarded == {"eth_sendRawTransaction": 1}
