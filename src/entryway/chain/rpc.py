"""A small async JSON-RPC client for EVM nodes, and the typed `eth_*` calls Entryway uses."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from entryway.chain.limits import BatchCap, LogRange, refusal
from entryway.chain.retry import RetryPolicy
from entryway.chain.transport import NODE_MALFORMED, Decoder, NodeTransport
from entryway.chain.transport import RpcTransportError as RpcTransportError
from entryway.chain.unserved import FallbackNotices, is_unserved
from entryway.domain.evm import checksum, hex_to_bytes, to_hex
from entryway.errors import EntrywayError

JsonValue = Any
StateOverride = Mapping[str, Mapping[str, Any]]
log = logging.getLogger("entryway.chain")

# How long one exchange with a node may take before the call counts as unanswered: short,
# since a client waits on it (a hung node must be answered 503 within seconds, not hang
# its callers). Traces of a whole validation take longer on a busy node: their own bound.
RPC_TIMEOUT_S = 5.0
TRACE_TIMEOUT_S = 30.0
FEE_HISTORY_BLOCKS = 5  # blocks whose median tips make a suggestion where none is served
_TRACES = frozenset({"debug_traceCall", "debug_traceTransaction"})


class RpcError(EntrywayError):
    """The node answered with a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: JsonValue = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def from_answer(cls, err: Any) -> RpcError:
        if not isinstance(err, dict):
            return cls(0, str(err))
        return cls(int(err.get("code", 0)), str(err.get("message", "")), err.get("data"))

    @property
    def revert_data(self) -> bytes | None:
        """The raw revert bytes of a reverted call, when the node reports them."""
        data = self.data
        if isinstance(data, dict):
            data = data.get("data")
        if isinstance(data, str) and data.startswith("0x"):
            return hex_to_bytes(data)
        return None


class TransactionFailedError(EntrywayError):
    def __init__(self, tx_hash: str, reason: str) -> None:
        super().__init__(f"transaction {tx_hash} failed: {reason}")
        self.tx_hash = tx_hash
        self.reason = reason


def _malformed(detail: str) -> RpcTransportError:
    log.warning("node answered malformed JSON-RPC: %s", detail)
    return RpcTransportError(NODE_MALFORMED)


