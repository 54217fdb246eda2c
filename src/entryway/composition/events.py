"""Hooks that turn what the service notices into webhook events: credit alerts, a sponsored
op's receipt (and the account it deployed), a sponsored op dropped or its hold released
unsent, a sponsored op whose block a reorg removed, a paymaster deposit running low. Wired
by the composition root."""

from __future__ import annotations

from entryway.bundler.port import Receipt
from entryway.domain.webhooks import EventPublisher, EventType
from entryway.paymaster.deposit import DepositAlert, DepositStatus
from entryway.paymaster.inclusions import Reversal
from entryway.paymaster.reorgs import Reorged
from entryway.paymaster.settlement import Dropped, ReleasedUnsent, Settled, SponsoredOp
from entryway.service.metering import AlertHook
from entryway.storage.store import Store
from entryway.storage.webhooks import WebhookStore


def alert_events(events: WebhookStore) -> AlertHook:
    """Credit alerts (once per cycle each) become webhook events."""

    async def emit(project_id: str, kind: str, data: dict[str, object]) -> None:
        await events.emit(EventType(kind), project_id, data)

    return emit


def op_events(events: EventPublisher) -> Settled:
    """A sponsored op's receipt becomes userop.included or userop.failed, and, when the op
    deployed its account, account.deployed (once per account and chain)."""

    async def emit(sponsored: SponsoredOp, receipt: Receipt) -> None:
        kind = EventType.USEROP_INCLUDED if receipt.success else EventType.USEROP_FAILED
        data = {
            "chainId": sponsored.chain_id,
            "entryPoint": receipt.entry_point,
            "userOpHash": sponsored.user_op_hash,
            "sender": sponsored.op.sender,
            "nonce": hex(sponsored.op.nonce),
            "transactionHash": receipt.transaction_hash,
            "blockNumber": receipt.block_number,
            "success": receipt.success,
            "actualGasCost": hex(receipt.actual_gas_cost),
            "actualGasUsed": hex(receipt.actual_gas_used),
            "reason": receipt.reason,
            "submittedBy": sponsored.submitted_by,
        }
        key = f"{kind.value}:{sponsored.chain_id}:{sponsored.user_op_hash}"
        if sponsored.reorged:  # mined again after a reorg removed its block: announced again
            key += f"#{sponsored.reorged}"
        await events.emit(kind, sponsored.project_id, data, idempotency_key=key)
        if receipt.deployed is not None:
            await _account_deployed(events, sponsored, receipt)

    return emit


async def _account_deployed(
    events: EventPublisher, sponsored: SponsoredOp, receipt: Receipt
) -> None:
    deployed = receipt.deployed
    assert deployed is not None
    data = {
        "chainId": sponsored.chain_id,
        "account": deployed.account,
        "factory": deployed.factory,
        "paymaster": deployed.paymaster,
        "userOpHash": sponsored.user_op_hash,
        "transactionHash": receipt.transaction_hash,
        "blockNumber": receipt.block_number,
    }
    # An account is deployed once per chain: keyed by it, not by the op.
    key = f"{EventType.ACCOUNT_DEPLOYED.value}:{sponsored.chain_id}:{deployed.account.lower()}"
    await events.emit(EventType.ACCOUNT_DEPLOYED, sponsored.project_id, data, idempotency_key=key)


def dropped_events(events: EventPublisher) -> Dropped:
    """A sponsored op dropped unmined (its hold released) becomes userop.dropped."""

    async def emit(sponsored: SponsoredOp, reason: str) -> None:
        data = {
            "chainId": sponsored.chain_id,
            "userOpHash": sponsored.user_op_hash,
            "sender": sponsored.op.sender,
            "nonce": hex(sponsored.op.nonce),
            "reason": reason,
        }
        key = f"{EventType.USEROP_DROPPED.value}:{sponsored.chain_id}:{sponsored.user_op_hash}"
        await events.emit(EventType.USEROP_DROPPED, sponsored.project_id, data, idempotency_key=key)

    return emit


def reorged_events(events: EventPublisher) -> Reorged:
    """A settled sponsorship reversed because a reorg removed its op's block becomes
    userop.reorged (once per reversal)."""

    async def emit(reversal: Reversal) -> None:
        data = {
            "chainId": reversal.chain_id,
            "userOpHash": reversal.user_op_hash,
            "transactionHash": reversal.transaction_hash,
            "blockNumber": reversal.block_number,
            "creditsReversed": reversal.credits,
        }
        key = (
            f"{EventType.USEROP_REORGED.value}:{reversal.chain_id}:{reversal.user_op_hash}"
            f":{reversal.reversals}"
        )
        await events.emit(EventType.USEROP_REORGED, reversal.project_id, data, idempotency_key=key)

    return emit


def unsent_events(events: EventPublisher) -> ReleasedUnsent:
    """A hold released because its op was never sent becomes userop.dropped: the op has no
    userOpHash the service saw, so the event names the hold (`sponsorshipKey`)."""

    async def emit(project_id: str, hold_key: str, reason: str) -> None:
        data = {
            "chainId": _chain_of(hold_key),
            "userOpHash": None,
            "sponsorshipKey": hold_key,
            "reason": reason,
        }
        key = f"{EventType.USEROP_DROPPED.value}:{hold_key}"
        await events.emit(EventType.USEROP_DROPPED, project_id, data, idempotency_key=key)

    return emit


def _chain_of(hold_key: str) -> int | None:
    """`sponsor:{chainId}:{hash}` (entryway.paymaster.costs.sponsorship_key)."""
    parts = hold_key.split(":")
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def deposit_events(store: Store, events: WebhookStore) -> DepositAlert:
    """paymaster.deposit_low to every project that has the chain enabled, naming the paymaster
    and its EntryPoint (the service has one paymaster per EntryPoint release)."""

    async def alert(status: DepositStatus) -> None:
        data = {
            "chainId": status.chain_id,
            "entryPoint": status.entry_point,
            "paymaster": status.paymaster,
            "depositWei": str(status.deposit_wei),
            "thresholdWei": str(status.threshold_wei),
        }
        for project_id in await store.project_ids_with_chain(status.chain_id):
            await events.emit(EventType.PAYMASTER_DEPOSIT_LOW, project_id, data)

    return alert
