"""GPU telemetry of a launch ``--on`` a host, from that host's ``nvidia-smi`` over ssh.

The remote host is the loopback sshd; its "nvidia-smi" is a stand-in that answers the
``--query-gpu`` form (one shot and loop mode ``-lms``) with two GPUs whose memory rises by
40 GiB on GPU 1 while the stand-in server holds a file, and falls back once it is gone. The
launch must report the peak, the release, and no CPU/RSS samples of a local process; with
no nvidia-smi there, one warning line and no GPU figures.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from servedoctor.launch import LaunchOptions, launch
from servedoctor.launch.samples import TELEMETRY_NAME
from servedoctor.remote.gpu import NVIDIA_SMI_VAR, parse_query
from servedoctor.remote.url import SshTarget

pytestmark = pytest.mark.timeout(90)

FAKE_SMI = """#!{python}
import os, sys, time
held = os.path.exists({held!r})
args = sys.argv[1:]
assert "--query-gpu=index,memory.used" in args and "--format=csv,noheader,nounits" in args
loop = [a for a in args if a.startswith("-lms=")]
while True:
    held = os.path.exists({held!r})
    print("0, 1000", flush=True)
    print("1, %d" % (500 + (40960 if held else 0)), flush=True)
    if not loop:
        break
    time.sleep(int(loop[0][5:]) / 1000)
"""

SERVER = """
import os, sys, time
open(sys.argv[1], "w").close()
print("INFO: loading weights onto the GPU", flush=True)
time.sleep(3.0)
os.unlink(sys.argv[1])
print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
os._exit(3)
"""


def _launch(tmp_path: Path, target: SshTarget, held: Path) -> object:
    options = LaunchOptions(runs_dir=tmp_path / "runs", quiet=True, grace_s=1.0, on=target,
                            request_timeout=5.0)  # fmt: skip
    return launch([sys.executable, "-c", SERVER, str(held)], options)


def _warnings(result: object) -> list[str]:
    run = json.loads((Path(result.run_dir) / "run.json").read_text())  # type: ignore[attr-defined]
    return list(run["warnings"])


def test_parse_query() -> None:
    assert parse_query("1, 20\n0, 10\n") == [10.0, 20.0]
    assert parse_query("No devices were found\n") is None
    assert parse_query("") is None


def test_remote_gpu_memory_is_sampled_and_its_release_checked(
    ssh_host: SshTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = tmp_path / "holding-gpu"
    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(python=sys.executable, held=str(held)))
    smi.chmod(0o755)
    monkeypatch.setenv(NVIDIA_SMI_VAR, str(smi))
    result = _launch(tmp_path, ssh_host, held)
    assert result.outcome == "failed"  # type: ignore[attr-defined]
    gpu = result.gpu  # type: ignore[attr-defined]
    assert gpu is not None and gpu.devices == 2
    assert gpu.before_mib == 1500 and gpu.released
    assert result.gpu_peak_mib == 40960  # type: ignore[attr-defined]
    assert not any("nvidia-smi" in w for w in _warnings(result))
    # no CPU/RSS samples of some local process that happens to have the remote pid
    assert not (Path(result.run_dir) / TELEMETRY_NAME).exists()  # type: ignore[attr-defined]
    # the loop-mode ssh connection ended with the run
    assert not [p for p in os.popen("ps -eo args").read().splitlines() if str(smi) in p]


def test_no_nvidia_smi_on_the_remote_host_is_one_warning(
    ssh_host: SshTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NVIDIA_SMI_VAR, str(tmp_path / "no-such-nvidia-smi"))
    result = _launch(tmp_path, ssh_host, tmp_path / "held")
    assert result.outcome == "failed"  # type: ignore[attr-defined]
    assert result.gpu is None and result.gpu_peak_mib is None  # type: ignore[attr-defined]
    notes = [w for w in _warnings(result) if "no-such-nvidia-smi" in w]
    assert notes == [
        f"{tmp_path / 'no-such-nvidia-smi'} not found on testhost: no GPU telemetry from it"
    ]
