"""A plain EOA sends UserOperations from its own address through a running `entryway up`: its
first op carries its EIP-7702 authorization to the devnet's Simple7702Account and lands in a
type-4 bundle, later ones carry none; the SDK reads the delegation and undoes it by a type-4
transaction of the EOA's own or a relayer's; the blocking client does the same."""

from __future__ import annotations

import asyncio

import pytest
from entryway_sdk import SIMPLE_7702_ACCOUNT, Entryway, EntrywaySync, delegate_of
from eth_account import Account

from tests.sdk.conftest import Service
from tests.sdk.test_existing_account_service import balance, client

pytestmark = pytest.mark.anvil
__all__ = ["client"]  # the fixture, shared with the existing-account tests

CHAIN = 80002


async def code(service: Service, address: str) -> bytes:
    return bytes.fromhex((await service.node(CHAIN, "eth_getCode", address, "latest"))[2:])


async def bundle_of(service: Service, tx_hash: str) -> dict[str, object]:
    tx: dict[str, object] = await service.node(CHAIN, "eth_getTransactionByHash", tx_hash)
    return tx


async def test_the_devnet_carries_simple_7702_account_and_the_defaults_name_it(
    client: Entryway, service: Service
) -> None:
    assert client.defaults.simple_7702_account == SIMPLE_7702_ACCOUNT
    assert await code(service, SIMPLE_7702_ACCOUNT) != b""


async def test_an_eoa_is_delegated_by_its_first_sponsored_op_and_not_again(
    client: Entryway, service: Service
) -> None:
    owner = Account.create()  # holds nothing: the paymaster pays
    eoa = client.eoa(owner)
    recipient = Account.create().address
    assert eoa.address == owner.address and await eoa.delegation() is None

    first = await eoa.send({"to": recipient, "data": b"gm"})
    assert first.user_operation is not None and first.user_operation.eip7702_auth is not None
    assert first.user_operation.eip7702_auth.delegate == SIMPLE_7702_ACCOUNT
    receipt = await first.wait(timeout=30)
    assert receipt.success and receipt.sender == owner.address
    assert receipt.paymaster == client.defaults.paymaster
    bundle = await bundle_of(service, receipt.transaction_hash)
    assert int(str(bundle["type"]), 16) == 4
    assert await eoa.delegation() == SIMPLE_7702_ACCOUNT and await eoa.is_delegated()
    assert delegate_of(await code(service, owner.address)) == SIMPLE_7702_ACCOUNT

    second = await eoa.send([{"to": recipient}, {"to": recipient, "data": b"again"}])
    assert second.user_operation is not None and second.user_operation.eip7702_auth is None
    receipt = await second.wait(timeout=30)
    assert receipt.success and await eoa.nonce() == 2
    assert int(str((await bundle_of(service, receipt.transaction_hash))["type"]), 16) == 2
    assert await balance(service, owner.address) == 0


async def test_a_self_paid_eoa_undoes_its_delegation_itself(
    client: Entryway, service: Service
) -> None:
    owner = Account.create()
    await service.node(CHAIN, "anvil_setBalance", owner.address, hex(10**18))
    eoa = client.eoa(owner)
    recipient = Account.create().address

    receipt = await (await eoa.send({"to": recipient, "value": 777}, sponsored=False)).wait(30)
    assert receipt.success and receipt.paymaster is None and receipt.actual_gas_cost > 0
    assert await balance(service, recipient) == 777
    assert await eoa.is_delegated()

    tx_hash = await eoa.undelegate()
    tx = await bundle_of(service, tx_hash)
    assert int(str(tx["type"]), 16) == 4 and str(tx["from"]).lower() == owner.address.lower()
    assert await eoa.delegation() is None and await code(service, owner.address) == b""


async def test_a_relayer_undoes_a_delegation_and_the_next_op_delegates_again(
    client: Entryway, service: Service
) -> None:
    owner, relayer = Account.create(), Account.create()
    await service.node(CHAIN, "anvil_setBalance", relayer.address, hex(10**18))
    eoa = client.eoa(owner)
    assert (await (await eoa.send({"to": relayer.address})).wait(30)).success
    assert await eoa.is_delegated()

    tx_hash = await eoa.undelegate(relayer)
    tx = await bundle_of(service, tx_hash)
    assert str(tx["from"]).lower() == relayer.address.lower()
    assert await eoa.delegation() is None
    assert await balance(service, owner.address) == 0  # the relayer paid

    again = await eoa.send({"to": relayer.address})
    assert again.user_operation is not None and again.user_operation.eip7702_auth is not None
    assert (await again.wait(30)).success and await eoa.is_delegated()


def test_the_blocking_client_delegates_sends_and_undoes(service: Service) -> None:
    owner = Account.create()
    with EntrywaySync.init(
        api_key=service.api_key,
        rpc_url=service.rpc_url(CHAIN),
        chain_id=CHAIN,
        base_url=service.url,
    ) as client:
        eoa = client.eoa(owner)
        assert eoa.delegation() is None
        assert eoa.send({"to": owner.address}).wait(timeout=30).success
        assert eoa.delegation() == SIMPLE_7702_ACCOUNT and eoa.nonce() == 1
        assert eoa.send({"to": owner.address}).wait(timeout=30).success and eoa.nonce() == 2
        relayer = Account.create()
        asyncio.run(service.node(CHAIN, "anvil_setBalance", relayer.address, hex(10**18)))
        assert eoa.undelegate(relayer).startswith("0x")
        assert eoa.delegation() is None and not eoa.is_delegated()
