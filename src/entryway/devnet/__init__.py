"""Local devnets: one anvil per chain id, with every contract deployed."""
