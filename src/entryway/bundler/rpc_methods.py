"""The bundler's JSON-RPC methods (ERC-4337, ERC-7769 debug namespace, and Entryway's own),
dispatched by name. Transport-free: the HTTP server and the service's API both use it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from entryway import contracts
from entryway.bundler.errors import BundlerError, RpcErrorCode, invalid_params, node_failure
from entryway.bundler.gas.estimation import GasEstimator
from entryway.bundler.port import suggested_fees
from entryway.bundler.reputation import ReputationEntry, ReputationStatus
from entryway.bundler.rpc_types import (
    parse_address,
    parse_data,
)
from entryway.bundler.service import BeforeMempool, Bundler
from entryway.bundler.states import BundlingMode, OpStatus
from entryway.bundler.validation.rules import StakeInfo
from entryway.bundler.validation.sanity import check_bounds
from entryway.chain.rpc import RpcError, RpcTransportError
from entryway.domain.evm import checksum, to_hex

log = logging.getLogger("entryway.bundler.rpc")
EP = contracts.load("EntryPoint").abi
_MINED = (OpStatus.INCLUDED.value, OpStatus.FAILED.value)
Handler = Callable[[list[Any]], Awaitable[Any]]


def _param(params: list[Any], index: int, name: str) -> Any:
    if len(params) <= index:
        raise invalid_params(f"missing parameter {index}: {name}")
    return params[index]


def _hash_param(params: list[Any]) -> bytes:
    value = params[0] if params else None
    if not isinstance(value, str) or len(value) != 66:
        raise invalid_params(f"Missing/invalid userOpHash: {value!r}")
    return parse_data(value, "userOpHash")


class BundlerRpc:
    """One EntryPoint's bundler behind the RPC methods; the bundlers of the chain's other
    EntryPoint releases join as siblings (`serve_also`), and every method taking an
    EntryPoint is answered by the one it names."""

    def __init__(self, bundler: Bundler, estimator: GasEstimator, *, debug: bool = False) -> None:
        self.bundler = bundler
        self.estimator = estimator
        self.siblings: dict[str, BundlerRpc] = {}  # lower-case EntryPoint address -> its RPC
        self.debug = debug
        self.methods: dict[str, Handler] = {
            "eth_chainId": self.chain_id,
            "eth_supportedEntryPoints": self.supported_entry_points,
            "eth_sendUserOperation": self.send_user_operation,
            "eth_estimateUserOperationGas": self.estimate_user_operation_gas,
            "eth_getUserOperationByHash": self.get_user_operation_by_hash,
            "eth_getUserOperationReceipt": self.get_user_operation_receipt,
            "entryway_getUserOperationGasPrice": self.gas_price,
            # The name permissionless's Pimlico actions call (`getUserOperationGasPrice`).
            "pimlico_getUserOperationGasPrice": self.gas_price,
            "entryway_getUserOperationStatus": self.op_status,
        }
        if debug:
            self.methods.update(
                {
                    "debug_bundler_clearState": self.clear_state,
                    "debug_bundler_clearMempool": self.clear_mempool,
                    "debug_bundler_dumpMempool": self.dump_mempool,
                    "debug_bundler_sendBundleNow": self.send_bundle_now,
                    "debug_bundler_setBundlingMode": self.set_bundling_mode,
                    "debug_bundler_setReputation": self.set_reputation,
                    "debug_bundler_dumpReputation": self.dump_reputation,
                    "debug_bundler_clearReputation": self.clear_reputation,
                    "debug_bundler_addUserOps": self.add_user_ops,
                    "debug_bundler_getStakeStatus": self.get_stake_status,
                }
            )

    def serve_also(self, other: BundlerRpc) -> None:
        """Answer for `other`'s EntryPoint too (same chain, another release)."""
        self.siblings[other.bundler.config.entry_point.lower()] = other

    def all_rpcs(self) -> list[BundlerRpc]:
        """This EntryPoint's RPC first, then its siblings'."""
        return [self, *self.siblings.values()]

    @property
    def bundlers(self) -> list[Bundler]:
        return [r.bundler for r in self.all_rpcs()]

    async def start(self) -> None:
        """Start every EntryPoint's bundler (their auto-bundling loops)."""
        for bundler in self.bundlers:
            await bundler.start()

    async def stop(self) -> None:
        for bundler in self.bundlers:
            await bundler.stop()

    def for_entry_point(self, entry_point: Any) -> BundlerRpc:
        """The RPC of the EntryPoint named, or an invalid-params error listing those served."""
        if isinstance(entry_point, str):
            if entry_point.lower() == self.bundler.config.entry_point.lower():
                return self
            sibling = self.siblings.get(entry_point.lower())
            if sibling is not None:
                return sibling
        served = ", ".join(r.bundler.config.entry_point for r in self.all_rpcs())
        raise invalid_params(
            f"unsupported EntryPoint {entry_point!r}; this bundler serves {served}"
        )

    def _routed(self, params: list[Any], index: int) -> BundlerRpc:
        """The RPC for an optional EntryPoint parameter (this one's when it is left out)."""
        if len(params) <= index or params[index] is None:
            return self
        return self.for_entry_point(params[index])

    async def dispatch(
        self, request: Any, *, before_mempool: BeforeMempool | None = None
    ) -> dict[str, Any] | None:
        """One JSON-RPC request object in, one response object out (None for a notification).
        `before_mempool` is handed to an eth_sendUserOperation's `Bundler.send`; what it
        raises, other than a BundlerError, propagates to the caller."""
        if (
            not isinstance(request, dict)
            or request.get("jsonrpc") != "2.0"
            or not isinstance(request.get("method"), str)  # a list or object cannot be looked up
        ):
            return _error(
                None, BundlerError(RpcErrorCode.INVALID_REQUEST, "invalid JSON-RPC request")
            )
        request_id = request.get("id")
        handler = self.methods.get(request["method"])
        if handler is None:
            error = BundlerError(
                RpcErrorCode.METHOD_NOT_FOUND, f"method {request['method']} not found"
            )
            return _error(request_id, error)
        params = request.get("params", [])
        if not isinstance(params, list):
            return _error(request_id, invalid_params("params must be an array"))
        try:
            if before_mempool is not None and handler == self.send_user_operation:
                result = await self.send_user_operation(params, before_mempool)
            else:
                result = await handler(params)
        except BundlerError as exc:
            return _error(request_id, exc)
        except RpcTransportError as exc:
            # The node client logged the outage once; a line per call would bury it.
            log.debug("node unreachable in %s: %s", request["method"], exc)
            return _error(request_id, node_failure(exc))
        except RpcError as exc:
            log.warning("node error in %s: %s", request["method"], exc)
            return _error(request_id, node_failure(exc))
        if "id" not in request:
            return None
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    # ------------------------------------------------------------------ eth_*

    async def chain_id(self, params: list[Any]) -> str:
        return hex(self.bundler.config.chain_id)

    async def supported_entry_points(self, params: list[Any]) -> list[str]:
        return [r.bundler.config.entry_point for r in self.all_rpcs()]

    async def send_user_operation(
        self, params: list[Any], before_mempool: BeforeMempool | None = None
    ) -> str:
        raw = _param(params, 0, "userOp")
        target = self.for_entry_point(_param(params, 1, "entryPoint"))
        op = target.bundler.codec.parse(raw)
        return to_hex(await target.bundler.send(op, before_mempool=before_mempool))

    async def estimate_user_operation_gas(self, params: list[Any]) -> dict[str, str]:
        raw = _param(params, 0, "userOp")
        if isinstance(raw, dict):
            raw = {
                **{
                    k: "0x0"
                    for k in (
                        "callGasLimit",
                        "verificationGasLimit",
                        "preVerificationGas",
                        "maxFeePerGas",
                        "maxPriorityFeePerGas",
                    )
                },
                **{k: v for k, v in raw.items() if v is not None},
            }
        target = self.for_entry_point(_param(params, 1, "entryPoint"))
        op = target.bundler.codec.parse(raw)
        check_bounds(op, self.bundler.config.sanity)
        target.bundler.check_supported(op)
        override = params[2] if len(params) > 2 and isinstance(params[2], dict) else None
        return (await target.estimator.estimate(op, override)).to_json()

    async def get_user_operation_by_hash(self, params: list[Any]) -> dict[str, Any] | None:
        op_hash = _hash_param(params)
        with self.bundler.one_answer():
            for rpc in self._by_knowledge(op_hash):
                found = await rpc.user_operation(op_hash)
                if found is not None:
                    return found
        return None

    async def user_operation(self, op_hash: bytes) -> dict[str, Any] | None:
        """The op by its hash: mined in the bundle we sent it in (read as its receipt is),
        waiting to be bundled, or mined in a bundle found by its event in the logs."""
        bundle = await self.bundler.bundle_of(op_hash)
        if bundle is not None:
            mined = await self.bundler.receipts.user_operation_in(op_hash, bundle)
            if mined is not None:
                return mined
        pending = await self.bundler.pending_op(op_hash)
        if pending is not None:
            return {
                "userOperation": self.bundler.codec.to_json(pending),
                "entryPoint": self.bundler.config.entry_point,
                "transactionHash": None,
                "blockHash": None,
                "blockNumber": None,
            }
        return await self.bundler.receipts.user_operation(op_hash)

    async def get_user_operation_receipt(self, params: list[Any]) -> dict[str, Any] | None:
        op_hash = _hash_param(params)
        with self.bundler.one_answer():
            for rpc in self._by_knowledge(op_hash):
                if await rpc.bundler.unmined(op_hash):
                    return None  # by the account of whoever bundles it: no node call
                found = await rpc.bundler.receipt(op_hash)
                if found is not None:
                    return found
        return None

    def _by_knowledge(self, op_hash: bytes) -> list[BundlerRpc]:
        """The RPC whose bundler has seen the op, alone; every RPC when none has (the op may
        have come through another bundler or process: each reads its EntryPoint's logs)."""
        rpcs = self.all_rpcs()
        owner = next((r for r in rpcs if r.bundler.tracked.get(op_hash) is not None), None)
        return rpcs if owner is None else [owner]

    async def receipt(self, op_hash: bytes) -> dict[str, Any] | None:
        with self.bundler.one_answer():
            if await self.bundler.unmined(op_hash):
                # Not mined yet, by our own account (the bundle's follower marks it the moment
                # its receipt appears) or the intake's: answer without asking the node, which
                # clients poll hard.
                return None
            return await self.bundler.receipt(op_hash)

    async def gas_price(self, params: list[Any]) -> dict[str, dict[str, str]]:
        """{"slow"|"standard"|"fast": {"maxFeePerGas", "maxPriorityFeePerGas"}}, hex: fees
        this bundler accepts now (`entryway.bundler.gas.fee_tiers`)."""
        return {
            tier: {
                "maxFeePerGas": hex(fee.max_fee_per_gas),
                "maxPriorityFeePerGas": hex(fee.max_priority_fee_per_gas),
            }
            for tier, fee in (await suggested_fees(self.bundler)).items()
        }

    async def op_status(self, params: list[Any]) -> dict[str, Any]:
        """The op's status, from whichever EntryPoint's bundler knows it."""
        op_hash = _hash_param(params)
        status: dict[str, Any] = {"status": OpStatus.NOT_FOUND.value}
        with self.bundler.one_answer():
            for rpc in self._by_knowledge(op_hash):
                status = await rpc.status(op_hash)
                if status["status"] != OpStatus.NOT_FOUND.value:
                    break
        return status

    async def status(self, op_hash: bytes) -> dict[str, Any]:
        """The op's status here; a mined op's on an OP-stack chain with its receipt's `l1Fee`."""
        status = await self.bundler.status(op_hash)
        if self.bundler.l1_fees is None or status["status"] not in _MINED:
            return status
        receipt = await self.bundler.receipt(op_hash)
        if receipt is None or "l1Fee" not in receipt:
            return status
        return {**status, "l1Fee": receipt["l1Fee"]}

    # ------------------------------------------------------------------ debug_bundler_*

    async def clear_state(self, params: list[Any]) -> str:
        for bundler in self.bundlers:
            bundler.clear()
        return "ok"

    async def clear_mempool(self, params: list[Any]) -> str:
        for bundler in self.bundlers:
            bundler.mempool.clear()
        return "ok"

    async def dump_mempool(self, params: list[Any]) -> list[dict[str, Any]]:
        bundler = self._routed(params, 0).bundler
        return [bundler.codec.to_json(e.op) for e in bundler.mempool.entries()]

    async def send_bundle_now(self, params: list[Any]) -> str:
        """A bundle per EntryPoint with ops waiting, each returned once mined."""
        sent = None
        for bundler in self.bundlers:
            if bundler is self.bundler or len(bundler.mempool):
                sent = await bundler.bundle_once(wait=True) or sent
        return sent or "ok"

    async def set_bundling_mode(self, params: list[Any]) -> str:
        raw = _param(params, 0, "mode")
        try:
            mode = BundlingMode(raw)
        except ValueError:
            raise invalid_params(f"mode must be 'auto' or 'manual', not {raw!r}") from None
        for bundler in self.bundlers:
            bundler.mode = mode
        return "ok"

    async def set_reputation(self, params: list[Any]) -> str:
        entries = _param(params, 0, "reputations")
        if not isinstance(entries, list):
            raise invalid_params("reputations must be an array")
        reputation = self._routed(params, 1).bundler.reputation
        for item in entries:
            if not isinstance(item, dict):
                raise invalid_params("each reputation entry must be an object")
            reputation.set(
                parse_address(item.get("address"), "address"),
                _int(item.get("opsSeen", 0)),
                _int(item.get("opsIncluded", 0)),
            )
        return "ok"

    async def dump_reputation(self, params: list[Any]) -> list[dict[str, Any]]:
        rep = self._routed(params, 0).bundler.reputation
        codes = {ReputationStatus.OK: 0, ReputationStatus.THROTTLED: 1, ReputationStatus.BANNED: 2}
        # The operator's trusted entities are listed even before their first op.
        entries = rep.entries()
        seen = {e.address.lower() for e in entries}
        entries += [ReputationEntry(checksum(a)) for a in sorted(rep.trusted - seen)]
        # The standard entry's four fields; `trusted` only on a trusted entity's, so that a
        # client reading the entries strictly (the conformance suite does) is not broken by
        # a field of ours where no entity is trusted.
        return [
            {
                "address": e.address,
                "opsSeen": e.ops_seen,
                "opsIncluded": e.ops_included,
                "status": codes[rep.status(e.address)],
                **({"trusted": True} if rep.is_trusted(e.address) else {}),
            }
            for e in entries
        ]

    async def clear_reputation(self, params: list[Any]) -> str:
        for bundler in self.bundlers:
            bundler.reputation.clear()
        return "ok"

    async def add_user_ops(self, params: list[Any]) -> str:
        ops = _param(params, 0, "userOps")
        if not isinstance(ops, list):
            raise invalid_params("userOps must be an array")
        bundler = self._routed(params, 1).bundler
        for raw in ops:
            await bundler.add_unchecked(bundler.codec.parse(raw))
        return "ok"

    async def get_stake_status(self, params: list[Any]) -> dict[str, Any]:
        address = parse_address(_param(params, 0, "address"), "address")
        bundler = self._routed(params, 1).bundler
        raw = await bundler.eth.call(
            bundler.config.entry_point, EP.encode_call("getDepositInfo", address)
        )
        (_deposit, _staked, stake, delay, _withdraw) = EP.decode_output("getDepositInfo", raw)[0]
        return {
            "stakeInfo": {"addr": address, "stake": stake, "unstakeDelaySec": delay},
            "isStaked": bundler.config.rules.is_staked(StakeInfo(stake, delay)),
        }


def _int(value: Any) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return int(value, 16) if value.startswith("0x") else int(value)
    raise invalid_params(f"expected a number, got {value!r}")


def _error(request_id: Any, error: BundlerError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_rpc()}
