"""Each ERC-7562 rule broken by each entity, directly and one call deeper, rejected with the
right code; and what the rules allow, accepted. On real anvil, through the bundler."""

from __future__ import annotations

import pytest

from tests.integration.bundler.conftest import RpcClient
from tests.integration.bundler.rules_setup import RuleContracts, deploy_rule_contracts
from tests.integration.harness import Harness

BANNED = -32502
ENVIRONMENT_OPCODES = [
    "TIMESTAMP", "NUMBER", "ORIGIN", "GASPRICE", "BASEFEE", "COINBASE", "GASLIMIT",
    "PREVRANDAO", "BLOCKHASH",
]  # fmt: skip
# rule -> (ERC-7562 rule id the bundler must name, message fragment)
BROKEN = {
    **{op: ("OP-011", f"uses banned opcode: {op}") for op in ENVIRONMENT_OPCODES},
    "PREVRANDAO": ("OP-011", "uses banned opcode: DIFFICULTY"),  # anvil's name for 0x44
    "GAS": ("OP-012", "GAS"),
    "SELFBALANCE": ("OP-080", "SELFBALANCE"),
    "BALANCE": ("OP-080", "BALANCE"),
    "CREATE": ("OP-011", "uses banned opcode: CREATE"),
    "CALL_VALUE": ("OP-061", "with value"),
    "CALL_NO_CODE": ("OP-041", "no code"),
    "EXTCODESIZE_NO_CODE": ("OP-041", "no code"),
    "EP_CALL": ("OP-054", "EntryPoint"),
    "EP_EXTCODEHASH": ("OP-054", "EntryPoint"),
    "PRECOMPILE": ("OP-062", "precompile"),
    "OOG": ("OP-020", "out of gas"),
    "WRITE_OTHER": ("STO-021", "unassociated storage"),
}


@pytest.fixture(scope="session")
async def rules(harness: Harness) -> RuleContracts:
    return await deploy_rule_contracts(harness)


def assert_rule(error: dict[str, object], rule: str, fragment: str, entity: str) -> None:
    assert error["code"] == BANNED, error
    message = str(error["message"])
    assert message.startswith(entity), message
    assert fragment in message, message
    assert error["data"] == {"rule": rule}


@pytest.mark.parametrize("nested", [False, True], ids=["direct", "nested"])
@pytest.mark.parametrize("rule", sorted(BROKEN))
async def test_account_breaking_a_rule_is_rejected(
    client: RpcClient, rules: RuleContracts, rule: str, nested: bool
) -> None:
    op = await rules.account_op(f"NESTED:{rule}" if nested else rule)
    assert_rule(await client.send_error(op), *BROKEN[rule], "account")


@pytest.mark.parametrize("nested", [False, True], ids=["direct", "nested"])
@pytest.mark.parametrize(
    "rule", ["TIMESTAMP", "GAS", "CALL_NO_CODE", "EP_CALL", "OOG", "WRITE_OTHER"]
)
async def test_paymaster_breaking_a_rule_is_rejected(
    client: RpcClient, rules: RuleContracts, rule: str, nested: bool
) -> None:
    op = await rules.paymaster_op(f"NESTED:{rule}" if nested else rule)
    assert_rule(await client.send_error(op), *BROKEN[rule], "paymaster")


@pytest.mark.parametrize("nested", [False, True], ids=["direct", "nested"])
@pytest.mark.parametrize(
    "rule", ["NUMBER", "BALANCE", "EXTCODESIZE_NO_CODE", "PRECOMPILE", "CREATE"]
)
async def test_factory_breaking_a_rule_is_rejected(
    client: RpcClient, rules: RuleContracts, rule: str, nested: bool
) -> None:
    op = await rules.factory_op(f"NESTED:{rule}" if nested else rule)
    assert_rule(await client.send_error(op), *BROKEN[rule], "factory")


async def test_factory_may_create2_only_the_sender(client: RpcClient, rules: RuleContracts) -> None:
    error = await client.send_error(await rules.factory_op("CREATE2"))
    assert_rule(error, "OP-031", "CREATE2", "factory")
    assert await client.send(await rules.factory_op(""))  # its one CREATE2 is the sender


async def test_account_may_not_create2_or_create_without_a_factory(
    client: RpcClient, rules: RuleContracts
) -> None:
    assert_rule(
        await client.send_error(await rules.account_op("CREATE2")), "OP-031", "CREATE2", "account"
    )


