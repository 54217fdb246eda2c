"""EntryPoint v0.8 at its canonical address, byte for byte the npm release."""

from __future__ import annotations

from eth_abi.abi import encode

from entryway import contracts
from entryway.deploy.plan import ENTRY_POINT_ADDRESS
from entryway.domain.evm import address_bytes
from tests.integration.harness import EP, Harness


async def test_runtime_code_is_the_npm_artifact_with_its_immutables_filled(
    harness: Harness,
) -> None:
    assert harness.deployment.entry_point == ENTRY_POINT_ADDRESS
    artifact = contracts.load("EntryPoint")
    code = await harness.eth.get_code(ENTRY_POINT_ADDRESS)
    assert len(code) == len(artifact.deployed_bytecode)
    ranges = artifact.immutable_ranges()
    # Outside the immutable slots, every byte is the artifact's.
    assert artifact.runtime_matches(code)
    # ... and inside them sit exactly the values this chain and address give: the
    # SenderCreator the EntryPoint created, its own address and chain id (EIP-712 cache).
    sender_creator = await harness.call(ENTRY_POINT_ADDRESS, EP, "senderCreator")
    filled = {code[start:end] for start, end in ranges}
    expected_words = {
        encode(["address"], [sender_creator]),
        encode(["address"], [ENTRY_POINT_ADDRESS]),
        encode(["uint256"], [harness.chain_id]),
    }
    assert expected_words <= filled
    assert address_bytes(sender_creator) not in artifact.deployed_bytecode


async def test_a_changed_byte_is_detected(harness: Harness) -> None:
    artifact = contracts.load("EntryPoint")
    code = bytearray(await harness.eth.get_code(ENTRY_POINT_ADDRESS))
    code[100] ^= 0xFF
    assert not artifact.runtime_matches(bytes(code))


async def test_domain_separator_is_the_v08_one(harness: Harness) -> None:
    from entryway.domain.userop import entry_point_domain_separator

    on_chain = await harness.call(ENTRY_POINT_ADDRESS, EP, "getDomainSeparatorV4")
    assert on_chain == entry_point_domain_separator(ENTRY_POINT_ADDRESS, harness.chain_id)
