"""The "network connection problem" checks (requirements §7) for a chain: the RPC endpoint is
reachable and responds, the network is not under maintenance, and the RPC's chain id is the
network's. A passing result is kept for a few seconds so the request path rarely waits on the
node."""

from __future__ import annotations

import time
from dataclasses import dataclass

from entryway.chain.rpc import EthClient, RpcError, RpcTransportError

HEALTHY_FOR_SECONDS = 5.0
# A failed probe is kept too, briefly: while a node hangs, each request would otherwise wait
# out a probe of its own before its 503.
UNHEALTHY_FOR_SECONDS = 2.0
PROBE_TIMEOUT_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class NetworkCheck:
    name: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class NetworkStatus:
    chain_id: int
    checks: tuple[NetworkCheck, ...]

    @property
    def ok(self) -> bool:
        return all(c.passed for c in self.checks)


class ChainHealth:
    def __init__(self) -> None:
        self._healthy_until: dict[int, float] = {}
        self._unhealthy_until: dict[int, float] = {}

    async def status(
        self, chain_id: int, eth: EthClient, *, maintenance: bool, reason: str = ""
    ) -> NetworkStatus:
        """`reason`: why the network is under maintenance, told to the caller."""
        if maintenance:
            self._healthy_until.pop(chain_id, None)
            return _status(chain_id, reachable=True, maintenance=True, answered=None, reason=reason)
        # A passing probe is trusted only while the node client has not seen the node stop
        # answering since: the first call that failed ends it, so the next request is
        # answered 503 here rather than failing deeper in.
        fresh = self._healthy_until.get(chain_id, 0.0) > time.monotonic()
        if fresh and not eth.rpc.unreachable:
            return _status(chain_id, reachable=True, maintenance=False, answered=chain_id)
        self._healthy_until.pop(chain_id, None)
        if self._unhealthy_until.get(chain_id, 0.0) > time.monotonic():
            return _status(chain_id, reachable=False, maintenance=False, answered=None)
        try:
            # The client's own deadline, not a cancellation: a probe that times out is an
            # unanswered call the client logs (once per outage) like any other.
            timeout = min(PROBE_TIMEOUT_SECONDS, eth.rpc.timeout)
            answered = await eth.chain_id(deadline_s=timeout)
        except (TimeoutError, RpcTransportError, RpcError, OSError, ValueError):
            self._unhealthy_until[chain_id] = time.monotonic() + UNHEALTHY_FOR_SECONDS
            return _status(chain_id, reachable=False, maintenance=False, answered=None)
        status = _status(chain_id, reachable=True, maintenance=False, answered=answered)
        if status.ok:
            self._healthy_until[chain_id] = time.monotonic() + HEALTHY_FOR_SECONDS
        return status


def _status(
    chain_id: int, *, reachable: bool, maintenance: bool, answered: int | None, reason: str = ""
) -> NetworkStatus:
    closed = "the network is under maintenance" + (f" ({reason})" if reason else "")
    matches = answered == chain_id
    return NetworkStatus(
        chain_id,
        (
            NetworkCheck(
                "rpc_reachable",
                reachable,
                "the RPC endpoint answered" if reachable else "the RPC endpoint did not answer",
            ),
            NetworkCheck(
                "not_under_maintenance",
                not maintenance,
                closed if maintenance else "",
            ),
            NetworkCheck(
                "chain_id_matches",
                matches,
                ""
                if matches or answered is None
                else f"the RPC endpoint serves chain {answered}, not {chain_id}",
            ),
        ),
    )
