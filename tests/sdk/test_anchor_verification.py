"""On-chain checks of a proof against a fake node: what each answer of the node makes of the
proof (the real chain is in test_notary_service)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from entryway_sdk import NetworkConnectionError, Proof, ProofFailure, RetryPolicy
from entryway_sdk import verify_proof_on_chain as verify
from eth_abi.abi import encode

from entryway import contracts
from tests.sdk.test_proofs import ANCHOR, service_proofs

NODE = "http://node.test/rpc"
DOCUMENTS = [b"one", b"two", b"three"]
PROOF = Proof.from_dict(service_proofs(DOCUMENTS)[2])
NOTARY = contracts.load("NotaryAnchor").abi
ANCHORED = "0x" + NOTARY.event_topic("Anchored").hex()
SUBMITTER = "0x" + "00" * 12 + "11" * 20


def anchored_log(**change: Any) -> dict[str, Any]:
    data = encode(["uint256", "uint256"], [change.pop("leafCount", 3), ANCHOR.block_time])
    log = {
        "address": ANCHOR.contract.lower(),
        "topics": [ANCHORED, PROOF.root, SUBMITTER],
        "data": "0x" + data.hex(),
    }
    return log | change


class Node:
    """Answers the calls a verification makes; `answers` overrides them by method."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.anchor = (ANCHOR.block_time, ANCHOR.block_number, 3)
        self.receipt: dict[str, Any] | None = {
            "status": "0x1",
            "blockNumber": hex(ANCHOR.block_number),
            "logs": [anchored_log()],
        }
        self.answers: dict[str, Callable[[list[Any]], httpx.Response]] = {}

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        method, params = body["method"], body["params"]
        self.calls.append(method)
        if method in self.answers:
            return self.answers[method](params)
        result: Any = {
            "eth_chainId": hex(80002),
            "eth_getCode": "0x6080",
            "eth_getTransactionReceipt": self.receipt,
        }.get(method)
        if method == "eth_call":
            assert params[0]["to"] == ANCHOR.contract
            assert params[0]["data"] == "0x" + NOTARY.encode_call("anchorOf", ANCHOR_ROOT).hex()
            result = "0x" + encode(["(uint64,uint64,uint32)"], [self.anchor]).hex()
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result})


ANCHOR_ROOT = bytes.fromhex(PROOF.root[2:])


async def check(node: Node, **kw: Any) -> Any:
    async with httpx.AsyncClient(transport=httpx.MockTransport(node.handle)) as http:
        return await verify(PROOF, NODE, http=http, retry=RetryPolicy(backoff=0.0), **kw)


async def test_a_consistent_anchor_is_valid() -> None:
    node = Node()
    result = await check(node, document=b"three")
    assert result.valid and result.on_chain and result.failure is None
    assert node.calls == ["eth_chainId", "eth_getCode", "eth_call", "eth_getTransactionReceipt"]
    assert len(result.checks) == 6


@pytest.mark.parametrize(
    ("setup", "failure", "reason"),
    [
        (
            lambda n: n.answers.update(eth_chainId=lambda _: rpc(hex(84532))),
            ProofFailure.OTHER_CHAIN,
            "root is for chain 80002, RPC is chain 84532",
        ),
        (
            lambda n: setattr(n, "anchor", (ANCHOR.block_time - 1, ANCHOR.block_number, 3)),
            ProofFailure.ANCHOR_MISMATCH,
            f"root was anchored at block time {ANCHOR.block_time - 1}, the proof says",
        ),
        (
            lambda n: setattr(n, "anchor", (0, 0, 0)),
            ProofFailure.NOT_ANCHORED,
            "root not anchored on chain 80002",
        ),
        (
            lambda n: setattr(n, "anchor", (ANCHOR.block_time, ANCHOR.block_number, 4)),
            ProofFailure.ANCHOR_MISMATCH,
            "root was anchored with leaf count 4, the proof says 3",
        ),
        (
            lambda n: setattr(n, "anchor", (ANCHOR.block_time, 99, 3)),
            ProofFailure.ANCHOR_MISMATCH,
            "root was anchored in block 99, the proof says 1234",
        ),
        (
            lambda n: n.answers.update(eth_getCode=lambda _: rpc("0x")),
            ProofFailure.NO_CONTRACT,
            f"no contract at {ANCHOR.contract} on chain 80002",
        ),
        (
            lambda n: n.answers.update(eth_call=lambda _: rpc_error(3, "execution reverted")),
            ProofFailure.NO_CONTRACT,
            "is not a NotaryAnchor",
        ),
        (
            lambda n: n.answers.update(eth_call=lambda _: rpc("0x")),
            ProofFailure.NO_CONTRACT,
            "is not a NotaryAnchor",
        ),
        (
            lambda n: setattr(n, "receipt", None),
            ProofFailure.TRANSACTION_MISMATCH,
            "not found on chain 80002",
        ),
        (
            lambda n: n.receipt.update(blockNumber=hex(1235)),
            ProofFailure.TRANSACTION_MISMATCH,
            "is in block 1235, the proof says 1234",
        ),
        (
            lambda n: n.receipt.update(status="0x0"),
            ProofFailure.TRANSACTION_MISMATCH,
            "reverted",
        ),
        (
            lambda n: n.receipt.update(logs=[anchored_log(address="0x" + "22" * 20)]),
            ProofFailure.TRANSACTION_MISMATCH,
            "emitted no Anchored event for the root",
        ),
        (
            lambda n: n.receipt.update(logs=[anchored_log(topics=[ANCHORED, "0x" + "33" * 32])]),
            ProofFailure.TRANSACTION_MISMATCH,
            "emitted no Anchored event for the root",
        ),
        (
            lambda n: n.receipt.update(logs=[anchored_log(leafCount=5)]),
            ProofFailure.TRANSACTION_MISMATCH,
            "with 5 leaves, the proof says",
        ),
    ],
)
async def test_what_the_chain_says_decides(setup: Any, failure: ProofFailure, reason: str) -> None:
    node = Node()
    setup(node)
    result = await check(node)
    assert not result.valid and result.failure is failure and result.on_chain
    assert reason in result.reason, result.reason


def rpc(result: Any) -> httpx.Response:
    return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": result})


def rpc_error(code: int, message: str) -> httpx.Response:
    return httpx.Response(
        200, json={"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": message}}
    )


async def test_the_receipt_can_be_skipped() -> None:
    node = Node()
    node.receipt = None
    assert (await check(node, check_transaction=False)).valid
    assert "eth_getTransactionReceipt" not in node.calls


async def test_offline_failures_ask_the_node_nothing() -> None:
    node = Node()
    result = await check(node, document=b"four")
    assert result.failure is ProofFailure.DOCUMENT_MISMATCH and not result.on_chain
    assert node.calls == []


async def test_a_node_that_does_not_answer_raises() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(down)) as http:
        with pytest.raises(NetworkConnectionError, match="did not answer"):
            await verify(PROOF, NODE, http=http, retry=RetryPolicy(attempts=1))
