"""The SDK relays for existing SimpleAccounts of EntryPoint v0.6 and v0.8 against a running
`entryway up` (v0.7's and v0.9's are in test_existing_account_service and
test_existing_account_v09): each release's reference SimpleAccountFactory, from its npm
artifact, is deployed here (the devnets carry none for these two releases), makes an account
by a plain transaction, and the SDK sends ops for it in the release's own form, signed by the
release's rule (`simple_account_signer`).

v0.6: the op goes unpacked (initCode, paymasterAndData) to the canonical v0.6 address, its
owner signs the EIP-191 message of v0.6's userOpHash; the account pays its own gas.
v0.8: the EIP-712 userOpHash signed as it is; paid by the account, then sponsored by
Entryway's v0.8 paymaster."""

from __future__ import annotations

import asyncio

import pytest
from entryway_sdk import (
    ENTRY_POINT_V06,
    ENTRY_POINT_V08,
    Entryway,
    EntrywaySync,
    ExistingAccount,
    simple_account_signer,
)
from eth_abi.abi import encode
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils.address import to_checksum_address

from entryway import contracts
from tests.sdk import test_existing_account_service as service_v07
from tests.sdk.conftest import Service
from tests.sdk.test_existing_account_service import balance, deployed_simple_account

pytestmark = pytest.mark.anvil

CHAIN = 80002
V06_ACCOUNT = contracts.load("SimpleAccountV06").abi
ENTRY_POINT_V08_ABI = contracts.load("EntryPoint").abi

client = service_v07.client  # the fixture: the SDK's client of the running service


async def _mined(service: Service, tx: str) -> dict[str, str]:
    for _ in range(100):
        receipt = await service.node(CHAIN, "eth_getTransactionReceipt", tx)
        if receipt is not None:
            assert receipt["status"] == "0x1", receipt
            return dict(receipt)
        await asyncio.sleep(0.1)
    raise AssertionError(f"transaction {tx} was not mined")


async def deployed_factory(service: Service, artifact: str, entry_point: str) -> str:
    """`artifact` (a release's SimpleAccountFactory, bound to `entry_point`), deployed by a
    plain transaction from a funded, impersonated address; its address."""
    deployer = Account.create().address
    await service.node(CHAIN, "anvil_setBalance", deployer, hex(10**18))
    await service.node(CHAIN, "anvil_impersonateAccount", deployer)
    init_code = contracts.load(artifact).bytecode + encode(["address"], [entry_point])
    tx = await service.node(
        CHAIN, "eth_sendTransaction", {"from": deployer, "data": "0x" + init_code.hex()}
    )
    receipt = await _mined(service, tx)
    return to_checksum_address(receipt["contractAddress"])


async def existing_v06(client: Entryway, service: Service, owner: LocalAccount) -> str:
    factory = await deployed_factory(service, "SimpleAccountFactoryV06", ENTRY_POINT_V06)
    address = await deployed_simple_account(service, factory, owner)
    call = {"to": address, "data": "0x" + V06_ACCOUNT.encode_call("entryPoint").hex()}
    raw = await service.node(CHAIN, "eth_call", call)
    assert to_checksum_address("0x" + raw[-40:]) == ENTRY_POINT_V06  # a v0.6 account indeed
    return address


async def existing_v08(client: Entryway, service: Service, owner: LocalAccount) -> str:
    entry_point = client.defaults.entry_point
    assert entry_point == ENTRY_POINT_V08
    factory = await deployed_factory(service, "SimpleAccountFactory", entry_point)
    raw = await service.node(
        CHAIN,
        "eth_call",
        {"to": entry_point, "data": "0x" + ENTRY_POINT_V08_ABI.encode_call("senderCreator").hex()},
    )
    # v0.8's factory creates accounts for the EntryPoint's SenderCreator only
    sender_creator = to_checksum_address("0x" + raw[-40:])
    return await deployed_simple_account(service, factory, owner, deployer=sender_creator)


