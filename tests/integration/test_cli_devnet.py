"""`entryway devnet` as a user runs it: JSON lines out, live chains, Ctrl-C stops them all."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from entryway.chain.rpc import EthClient, JsonRpcClient, RpcTransportError

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))
CONTRACTS = ("entryPoint", "accountFactory", "paymaster", "notary")
CONTRACTS_V07 = ("entryPointV07", "paymasterV07", "simpleAccountFactoryV07")
CONTRACTS_V09 = ("entryPointV09", "paymasterV09", "simpleAccountFactoryV09")
CONTRACTS_V06 = ("entryPointV06", "paymasterV06", "simpleAccountFactoryV06")
CONTRACTS_7702 = ("simple7702Account",)
ALL = CONTRACTS + CONTRACTS_V07 + CONTRACTS_V09 + CONTRACTS_V06 + CONTRACTS_7702
KEYS = {"chainId", "rpcUrl", *ALL}


async def test_devnet_prints_each_chain_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY,
        "devnet",
        "--chains",
        "80002,137",
        "--data-dir",
        str(tmp_path),
        "--base-port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        lines = [json.loads(await asyncio.wait_for(proc.stdout.readline(), 60)) for _ in range(2)]
        assert [line["chainId"] for line in lines] == [80002, 137]
        for line in lines:
            assert set(line) == KEYS
            async with JsonRpcClient(str(line["rpcUrl"])) as rpc:
                eth = EthClient(rpc)
                assert await eth.chain_id() == line["chainId"]
                for key in ALL:
                    assert await eth.get_code(str(line[key])) != b"", key
                assert line["entryPointV07"] == "0x0000000071727De22E5E9d8BAf0edAc6f37da032"
                assert line["entryPointV09"] == "0x63e9dfF4784c514b314670f239a52690F5709433"
                assert line["entryPointV06"] == "0x5FF137D4b0FDCD49DcA30c7CF57E578a026d2789"
        # Same operator keys, same code: the same addresses on every chain.
        assert {k: v for k, v in lines[0].items() if k not in ("chainId", "rpcUrl")} == {
            k: v for k, v in lines[1].items() if k not in ("chainId", "rpcUrl")
        }
    finally:
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    for line in lines:
        async with JsonRpcClient(str(line["rpcUrl"]), timeout=2) as rpc:
            try:
                await EthClient(rpc).chain_id()
            except RpcTransportError:
                continue
            raise AssertionError(f"{line['rpcUrl']} still answers after Ctrl-C")
    assert (tmp_path / "devnet" / "anvil-80002.json").stat().st_size > 0
    assert (tmp_path / "devnet" / "keys" / "operator.key").stat().st_mode & 0o077 == 0
