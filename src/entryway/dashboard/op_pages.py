"""One UserOperation's page: what `GET /v1/ops/{userOpHash}` answers (`service.routes_ops`),
for a person: its steps with their times, its calls, gas given against used, its credits, a
failed execution's revert in words, and where to look it up on the chain; an op only ever
refused at send, when and why (`service.refused_ops`)."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from fastapi.responses import Response

from entryway.chain.rpc import RpcTransportError
from entryway.dashboard import web
from entryway.domain.networks import NETWORKS
from entryway.service.refused_ops import refusal_of, refused_page
from entryway.service.routes_ops import op_page, owning_chain

OP_HASH = re.compile(r"^0x[0-9a-fA-F]{64}$")


def routes() -> APIRouter:
    router = APIRouter()

    @router.get("/projects/{project_id}/ops/{user_op_hash}")
    async def one_op(
        request: Request, project_id: str, user_op_hash: str, who: web.SignedIn
    ) -> Response:
        page = await web.project_page(request, who, project_id)
        if not OP_HASH.match(user_op_hash):
            raise web.PageNotFoundError
        services = web.services(request)
        op_hash = user_op_hash.lower()
        chain = await owning_chain(services, project_id, page.project.chains, op_hash)
        if chain is None:
            refused = await refusal_of(services, project_id, page.project.chains, op_hash)
            if refused is None:
                raise web.PageNotFoundError
            op = refused_page(services, *refused)
        else:
            try:
                op = await op_page(services, project_id, chain, op_hash)
            except RpcTransportError:
                raise web.DashboardError(
                    503, "The chain's node does not answer now: try again in a moment."
                ) from None
        context = {
            "page": page,
            "section": "operations",
            "op": op,
            "network": NETWORKS.get(op["chainId"] or 0),
            "shown_at": web.now(),
        }
        return web.render(request, who, "op.html", context)

    return router
