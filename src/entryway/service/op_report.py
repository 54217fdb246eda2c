"""One UserOperation's page, as `GET /v1/ops/{userOpHash}` answers it: where it stands and
when each step happened (received, validated, submitted, included, settled, or dropped and
why), its fields decoded (calls with target and selector, the paymaster), the gas it was
given against the gas it used, its credits, and links to look it up on the chain.

Everything is read, nothing kept: the intake row (when the op went through the durable
intake), the bundler's view and the chain's receipt, and the ledger's charges under the op's
hash."""

from __future__ import annotations

import itertools
import logging
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from eth_abi.abi import decode

from entryway import contracts
from entryway.bundler.submission import Attempt
from entryway.chain.rpc import RpcTransportError
from entryway.domain.entry_points import EntryPointVersion, version_at
from entryway.domain.evm import checksum, hex_to_bytes
from entryway.domain.networks import NETWORKS
from entryway.domain.userop import UserOperation
from entryway.domain.userop_json import op_from_json
from entryway.domain.userop_v06 import op_v06_from_json
from entryway.service.revert_text import revert_reason
from entryway.service.services import ChainRuntime
from entryway.storage.intake import IntakeRecord
from entryway.storage.ledger_queries import Charge

log = logging.getLogger(__name__)

ACCOUNT = contracts.load("SmartAccount").abi  # execute, executeBatch((address,uint256,bytes)[])
ACCOUNT_V07 = contracts.load("SimpleAccountV07").abi  # executeBatch(address[],uint256[],bytes[])
# Our contracts' errors, to put an account's revert in words.
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def is_local(chain: ChainRuntime) -> bool:
    """A chain served by a node on this machine (a devnet): nothing of it is on a public
    explorer."""
    host = urlsplit(chain.rpc_url).hostname or ""
    return host in LOCAL_HOSTS or host.startswith("127.")


def links(chain: ChainRuntime, sender: str, tx_hash: str | None) -> dict[str, Any]:
    """Where to look the op up: the chain's public explorer, or for a devnet its local node
    (whose JSON-RPC answers `eth_getTransactionReceipt` for the hash)."""
    network = NETWORKS.get(chain.chain_id)
    if is_local(chain) or network is None:
        return {"kind": "node", "node": chain.rpc_url or None, "transaction": None, "sender": None}
    return {
        "kind": "explorer",
        "node": None,
        "transaction": network.explorer_tx_url(tx_hash) if tx_hash else None,
        "sender": network.explorer_address_url(sender),
    }


def _call(target: Any, value: Any, data: bytes) -> dict[str, Any]:
    return {
        "target": checksum(str(target)),
        "value": str(value),
        "selector": "0x" + data[:4].hex() if len(data) >= 4 else None,
        "dataLength": len(data),
    }


def calls_of(call_data: bytes) -> list[dict[str, Any]] | None:
    """The calls an account's `execute` or `executeBatch` makes; None when the call data is
    neither (another account's interface, or a call to the account itself)."""
    try:
        if call_data[:4] == ACCOUNT.selector("execute"):
            target, value, data = ACCOUNT.decode_call("execute", call_data)
            return [_call(target, value, data)]
        if call_data[:4] == ACCOUNT.selector("executeBatch"):
            (batch,) = ACCOUNT.decode_call("executeBatch", call_data)
            return [_call(t, v, d) for t, v, d in batch]
        if call_data[:4] == ACCOUNT_V07.selector("executeBatch"):
            targets, values, datas = decode(["address[]", "uint256[]", "bytes[]"], call_data[4:])
            values = values or [0] * len(targets)
            return [_call(t, v, d) for t, v, d in zip(targets, values, datas, strict=True)]
    except Exception:  # malformed call data: shown raw, not decoded
        return None
    return None


def fields(op: UserOperation, entry_point: str) -> dict[str, Any]:
    return {
        "sender": op.sender,
        "nonce": str(op.nonce),
        "entryPoint": entry_point,
        "factory": op.factory,
        "paymaster": op.paymaster,
        "selector": "0x" + op.call_data[:4].hex() if len(op.call_data) >= 4 else None,
        "calls": calls_of(op.call_data),
        "maxFeePerGas": str(op.max_fee_per_gas),
        "maxPriorityFeePerGas": str(op.max_priority_fee_per_gas),
    }


def gas(op: UserOperation, receipt: dict[str, Any] | None, entry_point: str) -> dict[str, Any]:
    """The gas the op was given (what the estimate put in its limits) against what it used.
    On v0.6 a paymaster's validation and postOp each run under the verification gas."""
    if version_at(entry_point) is EntryPointVersion.V06:
        limit = op.as_v06().max_gas
    else:
        limit = (
            op.call_gas_limit
            + op.verification_gas_limit
            + op.pre_verification_gas
            + op.paymaster_verification_gas_limit
            + op.paymaster_post_op_gas_limit
        )
    used = None if receipt is None else int(receipt["actualGasUsed"], 16)
    cost = None if receipt is None else str(int(receipt["actualGasCost"], 16))
    return {
        "callGasLimit": str(op.call_gas_limit),
        "verificationGasLimit": str(op.verification_gas_limit),
        "preVerificationGas": str(op.pre_verification_gas),
        "paymasterVerificationGasLimit": str(op.paymaster_verification_gas_limit),
        "paymasterPostOpGasLimit": str(op.paymaster_post_op_gas_limit),
        "estimated": str(limit),
        "used": None if used is None else str(used),
        "actualGasCost": cost,
    }


