"""GET /metrics: a broker's metrics in Prometheus' text format (0.0.4), one CollectorRegistry per broker.

Several brokers can share a process (tests), so nothing goes to prometheus_client's global registry.
Everything is computed when scraped: request counts from BrokerMetrics (broker/observe/metrics.py), the rest
from the broker's state, so an idle broker pays nothing between scrapes. The registry's collector
gives all but the per-partition gauges, which render() appends in the same format itself (they are
most of a big broker's samples; see _partition_slices), and which GET /metrics writes in slices
between requests (render_async).

Where Kafka has the metric, the name is what the Prometheus JMX exporter's usual Kafka rules (Strimzi's,
Confluent's) make of its MBean, so dashboards written for Kafka find it; the rest are `minikafka_*`.

    kafka_network_requestmetrics_requests_total{request,version}     RequestsPerSec
    kafka_network_requestmetrics_errors_total{request,error}         ErrorsPerSec: every error code in
        the responses, NONE included (a Produce to three partitions counts three), as Kafka counts
    kafka_network_requestmetrics_totaltimems{request}                TotalTimeMs, a histogram (ms) of the
        time from taking a request up to its response being ready (a held Fetch included)
    kafka_server_socket_server_metrics_incoming_byte_total           incoming-byte-total: request
    kafka_server_socket_server_metrics_outgoing_byte_total           and response frames, size prefix
        included, of the requests that reached dispatch (not a frame refused for its size)
    kafka_server_socket_server_metrics_connection_count              connection-count
    kafka_log_log_logendoffset{topic,partition}                      LogEndOffset
    kafka_log_log_logstartoffset{topic,partition}                    LogStartOffset
    kafka_log_log_numlogsegments{topic,partition}                    NumLogSegments
    kafka_log_log_size{topic,partition}                              Size (bytes)
    kafka_server_group_coordinator_metrics_classic_group_count{state}  classic-group-count, every state
    kafka_server_group_coordinator_metrics_share_group_count{state}    share-group-count (Empty, Stable)
    minikafka_share_group_members{group}                 members of each share group
    minikafka_share_partition_start_offset{group,topic,partition}    the share-partition start offset
    minikafka_share_partition_in_flight_records{...}, minikafka_share_partition_acquired_records{...},
    minikafka_share_partition_lag{...}: offsets in flight, held under an acquisition lock, and not yet
        delivered completely up to the high watermark
    minikafka_request_bytes_total{request}, minikafka_response_bytes_total{request}: the same bytes per API
    minikafka_partition_high_watermark{topic,partition}, minikafka_partition_last_stable_offset{...}
    minikafka_transactions{state}                       transactional ids by state (Ongoing, PrepareCommit, ...)
    minikafka_transactions_open                         transactions begun and not completed
    minikafka_transaction_oldest_open_age_seconds       age of the oldest of them (0 when none)
    minikafka_transaction_open_age_seconds{transactional_id}  the OLDEST_OPEN_TRANSACTIONS oldest of them
        only, so the label's values stay bounded however many transactional ids clients use
    minikafka_connections_closed_bad_input_total{reason}  frame size, invalid request, unanswerable request
    minikafka_unexpected_handler_errors_total{request}  answered UNKNOWN_SERVER_ERROR for a handler bug
    kafka_server_produce_byte_rate{user,client_id}, kafka_server_fetch_byte_rate{...}: byte-rate of the client
        quota sensors (the user and client id a quota is kept for, "" where it is not per that name),
        kafka_server_request_request_time{...} request-time, kafka_server_controllermutation_tokens{...}
    minikafka_quota_throttled_responses_total{quota,user,client_id}, minikafka_quota_throttle_time_ms_total{...}
        responses a client quota throttled, and the throttle time they carried
    process_cpu_seconds_total, process_resident_memory_bytes, python_info
    kafka_server_client_metrics_instance_count          instance-count: client instances known (KIP-714)
    kafka_server_client_metrics_unknown_subscription_request_total  unknown-subscription-request
    kafka_server_client_metrics_throttle_total{client_instance_id}  throttle: telemetry requests too early
    kafka_server_client_metrics_plugin_export_total{client_instance_id}  plugin-export: pushes decoded
    kafka_server_client_metrics_plugin_error_total{client_instance_id}  plugin-error: pushes not decoded
    org_apache_kafka_...{client_instance_id,client_id,<the point's attributes>}  each metric a client pushed
        (client telemetry, KIP-714), its OpenTelemetry name with `.` as `_`: a gauge's latest value; a sum
        pushed as deltas (Kafka asks for delta temporality) as a `_total` counter of the deltas added up
        since the broker first saw the instance; a histogram's `_sum` and `_count`. Bounded by the
        instances kept (1024) and the points kept per instance (1000); names that would collide with the
        broker's own (kafka_*, minikafka_*, process_*, python_*) are left out.

Partitions of internal topics (`__consumer_offsets`, `__transaction_state`) are included, as Kafka's
LogEndOffset includes them. Ages are on the broker clock, so a manual clock's advance shows in them.
"""

