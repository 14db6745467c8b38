"""Where the CUDA target's host function keeps its values (`qdiff.compiler.cuda.residency`),
read from the text it writes: plain Python, no GPU and no simulator needed."""

from __future__ import annotations

import numpy as np

from qdiff.compiler.cuda.codegen import written_with_plans
from qdiff.compiler.cuda.kernels import KernelSource


def _body_of(lines: list[str], header: str) -> list[str]:
    """The lines of the block that ``header`` opens (its body, without nested headers)."""
    start = next(k for k, line in enumerate(lines) if line.strip() == header + ":")
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1:]:
        if len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line.strip())
    return body


def _transfers(lines: list[str]) -> list[str]:
    return [line.strip() for line in lines if "rtc.upload(" in line or "rtc.download" in line]


def test_carry_read_on_the_host_by_a_later_loop_stays_on_the_device_in_its_own():
    # the plan of carries was one set of names: a later loop reading the first loop's carry
    # on the host dropped it from the plan, the next pass put it back, and the text written
    # last brought the carry back and sent it over again at every step of its own loop
    def write(src: KernelSource) -> None:
        src.line("c = a.copy()")
        with src.block("for i in range(3)"):
            src.line("d = c")
            src.allocate_empty("o", (6,), np.float64)
            src.launch("k", 1, 8, ["d", "y", "o"], ["o"])
            src.line("c, = o,")
        with src.block("for j in range(2)"):
            src.line("s = np.sum(c) + j")
        src.line("return (s,)")

    source, _ = written_with_plans(write)
    lines = source.lines
    assert _transfers(_body_of(lines, "for i in range(3)")) == [], "\n".join(lines)
    assert _transfers(_body_of(lines, "for j in range(2)")) == [], "\n".join(lines)
    assert _transfers(lines) == ["c_d = rtc.upload(c)", "y_d = rtc.upload(y)",
                                 "c = rtc.download(c_d)"], "\n".join(lines)


def test_carries_go_over_before_their_own_loop_of_nested_loops():
    # an inner loop's carry goes over before the inner loop (its initial value is made in
    # the outer loop's body), the outer loop's before the outer loop; neither comes back
    def write(src: KernelSource) -> None:
        src.line("c = a.copy()")
        with src.block("for i in range(3)"):
            src.line("e = c")
            with src.block("for j in range(2)"):
                src.line("f = e")
                src.allocate_empty("o", (6,), np.float64)
                src.launch("k", 1, 8, ["f", "o"], ["o"])
                src.line("e, = o,")
            src.line("g = e")
            src.allocate_empty("p", (6,), np.float64)
            src.launch("m", 1, 8, ["g", "p"], ["p"])
            src.line("c, = p,")
        src.line("return (c,)")

    source, _ = written_with_plans(write)
    lines = source.lines
    assert _transfers(_body_of(lines, "for i in range(3)")) == [], "\n".join(lines)
    assert _transfers(lines) == ["c_d = rtc.upload(c)", "c = rtc.download(c_d)"], \
        "\n".join(lines)


def test_carry_its_loop_reads_on_the_host_settles_the_passes():
    # a carry that kernels update and its loop's body reads on the host was planned, dropped
    # (read on the host), planned again (it came back at every step), ...: the passes never
    # agreed, and the text written last was whichever pass the limit stopped at
    def write(src: KernelSource) -> None:
        src.line("c = a.copy()")
        with src.block("for i in range(3)"):
            src.line("s = np.sum(c)")
            src.line("d = c")
            src.allocate_empty("o", (6,), np.float64)
            src.launch("k", 1, 8, ["d", "s", "o"], ["o"])
            src.line("c, = o,")
        src.line("return (c,)")

    source, _ = written_with_plans(write)
    assert source.residency.next_plan() == source.residency.plan
    downloads = [t for t in _transfers(_body_of(source.lines, "for i in range(3)"))
                 if "download" in t]
    assert downloads == ["c = rtc.download(c_d)"], "\n".join(source.lines)  # for np.sum
