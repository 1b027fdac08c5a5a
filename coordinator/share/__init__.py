"""Share groups (KIP-932): membership, share-partitions and their state in `__share_group_state`."""
