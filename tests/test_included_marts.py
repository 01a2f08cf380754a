"""A mart included in another (``{{mart name}}``) is inlined without its final ORDER BY: its rows are a set to
the query that reads them (core/sqlfiles.unordered). What may not change: an ORDER BY that a LIMIT or WITH FILL
depends on, one inside parentheses (a window, a CTE, a subquery), quotes or comments, and the rows."""

from __future__ import annotations

import pytest

from ops_warehouse.sqlfiles import sql_query, unordered


@pytest.mark.parametrize("query,want", [
    ("SELECT a FROM t ORDER BY a", "SELECT a FROM t"),
    ("SELECT a FROM t\nORDER BY a DESC, b\nSETTINGS join_use_nulls = 1", "SELECT a FROM t\nSETTINGS join_use_nulls = 1"),
    # kept: the order decides which rows come, or what is filled in
    ("SELECT a FROM t ORDER BY a LIMIT 3", "SELECT a FROM t ORDER BY a LIMIT 3"),
    ("SELECT a FROM t ORDER BY a WITH FILL", "SELECT a FROM t ORDER BY a WITH FILL"),
    # inside parentheses, quotes and comments: not the query's last clause
    ("WITH x AS (SELECT a FROM t ORDER BY a) SELECT a, row_number() OVER (ORDER BY a) FROM x",
     "WITH x AS (SELECT a FROM t ORDER BY a) SELECT a, row_number() OVER (ORDER BY a) FROM x"),
    ("SELECT 'x) ORDER BY y' AS s FROM t", "SELECT 'x) ORDER BY y' AS s FROM t"),
    ("SELECT a, -- the cluster's (share\n b FROM t ORDER BY a", "SELECT a, -- the cluster's (share\n b FROM t"),
    # an ORDER BY of the first query of a UNION orders that query only, and is left as it is
    ("SELECT a FROM t ORDER BY a UNION ALL SELECT b FROM u", "SELECT a FROM t ORDER BY a UNION ALL SELECT b FROM u"),
])
def test_only_the_final_order_of_the_whole_result_goes(query, want):
    assert unordered(query) == want


def test_the_engine_gives_the_same_rows_and_the_same_top_rows(wh):
    # through the product's engine session (the wh fixture), not chdb.query: chDB holds one embedded server a
    # process, so a stateless query after another module's on-disk warehouse was refused ("already initialized")
    ordered = "SELECT number % 7 AS k, number AS v FROM numbers(50) ORDER BY k DESC, v"
    top = "SELECT number AS v FROM numbers(50) ORDER BY v DESC LIMIT 3"

    def rows(q):
        return sorted(",".join(map(str, r)) for r in wh.query_rows(q))

    assert rows(f"SELECT * FROM ({unordered(ordered)})") == rows(ordered) and len(rows(ordered)) == 50
    assert rows(f"SELECT * FROM ({unordered(top)})") == ["47", "48", "49"]


def test_an_including_mart_reads_its_included_marts_unordered_and_a_limited_one_ordered():
    goodput = sql_query("marts/goodput.sql")
    # campaigns' own ORDER BY (its report rows, largest first) is not in goodput's text; hung_jobs' neither
    assert "ORDER BY gpu_h DESC, first_start_ts, user, job_name" in sql_query("marts/campaigns.sql")
    assert "ORDER BY gpu_h DESC, first_start_ts, user, job_name" not in goodput
    assert "ORDER BY hung_gpu_h DESC" not in goodput
    # goodput's own order stays: it is the query asked for, not an included one
    assert goodput.rstrip().endswith("ORDER BY project_key")
