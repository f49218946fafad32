"""Cut an optimized HLO module into kernels, the unit the cost model predicts.

After XLA's fusion passes, each instruction of the entry computation (and of the loop bodies and
branches it runs) that does work is one *kernel*: a ``fusion`` of several ops, or a lone op such
as ``convolution``, ``dot``, ``copy``, ``sort`` or ``custom-call``. The device runs them one at a
time, so a program's runtime is (about) the sum of its kernels' runtimes.

A `Kernel` is a small directed graph:

* for a fusion, the instructions of its fused computation;
* for a lone op, the op itself plus one ``parameter`` node per operand.

Kernel inputs are ``parameter`` nodes; edges go from producer to consumer; ``outputs`` lists the
nodes whose value leaves the kernel (the root, or the operands of a root ``tuple`` for a
multi-output fusion). The kernel keeps the HLO instruction's name, which is the name the profiler
reports, so measured runtimes can be joined to kernels.

Instructions that do no work of their own are not kernels (``parameter``, ``constant``,
``tuple``, ``get-tuple-element``, ``bitcast``, ``after-all``, the ``*-done`` halves of async
pairs, custom calls that only reserve memory (`NOT_KERNEL_CUSTOM_CALLS`), ...). Control flow
(``while``, ``conditional``, ``call``) is not a kernel either: the kernels are the ones inside the
bodies it runs, found recursively.

Kernels of a TPU module
-----------------------
The TPU compiler (`tpucost.experiments.compiler`) writes the same instructions with more in them, and the same
rules cut them into kernels:

* every ``fusion`` of the entry computation and of the loop bodies it runs is a kernel (dots and
  convolutions run on the matrix units inside ``kOutput`` fusions, as ``convolution`` ops);
* an asynchronous copy (a ``copy-start`` / ``copy-done`` pair: a DMA by a copy engine between
  memory spaces) is one kernel (`Kernel.is_async_copy`): its graph is the ``copy-start`` and its
  operand, its name the ``copy-done``'s. On a TPU the copy runs while other kernels compute, and
  the ``copy-done`` is where the TensorCore waits for what computation did not hide: that wait is
  what the profiler times under the ``copy-done``'s name (the ``copy-start`` event lasts a few ns),
  and it is the copy's label. So a copy's label is the time it adds to a run, and a run's kernel
  labels add up to the run (checked on a real TPU v6e profile, `tpucost.method.profiles`). Copies
  between HBM and the on-chip VMEM (``S(1)``) are mostly hidden (waits of ns); copies to or from
  the host's memory (``S(5)``, `Kernel.host_copy`) wait for PCIe and can dominate a program;
* a ``custom-call`` is a kernel when it computes: ``online-softmax``, a Pallas kernel compiled by
  Mosaic (``tpu_custom_call``), ... (`Kernel.custom_call_target` names it); ``AllocateBuffer``
  only reserves a buffer in VMEM and is not one;
* lone ``copy``, ``convert``, ``dynamic-update-slice`` and the scalar ops of a loop's counter
  (on the scalar unit, memory space ``S(2)``/``S(6)``) are kernels, as on the CPU.

The layouts carry the TPU's tiling (``{1,0:T(8,128)(2,1)}``: (8, 128) tiles of 32-bit words, bf16
packed in pairs) and memory space; `tpucost.method.features` reads the first tile into its ``layout_tile``
columns. The memory space is not a feature column (adding one changes the feature layout and
retires the bundled models); `tpucost.experiments.compiler` keeps the compiler's own per-kernel estimate.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from tpucost.method.hlo import Computation, Instruction, Module

__all__ = [
    "NOT_KERNELS",
    "NOT_KERNEL_CUSTOM_CALLS",
    "CONTROL_FLOW",
    "Kernel",
    "decompose",
    "kernel_of_instruction",
    "module_summary",
    "estimated_cycles",
]

#: Opcodes that never run as a kernel: they only name, group or alias values.
NOT_KERNELS = frozenset(
    """parameter constant tuple get-tuple-element bitcast after-all add-dependency opt-barrier
    partition-id replica-id domain get-dimension-size async-update async-done all-reduce-done
    all-gather-done collective-permute-done copy-done send-done recv-done""".split()
)
#: Values of ``custom_call_target`` that do no work a kernel is timed for: the TPU compiler's buffer reservation.
NOT_KERNEL_CUSTOM_CALLS = frozenset({"AllocateBuffer"})
#: Opcodes whose called computations hold further kernels.
CONTROL_FLOW = frozenset({"while", "conditional", "call"})


@dataclass
class Kernel:
    """One kernel: a named graph of HLO ops.

    Attributes:
      name: the HLO instruction name (``fusion.3``, ``convolution.1``): what the profiler reports.
      opcode: the instruction's opcode (``fusion`` for fused kernels).
      kind: the fusion kind (``kLoop``, ``kInput``, ``kOutput``, ``kCustom``; on XLA:CPU a
      YNNPACK fusion is ``kCustom`` with ``__ynn_fusion`` in its backend config), else the opcode.
      computation: the computation the instruction lives in (``main.5``, a loop body, ...).
      nodes: the ops of the kernel, inputs first as ``parameter`` nodes.
      edges: ``(producer, consumer)`` pairs of node indices, one per operand use.
      outputs: indices of the nodes whose values leave the kernel.
      instruction: the kernel's own instruction in `computation`.
      calls_per_run: how often one program run executes the kernel: the product of the known
      trip counts of the loops around it (1 outside loops; 1 when a trip count is unknown).
    """

    name: str
    opcode: str
    kind: str
    computation: str
    nodes: list[Instruction]
    edges: list[tuple[int, int]]
    outputs: list[int]
    instruction: Instruction
    calls_per_run: int = 1
    backend_config: object = field(default=None, repr=False)

    @property
    def is_async_copy(self) -> bool:
        """Whether the kernel is an asynchronous copy (a ``copy-start`` / ``copy-done`` pair: a DMA
        that overlaps compute, labelled by its ``copy-done``'s wait)."""
        return self.opcode == "copy-start"

    @property
    def host_copy(self) -> bool:
        """Whether the kernel is an asynchronous copy to or from the host's memory (memory space 5,
        ``S(5)``, on either side of the ``copy-start``'s (destination, source, context) tuple)."""
        if not self.is_async_copy:
            return False
        return any(
            s.layout is not None and s.layout.memory_space == 5 for s in self.instruction.shape.leaves()
        )

    @property
    def custom_call_target(self) -> str | None:
        """The ``custom_call_target`` of a ``custom-call`` kernel (``online-softmax``, ...), else None."""
        if self.opcode != "custom-call":
            return None
        target = self.instruction.attributes.get("custom_call_target")
        return str(target) if target is not None else None

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def num_edges(self) -> int:
        return len(self.edges)

    @property
    def num_inputs(self) -> int:
        return sum(1 for n in self.nodes if n.opcode == "parameter")

    def opcode_counts(self) -> dict[str, int]:
        """How many nodes of each opcode the kernel has."""
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.opcode] = counts.get(node.opcode, 0) + 1
        return counts


