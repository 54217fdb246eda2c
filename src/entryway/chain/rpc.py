"""A small async JSON-RPC client for EVM nodes, and the typed `eth_*` calls Entryway uses."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

import aiohttp
import orjson

from entryway.domain.evm import checksum, hex_to_bytes, to_hex
from entryway.errors import EntrywayError

JsonValue = Any
StateOverride = Mapping[str, Mapping[str, Any]]


class RpcTransportError(EntrywayError):
    """The node could not be reached, or did not answer with JSON-RPC."""


class RpcError(EntrywayError):
    """The node answered with a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: JsonValue = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data

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


_JSON = {"content-type": "application/json"}
KEEPALIVE_S = 4.0


class JsonRpcClient:
    """JSON-RPC 2.0 over HTTP. One connection pool per client; close it when done.

    aiohttp, not httpx, talks to the node: its C HTTP parser costs a fifth of the CPU per
    call, and the service makes many small calls (estimation, receipts) and a few large ones
    (validation traces of a megabyte or more)."""

    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        self.url = url
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None  # made in the loop that uses it
        self._ids = itertools.count(1)

    async def _post(self, payload: object) -> tuple[int, bytes]:
        if self._session is None:
            # Idle connections are dropped before common servers drop them (uvicorn after
            # 5 s): a request written into a connection the server is closing fails.
            connector = aiohttp.TCPConnector(keepalive_timeout=KEEPALIVE_S)
            self._session = aiohttp.ClientSession(timeout=self._timeout, connector=connector)
        try:
            async with self._session.post(
                self.url, data=orjson.dumps(payload), headers=_JSON
            ) as response:
                return response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise RpcTransportError(f"{self.url} unreachable: {exc!r}") from exc

    async def request(self, method: str, params: Sequence[JsonValue] = ()) -> JsonValue:
        payload = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        status, content = await self._post(payload)
        try:
            body = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise RpcTransportError(f"{self.url} answered HTTP {status} without JSON-RPC") from exc
        if not isinstance(body, dict):
            raise RpcTransportError(f"{self.url} answered a non-object JSON-RPC response")
        if "error" in body:
            err = body["error"]
            raise RpcError(int(err.get("code", 0)), str(err.get("message", "")), err.get("data"))
        return body.get("result")

    async def batch(self, calls: Sequence[tuple[str, Sequence[JsonValue]]]) -> list[JsonValue]:
        """Several calls in one JSON-RPC batch; results in the order asked."""
        if not calls:
            return []
        first = next(self._ids)
        payload = [
            {"jsonrpc": "2.0", "id": first + i, "method": m, "params": p}
            for i, (m, p) in enumerate(calls)
        ]
        _, content = await self._post(payload)
        try:
            answers = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise RpcTransportError(f"{self.url}: batch failed: {exc!r}") from exc
        if not isinstance(answers, list):
            raise RpcTransportError(f"{self.url} answered a batch with a single object")
        by_id = {a.get("id"): a for a in answers if isinstance(a, dict)}
        results = []
        for i in range(len(calls)):
            answer = by_id.get(first + i)
            if answer is None:
                raise RpcTransportError(f"{self.url} left batch call {i} unanswered")
            if "error" in answer:
                err = answer["error"]
                raise RpcError(
                    int(err.get("code", 0)), str(err.get("message", "")), err.get("data")
                )
            results.append(answer.get("result"))
        for _ in range(len(calls) - 1):
            next(self._ids)
        return results

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

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
    """The `eth_*` methods Entryway needs, typed, over one JSON-RPC client."""

    def __init__(self, rpc: JsonRpcClient) -> None:
        self.rpc = rpc

    async def chain_id(self) -> int:
        return int(await self.rpc.request("eth_chainId"), 16)

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
        return int(await self.rpc.request("eth_maxPriorityFeePerGas"), 16)

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
