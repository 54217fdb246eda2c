"""OP-stack predeploys a devnet of an OP-stack chain needs: the GasPriceOracle at
0x4200…000F, so the L1 data fee is quoted and charged as on the real chain.

The stand-in's runtime code is placed with anvil_setCode and its L1 prices written straight
into its storage slots (no constructor runs), at every start: a saved state from before
keeps working, and a change of prices takes effect.
"""

from __future__ import annotations

from entryway import contracts
from entryway.chain.rpc import JsonRpcClient
from entryway.devnet.fees import L1Prices

GAS_PRICE_ORACLE = "DevnetGasPriceOracle"


def _slot_values(prices: L1Prices) -> tuple[int, ...]:
    # The stand-in's storage layout: slots 0..3 in declaration order.
    return (
        prices.l1_base_fee,
        prices.blob_base_fee,
        prices.base_fee_scalar,
        prices.blob_base_fee_scalar,
    )


async def place_gas_price_oracle(rpc: JsonRpcClient, address: str, prices: L1Prices) -> None:
    runtime = contracts.load(GAS_PRICE_ORACLE).deployed_bytecode
    await rpc.request("anvil_setCode", [address, "0x" + runtime.hex()])
    for slot, value in enumerate(_slot_values(prices)):
        await rpc.request(
            "anvil_setStorageAt", [address, hex(slot), "0x" + value.to_bytes(32, "big").hex()]
        )
