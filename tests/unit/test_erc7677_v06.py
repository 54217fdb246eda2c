"""ERC-7677 for EntryPoint v0.6, in memory: the unpacked op in, `paymasterAndData` out (the
v0.6 paymaster's address, the window, a signature over VerifyingPaymasterV06's digest), the
hold weighed at v0.6's most gas (the verification gas three times), the signature recorded
under the v0.6 userOpHash, and policies applied as to any op."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from eth_account import Account
from eth_keys.datatypes import Signature

from entryway.bundler.errors import BundlerError
from entryway.domain.entry_points import V06
from entryway.domain.evm import address_bytes, hex_to_bytes, keccak
from entryway.domain.pricebook import default_price_book
from entryway.domain.signatures import eth_signed_message_digest, paymaster_digest_v06
from entryway.domain.sponsorship import SponsorshipPolicy, SponsorshipRules
from entryway.domain.userop_v06 import UserOperationV06, op_v06_to_json, user_op_hash_v06
from entryway.paymaster.calls import encode_execute
from entryway.paymaster.erc7677 import PaymasterCaller, PaymasterChain, PaymasterRpc
from entryway.paymaster.memory import InMemorySponsorships
from entryway.paymaster.ports import IssuedSignature
from entryway.paymaster.signer import STUB_SIGNATURE, PaymasterSigner

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
CHAIN = 80002
EP = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
PM = "0x5555555555555555555555555555555555555555"
PM06 = "0x6666666666666666666666666666666666666666"
SENDER = "0x1111111111111111111111111111111111111111"
TARGET = "0x2222222222222222222222222222222222222222"
OTHER = "0x3333333333333333333333333333333333333333"
SIGNER = Account.from_key(keccak(b"unit signer v0.6"))
CALLER = PaymasterCaller("p1", "key1", CHAIN)
BLOCK_TIME = 1_800_000_000


class Signatures:
    def __init__(self) -> None:
        self.issued: list[IssuedSignature] = []

    async def record(self, issued: IssuedSignature) -> None:
        self.issued.append(issued)


async def block_time() -> int:
    return BLOCK_TIME


def rpc(book: InMemorySponsorships, signatures: Signatures | None = None) -> PaymasterRpc:
    chain = PaymasterChain(CHAIN, EP, PM, block_time, also=((V06.address, PM06),))
    return PaymasterRpc(
        {CHAIN: chain}, PaymasterSigner(SIGNER), book, book, book, default_price_book(),
        clock=lambda: NOW, signatures=signatures,
    )  # fmt: skip


def op(target: str = TARGET) -> UserOperationV06:
    return UserOperationV06(
        sender=SENDER,
        nonce=3,
        init_code=b"",
        call_data=encode_execute(target, 0, b""),
        call_gas_limit=100_000,
        verification_gas_limit=200_000,
        pre_verification_gas=50_000,
        max_fee_per_gas=40 * 10**9,
        max_priority_fee_per_gas=30 * 10**9,
    )


def params(o: UserOperationV06, context: Any = None) -> list[Any]:
    raw = op_v06_to_json(o)
    del raw["signature"]
    return [raw, V06.address, hex(CHAIN), context]


def recover(digest: bytes, signature: bytes) -> str:
    sig = Signature(signature[:64] + bytes([signature[64] - 27]))
    return str(sig.recover_public_key_from_msg_hash(digest).to_checksum_address())


async def test_stub_then_data_answer_v06_paymaster_and_data_signed_over_the_v06_digest() -> None:
    book, signatures = InMemorySponsorships(), Signatures()
    pm = rpc(book, signatures)
    stub = await pm.dispatch("pm_getPaymasterStubData", params(op()), CALLER)
    assert set(stub) == {"paymasterAndData", "isFinal", "sponsor"} and stub["isFinal"] is False
    stub_bytes = hex_to_bytes(stub["paymasterAndData"])
    assert stub_bytes[:20] == address_bytes(PM06) and stub_bytes[32:] == STUB_SIGNATURE
    assert not book.events  # the stub holds nothing

    final = await pm.dispatch("pm_getPaymasterData", params(op()), CALLER)
    assert set(final) == {"paymasterAndData", "sponsor"}
    data = hex_to_bytes(final["paymasterAndData"])
    assert len(data) == len(stub_bytes) == 20 + 6 + 6 + 65
    assert data[:32] == stub_bytes[:32]  # the same paymaster and window as the stub's
    valid_until, valid_after = int.from_bytes(data[20:26]), int.from_bytes(data[26:32])
    assert valid_after < BLOCK_TIME < valid_until
    digest = paymaster_digest_v06(op(), CHAIN, PM06, valid_until, valid_after)
    assert recover(eth_signed_message_digest(digest), data[32:]) == SIGNER.address

    # Held at v0.6's most gas: the verification gas for the account, the paymaster's
    # validation and its postOp.
    (held,) = book.events.values()
    gas = 50_000 + 3 * 200_000 + 100_000
    assert (
        held.credits
        == default_price_book()
        .sponsored_user_operation(
            CHAIN, calls=1, calldata_bytes=len(op().call_data), gas_cost_wei=gas * 40 * 10**9
        )
        .credits
    )
    # Recorded under the hash v0.6's EntryPoint gives the op its UserOperationEvent carries.
    (issued,) = signatures.issued
    sent = op().with_paymaster_and_data(data)
    assert issued.user_op_hash == "0x" + user_op_hash_v06(sent, V06.address, CHAIN).hex()
    assert issued.entry_point == V06.address and issued.op.as_v06() == sent

    await pm.dispatch("pm_getPaymasterData", params(op()), CALLER)
    assert len(book.events) == 1  # the same op again: the same hold


async def test_policies_apply_to_v06_ops_as_to_any() -> None:
    rules = SponsorshipRules.from_json({"allowedTargets": [TARGET]})
    policy = SponsorshipPolicy("pol", "p1", "pol", rules, True, NOW)
    pm = rpc(InMemorySponsorships([policy]))
    await pm.dispatch("pm_getPaymasterData", params(op()), CALLER)
    with pytest.raises(BundlerError) as refused:
        await pm.dispatch("pm_getPaymasterData", params(op(OTHER)), CALLER)
    assert refused.value.data == {"rule": "allowed_targets", "policyId": "pol"}


async def test_a_malformed_v06_op_is_invalid_params_naming_the_field() -> None:
    pm = rpc(InMemorySponsorships())
    raw = params(op())
    raw[0]["initCode"] = "0x1234"  # not empty, yet shorter than a factory's address
    with pytest.raises(BundlerError, match="initCode") as bad:
        await pm.dispatch("pm_getPaymasterStubData", raw, CALLER)
    assert bad.value.code == -32602
