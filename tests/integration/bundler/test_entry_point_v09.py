"""EntryPoint v0.9 served beside v0.8 and v0.7 by one bundler: on a devnet its npm release
candidate sits where the release's salt puts it; the release's SimpleAccount deployed and used
through it; its hash the one the v0.9 EntryPoint computes, a paymaster signature appended to
paymasterAndData left out of it; an op the account signed before its paymaster did included."""

from __future__ import annotations

from dataclasses import replace

from entryway import contracts
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from entryway.domain.entry_points import V06, V07, V08, V09, EntryPointVersion, version_at
from entryway.domain.evm import hex_to_bytes
from entryway.domain.paymaster_signature import (
    PAYMASTER_SIGNATURE_MAGIC,
    encode_paymaster_signature,
)
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.paymaster.signer import ValidityWindow, sign_paymaster_data, with_paymaster_gas
from tests.integration.bundler import test_entry_point_v07 as v07
from tests.integration.bundler.test_entry_point_v07 import call, error, sign, simple_account_op
from tests.integration.harness import ETHER, FAR_FUTURE, Harness

EP09 = contracts.load("EntryPointV09").abi
FACTORY09 = "SimpleAccountFactoryV09"
assert V09.packaged_address is not None
EP_ADDRESS = V09.packaged_address  # where the devnet has it

both = v07.both  # the fixture: a bundler for v0.8 serving every release the devnet carries


def sponsored(
    h: Harness, op: UserOperation, owner: object, window: ValidityWindow | None = None
) -> UserOperation:
    """`op` with v0.9 paymaster data whose signature sits in the paymasterSignature suffix,
    the account's signature made over the op with another paymaster signature in its place
    (as in parallel mode, where the account signs before the paymaster has)."""
    paymaster = h.deployment.paymaster_v09
    assert paymaster is not None
    draft = with_paymaster_gas(op, paymaster, 60_000, 0)
    window = window or ValidityWindow(FAR_FUTURE, 0)
    key = bytes(h.paymaster_signer.key)
    data = sign_paymaster_data(key, draft, h.chain_id, window, parallel=True)
    placeholder = data[: -(65 + 10)] + encode_paymaster_signature(b"\x01" * 65)
    early = sign(h, draft.with_paymaster(paymaster, 60_000, 0, placeholder), EP_ADDRESS, owner)
    return replace(draft.with_paymaster(paymaster, 60_000, 0, data), signature=early.signature)


def test_v09_sits_where_its_release_candidate_lands(harness: Harness) -> None:
    assert harness.deployment.entry_point_v09 == EP_ADDRESS
    assert version_at(EP_ADDRESS) is EntryPointVersion.V09
    assert version_at(V09.address) is EntryPointVersion.V09


async def test_v09_is_served_after_v08(both: BundlerRpc, eth: EthClient) -> None:
    assert await eth.get_code(EP_ADDRESS)
    assert not await eth.get_code(V09.address)  # the release itself: public chains only
    assert await call(both, "eth_supportedEntryPoints") == [
        V08.address, V07.address, EP_ADDRESS, V06.address,
    ]  # fmt: skip


async def test_v09_hash_is_the_entry_points(harness: Harness) -> None:
    op, owner = await simple_account_op(harness, EP_ADDRESS, FACTORY09)
    signed = sponsored(harness, op, owner)
    for candidate in (op, signed):
        on_chain = await harness.eth.call(
            EP_ADDRESS, EP09.encode_call("getUserOpHash", candidate.packed())
        )
        assert user_op_hash(candidate, EP_ADDRESS, harness.chain_id) == on_chain
    # The paymaster's signature is not part of the hash; the rest of its data is.
    other_signature = replace(
        signed,
        paymaster_data=signed.paymaster_data[: -(65 + 10)]
        + encode_paymaster_signature(b"\x02" * 70),
    )
    assert user_op_hash(other_signature, EP_ADDRESS, harness.chain_id) == user_op_hash(
        signed, EP_ADDRESS, harness.chain_id
    )
    later = replace(signed, paymaster_data=b"\x00" + signed.paymaster_data[1:])
    assert user_op_hash(later, EP_ADDRESS, harness.chain_id) != user_op_hash(
        signed, EP_ADDRESS, harness.chain_id
    )
    # v0.8 hashes the whole of paymasterAndData.
    v08 = user_op_hash(signed, EP_ADDRESS, harness.chain_id, version=EntryPointVersion.V08)
    assert v08 != user_op_hash(signed, EP_ADDRESS, harness.chain_id)


