"""Response-time percentiles from sysbench's latency histogram (pgo/bench/sysbench.py).

p95 and p99 of one run come from one histogram, so p99 is never below p95; the percentile
is computed as sysbench computes its own, which a real (tiny, CPU-only) sysbench run checks.
"""

import shutil
import subprocess

import pytest

from pgo.bench.sysbench import histogram, histogram_percentile, parse

# sysbench --histogram's table and summary, shortened from an oltp_read_only run.
OUTPUT = """\
Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       2.001 |****                                     40
       2.106 |****************************************  400
       2.217 |*********************                    210
       2.334 |**********                               100
       2.457 |***                                      30
       2.586 |*                                        10
       2.722 |                                         5
       9.734 |                                         5

SQL statistics:
    transactions:                        800    (79.98 per sec.)
    ignored errors:                      0      (0.00 per sec.)
Latency (ms):
         95th percentile:                        2.46
"""


def test_percentiles_come_from_the_histogram():
    counts = histogram(OUTPUT)
    assert sum(counts.values()) == 800 and counts[9.734] == 5
    # 95% of 800 = 760: 40 + 400 + 210 + 100 = 750 < 760 <= 780.
    assert histogram_percentile(counts, 95) == 2.457
    # 99% of 800 = 792: reached at 2.722 (795).
    assert histogram_percentile(counts, 99) == 2.722
    assert histogram_percentile(counts, 100) == 9.734
    assert histogram_percentile(counts, 50) == 2.106


def test_a_run_with_a_histogram_keeps_it_and_a_run_without_has_none():
    run = parse(OUTPUT)
    assert run["latency_ms"] == 2.46 and run["histogram"] == histogram(OUTPUT)
    assert parse(OUTPUT.split("SQL statistics:")[1])["histogram"] == {}


def test_p99_is_never_below_p95_of_the_same_histogram():
    counts = histogram(OUTPUT)
    for drop in counts:
        thinned = counts.copy()
        thinned[drop] = 1
        assert histogram_percentile(thinned, 99) >= histogram_percentile(thinned, 95)


def test_an_empty_histogram_has_no_percentile():
    with pytest.raises(ValueError):
        histogram_percentile(histogram(""), 95)


@pytest.mark.parametrize("percentile", [95, 99])
def test_the_percentile_is_computed_as_sysbench_computes_it(percentile):
    if shutil.which("sysbench") is None:
        pytest.fail("sysbench is needed: apt-get install sysbench")
    output = subprocess.run(["sysbench", "cpu", "--histogram=on", "--events=400", "--time=0", "--threads=1",
                             "--cpu-max-prime=5000", f"--percentile={percentile}", "run"],
                            capture_output=True, text=True, check=True, timeout=60).stdout
    own = float(output.split(f"{percentile}th percentile:")[1].split()[0])
    assert own > 0
    assert histogram_percentile(histogram(output), percentile) == pytest.approx(own, abs=0.006)