class JsonRpcClient:
    """JSON-RPC 2.0 over HTTP to one chain, through one or more endpoints. Close it when done.

    `JsonRpcClient(url)` talks to one endpoint; `JsonRpcClient([primary, fallback, ...])`
    fails over between several, preferring them in the order given. `retry` says which
    calls are retried and how (see `RetryPolicy`): reads on its allowlist are retried with
    backoff and moved to the next endpoint; writes (`eth_sendRawTransaction`) and every
    other method go to one endpoint and are never repeated once they may have reached it.
    `timeout` bounds one exchange with one endpoint, `connect_timeout` its connect step;
    `trace_timeout` replaces `timeout` for `debug_trace*` calls, which take longer.
    `chain_id`, when known, names the chain in the lines logged when an endpoint goes down
    and comes back (once each per outage, never with the endpoint's URL): "endpoint #n" is
    the n-th URL of the chain's list, counted from `first_endpoint` + 1 for a client made
    for part of that list.

    Provider limits: `max_batch` caps the calls one JSON-RPC batch carries (None: no cap
    until the node refuses one; see `chain.limits`), `max_log_range` the blocks one
    `eth_getLogs` covers (None: likewise). Both are lowered, and kept,
    when the node refuses a request over a smaller limit.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        timeout: float = RPC_TIMEOUT_S,
        connect_timeout: float = 5.0,
        trace_timeout: float = TRACE_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        chain_id: int | None = None,
        first_endpoint: int = 0,
        max_batch: int | None = None,
        max_log_range: int | None = None,
    ) -> None:
        urls = (url,) if isinstance(url, str) else tuple(url)
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.trace_timeout = trace_timeout
        self._transport = NodeTransport(
            urls,
            timeout=timeout,
            connect_timeout=connect_timeout,
            retry=self.retry,
            chain_id=chain_id,
            first_index=first_endpoint,
        )
        self.urls = urls
        self.url = urls[0]  # the preferred endpoint
        self._ids = itertools.count(1)
        self.batch_cap = BatchCap(max_batch)
        self.log_range = LogRange(max_log_range)

    async def request(
        self,
        method: str,
        params: Sequence[JsonValue] = (),
        *,
        deadline_s: float | None = None,
        decode: Decoder | None = None,
    ) -> JsonValue:
        """`deadline_s`, when given, bounds this call's exchanges instead of the client's
        timeout; `decode`, when given, reads the answer's bytes instead of a JSON decoder
        (`bundler.validation.struct_logs` reads traces that way)."""
        payload = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        if deadline_s is None and method in _TRACES:
            deadline_s = self.trace_timeout
        body = await self._transport.post(
            payload,
            idempotent=self.retry.is_idempotent((method,)),
            deadline_s=deadline_s,
            **({} if decode is None else {"decode": decode}),
        )
        if not isinstance(body, dict):
            raise _malformed(f"{method} answered with a {type(body).__name__}")
        if "error" in body:
            raise RpcError.from_answer(body["error"])
        return body.get("result")

    async def batch(self, calls: Sequence[tuple[str, Sequence[JsonValue]]]) -> list[JsonValue]:
        """Several calls in one JSON-RPC batch; results in the order asked. Retried as a
        whole only when every call in it may be."""
        results = await self.batch_outcomes(calls)
        for result in results:
            if isinstance(result, RpcError):
                raise result
        return results

    async def batch_outcomes(
        self, calls: Sequence[tuple[str, Sequence[JsonValue]]]
    ) -> list[JsonValue | RpcError]:
        """As `batch`, but a call the node answers with an error gives its RpcError in its
        place instead of raising (a batch of simulations, some of which revert).

        Sent in batches of at most `batch_cap` calls; a batch of reads the node refuses for
        its size is sent again in smaller ones (down to one call at a time), a batch with a
        write in it never: its refusal raises."""
        results: list[JsonValue | RpcError] = []
        while len(results) < len(calls):
            done = len(results)
            chunk = calls[done : done + self.batch_cap.size(len(calls) - done)]
            answered = await self._chunk(chunk)
            if answered is not None:
                results.extend(answered)
        return results

    async def _chunk(
        self, calls: Sequence[tuple[str, Sequence[JsonValue]]]
    ) -> list[JsonValue | RpcError] | None:
        """One batch's outcomes; None when the node refused it and the cap was lowered."""
        if len(calls) == 1 and self.batch_cap.limit == 1:
            try:
                return [await self.request(*calls[0])]
            except RpcError as error:
                return [error]
        first = next(self._ids)
        for _ in range(len(calls) - 1):
            next(self._ids)
        payload = [
            {"jsonrpc": "2.0", "id": first + i, "method": m, "params": p}
            for i, (m, p) in enumerate(calls)
        ]
        idempotent = self.retry.is_idempotent(tuple(m for m, _ in calls))
        traced = any(m in _TRACES for m, _ in calls)
        answers = await self._transport.post(
            payload, idempotent=idempotent, deadline_s=self.trace_timeout if traced else None
        )
        refused = refusal(answers, len(calls))
        if refused is not None:
            if not idempotent:
                raise RpcError.from_answer(refused)  # a write's batch is never sent again
            self.batch_cap.refused(len(calls), str(refused.get("message", "")))
            return None
        if not isinstance(answers, list):
            raise _malformed("a batch answered with a single object")
        by_id = {a.get("id"): a for a in answers if isinstance(a, dict)}
        results: list[JsonValue | RpcError] = []
        for i in range(len(calls)):
            answer = by_id.get(first + i)
            if answer is None:
                raise _malformed(f"batch call {i} ({calls[i][0]}) unanswered")
            if "error" in answer:
                results.append(RpcError.from_answer(answer["error"]))
            else:
                results.append(answer.get("result"))
        return results

    @property
    def answering_endpoint(self) -> int:
        """The configured index of the endpoint that answered last (0 until one has): a
        failover shows as a change, for what depends on the node's abilities."""
        return self._transport.answering

    @property
    def unreachable(self) -> bool:
        """No endpoint answered its last call: the node is down (or hung) until one does."""
        return self._transport.unreachable

    @property
    def failures(self) -> int:
        """Exchanges with an endpoint that brought back no answer, since the client opened."""
        return self._transport.failures

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@dataclass(frozen=True, slots=True)
class Log:
    address: str
    topics: tuple[bytes, ...]
    data: bytes
    block_number: int
    tx_hash: str
    log_index: int

    @classmethod
    def from_rpc(cls, raw: Mapping[str, Any]) -> Log:
        return cls(
            address=checksum(raw["address"]),
            topics=tuple(hex_to_bytes(t) for t in raw["topics"]),
            data=hex_to_bytes(raw["data"]),
            block_number=int(raw["blockNumber"], 16),
            tx_hash=raw["transactionHash"],
            log_index=int(raw["logIndex"], 16),
        )


@dataclass(frozen=True, slots=True)
class TxReceipt:
    tx_hash: str
    status: int
    block_number: int
    gas_used: int
    effective_gas_price: int
    contract_address: str | None
    logs: tuple[Log, ...]

    @property
    def succeeded(self) -> bool:
        return self.status == 1

    @classmethod
    def from_rpc(cls, raw: Mapping[str, Any]) -> TxReceipt:
        contract = raw.get("contractAddress")
        return cls(
            tx_hash=raw["transactionHash"],
            status=int(raw["status"], 16),
            block_number=int(raw["blockNumber"], 16),
            gas_used=int(raw["gasUsed"], 16),
            effective_gas_price=int(raw.get("effectiveGasPrice", "0x0"), 16),
            contract_address=checksum(contract) if contract else None,
            logs=tuple(Log.from_rpc(log) for log in raw["logs"]),
        )


