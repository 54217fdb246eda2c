"""The SDK against a running `entryway up`: initialisation and its failures, chain access,
several chains, sponsored and self-paid ops, a policy's refusal, status reads, the blocking
wrapper."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from entryway_sdk import (
    ChainNotRecognisedError,
    Entryway,
    EntrywaySync,
    NetworkMismatchError,
    NotFoundError,
    SponsorshipRefusedError,
    abi,
)
from eth_account import Account

from tests.sdk.conftest import Service

pytestmark = pytest.mark.anvil


async def connect(service: Service, chain_id: int = 80002, key: str | None = None) -> Entryway:
    return await Entryway.init(
        api_key=key or service.api_key,
        rpc_url=service.rpc_url(chain_id),
        chain_id=chain_id,
        base_url=service.url,
    )


@pytest.fixture
async def client(service: Service) -> AsyncIterator[Entryway]:
    async with await connect(service) as client:
        yield client


async def test_init_with_the_rpc_of_another_chain_fails_clearly(service: Service) -> None:
    with pytest.raises(NetworkMismatchError) as caught:
        await Entryway.init(
            api_key=service.api_key,
            rpc_url=service.rpc_url(84532),
            chain_id=80002,
            base_url=service.url,
        )
    assert caught.value.actual_chain_id == 84532
    assert "serves chain 84532, not chain 80002" in str(caught.value)


async def test_a_key_without_access_to_the_chain_is_not_recognised(service: Service) -> None:
    async with httpx.AsyncClient(base_url=service.url) as http:
        r = await http.post(
            "/v1/keys",
            headers={"Authorization": f"Bearer {service.api_key}"},
            json={"chains": [84532]},
        )
    assert r.status_code == 201, r.text
    base_only = r.json()["apiKey"]
    with pytest.raises(ChainNotRecognisedError) as caught:
        await connect(service, 80002, key=base_only)
    assert caught.value.status == 403 and caught.value.code == "chain_not_recognised"
    assert [c.name for c in caught.value.failed_checks] == [
        "the API key has access to that network"
    ]
    async with await connect(service, 84532, key=base_only) as base:
        assert base.defaults.chain_id == 84532 and base.defaults.native_token == "ETH"


async def test_one_wallet_on_two_chains(client: Entryway, service: Service) -> None:
    owner = Account.create()
    base = await client.with_chain(84532, service.rpc_url(84532))
    polygon_wallet, base_wallet = await client.wallet(owner), await base.wallet(owner)
    assert polygon_wallet.address == base_wallet.address  # same factory address everywhere
    receipt = await (await base_wallet.send({"to": owner.address})).wait(timeout=30)
    assert receipt.success and await base_wallet.is_deployed()
    assert not await polygon_wallet.is_deployed()  # deployed on Base only
    await base.aclose()  # leaves the shared pool open for `client`

    await client.switch_chain(84532, service.rpc_url(84532))
    assert client.chain_id == 84532
    assert (await client.account_info(base_wallet.address)).deployed
    with pytest.raises(NetworkMismatchError):
        await client.switch_chain(80002, service.rpc_url(84532))
    assert client.chain_id == 84532  # unchanged by a failed switch


async def test_self_paid_wallet_operations_are_charged_their_fees_and_shown_as_such(
    service: Service,
) -> None:
    # a project of its own: no other test's sponsorship settles into the credits read here
    key = await service.new_project([80002])
    async with await connect(service, key=key) as client:
        await pays_itself(client, service, key)


async def pays_itself(client: Entryway, service: Service, key: str) -> None:
    """An op that pays its own gas, deploys its account and adds a guardian: charged
    validation and relay plus both wallet operations' fees (docs/pricing.md), and listed in
    usage as an account creation."""
    owner = Account.create()
    wallet = await client.wallet(owner, salt=7)
    await service.node(80002, "anvil_setBalance", wallet.address, hex(10**18))
    before = await client.credits()
    guardian = Account.create().address
    add = abi.load("SmartAccount").encode_call("addGuardian", guardian)
    calls = [{"to": Account.create().address, "value": 12345}, {"to": wallet.address, "data": add}]
    op = await wallet.send(calls, sponsored=False)
    receipt = await op.wait(timeout=30)
    assert receipt.success and receipt.paymaster is None and receipt.actual_gas_cost > 0
    assert op.user_operation is not None and op.user_operation.paymaster is None
    after = await client.credits()
    relay = 100 + 200 + len(op.user_operation.call_data)  # validation, relay, calldata bytes
    # + account creation 1,000 + guardian management 500 and 250 for its verification step
    # (the owner's signature)
    charged = relay + 1_000 + 750
    assert after.used_this_cycle - before.used_this_cycle == charged
    status = await client.op_status(op.user_op_hash)
    assert status.status == "included" and status.transaction_hash == receipt.transaction_hash
    info = await wallet.info()
    assert info.deployed and info.owner == owner.address and info.nonce == 1
    assert [g.lower() for g in info.guardians] == [guardian.lower()]

    auth = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=service.url, headers=auth) as http:
        groups = (await http.get("/v1/usage", params={"groupBy": "operation"})).json()["groups"]
        exported = (await http.get("/v1/usage/export", params={"format": "json"})).json()
        csv = (await http.get("/v1/usage/export", params={"format": "csv"})).text
    assert groups["account_creation"] == {"credits": charged, "operations": 1, "requests": 0}
    assert "relayed_user_operation" not in groups
    assert [(e["operation"], e["credits"]) for e in exported] == [("account_creation", charged)]
    assert f",account_creation,{charged}," in csv


async def test_a_policy_refusal_is_a_sponsorship_refused_error(service: Service) -> None:
    key = await service.new_project([80002])
    allowed = Account.create().address
    async with httpx.AsyncClient(base_url=service.url) as http:
        r = await http.post(
            "/v1/policies",
            headers={"Authorization": f"Bearer {key}"},
            json={"name": "only one target", "rules": {"allowedTargets": [allowed]}},
        )
    assert r.status_code == 201, r.text
    async with await connect(service, key=key) as client:
        wallet = await client.wallet(Account.create())
        before = await client.credits()
        with pytest.raises(SponsorshipRefusedError) as caught:
            await wallet.send({"to": Account.create().address})
        assert caught.value.rule == "allowed_targets"
        assert caught.value.policy_id == r.json()["policyId"]
        assert caught.value.rpc_code == -32501
        assert (await client.credits()).used_this_cycle == before.used_this_cycle  # nothing held
        receipt = await (await wallet.send({"to": allowed})).wait(timeout=30)
        assert receipt.success


async def test_unknown_ops_and_tasks_are_not_found(client: Entryway) -> None:
    with pytest.raises(NotFoundError) as caught:
        await client.op_status("0x" + "ab" * 32)
    assert caught.value.code == "op_not_found"
    with pytest.raises(NotFoundError) as task:
        await client.task_status("no-such-task")
    assert task.value.code == "task_not_found"
    assert await client.receipt("0x" + "ab" * 32) is None
    fees = await client.gas_price("fast")
    assert fees.max_priority_fee_per_gas >= client.defaults.min_priority_fee_per_gas


def test_the_blocking_client(service: Service) -> None:
    with EntrywaySync.init(
        api_key=service.api_key,
        rpc_url=service.rpc_url(84532),
        chain_id=84532,
        base_url=service.url,
    ) as client:
        wallet = client.wallet(Account.create())
        op = wallet.send([{"to": wallet.address, "data": "0x"}, {"to": wallet.address}])
        receipt = op.wait(timeout=30)
        assert receipt.success and wallet.is_deployed()
        assert client.op_status(op.user_op_hash).status == "included"
        assert client.credits().used_this_cycle > 0
