"""Sends EIP-1559 transactions from one local key and waits for them to be mined.

For operator tasks (deploying, funding, staking). The bundler keeps its own transaction
manager with fee bumping and replacement; this one sends one transaction at a time.
"""

from __future__ import annotations

from typing import Any

from eth_account.signers.local import LocalAccount

from entryway.chain.rpc import EthClient, TransactionFailedError, TxReceipt
from entryway.domain.evm import checksum, to_hex
from entryway.domain.networks import NETWORKS

# Headroom over eth_estimateGas: estimates are exact for the state they ran on, and a
# CREATE2 deployment's gas can shift with the 63/64 rule when it nests calls.
_GAS_HEADROOM_PERCENT = 125


class Transactor:
    def __init__(self, eth: EthClient, account: LocalAccount, chain_id: int) -> None:
        self.eth = eth
        self.account = account
        self.chain_id = chain_id

    @property
    def address(self) -> str:
        return str(self.account.address)

    async def fees(self) -> tuple[int, int]:
        """(maxFeePerGas, maxPriorityFeePerGas) for a transaction to be mined promptly."""
        block = await self.eth.get_block("latest")
        base_fee = int(block.get("baseFeePerGas", "0x0"), 16)
        priority = await self.eth.max_priority_fee()
        network = NETWORKS.get(self.chain_id)
        if network is not None:
            priority = max(priority, network.fee_rules.min_priority_fee_per_gas)
        return 2 * base_fee + priority, priority

    async def send(
        self, to: str | None, data: bytes = b"", *, value: int = 0, gas: int | None = None
    ) -> TxReceipt:
        if gas is None:
            estimate = await self.eth.estimate_gas(to, data, sender=self.address, value=value)
            gas = estimate * _GAS_HEADROOM_PERCENT // 100
        max_fee, priority = await self.fees()
        tx: dict[str, Any] = {
            "type": 2,
            "chainId": self.chain_id,
            "nonce": await self.eth.get_nonce(self.address),
            "to": checksum(to) if to is not None else None,
            "value": value,
            "data": to_hex(data),
            "gas": gas,
            "maxFeePerGas": max_fee,
            "maxPriorityFeePerGas": priority,
        }
        if to is None:
            del tx["to"]
        signed = self.account.sign_transaction(tx)
        tx_hash = await self.eth.send_raw_transaction(bytes(signed.raw_transaction))
        receipt = await self.eth.wait_for_receipt(tx_hash)
        if not receipt.succeeded:
            raise TransactionFailedError(tx_hash, "reverted")
        return receipt
