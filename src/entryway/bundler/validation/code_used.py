"""Whose code an op's validation will use, guessed before it runs.

An admitted op records the hash of every contract's code its validation ran or read (COD-010:
the bundle's second validation compares them). Those addresses are only known from the
trace, so reading their code after it would cost every validation one more node round trip.
Instead the code of the addresses the sender's previous admission used (its account, the
account's implementation, the factory, the paymaster), or for a sender not seen yet its
op's entities, is read beside the simulation, and only what the trace adds is read after it.
The code is read afresh every time; only the list of addresses is remembered.
"""

from __future__ import annotations

from collections import OrderedDict

from entryway.domain.userop import UserOperation

KEPT = 4096  # senders remembered, least recently seen dropped first
MOST = 16  # addresses remembered per sender; a validation using more is not remembered


class CodeUsed:
    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._by_sender: OrderedDict[str, frozenset[str]] = OrderedDict()

    def expected(self, op: UserOperation) -> set[str]:
        """The addresses whose code `op`'s validation is likely to use."""
        guess = {a for a in (op.factory, op.paymaster) if a is not None}
        if op.factory is None and op.eip7702_auth is None:
            guess.add(op.sender)
        return guess | self._by_sender.get(op.sender.lower(), frozenset())

    def seen(self, op: UserOperation, used: set[str]) -> None:
        """`op`'s validation used the code at `used`."""
        sender = op.sender.lower()
        if len(used) > MOST:
            self._by_sender.pop(sender, None)
            return
        self._by_sender[sender] = frozenset(used)
        self._by_sender.move_to_end(sender)
        while len(self._by_sender) > self.kept:
            self._by_sender.popitem(last=False)
