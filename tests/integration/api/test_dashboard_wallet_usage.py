"""The dashboard's usage breakdown by operation type names the wallet operations of ops that
paid their own gas (a deploy, a guardian change), with the credits their relay charges
carried. The dashboard and the API on one app, in-process, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import httpx
from eth_abi.abi import encode
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.dashboard.app import install_dashboard
from entryway.dashboard.names import usage_label
from entryway.dashboard.web import DashboardOptions
from entryway.domain.plans import PlanName
from entryway.domain.pricebook import default_price_book
from entryway.domain.userop import UserOperation
from entryway.domain.wallet_ops import ADD_GUARDIAN
from entryway.paymaster.calls import encode_execute
from entryway.paymaster.relay_accounting import RelayAccounting
from entryway.service.app import create_app
from entryway.service.services import Services
from entryway.storage.accounts import AccountStore
from entryway.storage.store import Store
from tests.integration.api.conftest import ADMIN_TOKEN
from tests.integration.storage.conftest import engine  # noqa: F401 - the fixture

CHAIN = 80002
ACCOUNT = "0x" + "12" * 20
FACTORY = "0x" + "fa" * 20


def user_op(call_data: bytes, nonce: int, factory: str | None = None) -> UserOperation:
    return UserOperation(
        sender=ACCOUNT, nonce=nonce, call_data=call_data, call_gas_limit=50_000,
        verification_gas_limit=100_000, pre_verification_gas=50_000,
        max_fee_per_gas=2_000_000_000, max_priority_fee_per_gas=1_000_000_000,
        factory=factory, factory_data=b"\x01" if factory else b"",
    )  # fmt: skip


def breakdown_row(page: str, operation: str) -> tuple[int, int]:
    """(credits, priced operations) of `operation` in the page's breakdown by operation."""
    section = page[page.index('id="by-operation"') : page.index('id="by-endpoint"')]
    found = re.search(
        rf"<td>{re.escape(usage_label(operation))}</td><td class=\"num\">([\d,]+)</td>"
        rf"<td class=\"num\">([\d,]+)</td>",
        section,
    )
    assert found, section
    return int(found.group(1).replace(",", "")), int(found.group(2).replace(",", ""))


async def test_the_breakdown_by_operation_names_self_paid_wallet_operations(
    engine: AsyncEngine,  # noqa: F811
) -> None:
    services = Services(admin_token=ADMIN_TOKEN)
    store = Store(engine, auth_cache_seconds=0)
    services.attach(store)
    app = create_app(services)
    install_dashboard(app, DashboardOptions(secure_cookies=False))
    accounts = AccountStore(engine)
    now = datetime.now(UTC)
    owner = await accounts.sign_up(f"owner-{now.timestamp()}@example.com", "unused", now)
    pid = await store.create_project(owner, "wallets", PlanName.FREE, [CHAIN], now)
    session, _ = await accounts.open_session(owner, operator=False, at=now)

    prices = default_price_book()
    accounting = RelayAccounting(store.ledger, prices)
    add = encode_execute(ACCOUNT, 0, ADD_GUARDIAN + encode(["address"], ["0x" + "34" * 20]))
    ops = [user_op(b"", 0, FACTORY), user_op(add, 1)]
    for i, op in enumerate(ops):
        await accounting.record_accepted_op(
            project_id=pid, chain_id=CHAIN, op=op, user_op_hash=f"0x{i:064x}",
            service_paymaster=None, endpoint="rpc:eth_sendUserOperation",
        )  # fmt: skip

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://entryway.test") as client:
        page = await client.get(
            f"/dashboard/projects/{pid}/usage", headers={"cookie": f"entryway_session={session}"}
        )
    assert page.status_code == 200, page.text
    relay = prices.validation + prices.relay_per_call
    assert breakdown_row(page.text, "account_creation") == (relay + 1_000, 1)
    assert breakdown_row(page.text, "guardian_management") == (relay + len(add) + 750, 1)
    assert usage_label("relayed_user_operation") not in page.text
