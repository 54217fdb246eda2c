"""The paymaster as a standard ERC-4337 client uses it, on a real anvil: an op for the
release's SimpleAccount (deployed through its SimpleAccountFactory initCode) sponsored with
pm_getPaymasterStubData then pm_getPaymasterData, estimated and sent through the in-process
bundler, mined; the signer rotated with overlap; the deposit watched and topped up."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from entryway import contracts
from entryway.bundler.errors import BundlerError
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient
from entryway.deploy.deployer import ContractDeployer
from entryway.deploy.plan import ENTRYWAY_SALT, plan_contract
from entryway.devnet.devnet import Devnet
from entryway.domain.evm import address_bytes, keccak
from entryway.domain.pricebook import default_price_book
from entryway.domain.signatures import sign_digest
from entryway.domain.sponsorship import SponsorshipPolicy, SponsorshipRules
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.paymaster.calls import encode_execute
from entryway.paymaster.commands import change_signer, deposit, status
from entryway.paymaster.costs import settle_sponsorship, sponsorship_key
from entryway.paymaster.deposit import DepositStatus, DepositWatcher, read_deposit
from entryway.paymaster.erc7677 import PaymasterCaller, PaymasterChain, PaymasterRpc
from entryway.paymaster.memory import InMemorySponsorships
from entryway.paymaster.signer import PaymasterSigner
from tests.integration.conftest import CHAIN_ID
from tests.integration.harness import COUNTER, ETHER, Harness

SIMPLE_FACTORY = contracts.load("SimpleAccountFactory")
PROJECT = "project-7677"
CALLER = PaymasterCaller(PROJECT, "key7677", CHAIN_ID)


@pytest.fixture(scope="module")
async def bundler(devnet: Devnet, eth: EthClient) -> AsyncIterator[BundlerRpc]:
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(100 * ETHER)])
    chain = devnet.chains[0]
    settings = StandaloneSettings(
        rpc_url=chain.rpc_url,
        entry_point=chain.deployment.entry_point,
        executor_keys=(executor,),
        debug_rpc=True,
        mode=BundlingMode.MANUAL,
    )
    rpc = await build_bundler(eth, settings)
    await rpc.bundler.start()
    yield rpc
    await rpc.bundler.stop()


async def call(rpc: BundlerRpc, method: str, *params: Any) -> Any:
    answer = await rpc.dispatch(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
    )
    assert answer is not None and "error" not in answer, answer
    return answer["result"]


def paymaster_rpc(h: Harness, book: InMemorySponsorships, signer: PaymasterSigner) -> PaymasterRpc:
    d = h.deployment
    chain = PaymasterChain.on(h.eth, h.chain_id, d.entry_point, d.paymaster)
    return PaymasterRpc({h.chain_id: chain}, signer, book, book, book, default_price_book())


async def simple_account_factory(h: Harness) -> str:
    init = SIMPLE_FACTORY.bytecode + bytes(12) + address_bytes(h.deployment.entry_point)
    plan = plan_contract("simpleAccountFactory", "SimpleAccountFactory", ENTRYWAY_SALT, init)
    await ContractDeployer(h.eth, h.executor).ensure(plan)
    return plan.address


async def deploy_counter(h: Harness) -> str:
    receipt = await h.executor.send(None, contracts.load("TestCounter").bytecode)
    assert receipt.contract_address is not None
    return receipt.contract_address


def pm_params(h: Harness, op: UserOperation, context: dict[str, Any]) -> list[Any]:
    """What a client sends: the unsigned op, gas possibly still unset (None)."""
    raw: dict[str, Any] = user_operation_json(op)
    del raw["signature"]
    return [raw, h.deployment.entry_point, hex(h.chain_id), context]


async def sponsored_simple_account_op(
    h: Harness, pm: PaymasterRpc, bundler: BundlerRpc, context: dict[str, Any], call_data: bytes
) -> tuple[UserOperation, dict[str, Any], dict[str, Any]]:
    """The client's side, as viem's prepareUserOperation does it; returns (signed op, stub,
    final)."""
    owner = h.new_key()
    factory = await simple_account_factory(h)
    raw = await h.eth.call(factory, SIMPLE_FACTORY.abi.encode_call("getAddress", owner.address, 0))
    sender = str(SIMPLE_FACTORY.abi.decode_output("getAddress", raw)[0])
    max_fee, priority = await h.fees()
    draft = UserOperation(
        sender=sender, nonce=0, call_data=call_data, call_gas_limit=0, verification_gas_limit=0,
        pre_verification_gas=0, max_fee_per_gas=max_fee, max_priority_fee_per_gas=priority,
        factory=factory,
        factory_data=SIMPLE_FACTORY.abi.encode_call("createAccount", owner.address, 0),
    )  # fmt: skip
    stub = await pm.dispatch("pm_getPaymasterStubData", pm_params(h, draft, context), CALLER)
    op = with_fields(draft, stub)
    # A stub signature the account can parse (it recovers to someone else).
    dummy = replace(op, signature=sign_digest(keccak(b"dummy"), keccak(b"stub")))
    estimate = await call(
        bundler,
        "eth_estimateUserOperationGas",
        user_operation_json(dummy),
        h.deployment.entry_point,
    )
    assert int(estimate["paymasterVerificationGasLimit"], 16) <= int(
        stub["paymasterVerificationGasLimit"], 16
    ), "the stub's paymaster gas must cover what its validation measures"
    op = replace(
        op,
        call_gas_limit=int(estimate["callGasLimit"], 16),
        verification_gas_limit=int(estimate["verificationGasLimit"], 16),
        pre_verification_gas=int(estimate["preVerificationGas"], 16),
    )
    final = await pm.dispatch("pm_getPaymasterData", pm_params(h, op, context), CALLER)
    op = with_fields(op, final)
    digest = user_op_hash(op, h.deployment.entry_point, h.chain_id)
    return op.with_signature(sign_digest(bytes(owner.key), digest)), stub, final


def with_fields(op: UserOperation, result: dict[str, Any]) -> UserOperation:
    return op.with_paymaster(
        result["paymaster"],
        int(result["paymasterVerificationGasLimit"], 16),
        int(result["paymasterPostOpGasLimit"], 16),
        bytes.fromhex(result["paymasterData"][2:]),
    )


async def test_a_standard_client_flow_sponsors_a_simple_account(
    harness: Harness, bundler: BundlerRpc
) -> None:
    counter = await deploy_counter(harness)
    rules = {
        "allowedTargets": [counter],
        "allowedSelectors": ["0x" + COUNTER.selector("count").hex()],
    }
    policy = SponsorshipPolicy(
        "pol-1", PROJECT, "counter only", SponsorshipRules.from_json(rules), True, _now()
    )
    book = InMemorySponsorships([policy])
    pm = paymaster_rpc(harness, book, PaymasterSigner(harness.paymaster_signer))
    call_data = encode_execute(counter, 0, COUNTER.encode_call("count"))

    op, stub, final = await sponsored_simple_account_op(
        harness, pm, bundler, {"policyId": "pol-1"}, call_data
    )
    assert stub["isFinal"] is False and len(stub["paymasterData"]) == len(final["paymasterData"])
    op_hash = await call(
        bundler, "eth_sendUserOperation", user_operation_json(op), harness.deployment.entry_point
    )
    await call(bundler, "debug_bundler_sendBundleNow")
    receipt = await call(bundler, "eth_getUserOperationReceipt", op_hash)

    assert receipt["success"] is True and receipt["paymaster"] == harness.deployment.paymaster
    assert await harness.eth.get_code(op.sender) != b""
    assert await harness.eth.get_balance(op.sender) == 0
    assert await harness.call(counter, COUNTER, "counts", op.sender) == 1
    # One hold, under the policy, for this sender; settled from the receipt for less.
    (held,) = book.events.values()
    assert (held.policy_id, held.subject, held.idempotency_key) == (
        "pol-1",
        op.sender,
        sponsorship_key(harness.chain_id, op),
    )
    settled = await settle_sponsorship(
        book, default_price_book(), project_id=PROJECT, chain_id=harness.chain_id, op=op,
        actual_gas_cost_wei=int(receipt["actualGasCost"], 16), at=_now(),
    )  # fmt: skip
    assert 0 < settled.credits < held.credits

    # The same policy refuses a call to anything else, saying which rule.
    other = encode_execute(harness.deployment.notary, 0, b"")
    with pytest.raises(BundlerError) as refused:
        await sponsored_simple_account_op(harness, pm, bundler, {"policyId": "pol-1"}, other)
    assert refused.value.to_rpc()["data"] == {"rule": "allowed_targets", "policyId": "pol-1"}


async def test_signer_rotation_keeps_ops_of_both_keys_valid_during_the_overlap(
    harness: Harness, bundler: BundlerRpc, devnet: Devnet, tmp_path: Path
) -> None:
    owner_key = tmp_path / "owner.key"
    owner_key.write_text(devnet.keys.operator.key.hex())
    rpc_url, paymaster = devnet.chains[0].rpc_url, harness.deployment.paymaster
    old, new = PaymasterSigner(harness.new_key()), PaymasterSigner(harness.new_key())

    async def allow(signer: PaymasterSigner, allowed: bool) -> None:
        await change_signer(
            rpc_url=rpc_url, owner_key_file=owner_key, paymaster=paymaster,
            signer=signer.address, allowed=allowed, emit=lambda _: None,
        )  # fmt: skip

    await allow(old, True)  # the service's key before the rotation
    pm = paymaster_rpc(harness, InMemorySponsorships(), old)
    signed_by_old, _, _ = await sponsored_simple_account_op(harness, pm, bundler, {}, b"")

    await allow(new, True)  # 1. the new signer on chain
    pm.rotate_signer(new)  # 2. the service switched to it
    signed_by_new, _, _ = await sponsored_simple_account_op(harness, pm, bundler, {}, b"")
    hashes = [
        await call(bundler, "eth_sendUserOperation", user_operation_json(o), _ep(harness))
        for o in (signed_by_old, signed_by_new)
    ]
    await call(bundler, "debug_bundler_sendBundleNow")
    for op_hash in hashes:
        assert (await call(bundler, "eth_getUserOperationReceipt", op_hash))["success"] is True

    await allow(old, False)  # 3. the old one removed: what it signs is refused
    late = paymaster_rpc(harness, InMemorySponsorships(), old)
    stale, _, _ = await sponsored_simple_account_op(harness, late, bundler, {}, b"")
    answer = await bundler.dispatch(
        {"jsonrpc": "2.0", "id": 1, "method": "eth_sendUserOperation",
         "params": [user_operation_json(stale), _ep(harness)]}
    )  # fmt: skip
    assert answer is not None and answer["error"]["code"] == -32507
    assert "paymaster signature" in answer["error"]["message"]
    current, _, _ = await sponsored_simple_account_op(harness, pm, bundler, {}, b"")
    op_hash = await call(
        bundler, "eth_sendUserOperation", user_operation_json(current), _ep(harness)
    )
    await call(bundler, "debug_bundler_sendBundleNow")
    assert (await call(bundler, "eth_getUserOperationReceipt", op_hash))["success"] is True
    await allow(new, False)  # leave the session's signer set as it was


async def test_the_deposit_is_watched_and_topped_up(
    harness: Harness, devnet: Devnet, tmp_path: Path
) -> None:
    d = harness.deployment
    alerts: list[DepositStatus] = []

    async def alert(status: DepositStatus) -> None:
        alerts.append(status)

    current = await read_deposit(harness.eth, d.entry_point, d.paymaster)
    watcher = DepositWatcher(
        harness.eth, harness.chain_id, d.entry_point, d.paymaster, current + ETHER, alert
    )
    assert (await watcher.check()).low and (await watcher.check()).low
    assert [(a.deposit_wei, a.threshold_wei) for a in alerts] == [(current, current + ETHER)]

    funder = harness.new_key()
    await harness.fund(funder.address, 10 * ETHER)
    key_file = tmp_path / "funder.key"
    key_file.write_text(funder.key.hex())
    out: list[Any] = []
    rpc_url = devnet.chains[0].rpc_url
    after = await deposit(
        rpc_url=rpc_url, key_file=key_file, paymaster=d.paymaster, amount_wei=2 * ETHER,
        entry_point=d.entry_point, emit=out.append,
    )  # fmt: skip
    assert after == current + 2 * ETHER == out[0]["depositWei"]
    assert not (await watcher.check()).low and len(alerts) == 1

    watcher.threshold_wei = after + 1  # below again: a second alert
    await watcher.check()
    assert len(alerts) == 2

    shown = await status(
        rpc_url=rpc_url, paymaster=d.paymaster, entry_point=d.entry_point,
        signers=[harness.paymaster_signer.address, funder.address], emit=lambda _: None,
    )  # fmt: skip
    assert shown["depositWei"] == after and shown["staked"] is True
    assert shown["signers"] == {harness.paymaster_signer.address: True, funder.address: False}


def _ep(h: Harness) -> str:
    return h.deployment.entry_point


def _now() -> datetime:
    return datetime.now(UTC)


async def test_the_stub_gas_covers_the_paymaster_for_large_call_data(
    harness: Harness, bundler: BundlerRpc
) -> None:
    """VerifyingPaymaster hashes the call data in memory: its gas grows with the size, and the
    stub's limit (which clients keep through estimation) must grow with it."""
    pm = paymaster_rpc(harness, InMemorySponsorships(), PaymasterSigner(harness.paymaster_signer))
    counter = await deploy_counter(harness)
    for size in (20_000, 100_000):
        padded = COUNTER.encode_call("count") + b"\x01" * size  # extra call data is ignored
        call_data = encode_execute(counter, 0, padded)
        # The estimate inside asserts the stub's limit covers the measured one.
        await sponsored_simple_account_op(harness, pm, bundler, {}, call_data)


def test_the_paymaster_commands_print_json_and_fail_cleanly(
    devnet: Devnet, harness: Harness, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from entryway.paymaster.commands import paymaster_app

    runner = CliRunner()
    pm, url = harness.deployment.paymaster, devnet.chains[0].rpc_url
    shown = runner.invoke(paymaster_app, ["status", "--rpc-url", url, "--paymaster", pm])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["paymaster"] == pm
    key_file = tmp_path / "k"
    key_file.write_text("not a key")
    refused = runner.invoke(
        paymaster_app,
        ["deposit", "--rpc-url", url, "--key-file", str(key_file), "--paymaster", pm,
         "--amount-wei", "1"],
    )  # fmt: skip
    assert refused.exit_code == 1 and "does not hold a 32-byte hex private key" in refused.output
