"""The node-kind relay's fixtures, for every test in this folder."""

from tests.node_kinds.fixtures import node_relays as node_relays
from tests.node_kinds.fixtures import standalone_anvil as standalone_anvil
