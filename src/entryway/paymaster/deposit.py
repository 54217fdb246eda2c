"""A paymaster's deposit at its EntryPoint, which pays for every op it sponsors: read it,
watch it against a threshold (alerting once each time it falls below), and top it up. The
service has one paymaster per EntryPoint release, each with its own deposit. Also the
on-chain signer set, which a key rotation changes."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol

from entryway import contracts
from entryway.chain.rpc import EthClient, RpcError, RpcTransportError, TxReceipt
from entryway.chain.transactor import Transactor
from entryway.domain.entry_points import EntryPointVersion, version_at
from entryway.domain.evm import checksum

log = logging.getLogger("entryway.paymaster.deposit")
EP = contracts.load("EntryPoint").abi
PAYMASTER = contracts.load("VerifyingPaymaster").abi


@dataclass(frozen=True, slots=True)
class DepositStatus:
    """One reading of a paymaster's deposit at an EntryPoint."""

    chain_id: int
    entry_point: str
    paymaster: str
    deposit_wei: int
    threshold_wei: int

    @property
    def low(self) -> bool:
        return self.deposit_wei < self.threshold_wei


@dataclass(frozen=True, slots=True)
class PaymasterDeposit:
    """One of a chain's paymasters, at its EntryPoint, and its deposit as last read."""

    entry_point: str
    paymaster: str
    reading: DepositStatus | None  # None: not read yet

    @property
    def version(self) -> EntryPointVersion:
        return version_at(self.entry_point)


class DepositAlert(Protocol):
    """Told when the deposit falls below the threshold (the service: dashboard and the
    `paymaster.deposit_low` webhook event)."""

    async def __call__(self, status: DepositStatus) -> None: ...


async def read_deposit(eth: EthClient, entry_point: str, paymaster: str) -> int:
    raw = await eth.call(entry_point, EP.encode_call("balanceOf", checksum(paymaster)))
    return int(EP.decode_output("balanceOf", raw)[0])


async def top_up(
    transactor: Transactor, entry_point: str, paymaster: str, amount_wei: int
) -> TxReceipt:
    """Add `amount_wei` to the paymaster's deposit (`EntryPoint.depositTo`; anyone may)."""
    if amount_wei <= 0:
        raise ValueError("a top-up is a positive amount of wei")
    data = EP.encode_call("depositTo", checksum(paymaster))
    return await transactor.send(entry_point, data, value=amount_wei)


async def is_signer(eth: EthClient, paymaster: str, signer: str) -> bool:
    raw = await eth.call(paymaster, PAYMASTER.encode_call("isSigner", checksum(signer)))
    return bool(PAYMASTER.decode_output("isSigner", raw)[0])


async def set_signer(owner: Transactor, paymaster: str, signer: str, allowed: bool) -> TxReceipt:
    """Add (`allowed`) or remove a signer; only the paymaster's owner may."""
    data = PAYMASTER.encode_call("setSigner", checksum(signer), allowed)
    return await owner.send(paymaster, data)


class DepositWatcher:
    """Checks one paymaster's deposit at its EntryPoint on one chain; `run` checks every
    `interval_s` seconds."""

    def __init__(
        self,
        eth: EthClient,
        chain_id: int,
        entry_point: str,
        paymaster: str,
        threshold_wei: int,
        alert: DepositAlert,
    ) -> None:
        self.eth = eth
        self.chain_id = chain_id
        self.entry_point = checksum(entry_point)
        self.paymaster = checksum(paymaster)
        self.threshold_wei = threshold_wei
        self.alert = alert
        self._alerted = False

    async def check(self) -> DepositStatus:
        deposit = await read_deposit(self.eth, self.entry_point, self.paymaster)
        status = DepositStatus(
            self.chain_id, self.entry_point, self.paymaster, deposit, self.threshold_wei
        )
        if status.low and not self._alerted:
            log.warning(
                "paymaster %s at EntryPoint %s on chain %d: deposit %d wei below %d",
                self.paymaster, self.entry_point, self.chain_id, deposit, self.threshold_wei,
            )  # fmt: skip
            await self.alert(status)
        # Alert again only after the deposit has recovered and fallen once more.
        self._alerted = status.low
        return status

    async def run(self, interval_s: float) -> None:
        while True:
            try:
                await self.check()
            except (RpcError, RpcTransportError) as exc:
                log.warning(
                    "cannot read the deposit of paymaster %s on chain %d: %s",
                    self.paymaster, self.chain_id, exc,
                )  # fmt: skip
            await asyncio.sleep(interval_s)
