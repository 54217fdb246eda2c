"""What an API key may be given, and how a new key's secret goes back.

The rules (docs/api.md, "Key roles"): a key's chains lie within its project's chains; an
admin key manages only keys within its own chains, so one limited to a chain creates,
changes and revokes keys of that chain only, and never gives a key chains it lacks; no key
changes its own chains or role, so a key cannot widen itself (another admin key, or the
operator, must). The operator may give any of the project's chains. A secret is in one
answer only, which no cache may keep.
"""

from __future__ import annotations

from collections.abc import Collection

from fastapi import Response

from entryway.domain.chain_access import unknown_chains
from entryway.domain.key_allowlist import AllowlistError, KeyAllowlist
from entryway.service.problems import Problem
from entryway.service.schemas import KeyOut
from entryway.storage.apikeys import KeyInfo
from entryway.storage.store import Caller


def supported(chains: list[int]) -> list[int]:
    """`chains`, once every one is a network this service supports (else 422)."""
    unknown = unknown_chains(chains)
    if unknown:
        raise Problem(
            422, "validation_error", "Unsupported chain",
            f"chain ids {sorted(unknown)} are not networks this service supports",
        )  # fmt: skip
    return chains


def grantable(
    chains: list[int], project_chains: Collection[int], granter: Caller | None
) -> list[int]:
    """`chains`, once they may be given to a key of this project by `granter` (None: the
    operator): supported, enabled for the project (else 422 chains_not_in_project) and, for
    a key, among its own chains (else 403 key_chains_exceeded)."""
    supported(chains)
    outside = sorted(set(chains) - set(project_chains))
    if outside:
        raise Problem(
            422,
            "chains_not_in_project",
            "Chains not enabled for the project",
            f"chain ids {outside} are not enabled for this project; a key's chains lie "
            "within its project's (enable them with PATCH /v1/project first)",
        )
    if granter is not None:
        within_granter(chains, granter)
    return chains


def within_granter(chains: Collection[int], granter: Caller) -> None:
    """403 key_chains_exceeded unless every chain is one the calling key has: it manages
    (creates, changes, revokes) only keys within its own chains."""
    beyond = sorted(set(chains) - granter.key_chains)
    if beyond:
        raise Problem(
            403,
            "key_chains_exceeded",
            "Chains beyond the calling key",
            f"this key has chains {sorted(granter.key_chains)}, not {beyond}; it manages "
            "only keys within its own chains",
        )


def refuse_own_key(granter: Caller, key_id: str) -> None:
    """403 when a key tries to change itself: its chains and role are set by another."""
    if key_id == granter.key_id:
        raise Problem(
            403,
            "own_key_change_refused",
            "A key cannot change itself",
            "no key may change its own chains or role; use another admin key",
        )


def key_out(k: KeyInfo) -> KeyOut:
    return KeyOut(
        key_id=k.key_id,
        environment=k.environment,
        chains=sorted(k.chains),
        role=k.role,
        created_at=k.created_at,
        revoked_at=k.revoked_at,
        last_used_at=k.last_used_at,
        name=k.name,
        allowed_origins=list(k.allowlist.origins),
        allowed_client_addresses=list(k.allowlist.client_addresses),
    )


def no_store(response: Response) -> None:
    """The answer carries a secret: no browser, proxy or CDN may keep a copy."""
    response.headers["Cache-Control"] = "no-store"
    response.headers["Pragma"] = "no-cache"


def no_key(key_id: str) -> Problem:
    return Problem(404, "key_not_found", "API key not found", f"no key {key_id} in this project")


def last_admin_key(key_id: str) -> Problem:
    return Problem(
        409,
        "last_admin_key",
        "Last admin key",
        f"key {key_id} is the project's last active admin key; issue another admin key "
        "before revoking or demoting this one",
    )


def allowlist_of(
    origins: list[str] | None, clients: list[str] | None, current: KeyAllowlist | None
) -> KeyAllowlist | None:
    """The key's allowlist as the request sets it (a list not given stays as `current`);
    None when neither is given. An entry that is neither an origin nor an IP address or
    network is 422 invalid_allowlist."""
    if origins is None and clients is None:
        return None
    kept = current or KeyAllowlist()
    try:
        return KeyAllowlist.of(
            list(kept.origins) if origins is None else origins,
            list(kept.client_addresses) if clients is None else clients,
        )
    except AllowlistError as exc:
        raise Problem(422, "invalid_allowlist", "Invalid allowlist", str(exc)) from None
