"""What the bundler counts for the service's metrics, on a real anvil: a mined bundle, its gas
and its op; an op dropped before bundling."""

from __future__ import annotations

import dataclasses

from entryway.bundler.rpc_types import user_operation_json
from tests.integration.bundler.conftest import RpcClient
from tests.integration.bundler.test_rpc import sponsored_op
from tests.integration.harness import Harness


async def test_a_mined_bundle_counts_its_gas_and_its_op(
    client: RpcClient, harness: Harness
) -> None:
    counts = client.rpc.bundler.counts
    before = dataclasses.replace(counts)
    await client.send(await sponsored_op(harness))
    await client.bundle()

    assert counts.bundles_sent == before.bundles_sent + 1
    assert counts.ops_included == before.ops_included + 1
    assert counts.bundle_gas_used > before.bundle_gas_used
    assert (counts.ops_reverted, counts.ops_dropped) == (before.ops_reverted, before.ops_dropped)


async def test_an_op_failing_the_check_before_bundling_counts_as_dropped(
    client: RpcClient, harness: Harness
) -> None:
    counts = client.rpc.bundler.counts
    before = dataclasses.replace(counts)
    op = await sponsored_op(harness)
    forged = dataclasses.replace(op, signature=b"\x01" * 65)  # not the owner's signature
    await client.result(
        "debug_bundler_addUserOps", [user_operation_json(forged)], client.entry_point
    )

    assert await client.rpc.bundler.bundle_once(wait=True) is None
    assert counts.ops_dropped == before.ops_dropped + 1
    assert counts.bundles_sent == before.bundles_sent
