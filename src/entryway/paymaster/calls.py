"""What an account's call data will call, read for the policies' allowlists.

Readable: the `execute(address,uint256,bytes)` and `executeBatch(Call[])` of EntryPoint
v0.8's BaseAccount (Entryway's SmartAccount, the release's SimpleAccount), the older
SimpleAccount batches `executeBatch(address[],bytes[])` and
`executeBatch(address[],uint256[],bytes[])`, and ERC-7579 `execute(bytes32,bytes)` (Kernel,
Nexus, Safe7579) in its single and batch call types. Anything else is unreadable (None);
empty call data makes no call at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eth_abi.abi import decode, encode

from entryway.domain.evm import checksum, keccak
from entryway.domain.sponsorship import Call


def _selector(signature: str) -> bytes:
    return keccak(signature.encode())[:4]


EXECUTE = _selector("execute(address,uint256,bytes)")
EXECUTE_BATCH = _selector("executeBatch((address,uint256,bytes)[])")
EXECUTE_BATCH_V06 = _selector("executeBatch(address[],bytes[])")
EXECUTE_BATCH_V07 = _selector("executeBatch(address[],uint256[],bytes[])")
ERC7579_EXECUTE = _selector("execute(bytes32,bytes)")
_ERC7579_SINGLE, _ERC7579_BATCH = 0x00, 0x01


def _execute(args: bytes) -> tuple[Call, ...]:
    target, value, data = decode(["address", "uint256", "bytes"], args)
    return (Call(checksum(target), value, data),)


def _execute_batch(args: bytes) -> tuple[Call, ...]:
    (calls,) = decode(["(address,uint256,bytes)[]"], args)
    return tuple(Call(checksum(t), v, d) for t, v, d in calls)


def _execute_batch_v06(args: bytes) -> tuple[Call, ...]:
    targets, datas = decode(["address[]", "bytes[]"], args)
    if datas and len(datas) != len(targets):
        raise ValueError("targets and data differ in length")
    return tuple(Call(checksum(t), 0, datas[i] if datas else b"") for i, t in enumerate(targets))


def _execute_batch_v07(args: bytes) -> tuple[Call, ...]:
    targets, values, datas = decode(["address[]", "uint256[]", "bytes[]"], args)
    if len(datas) != len(targets) or (values and len(values) != len(targets)):
        raise ValueError("batch arrays differ in length")
    return tuple(
        Call(checksum(t), values[i] if values else 0, datas[i]) for i, t in enumerate(targets)
    )


def _erc7579_execute(args: bytes) -> tuple[Call, ...] | None:
    mode, execution = decode(["bytes32", "bytes"], args)
    call_type = mode[0]
    if call_type == _ERC7579_SINGLE:
        if len(execution) < 52:
            raise ValueError("single execution shorter than target and value")
        value = int.from_bytes(execution[20:52], "big")
        return (Call(checksum(execution[:20]), value, execution[52:]),)
    if call_type == _ERC7579_BATCH:
        return _execute_batch(execution)
    return None  # delegatecall, static call or a type this reader does not know


_DECODERS: dict[bytes, Callable[[bytes], tuple[Call, ...] | None]] = {
    EXECUTE: _execute,
    EXECUTE_BATCH: _execute_batch,
    EXECUTE_BATCH_V06: _execute_batch_v06,
    EXECUTE_BATCH_V07: _execute_batch_v07,
    ERC7579_EXECUTE: _erc7579_execute,
}


def decode_calls(call_data: bytes) -> tuple[Call, ...] | None:
    """The calls the account will make, or None when they cannot be read."""
    if not call_data:
        return ()
    decoder = _DECODERS.get(call_data[:4])
    if decoder is None:
        return None
    try:
        return decoder(call_data[4:])
    except Exception:  # malformed ABI of any kind: unreadable, never an error
        return None


def call_count(calls: tuple[Call, ...] | None) -> int:
    """How many calls the price book charges relay for: at least one."""
    return max(len(calls), 1) if calls is not None else 1


def encode_execute(target: str, value: int, data: bytes) -> bytes:
    """`execute(target, value, data)`, as the v0.8 BaseAccount takes it."""
    return EXECUTE + encode(["address", "uint256", "bytes"], [checksum(target), value, data])


def encode_execute_batch(calls: list[tuple[str, int, bytes]]) -> bytes:
    rows: list[Any] = [(checksum(t), v, d) for t, v, d in calls]
    return EXECUTE_BATCH + encode(["(address,uint256,bytes)[]"], [rows])
