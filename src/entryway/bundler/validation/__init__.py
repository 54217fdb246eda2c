"""Validating UserOperations: sanity checks, simulation, and ERC-7562 rules on a trace."""
