"""Sponsorship policies, the call reader, the signer's data and the ERC-7677 methods, without a
chain: each rule refuses with its own name and message, caps hold at their exact boundary,
holds are taken once per op."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from eth_abi.abi import encode
from eth_account import Account
from eth_keys.datatypes import Signature
from hypothesis import given
from hypothesis import strategies as st

from entryway.bundler.errors import BundlerError
from entryway.bundler.rpc_types import user_operation_json
from entryway.chain.rpc import RpcTransportError
from entryway.domain.bounds import unprintable
from entryway.domain.evm import keccak
from entryway.domain.pricebook import default_price_book
from entryway.domain.signatures import eth_signed_message_digest, paymaster_digest
from entryway.domain.sponsorship import (
    Call,
    Cap,
    Period,
    PolicyRulesError,
    PolicyUsage,
    Rule,
    SponsorshipPolicy,
    SponsorshipRequest,
    SponsorshipRules,
    choose_policy,
    evaluate,
    period_start,
)
from entryway.domain.userop import UserOperation
from entryway.errors import ConfigurationError
from entryway.paymaster.calls import (
    ERC7579_EXECUTE,
    EXECUTE_BATCH_V06,
    EXECUTE_BATCH_V07,
    decode_calls,
    encode_execute,
    encode_execute_batch,
)
from entryway.paymaster.costs import max_gas_cost_wei, sponsorship_key
from entryway.paymaster.erc7677 import (
    PaymasterCaller,
    PaymasterChain,
    PaymasterRpc,
    PaymasterSettings,
    paymaster_verification_gas,
)
from entryway.paymaster.memory import InMemorySponsorships
from entryway.paymaster.signer import (
    SIGNER_KEY_ENV,
    SIGNER_KEY_FILE_ENV,
    STUB_SIGNATURE,
    PaymasterSigner,
    ValidityWindow,
    stub_paymaster_data,
    with_paymaster_gas,
)

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)  # a Saturday
SENDER = "0x1111111111111111111111111111111111111111"
TARGET = "0x2222222222222222222222222222222222222222"
OTHER = "0x3333333333333333333333333333333333333333"
TRANSFER = bytes.fromhex("a9059cbb")
EP = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
PM = "0x5555555555555555555555555555555555555555"
CHAIN = 80002


def request(calls: tuple[Call, ...] | None = (), credits: int = 10) -> SponsorshipRequest:
    return SponsorshipRequest(SENDER, calls, credits, NOW)


# ---------------------------------------------------------------------- rules, one by one

REFUSALS: list[tuple[dict[str, Any], SponsorshipRequest, PolicyUsage, Rule, str]] = [
    ({"startsAt": "2026-12-01T00:00:00Z"}, request(), PolicyUsage(), Rule.WINDOW_NOT_STARTED,
     "starts at 2026-12-01"),
    ({"endsAt": "2026-11-21T12:00:00+00:00"}, request(), PolicyUsage(), Rule.WINDOW_ENDED,
     "ended at 2026-11-21T12:00"),
    ({"allowedTargets": [TARGET]}, request(None), PolicyUsage(), Rule.UNREADABLE_CALLS,
     "not a call the paymaster can read"),
    ({"allowedTargets": [TARGET]}, request((Call(TARGET, 0, b""), Call(OTHER, 0, b""))),
     PolicyUsage(), Rule.ALLOWED_TARGETS, f"call 1 targets {OTHER}"),
    ({"allowedSelectors": ["0xa9059cbb"]}, request((Call(TARGET, 0, b"\x12\x34\x56\x78"),)),
     PolicyUsage(), Rule.ALLOWED_SELECTORS, "selector 0x12345678"),
    ({"allowedSelectors": ["0xa9059cbb"]}, request((Call(TARGET, 5, b""),)), PolicyUsage(),
     Rule.ALLOWED_SELECTORS, "calls no function"),
    ({"spendCap": {"credits": 100}}, request(credits=11), PolicyUsage(spent_credits=90),
     Rule.SPEND_CAP, "90 credits used in all"),
    ({"operationCap": {"operations": 5, "period": "day"}}, request(), PolicyUsage(operations=5),
     Rule.OPERATION_CAP, "5 operations used this day"),
    ({"perSender": {"credits": 50, "period": "week"}}, request(credits=20),
     PolicyUsage(sender_spent_credits=40), Rule.SENDER_SPEND_CAP,
     f"40 credits for sender {SENDER} used this week"),
    ({"perSender": {"operations": 1, "period": "month"}}, request(),
     PolicyUsage(sender_operations=1), Rule.SENDER_OPERATION_CAP,
     f"1 operations for sender {SENDER} used this month"),
]  # fmt: skip


@pytest.mark.parametrize(("doc", "req", "usage", "rule", "text"), REFUSALS)
def test_each_rule_refuses_with_its_own_name_and_message(
    doc: dict[str, Any], req: SponsorshipRequest, usage: PolicyUsage, rule: Rule, text: str
) -> None:
    decision = evaluate(SponsorshipRules.from_json(doc), req, usage)
    assert (decision.allowed, decision.rule) == (False, rule)
    assert text in decision.message
    assert evaluate(SponsorshipRules(), req, usage).allowed  # no rules: allowed


def test_refusal_messages_are_distinct() -> None:
    messages = [evaluate(SponsorshipRules.from_json(d), r, u).message for d, r, u, _, _ in REFUSALS]
    assert len(set(messages)) == len(messages)


def test_allowed_calls_pass_and_empty_call_data_calls_nothing() -> None:
    rules = SponsorshipRules.from_json(
        {"allowedTargets": [TARGET.lower()], "allowedSelectors": ["0xA9059CBB"]}
    )
    calls = (Call(TARGET, 0, TRANSFER + bytes(64)), Call(TARGET, 0, TRANSFER))
    assert evaluate(rules, request(calls), PolicyUsage()).allowed
    assert evaluate(rules, request(()), PolicyUsage()).allowed


@given(st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 10**9))
def test_a_spend_cap_allows_exactly_up_to_its_limit(limit: int, used: int, more: int) -> None:
    rules = SponsorshipRules(spend_cap=Cap(limit), sender_spend_cap=Cap(limit, Period.DAY))
    for usage in (PolicyUsage(spent_credits=used), PolicyUsage(sender_spent_credits=used)):
        allowed = evaluate(rules, request(credits=more), usage).allowed
        assert allowed == (used + more <= limit)


@given(st.integers(0, 1000), st.integers(0, 1000))
def test_an_operation_cap_counts_this_op(limit: int, used: int) -> None:
    rules = SponsorshipRules(operation_cap=Cap(limit), sender_operation_cap=Cap(limit))
    for usage in (PolicyUsage(operations=used), PolicyUsage(sender_operations=used)):
        assert evaluate(rules, request(), usage).allowed == (used < limit)


@given(st.datetimes(datetime(2000, 1, 1), datetime(2100, 1, 1), timezones=st.just(UTC)))
def test_periods_start_on_utc_calendar_boundaries(at: datetime) -> None:
    day, week, month = (period_start(p, at) for p in (Period.DAY, Period.WEEK, Period.MONTH))
    assert day is not None and week is not None and month is not None
    assert month <= week + timedelta(days=7) and week <= day <= at < day + timedelta(days=1)
    assert (day.hour, day.minute, day.second, day.microsecond) == (0, 0, 0, 0)
    assert week.weekday() == 0 and at - week < timedelta(days=7)
    assert month.day == 1 and (month.year, month.month) == (at.year, at.month)
    assert period_start(Period.NEVER, at) is None


# ---------------------------------------------------------------------- the JSON form

addresses = st.binary(min_size=20, max_size=20).map(lambda b: "0x" + b.hex())
selectors = st.binary(min_size=4, max_size=4).map(lambda b: "0x" + b.hex())
periods = st.sampled_from([p.value for p in Period])
printable_names = st.text(min_size=1, max_size=200).filter(
    lambda t: t.strip() and unprintable(t) is None
)
docs = st.fixed_dictionaries(
    {},
    optional={
        "spendCap": st.fixed_dictionaries({"credits": st.integers(0, 10**12), "period": periods}),
        "operationCap": st.fixed_dictionaries(
            {"operations": st.integers(0, 10**6), "period": periods}
        ),
        "perSender": st.fixed_dictionaries(
            {"credits": st.integers(0, 10**9), "operations": st.integers(0, 100), "period": periods}
        ),
        "allowedTargets": st.lists(addresses, max_size=4),
        "allowedSelectors": st.lists(selectors),
        "endsAt": st.datetimes(datetime(2000, 1, 1), datetime(9998, 12, 31),
                               timezones=st.just(UTC)).map(datetime.isoformat),
        "sponsor": st.fixed_dictionaries({"name": printable_names}),
    },
)  # fmt: skip


@given(docs)
def test_rules_survive_a_round_trip_through_json(doc: dict[str, Any]) -> None:
    rules = SponsorshipRules.from_json(doc)
    assert SponsorshipRules.from_json(rules.to_json()) == rules


@pytest.mark.parametrize(
    ("doc", "complaint"),
    [
        ([], "must be a JSON object"),
        ({"spendcap": {"credits": 1}}, "unknown rule(s): spendcap"),
        ({"spendCap": {"credits": -1}}, "spendCap.credits must be a non-negative integer"),
        ({"spendCap": {"credits": 1.5}}, "spendCap.credits must be a non-negative integer"),
        ({"spendCap": {"period": "day"}}, "spendCap needs credits"),
        ({"operationCap": {"operations": 3, "period": "hour"}}, "must be one of day, week"),
        ({"perSender": {"period": "day"}}, "perSender needs credits, operations or both"),
        ({"allowedTargets": ["0x12"]}, "20-byte hex addresses"),
        ({"allowedSelectors": ["transfer"]}, "4-byte hex selectors"),
        ({"startsAt": "tomorrow"}, "startsAt must be an ISO 8601 date-time"),
        ({"startsAt": "2026-02-01T00:00Z", "endsAt": "2026-01-01T00:00Z"}, "endsAt must be after"),
        ({"sponsor": {"name": "x", "icon": "https://x/icon.png"}}, "must be a data URI"),
    ],
)
def test_bad_rules_are_refused_with_what_is_wrong(doc: Any, complaint: str) -> None:
    with pytest.raises(PolicyRulesError) as caught:
        SponsorshipRules.from_json(doc)
    assert complaint in str(caught.value)


# ---------------------------------------------------------------------- choosing the policy


def policy(policy_id: str, active: bool = True, **rules: Any) -> SponsorshipPolicy:
    return SponsorshipPolicy(
        policy_id, "p1", policy_id, SponsorshipRules.from_json(rules), active, NOW
    )


def test_the_policy_is_the_named_one_or_the_only_active_one() -> None:
    a, b, off = policy("a"), policy("b"), policy("off", active=False)
    assert choose_policy([], None).policy is None and choose_policy([], None).decision.allowed
    assert choose_policy([a, off], None).policy == a
    assert choose_policy([a, b], "b").policy == b
    refusals = {
        Rule.POLICY_UNKNOWN: choose_policy([a], "zzz"),
        Rule.POLICY_INACTIVE: choose_policy([a, off], "off"),
        Rule.POLICY_REQUIRED: choose_policy([a, b], None),
        Rule.NO_ACTIVE_POLICY: choose_policy([off], None),
    }
    for rule, choice in refusals.items():
        assert (choice.decision.allowed, choice.decision.rule) == (False, rule)


# ---------------------------------------------------------------------- reading call data


def test_calls_are_read_from_every_known_account_interface() -> None:
    data = TRANSFER + bytes(64)
    single = (Call(TARGET, 7, data),)
    assert decode_calls(encode_execute(TARGET, 7, data)) == single
    batch = [(TARGET, 1, data), (OTHER, 0, b"")]
    expected = tuple(Call(t, v, d) for t, v, d in batch)
    assert decode_calls(encode_execute_batch(batch)) == expected
    v07 = EXECUTE_BATCH_V07 + encode(
        ["address[]", "uint256[]", "bytes[]"], [[TARGET, OTHER], [1, 0], [data, b""]]
    )
    assert decode_calls(v07) == expected
    v06 = EXECUTE_BATCH_V06 + encode(["address[]", "bytes[]"], [[TARGET], [data]])
    assert decode_calls(v06) == (Call(TARGET, 0, data),)
    mode = bytes(32)
    packed = bytes.fromhex(TARGET[2:]) + (7).to_bytes(32, "big") + data
    assert decode_calls(ERC7579_EXECUTE + encode(["bytes32", "bytes"], [mode, packed])) == single
    batch_mode = b"\x01" + bytes(31)
    rows = encode(["(address,uint256,bytes)[]"], [batch])
    assert decode_calls(ERC7579_EXECUTE + encode(["bytes32", "bytes"], [batch_mode, rows])) == (
        expected
    )
    assert decode_calls(b"") == ()


@pytest.mark.parametrize(
    "call_data",
    [
        bytes.fromhex("12345678") + bytes(64),  # some other function
        encode_execute(TARGET, 0, b"")[:40],  # truncated
        ERC7579_EXECUTE + encode(["bytes32", "bytes"], [b"\xff" + bytes(31), b""]),  # delegatecall
        b"\xb6\x1d",
    ],
)
def test_unreadable_call_data_is_none_never_an_error(call_data: bytes) -> None:
    assert decode_calls(call_data) is None


@given(st.binary(max_size=300))
def test_any_bytes_decode_to_calls_or_none(call_data: bytes) -> None:
    calls = decode_calls(call_data)
    assert calls is None or all(isinstance(c, Call) for c in calls)


# ---------------------------------------------------------------------- signer data

OWNER_KEY = Account.from_key(keccak(b"unit signer"))


def op(**changes: Any) -> UserOperation:
    base = UserOperation(
        sender=SENDER,
        nonce=3,
        call_data=encode_execute(TARGET, 0, TRANSFER + bytes(64)),
        call_gas_limit=100_000,
        verification_gas_limit=200_000,
        pre_verification_gas=50_000,
        max_fee_per_gas=40 * 10**9,
        max_priority_fee_per_gas=30 * 10**9,
    )
    return replace(base, **changes)


def recover(digest: bytes, signature: bytes) -> str:
    sig = Signature(signature[:64] + bytes([signature[64] - 27]))
    return str(sig.recover_public_key_from_msg_hash(digest).to_checksum_address())


def test_signed_data_recovers_to_the_signer_and_the_stub_matches_its_shape() -> None:
    signer = PaymasterSigner(OWNER_KEY)
    window = ValidityWindow(valid_until=1_800_000_900, valid_after=1_800_000_000)
    draft = with_paymaster_gas(op(), PM, 60_000, 0)
    data = signer.paymaster_data(draft, CHAIN, window)
    stub = stub_paymaster_data(window)
    assert len(data) == len(stub) == 12 + 65
    assert data[:12] == stub[:12] and stub[12:] == STUB_SIGNATURE
    assert stub.count(0) <= data.count(0)
    digest = eth_signed_message_digest(
        paymaster_digest(draft, CHAIN, PM, window.valid_until, window.valid_after)
    )
    assert recover(digest, data[12:]) == OWNER_KEY.address
    assert recover(digest, STUB_SIGNATURE) != OWNER_KEY.address  # recovers, to no signer
    assert int.from_bytes(STUB_SIGNATURE[32:64], "big") <= (2**256 - 1) // 2  # low s


def test_the_signer_key_comes_from_a_file_or_the_environment(tmp_path: Path) -> None:
    key_hex = OWNER_KEY.key.hex()
    key_file = tmp_path / "signer.key"
    key_file.write_text(key_hex + "\n")
    assert PaymasterSigner.load(key_file, env={}).address == OWNER_KEY.address
    assert PaymasterSigner.load(env={SIGNER_KEY_FILE_ENV: str(key_file)}).address == (
        OWNER_KEY.address
    )
    assert PaymasterSigner.load(env={SIGNER_KEY_ENV: key_hex}).address == OWNER_KEY.address
    with pytest.raises(ConfigurationError, match=SIGNER_KEY_ENV):
        PaymasterSigner.load(env={})
    with pytest.raises(ConfigurationError, match="not a 32-byte hex key"):
        PaymasterSigner.load(env={SIGNER_KEY_ENV: "0x1234"})


def test_the_hold_key_ignores_paymaster_fields_and_cost_is_the_max_gas() -> None:
    bare = op()
    sponsored = PaymasterSigner(OWNER_KEY).sponsor(
        bare, chain_id=CHAIN, paymaster=PM, window=ValidityWindow(10**9), verification_gas=1,
        post_op_gas=2,
    )  # fmt: skip
    assert sponsorship_key(CHAIN, bare) == sponsorship_key(CHAIN, sponsored)
    assert sponsorship_key(CHAIN, bare) != sponsorship_key(CHAIN, replace(bare, nonce=4))
    assert sponsorship_key(CHAIN, bare) != sponsorship_key(84532, bare)
    assert max_gas_cost_wei(sponsored) == (50_000 + 200_000 + 100_000 + 1 + 2) * 40 * 10**9


# ---------------------------------------------------------------------- ERC-7677, in memory


async def block_time() -> int:
    return 1_800_000_000


def rpc(book: InMemorySponsorships) -> PaymasterRpc:
    chains = {CHAIN: PaymasterChain(CHAIN, EP, PM, block_time)}
    return PaymasterRpc(
        chains, PaymasterSigner(OWNER_KEY), book, book, book, default_price_book(),
        clock=lambda: NOW,
    )  # fmt: skip


CALLER = PaymasterCaller("p1", "key1", CHAIN)


def params(o: UserOperation, context: Any = None, *, chain: str = hex(CHAIN)) -> list[Any]:
    raw = user_operation_json(o)
    del raw["signature"]
    return [raw, EP, chain, context]


@pytest.mark.parametrize(
    ("block_time", "start"),
    [
        (1_800_000_000, 1_800_000_000),  # the chain ahead of the clock: the chain's time
        (int(NOW.timestamp()) - 3_600, int(NOW.timestamp())),  # idle for an hour: the clock
    ],
    ids=["chain-ahead", "chain-idle"],
)
async def test_the_window_starts_at_the_later_of_the_latest_block_and_the_clock(
    block_time: int, start: int
) -> None:
    """A development node that mines only on transactions and sat idle has an old latest
    block; the op's block will be stamped with the time it is mined. A window counted from
    the old block would have expired already (AA32 at once)."""

    async def latest() -> int:
        return block_time

    chains = {CHAIN: PaymasterChain(CHAIN, EP, PM, latest)}
    book = InMemorySponsorships()
    pm = PaymasterRpc(
        chains, PaymasterSigner(OWNER_KEY), book, book, book, default_price_book(),
        clock=lambda: NOW,
    )  # fmt: skip
    with_stub = op(paymaster=PM, paymaster_verification_gas_limit=61_000)
    final = await pm.dispatch("pm_getPaymasterData", params(with_stub), CALLER)
    data = bytes.fromhex(final["paymasterData"][2:])
    valid_until, valid_after = int.from_bytes(data[:6], "big"), int.from_bytes(data[6:12], "big")
    settings = PaymasterSettings()
    assert valid_until == start + settings.validity_s
    assert valid_after == start - settings.clock_skew_s


async def test_stub_then_data_hold_once_and_answer_the_same_shape() -> None:
    book = InMemorySponsorships()
    pm = rpc(book)
    stub = await pm.dispatch("pm_getPaymasterStubData", params(op()), CALLER)
    pm_gas = paymaster_verification_gas(op(), 60_000)
    assert 60_000 < pm_gas < 61_000  # a small op: little more than the base
    assert stub["isFinal"] is False and stub["sponsor"] == {"name": "Entryway"}
    assert stub["paymaster"] == PM and stub["paymasterVerificationGasLimit"] == hex(pm_gas)
    assert stub["paymasterPostOpGasLimit"] == "0x0" and not book.events
    with_stub = op(paymaster=PM, paymaster_verification_gas_limit=pm_gas)
    final = await pm.dispatch("pm_getPaymasterData", params(with_stub), CALLER)
    assert len(final["paymasterData"]) == len(stub["paymasterData"])
    assert final["paymasterData"] != stub["paymasterData"]
    (held,) = book.events.values()
    assert (held.policy_id, held.subject, held.chain_id, held.key_id) == (
        None,
        SENDER,
        CHAIN,
        "key1",
    )
    assert held.credits == default_price_book().sponsored_user_operation(
        CHAIN, calls=1, calldata_bytes=len(op().call_data),
        gas_cost_wei=(50_000 + 200_000 + 100_000 + pm_gas) * 40 * 10**9,
    ).credits  # fmt: skip
    await pm.dispatch("pm_getPaymasterData", params(with_stub), CALLER)
    assert len(book.events) == 1  # the same op again: the same hold


async def test_a_refusal_names_the_rule_and_the_policy() -> None:
    book = InMemorySponsorships([policy("pol", perSender={"operations": 1})])
    pm = rpc(book)
    await pm.dispatch("pm_getPaymasterData", params(op()), CALLER)
    await pm.dispatch("pm_getPaymasterData", params(op()), CALLER)  # a retry is not refused
    for method in ("pm_getPaymasterStubData", "pm_getPaymasterData"):
        with pytest.raises(BundlerError) as caught:
            await pm.dispatch(method, params(op(nonce=4), {"policyId": "pol"}), CALLER)
        error = caught.value.to_rpc()
        assert error["code"] == -32501
        assert error["data"] == {"rule": "sender_operation_cap", "policyId": "pol"}
        assert "sender_operation_cap" in error["message"]
    with pytest.raises(BundlerError) as unknown:
        await pm.dispatch("pm_getPaymasterStubData", params(op(), {"policyId": "nope"}), CALLER)
    assert unknown.value.to_rpc()["code"] == -32602
    assert unknown.value.to_rpc()["data"] == {"rule": "policy_unknown", "policyId": "nope"}


async def test_the_policy_sponsor_and_client_gas_limits_are_used() -> None:
    sponsor = {"name": "Game Co", "icon": "data:image/png;base64,AAAA"}
    pm = rpc(InMemorySponsorships([policy("pol", sponsor=sponsor)]))
    mine = op(paymaster=PM, paymaster_verification_gas_limit=90_000, paymaster_post_op_gas_limit=5)
    result = await pm.dispatch("pm_getPaymasterData", params(mine), CALLER)
    assert result["sponsor"] == sponsor
    assert (result["paymasterVerificationGasLimit"], result["paymasterPostOpGasLimit"]) == (
        hex(90_000),
        "0x5",
    )
    greedy = replace(mine, paymaster_verification_gas_limit=10**7)
    with pytest.raises(BundlerError, match="above this paymaster's maximum"):
        await pm.dispatch("pm_getPaymasterData", params(greedy), CALLER)


async def test_unsupported_entry_point_chain_and_method_are_clear_errors() -> None:
    pm = rpc(InMemorySponsorships())
    v07 = "0x0000000071727De22E5E9d8BAf0edAc6f37da032"
    cases = [
        ("pm_getPaymasterData", [params(op())[0], v07, hex(CHAIN)], "unsupported entry point"),
        ("pm_getPaymasterData", params(op(), chain="0x2105"), "is not this endpoint's chain"),
        ("pm_getPaymasterData", params(op(), "policy"), "context must be an object"),
        ("pm_getPaymasterData", [params(op())[0]], "expected [userOp, entryPoint"),
        ("pm_sponsorUserOperation", params(op()), "not found"),
    ]
    for method, args, message in cases:
        with pytest.raises(BundlerError) as caught:
            await pm.dispatch(method, args, CALLER)
        assert message in caught.value.message
    with pytest.raises(BundlerError, match="does not serve chain 1"):
        await pm.dispatch("pm_getPaymasterData", params(op()), PaymasterCaller("p1", None, 1))
    error = None
    try:
        await pm.dispatch("pm_getPaymasterData", [params(op())[0], v07, hex(CHAIN)], CALLER)
    except BundlerError as exc:
        error = exc.to_rpc()
    assert error is not None and error["data"] == {"supportedEntryPoints": [EP]}


async def test_a_node_failure_is_an_internal_error_and_holds_nothing() -> None:
    async def unreachable() -> int:
        raise RpcTransportError("connection refused")

    book = InMemorySponsorships()
    pm = PaymasterRpc(
        {CHAIN: PaymasterChain(CHAIN, EP, PM, unreachable)}, PaymasterSigner(OWNER_KEY),
        book, book, book, default_price_book(),
    )  # fmt: skip
    with pytest.raises(BundlerError) as caught:
        await pm.dispatch("pm_getPaymasterData", params(op()), CALLER)
    assert caught.value.to_rpc()["code"] == -32603 and not book.events
