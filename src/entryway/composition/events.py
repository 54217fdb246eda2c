"""Hooks that turn what the service notices into webhook events: credit alerts, a sponsored
op's receipt, a paymaster deposit running low. Wired by the composition root."""

from __future__ import annotations

from entryway.bundler.port import Receipt
from entryway.domain.webhooks import EventType
from entryway.paymaster.deposit import DepositAlert, DepositStatus
from entryway.paymaster.settlement import Settled, SponsoredOp
from entryway.service.metering import AlertHook
from entryway.storage.store import Store
from entryway.storage.webhooks import WebhookStore


def alert_events(events: WebhookStore) -> AlertHook:
    """Credit alerts (once per cycle each) become webhook events."""

    async def emit(project_id: str, kind: str, data: dict[str, object]) -> None:
        await events.emit(EventType(kind), project_id, data)

    return emit


def op_events(events: WebhookStore) -> Settled:
    """A sponsored op's receipt becomes userop.included or userop.failed."""

    async def emit(sponsored: SponsoredOp, receipt: Receipt) -> None:
        kind = EventType.USEROP_INCLUDED if receipt.success else EventType.USEROP_FAILED
        data = {
            "chainId": sponsored.chain_id,
            "userOpHash": sponsored.user_op_hash,
            "sender": sponsored.op.sender,
            "transactionHash": receipt.transaction_hash,
            "actualGasCost": hex(receipt.actual_gas_cost),
            "reason": receipt.reason,
        }
        key = f"{kind.value}:{sponsored.chain_id}:{sponsored.user_op_hash}"
        await events.emit(kind, sponsored.project_id, data, idempotency_key=key)

    return emit


def deposit_events(store: Store, events: WebhookStore) -> DepositAlert:
    """paymaster.deposit_low to every project that has the chain enabled."""

    async def alert(status: DepositStatus) -> None:
        data = {
            "chainId": status.chain_id,
            "paymaster": status.paymaster,
            "depositWei": str(status.deposit_wei),
            "thresholdWei": str(status.threshold_wei),
        }
        for project_id in await store.project_ids_with_chain(status.chain_id):
            await events.emit(EventType.PAYMASTER_DEPOSIT_LOW, project_id, data)

    return alert
