"""Bounds on what comes from outside, without a database or a chain: dates, text, credit
amounts, a hold against the owner's spending budget, an op's gas and fees against its chain's
sanity bounds, and the paymaster refusing (in memory) what is out of bounds."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway.bundler.errors import BundlerError
from entryway.bundler.validation.sanity import SanityLimits, check_bounds, check_op_gas
from entryway.domain.billing import BillingConfig
from entryway.domain.bounds import (
    EARLIEST_MOMENT,
    LATEST_MOMENT,
    MAX_CREDITS,
    BoundError,
    unprintable,
    utc_moment,
)
from entryway.domain.credits import (
    BudgetExceededError,
    CreditAccount,
    CreditError,
    CreditLot,
    LotKind,
    check_amount,
    check_hold,
)
from entryway.domain.networks import GWEI, NETWORKS, fee_rules_for
from entryway.domain.pricebook import Quote, default_price_book
from entryway.domain.sponsorship import PolicyRulesError, SponsorshipRules
from entryway.domain.userop import UserOperation
from entryway.paymaster.costs import estimated_quote
from entryway.paymaster.erc7677 import PaymasterChain, PaymasterRpc
from entryway.paymaster.memory import InMemorySponsorships, MemoryUsageRecord
from entryway.paymaster.signer import PaymasterSigner
from tests.unit.test_sponsorship import (
    CALLER,
    CHAIN,
    EP,
    NOW,
    OWNER_KEY,
    PM,
    block_time,
    op,
    params,
)

START = datetime(2026, 1, 1, tzinfo=UTC)

# ---------------------------------------------------------------------- dates

zones = st.none() | st.sampled_from(
    [UTC, timezone(timedelta(hours=14)), timezone(-timedelta(hours=12), "far west")]
)


@given(st.datetimes(datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59), timezones=zones))
def test_a_date_is_taken_in_utc_and_only_from_2000_to_9999(moment: datetime) -> None:
    try:
        expected: datetime | None = (
            moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        )
    except OverflowError:  # an offset carries it past year 1 or 9999
        expected = None
    if expected is not None and EARLIEST_MOMENT <= expected < LATEST_MOMENT:
        assert utc_moment(moment) == expected and utc_moment(moment).tzinfo is UTC
    else:
        with pytest.raises(BoundError, match="must be from 2000-01-01 to before 9999-01-01"):
            utc_moment(moment, "until")


# ---------------------------------------------------------------------- text

BAD = ["\x00", "\x1b", "\r", "\x7f", "\u0085", "\u202e", "\u2066", "\u2028", "\ud800"]


@given(st.text(max_size=20), st.sampled_from(BAD), st.text(max_size=20))
def test_a_control_or_invisible_character_anywhere_is_found(
    before: str, bad: str, after: str
) -> None:
    for multiline in (False, True):
        found = unprintable(before + bad + after, multiline=multiline)
        assert found is not None and found.startswith("U+")
    assert unprintable("name\x00") == "U+0000"


@given(
    st.text(
        st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\u2028\u2029")
    ).filter(lambda t: not set(t) & set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"))
)
def test_printable_text_passes_and_descriptions_may_span_lines(text: str) -> None:
    assert unprintable(text) is None
    assert unprintable(f"{text}\n\t{text}", multiline=True) is None
    assert unprintable(f"{text}\n{text}") == "U+000A"  # a name is one line


# ---------------------------------------------------------------------- credit amounts


@given(st.integers(-(2**70), 2**70))
def test_credit_amounts_beyond_what_the_database_holds_are_refused_not_clamped(n: int) -> None:
    if 0 <= n <= MAX_CREDITS:
        assert check_amount(n) == n
        _, used = CreditAccount().consume(n, START)
        assert used.overage == n
    else:
        with pytest.raises(CreditError, match=str(MAX_CREDITS)):
            check_amount(n)
    with pytest.raises(CreditError):
        CreditLot.new("too-big", LotKind.PURCHASE, MAX_CREDITS + 1, START)
    with pytest.raises(CreditError):
        CreditAccount().consume(MAX_CREDITS + 1, START)


@given(
    st.integers(0, 10**9),  # the lots' balance
    st.integers(0, 10**9),  # the cycle's overage so far
    st.none() | st.integers(0, 10**9),  # the owner's budget (None: none)
    st.integers(0, 3 * 10**9),  # the hold
)
def test_a_hold_is_refused_only_when_it_takes_the_overage_past_a_budget(
    balance: int, overage: int, budget: int | None, credits: int
) -> None:
    lots = (CreditLot.new("lot", LotKind.GRANT, balance, START),) if balance else ()
    _, used = CreditAccount(lots).consume(credits, START)
    if budget is not None and credits > balance and overage + credits - balance > budget:
        with pytest.raises(BudgetExceededError) as refused:
            check_hold(credits, used.overage, overage, budget)
        assert str(credits) in str(refused.value) and str(budget) in str(refused.value)
    else:
        check_hold(credits, used.overage, overage, budget)


@given(
    st.integers(1, 10**7),
    st.none() | st.integers(0, 10**8),
    st.lists(st.integers(0, 4 * 10**7), max_size=30),
)
def test_overage_goes_on_without_a_budget_and_never_past_one(
    grant: int, budget: int | None, holds: list[int]
) -> None:
    account = CreditAccount((CreditLot.new("grant", LotKind.GRANT, grant, START),))
    for credits in holds:
        after, used = account.consume(credits, START)
        if budget is None or account.cycle_overage + used.overage <= budget:
            check_hold(credits, used.overage, account.cycle_overage, budget)  # not refused
            account = after
        else:
            with pytest.raises(BudgetExceededError):
                check_hold(credits, used.overage, account.cycle_overage, budget)
        if budget is not None:
            assert account.cycle_overage <= budget
    if budget is None:
        assert account.cycle_overage == max(sum(holds) - grant, 0)  # nothing was refused


def test_the_budget_alert_fires_at_its_share_of_the_budget_and_never_without_one() -> None:
    config = BillingConfig()
    assert config.budget_alert_percent == 80
    assert not config.budget_alert_due(10**15, None)  # no budget: no alert, no refusal
    assert not config.budget_alert_due(0, 0)  # no overage yet
    assert not config.budget_alert_due(799, 1_000)
    assert config.budget_alert_due(800, 1_000)
    assert config.budget_alert_due(1, 0)
    assert BillingConfig(budget_alert_percent=50).budget_alert_due(500, 1_000)
    with pytest.raises(CreditError, match="budget_alert_percent"):
        BillingConfig(budget_alert_percent=0)


# ---------------------------------------------------------------------- policy documents


@pytest.mark.parametrize(
    ("doc", "complaint"),
    [
        ({"startsAt": "0001-01-01T00:00:00Z"}, "startsAt must be from 2000-01-01"),
        ({"endsAt": "9999-12-31T23:59:59-12:00"}, "endsAt must be from 2000-01-01"),
        ({"spendCap": {"credits": 2**62 + 1}}, f"at most {MAX_CREDITS}"),
        ({"operationCap": {"operations": True}}, "non-negative integer"),
        ({"sponsor": {"name": "Game\x00Co"}}, "sponsor.name holds a control"),
        ({"sponsor": {"name": "x" * 201}}, "longer than 200"),
        ({"allowedSelectors": ["0x12345678"] * 1001}, "at most 1000 selectors"),
    ],
)
def test_policy_documents_out_of_bounds_are_refused(doc: dict[str, Any], complaint: str) -> None:
    with pytest.raises(PolicyRulesError) as refused:
        SponsorshipRules.from_json(doc)
    assert complaint in str(refused.value)


# ---------------------------------------------------------------------- an op's gas and fees


def filled(**changes: int) -> UserOperation:
    return replace(op(), **changes)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("max_fee_per_gas", 2**64, "maxFeePerGas"),
        ("max_fee_per_gas", 2**128 - 1, "maxFeePerGas"),
        ("max_priority_fee_per_gas", 2**64, "maxPriorityFeePerGas"),
        ("call_gas_limit", 30_000_001, "callGasLimit"),
        ("pre_verification_gas", 2**255, "preVerificationGas"),
        ("paymaster_post_op_gas_limit", 2**100, "paymasterPostOpGasLimit"),
    ],
)
def test_each_field_is_refused_by_name_with_its_bound(field: str, value: int, named: str) -> None:
    limits = SanityLimits.for_chain(CHAIN)
    with pytest.raises(BundlerError) as refused:
        check_bounds(filled(**{field: value}), limits)
    error = refused.value.to_rpc()
    assert error["code"] == -32602 and error["message"].startswith(f"{named} {value} is above")
    bound = limits.max_fee_per_gas if "Fee" in named else limits.max_gas_limit
    assert str(bound) in error["message"]


def test_a_filled_op_is_held_to_its_sum_its_validation_and_a_tip_under_its_fee() -> None:
    limits = SanityLimits.for_chain(CHAIN)
    check_op_gas(filled(), limits)
    for changes, complaint in (
        ({"call_gas_limit": 14_900_000}, "total gas"),
        ({"verification_gas_limit": 10_000_001}, "verificationGasLimit 10000001"),
        ({"max_priority_fee_per_gas": 41 * GWEI}, "above maxFeePerGas"),
    ):
        with pytest.raises(BundlerError, match=complaint):
            check_op_gas(filled(**changes), limits)
    # While estimating, a 3-byte preVerificationGas placeholder and unset fees pass.
    check_bounds(filled(pre_verification_gas=0xFFFFFF, max_fee_per_gas=0), limits)


def test_each_network_has_a_fee_ceiling_far_above_its_prices() -> None:
    assert fee_rules_for(137).max_fee_per_gas == 50_000 * GWEI  # Polygon: 10 x 5,000 gwei
    assert fee_rules_for(8453).max_fee_per_gas == 1_000 * GWEI  # Base: 10 x 100 gwei
    assert fee_rules_for(31337).max_fee_per_gas == 100_000 * GWEI  # unlisted: 10 x 10,000
    for n in NETWORKS.values():
        assert n.fee_rules.max_fee_per_gas >= 10 * max(n.fee_rules.min_priority_fee_per_gas, GWEI)


gas = st.integers(0, 15_000_000)
fees = st.integers(0, 10**15) | st.integers(0, 2**128 - 1)  # mostly under the ceilings


@given(gas, gas, gas, gas, gas, fees, st.sampled_from(sorted(NETWORKS)))
def test_an_op_within_bounds_never_costs_more_credits_than_the_ledger_holds(
    pvg: int, verification: int, call: int, pm_verification: int, post_op: int, fee: int,
    chain_id: int,
) -> None:  # fmt: skip
    candidate = filled(
        pre_verification_gas=pvg, verification_gas_limit=verification, call_gas_limit=call,
        paymaster_verification_gas_limit=pm_verification, paymaster_post_op_gas_limit=post_op,
        max_fee_per_gas=fee, max_priority_fee_per_gas=0,
    )  # fmt: skip
    try:
        check_op_gas(candidate, SanityLimits.for_chain(chain_id))
    except BundlerError:
        return
    assert estimated_quote(default_price_book(), chain_id, candidate).credits <= MAX_CREDITS


# ---------------------------------------------------------------------- the paymaster


class SpentBook(InMemorySponsorships):
    """Holds like the ledger of a project whose owner's budget is spent."""

    async def hold(self, project_id: str, idempotency_key: str, quote: Quote, *args: Any,
                   **kwargs: Any) -> MemoryUsageRecord:  # fmt: skip
        raise BudgetExceededError(quote.credits, 5_000, 5_000)


