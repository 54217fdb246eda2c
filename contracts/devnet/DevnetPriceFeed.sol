// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// A Chainlink-style price feed (the AggregatorV3Interface reads) for local devnets: the
/// native token's price in EUR with `decimals` decimals, set by its owner. Until the owner
/// sets a round, the round reads as updated at the current block, as a feed its nodes keep
/// up would; a round the owner sets keeps its own time, so a stale feed can be shown.
contract DevnetPriceFeed {
    address public immutable owner;
    uint8 public immutable decimals;
    string public description;
    uint256 public constant version = 4;

    int256 private _answer;
    uint256 private _updatedAt; // 0: the current block's time
    uint80 private _roundId = 1;

    error NotOwner();

    constructor(address owner_, uint8 decimals_, int256 answer_, string memory description_) {
        owner = owner_;
        decimals = decimals_;
        _answer = answer_;
        description = description_;
    }

    /// A new round: `answer` as of `updatedAt` (0: always the current block's time).
    function setRound(int256 answer, uint256 updatedAt) external {
        if (msg.sender != owner) revert NotOwner();
        _answer = answer;
        _updatedAt = updatedAt;
        _roundId += 1;
    }

    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        uint256 at = _updatedAt == 0 ? block.timestamp : _updatedAt;
        return (_roundId, _answer, at, at, _roundId);
    }

    function latestAnswer() external view returns (int256) {
        return _answer;
    }
}
