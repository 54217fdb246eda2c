"""`GET /v1/ops/{userOpHash}`: one UserOperation of the project, its lifecycle with times,
its fields decoded, gas given against used, credits, a failed execution's revert reason in
words, and where to look it up (`service.op_report`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from entryway.paymaster.relay_accounting import op_usage_key
from entryway.service import op_report
from entryway.service.auth import CurrentCaller
from entryway.service.chain_access import ChainGate, require_chain_access
from entryway.service.problems import Problem
from entryway.service.refused_ops import refusal_of, refused_page
from entryway.service.services import ChainRuntime, Services
from entryway.storage.intake import OpIntakeStore

OpHash = Annotated[str, Path(pattern=r"^0x[0-9a-fA-F]{64}$")]


async def owning_chain(
    services: Services, project_id: str, chains: Iterable[int], op_hash: str
) -> ChainRuntime | None:
    """The chain, among `chains`, on which the project sent the op here or our paymaster
    signed it for the project; None when there is none (another project's op is not found)."""
    for chain_id in sorted(set(chains) & set(services.chains)):
        if await services.store.ledger.owns(project_id, op_usage_key(chain_id, op_hash)):
            return services.chains[chain_id]
        signed = await services.store.signatures.by_hash(chain_id, op_hash)
        if signed is not None and signed.project_id == project_id:
            return services.chains[chain_id]
    return None


async def op_page(
    services: Services, project_id: str, chain: ChainRuntime, op_hash: str
) -> dict[str, Any]:
    """The op's whole page (the project owns it: `owns_op`)."""
    intake = await OpIntakeStore(services.store.engine).get(chain.chain_id, op_hash)
    status = await chain.rpc.op_status([op_hash])
    found = await chain.rpc.get_user_operation_by_hash([op_hash])
    receipt = await chain.rpc.get_user_operation_receipt([op_hash])
    charges = await services.store.ledger.charges_for(project_id, op_hash)
    op = op_report.op_of(found, intake)
    entry_point = intake.entry_point if intake else (found or {}).get("entryPoint")
    tx_hash = status.get("transactionHash") or (intake.tx_hash if intake else None)
    sends = op_report.sends_of(chain, op_hash, intake)
    return {
        "chainId": chain.chain_id,
        "userOpHash": op_hash,
        "status": status.get("status", "not_found"),
        "reason": status.get("reason") or (intake.reason if intake else None),
        "transactionHash": tx_hash,
        "lifecycle": await op_report.lifecycle(chain, status, intake, receipt, charges, sends),
        "fields": None if op is None else op_report.fields(op, str(entry_point)),
        "gas": None if op is None else op_report.gas(op, receipt, str(entry_point)),
        "revert": op_report.revert(receipt),
        "credits": op_report.credits(charges),
        "links": op_report.links(chain, op.sender if op else "", tx_hash),
    }


def op_routes() -> APIRouter:
    router = APIRouter()
    usable_chain = ChainGate().usable_chain

    @router.get("/v1/ops/{user_op_hash}", operation_id="getOp", tags=["userops"])
    async def get_op(
        who: CurrentCaller,
        request: Request,
        user_op_hash: OpHash,
        chain_id: Annotated[int | None, Query(alias="chainId", ge=1, le=2**53)] = None,
    ) -> dict[str, Any]:
        """One UserOperation this project sent (or our paymaster signed for it): lifecycle
        with times, fields decoded, gas estimated against used, credits, a failed
        execution's decoded revert reason and links to the chain's explorer (a devnet's:
        its local node). An op only ever refused at send (`eth_sendUserOperation` answered
        with an error) is `refused`, with when, the key's prefix and the error explained,
        while the request log keeps it. Looked for on every chain of the key unless
        `chainId` names one (free; a chain outside the key's and the project's is refused as
        every chain-bound call is, 403 `chain_not_recognised`). Another project's operation is
        not found."""
        services: Services = request.app.state.services
        op_hash = user_op_hash.lower()
        chains = who.chains
        if chain_id is not None:
            require_chain_access(who, chain_id)
            chains = chains & {chain_id}
        chain = await owning_chain(services, who.project_id, chains, op_hash)
        if chain is not None:
            # The same checks as every chain-bound route: maintenance, the node answering.
            chain = await usable_chain(request, who, chain.chain_id)
            page = await op_page(services, who.project_id, chain, op_hash)
            services.platform.meter.count_read(who, "ops", chain.chain_id)
            return page
        refused = await refusal_of(services, who.project_id, chains, op_hash)
        if refused is not None:
            services.platform.meter.count_read(who, "ops", refused[0].chain_id)
            return refused_page(services, *refused)
        raise Problem(
            404, "op_not_found", "UserOperation not found",
            f"no UserOperation {op_hash} sent by this project",
        )  # fmt: skip

    return router
