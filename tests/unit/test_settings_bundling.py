"""A chain's `bundling` setting: every op goes through the durable intake, so "intake" is the
default and the only value; a config file still naming the retired "in_process" is refused
with what to do instead. Executor keys are for wherever the chain's leader runs: an API
replica's settings may leave them out."""

from __future__ import annotations

from pathlib import Path

from eth_account import Account

from entryway.composition.leader import leader_chain
from entryway.deploy.deployer import Deployment
from entryway.deploy.plan import Operator, plan_deployment
from entryway.paymaster.signer import PaymasterSigner
from entryway.settings import load_settings
from entryway.settings.checks import ChainKeys, PreparedChain
from tests.unit.test_settings import chain_table, clean_environment, problems, write

__all__ = ["clean_environment"]  # the autouse fixture, applied here too


def test_bundling_is_the_intake_whether_named_or_not(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, chain_table(tmp_path)))
    assert settings.chains[0].bundling == "intake"
    named = load_settings(write(tmp_path, chain_table(tmp_path, extra='bundling = "intake"')))
    assert named.chains[0].bundling == "intake"


def test_the_retired_in_process_bundling_is_refused_with_what_to_do(tmp_path: Path) -> None:
    [problem] = problems(write(tmp_path, chain_table(tmp_path, extra='bundling = "in_process"')))
    assert problem.startswith("chains[0].bundling: ")
    assert 'bundling = "in_process" is retired' in problem
    assert "entryway serve" in problem and "entryway bundler" in problem
    assert problems(write(tmp_path, chain_table(tmp_path, extra='bundling = "elsewhere"')))


def test_executor_keys_may_be_left_to_the_leader_s_settings(tmp_path: Path) -> None:
    without = chain_table(tmp_path).replace(
        f'executor_key_files = ["{tmp_path / "keys" / "executor.key"}"]', "executor_key_files = []"
    )
    assert "executor_key_files = []" in without
    assert load_settings(write(tmp_path, without)).chains[0].executor_key_files == []


def test_the_executor_watch_defaults_to_the_readiness_floor_and_no_top_up(
    tmp_path: Path,
) -> None:
    chain = load_settings(write(tmp_path, chain_table(tmp_path))).chains[0]
    assert chain.executor_min_balance_wei is None  # [readiness] executor_min_wei then
    assert (chain.executor_topup_wei, chain.executor_funding_key_file) == (0, None)
    funded = load_settings(
        write(
            tmp_path,
            chain_table(
                tmp_path,
                extra=f"executor_min_balance_wei = {10**17}\nexecutor_topup_wei = {10**18}\n"
                f'executor_funding_key_file = "{tmp_path / "funding.key"}"',
            ),
        )
    ).chains[0]
    assert funded.executor_min_balance_wei == 10**17
    assert funded.executor_topup_wei == 10**18


def test_an_executor_top_up_needs_both_its_amount_and_its_funding_key(tmp_path: Path) -> None:
    key = f'executor_funding_key_file = "{tmp_path / "funding.key"}"'
    for half in (f"executor_topup_wei = {10**18}", key, f"executor_topup_wei = 0\n{key}"):
        [problem] = problems(write(tmp_path, chain_table(tmp_path, extra=half)))
        assert problem.startswith("chains[0]: ")
        assert "executor_topup_wei" in problem and "executor_funding_key_file" in problem


def test_the_bundle_share_and_trusted_entities_are_read_and_checked(tmp_path: Path) -> None:
    chain = load_settings(write(tmp_path, chain_table(tmp_path))).chains[0]
    assert (chain.bundle_block_gas_share_percent, chain.trusted_entities) == (None, [])
    factory = "0x" + "ab" * 20
    given = load_settings(
        write(
            tmp_path,
            chain_table(
                tmp_path,
                extra=f'bundle_block_gas_share_percent = 40\ntrusted_entities = ["{factory}"]',
            ),
        )
    ).chains[0]
    assert given.bundle_block_gas_share_percent == 40
    assert [a.lower() for a in given.trusted_entities] == [factory]
    for extra in (
        "bundle_block_gas_share_percent = 0",
        "bundle_block_gas_share_percent = 101",
        'trusted_entities = ["0x12"]',
    ):
        [problem] = problems(write(tmp_path, chain_table(tmp_path, extra=extra)))
        assert problem.startswith("chains[0].")


def test_a_chains_leader_trusts_the_operators_own_contracts_and_the_listed_ones(
    tmp_path: Path,
) -> None:
    factory = "0x" + "cd" * 20
    chain = load_settings(
        write(
            tmp_path,
            chain_table(
                tmp_path,
                extra=f'bundle_block_gas_share_percent = 30\ntrusted_entities = ["{factory}"]',
            ),
        )
    ).chains[0]
    key = Account.create()
    plan = plan_deployment(Operator(key.address, key.address, key.address))
    deployment = Deployment.of_plan(chain.chain_id, plan)
    keys = ChainKeys((key,), PaymasterSigner(key), key)
    bundler_chain = leader_chain(PreparedChain(chain, keys, deployment))
    assert bundler_chain.block_gas_share_percent == 30
    assert {a.lower() for a in bundler_chain.trusted_entities} == {
        factory,
        *(
            a.lower()
            for a in (
                plan.account_factory.address,
                plan.paymaster.address,
                plan.paymaster_v07.address,
                plan.simple_account_factory_v07.address,
            )
        ),
    }
    assert deployment.entry_point not in bundler_chain.trusted_entities
