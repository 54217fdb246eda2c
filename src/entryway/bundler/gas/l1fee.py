"""The L1 data fee of OP-stack chains (Base): each op's calldata is also posted to L1, at a
price the GasPriceOracle predeploy quotes; the op pays it through preVerificationGas, and its
receipt shows its share of what its bundle paid (`op_share_wei`)."""

from __future__ import annotations

from typing import Any

from eth_abi.abi import encode

from entryway import contracts
from entryway.chain.rpc import EthClient
from entryway.domain.evm import hex_to_bytes
from entryway.domain.l1_share import packed_op_size, split_fee
from entryway.domain.userop import UserOperation

EP = contracts.load("EntryPoint").abi
# The predeploy's one function we use: getL1Fee(bytes) -> uint256 (wei).
_GET_L1_FEE = bytes.fromhex("49948e0e")
_PLACEHOLDER_BENEFICIARY = "0x000000000000000000000000000000000000dEaD"


class L1FeeQuoter:
    def __init__(self, eth: EthClient, oracle: str) -> None:
        self.eth = eth
        self.oracle = oracle

    async def fee_wei(self, op: UserOperation) -> int:
        """What posting a one-op bundle of `op` to L1 costs now."""
        bundle = EP.encode_call("handleOps", [op.packed()], _PLACEHOLDER_BENEFICIARY)
        return await self.calldata_fee_wei(bundle)

    async def calldata_fee_wei(self, calldata: bytes, block: str = "latest") -> int:
        """The oracle's L1 fee for a transaction carrying `calldata`, as of `block`."""
        raw = await self.eth.call(
            self.oracle, _GET_L1_FEE + encode(["bytes"], [calldata]), block=block
        )
        return int.from_bytes(raw[:32], "big")

    async def op_share_wei(
        self, tx: dict[str, Any], tx_receipt: dict[str, Any], sender: str, nonce: int
    ) -> int | None:
        """The op's (`sender`, `nonce`) share of the L1 fee its bundle `tx` paid: the fee the
        node puts in the receipt (`l1Fee`, as OP-stack nodes do), else the oracle's figure for
        the bundle's calldata at its block; split over the bundle's ops by their bytes in it
        (`domain.l1_share`). None when `tx` is no `handleOps` bundle holding the op."""
        data = hex_to_bytes(tx["input"])
        if data[:4] != EP.selector("handleOps"):
            return None
        (ops, _beneficiary) = EP.decode_call("handleOps", data)
        at = [i for i, p in enumerate(ops) if p[0].lower() == sender.lower() and p[1] == nonce]
        if not at:
            return None
        reported = tx_receipt.get("l1Fee")
        if reported is not None:
            total = int(reported, 16)
        else:
            total = await self.calldata_fee_wei(data, tx_receipt["blockNumber"])
        sizes = [packed_op_size(p[2], p[3], p[7], p[8]) for p in ops]
        return split_fee(total, sizes)[at[0]]

    async def gas(self, op: UserOperation) -> int:
        """The L1 fee in L2 gas at the op's own gas price (rounded up)."""
        price = max(op.max_fee_per_gas, 1)
        return -(-await self.fee_wei(op) // price)
