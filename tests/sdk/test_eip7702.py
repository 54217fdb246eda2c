"""The SDK's EIP-7702 authorizations: the digest is the one eth-account and the bundler
compute, the signature recovers to the EOA, and delegation code reads back."""

from __future__ import annotations

import pytest
from entryway_sdk import Authorization, authorization_digest, delegate_of
from entryway_sdk.eip7702 import sign_authorization
from entryway_sdk.signer import as_signer
from entryway_sdk.userop import UserOperation
from eth_account import Account
from hypothesis import given, settings
from hypothesis import strategies as st

from entryway.domain import eip7702 as service

DELEGATE = "0xe6Cae83BdE06E4c305530e199D7217f42808555B"


@settings(max_examples=40, deadline=None)
@given(
    chain_id=st.sampled_from([0, 1, 137, 80002, 84532, 2**64 - 1]),
    nonce=st.integers(min_value=0, max_value=2**64 - 1),
    delegate=st.binary(min_size=20, max_size=20),
)
def test_the_digest_is_the_bundlers(chain_id: int, nonce: int, delegate: bytes) -> None:
    address = "0x" + delegate.hex()
    expected = service.Authorization(chain_id, service.checksum(address), nonce, 0, 0, 0).digest()
    assert authorization_digest(chain_id, address, nonce) == expected


async def test_a_signed_authorization_is_eth_accounts_and_recovers_to_the_eoa() -> None:
    eoa = Account.create()
    mine = await sign_authorization(as_signer(eoa), 80002, DELEGATE, 7)
    theirs = Account.sign_authorization(
        {"chainId": 80002, "address": DELEGATE, "nonce": 7}, eoa.key
    )
    assert (mine.y_parity, mine.r, mine.s) == (theirs.y_parity, theirs.r, theirs.s)
    parsed = service.Authorization(
        mine.chain_id, mine.delegate, mine.nonce, mine.y_parity, mine.r, mine.s
    )
    assert parsed.signer() == eoa.address
    assert Authorization.from_rpc(mine.to_rpc()) == mine


def test_an_op_carries_its_authorization_on_the_wire_and_back() -> None:
    auth = Authorization(80002, DELEGATE, 3, 1, 5, 6)
    op = UserOperation(sender="0x" + "11" * 20, nonce=0, call_data=b"", eip7702_auth=auth)
    wire = op.to_rpc()
    assert wire["eip7702Auth"] == {
        "chainId": "0x13882",
        "address": DELEGATE,
        "nonce": "0x3",
        "yParity": "0x1",
        "r": "0x5",
        "s": "0x6",
    }
    assert UserOperation.from_rpc(wire) == op
    assert "eip7702Auth" not in op.with_(eip7702_auth=None).to_rpc()


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (b"", None),
        (bytes.fromhex("ef0100") + bytes.fromhex(DELEGATE[2:]), DELEGATE),
        (bytes.fromhex("ef0100") + bytes(20), None),  # cleared
        (bytes.fromhex("6080604052"), None),  # a contract
        (bytes.fromhex("ef0100") + bytes.fromhex(DELEGATE[2:]) + b"\x00", None),
    ],
)
def test_the_delegate_is_read_from_the_code(code: bytes, expected: str | None) -> None:
    assert delegate_of(code) == expected
