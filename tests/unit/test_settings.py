"""Settings: the TOML file, ENTRYWAY_* variables over it, one message per problem naming its
key, and secrets that never show."""

from __future__ import annotations

from pathlib import Path

import pytest

from entryway.composition import request_limits
from entryway.domain.destinations import PRIVATE_ALLOWED
from entryway.domain.networks import GWEI
from entryway.domain.plans import PlanName
from entryway.settings import SettingsError, load_settings
from entryway.settings.checks import mask_url, masked_database_url, read_chain_keys, summary

KEY = "0x" + "11" * 32
OTHER_KEY = "0x" + "22" * 32
SECRET_URL = "https://base-sepolia.example.com/v2/sekrit-api-key"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "entryway.toml"
    path.write_text(text)
    return path


def chain_table(tmp_path: Path, chain_id: int = 84532, extra: str = "") -> str:
    keys = tmp_path / "keys"
    keys.mkdir(exist_ok=True)
    for name, key in (("executor", KEY), ("signer", OTHER_KEY), ("notary", KEY)):
        (keys / f"{name}.key").write_text(key + "\n")
    return f"""
[[chains]]
chain_id = {chain_id}
rpc_urls = ["{SECRET_URL}", "http://127.0.0.1:8545"]
executor_key_files = ["{keys / "executor.key"}"]
paymaster_signer_key_file = "{keys / "signer.key"}"
notary_submitter_key_file = "{keys / "notary.key"}"
deploy_owner = "0x000000000000000000000000000000000000dEaD"
{extra}
"""


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("ENTRYWAY_") and name != "ENTRYWAY_ANVIL":
            monkeypatch.delenv(name)


def problems(path: Path) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        load_settings(path)
    return caught.value.problems


def test_a_known_network_needs_only_urls_and_keys(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, chain_table(tmp_path)))
    (chain,) = settings.chains
    assert chain.display_name == "base-sepolia"
    assert chain.urls() == [SECRET_URL, "http://127.0.0.1:8545"]
    # Base's L1 data fee oracle comes from the network's defaults.
    assert chain.fee_rules_resolved.l1_gas_price_oracle is not None


def test_fee_rules_override_the_networks_defaults(tmp_path: Path) -> None:
    extra = "[chains.fee_rules]\nmin_priority_fee_per_gas = 30000000000\n"
    text = chain_table(tmp_path, 80002, extra)
    rules = load_settings(write(tmp_path, text)).chains[0].fee_rules_resolved
    assert rules.min_priority_fee_per_gas == 30 * GWEI
    assert rules.max_fee_per_gas > 0  # the rest stays the network's


def test_each_problem_names_its_key(tmp_path: Path) -> None:
    text = """
rate_limits = "FREE=often"
[limits]
max_body_bytes = 0
[[chains]]
chain_id = 84532
rpc_urls = []
executor_key_files = ["a.key"]
notary_submitter_key_file = "n.key"
deploy_owner = "0xnothex"
[[chains]]
chain_id = 31337
rpc_urls = ["ws://node"]
executor_key_files = ["a.key"]
notary_submitter_key_file = "n.key"
deploy_owner = "0x000000000000000000000000000000000000dEaD"
"""
    found = problems(write(tmp_path, text))
    assert any(p.startswith("rate_limits: ") for p in found), found
    assert any(p.startswith("limits.max_body_bytes: ") for p in found), found
    assert any(p.startswith("chains[0].rpc_urls: ") for p in found), found
    assert any(p.startswith("chains[0].deploy_owner: ") for p in found), found
    assert any(p.startswith("chains[1].rpc_urls: ") and "http" in p for p in found), found


def test_an_unknown_chain_must_describe_itself(tmp_path: Path) -> None:
    found = problems(write(tmp_path, chain_table(tmp_path, 31337)))
    assert found == [
        "chains[0]: chain 31337 is not a known network: give name, native_token, testnet, "
        "explorer_url"
    ]
    extra = 'name = "local"\nnative_token = "ETH"\ntestnet = true\nexplorer_url = ""\n'
    settings = load_settings(write(tmp_path, chain_table(tmp_path, 31337, extra)))
    assert settings.chains[0].display_name == "local"


