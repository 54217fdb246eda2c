"""How deep a chain's blocks must be before what they carry counts as final. Pure.

Two depths per chain, in blocks:

- the **finality depth**: an op's receipt with at least this many confirmations (its own
  block counting as the first) is final, and so are the credits its sponsorship settled
  (`creditsFinal`); until then the credits show in balances but may still be reversed;
- the **reorg depth**: how many recent blocks the chain's follower compares, hash against
  parent hash (`chain.follower`). It is never less than the finality depth.

Defaults, where the settings give none: Polygon PoS (137, 80002) 128 blocks, about four
minutes, the depth past which Polygon's own guidance treats a block as irreversible; Base
(8453, 84532) 60 blocks, two minutes, by which its sequencer's blocks are derived from the
batches posted to L1 (the "safe" head), the only point where a Base block can reorg; any
other chain 64. A development node (anvil, Hardhat, Ganache) mines on demand and reorgs only
when told to, so there an op is final once mined (depth 1), while its follower still watches
64 blocks: a devnet restarted from older state loses its newest blocks, and those are seen.
"""

from __future__ import annotations

from dataclasses import dataclass

FINALITY_DEPTHS = {137: 128, 80002: 128, 8453: 60, 84532: 60}
OTHER_CHAIN_FINALITY_DEPTH = 64
DEV_NODE_FINALITY_DEPTH = 1
MIN_REORG_DEPTH = 64
DEV_NODES = ("anvil", "hardhat", "ganache")


@dataclass(frozen=True, slots=True)
class Finality:
    finality_depth: int
    reorg_depth: int

    def confirmations(self, head: int, block: int) -> int:
        """A block's confirmations with `head` the latest: itself and every block on it."""
        return max(head - block + 1, 0)

    def is_final(self, head: int, block: int) -> bool:
        return self.confirmations(head, block) >= self.finality_depth

    def final_up_to(self, head: int) -> int:
        """The newest block number that is final with `head` the latest."""
        return head - self.finality_depth + 1


def is_dev_node(client_version: str) -> bool:
    """Whether `web3_clientVersion` names a development node."""
    return client_version.strip().lower().startswith(DEV_NODES)


def finality_of(
    chain_id: int,
    *,
    finality_depth: int | None = None,
    reorg_depth: int | None = None,
    dev_node: bool = False,
) -> Finality:
    """The chain's depths: those configured, else its defaults (above)."""
    if finality_depth is None:
        default = FINALITY_DEPTHS.get(chain_id, OTHER_CHAIN_FINALITY_DEPTH)
        finality_depth = DEV_NODE_FINALITY_DEPTH if dev_node else default
    if reorg_depth is None:
        reorg_depth = max(finality_depth, MIN_REORG_DEPTH)
    return Finality(finality_depth, max(reorg_depth, finality_depth))