async def test_an_existing_v06_account_pays_for_its_own_op(
    client: Entryway, service: Service
) -> None:
    owner = Account.create()
    address = await existing_v06(client, service, owner)
    await service.node(CHAIN, "anvil_setBalance", address, hex(10**18))
    account = client.account(
        address, signer=simple_account_signer(owner, "0.6"), entry_point_version="0.6"
    )
    assert isinstance(account, ExistingAccount)
    assert (account.entry_point, account.entry_point_version) == (ENTRY_POINT_V06, "0.6")
    recipient = Account.create().address

    op = await account.send({"to": recipient, "value": 12345}, sponsored=False)
    receipt = await op.wait(timeout=30)

    assert receipt.success and receipt.sender == address and receipt.paymaster is None
    assert receipt.raw["entryPoint"] == ENTRY_POINT_V06
    assert receipt.actual_gas_cost > 0
    assert await balance(service, recipient) == 12345
    assert await account.nonce() == 1
    # the bundler's hash of the op is the SDK's v0.6 one (send checks the two agree)
    assert op.user_operation is not None
    assert op.user_op_hash == "0x" + account.user_op_hash(op.user_operation).hex()

    # a batch without value, in v0.6's executeBatch(dest[], func[])
    other = Account.create().address
    batch = await account.send([{"to": recipient, "data": b"gm"}, {"to": other}], sponsored=False)
    assert (await batch.wait(timeout=30)).success and await account.nonce() == 2


def test_the_blocking_client_relays_for_a_v06_account(service: Service) -> None:
    owner = Account.create()
    with EntrywaySync.init(
        api_key=service.api_key,
        rpc_url=service.rpc_url(CHAIN),
        chain_id=CHAIN,
        base_url=service.url,
    ) as client:
        address = asyncio.run(existing_v06(client.client, service, owner))
        asyncio.run(service.node(CHAIN, "anvil_setBalance", address, hex(10**18)))
        account = client.account(
            address, signer=simple_account_signer(owner, "0.6"), entry_point=ENTRY_POINT_V06
        )
        assert account.entry_point_version == "0.6"
        receipt = account.send({"to": owner.address, "value": 7}, sponsored=False).wait(30)
        assert receipt.success and receipt.sender == address and account.nonce() == 1
        assert receipt.raw["entryPoint"] == ENTRY_POINT_V06


async def test_an_existing_v08_simple_account_pays_then_is_sponsored(
    client: Entryway, service: Service
) -> None:
    owner = Account.create()
    address = await existing_v08(client, service, owner)
    account = client.account(
        address, signer=simple_account_signer(owner, "0.8"), entry_point_version="0.8"
    )
    assert (account.entry_point, account.entry_point_version) == (ENTRY_POINT_V08, "0.8")
    recipient, other = Account.create().address, Account.create().address

    await service.node(CHAIN, "anvil_setBalance", address, hex(10**18))
    paid = await (await account.send({"to": recipient, "value": 99}, sponsored=False)).wait(30)
    assert paid.success and paid.paymaster is None and paid.sender == address
    assert paid.raw["entryPoint"] == ENTRY_POINT_V08
    assert await balance(service, recipient) == 99 and await account.nonce() == 1

    # a batch, in v0.8's executeBatch(Call[]), carrying all the account holds: the
    # paymaster pays the gas
    await service.node(CHAIN, "anvil_setBalance", address, hex(5))
    sponsored = await account.send([{"to": recipient, "value": 1}, {"to": other, "value": 4}])
    receipt = await sponsored.wait(timeout=30)
    assert receipt.success and receipt.paymaster == client.defaults.paymaster
    assert await balance(service, recipient) == 100 and await balance(service, other) == 4
    assert await balance(service, address) == 0 and await account.nonce() == 2


async def test_an_existing_v06_account_is_sponsored_by_the_v06_paymaster(
    client: Entryway, service: Service
) -> None:
    owner = Account.create()
    address = await existing_v06(client, service, owner)  # holds no ether: the paymaster pays
    account = client.account(
        address, signer=simple_account_signer(owner, "0.6"), entry_point_version="0.6"
    )
    recipient = Account.create().address

    op = await account.send({"to": recipient, "data": b"gm"})
    receipt = await op.wait(timeout=30)

    paymaster = client.defaults.paymaster_v06
    assert paymaster is not None  # the devnet serves v0.6 with Entryway's paymaster
    assert receipt.success and receipt.sender == address
    assert receipt.paymaster is not None and receipt.paymaster.lower() == paymaster.lower()
    assert receipt.raw["entryPoint"] == ENTRY_POINT_V06
    assert await balance(service, address) == 0