def test_unknown_keys_and_bad_toml_are_refused(tmp_path: Path) -> None:
    assert problems(write(tmp_path, "databse_url = 'x'\n")) == [
        "databse_url: Extra inputs are not permitted"
    ]
    (bad,) = problems(write(tmp_path, "[limits\n"))
    assert bad.startswith("config file ") and "not valid TOML" in bad
    (missing,) = problems(tmp_path / "nowhere.toml")
    assert "cannot read it" in missing


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(
        tmp_path,
        'database_url = "sqlite+aiosqlite:///from-file.db"\n[limits]\nmax_rpc_batch = 7\n'
        "max_json_depth = 9\n[prices.native_token_micro_eur]\n84532 = 1\n",
    )
    monkeypatch.setenv("ENTRYWAY_DATABASE_URL", "postgresql://u:pw@db/entryway")
    monkeypatch.setenv("ENTRYWAY_LIMITS__MAX_RPC_BATCH", "50")  # nested name
    monkeypatch.setenv("ENTRYWAY_MAX_BODY_BYTES", "2048")  # documented flat name
    monkeypatch.setenv("ENTRYWAY_WEBHOOK_ALLOW_PRIVATE", "true")
    monkeypatch.setenv("ENTRYWAY_PAYMASTER_DEPOSIT_ALERT_WEI", "5")
    monkeypatch.setenv("ENTRYWAY_BILLING__BUDGET_ALERT_PERCENT", "90")
    settings = load_settings(path)
    assert settings.database_url is not None
    assert settings.database_url.get_secret_value() == "postgresql://u:pw@db/entryway"
    limits = request_limits(settings)
    assert (limits.max_rpc_batch, limits.max_json_depth, limits.max_body_bytes) == (50, 9, 2048)
    assert settings.webhooks.destinations == PRIVATE_ALLOWED
    assert settings.paymaster.deposit_alert_wei == 5
    assert settings.billing.billing_config().budget_alert_percent == 90
    book = settings.prices.price_book()
    assert book.native_token_micro_eur[84532] == 1
    assert book.native_token_micro_eur[80002] > 1  # the defaults stay under a partial override


def test_the_config_file_can_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENTRYWAY_CONFIG", str(write(tmp_path, "[http]\nport = 9999\n")))
    assert load_settings().http.port == 9999


def test_a_bad_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENTRYWAY_MAX_JSON_DEPTH", "deep")
    (found,) = problems(write(tmp_path, ""))
    assert found.startswith("limits.max_json_depth: ")
    assert found.endswith("(from ENTRYWAY_MAX_JSON_DEPTH)")
    monkeypatch.delenv("ENTRYWAY_MAX_JSON_DEPTH")
    monkeypatch.setenv("ENTRYWAY_HTTP__PORT", "99999")
    (found,) = problems(write(tmp_path, ""))
    assert found.startswith("http.port: ") and found.endswith("(from ENTRYWAY_HTTP__PORT)")
    monkeypatch.delenv("ENTRYWAY_HTTP__PORT")
    (found,) = problems(write(tmp_path, "[http]\nport = -1\n"))  # the file's own value
    assert found.startswith("http.port: ") and "(from" not in found


def test_billing_settings_are_checked(tmp_path: Path) -> None:
    found = problems(write(tmp_path, "[billing.overage_micro_eur_per_credit]\nGOLD = 5\n"))
    assert found and found[0].startswith("billing.overage_micro_eur_per_credit.GOLD")
    found = problems(write(tmp_path, "[billing]\nbudget_alert_percent = 0\n"))
    assert found and found[0].startswith("billing.budget_alert_percent")
    text = "[billing.overage_micro_eur_per_credit]\nPRO = 2\n"
    config = load_settings(write(tmp_path, text)).billing.billing_config()
    assert config.overage_micro_eur_per_credit == {PlanName.PRO: 2}


