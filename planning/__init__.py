"""Capacity planning: a backfill scheduler that replays a job history on a changed cluster (backfill.py).
No warehouse and no engine here: analytics/whatif.py reads the history, replays it and writes the result."""