@pytest.mark.parametrize(
    ("entity", "rule"),
    [
        ("paymaster", "OWN_STORAGE"),  # STO-031
        ("paymaster", "WRITE_SELF"),  # STO-032
        ("paymaster", "READ_OTHER"),  # STO-033
        ("paymaster", "SELFBALANCE"),  # OP-080
        ("factory", "OWN_STORAGE"),  # STO-031
        ("factory", "WRITE_SENDER"),  # STO-022: the sender's storage before it exists
        ("factory", "CREATE"),  # OP-033
    ],
)
async def test_staked_entities_may_do_more(
    client: RpcClient, rules: RuleContracts, entity: str, rule: str
) -> None:
    unstaked = await (rules.paymaster_op(rule) if entity == "paymaster" else rules.factory_op(rule))
    error = await client.send_error(unstaked)
    assert error["code"] == BANNED and str(error["message"]).startswith(entity), error
    staked = await (
        rules.paymaster_op(rule, staked=True)
        if entity == "paymaster"
        else rules.factory_op(rule, staked=True)
    )
    assert await client.send(staked)


@pytest.mark.parametrize("rule", ["", "OWN_STORAGE", "WRITE_SENDER", "NESTED:WRITE_SENDER"])
async def test_an_existing_account_may_use_its_own_and_associated_storage(
    client: RpcClient, rules: RuleContracts, rule: str
) -> None:
    assert await client.send(await rules.account_op(rule))  # STO-010, STO-021


async def test_unstaked_paymaster_may_touch_the_senders_associated_storage(
    client: RpcClient, rules: RuleContracts
) -> None:
    assert await client.send(await rules.paymaster_op("WRITE_SENDER"))  # STO-021


async def test_unstaked_account_read_of_unassociated_storage_is_rejected(
    client: RpcClient, rules: RuleContracts
) -> None:
    error = await client.send_error(await rules.account_op("READ_OTHER"))
    assert_rule(error, "STO-021", "unassociated storage", "account")


async def test_a_clean_op_of_each_entity_is_bundled(
    client: RpcClient, rules: RuleContracts
) -> None:
    hashes = [
        await client.send(await rules.account_op("")),
        await client.send(await rules.paymaster_op("")),
        await client.send(await rules.factory_op("")),
    ]
    await client.bundle()
    for op_hash in hashes:
        receipt = await client.result("eth_getUserOperationReceipt", op_hash)
        assert receipt is not None and receipt["success"] is True


async def test_an_op_whose_entity_code_changed_is_not_bundled(
    client: RpcClient, rules: RuleContracts, harness: Harness
) -> None:
    from entryway.domain.evm import to_hex

    op = await rules.paymaster_op("")
    op_hash = await client.send(op)
    paymaster = op.paymaster
    assert paymaster is not None
    code = await harness.eth.get_code(paymaster)
    # Same behaviour, different bytes (a trailing byte after the metadata): COD-010 applies.
    await harness.eth.rpc.request("anvil_setCode", [paymaster, to_hex(code + b"\x00")])
    try:
        assert await client.bundle() == "ok"  # nothing was sent
        status = await client.result("entryway_getUserOperationStatus", op_hash)
        assert status["status"] == "dropped" and "COD-010" in status["reason"]
    finally:
        await harness.eth.rpc.request("anvil_setCode", [paymaster, to_hex(code)])


async def test_the_second_validation_drops_an_op_its_account_broke_and_bundles_the_rest(
    client: RpcClient, rules: RuleContracts, harness: Harness
) -> None:
    """Both ops are validated again in one batch before bundling: the one whose account no
    longer validates is dropped, the other still goes."""
    broken = await rules.account_op("")
    fine = await rules.account_op("")
    broken_hash = await client.send(broken)
    fine_hash = await client.send(fine)
    await harness.eth.rpc.request("anvil_setCode", [broken.sender, "0xfe"])  # INVALID
    await client.bundle()
    status = await client.result("entryway_getUserOperationStatus", broken_hash)
    assert status["status"] == "dropped"
    assert status["reason"].startswith("second validation failed")
    receipt = await client.result("eth_getUserOperationReceipt", fine_hash)
    assert receipt is not None and receipt["success"] is True
