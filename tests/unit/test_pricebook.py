from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from entryway.domain.pricebook import OperationType, PriceBook, default_price_book

BOOK = default_price_book()
GWEI = 10**9


def test_gas_converts_at_one_credit_per_micro_euro() -> None:
    # 100,000 gas at 30 gwei on Polygon: 0.003 POL at 0.20 EUR = 600 µEUR = 600 credits.
    assert BOOK.gas_credits(80002, 100_000 * 30 * GWEI) == 600
    # The same on Base at 0.01 gwei: 1e12 wei of ETH at 3,000 EUR = 3,000 µEUR.
    assert BOOK.gas_credits(84532, 100_000 * GWEI // 100) == 3_000
    assert BOOK.gas_credits(80002, 1) == 1  # never free: rounded up


def test_a_sponsored_op_is_validation_plus_sponsorship_plus_relay() -> None:
    quote = BOOK.sponsored_user_operation(80002, calls=1, calldata_bytes=100, gas_cost_wei=0)
    assert dict(quote.breakdown) == {"validation": 100, "sponsorship": 100, "relay": 300}
    assert quote.credits == 500 and quote.operation is OperationType.SPONSORED_USER_OPERATION


@given(st.integers(1, 50), st.integers(0, 10_000), st.integers(0, 10**16))
def test_a_batch_costs_the_sum_of_its_calls(calls: int, calldata: int, gas_wei: int) -> None:
    batch = BOOK.sponsored_user_operation(
        80002, calls=calls, calldata_bytes=calldata, gas_cost_wei=gas_wei
    )
    one = BOOK.sponsored_user_operation(
        80002, calls=1, calldata_bytes=calldata, gas_cost_wei=gas_wei
    )
    assert batch.credits - one.credits == BOOK.relay_per_call * (calls - 1)
    assert batch.credits == sum(c for _, c in batch.breakdown)


@given(st.integers(0, 10**15), st.integers(0, 10**15))
def test_network_conditions_only_ever_raise_the_price(low: int, extra: int) -> None:
    assert BOOK.gas_credits(137, low) <= BOOK.gas_credits(137, low + extra)


def test_notarization_is_fee_plus_size_factor_times_steps() -> None:
    assert BOOK.notarization_quote(data_bytes=32, verification_steps=1).credits == 500 + 10
    big = BOOK.notarization_quote(data_bytes=25 * 1024 * 1024, verification_steps=2)
    assert dict(big.breakdown) == {"service": 500, "data": 10 * 25 * 1024 * 2}


def test_verification_steps_drive_recovery_and_guardian_costs() -> None:
    two = BOOK.recovery_quote(80002, guardian_confirmations=2, gas_cost_wei=0)
    three = BOOK.recovery_quote(80002, guardian_confirmations=3, gas_cost_wei=0)
    assert three.credits - two.credits == BOOK.per_verification_step
    change = BOOK.guardian_management(80002, verification_steps=1, gas_cost_wei=0)
    assert change.credits == BOOK.guardian_change + BOOK.per_verification_step
    assert BOOK.account_creation_quote(84532, 0).credits == BOOK.account_creation


def test_reads_are_free_by_default_and_everything_is_configuration() -> None:
    assert BOOK.read_query().credits == 0
    custom = PriceBook(native_token_micro_eur={1337: 1_000_000}, read=1, webhook_delivery=3)
    assert custom.read_query().credits == 1 and custom.webhook().credits == 3
    assert custom.gas_credits(1337, 10**18) == 1_000_000
