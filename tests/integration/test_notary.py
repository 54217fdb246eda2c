"""NotaryAnchor: authorised submitters anchor each root once; `anchoredAt` tells when."""

from __future__ import annotations

import os

from tests.integration.harness import NOTARY, Harness


async def test_anchor_records_block_time_and_emits_an_event(harness: Harness, devnet) -> None:  # type: ignore[no-untyped-def]
    submitter = devnet.keys.notary_submitter
    root = os.urandom(32)
    notary = harness.deployment.notary
    assert await harness.call(notary, NOTARY, "anchoredAt", root) == 0

    receipt = await harness.send_from(submitter, notary, NOTARY.encode_call("anchor", root, 1000))

    block = await harness.eth.get_block(hex(receipt.block_number))
    block_time = int(block["timestamp"], 16)
    assert await harness.call(notary, NOTARY, "anchoredAt", root) == block_time
    timestamp, block_number, leaf_count = await harness.call(notary, NOTARY, "anchorOf", root)
    assert (timestamp, block_number, leaf_count) == (block_time, receipt.block_number, 1000)
    (log,) = receipt.logs
    event = NOTARY.decode_event("Anchored", log.topics, log.data)
    assert event == {
        "root": root,
        "leafCount": 1000,
        "submitter": submitter.address,
        "timestamp": block_time,
    }


async def test_the_same_root_cannot_be_anchored_twice(harness: Harness, devnet) -> None:  # type: ignore[no-untyped-def]
    submitter = devnet.keys.notary_submitter
    root = os.urandom(32)
    notary = harness.deployment.notary
    await harness.send_from(submitter, notary, NOTARY.encode_call("anchor", root, 1))
    error = await harness.revert_error(
        notary, NOTARY, NOTARY.encode_call("anchor", root, 1), sender=submitter.address
    )
    assert error.name == "AlreadyAnchored"
    assert error.args[0] == root


async def test_unauthorised_submitters_are_rejected(harness: Harness) -> None:
    stranger = harness.new_key()
    data = NOTARY.encode_call("anchor", os.urandom(32), 1)
    error = await harness.revert_error(harness.deployment.notary, NOTARY, data, stranger.address)
    assert error.name == "NotSubmitter"


async def test_owner_authorises_new_submitters(harness: Harness) -> None:
    newcomer = harness.new_key()
    notary = harness.deployment.notary
    data = NOTARY.encode_call("setSubmitter", newcomer.address, True)
    error = await harness.revert_error(notary, NOTARY, data, sender=newcomer.address)
    assert error.name == "OwnableUnauthorizedAccount"
    await harness.send_from(harness.operator, notary, data)
    root = os.urandom(32)
    await harness.send_from(newcomer, notary, NOTARY.encode_call("anchor", root, 5))
    assert await harness.call(notary, NOTARY, "anchoredAt", root) > 0


async def test_empty_roots_and_zero_leaves_are_refused(harness: Harness, devnet) -> None:  # type: ignore[no-untyped-def]
    submitter = devnet.keys.notary_submitter.address
    notary = harness.deployment.notary
    for root, leaves in ((bytes(32), 1), (os.urandom(32), 0)):
        data = NOTARY.encode_call("anchor", root, leaves)
        error = await harness.revert_error(notary, NOTARY, data, sender=submitter)
        assert error.name == "InvalidAnchor"
