"""Which account an included op deployed: the EntryPoint's `AccountDeployed(userOpHash,
sender, factory, paymaster)` log for that op in its bundle's transaction receipt. Reading the
log rather than the op's initCode leaves out EIP-7702 ops, whose initCode deploys nothing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from entryway import contracts
from entryway.domain.evm import checksum, hex_to_bytes

EP = contracts.load("EntryPoint").abi
ACCOUNT_DEPLOYED_EVENT = EP.event_topic("AccountDeployed")


@dataclass(frozen=True, slots=True)
class AccountDeployment:
    account: str  # checksummed
    factory: str
    paymaster: str  # the zero address when the account paid for itself


def account_deployment(
    logs: Iterable[Mapping[str, Any]], entry_point: str, user_op_hash: str
) -> AccountDeployment | None:
    """The account `user_op_hash` deployed, from its transaction's logs; None if it deployed
    none."""
    ep = checksum(entry_point)
    op_hash = hex_to_bytes(user_op_hash)
    for log in logs:
        topics = [hex_to_bytes(t) for t in log.get("topics", ())]
        if len(topics) < 3 or topics[0] != ACCOUNT_DEPLOYED_EVENT or topics[1] != op_hash:
            continue
        if checksum(str(log["address"])) != ep:
            continue
        event = EP.decode_event("AccountDeployed", topics, hex_to_bytes(str(log["data"])))
        return AccountDeployment(
            checksum(event["sender"]), checksum(event["factory"]), checksum(event["paymaster"])
        )
    return None
