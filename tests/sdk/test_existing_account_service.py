"""The SDK relays for an existing EntryPoint v0.7 account against a running `entryway up`: a
SimpleAccount of the npm 0.7.0 release, deployed beforehand by the devnet's v0.7
SimpleAccountFactory, sends a call paid by itself and one sponsored by Entryway's v0.7
paymaster, signed by its owner's EIP-191 signature through the callback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from entryway_sdk import (
    ENTRY_POINT_V07,
    ENTRY_POINT_V08,
    Entryway,
    EntrywaySync,
    ExistingAccount,
    personal_sign,
)
from entryway_sdk.signer import as_signer, sign
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount
from eth_utils.address import to_checksum_address

from entryway import contracts
from tests.sdk.conftest import Service

pytestmark = pytest.mark.anvil

CHAIN = 80002
FACTORY = contracts.load("SimpleAccountFactoryV07").abi


@pytest.fixture
async def client(service: Service) -> AsyncIterator[Entryway]:
    async with await Entryway.init(
        api_key=service.api_key,
        rpc_url=service.rpc_url(CHAIN),
        chain_id=CHAIN,
        base_url=service.url,
    ) as client:
        yield client


async def deployed_simple_account(
    service: Service, factory: str | None, owner: LocalAccount, *, deployer: str | None = None
) -> str:
    """A v0.7 SimpleAccount of `owner`, deployed by a plain transaction to its `factory` (not
    by a UserOperation: the account exists before the SDK sees it), sent from `deployer`
    (impersonated; a later release's factory takes calls from its SenderCreator only)."""
    assert factory is not None, "the devnet deploys a v0.7 SimpleAccountFactory"
    raw = await service.node(
        CHAIN,
        "eth_call",
        {"to": factory, "data": "0x" + FACTORY.encode_call("getAddress", owner.address, 0).hex()},
        "latest",
    )
    address = to_checksum_address("0x" + raw[-40:])
    deployer = deployer or Account.create().address
    await service.node(CHAIN, "anvil_setBalance", deployer, hex(10**18))
    await service.node(CHAIN, "anvil_impersonateAccount", deployer)
    tx = await service.node(
        CHAIN,
        "eth_sendTransaction",
        {
            "from": deployer,
            "to": factory,
            "data": "0x" + FACTORY.encode_call("createAccount", owner.address, 0).hex(),
        },
    )
    for _ in range(100):
        receipt = await service.node(CHAIN, "eth_getTransactionReceipt", tx)
        if receipt is not None:
            break
        await asyncio.sleep(0.1)
    assert receipt is not None and receipt["status"] == "0x1", receipt
    assert await service.node(CHAIN, "eth_getCode", address, "latest") not in ("0x", "")
    return address


async def existing(client: Entryway, service: Service) -> ExistingAccount:
    owner = Account.create()
    factory = client.defaults.simple_account_factory_v07
    address = await deployed_simple_account(service, factory, owner)
    account = client.account(address, signer=personal_sign(owner))
    assert account.entry_point == ENTRY_POINT_V07 == client.defaults.entry_point_v07
    return account


async def balance(service: Service, address: str) -> int:
    return int(await service.node(CHAIN, "eth_getBalance", address, "latest"), 16)


async def test_an_existing_v07_account_pays_for_its_own_op(
    client: Entryway, service: Service
) -> None:
    account = await existing(client, service)
    await service.node(CHAIN, "anvil_setBalance", account.address, hex(10**18))
    recipient = Account.create().address

    op = await account.send({"to": recipient, "value": 12345}, sponsored=False)
    receipt = await op.wait(timeout=30)

    assert receipt.success and receipt.sender == account.address and receipt.paymaster is None
    assert receipt.raw["entryPoint"] == ENTRY_POINT_V07
    assert receipt.actual_gas_cost > 0
    assert await balance(service, recipient) == 12345
    assert await account.nonce() == 1
    status = await client.op_status(op.user_op_hash)
    assert status.status == "included" and status.transaction_hash == receipt.transaction_hash


async def test_an_existing_v07_account_is_sponsored(client: Entryway, service: Service) -> None:
    account = await existing(client, service)  # holds nothing: the paymaster pays
    recipient = Account.create().address

    op = await account.send([{"to": recipient, "data": b"gm"}, {"to": recipient}])
    receipt = await op.wait(timeout=30)

    assert client.defaults.paymaster_v07 is not None
    assert receipt.success and receipt.paymaster == client.defaults.paymaster_v07
    assert receipt.raw["entryPoint"] == ENTRY_POINT_V07
    assert await balance(service, account.address) == 0
    assert await account.nonce() == 1


def test_the_blocking_client_relays_with_a_plain_function(service: Service) -> None:
    owner = Account.create()

    def sign(user_op_hash: bytes) -> bytes:  # what a wallet's personal_sign gives
        return bytes(owner.sign_message(encode_defunct(primitive=user_op_hash)).signature)

    with EntrywaySync.init(
        api_key=service.api_key,
        rpc_url=service.rpc_url(CHAIN),
        chain_id=CHAIN,
        base_url=service.url,
    ) as client:
        factory = client.client.defaults.simple_account_factory_v07
        address = asyncio.run(deployed_simple_account(service, factory, owner))
        account = client.account(address, signer=sign)
        receipt = account.send({"to": owner.address}).wait(timeout=30)
        assert receipt.success and receipt.sender == address and account.nonce() == 1


async def test_an_existing_v08_account_is_relayed_through_the_chains_entry_point(
    client: Entryway, service: Service
) -> None:
    """An Entryway SmartAccount, deployed beforehand, relayed for as any v0.8 account: the
    EIP-712 userOpHash, signed as it is by its owner; sponsored, then self-paid."""
    owner = Account.create()
    wallet = await client.wallet(owner)
    assert (await (await wallet.deploy()).wait(timeout=30)).success
    signer = as_signer(owner)
    account = client.account(
        wallet.address,
        signer=lambda digest: sign(signer, digest),
        entry_point=client.defaults.entry_point,
    )
    assert account.entry_point == ENTRY_POINT_V08
    recipient = Account.create().address

    sponsored = await (await account.send({"to": recipient, "data": b"gm"})).wait(timeout=30)
    assert sponsored.success and sponsored.paymaster == client.defaults.paymaster
    assert sponsored.raw["entryPoint"] == ENTRY_POINT_V08 and await account.nonce() == 2

    await service.node(CHAIN, "anvil_setBalance", wallet.address, hex(10**18))
    paid = await (await account.send({"to": recipient, "value": 99}, sponsored=False)).wait(30)
    assert paid.success and paid.paymaster is None and paid.sender == wallet.address
    assert await balance(service, recipient) == 99 and await account.nonce() == 3
