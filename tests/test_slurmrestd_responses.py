"""slurmrestd's JSON responses, saved (issue 31): real /slurm/v0.0.4x/nodes and /slurm/v0.0.4x/reservations
responses of Slurm 23.11 to 25.11 (data_parser v0.0.40 to v0.0.44) for the capacity, and /slurmdb/v0.0.4x/job
responses for the job history, saved by Rackslab's Slurm-web for its tests (tests/data/slurmrestd, MIT;
tests/data/README.md). Every figure below is read off the files
by hand: node names, Gres strings, partitions, CPUs, reservation node lists and epoch times."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ops_warehouse.errors import OpsError
from ops_warehouse.etl.capacity_sources import read_events, read_inventory, read_reservations
from tests.conftest import DATA, rows

REST = DATA / "slurmrestd"
UTC = timezone.utc

# (Slurm release folder, data_parser) -> {node: (gpu_model, gpus, partition, cpus)} of the GPU nodes, and the
# number of nodes in all (from each file's "nodes" list)
NODES = {
    ("23.11", "0.0.40"): (4, {}),
    ("24.05", "0.0.41"): (100, {}),
    ("25.05", "0.0.41"): (6, {"gpu1": ("h100", 4, "gpu", 32), "gpu2": ("h100", 4, "gpu", 32)}),
    ("25.05", "0.0.42"): (6, {"gpu1": ("h100", 4, "gpu", 32), "gpu2": ("h100", 4, "gpu", 32)}),
    ("25.05", "0.0.43"): (6, {"gpu1": ("h100", 4, "gpu", 32), "gpu2": ("h100", 4, "gpu", 32)}),
    # gpu3 and gpu4: Gres=gpu:4, GPUs of no named model
    **{("25.11", v): (8, {"gpu1": ("h100", 4, "gpu", 32), "gpu2": ("h100", 4, "gpu", 32),
                          "gpu3": ("", 4, "gpu", 32), "gpu4": ("", 4, "gpu", 32)})
       for v in ("0.0.41", "0.0.42", "0.0.43", "0.0.44")},
}


@pytest.mark.parametrize("release,parser", sorted(NODES))
def test_nodes_response_is_the_inventory(release, parser):
    n_nodes, gpu_nodes = NODES[(release, parser)]
    path = REST / release / parser / "slurm-nodes.json"
    df = read_inventory(path, "hpc")
    assert df.height == n_nodes
    got = {r["node"]: (r["gpu_model"], r["gpus"], r["partition"], r["cpus"]) for r in df.to_dicts() if r["gpus"]}
    assert got == gpu_nodes
    assert set(df["cpus"]) <= {32, 64} and df["source"].unique().to_list() == [
        f"slurmrestd:slurm-nodes.json (v{parser})"]


@pytest.mark.parametrize("parser", ["0.0.41", "0.0.42"])
def test_a_node_with_two_gpu_models_is_a_row_per_model(parser):
    """Slurm 24.11's ia1 and ia2 have Gres gpu:h100:2,gpu:h200:4: loaded once as 6 H200 GPUs, then refused
    (the inventory held one model a node); now a row per model: 2 h100 and 4 h200 each (issue 49,
    tests/test_mixed_gpu_models.py loads them)."""
    df = read_inventory(REST / "24.11" / parser / "slurm-nodes.json", "hpc")
    got = sorted((r["node"], r["gpu_model"], r["gpus"]) for r in df.to_dicts() if r["gpus"])
    assert got == [("ia1", "h100", 2), ("ia1", "h200", 4), ("ia2", "h100", 2), ("ia2", "h200", 4)]


def _t(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


RESERVATIONS = {  # (release, parser): [(name, nodes, partition, accounts, users, start, end)]
    ("23.11", "0.0.40"): [("training", [f"cn{i}" for i in range(1, 5)], "normal", ["biology"],
                           ["dshaw", "sharrison"], _t(1732957200), _t(1732982400))],
    ("24.05", "0.0.41"): [("training", [f"cn{i:03d}" for i in (*range(1, 81), *range(101, 533))], "batch",
                           ["optic"], ["bparks", "bparks"], _t(1748250553), _t(1748336953))],
    ("24.11", "0.0.41"): [("training2", [f"cn{i}" for i in range(1, 5)], "normal", ["biology"], [],
                           _t(1805533200), _t(1805731200)),
                          ("training", [f"cn{i}" for i in range(1, 5)], "normal", ["acoustic"],
                           ["cpotter", "tpearson"], _t(1748249772), _t(1748336172))],
    ("25.11", "0.0.42"): [("training", [f"cn{i}" for i in range(1, 5)], "normal", ["acoustic"],
                           ["acuevas", "acuevas"], _t(1763216916), _t(1763303316))],
    ("25.11", "0.0.44"): [],
}


@pytest.mark.parametrize("release,parser", sorted(RESERVATIONS))
def test_reservations_response(release, parser):
    df = read_reservations(REST / release / parser / "slurm-reservations.json", "hpc")
    got = [(r["name"], r["nodes"], r["partition"], r["accounts"], r["users"], r["start_ts"], r["end_ts"])
           for r in df.to_dicts()]
    assert got == RESERVATIONS[(release, parser)]
    # 2024-11-30 09:00 to 16:00 UTC, 7 hours; 24.05's: 512 nodes (cn001-080 and cn101-532) for a day
    if release == "23.11":
        assert got[0][5] == datetime(2024, 11, 30, 9, tzinfo=UTC) and got[0][6] - got[0][5] == (
            datetime(2024, 11, 30, 16, tzinfo=UTC) - datetime(2024, 11, 30, 9, tzinfo=UTC))
    if release == "24.05":
        assert len(got[0][1]) == 512


def test_a_response_given_to_the_wrong_option_names_the_right_one(tmp_path):
    nodes, resv = REST / "25.11" / "0.0.44" / "slurm-nodes.json", REST / "24.11" / "0.0.41" / "slurm-reservations.json"
    cases = [(read_reservations, nodes, "slurmrestd's nodes response, which --reservations does not take: give it "
                                        "to --inventory"),
             (read_inventory, resv, "slurmrestd's reservations response, which --inventory does not take: give "
                                    "it to --reservations"),
             (read_events, nodes, "give it to --inventory"),
             (read_events, resv, "give it to --reservations")]
    for read, path, message in cases:
        with pytest.raises(OpsError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
            read(path, "hpc")
        assert "\n" not in str(e.value) and str(e.value).startswith(path.name)


def test_the_command_loads_the_responses(tmp_path):
    """`ops-report etl capacity --inventory <nodes response> --reservations <reservations response>`: the rows
    in the warehouse, with the response's data_parser in their source."""
    from tests.cli_runner import cli

    dsn = f"chdb://{tmp_path / 'wh'}"
    v = REST / "25.11"
    out = cli("--warehouse", dsn, "etl", "capacity", "--inventory", str(v / "0.0.44" / "slurm-nodes.json"),
              "--reservations", str(v / "0.0.42" / "slurm-reservations.json"), "--cluster", "hpc").stdout
    assert "node_inventory: 8 rows" in out and "reservation: 1 rows" in out, out
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    wh = open_warehouse(Config(dsn=dsn), migrate=False)
    try:
        assert rows(wh, "SELECT sum(gpus), countIf(gpu_model = 'h100'), any(source) FROM node_inventory FINAL "
                        "WHERE cluster = 'hpc'") == [(16, 2, "slurmrestd:slurm-nodes.json (v0.0.44)")]
        # each node's state at the snapshot and its partitions, as the response has them
        assert rows(wh, "SELECT node, state, partitions FROM node_inventory FINAL ORDER BY node") == [
            ("cn1", "IDLE+DRAIN", ["normal"]), ("cn2", "DOWN", ["normal"]), ("cn3", "ALLOCATED", ["normal"]),
            ("cn4", "MIXED", ["normal"]), *[(f"gpu{i}", "IDLE", ["gpu"]) for i in range(1, 5)]]
        assert rows(wh, "SELECT name, length(nodes), start_ts FROM reservation FINAL") == [
            ("training", 4, datetime(2025, 11, 15, 14, 28, 36))]  # the engine hands DateTime back naive, in UTC
    finally:
        close_embedded()


