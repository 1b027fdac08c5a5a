"""What the group queries tell monitoring (the admin listener's /state, /metrics) beyond Kafka's
DescribeGroups summary and ListGroups listing."""

from __future__ import annotations

import asyncio
import contextlib

from minikafka.coordinator.group import GroupListing
from minikafka.coordinator.group.records import OffsetValue

from .test_coordinator import PROTOCOLS, join, make, stable_pair


async def test_describe_tells_monitoring_the_generation_and_members_whatever_the_state() -> None:
    coord, _, _ = make()
    a, b = await stable_pair(coord)
    third = asyncio.create_task(join(coord))
    await asyncio.sleep(0)
    try:
        described = coord.describe_group("g")
        assert described.state == "PreparingRebalance" and described.protocol == ""
        assert (described.generation_id, described.leader_id, described.chosen_protocol) == (2, a, "range")
        by_id = {m.member_id: m for m in described.members}
        assert by_id[a].metadata == b"" and by_id[a].assignment == b"", "DescribeGroups shows them only when Stable"
        assert by_id[a].protocols == tuple(PROTOCOLS)
        assert (by_id[a].latest_assignment, by_id[b].latest_assignment) == (b"A", b"B")
    finally:
        third.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await third


def test_groups_known_only_by_offsets_are_listed_as_empty_on_request() -> None:
    coord, _, _ = make()
    coord.offsets.commit("orphan", ("t", 0), OffsetValue(7), -1)
    assert coord.list_groups() == []
    assert coord.list_groups(with_offsets_only=True) == [GroupListing("orphan", "", "Empty")]
    assert coord.list_groups(["Stable"], with_offsets_only=True) == []
    assert not coord.describe_group("orphan").exists
    assert coord.fetch_offsets("orphan", None)[("t", 0)].offset == 7
