"""Whether an address holds EntryPoint v0.6. Its canonical deployment's code is not what the
npm release compiles to, so it is known by what it does: it must hash a probe op as v0.6
does. Read by the bundler (which releases to serve) and by `entryway deploy` (its checks)."""

from __future__ import annotations

from entryway import contracts
from entryway.chain.rpc import EthClient, RpcError
from entryway.domain.entry_points import V06
from entryway.domain.userop_v06 import UserOperationV06, user_op_hash_v06

ENTRY_POINT_V06 = contracts.load(V06.artifact("EntryPoint"))
_PROBE = UserOperationV06(
    "0x0000000000000000000000000000000000004337", 1, b"", b"\x01", 2, 3, 4, 5, 6, b"", b""
)


async def answers_as_v06(eth: EthClient, entry_point: str, chain_id: int) -> bool:
    """Whether the code at `entry_point` hashes ops as v0.6 does."""
    data = ENTRY_POINT_V06.abi.encode_call("getUserOpHash", _PROBE.as_tuple())
    try:
        raw = await eth.call(entry_point, data)
    except RpcError:
        return False
    return raw == user_op_hash_v06(_PROBE, entry_point, chain_id)
