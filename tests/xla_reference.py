"""XLA's own C++ HLO parser, reached through jaxlib's private binding, for differential tests.

`jaxlib._hlo.hlo_module_from_text` is private and may change between releases; it is used in
tests only, never by the library. It aborts the process on some malformed inputs, so every call
runs in a child process.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

_SPECIAL_SPELLINGS = {
    "kCos": "cosine", "kSin": "sine", "kExp": "exponential", "kExpm1": "exponential-minus-one",
    "kLog1p": "log-plus-one", "kClz": "count-leading-zeros", "kPopulationCount": "popcnt",
    "kOptimizationBarrier": "opt-barrier", "kTopK": "topk",
}  # fmt: skip

#: Opcodes whose called computations `xla_parse` reports (under "calls").
CALLERS = frozenset(
    """fusion call while conditional reduce reduce-window sort scatter select-and-scatter map all-reduce
    all-reduce-start reduce-scatter custom-call scan""".split()
)

_CHILD = r"""
import json, re, sys
from jaxlib import _hlo
special = json.loads(sys.argv[1])
def spell(op):
    k = str(op).split(".")[-1]
    return special.get(k) or re.sub(r"(?<!^)([A-Z])", r"-\1", k[1:]).lower()
# The binding has no called_computations(): read them from the text of the instructions that
# can call computations (async-start/update/done print the wrapped op in place: not read).
CALLERS = set(json.loads(sys.argv[2]))
CALLS = re.compile(
    r", (?:to_apply|calls|body|condition|branch_computations|true_computation|false_computation|select|scatter"
    r"|called_computations)=(\{[^}]*\}|%[^\s,)}]+)"
)
for text in json.load(sys.stdin):
    try:
        m = _hlo.hlo_module_from_text(text)
    except Exception as e:
        print(json.dumps({"error": str(e)[:500]}), flush=True)
        continue
    comps, calls = {}, {}
    for c in m.computations():
        comps[c.name] = {i.name: [spell(i.opcode), [o.name for o in i.operands()]] for i in c.instructions()}
        for i in c.instructions():
            if comps[c.name][i.name][0] not in CALLERS:
                continue
            called = [n for v in CALLS.findall(i.to_string().split(", metadata=")[0]) for n in re.findall(r"%([^\s,}]+)", v)]
            if called:
                calls.setdefault(c.name, {})[i.name] = called
    print(json.dumps({"name": m.name, "computations": comps, "calls": calls}), flush=True)
"""


def available() -> bool:
    try:
        from jaxlib import _hlo  # noqa: F401
    except Exception:
        return False
    return hasattr(_hlo, "hlo_module_from_text")


def xla_parse(texts: list[str], timeout: float = 300) -> list[dict]:
    """Parse each text with XLA; per text a dict {name, computations, calls} or {error}.

    ``computations``: {computation: {instruction: [opcode, [operand names]]}}; ``calls``:
    {computation: {instruction: [called computation names]}} for instructions that call any.

    The child prints one JSON line per text; when XLA aborts the process on a text, that text
    is recorded as {"error": "XLA crashed"} and a new child carries on with the next one.
    """
    results: list[dict] = []
    while len(results) < len(texts):
        rest = texts[len(results) :]
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(_SPECIAL_SPELLINGS), json.dumps(sorted(CALLERS))],
            input=json.dumps(rest),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        results.extend(lines)
        if proc.returncode != 0 and len(results) < len(texts):
            results.append({"error": "XLA crashed"})
    return results


def opcode_spelling(enum_name: str) -> str:
    """kGetTupleElement -> get-tuple-element (XLA's text spelling)."""
    return _SPECIAL_SPELLINGS.get(enum_name) or re.sub(r"(?<!^)([A-Z])", r"-\1", enum_name[1:]).lower()
