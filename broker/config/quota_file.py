"""Where the client quotas are kept in the data dir, apart from their store: a start looks for the file to
decide whether to build the quota enforcement, without importing it (broker/wire/quotas.py)."""

from __future__ import annotations

CLIENT_QUOTAS_FILE = "client-quotas.json"
