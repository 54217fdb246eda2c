"""What validation learns about an op: gas, prefund, validity windows, entities' stakes."""

from __future__ import annotations

from dataclasses import dataclass

from entryway.bundler.validation.rules import Entities, StakeInfo
from entryway.domain.userop import UserOperation

_ADDRESS_MASK = 2**160 - 1
_UINT48_MAX = 2**48 - 1
SIG_VALIDATION_FAILED = 1
# An op must stay valid this long after it is accepted, or it could not be bundled in time.
MIN_VALIDITY_S = 30
MIN_VALIDITY_BLOCKS = 2  # likewise, for a validity range in blocks (EntryPoint v0.9)
# EntryPoint v0.9: validAfter and validUntil both above this flag are block numbers (masked).
VALIDITY_BLOCK_RANGE_FLAG = 0x800000000000
_BLOCK_MASK = VALIDITY_BLOCK_RANGE_FLAG - 1


@dataclass(frozen=True, slots=True)
class ValidationData:
    """The EntryPoint's packed validation data, unpacked."""

    aggregator: int  # 0: none, 1: signature failed, else an aggregator address
    valid_after: int
    valid_until: int  # 0 in the packed form means "no expiry", kept here as 2**48-1

    @classmethod
    def unpack(cls, value: int) -> ValidationData:
        until = (value >> 160) & _UINT48_MAX
        return cls(value & _ADDRESS_MASK, value >> 208, until or _UINT48_MAX)

    def block_range(self) -> tuple[int, int] | None:
        """(validAfter, validUntil) as block numbers when both carry EntryPoint v0.9's
        block-range flag (the op is valid in the blocks after the first, to the second)."""
        if self.valid_after > VALIDITY_BLOCK_RANGE_FLAG < self.valid_until:
            return self.valid_after & _BLOCK_MASK, self.valid_until & _BLOCK_MASK
        return None

    @property
    def signature_failed(self) -> bool:
        return self.aggregator == SIG_VALIDATION_FAILED

    @property
    def has_aggregator(self) -> bool:
        return self.aggregator > SIG_VALIDATION_FAILED


@dataclass(frozen=True, slots=True)
class ValidationOutcome:
    pre_op_gas: int
    prefund: int
    account: ValidationData
    paymaster: ValidationData
    paymaster_context: bytes
    sender_stake: StakeInfo
    factory_stake: StakeInfo
    paymaster_stake: StakeInfo
    # Contracts whose storage validation touched (beyond the EntryPoint), for ERC-7562 STO-041.
    storage_touched: frozenset[str] = frozenset()
    # ERC-7562 COD-010: the code hash of every contract validation used, to compare before
    # bundling (a changed one voids the op).
    code_hashes: tuple[tuple[str, bytes], ...] = ()

    def entities(self, entry_point: str, op: UserOperation) -> Entities:
        """Who is who in `op`, with the stakes this simulation read, as the rules judge."""
        return Entities(
            entry_point=entry_point,
            sender=op.sender,
            factory=op.factory,
            paymaster=op.paymaster,
            sender_stake=self.sender_stake,
            factory_stake=self.factory_stake if op.factory else None,
            paymaster_stake=self.paymaster_stake if op.paymaster else None,
        )

    def expired_by_block(self, block: int) -> int | None:
        """The block a v0.9 block range (the account's or the paymaster's) ended at, if it
        ended before the block after `block`."""
        for data in (self.account, self.paymaster):
            blocks = data.block_range()
            if blocks is not None and blocks[1] < block + 1:
                return blocks[1]
        return None

    @property
    def valid_after(self) -> int:
        return max(self.account.valid_after, self.paymaster.valid_after)

    @property
    def valid_until(self) -> int:
        return min(self.account.valid_until, self.paymaster.valid_until)
