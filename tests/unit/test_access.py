from __future__ import annotations

import pytest

from entryway.domain.apikeys import InvalidApiKeyError, KeyEnvironment, issue, parse
from entryway.domain.chain_access import (
    AccessContext,
    ChainNotRecognisedError,
    PlanNetworkNotAllowedError,
    check_chain_access,
)
from entryway.domain.plans import PlanName, plan


def test_issued_keys_parse_back_and_are_stored_as_a_digest_only() -> None:
    key = issue(KeyEnvironment.TEST)
    assert key.secret.startswith(f"ew_test_{key.key_id}_")
    assert key.digest not in key.secret and len(key.digest) == 64
    presented = parse(key.secret)
    assert presented.key_id == key.key_id and presented.environment is KeyEnvironment.TEST
    assert presented.matches(key.digest)
    assert not parse(issue(KeyEnvironment.TEST).secret).matches(key.digest)
    assert issue(KeyEnvironment.LIVE).display.startswith("ew_live_")
    assert issue(KeyEnvironment.LIVE).secret != issue(KeyEnvironment.LIVE).secret


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "Bearer x",
        "ew_prod_0123abcd_" + "a" * 43,
        "ew_test_0123abcd_short",
        "ew_test_XYZ_" + "a" * 43,
    ],
)
def test_malformed_keys_are_refused_before_any_lookup(bad: str) -> None:
    with pytest.raises(InvalidApiKeyError):
        parse(bad)


def ctx(**kw: object) -> AccessContext:
    base = {
        "project_chains": {80002, 84532, 137},
        "key_chains": {80002, 84532, 137},
        "aa_module_enabled": True,
        "plan": plan(PlanName.STARTER),
    }
    base.update(kw)
    return AccessContext(**base)  # type: ignore[arg-type]


def test_a_usable_chain_passes() -> None:
    check_chain_access(80002, ctx())
    check_chain_access(137, ctx())


@pytest.mark.parametrize(
    ("chain_id", "context", "failed"),
    [
        (
            8453,
            ctx(),
            {"the chain ID is enabled for the project", "the API key has access to that network"},
        ),
        (84532, ctx(key_chains={80002}), {"the API key has access to that network"}),
        (80002, ctx(aa_module_enabled=False), {"the Account Abstraction module is enabled"}),
        (
            1,
            ctx(),
            {
                "the chain ID is a supported network",
                "the chain ID is enabled for the project",
                "the API key has access to that network",
            },
        ),
    ],
)
def test_unrecognised_chains_say_which_checks_failed(
    chain_id: int, context: AccessContext, failed: set[str]
) -> None:
    with pytest.raises(ChainNotRecognisedError) as info:
        check_chain_access(chain_id, context)
    assert {c.name for c in info.value.checks if not c.passed} == failed
    assert len(info.value.checks) == 4 and info.value.code == "chain_not_recognised"


def test_free_plan_is_testnet_only() -> None:
    free = ctx(plan=plan(PlanName.FREE))
    check_chain_access(80002, free)
    with pytest.raises(PlanNetworkNotAllowedError) as info:
        check_chain_access(137, free)
    assert info.value.code == "plan_network_not_allowed" and "testnets only" in str(info.value)
