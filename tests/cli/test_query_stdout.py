"""`mafiabench query --csv -` writes the CSV to standard output (it wrote a file named `-`; issue 40 item 5)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb


def test_csv_dash_is_standard_output(tmp_path: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    con = duckdb.connect(str(warehouse))
    con.execute("create table t as select * from (values (1, 'x, quoted'), (2, 'y')) v(a, b)")
    con.close()
    out = subprocess.run([sys.executable, "-m", "mafiabench.cli", "query", "select * from t order by a",
                          "--warehouse", str(warehouse), "--csv", "-"],
                         cwd=tmp_path, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout == 'a,b\n1,"x, quoted"\n2,y\n'
    assert not (tmp_path / "-").exists()
