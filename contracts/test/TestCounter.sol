// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// A call target for tests and gas measurements: counts calls per caller, and can revert on demand.
contract TestCounter {
    mapping(address caller => uint256) public counts;

    event Counted(address indexed caller, uint256 count);

    error Refused(string reason);

    function count() external payable {
        uint256 next = counts[msg.sender] + 1;
        counts[msg.sender] = next;
        emit Counted(msg.sender, next);
    }

    function fail(string calldata reason) external pure {
        revert Refused(reason);
    }
}
