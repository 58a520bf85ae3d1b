"""`nplm train-nplm -mpi param` under `mpiexec -n R` (issue 7): the output layer split across
ranks trains the serial trainer's parameters, and only rank 0 writes."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import NPLM, assert_one_line_error, run_nplm
from nplmtk import container

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


def mpi_nplm(ranks, *args, cwd=None):
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), NPLM, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=180)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    where = tmp_path_factory.mktemp("mpi")
    assert run_nplm("toy-corpus", "-sentences", 150, "-seed", 3, "-write", where / "t.txt")[0] == 0
    return where


@pytest.mark.parametrize("shape", [["-h", 10, "-direct"], ["-h", 7], ["-h", 0, "-direct"]])
@pytest.mark.parametrize("batch", [8, 1])
def test_param_parallel_training_gives_the_serial_parameters(corpus, shape, batch):
    common = ["train", "-text", corpus / "t.txt", "-order", 3, "-m", 6, *shape, "-epochs", 1, "-lr", 0.05,
              "-batch", batch, "-quiet"]
    status, _, err = run_nplm(*common, "-lm", corpus / "serial.nplm")
    assert status == 0, err
    serial = container.load(str(corpus / "serial.nplm")).arrays
    history = container.load(str(corpus / "serial.nplm")).meta["history"]
    assert history[0]["updates"] >= 150  # a few hundred updates at least
    for ranks in (2, 3):
        status, _, err = mpi_nplm(ranks, *common, "-mpi", "param", "-lm", corpus / f"p{ranks}.nplm")
        assert status == 0, err
        parallel = container.load(str(corpus / f"p{ranks}.nplm")).arrays
        assert set(parallel) == set(serial)
        for name in serial:
            np.testing.assert_allclose(parallel[name], serial[name], atol=2e-5, err_msg=f"R={ranks} {name}")


def test_only_rank_zero_writes_and_the_log_counts_communication(corpus, tmp_path):
    status, _, err = mpi_nplm(2, "train", "-text", corpus / "t.txt", "-valid", corpus / "t.txt", "-order", 3,
                              "-m", 6, "-h", 8, "-epochs", 2, "-batch", 4, "-quiet", "-mpi", "param",
                              "-checkpoint", tmp_path / "ckpt", "-log", tmp_path / "log.jsonl",
                              "-lm", tmp_path / "m.nplm")
    assert status == 0, err
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2]
    assert all(r["ranks"] == 2 and 0 < r["communication_seconds"] < r["seconds"] for r in records)
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["checkpoint.nplm"]
    status, out, err = run_nplm("ppl", "-lm", tmp_path / "m.nplm", "-text", corpus / "t.txt")
    assert status == 0, err


def test_param_mode_refuses_threads_with_one_clear_line_per_rank(corpus, tmp_path):
    status, _, err = mpi_nplm(2, "train", "-text", corpus / "t.txt", "-threads", 2, "-mpi", "param",
                              "-quiet", "-lm", tmp_path / "m.nplm")
    assert status != 0 and "Traceback" not in err
    assert "-mpi param runs one thread per rank" in err
    assert not (tmp_path / "m.nplm").exists()


def test_data_parallel_mode_is_not_built_yet(corpus, tmp_path):
    status, _, err = run_nplm("train", "-text", corpus / "t.txt", "-mpi", "data", "-lm", tmp_path / "m.nplm")
    assert_one_line_error(status, err, "-mpi data: not built yet")