from __future__ import annotations

import asyncio
import heapq
import os
import resource
from collections.abc import Iterator
from typing import TYPE_CHECKING

from minikafka.broker.observe.metrics import LATENCY_BUCKETS_MS, broker_metrics, error_name, kafka_request_name
from minikafka.coordinator.group.admin import GROUP_STATES
from minikafka.coordinator.transaction.coordinator import TRANSACTION_STATES
from minikafka.protocol.api_keys import ApiKey
from prometheus_client import CollectorRegistry, PlatformCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

if TYPE_CHECKING:
    from minikafka.broker.wire.services import BrokerServices

# What generate_latest writes. prometheus_client's CONTENT_TYPE_LATEST says version=1.0.0 in recent
# releases (0.26 here), though the text is the 0.0.4 format Prometheus has always scraped.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OLDEST_OPEN_TRANSACTIONS = 10
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
# As prometheus_client's own histograms write them ("1.0", "+Inf").
_BUCKET_LABELS = [floatToGoString(bound) for bound in LATENCY_BUCKETS_MS] + ["+Inf"]


class BrokerCollector:
    """Builds the metric families of a broker's services at each scrape, all but the per-partition ones."""

    def __init__(self, services: BrokerServices) -> None:
        self.services = services

    def collect(self) -> Iterator[Metric]:
        yield from self._requests()
        yield from self._connections()
        yield from self._groups()
        yield from self._share_groups()
        yield from self._transactions()
        yield from self._bad_input()
        yield from self._schema_registry()
        yield from self._client_telemetry()
        yield from self._quotas()
        yield from _process()

    def _requests(self) -> Iterator[Metric]:
        apis = sorted(broker_metrics(self.services).apis.values(), key=lambda stats: stats.name)
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests taken up, per API and version.", labels=["request", "version"])
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                     "Error codes in responses, NONE included, per API and error.",
                                     labels=["request", "error"])
        latency = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                        "Milliseconds from taking a request up to its response being ready.",
                                        labels=["request"])
        request_bytes = CounterMetricFamily("minikafka_request_bytes", "Request frame bytes, per API.",
                                            labels=["request"])
        response_bytes = CounterMetricFamily("minikafka_response_bytes", "Response frame bytes, per API.",
                                             labels=["request"])
        bytes_in = bytes_out = 0
        for stats in apis:
            for version, count in sorted(stats.requests.items()):
                requests.add_metric([stats.name, version], count)
            for code, count in sorted(stats.errors.items()):
                errors.add_metric([stats.name, error_name(code)], count)
            cumulative = 0
            buckets: list[tuple[str, float]] = []
            for label, count in zip(_BUCKET_LABELS, stats.latency_buckets, strict=True):
                cumulative += count
                buckets.append((label, cumulative))
            latency.add_metric([stats.name], buckets, stats.latency_sum_ms)
            request_bytes.add_metric([stats.name], stats.bytes_in)
            response_bytes.add_metric([stats.name], stats.bytes_out)
            bytes_in += stats.bytes_in
            bytes_out += stats.bytes_out
        yield from (requests, errors, latency, request_bytes, response_bytes)
        yield CounterMetricFamily("kafka_server_socket_server_metrics_incoming_byte",
                                  "Bytes of request frames, size prefixes included.", value=bytes_in)
        yield CounterMetricFamily("kafka_server_socket_server_metrics_outgoing_byte",
                                  "Bytes of response frames, size prefixes included.", value=bytes_out)

    def _connections(self) -> Iterator[Metric]:
        open_connections = broker_metrics(self.services).open_connections
        yield GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                "Client connections open on the Kafka listener.",
                                value=open_connections() if open_connections is not None else 0)

    def _groups(self) -> Iterator[Metric]:
        counts = dict.fromkeys(GROUP_STATES, 0)
        # A group known only by its committed offsets is an Empty group, as Kafka loads it. A scrape looks
        # without building the group or share coordinator: none built, none of their groups exists.
        groups = self.services.group_coordinator.built
        for listing in groups.list_groups(with_offsets_only=True) if groups is not None else ():
            counts[listing.state] += 1
        family = GaugeMetricFamily("kafka_server_group_coordinator_metrics_classic_group_count",
                                   "Consumer groups by state.", labels=["state"])
        for state, count in counts.items():
            family.add_metric([state], count)
        yield family

    def _share_groups(self) -> Iterator[Metric]:
        shares = self.services.share_coordinator.built
        counts = {"Empty": 0, "Stable": 0}
        members = GaugeMetricFamily("minikafka_share_group_members", "Members of each share group.",
                                    labels=["group"])
        labels = ["group", "topic", "partition"]
        start = GaugeMetricFamily("minikafka_share_partition_start_offset", "Share-partition start offset.",
                                  labels=labels)
        in_flight = GaugeMetricFamily("minikafka_share_partition_in_flight_records",
                                      "Offsets from the share-partition start offset up to the last acquired.",
                                      labels=labels)
        acquired = GaugeMetricFamily("minikafka_share_partition_acquired_records",
                                     "Records held under an acquisition lock.", labels=labels)
        lag = GaugeMetricFamily("minikafka_share_partition_lag",
                                "Records up to the high watermark whose delivery is not complete.", labels=labels)
        if shares is not None:  # none built: no share group exists
            for group_id, group in sorted(shares.groups.items()):
                counts[group.state] += 1
                members.add_metric([group_id], len(group.members))
                for view in shares.views(group_id):
                    where = [group_id, view.topic, str(view.partition)]
                    start.add_metric(where, view.start_offset)
                    in_flight.add_metric(where, view.in_flight)
                    acquired.add_metric(where, view.acquired)
                    lag.add_metric(where, view.lag)
        family = GaugeMetricFamily("kafka_server_group_coordinator_metrics_share_group_count",
                                   "Share groups by state.", labels=["state"])
        for state, count in counts.items():
            family.add_metric([state], count)
        yield from (family, members, start, in_flight, acquired, lag)

    def _transactions(self) -> Iterator[Metric]:
        now_ms = self.services.clock.now_ms()
        counts = dict.fromkeys(TRANSACTION_STATES, 0)
        open_count = 0
        open_started: list[tuple[int, str]] = []
        built = self.services.transaction_coordinator.built  # a scrape builds nothing: none built, none open
        for meta in built.list(None, None) if built is not None else []:
            counts[meta.state.display_name] += 1
            if meta.is_open:
                open_count += 1
                if meta.txn_start_timestamp >= 0:  # always set once begun; no age rather than a wrong one
                    open_started.append((meta.txn_start_timestamp, meta.transactional_id))
        by_state = GaugeMetricFamily("minikafka_transactions", "Transactional ids by transaction state.",
                                     labels=["state"])
        for state, count in counts.items():
            by_state.add_metric([state], count)
        yield by_state
        yield GaugeMetricFamily("minikafka_transactions_open", "Transactions begun and not completed.",
                                value=open_count)
        oldest = heapq.nsmallest(OLDEST_OPEN_TRANSACTIONS, open_started)
        yield GaugeMetricFamily("minikafka_transaction_oldest_open_age_seconds",
                                "Age of the oldest open transaction; 0 when none is open.",
                                value=max(0, now_ms - oldest[0][0]) / 1000 if oldest else 0)
        ages = GaugeMetricFamily("minikafka_transaction_open_age_seconds",
                                 f"Age of the {OLDEST_OPEN_TRANSACTIONS} oldest open transactions.",
                                 labels=["transactional_id"])
        for started_ms, transactional_id in oldest:
            ages.add_metric([transactional_id], max(0, now_ms - started_ms) / 1000)
        yield ages

    def _bad_input(self) -> Iterator[Metric]:
        metrics = broker_metrics(self.services)
        closed = CounterMetricFamily("minikafka_connections_closed_bad_input",
                                     "Connections closed because of what the client sent, by reason.",
                                     labels=["reason"])
        for reason, count in sorted(metrics.closed_for_bad_input.items()):
            closed.add_metric([reason], count)
        yield closed
        unexpected = CounterMetricFamily("minikafka_unexpected_handler_errors",
                                         "Requests answered UNKNOWN_SERVER_ERROR because a handler failed.",
                                         labels=["request"])
        for api, count in sorted(metrics.unexpected_errors.items()):
            unexpected.add_metric([_request_label(api)], count)
        yield unexpected


    def _schema_registry(self) -> Iterator[Metric]:
        registry = self.services.schema_registry
        if registry is None:
            return
        snapshot = registry.snapshot()
        requests = CounterMetricFamily("minikafka_schema_registry_requests",
                                       "Schema registry REST requests answered, per route and HTTP status.",
                                       labels=["route", "status"])
        for entry in snapshot["requests"]:
            requests.add_metric([entry["route"], str(entry["status"])], entry["count"])
        yield requests
        subjects = snapshot["subjects"]
        yield GaugeMetricFamily("minikafka_schema_registry_subjects", "Subjects with a version not deleted.",
                                value=sum(1 for s in subjects.values() if any(not v["deleted"] for v in s["versions"])))
        yield GaugeMetricFamily("minikafka_schema_registry_schema_versions", "Subject versions, soft-deleted included.",
                                value=sum(len(s["versions"]) for s in subjects.values()))

    def _client_telemetry(self) -> Iterator[Metric]:
        instances = self.services.client_metrics.instances()
        yield GaugeMetricFamily("kafka_server_client_metrics_instance_count",
                                "Client instances known to the broker's client metrics manager (KIP-714).",
                                value=len(instances))
        yield CounterMetricFamily("kafka_server_client_metrics_unknown_subscription_request",
                                  "PushTelemetry requests with a stale subscription id.",
                                  value=self.services.client_metrics.unknown_subscription_requests)
        per_instance = {name: CounterMetricFamily(f"kafka_server_client_metrics_{name}", text,
                                                  labels=["client_instance_id"])
                        for name, text in (("throttle", "Telemetry requests refused as before the push interval."),
                                           ("plugin_export", "Telemetry pushes decoded and kept."),
                                           ("plugin_error", "Telemetry pushes whose payload did not decode."))}
        for instance in instances:
            for sensor, count in (("throttle", instance.throttled), ("plugin_export", instance.pushes),
                                  ("plugin_error", instance.push_errors)):
                per_instance[sensor].add_metric([str(instance.instance_id)], count)
        yield from per_instance.values()
        families: dict[str, Metric] = {}
        for instance in sorted(instances, key=lambda i: str(i.instance_id)):
            base = {"client_instance_id": str(instance.instance_id), "client_id": instance.client.client_id or ""}
            for point in instance.points:
                name = _metric_name(point.name)
                if name is None:
                    continue
                labels = {**{_label_name(k): v for k, v in point.attributes}, **base}
                if point.kind == "sum" and point.delta:
                    _sample(families, name, "counter", point.name, labels, instance.totals.get(point.key, 0.0))
                elif point.kind == "sum" and point.monotonic:
                    _sample(families, name, "counter", point.name, labels, point.value)
                elif point.count is not None:
                    _sample(families, name + "_sum", "gauge", point.name, labels, point.value)
                    _sample(families, name + "_count", "gauge", point.name, labels, point.count)
                else:
                    _sample(families, name, "gauge", point.name, labels, point.value)
        yield from families.values()


    def _quotas(self) -> Iterator[Metric]:
        """Kafka's quota sensors: kafka.server:type=Produce|Fetch|Request|ControllerMutation, per user and
        client-id (the ones a quota is kept for), measured now. A broker whose quotas were never built has
        none set: the families come out empty, and a scrape builds nothing."""
        quotas = self.services.client_quotas.built
        now_ms = self.services.clock.now_ms()
        labels = ["user", "client_id"]
        throttled = CounterMetricFamily("minikafka_quota_throttled_responses",
                                        "Responses throttled by a client quota, per quota type.",
                                        labels=["quota", *labels])
        throttled_ms = CounterMetricFamily("minikafka_quota_throttle_time_ms",
                                           "Throttle time given by a client quota (ms), per quota type.",
                                           labels=["quota", *labels])
        for kind, name, help_text in (
                ("produce", "kafka_server_produce_byte_rate", "Produce bytes per second (byte-rate)."),
                ("fetch", "kafka_server_fetch_byte_rate", "Fetch bytes per second (byte-rate)."),
                ("request", "kafka_server_request_request_time", "Handler time, percent of one thread (request-time)."),
                ("controller_mutation", "kafka_server_controllermutation_tokens",
                 "Partition mutations left in the token bucket (tokens).")):
            family = GaugeMetricFamily(name, help_text, labels=labels)
            if quotas is not None:
                manager = getattr(quotas, kind)
                for view in manager.observed(now_ms):
                    family.add_metric([view.user, view.client_id], view.value)
                    throttled.add_metric([manager.key, view.user, view.client_id], view.throttled)
                    throttled_ms.add_metric([manager.key, view.user, view.client_id], view.throttle_ms_total)
            yield family
        yield throttled
        yield throttled_ms

