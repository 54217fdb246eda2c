"""EntryPoint v0.7 served beside v0.8 by one bundler: the release's SimpleAccount (from its npm
artifacts) deployed and used through v0.7, its hash the one the v0.7 EntryPoint computes, v0.7
and v0.8 ops bundled into the same block (one handleOps per EntryPoint), and what v0.7 cannot
carry (EIP-7702) refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from entryway import contracts
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.standalone import StandaloneSettings, build_bundler, deploy_entry_points
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient
from entryway.deploy.deployer import ContractDeployer
from entryway.deploy.plan import ENTRYWAY_SALT, plan_contract
from entryway.devnet.devnet import Devnet
from entryway.domain.eip7702 import MARKER
from entryway.domain.entry_points import V06, V07, V08, V09
from entryway.domain.evm import address_bytes, hex_to_bytes
from entryway.domain.signatures import eth_signed_message_digest, sign_digest
from entryway.domain.userop import UserOperation, user_op_hash
from tests.integration.harness import ETHER, Harness

EP07 = contracts.load("EntryPointV07").abi
FACTORY07 = "SimpleAccountFactoryV07"
FACTORY08 = "SimpleAccountFactory"


@pytest.fixture(scope="module")
async def both(devnet: Devnet, eth: EthClient) -> AsyncIterator[BundlerRpc]:
    """A bundler for v0.8 that found v0.7 (and v0.9) on the chain and serves them too, with
    two executor keys the EntryPoints' bundlers share."""
    executors = (Harness.new_key(), Harness.new_key())
    for executor in executors:
        await eth.rpc.request("anvil_setBalance", [executor.address, hex(1000 * ETHER)])
    await deploy_entry_points(eth, executors[0], devnet.chains[0].chain_id)
    rpc = await build_bundler(
        eth,
        StandaloneSettings(
            rpc_url=devnet.chains[0].rpc_url,
            entry_point=V08.address,
            executor_keys=executors,
            debug_rpc=True,
            mode=BundlingMode.MANUAL,
        ),
    )
    await rpc.start()
    yield rpc
    await rpc.stop()


async def call(rpc: BundlerRpc, method: str, *params: Any) -> Any:
    answer = await rpc.dispatch({"jsonrpc": "2.0", "id": 1, "method": method, "params": [*params]})
    assert answer is not None and "error" not in answer, answer
    return answer["result"]


async def error(rpc: BundlerRpc, method: str, *params: Any) -> dict[str, Any]:
    answer = await rpc.dispatch({"jsonrpc": "2.0", "id": 1, "method": method, "params": [*params]})
    assert answer is not None and "error" in answer, answer
    return dict(answer["error"])


async def factory_for(h: Harness, entry_point: str, artifact: str) -> str:
    init = contracts.load(artifact).bytecode + bytes(12) + address_bytes(entry_point)
    plan = plan_contract(f"simpleAccountFactory@{entry_point}", artifact, ENTRYWAY_SALT, init)
    await ContractDeployer(h.eth, h.executor).ensure(plan)
    return plan.address


async def simple_account_op(
    h: Harness, entry_point: str, factory_artifact: str, call_data: bytes = b""
) -> tuple[UserOperation, Any]:
    """A first op of a new SimpleAccount of the release at `entry_point`, funded, signed as
    that release's SimpleAccount checks (v0.7: an EIP-191 message of the hash)."""
    owner = h.new_key()
    factory_address = await factory_for(h, entry_point, factory_artifact)
    factory = contracts.load(factory_artifact)
    raw = await h.eth.call(factory_address, factory.abi.encode_call("getAddress", owner.address, 0))
    sender = str(factory.abi.decode_output("getAddress", raw)[0])
    await h.fund(sender, ETHER)
    max_fee, priority = await h.fees()
    op = UserOperation(
        sender=sender,
        nonce=0,
        call_data=call_data,
        call_gas_limit=100_000,
        verification_gas_limit=500_000,
        pre_verification_gas=80_000,
        max_fee_per_gas=max_fee,
        max_priority_fee_per_gas=priority,
        factory=factory_address,
        factory_data=factory.abi.encode_call("createAccount", owner.address, 0),
    )
    return sign(h, op, entry_point, owner), owner


def sign(h: Harness, op: UserOperation, entry_point: str, owner: Any) -> UserOperation:
    digest = user_op_hash(op, entry_point, h.chain_id)
    if entry_point == V07.address:
        digest = eth_signed_message_digest(digest)
    return op.with_signature(sign_digest(bytes(owner.key), digest))


