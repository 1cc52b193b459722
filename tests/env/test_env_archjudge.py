from __future__ import annotations

import pytest

from servedoctor.env.arch import Arch, parse_arch
from servedoctor.env.archjudge import judge_code, ptx_jits_on, sass_runs_on
from servedoctor.env.ptx import cuda_for_ptx, driver_loads, parse_version
from servedoctor.errors import UserError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sm_90a", Arch(9, 0, "a")),
        ("compute_100f", Arch(10, 0, "f")),
        ("sm120", Arch(12, 0)),
        ("121", Arch(12, 1)),
        ("9.0", Arch(9, 0)),
        ("12.1a", Arch(12, 1, "a")),
        (" SM_86 ", Arch(8, 6)),
    ],
)
def test_parse_arch(text: str, expected: Arch) -> None:
    assert parse_arch(text) == expected


@pytest.mark.parametrize("text", ["", "sm_", "gfx942", "sm_9", "sm_90x", "cuda"])
def test_parse_arch_rejects(text: str) -> None:
    with pytest.raises(UserError):
        parse_arch(text)


def test_names() -> None:
    assert Arch(10, 3, "f").sm == "sm_103f"
    assert Arch(9, 0, "a").compute == "compute_90a"
    assert Arch(12, 1, "a").base == Arch(12, 1)


A = parse_arch


@pytest.mark.parametrize(
    ("code", "gpu", "runs"),
    [
        ("sm_80", "sm_80", True),
        ("sm_80", "sm_86", True),  # same major, newer minor
        ("sm_86", "sm_80", False),  # never backwards
        ("sm_80", "sm_90", False),  # never across majors
        ("sm_90a", "sm_90", True),
        ("sm_100a", "sm_103", False),  # arch-specific: exactly 10.0
        ("sm_100f", "sm_103", True),  # family: same major, minor >=
        ("sm_103f", "sm_100", False),
        ("sm_100f", "sm_110", False),
        ("sm_120", "sm_121", True),
        ("sm_120f", "sm_121", True),
        ("sm_121a", "sm_120", False),
    ],
)
def test_sass_rules(code: str, gpu: str, runs: bool) -> None:
    assert sass_runs_on(A(code), A(gpu)) is runs


@pytest.mark.parametrize(
    ("code", "gpu", "jits"),
    [
        ("compute_80", "sm_120", True),  # plain PTX: any newer GPU
        ("compute_90", "sm_86", False),
        ("compute_90a", "sm_90", True),
        ("compute_90a", "sm_100", False),
        ("compute_100f", "sm_103", True),
        ("compute_100f", "sm_120", False),
        ("compute_120f", "sm_100", False),
    ],
)
def test_ptx_rules(code: str, gpu: str, jits: bool) -> None:
    assert ptx_jits_on(A(code), A(gpu)) is jits


def test_judge_prefers_exact_then_compatible_then_ptx() -> None:
    sass = (A("sm_80"), A("sm_86"))
    ptx = (A("compute_90"),)
    assert judge_code(sass, ptx, A("sm_86")) == "exact_sass"
    assert judge_code(sass, ptx, A("sm_89")) == "compatible_sass"
    assert judge_code(sass, ptx, A("sm_120")) == "ptx_jit"
    assert judge_code(sass, (), A("sm_120")) == "none"
    assert judge_code((), (), A("sm_120")) == "no_device_code"


@pytest.mark.parametrize(
    ("isa", "cuda"),
    [((7, 0), (11, 0)), ((8, 5), (12, 5)), ((8, 6), (12, 7)), ((8, 8), (12, 9)), ((9, 0), (13, 0))],
)
def test_ptx_isa_table(isa: tuple[int, int], cuda: tuple[int, int]) -> None:
    assert cuda_for_ptx(isa) == cuda


def test_ptx_isa_beyond_the_table() -> None:
    assert cuda_for_ptx((9, 4)) == (13, 4)  # ISA 9.N ships with CUDA 13.N
    assert not driver_loads((9, 4), (13, 1))
    assert driver_loads((9, 4), (13, 4))
    assert not driver_loads((10, 0), (13, 1))  # newer than every known ISA
    assert driver_loads((8, 7), None) and driver_loads(None, (12, 0))  # unknown: allowed
    assert parse_version("12.8") == (12, 8) and parse_version("n/a") is None