def decompose(module: Module) -> list[Kernel]:
    """All kernels a run of `module` executes, in execution (file) order.

    Walks the entry computation and, recursively, the bodies, conditions and branches of its
    ``while``/``conditional``/``call`` instructions. Each kernel instruction appears once, even if
    a loop runs it many times (see `Kernel.calls_per_run`).
    """
    return list(_walk(module, module.entry, calls_per_run=1, seen=set()))


def _walk(module: Module, comp: Computation, calls_per_run: int, seen: set[str]) -> Iterator[Kernel]:
    if comp.name in seen:  # a computation called from two places is one set of kernels
        return
    seen.add(comp.name)
    by_name = {i.name: i for i in comp.instructions}
    done_of = {i.operands[0]: i.name for i in comp.instructions if i.opcode == "copy-done" and i.operands}
    for inst in comp.instructions:
        if inst.opcode in CONTROL_FLOW:
            trips = _trip_count(inst) if inst.opcode == "while" else 1
            for callee in inst.called_computations:
                if callee in module.computations:
                    yield from _walk(module, module.computations[callee], calls_per_run * trips, seen)
        elif inst.opcode not in NOT_KERNELS and not _reserves_memory(inst):
            kernel = kernel_of_instruction(module, comp, inst, by_name)
            kernel.calls_per_run = calls_per_run
            if kernel.is_async_copy:  # timed under its copy-done's name (the wait)
                kernel.name = done_of.get(inst.name, inst.name)
            yield kernel


def _reserves_memory(inst: Instruction) -> bool:
    return (
        inst.opcode == "custom-call" and inst.attributes.get("custom_call_target") in NOT_KERNEL_CUSTOM_CALLS
    )


def _trip_count(inst: Instruction) -> int:
    """The loop's known trip count from its backend config (XLA writes it after analysis), else 1."""
    config = inst.attributes.get("backend_config")
    if isinstance(config, dict):
        try:
            return max(1, int(config["known_trip_count"]["n"]))
        except (KeyError, TypeError, ValueError):
            pass
    return 1


