"""Relaying for an existing EntryPoint v0.7 account: the v0.7 userOpHash (a fixed vector, the
ABI encoding written out here, and the service's own function), and the ERC-4337 / ERC-7677
pipeline over a fake service and node: every step names the v0.7 EntryPoint, the nonce comes
from its getNonce, and the account's callback signs the v0.7 hash."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from entryway_sdk import (
    ENTRY_POINT_V07,
    ENTRY_POINT_V08,
    Entryway,
    EntrywayError,
    ExistingAccount,
    UserOperation,
    entry_point_version,
    personal_sign,
    simple_account_call_data,
    user_op_hash,
)
from eth_abi.abi import decode, encode
from eth_account import Account
from eth_utils.address import to_checksum_address
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from entryway import contracts
from entryway.bundler.rpc_types import parse_user_operation, user_operation_json
from entryway.domain import userop as service_userop
from entryway.domain.entry_points import V07, EntryPointVersion
from entryway.domain.evm import keccak
from entryway.domain.signatures import eth_signed_message_digest
from tests.sdk.fakes import API, DEFAULTS, FAST, NODE, Fake
from tests.sdk.test_hashing import VECTOR_OP
from tests.unit.test_userop import user_ops

ACCOUNT = "0x5555555555555555555555555555555555555555"
PAYMASTER = "0xD0cF9e6DB79Cb594E04D1c82319cfCDE99B31C85"
SIMPLE_ACCOUNT = contracts.load("SimpleAccountV07").abi
ZERO_ADDRESS = "0x" + "00" * 20
OP = VECTOR_OP


# ---------------------------------------------------------------- the v0.7 hash


def test_a_known_v07_user_op_hash() -> None:
    """A fixed vector, the hash's definition written out with eth-abi, and the service's."""
    inner = keccak(
        encode(
            [
                "address",
                "uint256",
                "bytes32",
                "bytes32",
                "bytes32",
                "uint256",
                "bytes32",
                "bytes32",
            ],
            [
                OP.sender,
                OP.nonce,
                keccak(bytes.fromhex("2222222222222222222222222222222222222222") + b"\x01\x02"),
                keccak(OP.call_data),
                ((200_000 << 128) | 100_000).to_bytes(32, "big"),
                50_000,
                ((10**9 << 128) | 3 * 10**9).to_bytes(32, "big"),
                keccak(
                    bytes.fromhex("3333333333333333333333333333333333333333")
                    + (60_000).to_bytes(16, "big")
                    + bytes(16)
                    + b"\xaa" * 77
                ),
            ],
        )
    )
    expected = keccak(encode(["bytes32", "address", "uint256"], [inner, ENTRY_POINT_V07, 80002]))
    assert expected.hex() == "15dfb2b576010bda0f3f6cbd51e4320e0403da80875d43ff46675f9260a5bcd6"
    assert user_op_hash(OP, ENTRY_POINT_V07, 80002) == expected
    service = parse_user_operation(OP.to_rpc())
    assert service_userop.user_op_hash(service, V07.address, 80002) == expected
    # v0.8 at its own address is still the EIP-712 digest (test_hashing's vector)
    assert user_op_hash(OP, ENTRY_POINT_V08, 80002) != expected


def test_the_release_is_read_from_the_address_or_given() -> None:
    assert entry_point_version(ENTRY_POINT_V07.lower()) == "0.7"
    assert entry_point_version(ENTRY_POINT_V08) == "0.8"
    elsewhere = "0x" + "77" * 20  # a private devnet's v0.7, say
    assert user_op_hash(OP, elsewhere, 80002, version="0.7") == service_userop.user_op_hash(
        parse_user_operation(OP.to_rpc()), elsewhere, 80002, version=EntryPointVersion.V07
    )
    assert user_op_hash(OP, elsewhere, 80002) == user_op_hash(OP, elsewhere, 80002, version="0.8")
    with pytest.raises(ValueError, match="unsupported EntryPoint version"):
        user_op_hash(OP, elsewhere, 80002, version="1.0")  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(op=user_ops(), chain_id=st.sampled_from([80002, 84532, 137, 8453]))
def test_v07_hash_matches_the_service(op: service_userop.UserOperation, chain_id: int) -> None:
    assume(ZERO_ADDRESS not in (op.factory, op.paymaster) and not op.is_eip7702)
    mine = UserOperation.from_rpc(user_operation_json(op))
    assert user_op_hash(mine, ENTRY_POINT_V07, chain_id) == service_userop.user_op_hash(
        op, V07.address, chain_id
    )


def test_simple_account_call_data_is_the_v07_simple_accounts() -> None:
    a, b = Account.create().address, Account.create().address
    one = simple_account_call_data(_calls([(a, 5, b"\x01")]))
    assert one == SIMPLE_ACCOUNT.encode_call("execute", a, 5, b"\x01")
    two = simple_account_call_data(_calls([(a, 0, b""), (b, 9, b"\x02")]))
    assert two == SIMPLE_ACCOUNT.encode_call("executeBatch", [a, b], [0, 9], [b"", b"\x02"])


async def test_personal_sign_signs_the_eip191_message_of_the_hash() -> None:
    owner = Account.create()
    digest = bytes(range(32))
    signature = await personal_sign(owner)(digest)  # type: ignore[misc]
    assert Account._recover_hash(eth_signed_message_digest(digest), signature=signature) == (
        owner.address
    )


def _calls(items: list[tuple[str, int, bytes]]) -> list[Any]:
    from entryway_sdk import Call

    return [Call(to, value, data) for to, value, data in items]


# ---------------------------------------------------------------- the pipeline


class Chain:
    """A fake node (code at the account, EntryPoint.getNonce) beside the fake service, every
    request recorded as (method, params) in order."""

    def __init__(self, nonce: int = 3, deployed: bool = True) -> None:
        self.fake = Fake()
        self.nonce = nonce
        self.deployed = deployed
        self.calls: list[tuple[str, list[Any]]] = []
        self.sent: dict[str, Any] = {}
        self.version: EntryPointVersion | None = None  # the bundler's, if not its address's
        self.fake.routes.update(
            {
                "entryway_getUserOperationGasPrice": self._answer(
                    {
                        "standard": {
                            "maxFeePerGas": "0x3b9aca00",
                            "maxPriorityFeePerGas": "0x5f5e100",
                        }
                    }
                ),
                "pm_getPaymasterStubData": self._answer(
                    {
                        "paymaster": PAYMASTER,
                        "paymasterData": "0x" + "00" * 20,
                        "paymasterVerificationGasLimit": hex(40_000),
                        "paymasterPostOpGasLimit": hex(30_000),
                    }
                ),
                "eth_estimateUserOperationGas": self._answer(
                    {
                        "preVerificationGas": hex(50_000),
                        "verificationGasLimit": hex(90_000),
                        "callGasLimit": hex(70_000),
                        "paymasterVerificationGasLimit": hex(45_000),
                    }
                ),
                "pm_getPaymasterData": self._answer(
                    {
                        "paymaster": PAYMASTER,
                        "paymasterData": "0x" + "ab" * 20,
                        "paymasterVerificationGasLimit": hex(45_000),
                        "paymasterPostOpGasLimit": hex(30_000),
                    }
                ),
                "eth_sendUserOperation": self._send,
            }
        )

    def methods(self) -> list[str]:
        return [m for m, _ in self.calls]

    def params(self, method: str) -> list[Any]:
        (found,) = [p for m, p in self.calls if m == method]
        return found

    @staticmethod
    def _answer(result: Any) -> Callable[[httpx.Request], httpx.Response]:
        def route(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": result})

        return route

    def _send(self, request: httpx.Request) -> httpx.Response:
        raw, entry_point = json.loads(request.content)["params"]
        self.sent = raw
        op = parse_user_operation(raw)
        digest = service_userop.user_op_hash(op, entry_point, 80002, version=self.version)
        answer = "0x" + digest.hex()
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": answer})

    def _node(self, method: str, params: list[Any]) -> Any:
        if method == "eth_chainId":
            return hex(80002)
        if method == "eth_getCode":
            return "0x6080" if self.deployed else "0x"
        assert method == "eth_call", method
        call = params[0]
        data = bytes.fromhex(call["data"][2:])
        _, key = decode(["address", "uint192"], data[4:])
        return "0x" + encode(["uint256"], [(key << 64) | self.nonce]).hex()

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        if str(request.url) == NODE:
            method, params = body["method"], body["params"]
            self.calls.append((method, params))
            return httpx.Response(
                200, json={"jsonrpc": "2.0", "id": 1, "result": self._node(method, params)}
            )
        if request.url.path.startswith("/rpc/"):
            self.calls.append((body["method"], body["params"]))
        return self.fake.handle(request)


@pytest.fixture
def chain() -> Chain:
    return Chain()


@pytest.fixture
async def client(chain: Chain) -> AsyncIterator[Entryway]:
    async with httpx.AsyncClient(transport=httpx.MockTransport(chain.handle)) as http:
        yield await Entryway.init(
            api_key="ew_test_key", rpc_url=NODE, chain_id=80002, base_url=API, http=http, retry=FAST
        )


class Callback:
    """The account's signer: records the hashes it is given, answers a fixed signature of
    its own format (not 65 bytes: the SDK passes it on as it is)."""

    def __init__(self) -> None:
        self.hashes: list[bytes] = []

    def __call__(self, user_op_hash: bytes) -> bytes:
        self.hashes.append(user_op_hash)
        return b"\x01" + user_op_hash


async def test_sponsored_relay_runs_the_pipeline_through_v07(
    client: Entryway, chain: Chain
) -> None:
    sign = Callback()
    account = client.account(ACCOUNT, signer=sign)
    assert isinstance(account, ExistingAccount) and account.entry_point == ENTRY_POINT_V07
    to = Account.create().address

    pending = await account.send({"to": to, "value": 7})

    assert chain.methods()[1:] == [
        "eth_getCode",
        "eth_call",
        "entryway_getUserOperationGasPrice",
        "pm_getPaymasterStubData",
        "eth_estimateUserOperationGas",
        "pm_getPaymasterData",
        "eth_sendUserOperation",
    ]
    (get_nonce,) = [p for m, p in chain.calls if m == "eth_call"]
    assert get_nonce[0]["to"] == ENTRY_POINT_V07
    for method in ("pm_getPaymasterStubData", "pm_getPaymasterData"):
        assert chain.params(method)[1:] == [ENTRY_POINT_V07, hex(80002), {}]
    assert chain.params("eth_estimateUserOperationGas")[1] == ENTRY_POINT_V07
    assert chain.params("eth_sendUserOperation")[1] == ENTRY_POINT_V07
    # estimation saw a stand-in ECDSA signature and the stub's paymaster
    estimated = chain.params("eth_estimateUserOperationGas")[0]
    assert len(bytes.fromhex(estimated["signature"][2:])) == 65
    assert estimated["paymaster"] == PAYMASTER

    sent = parse_user_operation(chain.sent)
    assert sent.sender.lower() == ACCOUNT.lower() and sent.nonce == 3
    assert sent.call_data == SIMPLE_ACCOUNT.encode_call("execute", to, 7, b"")
    assert sent.paymaster_data == b"\xab" * 20 and sent.paymaster_verification_gas_limit == 45_000
    assert (sent.call_gas_limit, sent.verification_gas_limit) == (70_000, 90_000)
    # the callback signed the op's v0.7 hash, and its answer is the op's signature
    v07_hash = service_userop.user_op_hash(sent, V07.address, 80002)
    assert sign.hashes == [v07_hash]
    assert sent.signature == b"\x01" + v07_hash
    assert pending.user_op_hash == "0x" + v07_hash.hex()


async def test_self_funded_relay_skips_the_paymaster_and_signs_asynchronously(
    client: Entryway, chain: Chain
) -> None:
    hashes: list[bytes] = []

    async def sign(user_op_hash: bytes) -> bytes:
        hashes.append(user_op_hash)
        return b"\x02" * 65

    account = client.account(ACCOUNT, signer=sign, nonce_key=5)
    raw = b"\xde\xad\xbe\xef"
    pending = await account.send(call_data=raw, sponsored=False)

    assert "pm_getPaymasterStubData" not in chain.methods()
    assert "pm_getPaymasterData" not in chain.methods()
    get_nonce = chain.params("eth_call")[0]["data"]
    assert decode(["address", "uint192"], bytes.fromhex(get_nonce[10:])) == (ACCOUNT.lower(), 5)
    sent = parse_user_operation(chain.sent)
    assert sent.call_data == raw and sent.paymaster is None
    assert sent.nonce == (5 << 64) | 3
    assert hashes == [service_userop.user_op_hash(sent, V07.address, 80002)]
    assert pending.user_op_hash == "0x" + hashes[0].hex()


async def test_the_chains_v07_entry_point_and_an_explicit_one_are_used(chain: Chain) -> None:
    elsewhere = "0x" + "77" * 20
    chain.version = EntryPointVersion.V07
    chain.fake.routes["/get-sdk-defaults"] = lambda _: httpx.Response(
        200, json=DEFAULTS | {"entryPointV07": elsewhere}
    )
    async with httpx.AsyncClient(transport=httpx.MockTransport(chain.handle)) as http:
        client = await Entryway.init(
            api_key="ew_test_key", rpc_url=NODE, chain_id=80002, base_url=API, http=http, retry=FAST
        )
        assert client.defaults.entry_point_v07 == to_checksum_address(elsewhere)
        sign = Callback()
        account = client.account(ACCOUNT, signer=sign, entry_point_version="0.7")
        assert account.entry_point.lower() == elsewhere
        await account.send({"to": ACCOUNT}, sponsored=False)
        sent = parse_user_operation(chain.sent)
        assert chain.params("eth_sendUserOperation")[1].lower() == elsewhere
        assert sign.hashes == [
            service_userop.user_op_hash(sent, elsewhere, 80002, version=EntryPointVersion.V07)
        ]


async def test_an_account_with_no_code_is_refused_before_anything_is_sent(
    client: Entryway, chain: Chain
) -> None:
    chain.deployed = False
    sign = Callback()
    with pytest.raises(EntrywayError, match="no account is deployed"):
        await client.account(ACCOUNT, signer=sign).send({"to": ACCOUNT})
    assert sign.hashes == [] and "eth_sendUserOperation" not in chain.methods()
    with pytest.raises(ValueError, match="either calls or call_data"):
        await client.account(ACCOUNT, signer=sign).send({"to": ACCOUNT}, call_data=b"")
