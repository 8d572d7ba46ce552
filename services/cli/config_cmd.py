"""``graphmesh config show [--service NAME] [--json]``: each service's
effective settings and where each value came from (default, environment
variable, deprecated variable, env file, secret file), secrets redacted.
See services.common.config_report and docs/configuration.md."""
from __future__ import annotations

import argparse
import os
import sys

from services.common.config_report import SECTIONS, describe_all, render_json, render_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Adds ``config show [--service NAME] [--json]`` to the graphmesh command."""
    config = sub.add_parser("config", help="show each service's effective settings and their sources (secrets redacted)")
    config.add_argument("action", choices=["show"])
    config.add_argument("--service", action="append", choices=list(SECTIONS), metavar="NAME",
                        help=f"only this section (repeatable): {', '.join(SECTIONS)}")
    config.add_argument("--json", action="store_true", help="machine-readable, values not shortened")


def cmd_config(args: argparse.Namespace) -> int:
    """Prints the report; returns 1 when a section's settings are invalid
    (the service would not start), else 0."""
    sections = describe_all(args.service)
    sys.stdout.write(render_json(sections) + "\n" if args.json else _recorded_note() + render_text(sections))
    return 1 if any(s.error for s in sections) else 0


def _recorded_note() -> str:
    """The addresses ``graphmesh up`` recorded under GRAPHMESH_HOME, which
    every other CLI command uses where the environment sets none (a stack
    on moved ports showed the default gateway address here); "" when none."""
    from services.cli.stack import recorded_addresses

    recorded = {k: v for k, v in recorded_addresses().items() if k not in os.environ}
    if not recorded:
        return ""
    lines = ["Recorded by `graphmesh up` under GRAPHMESH_HOME; the other graphmesh commands use these where the "
             "environment sets none (the settings below are this environment's own):"]
    lines += [f"  {key} = {value}" for key, value in sorted(recorded.items())]
    return "\n".join(lines) + "\n\n"
