"""File sizes at close (protocol v2 ``sizes``), with real programs under LD_PRELOAD against a
real mapper: a file the shim created reports the size it had at close (close and fclose
alike) and mcmf's chain of the job learns it; a file the program opened but did not create
reports nothing; a create that announced its size reports nothing more; a fork child reports
its own files only; it is off unless ``LUSTRE_ALLOC_SIZES=1``."""
from __future__ import annotations

import sys

import pytest

from tests.service.conftest import make_service
from tests.support import wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def mcmf():
    svc = make_service(static_cluster="4x2", policy="mcmf", plan_ahead=False,
                       policy_params={"mcmf": {"alike_to_lustre": False}})
    yield svc
    svc.stop()


def _learned(svc, job: str) -> int:
    with svc.lock:
        info = svc.policy.primary.predictor.app_info(job)
    return 0 if info is None else info.requests


def _mean(svc, job: str) -> float:
    with svc.lock:
        return svc.policy.primary.predictor.app_info(job).mean_bytes


def test_closed_files_teach_the_chain_their_sizes(shim_run_factory, mcmf, create_files):
    run = shim_run_factory(mcmf.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000",
                           LUSTRE_ALLOC_SIZES="1", LUSTRE_ALLOC_JOBID="sizes.1")
    run.run([create_files, "-n", "12", run.data])                    # open + close
    run.run([create_files, "-a", "fopen", "-n", "8", "-p", "s", run.data])   # fopen + fclose
    wait_for(lambda: _learned(mcmf, "sizes.1") == 20, timeout_s=10.0, what="20 sizes learned")
    sizes = [f.stat().st_size for f in run.data.iterdir()]
    assert len(sizes) == 20 and _mean(mcmf, "sizes.1") == pytest.approx(sum(sizes) / 20)
    reg = mcmf.metrics.registry
    assert reg.get_sample_value("lustre_alloc_mapper_file_sizes_total",
                                {"result": "learned"}) == 20


def test_only_files_the_shim_created_report_and_only_without_an_announced_size(
        shim_run_factory, mcmf, create_files):
    run = shim_run_factory(mcmf.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000",
                           LUSTRE_ALLOC_SIZES="1", LUSTRE_ALLOC_JOBID="sizes.2")
    old = run.data / "old"
    old.write_bytes(b"x" * 1000)
    # an existing file reopened and appended to, and one new file
    code = (f"f = open({str(old)!r}, 'ab'); f.write(b'y' * 10); f.close()\n"
            f"g = open({str(run.data / 'new')!r}, 'wb'); g.write(b'z' * 4096); g.close()\n")
    run.run([sys.executable, "-c", code])
    wait_for(lambda: _learned(mcmf, "sizes.2") == 1, timeout_s=10.0, what="one size learned")
    assert _mean(mcmf, "sizes.2") == 4096
    # a create that announced its size teaches it at create (once per layout the policy
    # decided: a lease's layouts are decided ahead); its close reports nothing more
    run.run([create_files, "-n", "5", "-p", "a", run.data], LUSTRE_ALLOC_JOBID="sizes.3",
            LUSTRE_ALLOC_EXPECTED_BYTES="1M")
    wait_for(lambda: _learned(mcmf, "sizes.3") >= 5, timeout_s=10.0, what="creates learned")
    assert _mean(mcmf, "sizes.3") == 1 << 20
    assert mcmf.metrics.registry.get_sample_value("lustre_alloc_mapper_file_sizes_total",
                                                  {"result": "learned"}) == 1


def test_a_fork_child_reports_its_own_files_and_nothing_is_sent_by_default(
        shim_run_factory, mcmf, create_files):
    run = shim_run_factory(mcmf.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000",
                           LUSTRE_ALLOC_SIZES="1", LUSTRE_ALLOC_JOBID="sizes.4")
    # the parent creates a file and forks with it open: the child's close of the inherited
    # descriptor reports nothing, the parent's reports it once; the child's own file reports
    shared, own = run.data / "shared", run.data / "child"
    code = (f"import os, sys\n"
            f"f = open({str(shared)!r}, 'wb'); f.write(b's' * 3000); f.flush()\n"
            f"pid = os.fork()\n"
            f"if pid == 0:\n"
            f"    f.close()\n"
            f"    g = open({str(own)!r}, 'wb'); g.write(b'c' * 5000); g.close()\n"
            f"    sys.exit(0)\n"
            f"os.waitpid(pid, 0)\n"
            f"f.close()\n")
    run.run([sys.executable, "-c", code])
    wait_for(lambda: _learned(mcmf, "sizes.4") == 2, timeout_s=10.0, what="2 sizes learned")
    assert _mean(mcmf, "sizes.4") == 4000
    run.run([create_files, "-n", "6", "-p", "off", run.data], LUSTRE_ALLOC_JOBID="sizes.5",
            LUSTRE_ALLOC_SIZES="0")
    run.run([create_files, "-n", "6", "-p", "dflt", run.data], LUSTRE_ALLOC_JOBID="sizes.7",
            LUSTRE_ALLOC_SIZES="")
    # a later process with sizes on is heard: the switched-off one sent nothing before it
    run.run([create_files, "-n", "2", "-p", "on", run.data], LUSTRE_ALLOC_JOBID="sizes.6")
    wait_for(lambda: _learned(mcmf, "sizes.6") == 2, timeout_s=10.0, what="sizes.6 learned")
    assert _learned(mcmf, "sizes.4") == 2 and _learned(mcmf, "sizes.5") == 0
    assert _learned(mcmf, "sizes.7") == 0                        # the default: off
