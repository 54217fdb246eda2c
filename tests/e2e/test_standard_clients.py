"""A standard Node client (viem + permissionless from npm, default fee settings) against
`entryway up` on every chain it stands in for: one self-funded op and one op sponsored through
viem's `createPaymasterClient`, both included, on EntryPoint v0.8 and again on v0.9 and on v0.6
(permissionless's SimpleAccount of that release). Then the same with fees asked of the
bundler, as permissionless's quickstart does (`pimlico_getUserOperationGasPrice`), on one chain
of each family (the fee rules are the family's: Polygon's minimum tip, Base's L1 fee)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from entryway.devnet.anvil import free_port
from tests.running import start, stop

pytestmark = pytest.mark.anvil

CHAINS = (137, 80002, 8453, 84532)
ONE_PER_FAMILY = (80002, 8453)  # a Polygon testnet and a Base mainnet
SCRIPT = Path(__file__).parents[1] / "node" / "standard_client.mjs"
ZERO_ADDRESS = "0x" + "00" * 20


@dataclass(frozen=True, slots=True)
class Service:
    url: str
    api_key: str
    demo: dict[str, Any]


@pytest.fixture(scope="module")
async def service(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Service]:
    """One `entryway up` for all four chains, and a project on a paid plan (a FREE one runs on
    testnets only) whose key reaches them all."""
    data_dir = tmp_path_factory.mktemp("standard-clients")
    port = free_port()
    chains = ",".join(str(c) for c in CHAINS)
    proc = await start(data_dir, port, "--chains", chains, log=data_dir / "up.log")
    try:
        url = f"http://127.0.0.1:{port}"
        token = (data_dir / "admin-token").read_text().strip()
        async with httpx.AsyncClient(base_url=url) as http:
            made = await http.post(
                "/v1/admin/projects",
                headers={"Authorization": f"Bearer {token}"},
                json={
                    "email": "node@example.org",
                    "name": "standard clients",
                    "plan": "STARTER",
                    "chains": list(CHAINS),
                },
            )
        assert made.status_code == 201, made.text
        demo = json.loads((data_dir / "demo.json").read_text())
        yield Service(url, str(made.json()["apiKey"]), demo)
    finally:
        await stop(proc)


async def _run_client(service: Service, chain_id: int, fees: str) -> dict[str, Any]:
    node = await asyncio.create_subprocess_exec(
        "node", str(SCRIPT), service.url, str(chain_id),
        service.demo["chains"][str(chain_id)]["rpcUrl"], fees,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "ENTRYWAY_API_KEY": service.api_key},
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(node.communicate(), 300)
    except TimeoutError:
        node.kill()
        await node.wait()
        raise
    assert node.returncode == 0, f"the Node client failed on chain {chain_id}:\n{err.decode()}"
    report: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return report


async def _receipt(service: Service, chain_id: int, user_op_hash: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=service.url) as http:
        r = await http.post(
            f"/rpc/{chain_id}",
            params={"apikey": service.api_key},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "eth_getUserOperationReceipt",
                "params": [user_op_hash],
            },
        )
    receipt: dict[str, Any] = r.json()["result"]
    return receipt


async def _both_ops_included(service: Service, chain_id: int, fees: str) -> None:
    report = await _run_client(service, chain_id, fees)
    assert report["chainId"] == chain_id and report["feeSource"] == fees
    assert report["deployed"] is True
    self_funded, sponsored = report["selfFunded"], report["sponsored"]
    assert self_funded["success"] is True and self_funded["paymaster"] == ZERO_ADDRESS
    paymaster = service.demo["chains"][str(chain_id)]["paymaster"]
    assert sponsored["success"] is True and sponsored["paymaster"].lower() == paymaster.lower()
    eoa_paid, eoa_sponsored = report["eip7702"]["selfFunded"], report["eip7702"]["sponsored"]
    simple_7702 = service.demo["chains"][str(chain_id)]["simple7702Account"]
    for eoa in (eoa_paid, eoa_sponsored):  # ops from the EOA's own address, now delegated
        assert eoa["success"] is True and eoa["sender"].lower() == eoa["eoa"].lower()
        assert eoa["delegatedTo"].lower() == simple_7702.lower()
    for op, expected_paymaster in (
        (self_funded, ZERO_ADDRESS),
        (sponsored, paymaster),
        (eoa_paid, ZERO_ADDRESS),
        (eoa_sponsored, paymaster),
    ):
        receipt = await _receipt(service, chain_id, op["userOpHash"])
        assert receipt["success"] is True
        assert receipt["paymaster"].lower() == expected_paymaster.lower()
    # EntryPoint v0.9 (the devnet's release candidate): a SimpleAccount of that release, one
    # op self-funded and one sponsored in v0.9's parallel mode (paymasterSignature).
    chain = service.demo["chains"][str(chain_id)]
    v09 = report["v09"]
    for op, expected_paymaster in (
        (v09["selfFunded"], ZERO_ADDRESS),
        (v09["sponsored"], chain["paymasterV09"]),
    ):
        assert op["success"] is True
        assert op["entryPoint"].lower() == chain["entryPointV09"].lower()
        receipt = await _receipt(service, chain_id, op["userOpHash"])
        assert receipt["success"] is True and receipt["entryPoint"] == chain["entryPointV09"]
        assert receipt["paymaster"].lower() == expected_paymaster.lower()
    # EntryPoint v0.6 at its canonical address: permissionless's SimpleAccount of that release,
    # one op self-funded and one sponsored through viem's ERC-7677 client (paymasterAndData).
    v06 = report["v06"]
    assert v06 is not None, "the chain names no EntryPoint v0.6"
    for op, expected_paymaster in (
        (v06["selfFunded"], ZERO_ADDRESS),
        (v06["sponsored"], chain["paymasterV06"]),
    ):
        assert op["success"] is True
        assert op["entryPoint"].lower() == chain["entryPointV06"].lower()
        receipt = await _receipt(service, chain_id, op["userOpHash"])
        assert receipt["success"] is True and receipt["entryPoint"] == chain["entryPointV06"]
        assert receipt["paymaster"].lower() == expected_paymaster.lower()


@pytest.mark.parametrize("chain_id", CHAINS)
async def test_viem_and_permissionless_with_default_fees_send_self_funded_and_sponsored_ops(
    service: Service, chain_id: int
) -> None:
    await _both_ops_included(service, chain_id, "node")


@pytest.mark.parametrize("chain_id", ONE_PER_FAMILY)
async def test_permissionless_with_the_bundlers_gas_price_sends_both_ops(
    service: Service, chain_id: int
) -> None:
    await _both_ops_included(service, chain_id, "bundler")
