"""The roofline of the 14 NKIBench problems at NKIBench shapes, imported through the importer,
against values computed by hand from the paper's counting rules (fp32, each input read once,
each output written once; swiglu's output not counted), and T_peak / % of peak on trn1/trn2."""

from __future__ import annotations

from pathlib import Path

import pytest
from nkibench_fixture import CATALOG, write_nkibench

import suites
from accelopt.problem import Problem
from accelopt.profile import peak_fraction
from hardware_agents.neuron import SPECS, TRN1, TRN2
from hardware_agents.pipeline.device_spec import roofline_terms, t_peak
from suites.nkibench import NKIBENCH_PROBLEMS, import_nkibench

# problem: (matmul FLOPs, vector FLOPs, minimal bytes), by hand at the NKIBench shapes, e.g.
# silu M=4096 N=7168: vec 3*M*N, bytes 4*2*M*N; lora M=4096 N=12288 K=5120 R=128:
# mm 2MNK + 2MKR + 2MNR, vec MN, bytes 4*(MK + KN + KR + RN + MN).
EXPECTED: dict[str, tuple[int, int, int]] = {
    "adamw": (0, 156893184, 448266240),
    "add_rmsnorm_matmul": (17179869184, 25165824, 75501568),
    "bmm": (34359738368, 0, 1107296256),
    "bmm_softmax": (34359738368, 1342177280, 1107296256),
    "gqa_full": (137438953472, 1342177280, 100663296),
    "lora": (533649686528, 50331648, 545783808),
    "mamba": (0, 234881024, 22953984),
    "matmul": (515396075520, 0, 536870912),
    "matmul_add_rmsnorm": (34359738368, 50331648, 117448704),
    "rmsnorm_matmul": (17179869184, 16777216, 58720256),
    "rope_single_freq_apply": (0, 100663296, 402653184),
    "silu": (0, 88080384, 234881024),
    "swiglu": (77309411328, 62914560, 71303168),
    "transpose_matmul": (183609851904, 0, 302514176),
}
# T_peak on trn1 in ms and the binding roof, by hand: e.g. silu 234881024 B / 440.234e9 B/s,
# mamba 234881024 / 286.72e9, matmul 515396075520 / 23.75e12.
TRN1_TPEAK = {
    "silu": (0.533537, "memory"),
    "mamba": (0.8192, "vector"),
    "matmul": (21.700887, "matmul"),
    "bmm_softmax": (4.681143, "vector"),
    "adamw": (1.018245, "memory"),
    "gqa_full": (5.786903, "matmul"),
}


@pytest.fixture(scope="module")
def nkibench(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Problem]:
    root = tmp_path_factory.mktemp("nkibench-full")
    write_nkibench(root / "src", CATALOG.values())
    report = import_nkibench(root / "src", root / "suite")
    return {p.name: p for p in suites.load_suite(report.out)}


def test_all_14_problems_imported(nkibench: dict[str, Problem]) -> None:
    assert set(nkibench) == set(NKIBENCH_PROBLEMS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_roofline_terms_match_hand_counts(nkibench: dict[str, Problem], name: str) -> None:
    terms = roofline_terms(nkibench[name])
    assert (terms.flops_matmul, terms.flops_vector, terms.bytes_min) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(TRN1_TPEAK))
def test_trn1_t_peak_and_bound(nkibench: dict[str, Problem], name: str) -> None:
    tp, bound = t_peak(nkibench[name], TRN1)
    ms, roof = TRN1_TPEAK[name]
    assert tp * 1e3 == pytest.approx(ms, rel=1e-6) and bound == roof


def test_trn2_peaks_and_t_peak(nkibench: dict[str, Problem]) -> None:
    assert SPECS == {"trn1": TRN1, "trn2": TRN2}
    assert TRN1.peak_bw_bytes_s == pytest.approx(440.2e9, rel=1e-4)
    assert TRN1.peak_matmul_flops == 23.75e12 and TRN1.peak_vector_flops == pytest.approx(286.72e9)
    assert TRN2.peak_bw_bytes_s == pytest.approx(362.5e9)  # 2.9 TB/s per chip / 8 cores
    assert TRN2.peak_matmul_flops == pytest.approx(22.625e12)  # 181 FP32 TFLOPS / 8
    assert TRN2.peak_vector_flops == pytest.approx(399.36e9)  # 256 x 0.96 GHz + 128 x 1.2 GHz
    assert "trainium2" in TRN2.source.lower() and "2.9 TB/s" in TRN2.source
    tp, bound = t_peak(nkibench["silu"], TRN2)
    assert bound == "memory" and tp == pytest.approx(234881024 / 362.5e9)
    tp, bound = t_peak(nkibench["mamba"], TRN2)
    assert bound == "vector" and tp == pytest.approx(234881024 / 399.36e9)
    tp, bound = t_peak(nkibench["matmul"], TRN2)
    assert bound == "matmul" and tp == pytest.approx(515396075520 / 22.625e12)


def test_percent_of_peak_is_t_peak_over_measured(nkibench: dict[str, Problem]) -> None:
    tp, _ = t_peak(nkibench["silu"], TRN1)
    assert peak_fraction(tp, 2 * tp) == pytest.approx(0.5)
    assert peak_fraction(tp, 0.0) is None


def test_rope_derived_axes(nkibench: dict[str, Problem]) -> None:
    axes = nkibench["rope_single_freq_apply"].axis_values()
    assert axes["T"] == 1 * 64 * 4096 and axes["D2"] == 64


def test_template_files_are_the_cpu_suites(nkibench: dict[str, Problem]) -> None:
    cpu = Path(suites.__file__).parent / "cpu"
    for name in NKIBENCH_PROBLEMS:
        assert (cpu / name / "definition.json").is_file()