def test_secrets_never_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENTRYWAY_ADMIN_TOKEN", "admin-token-value")
    monkeypatch.setenv("ENTRYWAY_REDIS_URL", "redis://:redis-pass@cache:6379/0")
    monkeypatch.setenv("ENTRYWAY_DATABASE_URL", "postgresql://app:db-pass@db:5432/entryway")
    monkeypatch.setenv("ENTRYWAY_SECRETS_KEY", "c2VjcmV0cy1rZXktdmFsdWUtMzItYnl0ZXMtbG9uZyE=")
    monkeypatch.setenv("ENTRYWAY_PAYMASTER_SIGNER_KEY", OTHER_KEY)
    settings = load_settings(write(tmp_path, chain_table(tmp_path)))
    shown = repr(settings) + str(settings) + "\n".join(summary(settings))
    for secret in (
        "admin-token-value",
        "redis-pass",
        "db-pass",
        "c2VjcmV0cy1rZXktdmFsdWUtMzItYnl0ZXMtbG9uZyE=",
        OTHER_KEY,
        OTHER_KEY[2:],
        "sekrit-api-key",
    ):
        assert secret not in shown
    assert masked_database_url(settings) == "postgresql://app:***@db:5432/entryway"
    assert mask_url(SECRET_URL) == "https://base-sepolia.example.com/***"
    assert mask_url("http://127.0.0.1:8545") == "http://127.0.0.1:8545"


def test_key_files_are_read_and_named(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, chain_table(tmp_path)))
    keys = read_chain_keys(0, settings.chains[0], settings)
    assert not isinstance(keys, list)
    assert keys.paymaster_signer.address != keys.notary_submitter.address
    (tmp_path / "keys" / "notary.key").unlink()
    (tmp_path / "keys" / "executor.key").write_text("not a key\n")
    found = read_chain_keys(0, settings.chains[0], settings)
    assert isinstance(found, list)
    assert found[0].startswith("chains[0].executor_key_files[0]: ")
    assert "not a private key" in found[0]
    assert found[1].startswith("chains[0].notary_submitter_key_file: cannot read key file")


def test_chains_can_come_from_a_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    keys = tmp_path / "k.key"
    keys.write_text(KEY)
    chain = {
        "chain_id": 80002,
        "rpc_urls": ["http://127.0.0.1:8545"],
        "executor_key_files": [str(keys)],
        "notary_submitter_key_file": str(keys),
        "deploy_owner": "0x000000000000000000000000000000000000dEaD",
        "maintenance": True,
    }
    monkeypatch.setenv("ENTRYWAY_CHAINS", json.dumps([chain]))
    settings = load_settings(write(tmp_path, ""))
    assert [c.chain_id for c in settings.chains] == [80002]
    assert settings.chains[0].maintenance
    assert settings.chains[0].fee_rules_resolved.min_priority_fee_per_gas == 25 * GWEI


def test_the_registry_carries_the_configured_rules(tmp_path: Path) -> None:
    from entryway.settings.networks import network_of

    extra = "[chains.fee_rules]\nmin_priority_fee_per_gas = 30000000000\n"
    chain = load_settings(write(tmp_path, chain_table(tmp_path, 80002, extra))).chains[0]
    amoy = network_of(chain)
    assert amoy.name == "polygon-amoy" and amoy.native_token.symbol == "POL"
    assert amoy.fee_rules.min_priority_fee_per_gas == 30 * GWEI


def test_the_service_keys_are_checked_before_a_start(tmp_path: Path) -> None:
    from entryway.settings.checks import check_service_keys

    text = f'admin_token_file = "{tmp_path / "no-token"}"\n[secrets]\nkey = "c2hvcnQ="\n'
    found = check_service_keys(load_settings(write(tmp_path, text)))
    assert found[0].startswith("secrets: ") and "32 bytes" in found[0]
    assert "c2hvcnQ=" not in found[0]
    assert found[1].startswith("admin_token_file: cannot read ")


