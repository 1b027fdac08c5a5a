"""Crash soak: real clients write while the broker is killed with SIGKILL and restarted, cycle after cycle."""