async def test_v09_simple_account_self_funded(both: BundlerRpc, harness: Harness) -> None:
    op, _ = await simple_account_op(harness, EP_ADDRESS, FACTORY09)
    sent = await call(both, "eth_sendUserOperation", user_operation_json(op), EP_ADDRESS)
    assert hex_to_bytes(sent) == user_op_hash(op, EP_ADDRESS, harness.chain_id)
    assert len(await call(both, "debug_bundler_dumpMempool", EP_ADDRESS)) == 1
    assert await call(both, "debug_bundler_dumpMempool", V08.address) == []
    await call(both, "debug_bundler_sendBundleNow")
    receipt = await call(both, "eth_getUserOperationReceipt", sent)
    assert receipt["success"] is True
    assert receipt["entryPoint"] == EP_ADDRESS
    assert (await call(both, "eth_getUserOperationByHash", sent))["entryPoint"] == EP_ADDRESS
    assert await harness.eth.get_code(op.sender)  # deployed by the v0.9 SenderCreator
    assert (await call(both, "entryway_getUserOperationStatus", sent))["status"] == "included"


async def test_v09_sponsored_with_a_parallel_paymaster_signature(
    both: BundlerRpc, harness: Harness
) -> None:
    """The account signed first; the paymaster's signature, added after, leaves the account's
    valid; VerifyingPaymasterV09 finds its own in the suffix and pays."""
    op, owner = await simple_account_op(harness, EP_ADDRESS, FACTORY09)
    await harness.fund(op.sender, 0)  # holds nothing: the paymaster pays
    signed = sponsored(harness, op, owner)
    assert signed.paymaster_data.endswith(PAYMASTER_SIGNATURE_MAGIC)
    sent = await call(both, "eth_sendUserOperation", user_operation_json(signed), EP_ADDRESS)
    await call(both, "debug_bundler_sendBundleNow")
    receipt = await call(both, "eth_getUserOperationReceipt", sent)
    assert receipt["success"] is True
    assert receipt["paymaster"] == harness.deployment.paymaster_v09


