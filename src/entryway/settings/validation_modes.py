"""`entryway config check`'s look at each chain's validation mode: what every node URL can
trace (`bundler.validation.modes`), the mode the chain would run in, and a problem when the
settings pin a mode the preferred node cannot serve (its start would stop on it)."""

from __future__ import annotations

from entryway.bundler.validation.modes import (
    NodeTracing,
    choose_mode,
    describe,
    parse_mode,
    probe_modes,
)
from entryway.chain.capabilities import NodeCapabilities, probe_capabilities
from entryway.chain.retry import RetryPolicy
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.errors import EntrywayError
from entryway.settings.model import ChainSettings, Settings

_TIMEOUT_S = 10.0


async def _tracing(url: str) -> tuple[NodeTracing, NodeCapabilities] | None:
    async with JsonRpcClient(
        url, timeout=_TIMEOUT_S, connect_timeout=_TIMEOUT_S, retry=RetryPolicy(attempts=1)
    ) as rpc:
        try:
            return await probe_modes(rpc), await probe_capabilities(EthClient(rpc))
        except (EntrywayError, OSError):
            return None  # the URL checks say why it does not answer


async def chain_modes(index: int, chain: ChainSettings) -> tuple[list[str], list[str]]:
    """Lines for the summary, and problems, of one chain: the mode of each URL that answers
    (a failover to a weaker node weakens validation with it)."""
    lines: list[str] = []
    problems: list[str] = []
    pinned = parse_mode(chain.validation_mode)
    first = True
    for n, url in enumerate(chain.urls()):
        probed = await _tracing(url)
        if probed is None:
            continue
        tracing, serves = probed
        lines += [f"node       {chain.chain_id} #{n + 1}: {line}" for line in serves.lines()]
        if not serves.simulates:
            problems.append(f"chains[{index}].rpc_urls[{n}]: the node {serves.lines()[0]}")
        where = f"chains[{index}].validation_mode"
        try:
            mode = choose_mode(tracing, pinned, where=where)
        except EntrywayError as exc:
            if first:
                problems.append(str(exc))
            else:  # a fallback URL: its failover would stop validation, say so
                lines.append(f"validation {chain.chain_id} #{n + 1}: cannot serve; {exc}")
            first = False
            continue
        first = False
        choice = "pinned" if pinned is not None else "auto"
        lines.append(f"validation {chain.chain_id} #{n + 1}: {describe(mode)} [{choice}]")
    return lines, problems


async def validation_report(settings: Settings) -> tuple[list[str], list[str]]:
    lines: list[str] = []
    problems: list[str] = []
    for index, chain in enumerate(settings.chains):
        more, wrong = await chain_modes(index, chain)
        lines += more
        problems += wrong
    return lines, problems


async def pinned_mode_problems(index: int, chain: ChainSettings) -> list[str]:
    """A start's check of a pinned mode: the problem when the chain's preferred node cannot
    serve it (nothing asked of the node when the node decides, `auto`)."""
    if parse_mode(chain.validation_mode) is None:
        return []
    return (await chain_modes(index, chain))[1]
