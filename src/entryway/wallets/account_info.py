"""What the chain says about an account: deployed or not, its EntryPoint nonce and deposit, and,
for Entryway's SmartAccount, owner, guardians, threshold and any pending recovery."""

from __future__ import annotations

from dataclasses import dataclass

from entryway.chain.logs import contract_logs
from entryway.chain.rpc import EthClient, RpcError
from entryway.contracts import load
from entryway.deploy.deployer import Deployment
from entryway.domain.evm import checksum

EP = load("EntryPoint").abi
ACCOUNT = load("SmartAccount").abi
FACTORY = load("AccountFactory").abi


@dataclass(frozen=True, slots=True)
class Recovery:
    new_owner: str
    execute_after: int


@dataclass(frozen=True, slots=True)
class AccountInfo:
    address: str
    deployed: bool
    nonce: int  # EntryPoint nonce, key 0
    deposit: int  # wei at the EntryPoint
    smart_account: bool  # Entryway's SmartAccount (owner and guardians below are read)
    owner: str | None = None
    guardians: tuple[str, ...] = ()
    threshold: int = 0
    pending_recovery: Recovery | None = None


async def read_account(eth: EthClient, deployment: Deployment, address: str) -> AccountInfo:
    address = checksum(address)
    ep = deployment.entry_point
    code = await eth.get_code(address)
    nonce = EP.decode_output(
        "getNonce", await eth.call(ep, EP.encode_call("getNonce", address, 0))
    )[0]
    deposit = EP.decode_output(
        "balanceOf", await eth.call(ep, EP.encode_call("balanceOf", address))
    )[0]
    base = AccountInfo(address, bool(code), int(nonce), int(deposit), False)
    if not code:
        return base
    try:
        owner = await _read(eth, address, "owner")
        threshold = await _read(eth, address, "guardianThreshold")
        new_owner, after = ACCOUNT.decode_output(
            "pendingRecovery", await eth.call(address, ACCOUNT.encode_call("pendingRecovery"))
        )
    except (RpcError, ValueError):
        return base  # another kind of account: what the EntryPoint knows is all there is
    guardians = await _guardians(eth, address)
    pending = None if int(after) == 0 else Recovery(checksum(new_owner), int(after))
    return AccountInfo(
        address,
        True,
        int(nonce),
        int(deposit),
        True,
        checksum(str(owner)),
        guardians,
        int(str(threshold)),
        pending,
    )


async def _read(eth: EthClient, address: str, fn: str) -> object:
    return ACCOUNT.decode_output(fn, await eth.call(address, ACCOUNT.encode_call(fn)))[0]


async def _guardians(eth: EthClient, address: str) -> tuple[str, ...]:
    """The guardian set from GuardianAdded / GuardianRemoved logs, confirmed by isGuardian."""
    added = "0x" + ACCOUNT.event_topic("GuardianAdded").hex()
    removed = "0x" + ACCOUNT.event_topic("GuardianRemoved").hex()
    logs = await contract_logs(eth, {"address": address, "topics": [[added, removed]]})
    seen: dict[str, None] = {}
    for log in logs:
        guardian = checksum("0x" + str(log["topics"][1])[-40:])
        seen[guardian] = None
    confirmed = []
    for guardian in seen:
        data = await eth.call(address, ACCOUNT.encode_call("isGuardian", guardian))
        if ACCOUNT.decode_output("isGuardian", data)[0]:
            confirmed.append(guardian)
    return tuple(confirmed)
