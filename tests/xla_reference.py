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
import threading

from tpucost.method import hlo

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


# --- our parser against XLA's ------------------------------------------------------------------


def _summary(module: hlo.Module) -> dict:
    return {
        c.name: {i.name: [i.opcode, i.operands] for i in c.instructions} for c in module.computations.values()
    }


def _calls(module: hlo.Module, skip: set[tuple[str, str]]) -> dict:
    """{computation: {instruction: sorted called computations}} for instructions that call some."""
    out: dict = {}
    for c in module.computations.values():
        for i in c.instructions:
            if i.called_computations and (c.name, i.name) not in skip:
                out.setdefault(c.name, {})[i.name] = sorted(i.called_computations)
    return out


def _difference(ours: hlo.Module, ref: dict) -> str | None:
    """The first difference between our module and XLA's (names, opcodes, operands, called
    computations), or None. XLA prints async-start/update/done with the wrapped op in place, so
    their called computations are not read from XLA and not compared."""
    theirs, mine = ref["computations"], _summary(ours)
    if mine.keys() != theirs.keys():
        return f"computations: ours {sorted(mine)} vs XLA {sorted(theirs)}"
    for comp, insts in theirs.items():
        if mine[comp] != insts:
            if list(mine[comp]) != list(insts):
                return f"{comp}: instructions ours {list(mine[comp])[:8]}... vs XLA {list(insts)[:8]}..."
            name = next(n for n in insts if mine[comp][n] != insts[n])
            return f"{comp}/{name}: ours {mine[comp][name]} vs XLA {insts[name]}"
    asyncs = {
        (c, i) for c, insts in theirs.items() for i, (op, _) in insts.items() if op.startswith("async-")
    }
    ref_calls = {
        c: {i: sorted(v) for i, v in d.items() if (c, i) not in asyncs} for c, d in ref["calls"].items()
    }
    ref_calls = {c: d for c, d in ref_calls.items() if d}
    my_calls = _calls(ours, asyncs)
    if my_calls != ref_calls:
        for comp in sorted(set(my_calls) | set(ref_calls)):
            a, b = my_calls.get(comp, {}), ref_calls.get(comp, {})
            for name in sorted(set(a) | set(b)):
                if a.get(name) != b.get(name):
                    return f"{comp}/{name} calls: ours {a.get(name)} vs XLA {b.get(name)}"
    return None


def cross_check(modules: list[tuple[str, str]]) -> tuple[list[str], list[str], list[str]]:
    """Parse (label, text) modules with XLA's parser and ours; (compared, rejected by XLA, differing).

    XLA parses in a child process while we parse here (two cores at work)."""
    reference: list[dict] = []
    worker = threading.Thread(target=lambda: reference.extend(xla_parse([t for _, t in modules])))
    worker.start()
    ours: list[hlo.Module | Exception] = []
    for label, text in modules:
        try:
            ours.append(hlo.parse_module(text, source=label))
        except hlo.HloParseError as err:
            ours.append(err)
    worker.join()
    assert len(reference) == len(modules), "XLA's parser did not answer for every module"
    compared, rejected, differing = [], [], []
    for (label, _), mine, ref in zip(modules, ours, reference, strict=True):
        if "error" in ref:
            rejected.append(label)
            continue
        compared.append(label)
        diff = str(mine) if isinstance(mine, Exception) else _difference(mine, ref)
        if diff:
            differing.append(f"{label}: {diff}")
    return compared, rejected, differing


def assert_agrees(texts: list[str], labels: list[str]) -> int:
    compared, _, differing = cross_check(list(zip(labels, texts, strict=True)))
    assert not differing, "differs from XLA's parser:\n" + "\n".join(differing[:10])
    return len(compared)