# (release, parser) -> the one completed job of slurmdb-job-completed.json: id, user, account, partition,
# node, submit, start, end (epoch s), CPUs (its allocated cpu TRES; the cluster accounts no gres/gpu)
JOBS = {
    ("24.05", "0.0.41"): ("649718", "tpearson", "acoustic", "batch", "cn001", 1747754468, 1747754469, 1747754470, 1),
    ("24.11", "0.0.41"): ("5965", "bparks", "optic", "normal", "cn1", 1747751518, 1747751520, 1747751522, 1),
    ("24.11", "0.0.42"): ("6362", "jbeck", "biology", "standard", "cn1", 1762788774, 1762788776, 1762788837, 32),
    ("25.05", "0.0.43"): ("4742", "progers", "biology", "normal", "cn3", 1762789014, 1762789017, 1762789077, 16),
    ("25.11", "0.0.44"): ("5749", "vhartman", "biology", "normal", "cn1", 1762942474, 1762942475, 1762942505, 4),
}


@pytest.mark.parametrize("release,parser", sorted(JOBS))
def test_slurmdb_job_response_loads_as_sacct_json(release, parser, wh):
    """`ops-report etl sacct <slurmdb job response>`: slurmdbd's /slurmdb/v0.0.4x/job answer is sacct --json's
    document, read by the same loader; the run as the file has it, and its batch step."""
    from ops_warehouse.etl.sacct_load import load_sacct

    job, user, account, partition, node, submit, start, end, cpus = JOBS[(release, parser)]
    r = load_sacct(wh, REST / release / parser / "slurmdb-job-completed.json")
    assert (r.jobs_loaded, r.steps_loaded, r.quarantined) == (1, 1, 0)
    assert rows(wh, "SELECT job_id, user, account, partition, nodes, state, toUnixTimestamp(submit_ts), "
                    "toUnixTimestamp(start_ts), toUnixTimestamp(end_ts), elapsed_s, ncpus, gpus FROM fct_job_run") == [
        (job, user, account, partition, [node], "COMPLETED", submit, start, end, end - start, cpus, 0)]


