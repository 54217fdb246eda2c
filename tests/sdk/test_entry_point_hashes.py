"""The SDK's userOpHash of every release equals the EntryPoint's own `getUserOpHash`: each
release's npm EntryPoint deployed on anvil, asked for the hash of ops with and without a
factory and a paymaster (and, on v0.9, a paymaster signature the hash leaves out)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from entryway_sdk import UserOperation, user_op_hash
from entryway_sdk.userop import PAYMASTER_SIG_MAGIC, EntryPointVersion
from eth_abi.abi import encode

from entryway import contracts
from entryway.devnet.anvil import AnvilConfig, AnvilProcess
from entryway.domain.evm import keccak

pytestmark = pytest.mark.anvil

CHAIN = 84532
NPM = Path(__file__).resolve().parents[2] / "node_modules" / "@account-abstraction"
UNPACKED = "(address,uint256,bytes,bytes,uint256,uint256,uint256,uint256,uint256,bytes,bytes)"
PACKED = "(address,uint256,bytes,bytes,bytes32,uint256,bytes32,bytes,bytes)"


def creation_code(version: EntryPointVersion) -> bytes:
    if version in ("0.6", "0.9"):
        path = NPM / f"contracts-v0{version[-1]}" / "artifacts" / "EntryPoint.json"
        return bytes.fromhex(json.loads(path.read_text())["bytecode"].removeprefix("0x"))
    return contracts.load("EntryPointV07" if version == "0.7" else "EntryPoint").bytecode


class Node:
    def __init__(self, url: str) -> None:
        self.url = url

    async def __call__(self, method: str, *params: Any) -> Any:
        async with httpx.AsyncClient() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
            answer = (await http.post(self.url, json=body)).json()
        assert "error" not in answer, answer
        return answer["result"]

    async def deploy(self, code: bytes) -> str:
        (sender,) = (await self("eth_accounts"))[:1]
        tx = {"from": sender, "data": "0x" + code.hex(), "gas": hex(29_000_000)}
        tx_hash = await self("eth_sendTransaction", tx)
        for _ in range(200):  # anvil answers before its miner has sealed the block
            if (receipt := await self("eth_getTransactionReceipt", tx_hash)) is not None:
                break
            await asyncio.sleep(0.05)
        assert receipt is not None and receipt["status"] == "0x1", receipt
        return str(receipt["contractAddress"])


@pytest.fixture(scope="module")
async def node() -> AsyncIterator[Node]:
    anvil = AnvilProcess(AnvilConfig(chain_id=CHAIN))
    await anvil.start()
    try:
        yield Node(anvil.rpc_url)
    finally:
        await anvil.stop()


def ops() -> list[UserOperation]:
    plain = UserOperation(
        sender="0x" + "12" * 20,
        nonce=(7 << 64) | 3,
        call_data=b"\xb6\x1d\x27\xf6" + bytes(range(60)),
        call_gas_limit=123_456,
        verification_gas_limit=234_567,
        pre_verification_gas=45_678,
        max_fee_per_gas=30 * 10**9,
        max_priority_fee_per_gas=2 * 10**9,
        signature=b"\x01" * 65,
    )
    deployed_and_sponsored = plain.with_(
        factory="0x" + "34" * 20,
        factory_data=b"\x5f\xbf\xb9\xcf" + bytes(64),
        paymaster="0x" + "56" * 20,
        paymaster_verification_gas_limit=60_000,
        paymaster_post_op_gas_limit=40_000,
        paymaster_data=bytes(range(97)),
    )
    return [plain, deployed_and_sponsored]


def call_data(op: UserOperation, version: EntryPointVersion) -> bytes:
    if version == "0.6":
        selector = keccak(f"getUserOpHash({UNPACKED})".encode())[:4]
        fields: tuple[object, ...] = (
            op.sender, op.nonce, op.init_code, op.call_data, op.call_gas_limit,
            op.verification_gas_limit, op.pre_verification_gas, op.max_fee_per_gas,
            op.max_priority_fee_per_gas, op.paymaster_and_data_v06, op.signature,
        )  # fmt: skip
        return selector + encode([UNPACKED], [fields])
    selector = keccak(f"getUserOpHash({PACKED})".encode())[:4]
    fields = (
        op.sender, op.nonce, op.init_code, op.call_data, op.account_gas_limits,
        op.pre_verification_gas, op.gas_fees, op.paymaster_and_data, op.signature,
    )  # fmt: skip
    return selector + encode([PACKED], [fields])


async def entry_points_hash(node: Node, entry_point: str, op: UserOperation, v: str) -> bytes:
    data = "0x" + call_data(op, v).hex()  # type: ignore[arg-type]
    return bytes.fromhex((await node("eth_call", {"to": entry_point, "data": data}))[2:])


@pytest.mark.parametrize("version", ["0.6", "0.7", "0.8", "0.9"])
async def test_the_sdks_hash_is_the_entry_points(node: Node, version: EntryPointVersion) -> None:
    entry_point = await node.deploy(creation_code(version))
    for op in ops():
        expected = await entry_points_hash(node, entry_point, op, version)
        assert user_op_hash(op, entry_point, CHAIN, version=version) == expected
        # Any field changed changes both.
        other = op.with_(nonce=op.nonce + 1)
        assert user_op_hash(other, entry_point, CHAIN, version=version) != expected


async def test_v09_leaves_the_paymaster_signature_out_of_the_hash(node: Node) -> None:
    entry_point = await node.deploy(creation_code("0.9"))
    sponsored = ops()[1]
    base = sponsored.paymaster_data

    def with_signature(signature: bytes) -> UserOperation:
        suffix = signature + len(signature).to_bytes(2, "big") + PAYMASTER_SIG_MAGIC
        return sponsored.with_(paymaster_data=base + suffix)

    first, second = with_signature(b"\xaa" * 65), with_signature(b"\xbb" * 70)
    expected = await entry_points_hash(node, entry_point, first, "0.9")
    assert await entry_points_hash(node, entry_point, second, "0.9") == expected
    assert user_op_hash(first, entry_point, CHAIN, version="0.9") == expected
    assert user_op_hash(second, entry_point, CHAIN, version="0.9") == expected
    # v0.8 has no such rule: the signature is hashed like any paymaster data.
    assert user_op_hash(first, entry_point, CHAIN, version="0.8") != expected


def test_a_v06_entry_point_gets_the_op_in_v06s_form() -> None:
    op = ops()[1]
    wire = op.to_rpc_v06()
    assert wire["initCode"] == "0x" + op.init_code.hex()
    # v0.6's paymasterAndData carries no paymaster gas limits.
    assert wire["paymasterAndData"] == "0x" + ("56" * 20) + bytes(range(97)).hex()
    assert not {"factory", "paymaster", "paymasterVerificationGasLimit"} & set(wire)
    assert wire["callGasLimit"] == hex(op.call_gas_limit) and wire["sender"] == op.sender
