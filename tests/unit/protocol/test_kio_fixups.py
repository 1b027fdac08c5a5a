"""DescribeTransactions v0 with no start time (-1, what Kafka sends for an Empty or unknown id) decodes."""

from __future__ import annotations

from kio.index import load_response_schema
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.build import build
from minikafka.protocol.codec import decode_response, encode_response


def _frame(start_times: list[int]) -> bytes:
    states = [{"error_code": 0, "transactional_id": f"t{index}", "transaction_state": "Empty",
               "transaction_timeout": 60_000, "transaction_start_time": start, "producer_id": 7 + index,
               "producer_epoch": 0,
               "topics": [{"topic": "orders", "partitions": [0, 2]}, {"topic": "audit", "partitions": [1]}]}
              for index, start in enumerate(start_times)]
    body = build(load_response_schema(ApiKey.DESCRIBE_TRANSACTIONS, 0), throttle_time=0, transaction_states=states)
    return encode_response(41, body)[4:]


def test_no_start_time_reads_as_the_epoch_and_the_rest_is_untouched() -> None:
    correlation, response = decode_response(_frame([-1, 1_700_000_000_000, -1]), ApiKey.DESCRIBE_TRANSACTIONS, 0)
    assert correlation == 41
    starts = [int(state.transaction_start_time.timestamp() * 1000) for state in response.transaction_states]
    assert starts == [0, 1_700_000_000_000, 0]
    assert [state.producer_id for state in response.transaction_states] == [7, 8, 9]
    assert [[(topic.topic, list(topic.partitions)) for topic in state.topics]
            for state in response.transaction_states][1] == [("orders", [0, 2]), ("audit", [1])]