class _Slurmrestd:
    """An HTTP server answering as slurmrestd does for the paths the loader asks, with the real responses
    above (no slurmrestd that speaks data_parser v0.0.40 or later can run here: Debian's is Slurm 22.05,
    v0.0.38): 200 for /slurm/v0.0.43/{nodes,reservations} with the right X-SLURM-USER-TOKEN, 401 with
    slurmrestd's error document for a wrong one, 404 for the versions it lacks. It records every request."""

    def __init__(self, token: str):
        import http.server
        import threading

        outer = self
        self.requests: list[tuple[str, str]] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the stdlib's name)
                outer.requests.append((self.path, self.headers.get("X-SLURM-USER-TOKEN", "")))
                files = {"/slurm/v0.0.43/nodes": REST / "25.05" / "0.0.43" / "slurm-nodes.json",
                         "/slurm/v0.0.43/reservations": REST / "24.11" / "0.0.41" / "slurm-reservations.json",
                         "/slurmdb/v0.0.43/jobs": REST / "25.05" / "0.0.43" / "slurmdb-job-completed.json"}
                if self.path.split("?")[0] not in files:
                    self.send_response(404)
                    self.end_headers()
                    return
                if self.headers.get("X-SLURM-USER-TOKEN") != token:
                    body = b'{"errors": [{"description": "Authentication failure", "error_number": 1007}]}'
                    self.send_response(401)
                else:
                    body = files[self.path.split("?")[0]].read_bytes()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


