"""The L1 data fee of OP-stack chains (Base): each op's calldata is also posted to L1, at a
price the GasPriceOracle predeploy quotes; the op pays it through preVerificationGas."""

from __future__ import annotations

from eth_abi.abi import encode

from entryway import contracts
from entryway.chain.rpc import EthClient
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
        raw = await self.eth.call(self.oracle, _GET_L1_FEE + encode(["bytes"], [bundle]))
        return int.from_bytes(raw[:32], "big")

    async def gas(self, op: UserOperation) -> int:
        """The L1 fee in L2 gas at the op's own gas price (rounded up)."""
        price = max(op.max_fee_per_gas, 1)
        return -(-await self.fee_wei(op) // price)
