// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Ownable, Ownable2Step} from "@openzeppelin/contracts/access/Ownable2Step.sol";

/// @title Entryway notary anchor
/// @notice Records Merkle roots (a single hash is a one-leaf root) with the block that anchored
/// them, so a proof of inclusion can be checked against the chain with `anchoredAt(root)`.
contract NotaryAnchor is Ownable2Step {
    /// Packed into one storage slot.
    struct Anchor {
        uint64 timestamp;
        uint64 blockNumber;
        uint32 leafCount;
    }

    mapping(bytes32 root => Anchor) private _anchors;
    mapping(address submitter => bool) public isSubmitter;

    event Anchored(bytes32 indexed root, uint256 leafCount, address indexed submitter, uint256 timestamp);
    event SubmitterChanged(address indexed submitter, bool allowed);

    error NotSubmitter(address caller);
    error AlreadyAnchored(bytes32 root, uint256 timestamp);
    error InvalidAnchor();

    constructor(address initialOwner, address initialSubmitter) Ownable(initialOwner) {
        _setSubmitter(initialSubmitter, true);
    }

    function setSubmitter(address submitter, bool allowed) external onlyOwner {
        _setSubmitter(submitter, allowed);
    }

    function anchor(bytes32 root, uint32 leafCount) external {
        if (!isSubmitter[msg.sender]) revert NotSubmitter(msg.sender);
        if (root == bytes32(0) || leafCount == 0) revert InvalidAnchor();
        uint64 existing = _anchors[root].timestamp;
        if (existing != 0) revert AlreadyAnchored(root, existing);
        _anchors[root] = Anchor(uint64(block.timestamp), uint64(block.number), leafCount);
        emit Anchored(root, leafCount, msg.sender, block.timestamp);
    }

    /// The block time at which `root` was anchored, or 0 if it never was.
    function anchoredAt(bytes32 root) external view returns (uint256) {
        return _anchors[root].timestamp;
    }

    function anchorOf(bytes32 root) external view returns (Anchor memory) {
        return _anchors[root];
    }

    function _setSubmitter(address submitter, bool allowed) private {
        if (submitter == address(0)) revert NotSubmitter(submitter);
        isSubmitter[submitter] = allowed;
        emit SubmitterChanged(submitter, allowed);
    }
}
