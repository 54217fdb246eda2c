"""A struct-logger answer read without decoding every step.

A traced validation is hundreds of steps of a few hundred bytes each, and the ERC-7562 walk
(`trace.parse_struct_logs`) looks closely at a few dozen of them: the rest it needs only the
opcode and depth of. Decoding the whole answer was a fifth of the bundler's CPU under load;
one regular-expression pass gives every step's opcode, depth and place, and a step is
decoded only when the walk asks for it. An answer laid out otherwise than expected (another
node's key order, a step the pass cannot read) is decoded whole, as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, overload

import orjson

_ARRAY = b'"structLogs":['
_FIRST = b'{"pc":'
_BETWEEN = b'},{"pc":'  # where one step ends and the next begins
# A step as anvil and geth write it: pc, op, gas, gasCost, depth, then the rest.
_STEP = re.compile(rb'\{"pc":\d+,"op":"([^"\\]+)","gas":\d+,"gasCost":-?\d+,"depth":(\d+),')
_ERROR = b'"error":'


class ScannedSteps(Sequence[dict[str, Any]]):
    """The steps of one trace: `ops`, `depths` and `errored` (indexes of steps that carry
    an error) for all of them; a step's full record decoded on indexing."""

    def __init__(self, region: bytes, pieces: list[bytes], ops: list[str], depths: list[int]):
        self._pieces = pieces  # the array's text split between steps
        self.ops = ops
        self.depths = depths
        self.errored: set[int] = set()
        at = region.find(_ERROR)
        while at != -1:  # rare: a step that faulted
            self.errored.add(region.count(_BETWEEN, 0, at))
            at = region.find(_ERROR, at + len(_ERROR))
        self._decoded: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._pieces)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | Sequence[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        step = self._decoded.get(index)
        if step is None:
            piece = self._pieces[index]  # IndexError past the end, as a list's
            text = (_FIRST if index else b"") + piece
            if index < len(self._pieces) - 1:
                text += b"}"
            step = self._decoded[index] = orjson.loads(text)
        return step

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[i] for i in range(len(self)))


def decode_struct_logs(raw: bytes) -> Any:
    """A JSON-RPC answer to a struct-logger `debug_traceCall`, its `structLogs` scanned
    (ScannedSteps); any other answer decoded as usual."""
    array = raw.find(_ARRAY)
    tail = raw.rstrip()
    if array == -1 or not tail.endswith(b"]}}"):  # an error, or not structLogs last
        return orjson.loads(raw)
    first = array + len(_ARRAY)
    end = len(tail) - 3  # the array's closing bracket
    region = raw[first:end]
    found = _STEP.findall(raw, first, end)
    pieces = region.split(_BETWEEN)
    if not region.startswith(_FIRST) or len(pieces) != len(found):
        return orjson.loads(raw)  # a step the pass did not read: decode it all
    answer = orjson.loads(raw[:first] + raw[end:])
    ops = [op.decode() for op, _ in found]
    depths = [int(depth) for _, depth in found]
    answer["result"]["structLogs"] = ScannedSteps(region, pieces, ops, depths)
    return answer