def test_etl_capacity_from_slurmrestd_with_the_token_from_the_environment(tmp_path):
    """`ops-report etl capacity --slurmrestd URL` with SLURM_JWT: the newest version the daemon serves (v0.0.44
    and v0.0.43 tried in that order, v0.0.43 answers), the same rows as the saved responses (Slurm 25.05's 6
    nodes with 8 H100 GPUs, 24.11's 2 reservations); the token goes in the header and nowhere else: not in
    the output, not in the run log. Without SLURM_JWT, or with a wrong one, one line and nothing loaded."""
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse
    from tests.cli_runner import cli

    jwt = "eyJhbGciOiJIUzI1NiJ9.test-token-for-the-stand-in.sig"
    srv = _Slurmrestd(jwt)
    dsn = f"chdb://{tmp_path / 'wh'}"
    try:
        p = cli("--warehouse", dsn, "etl", "capacity", "--slurmrestd", srv.url, "--cluster", "hpc",
                env={"SLURM_JWT": jwt})
        assert "node_inventory: 6 rows" in p.stdout and "reservation: 2 rows" in p.stdout, p.stdout
        assert [path for path, _ in srv.requests] == ["/slurm/v0.0.44/nodes", "/slurm/v0.0.43/nodes",
                                                      "/slurm/v0.0.44/reservations", "/slurm/v0.0.43/reservations"]
        assert {t for _, t in srv.requests} == {jwt}
        for env, message in (({"SLURM_JWT": ""}, "slurmrestd needs a token: set SLURM_JWT"),
                             ({"SLURM_JWT": "wrong"}, "HTTP 401: Authentication failure (check SLURM_JWT)")):
            bad = cli("--warehouse", dsn, "etl", "capacity", "--slurmrestd", srv.url, "--cluster", "hpc", env=env,
                      check=False)
            assert bad.returncode == 2 and message in bad.stderr and bad.stderr.count("\n") == 1, bad.stderr
        assert jwt not in p.stdout + p.stderr
    finally:
        srv.close()
    wh = open_warehouse(Config(dsn=dsn), migrate=False)
    try:
        assert rows(wh, "SELECT count(), sum(gpus), any(source) FROM node_inventory FINAL") == [
            (6, 8, "slurmrestd:slurmrestd-nodes.json (v0.0.43)")]
        assert sorted(r[0] for r in rows(wh, "SELECT name FROM reservation FINAL")) == ["training", "training2"]
        log = rows(wh, "SELECT toString(tuple(*)) FROM etl_run_log")
        assert log and not [x for (x,) in log if jwt in x], log
    finally:
        close_embedded()


def test_etl_sacct_from_slurmrestd_for_the_days_asked(tmp_path):
    """`ops-report etl sacct --slurmrestd URL --from D --to D`: /slurmdb/v0.0.44/jobs, then v0.0.43 (which this
    daemon serves), with the days as epoch seconds (2025-11-10 00:00 UTC = 1762732800, to 1762819200 the day
    after) and SLURM_JWT in the header; the answer (Slurm 25.05's completed job 4742, progers, biology, cn3,
    submitted 1762789014) loads as sacct --json does, and the token is in no output. Without --from/--to, one
    line naming them."""
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse
    from tests.cli_runner import cli

    jwt = "eyJhbGciOiJIUzI1NiJ9.jobs-token-for-the-stand-in.sig"
    srv = _Slurmrestd(jwt)
    dsn = f"chdb://{tmp_path / 'wh'}"
    try:
        p = cli("--warehouse", dsn, "etl", "sacct", "--slurmrestd", srv.url, "--from", "2025-11-10",
                "--to", "2025-11-10", env={"SLURM_JWT": jwt})
        assert "slurmrestd 2025-11-10..2025-11-10: read " in p.stdout and "(1 job runs, 1 steps)" in p.stdout, p.stdout
        query = "start_time=1762732800&end_time=1762819200"
        assert [path for path, _ in srv.requests] == [f"/slurmdb/v0.0.44/jobs?{query}", f"/slurmdb/v0.0.43/jobs?{query}"]
        assert {t for _, t in srv.requests} == {jwt} and jwt not in p.stdout + p.stderr
        bad = cli("--warehouse", dsn, "etl", "sacct", "--slurmrestd", srv.url, env={"SLURM_JWT": jwt}, check=False)
        assert bad.returncode == 2 and "--slurmrestd needs --from and --to" in bad.stderr, bad.stderr
    finally:
        srv.close()
    wh = open_warehouse(Config(dsn=dsn), migrate=False)
    try:
        assert rows(wh, "SELECT job_id, user, account, nodes, toUnixTimestamp(submit_ts) FROM fct_job_run") == [
            ("4742", "progers", "biology", ["cn3"], 1762789014)]
    finally:
        close_embedded()


