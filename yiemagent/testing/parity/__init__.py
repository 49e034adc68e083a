"""Conformance scenarios for the YiemAgent design, with yiemagent as the reference.

A scenario (JSON, ``schemas/scenario.schema.json``) builds an agent from a small vocabulary of
tool and hook behaviours, feeds it inputs and scripted model replies, and records the normalised
outcome: the event trace, each request the loop gave the model, what each hook received, the
responses and the final history (``schemas/trace.schema.json``).
Another implementation runs the same scenarios, writes its own trace, and ``python -m
yiemagent.parity check`` tells it where it first differs. docs/PARITY.md is the guide.
"""

from yiemagent.testing.parity._compare import Divergence, Rules, canonical_events, compare, render
from yiemagent.testing.parity._drive import IMPLEMENTATION, Outcome, run_scenario
from yiemagent.testing.parity._expectations import PortExpectations, load_expectations
from yiemagent.testing.parity._normalise import Normaliser, canonical_json
from yiemagent.testing.parity._scenario import (
    FORMAT,
    Scenario,
    ScenarioError,
    find_scenarios,
    load_scenario,
    parse_scenario,
    schema,
    validation_problems,
)
from yiemagent.testing.parity._traces import Trace, read_trace, write_trace
from yiemagent.testing.parity._verdicts import Verdict, check_trace

__all__ = [
    "FORMAT",
    "IMPLEMENTATION",
    "Divergence",
    "Normaliser",
    "Outcome",
    "PortExpectations",
    "Rules",
    "Scenario",
    "ScenarioError",
    "Trace",
    "Verdict",
    "canonical_events",
    "canonical_json",
    "check_trace",
    "compare",
    "find_scenarios",
    "load_expectations",
    "load_scenario",
    "parse_scenario",
    "read_trace",
    "render",
    "run_scenario",
    "schema",
    "validation_problems",
    "write_trace",
]
