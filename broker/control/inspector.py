"""The web inspector served by the admin listener: one HTML page, its script and its style sheet.

The page polls GET /state every second (topics and partitions, producers and transactions, groups,
share groups, and the client instances pushing telemetry with the broker's view of their connections)
and shows the flight recorder's exchanges live from GET /trace/stream (server-sent events), falling
back to polling GET /trace where no stream is served. Plain HTML and one small script, kept here as
strings so they ship inside the wheel with no package-data setup and no front-end build chain.

Client ids, transactional ids and group ids are whatever a client sent, so the script only ever puts
them into the page as text (textContent, value, title), never as markup; the Content-Security-Policy
the listener sends with the page (`ASSET_HEADERS`) refuses inline and foreign scripts as a second
line of defence.
"""

from __future__ import annotations

from dataclasses import dataclass

# Sent with every inspector asset: only our own script, style and fetches; no framing by other sites.
ASSET_HEADERS = (
    ("Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
     "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
    ("Referrer-Policy", "no-referrer"),
)

INSPECTOR_HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>minikafka inspector</title>
<link rel="stylesheet" href="/inspector.css">
<script src="/inspector.js" defer></script>
</head>
<body>
<header>
  <h1>minikafka inspector</h1>
  <span id="state-status" class="status" role="status">loading state…</span>
</header>
<main>
<section id="topics">
  <h2>Topics and partitions <span class="count" id="topics-count"></span></h2>
  <table>
    <thead><tr><th>Partition</th><th class="num">Log start</th><th class="num">High watermark</th>
      <th class="num">Last stable</th><th class="num">Log end</th><th class="num">Segments</th>
      <th>Producers (id/epoch: last sequence, open transaction from)</th></tr></thead>
    <tbody></tbody>
  </table>
</section>
<section id="open-transactions">
  <h2>Open transactions <span class="count" id="open-transactions-count"></span></h2>
  <table>
    <thead><tr><th>Transactional id</th><th>State</th><th class="num">Age</th><th>Partitions</th>
      <th class="num">Producer id</th><th class="num">Epoch</th><th class="num">Timeout</th></tr></thead>
    <tbody></tbody>
  </table>
</section>
<section id="producers">
  <h2>Producers <span class="count" id="producers-count"></span></h2>
  <table>
    <thead><tr><th>Transactional id</th><th class="num">Producer id</th><th class="num">Epoch</th>
      <th>State</th><th>Fenced</th><th>Partitions (last sequence)</th></tr></thead>
    <tbody></tbody>
  </table>
</section>
<section id="groups">
  <h2>Consumer groups <span class="count" id="groups-count"></span></h2>
  <table>
    <thead><tr><th>Group</th><th>State</th><th class="num">Generation</th><th>Protocol</th>
      <th>Members (client id, host: assignment)</th><th>Committed offsets (lag)</th>
      <th class="num">Total lag</th></tr></thead>
    <tbody></tbody>
  </table>
</section>
<section id="schema-registry" hidden>
  <h2>Schema registry <span class="count" id="schema-registry-count"></span>
    <span class="status" id="schema-registry-global"></span></h2>
  <table>
    <thead><tr><th>Subject</th><th>Compatibility</th><th>Versions (version: id, type)</th>
      <th>Deleted versions</th></tr></thead>
    <tbody></tbody>
  </table>
</section>
<section id="clients">
  <h2>Client telemetry <span class="count" id="clients-count"></span></h2>
  <table>
    <thead><tr><th>Client instance</th><th>Client id, software</th><th>Subscription</th>
      <th>Its own metrics (last push)</th><th>What the broker saw (connections: requests, latency)</th></tr></thead>
    <tbody></tbody>
  </table>
</section>
<section id="share-groups">
  <h2>Share groups <span class="count" id="share-groups-count"></span></h2>
  <table>
    <thead><tr><th>Group</th><th>State</th><th class="num">Epoch</th>
      <th>Members (client id, host: assignment)</th>
      <th>Share-partitions (start offset, in flight, locked, lag)</th><th class="num">Total lag</th></tr></thead>
    <tbody></tbody>
  </table>
</section>
<section id="trace">
  <h2>Live trace <span class="status" id="trace-status">starting…</span></h2>
  <form id="trace-filters" autocomplete="off">
    <label>API <input id="filter-api" name="api" list="api-names" placeholder="any, e.g. EndTxn"></label>
    <datalist id="api-names"></datalist>
    <label>Client id <input id="filter-client-id" name="client_id" placeholder="any"></label>
    <label>Topic <input id="filter-topic" name="topic" placeholder="any"></label>
    <label class="check"><input type="checkbox" id="trace-pause"> Pause</label>
    <button type="button" id="trace-clear">Clear</button>
    <span class="count" id="trace-count"></span>
  </form>
  <div class="scroll">
  <table>
    <thead><tr><th>Time (UTC)</th><th class="num">Conn</th><th>Client id</th><th>API</th>
      <th class="num">Ver</th><th class="num">Corr id</th><th class="num">Latency ms</th><th>Outcome</th>
      <th>Errors</th><th>Topics</th><th>Details</th></tr></thead>
    <tbody></tbody>
  </table>
  </div>
</section>
</main>
</body>
</html>
"""

INSPECTOR_CSS = """
:root { --fg: #1d2430; --muted: #5d6778; --line: #d9dee7; --head: #f1f4f8; --accent: #1f5fbf;
        --bad: #b3261e; --warn: #8a5a00; --ok: #1e6b34; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: #fafbfc; }
header { display: flex; align-items: baseline; gap: 1.5em; padding: 0.6em 1.2em; background: #1d2430; color: #fff; }
header h1 { margin: 0; font-size: 1.2em; font-weight: 600; }
header .status { color: #c9d3e3; }
header .status.error { color: #ffb4ab; }
main { padding: 0.4em 1.2em 2em; }
section { margin-top: 1.2em; }
h2 { font-size: 1.05em; margin: 0 0 0.4em; }
.count, .status { font-weight: normal; color: var(--muted); font-size: 0.9em; margin-left: 0.5em; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
th, td { text-align: left; padding: 0.25em 0.6em; border-bottom: 1px solid var(--line); vertical-align: top; }
thead th { background: var(--head); font-weight: 600; font-size: 0.9em; position: sticky; top: 0; white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 0.92em; }
tr.topic-row th { background: #e6ecf5; font-size: 0.95em; }
tr.topic-row .topic-id { color: var(--muted); font-weight: normal; margin-left: 1em; font-size: 0.9em; }
td.empty { color: var(--muted); font-style: italic; font-family: inherit; }
ul.cell { margin: 0; padding: 0; list-style: none; }
.state-Ongoing, .state-PrepareCommit, .state-PrepareAbort, .state-PreparingRebalance,
.state-CompletingRebalance, .state-PrepareEpochFence { color: var(--warn); font-weight: 600; }
.state-CompleteCommit, .state-Stable { color: var(--ok); }
.state-CompleteAbort, .state-Dead, .bad { color: var(--bad); }
.lagging { color: var(--warn); font-weight: 600; }
.pending { color: var(--muted); font-weight: normal; }
form { display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; align-items: center; margin-bottom: 0.5em; }
label { color: var(--muted); }
input[type=text], input:not([type]) { font: inherit; padding: 0.15em 0.4em; width: 12em;
  border: 1px solid #b8c0cc; border-radius: 3px; color: var(--fg); }
button { font: inherit; padding: 0.15em 0.8em; }
.scroll { max-height: 28em; overflow: auto; border: 1px solid var(--line); }
.scroll table { border: 0; }
td.details { max-width: 40em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; color: var(--muted);
  cursor: pointer; }
td.details.expanded { white-space: pre-wrap; word-break: break-all; color: var(--fg); cursor: default; }
"""

INSPECTOR_JS = r"""
"use strict";
(() => {
  const STATE_REFRESH_MS = 1000;
  const TRACE_POLL_MS = 1000;
  const TRACE_BACKLOG = 200;
  const MAX_TRACE_ROWS = 500;
  const FILTER_DELAY_MS = 250;
  const OPEN_STATES = new Set(["Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"]);
  // Fields shown in their own columns (or as the connection's tooltip); the rest go to "Details",
  // the request and response bodies first.
  const TRACE_COLUMNS = new Set(["time", "time_ms", "node_id", "connection_id", "peer", "client_id", "api",
                                 "api_key", "api_version", "correlation_id", "latency_ms", "outcome", "errors",
                                 "topics"]);
  const DETAILS_FIRST = ["close_reason", "request", "response"];
  const MAX_DETAILS = 20000;
  const FENCING_ERRORS = new Set(["PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"]);
  const refusedEpochs = new Map();

  const byId = (id) => document.getElementById(id);

  // Every value from the broker enters the page through textContent, never as markup.
  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function cell(value, className) {
    const td = el("td", null, className);
    if (value instanceof Node) td.append(value);
    else td.textContent = value === null || value === undefined || value === "" ? "—" : String(value);
    return td;
  }

  function list(items) {
    const ul = el("ul", null, "cell");
    for (const item of items) ul.append(item instanceof Node ? wrap("li", item) : el("li", item));
    if (!items.length) ul.append(el("li", "—"));
    return ul;
  }

  function wrap(tag, child) {
    const node = el(tag);
    node.append(child);
    return node;
  }

  function stateLabel(state) {
    return el("span", state, "state-" + String(state).replace(/[^A-Za-z]/g, ""));
  }

  function fill(sectionId, rows, columns, emptyText) {
    const tbody = byId(sectionId).querySelector("tbody");
    if (!rows.length) {
      const td = el("td", emptyText, "empty");
      td.colSpan = columns;
      rows = [wrap("tr", td)];
    }
    tbody.replaceChildren(...rows);
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return "—";
    if (ms < 1000) return ms + " ms";
    if (ms < 120000) return (ms / 1000).toFixed(1) + " s";
    return Math.floor(ms / 60000) + " min " + Math.floor((ms % 60000) / 1000) + " s";
  }

  const partitionName = (topic, partition) => topic + "-" + partition;

  function renderTopics(topics) {
    const rows = [];
    for (const [name, topic] of Object.entries(topics)) {
      const head = el("tr", null, "topic-row");
      const th = el("th", name);
      th.colSpan = 7;
      th.append(el("span", "id " + topic.topic_id, "topic-id"));
      head.append(th);
      head.dataset.topic = name;
      rows.push(head);
      for (const [index, p] of Object.entries(topic.partitions)) {
        const producers = p.producers.map((pr) => {
          let text = pr.producer_id + "/" + pr.epoch + ": seq " + pr.last_sequence;
          if (pr.open_transaction_first_offset !== null) text += ", open from " + pr.open_transaction_first_offset;
          return text;
        });
        const tr = el("tr");
        tr.append(cell(partitionName(name, index)), cell(p.log_start_offset, "num"), cell(p.high_watermark, "num"),
                  cell(p.last_stable_offset, "num"), cell(p.log_end_offset, "num"), cell(p.segments, "num"),
                  cell(list(producers)));
        rows.push(tr);
      }
    }
    byId("topics-count").textContent = "(" + Object.keys(topics).length + ")";
    fill("topics", rows, 7, "No topics yet.");
  }

  function txnPartitions(txn) {
    return (txn.partitions || []).map((tp) => partitionName(tp.topic, tp.partition)).join(", ");
  }

  function renderOpenTransactions(transactions) {
    const open = transactions.filter((t) => OPEN_STATES.has(t.state));
    const rows = open.map((t) => {
      const tr = el("tr");
      tr.dataset.transactionalId = t.transactional_id;
      const state = stateLabel(t.state);
      // The coordinator is writing the next state to __transaction_state (a commit or abort under way).
      if (t.pending_state) state.append(el("span", " → " + t.pending_state, "pending"));
      tr.append(cell(t.transactional_id), cell(state), cell(duration(t.age_ms), "num"),
                cell(txnPartitions(t)), cell(t.producer_id, "num"), cell(t.producer_epoch, "num"),
                cell(duration(t.timeout_ms), "num"));
      return tr;
    });
    byId("open-transactions-count").textContent = "(" + open.length + ")";
    fill("open-transactions", rows, 7, "No open transactions.");
  }

  // One row per producer id: the transaction coordinator's view joined with the partitions' producer state.
  function renderProducers(topics, transactions) {
    const producers = new Map();
    const entry = (id) => {
      if (!producers.has(id)) producers.set(id, { id, txn: null, epoch: null, partitions: [] });
      return producers.get(id);
    };
    for (const t of transactions) {
      const p = entry(t.producer_id);
      p.txn = t;
      p.epoch = t.producer_epoch;
    }
    for (const [name, topic] of Object.entries(topics)) {
      for (const [index, part] of Object.entries(topic.partitions)) {
        for (const pr of part.producers) {
          const p = entry(pr.producer_id);
          if (p.epoch === null || pr.epoch > p.epoch) p.epoch = pr.epoch;
          let text = partitionName(name, index) + ": " + pr.last_sequence;
          if (pr.epoch !== p.epoch) text += " (epoch " + pr.epoch + ")";
          p.partitions.push(text);
        }
      }
    }
    const rows = [...producers.values()].sort((a, b) => a.id - b.id).map((p) => {
      const t = p.txn;
      const fenced = [];
      if (t && t.fenced_below_epoch > 0) fenced.push("epochs < " + t.fenced_below_epoch);
      if (t && t.previous_producer_id !== null && t.previous_producer_id !== p.id) {
        fenced.push("producer id " + t.previous_producer_id);
      }
      const refused = t ? refusedEpochs.get(t.transactional_id) : undefined;
      if (refused) fenced.push("refused in trace: epoch " + [...refused].sort((a, b) => a - b).join(", "));
      const tr = el("tr");
      tr.append(cell(t ? t.transactional_id : "(idempotent)"), cell(p.id, "num"), cell(p.epoch, "num"),
                cell(t ? stateLabel(t.state) : "—"), cell(fenced.join(", ")), cell(list(p.partitions)));
      return tr;
    });
    byId("producers-count").textContent = "(" + rows.length + ")";
    fill("producers", rows, 6, "No producers.");
  }

  function renderGroups(groups) {
    const rows = [];
    for (const [id, g] of Object.entries(groups)) {
      const members = g.members.map((m) => {
        let text = (m.client_id || "?") + " " + (m.client_host || "");
        if (m.group_instance_id) text += " [" + m.group_instance_id + "]";
        if (m.member_id === g.leader) text += " (leader)";
        if (m.assignment) {
          const parts = Object.entries(m.assignment).map(([topic, ps]) => topic + " " + ps.join(","));
          text += ": " + (parts.join("; ") || "nothing");
        }
        return text;
      });
      let totalLag = 0;
      let anyLag = false;
      const committed = [];
      for (const [topic, partitions] of Object.entries(g.committed)) {
        for (const [index, offset] of Object.entries(partitions)) {
          const lag = g.lag && g.lag[topic] ? g.lag[topic][index] : null;
          const li = el("span", partitionName(topic, index) + ": " + offset);
          if (lag !== null && lag !== undefined) {
            li.append(el("span", " (lag " + lag + ")", lag > 0 ? "lagging" : null));
            totalLag += lag;
            anyLag = true;
          }
          committed.push(li);
        }
      }
      const protocol = [g.protocol_type, g.protocol].filter((x) => x).join(" / ");
      const tr = el("tr");
      tr.dataset.group = id;
      tr.append(cell(id), cell(stateLabel(g.state)), cell(g.generation, "num"), cell(protocol),
                cell(list(members)), cell(list(committed)), cell(anyLag ? totalLag : null, "num"));
      rows.push(tr);
    }
    byId("groups-count").textContent = "(" + rows.length + ")";
    fill("groups", rows, 7, "No groups.");
  }

  function renderSchemaRegistry(registry) {
    const section = byId("schema-registry");
    section.hidden = !registry;
    if (!registry) return;
    const rows = [];
    for (const [subject, s] of Object.entries(registry.subjects)) {
      const live = s.versions.filter((v) => !v.deleted).map((v) => v.version + ": " + v.id + " " + v.schema_type);
      const deleted = s.versions.filter((v) => v.deleted).map((v) => v.version + ": " + v.id);
      const tr = el("tr");
      tr.dataset.subject = subject;
      tr.append(cell(subject), cell(s.compatibility), cell(list(live)), cell(list(deleted)));
      rows.push(tr);
    }
    byId("schema-registry-count").textContent = "(" + rows.length + ")";
    byId("schema-registry-global").textContent =
      registry.url + " · " + registry.compatibility + " · " + registry.mode;
    fill("schema-registry", rows, 4, "No subjects.");
  }

  // KIP-714: what each client instance pushed, beside the broker's view of its connections.
  function renderClients(clients) {
    const rows = [];
    for (const [id, c] of Object.entries(clients)) {
      const software = [c.client_software_name, c.client_software_version].filter((x) => x).join(" ");
      const who = list([el("span", c.client_id || "?"), el("span", software), el("span", c.client_source_address +
        (c.client_source_port ? ":" + c.client_source_port : ""))]);
      const subscription = list([el("span", (c.subscriptions.join(", ") || "no subscription")),
        el("span", "metrics: " + (c.requested_metrics.join(", ") || "none")),
        el("span", "every " + c.push_interval_ms + " ms, " + c.pushes + " pushes"),
        el("span", "last error: " + c.last_error, c.last_error !== "NONE" ? "lagging" : null)]);
      const metrics = c.metrics.map((m) => {
        const attributes = Object.entries(m.attributes).map(([k, v]) => k + "=" + v).join(",");
        const value = m.total !== undefined ? m.total + " (+" + m.value + ")" : m.value;
        return el("span", m.name + (attributes ? "{" + attributes + "}" : "") + " " + value);
      });
      const seen = c.broker_view.map((conn) => {
        const apis = Object.entries(conn.apis).map(([api, a]) => api + " " + a.requests + " requests, avg " +
          a.latency_avg_ms + " ms (max " + a.latency_max_ms + ")").join("; ");
        return el("span", "conn " + conn.connection_id + " " + conn.peer + ": " + apis);
      });
      const tr = el("tr");
      tr.dataset.clientInstance = id;
      tr.append(cell(id), cell(who), cell(subscription), cell(list(metrics)), cell(list(seen)));
      rows.push(tr);
    }
    byId("clients-count").textContent = "(" + rows.length + ")";
    fill("clients", rows, 5, "No client telemetry (minikafka.client.telemetry.enabled and a client metrics " +
      "subscription).");
  }

  function renderShareGroups(groups) {
    const rows = [];
    for (const [id, g] of Object.entries(groups)) {
      const members = g.members.map((m) => {
        const parts = Object.entries(m.assigned).map(([topic, ps]) => topic + " " + ps.join(","));
        return (m.client_id || "?") + " " + (m.client_host || "") + ": " + (parts.join("; ") || "nothing");
      });
      let totalLag = 0;
      const partitions = [];
      for (const [topic, byIndex] of Object.entries(g.partitions)) {
        for (const [index, p] of Object.entries(byIndex)) {
          const li = el("span", partitionName(topic, index) + ": start " + p.start_offset + ", in flight " +
                        p.in_flight + ", locked " + p.acquired);
          li.append(el("span", " (lag " + p.lag + ")", p.lag > 0 ? "lagging" : null));
          totalLag += p.lag;
          partitions.push(li);
        }
      }
      const tr = el("tr");
      tr.dataset.group = id;
      tr.append(cell(id), cell(stateLabel(g.state)), cell(g.group_epoch, "num"), cell(list(members)),
                cell(list(partitions)), cell(totalLag, "num"));
      rows.push(tr);
    }
    byId("share-groups-count").textContent = "(" + rows.length + ")";
    fill("share-groups", rows, 6, "No share groups.");
  }

  function setStatus(id, text, bad) {
    const node = byId(id);
    node.textContent = text;
    node.classList.toggle("error", Boolean(bad));
  }

  // A listener with admin.listener.token: open the page as /inspector#access_token=TOKEN.
  const ACCESS_TOKEN = new URLSearchParams(location.hash.slice(1)).get("access_token");
  const authorization = () => (ACCESS_TOKEN ? { Authorization: "Bearer " + ACCESS_TOKEN } : {});

  async function refreshState() {
    try {
      const response = await fetch("/state", { cache: "no-store", headers: authorization() });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const state = await response.json();
      const transactions = Object.values(state.transactions || {});
      renderTopics(state.topics || {});
      renderOpenTransactions(transactions);
      renderProducers(state.topics || {}, transactions);
      renderGroups(state.groups || {});
      renderSchemaRegistry(state.schema_registry);
      renderClients(state.clients || {});
      renderShareGroups(state.share_groups || {});
      setStatus("state-status", "state at " + new Date().toISOString().slice(11, 19) + " UTC", false);
    } catch (error) {
      setStatus("state-status", "GET /state failed: " + error.message, true);
    } finally {
      setTimeout(refreshState, STATE_REFRESH_MS);
    }
  }

  // ---- live trace ----
  const trace = {
    generation: 0, source: null, pollTimer: null, seen: new Set(), paused: false, held: [],
    apis: new Set(), filters: { api: "", client_id: "", topic: "" },
  };
  const traceBody = () => byId("trace").querySelector("tbody");
  // Schema registry entries have no connection: their request_id tells them apart.
  const entryKey = (e) =>
    e.connection_id + "/" + e.correlation_id + "/" + e.time_ms + "/" + e.api + "/" + (e.request_id ?? "");

  function traceQuery(extra) {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(trace.filters)) if (value) query.set(key, value);
    for (const [key, value] of Object.entries(extra || {})) query.set(key, value);
    if (ACCESS_TOKEN) query.set("access_token", ACCESS_TOKEN);  // EventSource cannot send headers
    const text = query.toString();
    return text ? "?" + text : "";
  }

  function entryTopics(e) {
    if (Array.isArray(e.topics)) return e.topics.map((t) => (typeof t === "string" ? t : t && t.topic));
    return null;
  }

  // The broker filters too; this catches a server that ignores a filter it does not know.
  function matches(e) {
    const f = trace.filters;
    if (f.api && e.api !== f.api) return false;
    if (f.client_id && e.client_id !== f.client_id) return false;
    const topics = entryTopics(e);
    if (f.topic && topics !== null && !topics.includes(f.topic)) return false;
    return true;
  }

  function details(e) {
    const rest = {};
    for (const key of DETAILS_FIRST) if (e[key] !== undefined) rest[key] = e[key];
    for (const [key, value] of Object.entries(e)) if (!TRACE_COLUMNS.has(key)) rest[key] = value;
    const text = Object.keys(rest).length ? JSON.stringify(rest) : "";
    const td = cell(text.length > 400 ? text.slice(0, 400) + "…" : text, "details");
    if (text) {
      td.title = "click to expand";
      td.addEventListener("click", () => {
        if (td.classList.contains("expanded")) return;
        const full = JSON.stringify(rest, null, 1);
        td.textContent = full.length > MAX_DETAILS ? full.slice(0, MAX_DETAILS) + "…" : full;
        td.classList.add("expanded");
        td.removeAttribute("title");
      }, { once: true });
    }
    return td;
  }

  // A fenced producer is refused with PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before Kafka 2.7's versions):
  // remember the refused epochs the trace showed, per transactional id, for the producers table.
  function noteFencing(e) {
    const request = e.request;
    if (!Array.isArray(e.errors) || !request || typeof request.transactional_id !== "string") return;
    if (!e.errors.some((code) => FENCING_ERRORS.has(code))) return;
    if (!refusedEpochs.has(request.transactional_id)) refusedEpochs.set(request.transactional_id, new Set());
    refusedEpochs.get(request.transactional_id).add(request.producer_epoch);
  }

  function addEntry(e, generation) {
    if (generation !== trace.generation || !e || typeof e !== "object" || !matches(e)) return;
    const key = entryKey(e);
    if (trace.seen.has(key)) return;
    if (trace.paused) {
      trace.held.push(e);
      if (trace.held.length > MAX_TRACE_ROWS) trace.held.shift();
      updateTraceCount();
      return;
    }
    trace.seen.add(key);
    noteFencing(e);
    if (e.api && !trace.apis.has(e.api)) {
      trace.apis.add(e.api);
      const option = el("option");
      option.value = String(e.api);
      byId("api-names").append(option);
    }
    const tr = el("tr");
    tr.dataset.key = key;
    tr.dataset.time = String(e.time_ms);
    const errors = Array.isArray(e.errors) ? e.errors.join(", ") : "";
    const topics = entryTopics(e);
    const connection = cell(e.connection_id, "num");
    if (e.peer) connection.title = String(e.peer);
    tr.append(cell(new Date(e.time_ms).toISOString().slice(11, 23)), connection,
              cell(e.client_id), cell(e.api), cell(e.api_version, "num"), cell(e.correlation_id, "num"),
              cell(e.latency_ms, "num"), cell(e.outcome, e.outcome === "closed" ? "bad" : null),
              cell(errors, errors ? "bad" : null), cell(topics ? topics.join(", ") : ""), details(e));
    // Newest first. An entry from GET /trace can be older than streamed ones already shown.
    const body = traceBody();
    let next = body.firstElementChild;
    while (next && Number(next.dataset.time) > e.time_ms) next = next.nextElementSibling;
    body.insertBefore(tr, next);
    while (body.rows.length > MAX_TRACE_ROWS) {
      trace.seen.delete(body.lastElementChild.dataset.key);
      body.lastElementChild.remove();
    }
    updateTraceCount();
  }

  function updateTraceCount() {
    let text = traceBody().rows.length + " shown";
    if (trace.held.length) text += ", " + trace.held.length + " held while paused";
    byId("trace-count").textContent = text;
  }

  function stopTrace() {
    trace.generation += 1;
    if (trace.source) trace.source.close();
    trace.source = null;
    clearTimeout(trace.pollTimer);
    trace.pollTimer = null;
  }

  function clearTrace() {
    traceBody().replaceChildren();
    trace.seen.clear();
    trace.held = [];
    updateTraceCount();
  }

  async function fetchRecent(generation) {
    const response = await fetch("/trace" + traceQuery({ limit: TRACE_BACKLOG }), { cache: "no-store" });
    if (!response.ok) {
      const problem = await response.json().catch(() => ({}));
      throw new Error("GET /trace: HTTP " + response.status + (problem.error ? ": " + problem.error : ""));
    }
    const body = await response.json();
    const entries = Array.isArray(body.exchanges) ? body.exchanges : [];
    for (const e of entries) addEntry(e, generation);
  }

  function poll(generation) {
    fetchRecent(generation).then(
      () => { if (generation === trace.generation) setStatus("trace-status", "polling GET /trace", false); },
      (error) => { if (generation === trace.generation) setStatus("trace-status", error.message, true); },
    ).finally(() => {
      if (generation === trace.generation) trace.pollTimer = setTimeout(() => poll(generation), TRACE_POLL_MS);
    });
  }

  async function startTrace() {
    stopTrace();
    clearTrace();
    const generation = trace.generation;
    try {
      await fetchRecent(generation);
    } catch (error) {
      setStatus("trace-status", error.message, true);
    }
    if (generation !== trace.generation) return;
    if (!window.EventSource) { poll(generation); return; }
    const source = new EventSource("/trace/stream" + traceQuery());
    trace.source = source;
    source.onopen = () => {
      setStatus("trace-status", "live", false);
      // What happened before the stream was open (first connect, or a reconnect after the broker
      // restarted) comes from the ring; entries already shown are skipped.
      fetchRecent(generation).catch(() => {});
    };
    source.onmessage = (event) => {
      let entry;
      try { entry = JSON.parse(event.data); } catch (error) { return; }
      addEntry(entry, generation);
    };
    // The broker skipped exchanges this page did not take in time (its queue for us was full).
    source.addEventListener("dropped", (event) => {
      let count = "some";
      try { count = JSON.parse(event.data).dropped; } catch (error) { /* keep "some" */ }
      setStatus("trace-status", "live; the broker dropped " + count + " exchanges the page read too slowly", true);
    });
    source.onerror = () => {
      if (generation !== trace.generation) return;
      if (source.readyState === EventSource.CLOSED) {
        // No stream here (an older broker, or it refused us): fall back to polling.
        trace.source = null;
        poll(generation);
      } else {
        setStatus("trace-status", "stream interrupted; reconnecting…", true);
      }
    };
  }

  function readFilters() {
    trace.filters = {
      api: byId("filter-api").value.trim(),
      client_id: byId("filter-client-id").value,
      topic: byId("filter-topic").value.trim(),
    };
  }

  function setUpTrace() {
    let timer = null;
    const changed = () => {
      clearTimeout(timer);
      timer = setTimeout(() => { readFilters(); startTrace(); }, FILTER_DELAY_MS);
    };
    for (const id of ["filter-api", "filter-client-id", "filter-topic"]) byId(id).addEventListener("input", changed);
    byId("trace-filters").addEventListener("submit", (event) => event.preventDefault());
    byId("trace-clear").addEventListener("click", clearTrace);
    byId("trace-pause").addEventListener("change", (event) => {
      trace.paused = event.target.checked;
      if (!trace.paused) {
        const held = trace.held;
        trace.held = [];
        for (const e of held) addEntry(e, trace.generation);
        updateTraceCount();
      }
    });
    readFilters();
    startTrace();
  }

  refreshState();
  setUpTrace();
})();
"""


@dataclass(frozen=True, slots=True)
class Asset:
    """A static response of the admin listener: what it is and its bytes."""

    content_type: str
    body: bytes


ASSETS: dict[str, Asset] = {
    "/": Asset("text/html; charset=utf-8", INSPECTOR_HTML.encode()),
    "/inspector": Asset("text/html; charset=utf-8", INSPECTOR_HTML.encode()),
    "/inspector.js": Asset("text/javascript; charset=utf-8", INSPECTOR_JS.encode()),
    "/inspector.css": Asset("text/css; charset=utf-8", INSPECTOR_CSS.encode()),
}
