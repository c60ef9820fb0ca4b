"""The shim exports exactly ATB's hook symbols (callsites §1.3) for its ABI,
nothing else, and needs no libstdc++."""

from __future__ import annotations

import subprocess

from probe_helpers import shim_lib

# callsites §1.3, ABI-neutral names (incl. msProbe's legacy extras)
NEUTRAL = """_ZN3atb5Probe16IsSaveTensorDataEv _ZN3atb5Probe16IsSaveTensorDescEv
_ZN3atb5Probe18IsSaveTensorBeforeEv _ZN3atb5Probe17IsSaveTensorAfterEv
_ZN3atb5Probe21IsExecuteCountInRangeEm _ZN3atb5Probe12IsSaveTilingEv
_ZN3atb5Probe11IsSaveParamEv _ZN3atb5Probe29ReportOperationIOTensorEnableEv
_ZN3atb5Probe30ReportOperationStatisticEnableEv _ZN3atb5Probe26ReportKernelIOTensorEnableEv
_ZN3atb5Probe26ReportOperationGraphEnableEv _ZN3atb5Probe15IsOverflowCheckEv
_ZN3atb5Probe14IsOverflowStopEv _ZN3atb5Probe12UpdateConfigEv _ZN3atb5Probe11IsSaveChildEv
_ZN3atb5Probe14IsSaveIntensorEv _ZN3atb5Probe15IsSaveOuttensorEv""".split()

S1 = "NSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"


def expected(abi: int) -> set[str]:
    out = set(NEUTRAL)
    if abi == 0:
        out |= {
            "_ZN3atb5Probe16IsTensorNeedSaveERKSt6vectorIlSaIlEERKSs",
            "_ZN3atb5Probe10SaveTensorERKSsS2_S2_PKvmS2_",
            "_ZN3atb5Probe10SaveTilingEPKhmRKSs",
            "_ZN3atb5Probe9SaveParamERKSsS2_",
            "_ZN3atb5Probe23ReportOperationIOTensorEmRKSsS2_RKSt6vectorINS0_6TensorESaIS4_EES8_",
            "_ZN3atb5Probe29ReportOperationSetupStatisticEmRKSsS2_",
            "_ZN3atb5Probe31ReportOperationExecuteStatisticEmRKSsS2_",
            "_ZN3atb5Probe20ReportKernelIOTensorEmRKSsS2_RKSt6vectorINS0_6TensorESaIS4_EES8_",
            "_ZN3atb5Probe20ReportOverflowKernelERKSs",
            "_ZN3atb5Probe25IsSaveTensorInSpecificDirERKSs",
            "_ZN3atb5Probe20ReportOperationGraphERKSsS2_",
            "_ZN9atb_speed10SpeedProbe21IsReportModelTopoInfoERKSs",
            "_ZN9atb_speed10SpeedProbe19ReportModelTopoInfoERKSsS2_",
        }
    else:
        s = S1
        out |= {
            f"_ZN3atb5Probe16IsTensorNeedSaveERKSt6vectorIlSaIlEERK{s}",
            f"_ZN3atb5Probe10SaveTensorERK{s}S8_S8_PKvmS8_",
            f"_ZN3atb5Probe10SaveTilingEPKhmRK{s}",
            f"_ZN3atb5Probe9SaveParamERK{s}S8_",
            f"_ZN3atb5Probe23ReportOperationIOTensorEmRK{s}S8_RKSt6vectorINS0_6TensorESaISA_EESE_",
            f"_ZN3atb5Probe29ReportOperationSetupStatisticEmRK{s}S8_",
            f"_ZN3atb5Probe31ReportOperationExecuteStatisticEmRK{s}S8_",
            f"_ZN3atb5Probe20ReportKernelIOTensorEmRK{s}S8_RKSt6vectorINS0_6TensorESaISA_EESE_",
            f"_ZN3atb5Probe20ReportOverflowKernelERK{s}",
            f"_ZN3atb5Probe25IsSaveTensorInSpecificDirERK{s}",
            f"_ZN3atb5Probe20ReportOperationGraphERK{s}S8_",
            f"_ZN9atb_speed10SpeedProbe21IsReportModelTopoInfoERK{s}",
            f"_ZN9atb_speed10SpeedProbe19ReportModelTopoInfoERK{s}S8_",
        }
    return out


def test_exports_exactly_the_hooks(abi):
    nm = subprocess.run(["nm", "-D", "--defined-only", str(shim_lib(abi))], check=True,
                        capture_output=True, text=True).stdout
    exported = {line.split()[-1] for line in nm.splitlines() if line.strip()}
    assert exported == expected(abi)
    # never the ATB helpers or msProbe's Mki:: helpers
    assert not any("ToProbeTensor" in s or "Mki" in s for s in exported)


def test_needs_no_libstdcxx(abi):
    dyn = subprocess.run(["readelf", "-d", str(shim_lib(abi))], check=True, capture_output=True,
                         text=True).stdout
    needed = [line for line in dyn.splitlines() if "NEEDED" in line]
    assert needed and not any("stdc++" in n or "libgcc_s" in n for n in needed)


def test_loading_alone_does_nothing(tmp_path, abi):
    """Every process of the user's shell gets the preload: without a hook call
    it must not create files, start threads or print anything."""
    import os

    env = {**os.environ, "LD_PRELOAD": str(shim_lib(abi)), "ATB_OUTPUT_DIR": str(tmp_path),
           "ATB_DUMP_CONFIG": str(tmp_path / "c.json")}
    p = subprocess.run(["bash", "-c", "ls / >/dev/null && grep Threads /proc/self/status"],
                       env=env, capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["Threads:", "1"] and p.stderr == ""
    assert list(tmp_path.iterdir()) == []
