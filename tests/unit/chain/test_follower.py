"""The chain follower's reorg detection: against a simulated node whose chain forks at any
depth, it reports exactly the blocks the node no longer has, and nothing when it has them."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from entryway.chain.finality import finality_of, is_dev_node
from entryway.chain.follower import BlockRef, CanonicalWindow

_ids = itertools.count()


def grow(chain: list[BlockRef], blocks: int) -> list[BlockRef]:
    """`chain` with `blocks` new blocks on top, each with a hash never used before."""
    out = list(chain)
    for _ in range(blocks):
        parent = out[-1] if out else None
        number = parent.number + 1 if parent else 0
        out.append(BlockRef(number, f"0x{next(_ids):064x}", parent.hash if parent else "0x0"))
    return out


def follow(window: CanonicalWindow, node: list[BlockRef]) -> list[BlockRef]:
    """One poll of the follower against a node whose canonical chain is `node`."""
    segment = [node[-1]]
    while (number := window.next_needed(segment)) is not None:
        segment.insert(0, node[number])
    return window.advance(segment)


@given(
    depth=st.integers(1, 40),
    before=st.integers(1, 60),
    fork_back=st.integers(0, 60),
    after=st.integers(0, 60),
)
def test_a_reorg_within_the_window_reports_exactly_the_blocks_removed(
    depth: int, before: int, fork_back: int, after: int
) -> None:
    old = grow([], before)
    window = CanonicalWindow(depth)
    follow(window, old)
    held = {b.hash for b in window.blocks()}
    keep = max(len(old) - fork_back, 1)  # the genesis block stays
    new = grow(old[:keep], after)
    removed = follow(window, new)
    gone = [b for b in old[keep:] if b.hash in held]
    # Read back as far as the blocks held, up to 4 windows from the node's head.
    if fork_back + after <= 3 * depth or not gone:
        assert removed == gone
    else:  # the node far ahead: at most what was held, never a block the node has
        assert {b.hash for b in removed} <= {b.hash for b in gone}
    canonical = {b.hash for b in new}
    assert all(b.hash in canonical for b in window.blocks())
    assert follow(window, new) == []  # a second poll of the same chain removes nothing


@given(depth=st.integers(1, 40), steps=st.lists(st.integers(1, 30), max_size=10))
def test_a_chain_that_only_grows_removes_nothing(depth: int, steps: list[int]) -> None:
    chain = grow([], 1)
    window = CanonicalWindow(depth)
    for step in steps:
        chain = grow(chain, step)
        assert follow(window, chain) == []
        assert len(window.blocks()) <= depth


def test_a_node_restarted_from_older_state_loses_its_newest_blocks() -> None:
    # As a devnet restarted from a state saved seconds before: blocks 17-23 are gone, the
    # node's head is block 16 again, with no new block yet.
    chain = grow([], 24)
    window = CanonicalWindow(64)
    follow(window, chain)
    removed = follow(window, chain[:17])
    assert [b.number for b in removed] == list(range(17, 24))
    mined_again = grow(chain[:17], 3)
    assert follow(window, mined_again) == []  # the new blocks 17-19 replace nothing held


def test_a_block_replaced_at_the_head_is_removed() -> None:
    chain = grow([], 10)
    window = CanonicalWindow(8)
    follow(window, chain)
    sibling = grow(chain[:9], 1)
    assert follow(window, sibling) == [chain[9]]


def test_depths_default_per_chain_and_for_development_nodes() -> None:
    assert finality_of(137).finality_depth == 128
    assert finality_of(8453).finality_depth == 60
    assert finality_of(999).finality_depth == 64
    dev = finality_of(80002, dev_node=True)
    assert (dev.finality_depth, dev.reorg_depth) == (1, 64)
    assert finality_of(80002, finality_depth=5, dev_node=True).finality_depth == 5
    assert finality_of(137, reorg_depth=10).reorg_depth == 128  # never under finality
    assert is_dev_node("anvil/v1.3.1") and not is_dev_node("Geth/v1.14")
    depths = finality_of(1, finality_depth=3)
    assert [depths.is_final(head, 10) for head in (9, 10, 11, 12)] == [False] * 3 + [True]
    assert depths.confirmations(12, 10) == 3
