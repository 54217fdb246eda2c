"""Ops refused at send: an `eth_sendUserOperation` the bundler answered with an error never
reaches the intake or the ledger, yet its sender wants to know why. The request log keeps
the refusal (code, message, plain explanation) with the op's hash, computed here as the
bundler would have (only for refusals: an accepted op's hash is the answer itself), so that
`GET /v1/ops/{userOpHash}` and the op's page answer `refused` with the reason rather than
"not found", and the Operations page lists the latest refusals."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from entryway.domain.evm import to_hex
from entryway.service import op_report
from entryway.service.services import ChainRuntime, Services
from entryway.storage.request_log import SEND, LogFilter, LoggedCall, RequestLogRecords

REFUSED = "refused"
NO_LINKS = {"kind": "node", "node": None, "transaction": None, "sender": None}


async def refused_op_hash(chain: ChainRuntime, payload: Any) -> str | None:
    """The userOpHash of a refused send, as the bundler of its EntryPoint computes it; None
    when the op cannot be read (malformed, an EntryPoint not served), or would need the node
    (an EIP-7702 op without its authorization: its hash depends on the code at the sender)."""
    params = payload.get("params") if isinstance(payload, dict) else None
    if not isinstance(params, list) or len(params) < 2:
        return None
    try:
        target = chain.rpc.for_entry_point(params[1])
        op = target.bundler.codec.parse(params[0])
        if op.is_eip7702 and op.eip7702_auth is None:
            return None
        return to_hex(await target.bundler.op_hash(op))
    except Exception:  # any refusal of the op itself: no hash to keep
        return None


async def refusal_of(
    services: Services, project_id: str, chains: Iterable[int], op_hash: str
) -> tuple[LoggedCall, int] | None:
    records = RequestLogRecords(services.store.engine)
    return await records.refused_send(project_id, op_hash, sorted(set(chains)))


def refused_page(services: Services, call: LoggedCall, refusals: int) -> dict[str, Any]:
    """The op's page as `GET /v1/ops/{userOpHash}` answers for an op only ever refused: when,
    with which key, on which chain, and why (the JSON-RPC error and its explanation). The op
    itself was not kept, so no fields, gas or credits: nothing was charged."""
    chain = services.chains.get(call.chain_id or 0)
    at = call.at.isoformat()
    reason = call.message
    return {
        "chainId": call.chain_id,
        "userOpHash": call.user_op_hash,
        "status": REFUSED,
        "reason": reason,
        "refusal": {
            "at": at,
            "keyPrefix": call.key_prefix,
            "code": call.rpc_code,
            "message": call.message,
            "explanation": call.explanation,
            "sender": call.sender,
            "nonce": call.nonce,
            "times": refusals,
        },
        "transactionHash": None,
        "lifecycle": [
            {"step": "received", "at": at},
            {
                "step": REFUSED,
                "at": at,
                "reason": reason,
                "code": call.rpc_code,
                "explanation": call.explanation,
            },
        ],
        "fields": None,
        "gas": None,
        "revert": None,
        "credits": {"total": 0, "final": True, "charges": []},
        "links": op_report.links(chain, call.sender or "", None) if chain else NO_LINKS,
    }


async def latest_refusals(services: Services, project_id: str, limit: int) -> list[LoggedCall]:
    """The project's latest refused sends, newest first (the Operations page)."""
    records = RequestLogRecords(services.store.engine)
    where = LogFilter(method=SEND, outcome="error")
    return await records.page(project_id, where, before=None, limit=limit)