async def test_both_entry_points_are_supported(both: BundlerRpc) -> None:
    # v0.9 and v0.6 too: the devnet carries them (test_entry_point_v09.py, test_service_v06.py)
    assert await call(both, "eth_supportedEntryPoints") == [
        V08.address,
        V07.address,
        V09.packaged_address,
        V06.address,
    ]
    failure = await error(
        both, "eth_getUserOperationByHash", "0x" + "00" * 31
    )  # malformed hash: still an error, not a crash
    assert failure["code"] == -32602


async def test_v07_hash_is_the_entry_points(harness: Harness) -> None:
    op, _ = await simple_account_op(harness, V07.address, FACTORY07)
    on_chain = await harness.eth.call(V07.address, EP07.encode_call("getUserOpHash", op.packed()))
    assert user_op_hash(op, V07.address, harness.chain_id) == on_chain
    assert user_op_hash(op, V08.address, harness.chain_id) != on_chain


async def test_v07_simple_account_self_funded(both: BundlerRpc, harness: Harness) -> None:
    op, _ = await simple_account_op(harness, V07.address, FACTORY07)
    sent = await call(both, "eth_sendUserOperation", user_operation_json(op), V07.address)
    assert hex_to_bytes(sent) == user_op_hash(op, V07.address, harness.chain_id)
    assert len(await call(both, "debug_bundler_dumpMempool", V07.address)) == 1
    assert await call(both, "debug_bundler_dumpMempool", V08.address) == []
    await call(both, "debug_bundler_sendBundleNow")
    receipt = await call(both, "eth_getUserOperationReceipt", sent)
    assert receipt["success"] is True
    assert receipt["entryPoint"] == V07.address
    assert receipt["sender"] == op.sender
    found = await call(both, "eth_getUserOperationByHash", sent)
    assert found["entryPoint"] == V07.address
    assert await harness.eth.get_code(op.sender)  # deployed by the v0.7 SenderCreator
    assert (await call(both, "entryway_getUserOperationStatus", sent))["status"] == "included"


async def test_v07_op_sent_to_v08_is_refused(both: BundlerRpc, harness: Harness) -> None:
    """Signed for v0.7, sent to v0.8: the v0.8 hash differs, so the signature fails there."""
    op, _ = await simple_account_op(harness, V07.address, FACTORY07)
    failure = await error(both, "eth_sendUserOperation", user_operation_json(op), V08.address)
    assert failure["code"] in (-32500, -32507)


async def test_unknown_entry_point_names_those_served(both: BundlerRpc, harness: Harness) -> None:
    op, _ = await simple_account_op(harness, V07.address, FACTORY07)
    stranger = "0x" + "12" * 20
    failure = await error(both, "eth_sendUserOperation", user_operation_json(op), stranger)
    assert failure["code"] == -32602
    assert V07.address in failure["message"] and V08.address in failure["message"]


async def test_v07_refuses_eip7702(both: BundlerRpc, harness: Harness) -> None:
    op, owner = await simple_account_op(harness, V07.address, FACTORY07)
    as_7702 = replace(op, sender=owner.address, factory=MARKER, factory_data=b"")
    failure = await error(both, "eth_sendUserOperation", user_operation_json(as_7702), V07.address)
    assert failure["code"] == -32602
    assert "EIP-7702" in failure["message"]
    estimate = await error(
        both, "eth_estimateUserOperationGas", user_operation_json(as_7702), V07.address
    )
    assert "EIP-7702" in estimate["message"]


async def test_v07_gas_estimate_lets_the_op_through(both: BundlerRpc, harness: Harness) -> None:
    op, owner = await simple_account_op(harness, V07.address, FACTORY07)
    estimate = await call(
        both, "eth_estimateUserOperationGas", user_operation_json(op), V07.address
    )
    estimated = replace(
        op,
        call_gas_limit=int(estimate["callGasLimit"], 16),
        verification_gas_limit=int(estimate["verificationGasLimit"], 16),
        pre_verification_gas=int(estimate["preVerificationGas"], 16),
    )
    signed = sign(harness, estimated, V07.address, owner)
    sent = await call(both, "eth_sendUserOperation", user_operation_json(signed), V07.address)
    await call(both, "debug_bundler_sendBundleNow")
    assert (await call(both, "eth_getUserOperationReceipt", sent))["success"] is True


