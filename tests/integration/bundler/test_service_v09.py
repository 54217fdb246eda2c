"""An EntryPoint v0.9 account served by the service: through POST /rpc/{chainId} the ERC-7677
paymaster signs in parallel with the account (v0.9's paymasterSignature): the account signs
the op as the stub data left it, the final data only adds the paymaster's signature, and the
op is accounted, included, settled and charged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.domain.paymaster_signature import split_paymaster_signature
from entryway.domain.plans import PlanName
from entryway.domain.userop import user_op_hash
from tests.integration.bundler import test_service_chain_routes as chain_routes
from tests.integration.bundler.test_entry_point_v07 import sign, simple_account_op
from tests.integration.bundler.test_entry_point_v09 import EP_ADDRESS, FACTORY09
from tests.integration.bundler.test_rpc_accounting import Client
from tests.integration.bundler.test_service_chain_routes import CHAIN, rpc, tenant
from tests.integration.bundler.test_service_v07 import settled_and_charged
from tests.integration.harness import Harness
from tests.integration.test_erc7677 import with_fields

service = chain_routes.service  # the fixture: a service over the devnet's bundler


@pytest.fixture(autouse=True)
def _fresh(bundler_rpc: BundlerRpc) -> None:
    for bundler in bundler_rpc.bundlers:
        bundler.clear()


async def test_v09_op_signed_by_account_and_paymaster_in_parallel_is_charged(
    service: Client, harness: Harness, bundler_rpc: BundlerRpc
) -> None:
    client, services = service
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    url = f"/rpc/{CHAIN}"
    paymaster09 = harness.deployment.paymaster_v09
    assert paymaster09 is not None

    op, owner = await simple_account_op(harness, EP_ADDRESS, FACTORY09)
    await harness.fund(op.sender, 0)  # sponsored: it holds nothing of its own
    draft = replace(op, signature=b"")
    raw = user_operation_json(draft)
    del raw["signature"]
    stub = await client.post(
        url, headers=auth, json=rpc("pm_getPaymasterStubData", raw, EP_ADDRESS, hex(CHAIN), {})
    )
    assert stub.json()["result"]["paymaster"] == paymaster09, stub.text
    # The account signs now, over the stub's data: its hash leaves the paymaster signature out.
    account_signed = sign(harness, with_fields(draft, stub.json()["result"]), EP_ADDRESS, owner)
    raw = user_operation_json(replace(account_signed, signature=b""))
    del raw["signature"]
    r = await client.post(
        url, headers=auth, json=rpc("pm_getPaymasterData", raw, EP_ADDRESS, hex(CHAIN), {})
    )
    assert "result" in r.json(), r.text
    final = replace(with_fields(draft, r.json()["result"]), signature=account_signed.signature)
    stub_signed, stub_signature = split_paymaster_signature(account_signed.paymaster_and_data)
    final_signed, final_signature = split_paymaster_signature(final.paymaster_and_data)
    assert final_signed == stub_signed and final_signature != stub_signature
    assert user_op_hash(final, EP_ADDRESS, CHAIN) == user_op_hash(account_signed, EP_ADDRESS, CHAIN)

    r = await client.post(
        url, headers=auth, json=rpc("eth_sendUserOperation", user_operation_json(final), EP_ADDRESS)
    )
    await settled_and_charged(
        service, bundler_rpc, pid, key, r.json()["result"], EP_ADDRESS, paymaster09
    )


async def test_a_window_longer_than_the_paymaster_gives_is_not_reused(
    service: Client, harness: Harness
) -> None:
    """The op may carry a window of its own; the paymaster signs it only if it ends no later
    than one it would give now."""
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    paymaster09 = harness.deployment.paymaster_v09
    assert paymaster09 is not None
    op, _ = await simple_account_op(harness, EP_ADDRESS, FACTORY09)
    forever = (2**48 - 1).to_bytes(6) + bytes(6)
    asked = op.with_paymaster(paymaster09, 100_000, 0, forever)
    raw = user_operation_json(asked)
    del raw["signature"]
    r = await client.post(
        f"/rpc/{CHAIN}",
        headers={"Authorization": f"Bearer {key}"},
        json=rpc("pm_getPaymasterData", raw, EP_ADDRESS, hex(CHAIN), {}),
    )
    data = bytes.fromhex(r.json()["result"]["paymasterData"][2:])
    assert data[:6] != forever[:6]
    assert int.from_bytes(data[:6]) < 2**48 - 1


async def test_sdk_defaults_name_the_v09_contracts(service: Client, harness: Harness) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    r = await client.get(
        "/get-sdk-defaults", params={"chainId": CHAIN}, headers={"Authorization": f"Bearer {key}"}
    )
    body = r.json()
    assert body["entryPointV09"] == EP_ADDRESS
    assert body["paymasterV09"] == harness.deployment.paymaster_v09
    assert body["simpleAccountFactoryV09"] == harness.deployment.simple_account_factory_v09
