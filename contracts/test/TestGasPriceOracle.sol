// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// Stands in for the OP-stack GasPriceOracle predeploy in tests: an L1 fee proportional to
/// the calldata's size, at a price the test sets.
contract TestGasPriceOracle {
    uint256 public weiPerByte;

    function setWeiPerByte(uint256 value) external {
        weiPerByte = value;
    }

    function getL1Fee(bytes calldata data) external view returns (uint256) {
        return data.length * weiPerByte;
    }
}
