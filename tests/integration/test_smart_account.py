"""SmartAccount and AccountFactory on EntryPoint v0.8, on a real anvil."""

from __future__ import annotations

from entryway.domain.signatures import message_digest, sign_digest
from entryway.domain.userop import user_op_hash
from tests.integration.harness import ACCOUNT, COUNTER, ETHER, FACTORY, Harness


async def deploy_counter(h: Harness) -> str:
    from entryway import contracts

    receipt = await h.executor.send(None, contracts.load("TestCounter").bytecode)
    assert receipt.contract_address is not None
    return receipt.contract_address


async def test_user_op_hash_matches_the_entry_point(harness: Harness) -> None:
    owner = harness.new_key()
    op = await harness.build_op(owner.address, b"\x12\x34")
    op = harness.sponsor(op)  # paymasterAndData is part of the hash too
    local = user_op_hash(op, harness.deployment.entry_point, harness.chain_id)
    assert local == await harness.on_chain_hash(op)


async def test_first_op_deploys_the_account_and_executes_its_call(harness: Harness) -> None:
    owner = harness.new_key()
    counter = await deploy_counter(harness)
    sender = await harness.account_address(owner.address)
    assert await harness.eth.get_code(sender) == b""
    await harness.fund(sender, ETHER)  # unsponsored: the account pays its own prefund

    call = ACCOUNT.encode_call("execute", counter, 0, COUNTER.encode_call("count"))
    op = harness.sign(await harness.build_op(owner.address, call), owner)
    assert op.factory == harness.deployment.account_factory

    bundle = await harness.handle_ops([op])

    assert [o.success for o in bundle.outcomes] == [True]
    assert bundle.outcomes[0].user_op_hash == await harness.on_chain_hash(op)
    assert await harness.eth.get_code(sender) != b""
    assert await harness.call(sender, ACCOUNT, "owner") == owner.address
    assert await harness.call(counter, COUNTER, "counts", sender) == 1


async def test_execute_batch_runs_every_call(harness: Harness) -> None:
    owner = harness.new_key()
    counter = await deploy_counter(harness)
    sender = await harness.account_address(owner.address, salt=7)
    await harness.fund(sender, ETHER)
    count = COUNTER.encode_call("count")
    call = ACCOUNT.encode_call("executeBatch", [(counter, 0, count), (counter, 0, count)])
    op = harness.sign(await harness.build_op(owner.address, call, salt=7), owner)
    bundle = await harness.handle_ops([op])
    assert bundle.outcomes[0].success
    assert await harness.call(counter, COUNTER, "counts", sender) == 2


async def test_wrong_owner_signature_is_refused(harness: Harness) -> None:
    owner, stranger = harness.new_key(), harness.new_key()
    sender = await harness.account_address(owner.address)
    await harness.fund(sender, ETHER)
    op = harness.sign(await harness.build_op(owner.address, b""), stranger)
    error = await harness.handle_ops_error([op])
    assert error.name == "FailedOp"
    assert error.args[1] == "AA24 signature error"


async def test_signature_for_another_chain_is_refused(harness: Harness) -> None:
    owner = harness.new_key()
    sender = await harness.account_address(owner.address)
    await harness.fund(sender, ETHER)
    op = harness.sign(await harness.build_op(owner.address, b""), owner, chain_id=84532)
    error = await harness.handle_ops_error([op])
    assert error.args[1] == "AA24 signature error"


async def test_factory_refuses_callers_other_than_the_sender_creator(harness: Harness) -> None:
    owner = harness.new_key()
    data = FACTORY.encode_call("createAccount", owner.address, 0)
    error = await harness.revert_error(
        harness.deployment.account_factory, FACTORY, data, sender=harness.executor.address
    )
    assert error.name == "NotSenderCreator"


async def test_counterfactual_address_is_where_the_account_lands(harness: Harness) -> None:
    owner = harness.new_key()
    predicted = await harness.account_address(owner.address, salt=3)
    other_salt = await harness.account_address(owner.address, salt=4)
    assert predicted != other_salt
    op = harness.sponsor(await harness.build_op(owner.address, b"", salt=3))
    op = harness.sign(op, owner)
    await harness.handle_ops([op])
    assert await harness.eth.get_code(predicted) != b""


async def test_erc1271_accepts_the_owner_over_the_wrapped_digest_only(harness: Harness) -> None:
    owner, stranger = harness.new_key(), harness.new_key()
    op = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
    await harness.handle_ops([op])
    account = op.sender
    message = bytes(range(32))
    digest = message_digest(account, harness.chain_id, message)
    assert digest == await harness.call(account, ACCOUNT, "messageDigest", message)

    good = sign_digest(bytes(owner.key), digest)
    raw_hash_sig = sign_digest(bytes(owner.key), message)
    forged = sign_digest(bytes(stranger.key), digest)
    assert await harness.call(account, ACCOUNT, "isValidSignature", message, good) == bytes.fromhex(
        "1626ba7e"
    )
    for sig in (raw_hash_sig, forged, b"\x00" * 10):
        result = await harness.call(account, ACCOUNT, "isValidSignature", message, sig)
        assert result == b"\xff\xff\xff\xff"


async def test_owner_may_execute_directly_but_strangers_may_not(harness: Harness) -> None:
    owner, stranger = harness.new_key(), harness.new_key()
    counter = await deploy_counter(harness)
    op = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
    await harness.handle_ops([op])
    call = ACCOUNT.encode_call("execute", counter, 0, COUNTER.encode_call("count"))
    await harness.send_from(owner, op.sender, call)
    assert await harness.call(counter, COUNTER, "counts", op.sender) == 1
    error = await harness.revert_error(op.sender, ACCOUNT, call, sender=stranger.address)
    assert error.name == "NotOwnerOrEntryPoint"