def test_the_v07_contracts_come_from_the_addresses_or_the_deploy_owner(tmp_path: Path) -> None:
    from entryway.deploy.plan import Operator, plan_deployment
    from entryway.domain.entry_points import V07
    from entryway.domain.evm import checksum
    from entryway.settings.checks import ChainKeys, deployment_of

    derived = load_settings(write(tmp_path, chain_table(tmp_path)))
    keys = read_chain_keys(0, derived.chains[0], derived)
    assert isinstance(keys, ChainKeys)
    deployment = deployment_of(derived.chains[0], keys)
    plan = plan_deployment(
        Operator(
            "0x000000000000000000000000000000000000dEaD",
            keys.paymaster_signer.address,
            keys.notary_submitter.address,
        )
    )
    assert deployment.entry_point_v07 == V07.address
    assert deployment.paymaster_v07 == plan.paymaster_v07.address
    assert deployment.simple_account_factory_v07 == plan.simple_account_factory_v07.address

    given = {
        "entry_point": "0x4337084d9e255ff0702461cf8895ce9e3b5ff108",
        "account_factory": "0x" + "a1" * 20,
        "paymaster": "0x" + "a2" * 20,
        "notary": "0x" + "a3" * 20,
    }
    v08_only = "[chains.addresses]\n" + "".join(f'{k} = "{v}"\n' for k, v in given.items())
    table = chain_table(tmp_path).replace(
        'deploy_owner = "0x000000000000000000000000000000000000dEaD"\n', ""
    )
    settings = load_settings(write(tmp_path, table + v08_only))
    only = deployment_of(settings.chains[0], keys)
    assert only.entry_point == "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
    assert (only.entry_point_v07, only.paymaster_v07, only.simple_account_factory_v07) == (
        None,
        None,
        None,
    )
    assert "entryPointV07" not in only.as_json("http://node")

    v07 = f'entry_point_v07 = "{V07.address.lower()}"\npaymaster_v07 = "0x{"b2" * 20}"\n'
    v07 += f'simple_account_factory_v07 = "0x{"b3" * 20}"\n'
    settings = load_settings(write(tmp_path, table + v08_only + v07))
    both = deployment_of(settings.chains[0], keys)
    assert both.entry_point_v07 == V07.address  # checksummed
    assert both.paymaster_v07 == checksum("0x" + "b2" * 20)
    assert both.as_json("http://node")["simpleAccountFactoryV07"] == checksum("0x" + "b3" * 20)

    bad = table + v08_only + 'paymaster_v07 = "0xnothex"\n'
    assert any(
        p.startswith("chains[0].addresses.paymaster_v07: ") for p in problems(write(tmp_path, bad))
    )


def test_a_bundlers_file_needs_only_the_database_nodes_and_executor_keys(
    tmp_path: Path,
) -> None:
    (tmp_path / "executor.key").write_text(KEY + "\n")
    text = f"""
database_url = "postgresql://entryway@db:5432/entryway"
[[chains]]
chain_id = 84532
rpc_urls = ["http://127.0.0.1:8545"]
bundling = "intake"
executor_key_files = ["{tmp_path / "executor.key"}"]
"""
    settings = load_settings(write(tmp_path, text))
    (chain,) = settings.chains
    assert chain.notary_submitter_key_file is None
    assert chain.addresses is None and chain.deploy_owner is None
    # The API and the worker, which sign sponsorships and anchor, are told what they lack.
    found = read_chain_keys(0, chain, settings)
    assert isinstance(found, list)
    assert any(p.startswith("chains[0].paymaster: no paymaster signer key") for p in found), found
    assert any(
        p.startswith("chains[0].notary_submitter_key_file: the API and the worker need it")
        for p in found
    ), found
    assert any(p.startswith("chains[0].deploy_owner: the API and the worker need") for p in found)


def test_contract_addresses_and_a_deploy_owner_are_not_both_given(tmp_path: Path) -> None:
    addresses = "[chains.addresses]\n" + "".join(
        f'{name} = "0x{byte * 20}"\n'
        for name, byte in (
            ("entry_point", "a0"),
            ("account_factory", "a1"),
            ("paymaster", "a2"),
            ("notary", "a3"),
        )
    )
    found = problems(write(tmp_path, chain_table(tmp_path, extra=addresses)))
    assert found == ["chains[0]: give the contract addresses or the deploy_owner, not both"]


def test_the_heavy_call_limits_and_the_key_cap_are_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    defaults = load_settings(write(tmp_path, ""))
    assert (defaults.heavy_rate_limits, defaults.max_keys_per_project) == ("", 20)
    monkeypatch.setenv("ENTRYWAY_HEAVY_RATE_LIMITS", "FREE=1/second")
    monkeypatch.setenv("ENTRYWAY_MAX_KEYS_PER_PROJECT", "3")
    settings = load_settings(write(tmp_path, ""))
    assert (settings.heavy_rate_limits, settings.max_keys_per_project) == ("FREE=1/second", 3)
    monkeypatch.setenv("ENTRYWAY_HEAVY_RATE_LIMITS", "FREE=often")
    monkeypatch.setenv("ENTRYWAY_MAX_KEYS_PER_PROJECT", "0")
    found = problems(write(tmp_path, ""))
    assert any(p.startswith("heavy_rate_limits: ") for p in found), found
    assert any(p.startswith("max_keys_per_project: ") for p in found), found