def paymaster(book: InMemorySponsorships) -> PaymasterRpc:
    chain = PaymasterChain(CHAIN, EP, PM, block_time, SanityLimits.for_chain(CHAIN))
    return PaymasterRpc(
        {CHAIN: chain}, PaymasterSigner(OWNER_KEY), book, book, book, default_price_book(),
        clock=lambda: NOW,
    )  # fmt: skip


async def refusal(pm: PaymasterRpc, method: str, args: list[Any]) -> dict[str, Any]:
    with pytest.raises(BundlerError) as refused:
        await pm.dispatch(method, args, CALLER)
    error: dict[str, Any] = refused.value.to_rpc()
    return error


@pytest.mark.parametrize("fee", [2**64, 2**128 - 1])
async def test_the_paymaster_refuses_a_fee_above_the_ceiling_and_holds_nothing(fee: int) -> None:
    book = InMemorySponsorships()
    pm = paymaster(book)
    greedy = op(max_fee_per_gas=fee, max_priority_fee_per_gas=30 * GWEI)
    for method in ("pm_getPaymasterStubData", "pm_getPaymasterData"):
        error = await refusal(pm, method, params(greedy))
        assert error["code"] == -32602
        assert error["message"] == (
            f"maxFeePerGas {fee} is above this chain's ceiling of {50_000 * GWEI} wei"
        )
    assert not book.events


