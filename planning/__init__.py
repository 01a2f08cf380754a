"""Capacity planning: what-if scenarios (scenarios.py: the changes, load scaling, the replays in parallel) and
the backfill scheduler that replays a job history on a changed cluster (backfill.py). No warehouse and no
engine here: analytics/whatif.py reads the history from the marts and hands the replays back to the engine."""
