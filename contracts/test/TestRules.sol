// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {BasePaymaster} from "@account-abstraction/contracts/core/BasePaymaster.sol";
import {IAccount} from "@account-abstraction/contracts/interfaces/IAccount.sol";
import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";

/// Test-only contracts that break ERC-7562 rules on demand, named by a string the op carries,
/// so the bundler's tracer can be shown to catch each rule in each entity, directly or in a
/// nested call ("NESTED:<rule>").

/// A contract that is no entity: its storage is "non-entity storage".
contract TestStorage {
    uint256 public global;
    mapping(address => uint256) public balances;

    function setGlobal(uint256 value) external {
        global = value;
    }

    function touch(address holder) external {
        balances[holder] += 1;
    }
}

contract Empty {}

abstract contract RuleBreaker {
    IEntryPoint public immutable ep;
    TestStorage public immutable store;
    RuleHelper public immutable helper;
    uint256 public counter;

    constructor(IEntryPoint anEntryPoint, TestStorage aStore, RuleHelper aHelper) {
        ep = anEntryPoint;
        store = aStore;
        helper = aHelper;
    }

    function loop() external pure {
        while (true) {}
    }

    function _is(string memory rule, string memory name) private pure returns (bool) {
        return keccak256(bytes(rule)) == keccak256(bytes(name));
    }

    function _breakRule(string memory rule, address sender) internal {
        bytes memory raw = bytes(rule);
        if (raw.length == 0) return;
        if (raw.length > 7 && keccak256(_slice(raw, 0, 7)) == keccak256("NESTED:")) {
            helper.run(string(_slice(raw, 7, raw.length)), sender);
            return;
        }
        // Each value is used in a comparison, so the optimizer cannot drop the opcode.
        if (_is(rule, "TIMESTAMP")) _use(block.timestamp);
        else if (_is(rule, "NUMBER")) _use(block.number);
        else if (_is(rule, "ORIGIN")) _use(uint160(tx.origin));
        else if (_is(rule, "GASPRICE")) _use(tx.gasprice);
        else if (_is(rule, "BASEFEE")) _use(block.basefee);
        else if (_is(rule, "COINBASE")) _use(uint160(address(block.coinbase)));
        else if (_is(rule, "GASLIMIT")) _use(block.gaslimit);
        else if (_is(rule, "PREVRANDAO")) _use(block.prevrandao);
        else if (_is(rule, "BLOCKHASH")) _use(uint256(blockhash(0)));
        else if (_is(rule, "SELFBALANCE")) _use(address(this).balance);
        else if (_is(rule, "BALANCE")) _use(msg.sender.balance);
        else if (_is(rule, "GAS")) _use(gasleft());
        else if (_is(rule, "CREATE")) { new Empty(); }
        else if (_is(rule, "CREATE2")) { new Empty{salt: bytes32(uint256(1))}(); }
        else if (_is(rule, "CALL_VALUE")) { (bool ok,) = address(store).call{value: 1}(""); (ok); }
        else if (_is(rule, "CALL_NO_CODE")) { (bool ok,) = address(0xdead).call(""); (ok); }
        else if (_is(rule, "EXTCODESIZE_NO_CODE")) _use(address(0xdead).code.length);
        else if (_is(rule, "EP_CALL")) { ep.getNonce(sender, 0); }
        else if (_is(rule, "EP_EXTCODEHASH")) _use(uint256(address(ep).codehash));
        else if (_is(rule, "PRECOMPILE")) { (bool ok,) = address(0x0b).staticcall{gas: 5000}(""); (ok); }
        else if (_is(rule, "OOG")) { try this.loop{gas: 10000}() {} catch {} }
        else if (_is(rule, "OWN_STORAGE")) { counter += 1; }
        else if (_is(rule, "READ_OTHER")) { store.global(); }
        else if (_is(rule, "WRITE_OTHER")) { store.setGlobal(1); }
        else if (_is(rule, "WRITE_SENDER")) { store.touch(sender); }
        else if (_is(rule, "WRITE_SELF")) { store.touch(address(this)); }
        else revert(string.concat("unknown rule ", rule));
    }

    function _use(uint256 value) private pure {
        if (value == 0x5ca1ab1e) revert("improbable");
    }

    function _slice(bytes memory raw, uint256 start, uint256 end) private pure returns (bytes memory out) {
        out = new bytes(end - start);
        for (uint256 i = start; i < end; i++) out[i - start] = raw[i];
    }

    receive() external payable {}
}

/// Runs a rule one call deeper than the entity.
contract RuleHelper is RuleBreaker {
    constructor(IEntryPoint anEntryPoint, TestStorage aStore)
        RuleBreaker(anEntryPoint, aStore, RuleHelper(payable(address(0))))
    {}

    function run(string calldata rule, address sender) external {
        _breakRule(rule, sender);
    }
}

/// An account whose validation breaks the rule written in its signature field.
contract TestRulesAccount is IAccount, RuleBreaker {
    constructor(IEntryPoint anEntryPoint, TestStorage aStore, RuleHelper aHelper)
        RuleBreaker(anEntryPoint, aStore, aHelper)
    {}

    function validateUserOp(PackedUserOperation calldata userOp, bytes32, uint256 missingAccountFunds)
        external
        returns (uint256)
    {
        _breakRule(string(userOp.signature), address(this));
        if (missingAccountFunds > 0) {
            (bool ok,) = payable(msg.sender).call{value: missingAccountFunds}("");
            (ok);
        }
        return 0;
    }

    function execute(address target, uint256 value, bytes calldata data) external {
        (bool ok, bytes memory ret) = target.call{value: value}(data);
        if (!ok) {
            assembly { revert(add(ret, 32), mload(ret)) }
        }
    }
}

/// A paymaster whose validation breaks the rule written in its paymasterData.
contract TestRulesPaymaster is BasePaymaster, RuleBreaker {
    constructor(IEntryPoint anEntryPoint, TestStorage aStore, RuleHelper aHelper)
        BasePaymaster(anEntryPoint)
        RuleBreaker(anEntryPoint, aStore, aHelper)
    {}

    function _validatePaymasterUserOp(PackedUserOperation calldata userOp, bytes32, uint256)
        internal
        override
        returns (bytes memory context, uint256 validationData)
    {
        _breakRule(string(userOp.paymasterAndData[PAYMASTER_DATA_OFFSET:]), userOp.sender);
        return ("", 0);
    }
}

/// A factory whose deployment breaks the rule it is given, then deploys a TestRulesAccount.
contract TestRulesFactory is RuleBreaker {
    constructor(IEntryPoint anEntryPoint, TestStorage aStore, RuleHelper aHelper)
        RuleBreaker(anEntryPoint, aStore, aHelper)
    {}

    function createAccount(bytes32 salt, string calldata rule) external returns (address account) {
        _breakRule(rule, getAddress(salt));
        account = address(new TestRulesAccount{salt: salt}(ep, store, helper));
    }

    function getAddress(bytes32 salt) public view returns (address) {
        bytes32 codeHash = keccak256(
            abi.encodePacked(type(TestRulesAccount).creationCode, abi.encode(ep, store, helper))
        );
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), salt, codeHash)))));
    }

    function addStake(uint32 unstakeDelaySec) external payable {
        ep.addStake{value: msg.value}(unstakeDelaySec);
    }
}
