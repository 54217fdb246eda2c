"""The relay charge of an accepted op is told to the credits metric once: recording the same
op again (a client retrying the send) counts nothing more (SQLite and PostgreSQL)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.pricebook import default_price_book
from entryway.paymaster.relay_accounting import RelayAccounting
from entryway.storage.store import Store
from tests.integration.storage.test_relay_accounting import (
    CHAIN,
    NOW,
    OP_HASH,
    PAYMASTER,
    project,
    user_op,
)


async def test_a_relay_charge_is_counted_once_by_operation(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    counted: list[tuple[str, int]] = []
    accounting = RelayAccounting(
        store.ledger,
        default_price_book(),
        counted=lambda operation, credits: counted.append((operation, credits)),
        clock=lambda: NOW,
    )
    for _ in range(2):
        await accounting.record_accepted_op(
            project_id=pid, chain_id=CHAIN, op=user_op(sponsored=False), user_op_hash=OP_HASH,
            service_paymaster=PAYMASTER, endpoint="rpc:eth_sendUserOperation", key_id=None,
        )  # fmt: skip
    prices = default_price_book()
    relay = prices.validation + prices.relay_per_call + prices.per_calldata_byte * 40
    assert counted == [("relayed_user_operation", relay)]