_RESERVED_PREFIXES = ("kafka_", "minikafka_", "process_", "python_")


def _metric_name(name: str) -> str | None:
    """A pushed metric's name as Prometheus allows it; None for one that could pass for the broker's own."""
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "_:") else "_" for c in name)
    if not cleaned or cleaned[0].isdigit() or cleaned.startswith(_RESERVED_PREFIXES):
        return None
    return cleaned


def _label_name(key: str) -> str:
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in key)
    return cleaned if cleaned and not cleaned[0].isdigit() and not cleaned.startswith("__") else f"attr_{cleaned}"


def _sample(families: dict[str, Metric], name: str, kind: str, source: str, labels: dict[str, str],
            value: float) -> None:
    """One sample of a client's metric; the family is made at its first sample (the label sets of its samples
    may differ: they are the attributes each client put on its points). A counter's samples end in `_total`.
    A name already taken by a family of another type is left out rather than written twice."""
    family_name = name.removesuffix("_total") if kind == "counter" else name
    family = families.get(family_name)
    if family is None:
        family = families[family_name] = Metric(family_name, f"Client telemetry: {source}", kind)
    elif family.type != kind:
        return
    family.add_sample(family_name + "_total" if kind == "counter" else name, labels, value)



def _process() -> Iterator[Metric]:
    """CPU and resident memory, named as prometheus_client's ProcessCollector names them. Not that
    collector: it also counts open files by listing /proc/self/fd, 30 ms with the 30,000 files of
    10,000 partitions, on the event loop."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    yield CounterMetricFamily("process_cpu_seconds", "User and system CPU time of the process, in seconds.",
                              value=usage.ru_utime + usage.ru_stime)
    try:
        with open("/proc/self/statm", "rb") as statm:
            resident_pages = int(statm.read().split()[1])
    except OSError:
        return  # not Linux
    yield GaugeMetricFamily("process_resident_memory_bytes", "Resident memory size in bytes.",
                            value=resident_pages * _PAGE_SIZE)


def _request_label(api: str) -> str:
    """BrokerMetrics.unexpected_errors is keyed as the logs name APIs ("LIST_OFFSETS")."""
    return kafka_request_name(ApiKey[api]) if api in ApiKey.__members__ else api


def broker_registry(services: BrokerServices) -> CollectorRegistry:
    """The broker's own registry, made at its first scrape."""
    metrics = broker_metrics(services)
    registry = metrics.registry
    if registry is None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(BrokerCollector(services))
        PlatformCollector(registry=registry)
        metrics.registry = registry
    return registry  # type: ignore[no-any-return]


