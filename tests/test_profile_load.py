"""profile_load, the PGO training workload, against Debian's own mariadb-server.

Builds profile_load with cmake + ninja, starts private servers on unix sockets in temp
dirs (never the system server, never TCP), and checks what the workload claims.
"""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from mariadb_private import BASEDIR, PrivateServer, find_mariadbd, missing_prerequisites, short_tempdir

from pgo.base import lines
from pgo.base.runner import PhaseLog

SOURCE = Path(__file__).resolve().parent.parent / "profile_load"
ENGINES = ["innodb", "myisam", "aria", "memory"]
BINLOGS = ["off", "statement", "mixed", "row"]
APIS = ["text", "prepared", "cursor", "nonblocking"]
ROW_EVENTS = ("Write_rows", "Update_rows", "Delete_rows")
# Debian's mariadb-plugin-rocksdb; MyRocks refuses statement-based logging, so rocksdb has three formats.
ROCKSDB_LIBRARY = Path(BASEDIR) / "lib" / "mysql" / "plugin" / "ha_rocksdb.so"
ROCKSDB_BINLOGS = ["off", "mixed", "row"]
PLUGIN_DIRS = "{lib/plugin,lib/mysql/plugin,lib64/mysql/plugin}"


def require_prerequisites():
    missing = missing_prerequisites()
    if missing:
        pytest.fail("missing prerequisites (install mariadb-server, mariadb-client, "
                    "libmariadb-dev, cmake, ninja-build): " + ", ".join(missing))


