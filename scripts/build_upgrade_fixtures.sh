#!/usr/bin/env bash
# Rebuild tests/data/upgrade/: a small site's raw files and the warehouse an earlier version of this repository
# loaded them into, for tests/test_upgrade.py (today's `ops-report init` on that warehouse must give the report a
# fresh load of the same files gives). Each version is installed in its own venv from a git worktree; chDB is
# pinned to the version of the project's venv (no lock file in those commits: an old install took the newest).
#
#   scripts/build_upgrade_fixtures.sh                  # both fixtures
#   scripts/build_upgrade_fixtures.sh 95a5e297         # one
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
py=${OPS_VENV:-$repo/.venv}/bin/python
out=$repo/tests/data/upgrade
# the last commit of 2026-11-30 and of 2026-12-02 (git log --date=iso)
commits=("${@:-57bdd704 95a5e297}")
commits=(${commits[@]})

mkdir -p "$out"
"$py" -m pip freeze --exclude-editable | grep -iv '^ops.warehouse' > /tmp/upgrade-constraints.txt
for sha in "${commits[@]}"; do
    wt=/tmp/wt-$sha venv=/tmp/venv-$sha work=/tmp/upgrade-$sha
    [ -d "$wt" ] || git -C "$repo" worktree add -f "$wt" "$sha"
    [ -x "$venv/bin/ops-report" ] || {
        "$py" -m uv venv -q -p "$py" "$venv"
        "$py" -m uv pip install -q --python "$venv/bin/python" -c /tmp/upgrade-constraints.txt "$wt"
    }
    rm -rf "$work" && mkdir -p "$work"
    cd "$work"
    # 6 GPU nodes (7 with the generator's spare), 3 days, 40 jobs a day, half-hourly telemetry of every exporter
    "$venv/bin/ops-report" generate --out site --start 2026-10-01 --days 3 --jobs-per-day 40 --nodes 6 \
        --metrics-step 1800 --telemetry parquet --seed 5
    rm -rf site/truth
    printf '[projects]\n%s\n' "$(printf 'proj%s = "%s"\n' a A b B c C d D e E f F)" > site/config.toml
    export OPS_CONFIG=$work/site/config.toml OPS_WAREHOUSE=chdb://$work/warehouse
    "$venv/bin/ops-report" etl sacct site/sacct/sacct.psv
    "$venv/bin/ops-report" etl capacity --inventory site/inventory.csv --events site/slurm/events.psv \
        --reservations site/slurm/reservations.txt --cluster ai1
    "$venv/bin/ops-report" etl metrics --source file --file site/telemetry --from 2026-10-01 --to 2026-10-03 \
        --cluster ai1
    unset OPS_CONFIG OPS_WAREHOUSE
    tar -C "$work" -czf "$out/$sha.tar.gz" site warehouse
    ls -l "$out/$sha.tar.gz"
done
