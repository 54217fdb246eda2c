// Hardhat's node (EDR) as a second node implementation for the end-to-end test
// tests/e2e/test_second_node.py. The chain id and the one funded account come from the
// environment the test starts it with; every other account is funded by transfers from it,
// as on a real chain.
const chainId = Number(process.env.HARDHAT_CHAIN_ID || "31337");
const funder = process.env.HARDHAT_FUNDER_KEY;

module.exports = {
  networks: {
    hardhat: {
      chainId,
      hardfork: "prague",
      accounts: funder ? [{ privateKey: funder, balance: "1000000000000000000000000" }] : undefined,
    },
  },
};
