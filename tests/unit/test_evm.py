from __future__ import annotations

import pytest
from eth_utils.address import to_checksum_address
from hypothesis import given
from hypothesis import strategies as st

from entryway import contracts
from entryway.deploy.plan import (
    DETERMINISTIC_DEPLOYER,
    DETERMINISTIC_DEPLOYER_SIGNER,
    DETERMINISTIC_DEPLOYER_TX,
    ENTRY_POINT_ADDRESS,
    ENTRY_POINT_SALT,
    Operator,
    plan_deployment,
)
from entryway.domain.entry_points import V07, V08
from entryway.domain.evm import checksum, create2_address, create_address


def test_create2_matches_the_eip_1014_examples() -> None:
    zero = "0x0000000000000000000000000000000000000000"
    assert create2_address(zero, bytes(32), b"\x00") == "0x4D1A2e2bB4F88F0250f26Ffff098B0b30B26BF38"
    deployer = "0xdeadbeef00000000000000000000000000000000"
    salt = bytes.fromhex("000000000000000000000000feed000000000000000000000000000000000000")
    assert create2_address(deployer, salt, b"\x00") == "0xD04116cDd17beBE565EB2422F2497E06cC1C9833"
    with pytest.raises(ValueError):
        create2_address(zero, b"\x00", b"")


def test_entry_point_release_lands_at_the_canonical_address() -> None:
    init_code = contracts.load("EntryPoint").bytecode
    assert (
        create2_address(DETERMINISTIC_DEPLOYER, ENTRY_POINT_SALT, init_code) == ENTRY_POINT_ADDRESS
    )


def test_keyless_deployer_transaction_comes_from_its_known_signer() -> None:
    from eth_account import Account

    signer = Account.recover_transaction(DETERMINISTIC_DEPLOYER_TX)
    assert signer.lower() == DETERMINISTIC_DEPLOYER_SIGNER
    assert create_address(signer, 0) == DETERMINISTIC_DEPLOYER


def test_addresses_depend_on_the_operator_but_not_on_the_chain() -> None:
    a = Operator(
        owner="0x1111111111111111111111111111111111111111",
        paymaster_signer="0x2222222222222222222222222222222222222222",
        notary_submitter="0x3333333333333333333333333333333333333333",
    )
    b = Operator(a.paymaster_signer, a.paymaster_signer, a.notary_submitter)
    plan_a, plan_b = plan_deployment(a), plan_deployment(b)
    assert plan_a.entry_point.address == plan_b.entry_point.address == ENTRY_POINT_ADDRESS
    # The factory's constructor takes only the EntryPoint: one address for every operator.
    assert plan_a.account_factory.address == plan_b.account_factory.address
    assert plan_a.paymaster.address != plan_b.paymaster.address
    assert plan_a.notary.address != plan_b.notary.address
    assert plan_a == plan_deployment(a)


def test_each_entry_point_release_lands_at_its_canonical_address() -> None:
    for release in (V08, V07):
        init_code = contracts.load(release.artifact("EntryPoint")).bytecode
        salt = bytes.fromhex(release.salt)
        assert create2_address(DETERMINISTIC_DEPLOYER, salt, init_code) == release.address
    assert V08.address == ENTRY_POINT_ADDRESS


def test_the_plan_deploys_v07_beside_v08_deterministically() -> None:
    a = Operator(
        owner="0x1111111111111111111111111111111111111111",
        paymaster_signer="0x2222222222222222222222222222222222222222",
        notary_submitter="0x3333333333333333333333333333333333333333",
    )
    b = Operator(a.paymaster_signer, a.paymaster_signer, a.notary_submitter)
    plan_a, plan_b = plan_deployment(a), plan_deployment(b)
    assert plan_a.entry_point_v07.address == "0x0000000071727De22E5E9d8BAf0edAc6f37da032"
    assert plan_a.entry_point_v07.artifact == "EntryPointV07"
    assert plan_a.entry_point_v07 in plan_a.contracts()
    assert plan_a.paymaster_v07 in plan_a.contracts()
    assert plan_a.simple_account_factory_v07 in plan_a.contracts()
    # Simple7702Account's npm artifact lands where it is on public chains, for any operator.
    assert plan_a.simple_7702_account.address == "0xe6Cae83BdE06E4c305530e199D7217f42808555B"
    assert plan_a.simple_7702_account in plan_a.contracts()
    # Each EntryPoint precedes what is bound to it.
    order = [c.name for c in plan_a.contracts()]
    assert order.index("entryPointV07") < order.index("paymasterV07")
    assert order.index("entryPointV07") < order.index("simpleAccountFactoryV07")
    # The v0.7 paymaster is the owner's, bound to v0.7: its own address, not v0.8's.
    assert plan_a.paymaster_v07.artifact == "VerifyingPaymasterV07"
    assert plan_a.paymaster_v07.address != plan_a.paymaster.address
    assert plan_a.paymaster_v07.address != plan_b.paymaster_v07.address
    constructor_args = plan_a.paymaster_v07.init_code[-96:]
    assert constructor_args[12:32] == bytes.fromhex(V07.address[2:])
    assert constructor_args[44:64] == bytes.fromhex(a.owner[2:])
    assert constructor_args[76:96] == bytes.fromhex(a.paymaster_signer[2:])
    # The reference factory takes only the EntryPoint: one address for every operator.
    factory = plan_a.simple_account_factory_v07
    assert factory.address == plan_b.simple_account_factory_v07.address
    assert factory.init_code[-20:] == bytes.fromhex(V07.address[2:])
    assert plan_deployment(a) == plan_a
    assert len({c.address for c in plan_a.contracts()}) == len(plan_a.contracts())


# The EIP-55 specification's own examples.
EIP55_EXAMPLES = [
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
    "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
]


@pytest.mark.parametrize("address", EIP55_EXAMPLES)
def test_checksum_gives_the_eip55_form_from_any_spelling(address: str) -> None:
    raw = bytes.fromhex(address[2:])
    assert checksum(address.lower()) == address
    assert checksum(address.upper().replace("0X", "0x")) == address
    assert checksum(address[2:].lower()) == address
    assert checksum(raw) == address


@given(st.binary(min_size=20, max_size=20))
def test_checksum_agrees_with_eth_utils(raw: bytes) -> None:
    assert checksum(raw) == to_checksum_address(raw)
    assert checksum("0x" + raw.hex()) == to_checksum_address(raw)


@pytest.mark.parametrize(
    "bad", ["0x1234", "0x" + "g" * 40, "0x" + "00" * 21, b"\x00" * 19, "", 1234]
)
def test_checksum_refuses_what_is_no_address(bad: object) -> None:
    with pytest.raises(ValueError):
        checksum(bad)  # type: ignore[arg-type]