def _call_object(to: str | None, data: bytes, sender: str | None, value: int) -> dict[str, str]:
    call: dict[str, str] = {"data": to_hex(data)}
    if to is not None:
        call["to"] = to
    if sender is not None:
        call["from"] = sender
    if value:
        call["value"] = hex(value)
    return call


class EthClient:
    """The `eth_*` methods Entryway needs, typed, over one JSON-RPC client. Where a node does
    not serve a method or tag and a sensible answer exists without it, the answer falls
    back to one (`chain.unserved`), said once in the log."""

    def __init__(self, rpc: JsonRpcClient) -> None:
        self.rpc = rpc
        self.notices = FallbackNotices()

    async def chain_id(self, *, deadline_s: float | None = None) -> int:
        return int(await self.rpc.request("eth_chainId", deadline_s=deadline_s), 16)

    async def block_number(self) -> int:
        return int(await self.rpc.request("eth_blockNumber"), 16)

    async def get_code(self, address: str, block: str = "latest") -> bytes:
        return hex_to_bytes(await self.rpc.request("eth_getCode", [address, block]))

    async def get_balance(self, address: str, block: str = "latest") -> int:
        return int(await self.rpc.request("eth_getBalance", [address, block]), 16)

    async def get_nonce(self, address: str, block: str = "pending") -> int:
        return int(await self.rpc.request("eth_getTransactionCount", [address, block]), 16)

    async def get_block(self, block: str = "latest") -> dict[str, Any]:
        result: dict[str, Any] = await self.rpc.request("eth_getBlockByNumber", [block, False])
        return result

    async def max_priority_fee(self) -> int:
        """The node's suggested tip; where it does not serve eth_maxPriorityFeePerGas, the
        median of the latest blocks' median tips (eth_feeHistory), else eth_gasPrice less
        the latest base fee."""
        try:
            return int(await self.rpc.request("eth_maxPriorityFeePerGas"), 16)
        except RpcError as error:
            if not is_unserved(error.code, error.message):
                raise
        self.notices.say("eth_maxPriorityFeePerGas", "tips from eth_feeHistory")
        try:
            history = await self.rpc.request(
                "eth_feeHistory", [hex(FEE_HISTORY_BLOCKS), "latest", [50]]
            )
            tips = sorted(int(r[0], 16) for r in history.get("reward") or () if r)
            if tips:
                return tips[len(tips) // 2]
        except RpcError as error:
            if not is_unserved(error.code, error.message):
                raise
            self.notices.say("eth_feeHistory", "eth_gasPrice less the base fee for tips")
        base_fee = int((await self.get_block("latest")).get("baseFeePerGas", "0x0"), 16)
        return max(int(await self.rpc.request("eth_gasPrice"), 16) - base_fee, 0)

    async def settled_block(self, tag: str, depth: int) -> dict[str, Any]:
        """The block the node calls `tag` ("safe" or "finalized"); where it does not serve
        the tag, the block `depth` confirmations deep (its own counting as the first)."""
        try:
            block: dict[str, Any] | None = await self.rpc.request(
                "eth_getBlockByNumber", [tag, False]
            )
            if block is not None:
                return block
        except RpcError as error:
            if not is_unserved(error.code, error.message):
                raise
        self.notices.say(f'the "{tag}" block tag', f"the block {depth} confirmations deep")
        latest = await self.block_number()
        return await self.get_block(hex(max(latest - depth + 1, 0)))

    async def call(
        self,
        to: str | None,
        data: bytes,
        *,
        sender: str | None = None,
        value: int = 0,
        block: str = "latest",
        state_override: StateOverride | None = None,
    ) -> bytes:
        params: list[JsonValue] = [_call_object(to, data, sender, value), block]
        if state_override is not None:
            params.append(state_override)
        return hex_to_bytes(await self.rpc.request("eth_call", params))

    async def estimate_gas(
        self, to: str | None, data: bytes, *, sender: str | None = None, value: int = 0
    ) -> int:
        params = [_call_object(to, data, sender, value)]
        return int(await self.rpc.request("eth_estimateGas", params), 16)

    async def send_raw_transaction(self, raw: bytes) -> str:
        return str(await self.rpc.request("eth_sendRawTransaction", [to_hex(raw)]))

    async def get_receipt(self, tx_hash: str) -> TxReceipt | None:
        raw = await self.rpc.request("eth_getTransactionReceipt", [tx_hash])
        return None if raw is None else TxReceipt.from_rpc(raw)

    async def wait_for_receipt(
        self, tx_hash: str, *, within_s: float = 60.0, poll_s: float = 0.05
    ) -> TxReceipt:
        deadline = asyncio.get_running_loop().time() + within_s
        while True:
            receipt = await self.get_receipt(tx_hash)
            if receipt is not None:
                return receipt
            if asyncio.get_running_loop().time() > deadline:
                raise TransactionFailedError(tx_hash, f"not mined within {within_s:.0f}s")
            await asyncio.sleep(poll_s)
