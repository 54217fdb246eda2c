"""The README's quickstart, run as a user runs it: its python block, verbatim, in a new
interpreter, against a running `entryway up`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.sdk.conftest import SDK_SRC, Service

README = SDK_SRC.parent / "README.md"
pytestmark = pytest.mark.anvil


def quickstart() -> str:
    text = README.read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 1, "the quickstart has one python block"
    return str(blocks[0])


def test_the_quickstart_block_is_a_whole_script() -> None:
    code = quickstart()
    compile(code, "README.md", "exec")
    assert "Entryway.init(" in code and "asyncio.run(main())" in code


async def test_the_readme_quickstart_runs(service: Service, tmp_path: Path) -> None:
    # `entryway up`'s demo.json, with the key of a project of its own: no other test's
    # sponsorship settles into the credits it reads.
    demo = json.loads((service.data_dir / "demo.json").read_text())
    demo["apiKey"] = await service.new_project([80002, 84532])
    (tmp_path / "demo.json").write_text(json.dumps(demo))
    env = {
        **os.environ,
        "PYTHONPATH": str(SDK_SRC),
        "ENTRYWAY_DEMO": str(tmp_path / "demo.json"),
        "ENTRYWAY_URL": service.url,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", quickstart(), env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    lines = dict(line.split(": ", 1) for line in out.decode().splitlines())

    address, deployed = lines["wallet"].split(" deployed: ")
    assert re.fullmatch(r"0x[0-9a-fA-F]{40}", address) and deployed == "False"
    assert re.fullmatch(r"0x[0-9a-f]{64}", lines["userOpHash"])
    success, tx = lines["success"].split(" tx: ")
    assert success == "True" and re.fullmatch(r"0x[0-9a-f]{64}", tx)
    gas_used, cost = lines["gas used"].split(" cost (wei): ")
    assert int(gas_used) > 21_000 and int(cost) > 0
    assert lines["deployed"] == "True"
    used_before, used_after = (int(n) for n in lines["credits used this cycle"].split(" -> "))
    assert used_after > used_before  # the sponsored op was charged to the project
    balance_before, balance_after = (int(n) for n in lines["balance"].split(" -> "))
    assert balance_after < balance_before or balance_after == 0  # 0: the rest is overage
    assert lines["status"] == "included"