def _at(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


async def _block_time(chain: ChainRuntime, number: int) -> datetime | None:
    try:
        block = await chain.eth.rpc.request("eth_getBlockByNumber", [hex(number), False])
    except RpcTransportError:
        return None
    return None if block is None else datetime.fromtimestamp(int(block["timestamp"], 16), UTC)


def sends_of(chain: ChainRuntime, op_hash: str, intake: IntakeRecord | None) -> tuple[Attempt, ...]:
    """The sends of the op's bundle: as the leader wrote them to the intake, or, for an op
    this process's own bundler holds (no intake: the in-memory bundler), as it knows them."""
    if intake is not None and intake.attempts:
        return intake.attempts
    tracked = chain.bundling.tracked.get(hex_to_bytes(op_hash))
    return tuple(tracked.attempts) if tracked is not None else ()


def _fees(attempt: Attempt) -> dict[str, str]:
    return {
        "maxFeePerGas": str(attempt.max_fee_per_gas),
        "maxPriorityFeePerGas": str(attempt.max_priority_fee_per_gas),
    }


def submitted(tx_hash: str, sends: tuple[Attempt, ...]) -> dict[str, Any]:
    """The submitted step: the transaction that carried the op (the mined one once mined),
    how many times its bundle was sent, and each fee bump (a stuck bundle sent again with
    both fees raised, same nonce)."""
    step: dict[str, Any] = {"step": "submitted", "at": None, "transactionHash": tx_hash}
    step["attempts"] = len(sends) or None  # None: not known here (sent by another process)
    step["feeBumps"] = [
        {
            "at": _at(datetime.fromtimestamp(new.sent_at, UTC)) if new.sent_at else None,
            "transactionHash": new.tx_hash,
            "from": _fees(old),
            "to": _fees(new),
        }
        for old, new in itertools.pairwise(sends)
    ]
    if sends and sends[0].sent_at:
        step["at"] = _at(datetime.fromtimestamp(sends[0].sent_at, UTC))
    return step


async def lifecycle(
    chain: ChainRuntime,
    status: dict[str, Any],
    intake: IntakeRecord | None,
    receipt: dict[str, Any] | None,
    charges: list[Charge],
    sends: tuple[Attempt, ...] = (),
) -> list[dict[str, Any]]:
    """The op's steps so far, in order, each with its time where one is known."""
    received = intake.received_at if intake else (charges[0].at if charges else None)
    steps: list[dict[str, Any]] = [{"step": "received", "at": _at(received)}]
    validated: dict[str, Any] = {"step": "validated", "at": _at(received)}
    if intake is not None and intake.validated_block is not None:
        validated["block"] = intake.validated_block
    steps.append(validated)
    state = str(status.get("status", "not_found"))
    tx_hash = status.get("transactionHash") or (intake.tx_hash if intake else None)
    if state in ("pending", "submitted", "included", "failed") or tx_hash:
        steps.append({"step": "queued", "at": _at(received)})
    if tx_hash:
        steps.append(submitted(str(tx_hash), sends))
    if receipt is not None:
        block = int(receipt["receipt"]["blockNumber"], 16)
        steps.append(
            {
                "step": "included",
                "at": _at(await _block_time(chain, block)),
                "block": block,
                "confirmations": int(receipt["confirmations"], 16),
                "final": receipt.get("final"),
                "success": bool(receipt["success"]),
            }
        )
    if state == "dropped":
        reason = status.get("reason") or (intake.reason if intake else None)
        steps.append({"step": "dropped", "at": None, "reason": reason})
    if receipt is not None and charges and all(c.status.value != "held" for c in charges):
        # Mined and no hold left waiting: what the op cost is known.
        last = max(c.settled_at or c.at for c in charges)
        total = sum(c.credits for c in charges)
        steps.append({"step": "settled", "at": _at(last), "credits": total})
    return steps


def credits(charges: list[Charge]) -> dict[str, Any]:
    return {
        "total": sum(c.credits for c in charges),
        "final": all(c.status.value != "held" for c in charges),
        "charges": [
            {
                "operation": c.operation,
                "credits": c.credits,
                "status": c.status.value,
                "at": _at(c.at),
                "settledAt": _at(c.settled_at),
            }
            for c in charges
        ],
    }


def revert(receipt: dict[str, Any] | None) -> dict[str, str] | None:
    """The account's revert reason, decoded, when the op was mined and its execution failed."""
    if receipt is None or receipt["success"]:
        return None
    data = hex_to_bytes(receipt.get("reason") or "0x")
    return revert_reason(data).to_json()


def op_of(found: dict[str, Any] | None, intake: IntakeRecord | None) -> UserOperation | None:
    if intake is not None:
        return intake.op
    if found is None:
        return None
    if version_at(str(found.get("entryPoint"))) is EntryPointVersion.V06:
        return UserOperation.from_v06(op_v06_from_json(found["userOperation"]))  # unpacked
    return op_from_json(found["userOperation"])
