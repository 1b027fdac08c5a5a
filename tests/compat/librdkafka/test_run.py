"""The librdkafka compatibility run's reading of the suite's test table and of test-runner's output (no
librdkafka needed: the inputs are written here in the shapes tests/test.c produces)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.compat.librdkafka.run import (
    Entry,
    Result,
    _classify,
    _in_scenarios,
    _load,
    broker_entries,
    entry_timeout,
    markdown,
    read_entries,
    scenario_of,
    write_results,
)

TEST_C = """
struct test tests[] = {
    /* Special MAIN test to hold over-all timings, etc. */
    {.name = "<MAIN>", .flags = TEST_F_LOCAL},
    _TEST(0000_unittests,
          TEST_F_LOCAL,
          _THRES(.ucpu = 100.0, .scpu = 20.0, .rss = 900.0)),
    _TEST(0001_multiobj, 0),
    _TEST(0045_subscribe_update, 0, TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0045_subscribe_update_topic_remove,
          0,
          TEST_BRKVER(0, 9, 0, 0),
          .scenario = "noautocreate"),
#if WITH_SOCKEM
    _TEST(0049_consume_conn_close, TEST_F_SOCKEM, TEST_BRKVER(0, 9, 0, 0)),
#endif
    _TEST(0103_transactions,
          0,
          TEST_BRKVER(0, 11, 0, 0),
          .scenario = "default,ak23"),
    _TEST(8000_idle, TEST_F_MANUAL),
    {NULL}};
"""

FAILED_OUTPUT = """\
[0103_transactions / 1.000s] [ do_test_basic_producer_txn:82: with compression=none ]
[0103_transactions / 2.000s] [ do_test_basic_producer_txn:82: with compression=none: PASS (1.00s) ]
[0103_transactions / 2.100s] [ do_test_fenced_txn:1130: Fenced by producer-id bump ]
### Test "0103_transactions (do_test_fenced_txn:1130: Fenced by producer-id bump)" failed at \
0103-transactions.c:1180:do_test_fenced_txn() at Sun Nov 29 02:16:11 2026: ###
Expected commit to fail with FENCED, not Success
|  0103_transactions                        |     FAILED |  12.345s | do_test_fenced_txn:1130: ...
"""


def test_broker_entries_are_the_table_minus_local_and_manual(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test.c").write_text(TEST_C)
    entries = broker_entries(read_entries(tmp_path))
    assert entries == [Entry("0001_multiobj", "0", "default"), Entry("0045_subscribe_update", "0", "default"),
                       Entry("0045_subscribe_update_topic_remove", "0", "noautocreate"),
                       Entry("0049_consume_conn_close", "TEST_F_SOCKEM", "default"),
                       Entry("0103_transactions", "0", "default,ak23")]


def test_a_failure_names_its_sub_test_and_message(tmp_path: Path) -> None:
    [result] = _classify([Entry("0103_transactions", "0", "default,ak23")], "classic", 1, 13.0, FAILED_OUTPUT,
                         tmp_path / "absent.json")
    assert result == Result("classic", "0103_transactions", "fail", 12.3, "do_test_fenced_txn:1130: Fenced by "
                            "producer-id bump", "0103-transactions.c:1180:do_test_fenced_txn(): Expected commit to "
                            "fail with FENCED, not Success")


def test_report_states_scenarios_and_timeouts(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"tests": {
        "0045_subscribe_update": {"state": "PASSED", "duration": 15.21},
        "0045_subscribe_update_topic_remove": {"state": "SKIPPED", "duration": 0.0}}}))
    entries = [Entry("0045_subscribe_update", "0", "default"),
               Entry("0045_subscribe_update_topic_remove", "0", "noautocreate")]
    assert _classify(entries, "consumer", 0, 16.0, "", report) == [
        Result("consumer", "0045_subscribe_update", "pass", 15.2),
        Result("consumer", "0045_subscribe_update_topic_remove", "skip", 0.0, cause="needs scenario noautocreate")]
    running = "[0001_multiobj / 3.000s] [ do_test:12: many handles ]\n"
    [timed_out] = _classify([Entry("0001_multiobj", "0", "default")], "classic", None, 240.04, running,
                            tmp_path / "absent.json")
    assert timed_out == Result("classic", "0001_multiobj", "timeout", 240.0, "do_test:12: many handles",
                               "killed after the per-entry timeout")


def test_each_entry_runs_in_a_scenario_it_names(tmp_path: Path) -> None:
    remove = Entry("0045_subscribe_update_topic_remove", "0", "noautocreate")
    entries = [Entry("0045_subscribe_update", "0", "default"), remove,
               Entry("0103_transactions", "0", "default,ak23"), Entry("9999_old", "0", "ak23")]
    assert [scenario_of(e) for e in entries] == ["default", "noautocreate", "default", None]
    assert _in_scenarios(entries, "noautocreate") == [remove]
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"tests": {"0045_subscribe_update_topic_remove": {"state": "PASSED",
                                                                                  "duration": 25.04}}}))
    assert _classify([remove], "classic", 0, 26.0, "", report, "noautocreate") == [
        Result("classic", "0045_subscribe_update_topic_remove", "pass", 25.0)]


def test_slow_entries_get_a_timeout_of_their_own() -> None:
    assert entry_timeout("0081", 300.0) == 900.0
    assert entry_timeout("0001", 300.0) == 300.0


def test_markdown_counts_each_mode_and_escapes_cells() -> None:
    results = [Result("classic", "0001_multiobj", "pass", 1.0),
               Result("classic", "0002_unkpart", "fail", 2.0, "sub", "a | b"),
               Result("consumer", "0001_multiobj", "timeout", 240.0)]
    page = markdown(results, ["classic", "consumer"], Path("/src/librdkafka-2.14.2"), 240.0, "")
    assert "| classic | 1 | 1 | 0 | 0 |" in page
    assert "| consumer | 0 | 0 | 0 | 1 |" in page
    assert "| 0002_unkpart | fail | 2.0 | sub | a \\| b |" in page


def test_a_later_run_replaces_rows_when_merged(tmp_path: Path) -> None:
    first, rerun = tmp_path / "first.json", tmp_path / "rerun.json"
    write_results([Result("classic", "0053_stats", "skip", 0.0, cause="RapidJSON >=1.1.0 not available"),
                   Result("classic", "0001_multiobj", "pass", 1.0)], ["classic"], tmp_path, 240.0, "",
                  tmp_path / "first.md", first)
    write_results([Result("classic", "0053_stats", "pass", 3.0)], ["classic"], tmp_path, 240.0, "",
                  tmp_path / "rerun.md", rerun)
    assert _load([first, rerun]) == [Result("classic", "0053_stats", "pass", 3.0),
                                     Result("classic", "0001_multiobj", "pass", 1.0)]