def kernel_of_instruction(
    module: Module, comp: Computation, inst: Instruction, by_name: dict[str, Instruction] | None = None
) -> Kernel:
    """The kernel graph of one kernel instruction (a fusion or a lone op) of computation `comp`."""
    body = _fused_body(module, inst)
    if body is not None:
        nodes = list(body.instructions)
        root = body.root
    else:
        by_name = by_name if by_name is not None else {i.name: i for i in comp.instructions}
        nodes = _operand_parameters(by_name, inst) + [inst]
        root = inst
    index = {n.name: i for i, n in enumerate(nodes)}
    if body is None:  # the lone op reads its operands through the parameter nodes
        edges = [(i, len(nodes) - 1) for i in range(len(nodes) - 1)]
    else:
        edges = [(index[op], index[n.name]) for n in nodes for op in n.operands if op in index]
    outputs = [index[root.name]]
    if root.opcode == "tuple":
        outputs += [index[op] for op in root.operands if op in index]
    config = inst.attributes.get("backend_config")
    return Kernel(
        name=inst.name,
        opcode=inst.opcode,
        kind=_kind(inst),
        computation=comp.name,
        nodes=nodes,
        edges=edges,
        outputs=sorted(set(outputs)),
        instruction=inst,
        backend_config=config,
    )


def _fused_body(module: Module, inst: Instruction) -> Computation | None:
    """The computation whose ops make up the kernel: a fusion's, or an async op's wrapped one."""
    if inst.opcode in ("fusion", "async-start"):
        callee = inst.attributes.get("calls")
        if isinstance(callee, tuple):
            callee = callee[0] if callee else None
        if callee in module.computations:
            return module.computations[callee]
    return None


def _operand_parameters(by_name: dict[str, Instruction], inst: Instruction) -> list[Instruction]:
    """One ``parameter`` node per operand of a lone op, with the operand's shape."""
    params = []
    for number, operand in enumerate(inst.operands):
        source = by_name.get(operand)
        shape = source.shape if source is not None else inst.shape
        params.append(
            Instruction(
                name=f"{inst.name}.param_{number}",
                opcode="parameter",
                shape=shape,
                attributes={"parameter_number": number},
            )
        )
    return params


def _kind(inst: Instruction) -> str:
    if inst.opcode != "fusion":
        return inst.opcode
    config = inst.attributes.get("backend_config")
    if isinstance(config, dict):
        fusion_config = config.get("fusion_config")
        if isinstance(fusion_config, dict) and fusion_config.get("kind"):
            return str(fusion_config["kind"])  # e.g. __ynn_fusion, __triton_gemm
    return str(inst.attributes.get("kind", "fusion"))


def module_summary(module: Module) -> dict[str, int]:
    """What a compiler made of a program, in counts (to set two compilers' modules side by side).

    Keys: ``kernels`` (async copies aside), ``asynchronous copies``, ``kLoop fusions``, ``kInput
    fusions``, ``kOutput fusions``, ``kCustom fusions`` (by the fusion's ``kind`` attribute: XLA:CPU's
    YNNPACK fusions are ``kCustom``), ``lone ops``, ``dot ops`` and ``convolution ops`` (ops of all
    kernels, fusions nested in a kernel's body included), ``tiled outputs`` (kernels with an output
    whose layout has tiles ``T(...)``, any element of a tuple output) and ``outputs in memory space
    1`` (the same with ``S(1)``: the TPU's VMEM).
    """
    ks = decompose(module)
    compute = [k for k in ks if not k.is_async_copy]
    ops = [op for k in compute for n in k.nodes for op in _ops_within(module, n)]
    outputs = [list(k.instruction.shape.leaves()) for k in compute]
    return {
        "kernels": len(compute),
        "asynchronous copies": len(ks) - len(compute),
        **{
            f"{kind} fusions": sum(
                k.opcode == "fusion" and k.instruction.attributes.get("kind") == kind for k in compute
            )
            for kind in ("kLoop", "kInput", "kOutput", "kCustom")
        },
        "lone ops": sum(k.opcode != "fusion" for k in compute),
        "dot ops": ops.count("dot"),
        "convolution ops": ops.count("convolution"),
        "tiled outputs": sum(any(s.layout and s.layout.tiles for s in leaves) for leaves in outputs),
        "outputs in memory space 1": sum(
            any(s.layout and s.layout.memory_space == 1 for s in leaves) for leaves in outputs
        ),
    }


def _ops_within(module: Module, inst: Instruction) -> Iterator[str]:
    """``inst``'s opcode, or for a fusion nested in a kernel's body, the opcodes of its own body."""
    body = _fused_body(module, inst) if inst.opcode == "fusion" else None
    if body is None:
        yield inst.opcode
        return
    for inner in body.instructions:
        yield from _ops_within(module, inner)


def estimated_cycles(kernel: Kernel) -> int | None:
    """The TPU compiler's estimate of one run of ``kernel``, in cycles of a TensorCore
    (``"estimated_cycles"`` in the instruction's ``backend_config``, at its top level or in its
    ``window_config``), or None where it gave none."""
    config = kernel.backend_config
    if not isinstance(config, dict):
        return None
    for holder in (config, config.get("window_config")):
        if isinstance(holder, dict) and holder.get("estimated_cycles") is not None:
            try:
                return int(holder["estimated_cycles"])
            except (TypeError, ValueError):
                return None
    return None