async def test_v09_refuses_a_forged_paymaster_signature(both: BundlerRpc, harness: Harness) -> None:
    op, owner = await simple_account_op(harness, EP_ADDRESS, FACTORY09)
    await harness.fund(op.sender, 0)
    signed = sponsored(harness, op, owner)
    data = signed.paymaster_data
    at = len(data) - 10 - 65  # the paymaster signature's first byte
    forged = replace(signed, paymaster_data=data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
    failure = await error(both, "eth_sendUserOperation", user_operation_json(forged), EP_ADDRESS)
    assert failure["code"] == -32507  # the paymaster's signature check failed


async def test_v09_refuses_a_paymaster_signature_longer_than_its_data(
    both: BundlerRpc, harness: Harness
) -> None:
    op, owner = await simple_account_op(harness, EP_ADDRESS, FACTORY09)
    signed = sponsored(harness, op, owner)
    window = signed.paymaster_data[:12]
    bad = replace(signed, paymaster_data=window + (500).to_bytes(2) + PAYMASTER_SIGNATURE_MAGIC)
    failure = await error(both, "eth_sendUserOperation", user_operation_json(bad), EP_ADDRESS)
    assert failure["code"] == -32602
    assert "paymaster signature length 500" in failure["message"]


async def test_v09_gas_estimate_lets_the_op_through(both: BundlerRpc, harness: Harness) -> None:
    op, owner = await simple_account_op(harness, EP_ADDRESS, FACTORY09)
    estimate = await call(both, "eth_estimateUserOperationGas", user_operation_json(op), EP_ADDRESS)
    estimated = replace(
        op,
        call_gas_limit=int(estimate["callGasLimit"], 16),
        verification_gas_limit=int(estimate["verificationGasLimit"], 16),
        pre_verification_gas=int(estimate["preVerificationGas"], 16),
    )
    signed = sign(harness, estimated, EP_ADDRESS, owner)
    sent = await call(both, "eth_sendUserOperation", user_operation_json(signed), EP_ADDRESS)
    await call(both, "debug_bundler_sendBundleNow")
    assert (await call(both, "eth_getUserOperationReceipt", sent))["success"] is True


async def test_v09_follows_v08s_mempool_rules(both: BundlerRpc) -> None:
    v09 = both.siblings[EP_ADDRESS.lower()]
    rules = v09.bundler.config.rules
    assert rules.paymaster_context_needs_stake and rules.staked_factory_covers_paymaster


async def test_the_sdk_hashes_v09_ops_as_the_entry_point(harness: Harness) -> None:
    from entryway_sdk import userop as sdk

    op, owner = await simple_account_op(harness, EP_ADDRESS, FACTORY09)
    signed = sponsored(harness, op, owner)
    on_chain = await harness.eth.call(
        EP_ADDRESS, EP09.encode_call("getUserOpHash", signed.packed())
    )
    same = sdk.UserOperation(
        sender=signed.sender,
        nonce=signed.nonce,
        call_data=signed.call_data,
        call_gas_limit=signed.call_gas_limit,
        verification_gas_limit=signed.verification_gas_limit,
        pre_verification_gas=signed.pre_verification_gas,
        max_fee_per_gas=signed.max_fee_per_gas,
        max_priority_fee_per_gas=signed.max_priority_fee_per_gas,
        factory=signed.factory,
        factory_data=signed.factory_data,
        paymaster=signed.paymaster,
        paymaster_verification_gas_limit=signed.paymaster_verification_gas_limit,
        paymaster_post_op_gas_limit=signed.paymaster_post_op_gas_limit,
        paymaster_data=signed.paymaster_data,
    )
    assert sdk.entry_point_version(EP_ADDRESS) == "0.9"
    assert sdk.user_op_hash(same, EP_ADDRESS, harness.chain_id) == on_chain
    assert sdk.user_op_hash(same, EP_ADDRESS, harness.chain_id, version="0.8") != on_chain


FLAG = 0x800000000000  # v0.9: both bounds above it are block numbers


async def test_v09_validity_ranges_in_blocks(both: BundlerRpc, harness: Harness) -> None:
    """v0.9 reads a window whose bounds both carry the flag as block numbers: an op valid
    since a past block is included; one not valid for 50 blocks is refused (-32503),
    where a timestamp reading would have refused both."""
    block = int((await harness.eth.get_block("latest"))["number"], 16)
    op, owner = await simple_account_op(harness, EP_ADDRESS, FACTORY09)
    await harness.fund(op.sender, 0)
    # Valid since the block before the latest: whatever head the bundler judges by.
    now = sponsored(harness, op, owner, ValidityWindow(FLAG | (block + 1000), FLAG | (block - 1)))
    sent = await call(both, "eth_sendUserOperation", user_operation_json(now), EP_ADDRESS)
    await call(both, "debug_bundler_sendBundleNow")
    receipt = await call(both, "eth_getUserOperationReceipt", sent)
    assert receipt["success"] is True

    op, owner = await simple_account_op(harness, EP_ADDRESS, FACTORY09)
    await harness.fund(op.sender, 0)
    window = ValidityWindow(FLAG | (block + 1000), FLAG | (block + 50))
    later = sponsored(harness, op, owner, window)
    failure = await error(both, "eth_sendUserOperation", user_operation_json(later), EP_ADDRESS)
    assert failure["code"] == -32503
    assert f"not valid before block {block + 51}" in failure["message"]


async def test_entry_point_option_serves_v09_alone(devnet: Devnet, eth: EthClient) -> None:
    """`entryway bundler --entry-point <v0.9>`: that EntryPoint only, as the main one."""
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(1000 * ETHER)])
    rpc = await build_bundler(
        eth,
        StandaloneSettings(
            rpc_url=devnet.chains[0].rpc_url,
            entry_point=EP_ADDRESS,
            also_entry_points=(),
            executor_keys=(executor,),
            mode=BundlingMode.MANUAL,
        ),
    )
    assert await call(rpc, "eth_supportedEntryPoints") == [EP_ADDRESS]
    assert rpc.bundler.config.release.version is EntryPointVersion.V09
    assert rpc.bundler.validator.simulator.version is EntryPointVersion.V09
