"""Deploying EntryPoint v0.8 and Entryway's contracts, deterministically, to any EVM chain."""
