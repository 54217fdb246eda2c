"""The start check of a chain's RPC URLs: a fallback URL that is down does not stop a start
(the node client fails over past it), but no URL answering, or one answering for another
chain, does."""

from __future__ import annotations

import logging

import pytest

from entryway.chain.retry import RetryPolicy
from entryway.chain.rpc import JsonRpcClient, RpcTransportError
from entryway.devnet.anvil import free_port
from entryway.settings.checks import check_rpc_urls
from entryway.settings.model import ChainSettings
from tests.integration.chain.test_rpc_failover import CHAIN_ID, answers, running

DEAD = f"http://127.0.0.1:{free_port()}/"
DEAD_TOO = f"http://127.0.0.1:{free_port()}/"
ONCE = RetryPolicy(attempts=1)
OWNER = "0x000000000000000000000000000000000000dEaD"


def chain(*urls: str, chain_id: int = CHAIN_ID) -> ChainSettings:
    return ChainSettings.model_validate(
        {
            "chain_id": chain_id,
            "rpc_urls": list(urls),
            "deploy_owner": OWNER,
            "executor_key_files": ["executor.key"],  # named only: this check reads no key
            "notary_submitter_key_file": "notary.key",
        }
    )


async def test_a_dead_fallback_url_only_warns() -> None:
    async with running(answers) as [node]:
        assert await check_rpc_urls(0, chain(DEAD, node.url)) == []
        assert await check_rpc_urls(0, chain(node.url, DEAD)) == []


async def test_no_url_answering_stops_the_start() -> None:
    problems = await check_rpc_urls(0, chain(DEAD, DEAD))
    assert len(problems) == 2
    assert all("does not answer eth_chainId" in p for p in problems)


async def test_a_url_of_another_chain_stops_the_start_even_with_a_good_one() -> None:
    async with running(answers) as [node]:
        problems = await check_rpc_urls(0, chain(node.url, node.url, chain_id=84532))
    assert len(problems) == 2 and all("is chain 80002, not chain 84532" in p for p in problems)
    assert all("secret-api-key" not in p for p in problems)  # the URL's key is masked


async def test_a_dead_url_is_numbered_and_named_alike_at_start_and_at_runtime(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ "endpoint #2" is the second URL of the chain's list in every line, start-up check
    or running node client, and every line names the chain."""
    async with running(answers) as [node]:
        assert await check_rpc_urls(0, chain(node.url, DEAD)) == []
        at_start = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        caplog.clear()
        async with JsonRpcClient([DEAD_TOO, DEAD], chain_id=CHAIN_ID, retry=ONCE) as rpc:
            with pytest.raises(RpcTransportError):
                await rpc.request("eth_chainId")
        at_runtime = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    second = [line for line in at_start + at_runtime if "#2" in line]
    assert len(second) == 3, (at_start, at_runtime)  # the check's, its client's, the runtime's
    assert all(f"chain {CHAIN_ID}" in line for line in second), second
    assert not any("#1" in line for line in at_start), at_start
    assert any("#1" in line for line in at_runtime), at_runtime  # DEAD_TOO, first in its list