def render(services: BrokerServices) -> bytes:
    """The text exposition of every metric of this broker: the registry's, then the per-partition
    gauges, in one go (Broker.metrics in-process, tests)."""
    columns = _partition_columns()
    for _ in _partition_slices(services, columns):
        pass
    return generate_latest(broker_registry(services)) + _joined(columns)


async def render_async(services: BrokerServices) -> bytes:
    """`render` for GET /metrics on the event loop: the per-partition gauges are written
    SLICE_PARTITIONS partitions at a time, letting requests in between, so a broker with 10,000
    partitions is held for a few ms at a time rather than for the whole scrape. A partition is read
    whole within a slice; slices may see moments a few ms apart, as separate JMX reads in Kafka do."""
    columns = _partition_columns()
    for _ in _partition_slices(services, columns):
        await asyncio.sleep(0)
    parts = [generate_latest(broker_registry(services))]
    for column in columns:
        await asyncio.sleep(0)
        parts.append("".join(column).encode())
    return b"".join(parts)


SLICE_PARTITIONS = 500
# (name, help) of the per-partition gauges, in the order _partition_slices fills their columns.
PARTITION_GAUGES: tuple[tuple[str, str], ...] = (
    ("kafka_log_log_logendoffset", "Log end offset."),
    ("kafka_log_log_logstartoffset", "Log start offset."),
    ("minikafka_partition_high_watermark", "High watermark."),
    ("minikafka_partition_last_stable_offset", "Last stable offset: where read_committed consumers stop."),
    ("kafka_log_log_numlogsegments", "Segments."),
    ("kafka_log_log_size", "Bytes in the partition's segments."),
)


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _partition_columns() -> list[list[str]]:
    return [[f"# HELP {name} {text}\n# TYPE {name} gauge\n"] for name, text in PARTITION_GAUGES]