def test_nightly_asks_slurmrestd_for_the_job_records(tmp_path):
    """`[[nightly.slurm]] source = "slurmrestd"`: the nightly run's Slurm window from /slurmdb/v0.0.4x/jobs, with
    SLURM_JWT; the same job as above, and the run log says the source succeeded. Without url, one line."""
    from tests.cli_runner import cli

    jwt = "eyJhbGciOiJIUzI1NiJ9.nightly-token.sig"
    srv = _Slurmrestd(jwt)
    cfg = tmp_path / "ops.toml"
    cfg.write_text(f'[warehouse]\ndsn = "chdb://{tmp_path / "wh"}"\n[[nightly.slurm]]\ncluster = "hpc"\n'
                   f'source = "slurmrestd"\nurl = "{srv.url}"\n', encoding="utf-8")
    env = {"OPS_CONFIG": str(cfg), "OPS_WAREHOUSE": "", "SLURM_JWT": jwt}
    try:
        p = cli("etl", "nightly", "--from", "2025-11-10", "--to", "2025-11-10", env=env)
        assert "loaded" in p.stdout and jwt not in p.stdout + p.stderr, p.stdout
        assert [path.split("?")[0] for path, _ in srv.requests] == ["/slurmdb/v0.0.44/jobs", "/slurmdb/v0.0.43/jobs"]
        from ops_warehouse.config import Config
        from ops_warehouse.warehouse import close_embedded, open_warehouse

        wh = open_warehouse(Config(dsn=f"chdb://{tmp_path / 'wh'}"), migrate=False)
        try:
            assert rows(wh, "SELECT job_id, user FROM fct_job_run") == [("4742", "progers")]
        finally:
            close_embedded()
        cfg.write_text(cfg.read_text(encoding="utf-8").replace(f'url = "{srv.url}"\n', ""), encoding="utf-8")
        bad = cli("etl", "nightly", env=env, check=False)
        assert bad.returncode == 2 and "source = slurmrestd needs url" in bad.stderr, bad.stderr
    finally:
        srv.close()


def test_capacity_forms_and_sacct_output_given_to_each_others_loads_name_the_right_command(wh):
    """Slurm's capacity forms given to `etl sacct`, and sacct output given to `etl capacity`: one line naming
    where the file goes (before: "no sacct header line", a whole-file quarantine of the JSON and exit 0, "not
    an inventory CSV", "a record without ReservationName=")."""
    from ops_warehouse.etl.sacct_load import load_sacct

    sacct = DATA / "sacct" / "slurm-22.05-live" / "sacct.psv"  # a real sacct --parsable2 with its header
    for path, option in ((REST / "25.11" / "0.0.44" / "slurm-nodes.json", "--inventory"),
                         (REST / "24.11" / "0.0.41" / "slurm-reservations.json", "--reservations")):
        with pytest.raises(OpsError, match=f"not sacct's: give it to `ops-report etl capacity {option}`"):
            load_sacct(wh, path)
    for read in (read_inventory, read_events, read_reservations):
        with pytest.raises(OpsError, match="sacct.psv: sacct output, which --.* does not take: give it to "
                                           "`ops-report etl sacct`"):
            read(sacct, "hpc")
    assert rows(wh, "SELECT count() FROM slurm_job_run") == [(0,)]
