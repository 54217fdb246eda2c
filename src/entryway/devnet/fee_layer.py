"""A thin JSON-RPC layer in front of a devnet's anvil: it answers the fee suggestions
(eth_maxPriorityFeePerGas, eth_gasPrice, eth_feeHistory) as the real network's node would,
fills the fees a caller left out of eth_fillTransaction and eth_sendTransaction the same
way, keeps the base fee at the network's floor before each block is mined, and passes
everything else through untouched.

It runs its own event loop in a thread: a client that blocks the loop it was called from
(a synchronous one, a test's) must not stall the node it is waiting for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from typing import Any

import aiohttp
from aiohttp import web

from entryway.devnet.fees import DevnetFees

_FEE_METHODS = frozenset({"eth_maxPriorityFeePerGas", "eth_gasPrice", "eth_feeHistory"})
# Calls that mine a block (anvil mines each transaction at once): the floor is set first.
_MINING_METHODS = frozenset(
    {"eth_sendRawTransaction", "eth_sendTransaction", "evm_mine", "anvil_mine"}
)
# Filled by the node with its own fees unless the quote goes in first (`_with_quoted_fees`).
_FILL = "eth_fillTransaction"
_WATCHED = tuple(m.encode() for m in _FEE_METHODS | _MINING_METHODS | {_FILL})
_JSON = "application/json"


class FeeLayer:
    """Serves `host:port`, forwarding to `node_url`. `start()`/`stop()` are blocking; call
    them through `asyncio.to_thread` from async code."""

    def __init__(
        self,
        node_url: str,
        fees: DevnetFees,
        host: str,
        port: int,
        *,
        block_time_s: float | None = None,
    ) -> None:
        self.node_url = node_url
        self.block_time_s = block_time_s
        self.fees = fees
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._floor_lock: asyncio.Lock | None = None
        self._floor_keeper: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name=f"devnet-fees-{self.port}", daemon=True
        )
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._serve(), loop).result(timeout=30)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._close(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()

    async def _serve(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=120),
        )
        self._floor_lock = asyncio.Lock()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        if self.block_time_s is not None:
            self._floor_keeper = asyncio.create_task(
                self._keep_floor_while_mining(self.block_time_s / 4)
            )

    async def _close(self) -> None:
        if self._floor_keeper is not None:
            self._floor_keeper.cancel()
            await asyncio.gather(self._floor_keeper, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        if not any(name in body for name in _WATCHED):
            return web.Response(body=await self._forward_raw(body), content_type=_JSON)
        try:
            parsed = json.loads(body)
        except ValueError:
            return web.Response(body=await self._forward_raw(body), content_type=_JSON)
        if isinstance(parsed, list):
            # In order, one at a time: each transaction mines its own block over the floor.
            answer: Any = [await self._call(item) for item in parsed]
        else:
            answer = await self._call(parsed)
        return web.json_response(answer)

    async def _forward_raw(self, body: bytes) -> bytes:
        assert self._session is not None
        async with self._session.post(
            self.node_url, data=body, headers={"content-type": _JSON}
        ) as response:
            return await response.read()

    async def _node(self, request: Any) -> Any:
        return json.loads(await self._forward_raw(json.dumps(request).encode()))

    async def _node_result(self, method: str, params: list[Any]) -> Any:
        answer = await self._node({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        if "error" in answer:
            raise _NodeError(answer["error"])
        return answer["result"]

    async def _call(self, request: Any) -> Any:
        method = request.get("method") if isinstance(request, dict) else None
        if method in _MINING_METHODS:
            assert self._floor_lock is not None
            async with self._floor_lock:  # no other block mined between the two
                await self._keep_floor()
                if method == "eth_sendTransaction":
                    # Anvil's own 1 gwei tip is over a Base block's whole fee cap.
                    try:
                        request = await self._with_quoted_fees(request)
                    except _NodeError as exc:
                        return {"jsonrpc": "2.0", "id": request.get("id"), "error": exc.error}
                return await self._node(request)
        if method == _FILL:
            try:
                return await self._node(await self._with_quoted_fees(request))
            except _NodeError as exc:
                return {"jsonrpc": "2.0", "id": request.get("id"), "error": exc.error}
        if method not in _FEE_METHODS:
            return await self._node(request)
        try:
            result = await self._fee_answer(method, request)
        except _NodeError as exc:
            return {"jsonrpc": "2.0", "id": request.get("id"), "error": exc.error}
        if isinstance(result, dict) and "error" in result:
            return result
        return {"jsonrpc": "2.0", "id": request.get("id"), "result": result}

    async def _fee_answer(self, method: str, request: dict[str, Any]) -> Any:
        if method == "eth_feeHistory":
            answer = await self._node(request)
            if isinstance(answer.get("result"), dict):
                return self.fees.fee_history(answer["result"])
            return answer
        base_fee, tip = await self._quote()
        if method == "eth_maxPriorityFeePerGas":
            return hex(tip)
        return hex(self.fees.gas_price(base_fee, tip))

    async def _quote(self) -> tuple[int, int]:
        """The next block's base fee and the tip this network's node would suggest."""
        history, node_tip = await asyncio.gather(
            self._node_result("eth_feeHistory", ["0x1", "latest", []]),
            self._node_result("eth_maxPriorityFeePerGas", []),
        )
        tip = self.fees.tip(int(node_tip, 16), float(history["gasUsedRatio"][-1]))
        return int(history["baseFeePerGas"][-1], 16), tip

    async def _with_quoted_fees(self, request: dict[str, Any]) -> dict[str, Any]:
        """eth_fillTransaction or eth_sendTransaction with the fees the caller left out set
        from the quote, as the real network's node fills them: anvil would fill in its own
        1 gwei tip, under Polygon's minimum and over Base's whole fee (viem fills
        transactions this way first; scripts send them this way)."""
        params = request.get("params")
        if not (isinstance(params, list) and params and isinstance(params[0], dict)):
            return request
        tx = params[0]
        if "gasPrice" in tx or {"maxFeePerGas", "maxPriorityFeePerGas"} <= tx.keys():
            return request  # nothing left to fill
        base_fee, tip = await self._quote()
        filled = self.fees.filled(tx, base_fee, tip)
        return {**request, "params": [filled, *params[1:]]}

    async def _keep_floor(self) -> None:
        """The next block's base fee, if EIP-1559 has taken it under the floor, back up to it."""
        history = await self._node_result("eth_feeHistory", ["0x1", "latest", []])
        next_base_fee = int(history["baseFeePerGas"][-1], 16)
        if next_base_fee < self.fees.base_fee_floor:
            await self._node_result(
                "anvil_setNextBlockBaseFeePerGas", [hex(self.fees.base_fee_floor)]
            )

    async def _keep_floor_while_mining(self, interval_s: float) -> None:
        """With interval mining blocks come without a call through here: look often."""
        assert self._floor_lock is not None
        while True:
            # The node may be starting or stopping: the next look will do.
            async with self._floor_lock:
                with contextlib.suppress(aiohttp.ClientError, _NodeError):
                    await self._keep_floor()
            await asyncio.sleep(interval_s)


class _NodeError(Exception):
    def __init__(self, error: Any) -> None:
        super().__init__(str(error))
        self.error = error