def _joined(columns: list[list[str]]) -> bytes:
    return "".join("".join(column) for column in columns).encode()


def _partition_slices(services: BrokerServices, columns: list[list[str]]) -> Iterator[None]:
    """Append each partition's samples to `columns`, yielding after every SLICE_PARTITIONS partitions.

    Written here, not by generate_latest: these are most of a big broker's samples, and generate_latest
    escapes every label of every sample (about 7 µs a sample, half a second for 10,000 partitions). Here
    a topic's label is escaped once and each sample is one string format."""
    logs = services.logs
    end, start, high_watermark, stable, segments, size = columns
    written = 0
    for meta in sorted(logs.topics(), key=lambda meta: meta.name):
        topic = _label_value(meta.name)
        for index in range(meta.partitions):
            log = logs.partition(meta.name, index)
            if log is None:
                continue  # deleted since the scrape began
            labels = f'{{partition="{index}",topic="{topic}"}} '
            end.append(f"kafka_log_log_logendoffset{labels}{log.log_end_offset}\n")
            start.append(f"kafka_log_log_logstartoffset{labels}{log.log_start_offset}\n")
            high_watermark.append(f"minikafka_partition_high_watermark{labels}{log.high_watermark}\n")
            stable.append(f"minikafka_partition_last_stable_offset{labels}{log.last_stable_offset}\n")
            segments.append(f"kafka_log_log_numlogsegments{labels}{len(log.segments)}\n")
            size.append(f"kafka_log_log_size{labels}{log.size_bytes}\n")
            written += 1
            if written % SLICE_PARTITIONS == 0:
                yield
