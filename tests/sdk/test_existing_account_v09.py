"""The SDK relays for an existing EntryPoint v0.9 account against a running `entryway up`: a
SimpleAccount of the v0.9 release candidate (the devnet's v0.9, docs/devnets.md), deployed
beforehand by the devnet's v0.9 SimpleAccountFactory, sends a call paid by itself and one
sponsored by Entryway's v0.9 paymaster, whose signature sits in v0.9's paymasterSignature."""

from __future__ import annotations

import pytest
from entryway_sdk import ENTRY_POINT_V09, Entryway, ExistingAccount
from entryway_sdk.userop import ENTRY_POINT_V09_DEVNET, PAYMASTER_SIGNATURE_MAGIC
from eth_account import Account
from eth_utils.address import to_checksum_address

from entryway import contracts
from tests.sdk import test_existing_account_service as service_v07
from tests.sdk.conftest import Service
from tests.sdk.test_existing_account_service import balance, deployed_simple_account

pytestmark = pytest.mark.anvil

CHAIN = 80002
FACTORY = contracts.load("SimpleAccountFactoryV09").abi


client = service_v07.client  # the fixture: the SDK's client of the running service


async def existing(client: Entryway, service: Service) -> ExistingAccount:
    owner = Account.create()
    factory = client.defaults.simple_account_factory_v09
    assert factory is not None
    raw = await service.node(
        CHAIN,
        "eth_call",
        {"to": factory, "data": "0x" + FACTORY.encode_call("senderCreator").hex()},
    )
    sender_creator = to_checksum_address("0x" + raw[-40:])
    address = await deployed_simple_account(service, factory, owner, deployer=sender_creator)
    entry_point = client.defaults.entry_point_v09
    assert entry_point == ENTRY_POINT_V09_DEVNET != ENTRY_POINT_V09  # a devnet: rc.1's

    def sign(user_op_hash: bytes) -> bytes:  # v0.9's SimpleAccount: ECDSA over the hash itself
        return bytes(owner.unsafe_sign_hash(user_op_hash).signature)

    return client.account(address, signer=sign, entry_point=entry_point)


async def test_an_existing_v09_account_pays_for_its_own_op(
    client: Entryway, service: Service
) -> None:
    account = await existing(client, service)
    await service.node(CHAIN, "anvil_setBalance", account.address, hex(10**18))
    recipient = Account.create().address

    op = await account.send({"to": recipient, "value": 12345}, sponsored=False)
    receipt = await op.wait(timeout=30)

    assert receipt.success and receipt.sender == account.address and receipt.paymaster is None
    assert receipt.raw["entryPoint"] == ENTRY_POINT_V09_DEVNET
    assert await balance(service, recipient) == 12345
    assert await account.nonce() == 1


async def test_an_existing_v09_account_is_sponsored(client: Entryway, service: Service) -> None:
    account = await existing(client, service)  # holds nothing: the paymaster pays
    recipient = Account.create().address

    op = await account.send({"to": recipient, "data": b"gm"})
    receipt = await op.wait(timeout=30)

    assert client.defaults.paymaster_v09 is not None
    assert receipt.success and receipt.paymaster == client.defaults.paymaster_v09
    assert receipt.raw["entryPoint"] == ENTRY_POINT_V09_DEVNET
    assert await balance(service, account.address) == 0
    found = await service.node(CHAIN, "eth_getTransactionByHash", receipt.transaction_hash)
    assert PAYMASTER_SIGNATURE_MAGIC.hex() in found["input"]  # signed in v0.9's suffix
