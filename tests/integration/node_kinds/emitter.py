"""A contract of a few bytes that emits whatever UserOperationEvent it is given, placed on a
standalone anvil: receipts and log paging are tested against logs at chosen blocks without
bundling ops (the session's devnet is shared: its head must not jump under other tests)."""

from __future__ import annotations

from eth_abi.abi import encode

from entryway.bundler.receipts import USER_OP_EVENT
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.domain.evm import to_hex

EMITTER = "0x00000000000000000000000000000000000e4e47"
# CALLDATACOPY(0, 0, 0x80); LOG4(0, 0x80, calldata[0x80], [0xa0], [0xc0], [0xe0]); STOP
EMITTER_CODE = "0x6080600060003760e03560c03560a03560803560806000a400"
SENDER = "0x" + "5e" * 20
PAYMASTER = "0x" + "00" * 20


async def place_emitter(node: JsonRpcClient) -> None:
    await node.request("anvil_setCode", [EMITTER, EMITTER_CODE])


async def emit_user_op_event(node: JsonRpcClient, op_hash: bytes, nonce: int = 0) -> int:
    """A UserOperationEvent for `op_hash`, mined in a block of its own; that block's number."""
    data = encode(["uint256", "bool", "uint256", "uint256"], [nonce, True, 21_000, 21_000])
    topics = USER_OP_EVENT + op_hash + bytes(12) + bytes.fromhex(SENDER[2:]) + bytes(32)
    accounts = await node.request("eth_accounts")
    tx = {"from": accounts[0], "to": EMITTER, "data": to_hex(data + topics), "gas": hex(100_000)}
    tx_hash = await node.request("eth_sendTransaction", [tx])
    receipt = await EthClient(node).wait_for_receipt(tx_hash, within_s=10)
    assert receipt.succeeded and len(receipt.logs) == 1
    return receipt.block_number


async def mine(node: JsonRpcClient, blocks: int) -> None:
    """Blocks in steps of 100: anvil mines a long run in one call far more slowly."""
    for step in range(0, blocks, 100):
        await node.request("anvil_mine", [hex(min(100, blocks - step))])