def build(build_dir, *cmake_args):
    subprocess.run(["cmake", "-S", str(SOURCE), "-B", str(build_dir), "-G", "Ninja",
                    "-DCMAKE_C_FLAGS=-Werror", *cmake_args],
                   check=True, capture_output=True, text=True)
    # -j1: the tests share the machine with other builds.
    done = subprocess.run(["ninja", "-j1", "-C", str(build_dir)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return build_dir / "profile_load", build_dir / "profile_load_static"


@pytest.fixture(scope="session")
def binaries(tmp_path_factory):
    require_prerequisites()
    return build(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="session")
def profile_load(binaries):
    return binaries[0]


def require_rocksdb():
    require_prerequisites()
    if not ROCKSDB_LIBRARY.exists():
        pytest.fail(f"missing prerequisite: {ROCKSDB_LIBRARY} (install mariadb-plugin-rocksdb)")


@pytest.fixture(scope="session")
def server():
    require_prerequisites()
    s = PrivateServer().start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def rocksdb_server():
    """A server with MyRocks, loaded as Debian's rocksdb.cnf loads it (the `server` has none)."""
    require_rocksdb()
    s = PrivateServer(options=["--plugin-load-add=ha_rocksdb"]).start()
    yield s
    s.stop()


def run(binary, *args, timeout=150, matrix_only=True, **kwargs):
    """Run profile_load; a run against a server trains the matrix only unless it says otherwise:
    the steady state (50,000 transactions by default) has tests of its own."""
    args = list(args)
    if matrix_only and ("--socket" in args or "--basedir" in args) and "--steady-transactions" not in args:
        args += ["--steady-transactions", 0]
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def run_ok(binary, *args, **kwargs):
    done = run(binary, *args, **kwargs)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def new_binlog(server):
    """Starts a fresh binary log file, so one run's events can be read alone."""
    server.query("FLUSH BINARY LOGS")
    return server.rows("SHOW MASTER STATUS")[0][0]


def binlog_events(server, log_file):
    return [(row[2], row[5]) for row in server.rows(f"SHOW BINLOG EVENTS IN '{log_file}'")]


def test_training_passes_become_the_train_steps_progress(profile_load, server, tmp_path, capsys):
    """The train phase echoes profile_load's lines; the Buildbot step shows `pass N of M` from them."""
    log = PhaseLog(tmp_path / "train.log", "train")
    log.run([profile_load, "--socket", server.socket, "--engines", "memory", "--binlog", "off",
             "--apis", "text,prepared", "--rows", 5, "--steady-transactions", 0], echo=True)
    log.close()
    printed = capsys.readouterr().out.splitlines()
    assert [lines.progress(line) for line in printed if lines.progress(line)] == ["pass 1 of 2", "pass 2 of 2"]


def test_every_matrix_cell_runs_and_is_counted(profile_load, server, tmp_path):
    report = tmp_path / "report.json"
    done = run_ok(profile_load, "--socket", server.socket, "--rows", 5, "--report", report)

    progress = re.findall(r"^pass (\d+) of (\d+): engine=(\w+) binlog=(\w+) api=(\w+)$",
                          done.stdout, re.M)
    assert [int(n) for n, *_ in progress] == list(range(1, 65))
    assert {total for _, total, *_ in progress} == {"64"}

    data = json.loads(report.read_text())
    version = run_ok(profile_load, "--version").stdout
    assert data["workload_version"] in version
    # This server has no MyRocks: its cells are left out, and named.
    assert "not training rocksdb: the server has no ROCKSDB engine (information_schema.ENGINES)" in done.stdout
    assert {(c["engine"], c["binlog"], c["api"]) for c in data["skipped"]} == {
        ("rocksdb", b, a) for b in BINLOGS for a in APIS}
    assert data["seed"] == 1
    cells = {(c["engine"], c["binlog"], c["api"]): c for c in data["cells"]}
    assert len(data["cells"]) == 64
    assert set(cells) == {(e, b, a) for e in ENGINES for b in BINLOGS for a in APIS}
    assert all(c["statements"] > 30 for c in cells.values())
    assert data["total_statements"] == sum(c["statements"] for c in cells.values())
    assert data["seconds"] > 0
    # The four APIs of an (engine, binlog) pair send one statement stream.
    for e in ENGINES:
        for b in BINLOGS:
            assert len({(cells[e, b, a]["statements"], cells[e, b, a]["digest"])
                        for a in APIS}) == 1
    # The summary table on stdout agrees with the report.
    total = re.search(r"^total\s+(\d+)$", done.stdout, re.M)
    assert total and int(total.group(1)) == data["total_statements"]


def test_steady_state_runs_its_transactions_on_two_long_lived_connections(profile_load, server, tmp_path):
    def steady(seed):
        report = tmp_path / f"steady-{seed}-{time.monotonic_ns()}.json"
        executed = server.rows("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'")[0][1]
        done = run_ok(profile_load, "--socket", server.socket, "--engines", "innodb", "--binlog", "off",
                      "--apis", "text", "--rows", 5, "--steady-transactions", 400, "--steady-rows", 100,
                      "--seed", seed, "--report", report)
        data = json.loads(report.read_text())
        prepared = int(server.rows("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'")[0][1]) - int(executed)
        return done, data, prepared

    done, data, prepared = steady(1)
    assert data["steady"]["transactions"] == 400 and data["steady"]["rows"] == 100
    # About 5.5 statements a transaction, plus the load; half the transactions on prepared statements.
    assert 400 * 4 < data["steady"]["statements"] < 400 * 8
    assert prepared > 400
    assert data["total_statements"] == data["steady"]["statements"] + sum(c["statements"] for c in data["cells"])
    assert "steady state: 400 of 400 transactions" in done.stdout
    assert re.search(rf"^steady state\s+{data['steady']['statements']}$", done.stdout, re.M)
    # Deterministic, and the tables are gone afterwards.
    assert steady(1)[1]["steady"]["digest"] == data["steady"]["digest"] != steady(2)[1]["steady"]["digest"]
    assert server.rows("SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE 'steady%'")[0][0] == "0"


def test_steady_state_tables_have_the_servers_default_collation_and_the_one_older_tables_have(
        profile_load, server, tmp_path):
    def collations():
        report = tmp_path / f"collations-{time.monotonic_ns()}.json"
        run_ok(profile_load, "--socket", server.socket, "--engines", "innodb", "--binlog", "off", "--apis", "text",
               "--rows", 5, "--steady-transactions", 100, "--steady-rows", 100, "--report", report)
        return json.loads(report.read_text())["steady"]["collations"]

    # 10.x: the server's default is latin1_swedish_ci (sysbench's tables and most clients' have it).
    assert collations() == ["latin1_swedish_ci", "utf8mb4_general_ci"]
    # From 11.6 it is utf8mb4_uca1400_ai_ci (UCA 14.0.0), which 10.11 lacks: another utf8mb4
    # collation stands for it. The second table keeps what tables made before 11.5 have.
    server.query("SET GLOBAL character_set_server = utf8mb4, collation_server = utf8mb4_unicode_520_ci")
    try:
        assert collations() == ["utf8mb4_unicode_520_ci", "utf8mb4_general_ci"]
    finally:
        server.query("SET GLOBAL character_set_server = DEFAULT, collation_server = DEFAULT")
    assert server.rows("SHOW DATABASES LIKE 'profile_load'") == []


@pytest.mark.parametrize("binlog", BINLOGS)
def test_binlog_format_really_changes(profile_load, server, binlog):
    log_file = new_binlog(server)
    run_ok(profile_load, "--socket", server.socket, "--engines", "innodb", "--apis", "prepared",
           "--binlog", binlog, "--rows", 20)
    events = binlog_events(server, log_file)
    kinds = [kind for kind, _ in events]
    row_events = {k for k in kinds if k.startswith(ROW_EVENTS)}
    dml_queries = [info for kind, info in events if kind == "Query" and
                   re.search(r"\b(INSERT INTO|UPDATE|DELETE FROM) (customer|orders)\b", info)]
    workload_ddl = [info for kind, info in events if "CREATE TABLE customer" in info]

    if binlog == "off":
        assert not row_events and not dml_queries and not workload_ddl, events
    elif binlog == "statement":
        assert not row_events, row_events
        assert len(dml_queries) > 20 and workload_ddl
    elif binlog == "row":
        assert {k.split("_v")[0] for k in row_events} == set(ROW_EVENTS)
        assert not dml_queries, dml_queries[:5]
        assert kinds.count("Write_rows_v1") > 10
    else:  # mixed: statements, except the unsafe ones which become row events
        assert len(dml_queries) > 20
        assert row_events
        assert kinds.count("Write_rows_v1") + kinds.count("Update_rows_v1") < 5


def test_same_seed_same_statements(profile_load, server, tmp_path):
    def statements_seen_by_server(seed):
        report = tmp_path / f"seed{seed}-{time.monotonic_ns()}.json"
        log_file = new_binlog(server)
        run_ok(profile_load, "--socket", server.socket, "--engines", "myisam,memory",
               "--binlog", "statement", "--apis", "text,cursor", "--rows", 40, "--seed", seed,
               "--report", report)
        queries = [info for kind, info in binlog_events(server, log_file) if kind == "Query"]
        cells = [(c["engine"], c["api"], c["statements"], c["digest"])
                 for c in json.loads(report.read_text())["cells"]]
        return queries, cells

    first_queries, first_cells = statements_seen_by_server(7)
    again_queries, again_cells = statements_seen_by_server(7)
    other_queries, other_cells = statements_seen_by_server(8)
    assert len(first_queries) > 100
    assert again_queries == first_queries
    assert again_cells == first_cells
    assert other_queries != first_queries
    assert [c[3] for c in other_cells] != [c[3] for c in first_cells]
    # Multi-byte data arrives intact: the binlog holds what the generator wrote.
    assert any("Østergård" in q or "東京" in q or "🐬" in q for q in first_queries)


def test_lifecycle_from_basedir_removes_its_temp_dir(profile_load, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = run_ok(profile_load, "--basedir", BASEDIR, "--engines", "innodb,aria", "--binlog",
                  "row", "--apis", "text,nonblocking", "--rows", 10,
                  env={**os.environ, "TMPDIR": str(tmp)})
    assert "shutting down mariadbd" in done.stdout
    assert "pass 4 of 4" in done.stdout
    assert list(tmp.iterdir()) == []


def test_lifecycle_keeps_workdir_with_clean_logs(profile_load):
    require_prerequisites()
    workdir = Path(short_tempdir())
    try:
        run_ok(profile_load, "--basedir", BASEDIR, "--workdir", workdir, "--engines", "myisam",
               "--binlog", "row", "--apis", "cursor", "--rows", 10)
        error_log = (workdir / "mariadbd.err").read_text(errors="replace")
        assert re.search(r"mariadbd: Shutdown complete", error_log), error_log[-2000:]
        assert (workdir / "data" / "mysql" / "global_priv.frm").exists()
        binlog = sorted((workdir / "data").glob("mariadb-bin.0*"))
        assert binlog, "the server ran without a binary log"
        decoded = subprocess.run(["mariadb-binlog", "--no-defaults", *map(str, binlog)],
                                 capture_output=True, text=True, check=True).stdout
        assert "Write_rows" in decoded
        # The datadir is not reusable for a second run: the install must be fresh.
        again = run(profile_load, "--basedir", BASEDIR, "--workdir", workdir, "--rows", 1)
        assert again.returncode == 3 and "already exists" in again.stderr
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.parametrize("args, message", [
    (["--socket", "x", "--engines", "innodb,myrocks"], "unknown value 'myrocks' for --engines"),
    (["--socket", "x", "--binlog", "rows"], "unknown value 'rows' for --binlog"),
    (["--socket", "x", "--apis", ""], "unknown value '' for --apis"),
    (["--socket", "x", "--rows", "0"], "--rows needs a whole number"),
    (["--socket", "x", "--passes", "two"], "--passes needs a whole number"),
    (["--socket", "x", "--seed", "-1"], "--seed needs a non-negative whole number"),
    (["--socket", "x", "--frobnicate"], "unknown option '--frobnicate'"),
    (["--socket", "x", "--rows"], "option '--rows' needs a value"),
    (["--socket", "x", "--steady-transactions", "-1"], "--steady-transactions needs a whole number from 0"),
    (["--socket", "x", "--steady-rows", "10"], "--steady-rows needs a whole number from 100"),
    (["--socket", "x", "--setup-counters", "d"], "--setup-counters goes with --basedir only"),
    ([], "give exactly one of --basedir DIR and --socket PATH"),
    (["--socket", "x", "--basedir", "/"], "give exactly one of --basedir DIR and --socket PATH"),
    (["--basedir", "/", "--password", "p"], "--user and --password go with --socket only"),
])
def test_bad_option_is_a_usage_error(profile_load, args, message):
    done = run(profile_load, *args, matrix_only=False)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Try 'profile_load --help'" in done.stderr
    assert done.stdout == ""


def test_help_and_version(profile_load):
    assert "--engines LIST" in run_ok(profile_load, "--help").stdout
    assert re.match(r"profile_load workload version \S+\n$",
                    run_ok(profile_load, "--version").stdout)


def test_unreachable_socket(profile_load, tmp_path):
    done = run(profile_load, "--socket", tmp_path / "nobody-listens.sock", "--rows", 1)
    assert done.returncode == 3
    assert "cannot connect to the server at socket" in done.stderr
    assert "nobody-listens.sock" in done.stderr


def test_server_killed_mid_run_is_reported(profile_load):
    require_prerequisites()
    server = PrivateServer().start()
    workload = None
    try:
        workload = subprocess.Popen(
            [str(profile_load), "--socket", server.socket, "--rows", "300", "--passes", "5"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in workload.stdout:
            if line.startswith("pass 3 of"):
                break
        time.sleep(0.3)  # inside the pass
        server.kill()
        stdout, stderr = workload.communicate(timeout=60)
        assert workload.returncode == 3, stderr
        assert "server died or went away" in stderr
        assert "FAILED" in stdout
    finally:
        if workload:
            workload.kill()
        server.stop()


def test_server_killed_in_lifecycle_mode_shows_its_log(profile_load):
    require_prerequisites()
    workdir = Path(short_tempdir())
    workload = None
    try:
        workload = subprocess.Popen(
            [str(profile_load), "--basedir", BASEDIR, "--workdir", str(workdir), "--rows",
             "300", "--passes", "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in workload.stdout:
            if line.startswith("pass 2 of"):
                break
        pid = int((workdir / "mariadbd.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        stdout, stderr = workload.communicate(timeout=60)
        assert workload.returncode == 3, stderr
        assert "server died or went away" in stderr
        assert "mariadbd was killed by signal 9" in stderr
        assert "---- last 30 lines of" in stderr and "mariadbd.err" in stderr
        assert f"work directory kept: {workdir}" in stderr
    finally:
        if workload:
            workload.kill()
            workload.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def test_rocksdb_cells_train_where_the_server_has_it(profile_load, rocksdb_server, tmp_path, capsys):
    """The default selection trains MyRocks on a server that has it: counted, reported, shown as progress."""
    def rocksdb_rows_inserted():
        return int(rocksdb_server.rows("SHOW GLOBAL STATUS LIKE 'Rocksdb_rows_inserted'")[0][1])

    report = tmp_path / "report.json"
    inserted = rocksdb_rows_inserted()
    log = PhaseLog(tmp_path / "train.log", "train")
    log.run([profile_load, "--socket", rocksdb_server.socket, "--apis", "text,prepared", "--rows", 10,
             "--steady-transactions", 0, "--report", report], echo=True)
    log.close()
    printed = capsys.readouterr().out.splitlines()

    data = json.loads(report.read_text())
    cells = {(c["engine"], c["binlog"], c["api"]): c for c in data["cells"]}
    rocksdb = {(e, b, a) for e, b, a in cells if e == "rocksdb"}
    assert rocksdb == {("rocksdb", b, a) for b in ROCKSDB_BINLOGS for a in ("text", "prepared")}
    assert all(cells[cell]["statements"] > 30 for cell in rocksdb)
    assert data["total_statements"] == sum(c["statements"] for c in cells.values())
    for b in ROCKSDB_BINLOGS:
        assert cells["rocksdb", b, "text"]["digest"] == cells["rocksdb", b, "prepared"]["digest"]
    # The statement format's cells are skipped, named on the console and in the report.
    assert [(c["engine"], c["binlog"], c["api"]) for c in data["skipped"]] == [
        ("rocksdb", "statement", "text"), ("rocksdb", "statement", "prepared")]
    assert all("MyRocks refuses statement-based binary logging" in c["reason"] for c in data["skipped"])
    assert "[train] skipping engine=rocksdb binlog=statement api=text: MyRocks refuses" in "\n".join(printed)
    # The train phase's progress counts the passes that run, rocksdb's as the others'.
    total = 2 * (len(ENGINES) * len(BINLOGS) + len(ROCKSDB_BINLOGS))
    assert [lines.progress(line) for line in printed if lines.progress(line)] == [
        f"pass {n} of {total}" for n in range(1, total + 1)]
    assert "[train] pass 38 of 38: engine=rocksdb binlog=row api=prepared" in printed
    # The rows went into RocksDB: the customers and the orders of six passes, at least.
    assert rocksdb_rows_inserted() - inserted >= 6 * 2 * 10


def test_rocksdb_cells_raise_the_sessions_row_lock_limit(profile_load, rocksdb_server):
    """MyRocks locks every row an updating statement reads: the pass's DELETE of cheap orders reads
    them all (about 200 here), past a limit of 100, unless the cell raises the session's limit."""
    rocksdb_server.query("SET GLOBAL rocksdb_max_row_locks = 100")
    try:
        run_ok(profile_load, "--socket", rocksdb_server.socket, "--engines", "rocksdb", "--binlog", "row",
               "--apis", "nonblocking", "--rows", 100)
    finally:
        rocksdb_server.query("SET GLOBAL rocksdb_max_row_locks = DEFAULT")


def test_rocksdb_named_on_a_server_without_it_is_refused_in_one_line(profile_load, server):
    done = run(profile_load, "--socket", server.socket, "--engines", "innodb,rocksdb", "--rows", 5)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "profile_load: cannot train rocksdb (--engines): the server has no ROCKSDB engine"
        " (information_schema.ENGINES)"]
    assert done.stdout == ""


def test_lifecycle_loads_rocksdb_from_the_basedirs_plugin_directory(profile_load):
    """As the pipeline trains a build with MyRocks: the private server loads the basedir's ha_rocksdb.so,
    and its tables' changes go into the binary log as rows in the mixed format."""
    require_rocksdb()
    workdir = Path(short_tempdir())
    try:
        done = run_ok(profile_load, "--basedir", BASEDIR, "--workdir", workdir, "--engines", "rocksdb",
                      "--binlog", "mixed", "--apis", "cursor", "--rows", 10)
        assert f"training rocksdb: loading ha_rocksdb.so from {ROCKSDB_LIBRARY.parent}" in done.stdout
        assert re.findall(r"^pass .*$", done.stdout, re.M) == ["pass 1 of 1: engine=rocksdb binlog=mixed api=cursor"]
        assert (workdir / "data" / "#rocksdb").is_dir()
        binlog = sorted((workdir / "data").glob("mariadb-bin.0*"))
        decoded = subprocess.run(["mariadb-binlog", "--no-defaults", *map(str, binlog)],
                                 capture_output=True, text=True, check=True).stdout
        assert "Write_rows" in decoded and "CREATE TABLE customer" in decoded
        assert not re.search(r"^(INSERT INTO|UPDATE|DELETE FROM) (customer|orders)\b", decoded, re.M)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def basedir_without_plugins(root):
    """Debian's server as a staged tree of a build without plugins: its programs and share/, no plugin directory."""
    # mariadb-install-db runs my_print_defaults and resolveip from the basedir.
    for program in (Path(find_mariadbd()), *(Path(BASEDIR) / "bin" / name for name in
                                             ("mariadb-install-db", "my_print_defaults", "resolveip"))):
        folder = root / program.parent.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / program.name).symlink_to(program)
    (root / "share").symlink_to(Path(BASEDIR) / "share")
    return root


# What workload version 5 sent in these cells (`--binlog row --apis text --rows 10`): version 6 changed
# none of them, so a build without MyRocks trains as before.
VERSION_5_CELLS = {"innodb": (57, "308e820a8d5df61b"), "myisam": (56, "5c990226a8275d53"),
                   "aria": (56, "e76de5794cb41ce9"), "memory": (57, "4d9a4a813865a824")}


def test_lifecycle_without_the_rocksdb_library_runs_no_rocksdb_pass(profile_load, tmp_path):
    """A build without MyRocks (`minimal`): its training runs what it ran before; asked for rocksdb, it refuses."""
    require_prerequisites()
    basedir = basedir_without_plugins(tmp_path / "base").resolve()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    report = tmp_path / "report.json"
    done = run_ok(profile_load, "--basedir", basedir, "--binlog", "row", "--apis", "text", "--rows", 10,
                  "--report", report, env=env)
    assert re.findall(r"^pass \d+ of (\d+): engine=(\w+)", done.stdout, re.M) == [("4", e) for e in ENGINES]
    assert f"not training rocksdb: no ha_rocksdb.so in {basedir}/{PLUGIN_DIRS}" in done.stdout
    data = json.loads(report.read_text())
    assert {c["engine"]: (c["statements"], c["digest"]) for c in data["cells"]} == VERSION_5_CELLS
    assert data["skipped"] == [{"engine": "rocksdb", "binlog": "row", "api": "text",
                                "reason": "no ha_rocksdb.so in the server's plugin directory"}]

    named = run(profile_load, "--basedir", basedir, "--engines", "memory,rocksdb", env=env)
    assert named.returncode == 2
    assert named.stderr.splitlines() == [
        f"profile_load: cannot train rocksdb (--engines): no ha_rocksdb.so in {basedir}/{PLUGIN_DIRS}"]
    assert named.stdout == ""
    assert list(tmp.iterdir()) == []  # refused before anything was installed


def test_lifecycle_stops_when_the_rocksdb_library_does_not_load(profile_load, tmp_path):
    """--rocksdb=FORCE: a library that is there but does not load is a failed start, not an untrained engine."""
    require_prerequisites()
    basedir = basedir_without_plugins(tmp_path / "base")
    (basedir / "lib" / "plugin").mkdir(parents=True)
    (basedir / "lib" / "plugin" / "ha_rocksdb.so").write_bytes(b"")
    workdir = Path(short_tempdir())
    try:
        done = run(profile_load, "--basedir", basedir, "--workdir", workdir, "--rows", 1, timeout=60)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert done.returncode == 3, done.stderr
    assert "mariadbd did not start" in done.stderr
    assert "Can't open shared library" in done.stderr and "ha_rocksdb.so" in done.stderr


def fake_basedir(root, install_db, mariadbd):
    """A basedir whose programs are shell scripts: lifecycle failures on demand."""
    for sub, name, body in (("scripts", "mariadb-install-db", install_db),
                            ("sbin", "mariadbd", mariadbd)):
        (root / sub).mkdir(parents=True, exist_ok=True)
        program = root / sub / name
        program.write_text("#!/bin/sh\n" + body + "\n")
        program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return root


def make_system_tables():
    return ('for a in "$@"; do case $a in --datadir=*) d=${a#--datadir=};; esac; done\n'
            'mkdir -p "$d/mysql" && touch "$d/mysql/global_priv.frm"')


@pytest.mark.parametrize("install_db, mariadbd, message", [
    ("echo 'install exploded' >&2; exit 1", "exit 0", "mariadb-install-db failed"),
    ("exit 0", "exit 0", "made no system tables"),
    (make_system_tables(), "echo 'cannot start: no engine' >&2; exit 7",
     "mariadbd exited with status 7"),
])
def test_lifecycle_failures_exit_3(profile_load, tmp_path, install_db, mariadbd, message):
    basedir = fake_basedir(tmp_path / "base", install_db, mariadbd)
    workdir = Path(short_tempdir())
    try:
        done = run(profile_load, "--basedir", basedir, "--workdir", workdir, timeout=60)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert done.returncode == 3, done.stderr
    assert message in done.stderr
    assert "---- last 30 lines of" in done.stderr
    assert "install exploded" in done.stderr or "exploded" not in install_db
    assert "no engine" in done.stderr or "no engine" not in mariadbd


def test_basedir_without_server_is_a_usage_error(profile_load, tmp_path):
    done = run(profile_load, "--basedir", tmp_path)
    assert done.returncode == 2
    assert "no mariadbd in" in done.stderr


def test_dynamic_binary_uses_the_chosen_client_library(tmp_path, server):
    """A fresh build must train its own libmariadb, not the system's: the RPATH decides."""
    require_prerequisites()
    system_libdir = subprocess.run(["mariadb_config", "--variable=pkglibdir"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    libdir = tmp_path / "client" / "lib"
    libdir.mkdir(parents=True)
    for name in ("libmariadb.so.3", "libmariadbclient.a"):
        shutil.copy(Path(system_libdir) / name, libdir / name)
    (libdir / "libmariadb.so").symlink_to("libmariadb.so.3")
    config = tmp_path / "client" / "mariadb_config"
    real = shutil.which("mariadb_config")
    config.write_text(
        "#!/bin/sh\n"
        f'case "$1" in --libs) echo "-L{libdir} -lmariadb";; *) exec {real} "$@";; esac\n')
    config.chmod(0o755)

    # The pipeline links with -fprofile-generate when the client library is instrumented;
    # this library is not, so this only shows that the flag builds and runs.
    dynamic, static = build(tmp_path / "build", f"-DMARIADB_CONFIG={config}",
                            "-DCMAKE_EXE_LINKER_FLAGS=-fprofile-generate")

    dynamic_section = subprocess.run(["readelf", "-d", str(dynamic)], capture_output=True,
                                     text=True, check=True).stdout
    assert re.search(r"R(UN)?PATH.*\[" + re.escape(str(libdir)), dynamic_section)
    ldd = subprocess.run(["ldd", str(dynamic)], capture_output=True, text=True,
                         check=True).stdout
    assert re.search(r"libmariadb\.so\.3 => " + re.escape(str(libdir)) + r"/libmariadb\.so\.3",
                     ldd), ldd

    static_section = subprocess.run(["readelf", "-d", str(static)], capture_output=True,
                                    text=True, check=True).stdout
    assert "libmariadb" not in static_section
    # Both binaries really work against a server.
    for binary in (dynamic, static):
        run_ok(binary, "--socket", server.socket, "--engines", "memory", "--binlog", "off",
               "--apis", "prepared,nonblocking", "--rows", 5, cwd=tmp_path)


@pytest.mark.parametrize("include, lib", [("include/mysql", "lib"),                          # standalone (bintar)
                                          ("include/mariadb", "lib/x86_64-linux-gnu")])     # Debian's (-DDEB)
def test_a_staged_tree_of_either_layout_is_the_client_library_trained(tmp_path, include, lib):
    """-DMARIADB_ROOT=<stage>, as the training builds it: the headers and the library of the stage, whichever
    layout its configuration installs, never the system's."""
    require_prerequisites()
    system_libdir = Path(subprocess.run(["mariadb_config", "--variable=pkglibdir"],
                                        capture_output=True, text=True, check=True).stdout.strip())
    system_include = subprocess.run(["mariadb_config", "--variable=pkgincludedir"],
                                    capture_output=True, text=True, check=True).stdout.strip()
    stage = tmp_path / "stage"
    (stage / include).parent.mkdir(parents=True)
    (stage / include).symlink_to(system_include)
    (stage / lib).mkdir(parents=True)
    for name in ("libmariadb.so.3", "libmariadbclient.a"):
        shutil.copy(system_libdir / name, stage / lib / name)
    (stage / lib / "libmariadb.so").symlink_to("libmariadb.so.3")
    (stage / "bin").mkdir()
    (stage / "bin" / "mariadb_config").symlink_to(shutil.which("mariadb_config"))
    dynamic, _ = build(tmp_path / "build", f"-DMARIADB_ROOT={stage}")
    ldd = subprocess.run(["ldd", str(dynamic)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"libmariadb\.so\.3 => " + re.escape(str(stage / lib)) + r"/libmariadb\.so\.3", ldd), ldd
