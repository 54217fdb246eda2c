// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {ISenderCreator} from "@account-abstraction/contracts/interfaces/ISenderCreator.sol";
import {ERC1967Proxy} from "@openzeppelin/contracts/proxy/ERC1967/ERC1967Proxy.sol";
import {Create2} from "@openzeppelin/contracts/utils/Create2.sol";
import {SmartAccount} from "./SmartAccount.sol";

/// @title Factory of Entryway smart accounts (ERC-1967 proxies over one implementation)
/// @notice As EntryPoint v0.8 requires, accounts are created only through its SenderCreator,
/// i.e. from a UserOperation's initCode; anyone may compute an address counterfactually.
contract AccountFactory {
    SmartAccount public immutable accountImplementation;
    ISenderCreator public immutable senderCreator;

    event AccountCreated(address indexed account, address indexed owner, uint256 salt);

    error NotSenderCreator(address caller);

    constructor(IEntryPoint entryPoint) {
        accountImplementation = new SmartAccount(entryPoint);
        senderCreator = entryPoint.senderCreator();
    }

    function createAccount(address owner, uint256 salt) external returns (SmartAccount account) {
        if (msg.sender != address(senderCreator)) revert NotSenderCreator(msg.sender);
        address predicted = getAddress(owner, salt);
        if (predicted.code.length > 0) return SmartAccount(payable(predicted));
        account = SmartAccount(payable(new ERC1967Proxy{salt: bytes32(salt)}(address(accountImplementation), _initCall(owner))));
        emit AccountCreated(address(account), owner, salt);
    }

    function getAddress(address owner, uint256 salt) public view returns (address) {
        bytes memory proxyArgs = abi.encode(address(accountImplementation), _initCall(owner));
        return Create2.computeAddress(bytes32(salt), keccak256(bytes.concat(type(ERC1967Proxy).creationCode, proxyArgs)));
    }

    function _initCall(address owner) private pure returns (bytes memory) {
        return abi.encodeCall(SmartAccount.initialize, (owner));
    }
}
