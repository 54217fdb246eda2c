"""The start check of a chain's RPC URLs: a fallback URL that is down does not stop a start
(the node client fails over past it), but no URL answering, or one answering for another
chain, does."""

from __future__ import annotations

from entryway.devnet.anvil import free_port
from entryway.settings.checks import check_rpc_urls
from entryway.settings.model import ChainSettings
from tests.integration.chain.test_rpc_failover import CHAIN_ID, answers, running

DEAD = f"http://127.0.0.1:{free_port()}/"
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
