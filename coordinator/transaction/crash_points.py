"""Named points of ending a transaction where a test may make the broker die as kill -9 would (the broker's
crash points, broker/control/crash_points.py): Prepare* appended; the first marker written (with more
partitions, the others not yet); every marker written and Complete* not yet appended.

Apart from the coordinator so that the broker's crash point table can check a name without importing the
coordinator, which a broker builds at its first transactional request."""

CRASH_POINTS = ("after_prepare_commit", "after_prepare_abort", "after_first_marker", "before_complete_commit",
                "before_complete_abort")
