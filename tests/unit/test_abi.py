from __future__ import annotations

from eth_abi.abi import encode

from entryway import contracts
from entryway.contracts.abi import ContractAbi, abi_type, selector
from entryway.domain.evm import keccak


def test_tuple_types_are_spelled_out() -> None:
    handle_ops = contracts.load("EntryPoint").abi.function("handleOps")
    assert abi_type(handle_ops["inputs"][0]) == (
        "(address,uint256,bytes,bytes,bytes32,uint256,bytes32,bytes,bytes)[]"
    )
    assert selector(handle_ops) == bytes.fromhex("765e827f")


def test_calls_round_trip() -> None:
    account = contracts.load("SmartAccount").abi
    calls = [("0x" + "11" * 20, 5, b"\x01\x02")]
    data = account.encode_call("executeBatch", calls)
    assert data[:4] == keccak(b"executeBatch((address,uint256,bytes)[])")[:4]
    # Arrays come back as tuples, addresses checksummed.
    assert account.decode_call("executeBatch", data) == (
        (("0x1111111111111111111111111111111111111111", 5, b"\x01\x02"),),
    )


def test_errors_decode_by_name() -> None:
    ep = contracts.load("EntryPoint").abi
    failed = ep.decode_error(
        selector(
            {
                "name": "FailedOp",
                "inputs": [{"type": "uint256"}, {"type": "string"}],
            }
        )
        + encode(["uint256", "string"], [0, "AA24 signature error"])
    )
    assert failed is not None
    assert (failed.name, failed.args) == ("FailedOp", (0, "AA24 signature error"))
    assert str(failed) == "FailedOp(0, 'AA24 signature error')"
    plain = ep.decode_error(bytes.fromhex("08c379a0") + encode(["string"], ["nope"]))
    assert plain is not None and plain.args == ("nope",)
    assert ep.decode_error(b"\xde\xad\xbe\xef") is None


def test_overloads_are_refused_rather_than_guessed() -> None:
    item = {"type": "function", "name": "f", "inputs": [], "outputs": []}
    try:
        ContractAbi([item, {**item, "inputs": [{"type": "uint256"}]}])
    except ValueError as exc:
        assert "overloaded" in str(exc)
    else:
        raise AssertionError("overloads accepted")