async def test_a_paymaster_gas_limit_above_the_maximum_is_refused_not_lowered() -> None:
    book = InMemorySponsorships()
    pm = paymaster(book)
    raw, *rest = params(op())  # no paymaster named yet, its limits given
    for limits in ({"paymasterVerificationGasLimit": hex(500_001)},
                   {"paymasterPostOpGasLimit": hex(500_001)}):  # fmt: skip
        for method in ("pm_getPaymasterStubData", "pm_getPaymasterData"):
            error = await refusal(pm, method, [{**raw, **limits}, *rest])
            assert error["code"] == -32602
            assert "500001 is above this paymaster's maximum of 500000" in error["message"]
    assert not book.events
    at_most = {**raw, "paymasterVerificationGasLimit": hex(500_000)}
    signed = await pm.dispatch("pm_getPaymasterData", [at_most, *rest], CALLER)
    assert signed["paymasterVerificationGasLimit"] == hex(500_000)  # as the client sent it


@pytest.mark.parametrize("chain", [True, CHAIN, float(CHAIN)])
async def test_the_chain_id_parameter_is_a_hex_string(chain: Any) -> None:
    raw, entry_point, _, context = params(op())
    error = await refusal(paymaster(InMemorySponsorships()), "pm_getPaymasterData",
                          [raw, entry_point, chain, context])  # fmt: skip
    assert error["code"] == -32602 and "chainId: expected a hex string" in error["message"]


async def test_a_hold_past_the_owners_budget_is_a_paymaster_refusal() -> None:
    error = await refusal(paymaster(SpentBook()), "pm_getPaymasterData", params(op()))
    assert error["code"] == -32501
    assert error["data"] == {"rule": "budget_exceeded", "policyId": None}
    assert "spending budget of 5000 credits" in error["message"]