async def test_v07_and_v08_ops_share_a_block(both: BundlerRpc, harness: Harness) -> None:
    """Each EntryPoint's bundle is its own handleOps transaction; with the node mining both
    at once, they land in one block."""
    op07, _ = await simple_account_op(harness, V07.address, FACTORY07)
    op08, _ = await simple_account_op(harness, V08.address, FACTORY08)
    hash07 = await call(both, "eth_sendUserOperation", user_operation_json(op07), V07.address)
    hash08 = await call(both, "eth_sendUserOperation", user_operation_json(op08), V08.address)
    eth = harness.eth
    await eth.rpc.request("evm_setAutomine", [False])
    try:
        sent = [await b.bundle_once(wait=False) for b in both.bundlers]
        assert all(sent[:2]) and not any(sent[2:])  # v0.8's and v0.7's; v0.9 and v0.6 have no op
        await eth.rpc.request("evm_mine", [])
    finally:
        await eth.rpc.request("evm_setAutomine", [True])
    receipts = []
    for op_hash in (hash07, hash08):
        for _ in range(100):
            receipt = await call(both, "eth_getUserOperationReceipt", op_hash)
            if receipt is not None:
                break
            await eth.rpc.request("evm_mine", [])
        receipts.append(receipt)
    assert all(r["success"] for r in receipts)
    assert receipts[0]["receipt"]["blockNumber"] == receipts[1]["receipt"]["blockNumber"]
    assert receipts[0]["receipt"]["transactionHash"] != receipts[1]["receipt"]["transactionHash"]
    assert [r["entryPoint"] for r in receipts] == [V07.address, V08.address]


async def test_estimate_names_the_revert_reason(both: BundlerRpc, harness: Harness) -> None:
    """The account refuses the EntryPoint's call (only its owner may withdraw): the estimate
    fails with the reason in its message, the raw revert data beside it."""
    account = contracts.load("SimpleAccountV07").abi
    op, _ = await simple_account_op(
        harness,
        V07.address,
        FACTORY07,
        account.encode_call("withdrawDepositTo", harness.executor.address, 1),
    )
    failure = await error(
        both, "eth_estimateUserOperationGas", user_operation_json(op), V07.address
    )
    assert failure["code"] == -32521
    assert failure["message"] == "UserOperation execution reverted: only owner"
    assert failure["data"]["revertData"].startswith("0x08c379a0")


async def test_the_entry_points_share_the_chains_head(both: BundlerRpc) -> None:
    """Ops to v0.7 and v0.8 arriving together are judged against one head read."""
    v07 = both.siblings[V07.address.lower()]
    assert v07.bundler.head is both.bundler.head


async def test_auto_mode_bundles_every_entry_points_ops(both: BundlerRpc, harness: Harness) -> None:
    """In auto mode one schedule sends for both EntryPoints: the v0.7 bundler runs no loop of
    its own, yet its ops are bundled without being asked."""
    v07 = both.siblings[V07.address.lower()]
    assert v07.bundler.auto is both.bundler.auto
    op, _ = await simple_account_op(harness, V07.address, FACTORY07)
    await call(both, "debug_bundler_setBundlingMode", "auto")
    try:
        sent = await call(both, "eth_sendUserOperation", user_operation_json(op), V07.address)
        receipt = None
        for _ in range(200):
            receipt = await call(both, "eth_getUserOperationReceipt", sent)
            if receipt is not None:
                break
            await asyncio.sleep(0.05)
    finally:
        await call(both, "debug_bundler_setBundlingMode", "manual")
    assert receipt is not None and receipt["success"] is True


async def test_the_chains_metrics_count_v07_bundles(both: BundlerRpc, harness: Harness) -> None:
    from entryway.service.metrics_scrape import ChainBundler, bundler_families

    def sent() -> float:
        [bundles] = [f for f in families() if f.name == "entryway_bundles_sent"]
        return sum(s.value for s in bundles.samples if s.name.endswith("_total"))

    def families() -> list[Any]:
        return bundler_families([ChainBundler(harness.chain_id, both.bundler, harness.eth)])

    before = sent()
    op, _ = await simple_account_op(harness, V07.address, FACTORY07)
    await call(both, "eth_sendUserOperation", user_operation_json(op), V07.address)
    await call(both, "debug_bundler_sendBundleNow")
    assert sent() == before + 1
