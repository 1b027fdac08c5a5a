"""What every `minikafka` command shares: bad arguments are answered in one line on stderr and exit 2.

argparse prints its usage block before the error; a command run by a script or a health check should
leave one line that says what was wrong (`--help` still prints the usage). Sub-command parsers made
with `add_subparsers` inherit the class, so a whole command tree answers the same way.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

EXIT_USAGE = 2


class OneLineArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def fail(prog: str, message: str) -> NoReturn:
    """End a command on an argument its parser could not check by itself, in the same one line."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)
