"""The stored form of a UserOperation is the ERC-4337 JSON the bundler's wire layer writes
and reads: written by either, read back by either, the same op."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from entryway.bundler.rpc_types import parse_user_operation, user_operation_json
from entryway.domain.eip7702 import MARKER, Authorization
from entryway.domain.evm import checksum
from entryway.domain.userop import UserOperation
from entryway.domain.userop_json import op_from_json, op_to_json

addresses = st.binary(min_size=20, max_size=20).filter(any).map(checksum)  # zero: none
gas = st.integers(0, 2**128 - 1)
data = st.binary(max_size=80)


@st.composite
def user_ops(draw: st.DrawFn) -> UserOperation:
    factory = draw(st.none() | addresses | st.just(MARKER))
    paymaster = draw(st.none() | addresses)
    auth = draw(
        st.none()
        | st.builds(
            Authorization,
            chain_id=st.integers(0, 2**64),
            address=addresses,
            nonce=st.integers(0, 2**64 - 1),
            y_parity=st.integers(0, 1),
            r=st.integers(0, 2**256 - 1),
            s=st.integers(0, 2**256 - 1),
        )
    )
    return UserOperation(
        sender=draw(addresses), nonce=draw(st.integers(0, 2**256 - 1)), call_data=draw(data),
        call_gas_limit=draw(gas), verification_gas_limit=draw(gas),
        pre_verification_gas=draw(st.integers(0, 2**256 - 1)), max_fee_per_gas=draw(gas),
        max_priority_fee_per_gas=draw(gas), signature=draw(data), factory=factory,
        factory_data=draw(data) if factory else b"", paymaster=paymaster,
        paymaster_verification_gas_limit=draw(gas) if paymaster else 0,
        paymaster_post_op_gas_limit=draw(gas) if paymaster else 0,
        paymaster_data=draw(data) if paymaster else b"", eip7702_auth=auth,
    )  # fmt: skip


@given(user_ops())
def test_the_stored_form_is_the_wire_form_both_ways(op: UserOperation) -> None:
    assert op_to_json(op) == user_operation_json(op)
    assert op_from_json(op_to_json(op)) == op
    assert op_from_json(user_operation_json(op)) == parse_user_operation(op_to_json(op)) == op
