"""`ops-report users` and `ops-report digest` as text: the users' efficiency table with the `ops-report job`
lines of their most wasteful runs, and the digest's Markdown message per user over a waste threshold. Every
figure is a column of sql/marts/user_efficiency.sql or wasteful_users.sql; this module only words them."""

from __future__ import annotations

import re

# the table's columns, in order (json and csv: every column of the mart)
TABLE_COLUMNS = ("rank", "user", "grade", "runs", "gpu_h", "gpu_util_pct", "sm_active", "tensor_active",
                 "dram_active", "gpu_mem_eff", "cpu_eff", "mem_eff", "idle_gpu_h", "unbusy_gpu_h")

# what each waste reason asks the user to change (the reasons are wasteful_users.sql's)
_ADVICE = {
    "idle": "Runs held GPUs that stayed idle for an hour or more. End interactive sessions and jobs that wait "
            "on something else (`scancel`), and ask only for the GPUs the code uses (`--gpus`).",
    "low_util": "The GPUs were busy less than the threshold of the time they were held. Check that the data "
                "loading keeps up (more CPU workers, data on local or parallel storage), that every rank uses "
                "its GPU, and try fewer GPUs: the same work on fewer GPUs is often as fast.",
    "low_gpu_memory": "The runs used little of their GPUs' memory: a larger batch, or fewer or smaller GPUs "
                      "(a MIG slice), would do the same work with less.",
}
_REASON_TEXT = {"idle": "idle GPU-hours", "low_util": "low GPU utilization", "low_gpu_memory": "low GPU memory use"}


def _num(v, digits: int = 1) -> str:
    return "–" if v is None or v != v else f"{v:,.{digits}f}"


def _pct(frac) -> str:
    return "–" if frac is None or frac != frac else f"{100 * frac:.1f}%"


def job_lines(rows: list[dict], cluster: str) -> list[str]:
    """One `ops-report job` line per listed wasteful run, with its user and unbusy GPU-hours."""
    out = []
    for r in rows:
        for jid, waste in zip(r["worst_job_ids"] or [], r["worst_waste_gpu_h"] or []):
            out.append(f"ops-report job {jid} --cluster {cluster}   # {r['user']}: {_num(waste)} unbusy GPU-h")
    return out


def users_frame(df, fmt: str):
    """``df`` (user_efficiency's rows) as the command prints it in ``fmt``: the table's columns for a table;
    every column for json; for csv, every column with the runs' lists as space-separated fields."""
    if fmt == "json":
        return df
    if fmt == "csv":  # (the string list's dtype, taken from the frame: no polars import for a type)
        return df.with_columns(df["worst_job_ids"].list.join(" "),
                               df["worst_waste_gpu_h"].round(3).cast(df["worst_job_ids"].dtype).list.join(" "))
    return df.select(TABLE_COLUMNS)


def job_lines_text(df, cluster: str) -> str:
    """The `ops-report job` lines under the table (none: nothing)."""
    lines = job_lines(df.to_dicts(), cluster)
    return ("\nMost wasteful runs (unbusy GPU-hours: held, telemetry seen, not busy):\n" + "\n".join(lines) + "\n"
            if lines else "")


def _file_name(user: str) -> str:
    """A file name for ``user`` (a Slurm user name is a POSIX login; anything else is replaced)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", user).lstrip(".") or "_"


def digest_message(r: dict, *, cluster: str, start: str, end: str, thresholds: dict) -> str:
    """The Markdown message to one user over a threshold (a row of wasteful_users)."""
    why = ", ".join(_REASON_TEXT[x] for x in r["reasons"])
    lines = [f"# GPU use of {r['user']} on {cluster}, {start} to {end}", "",
             f"Your GPU jobs in these days were flagged for: **{why}**.", "",
             "| figure | yours | threshold |", "|---|---|---|",
             f"| runs | {r['runs']} | |",
             f"| GPU-hours held | {_num(r['gpu_h'])} | |",
             f"| GPU utilization (pooled over GPU-hours) | {_num(r['gpu_util_pct'])}% | "
             f"under {thresholds['waste_util_pct']:g}% flags |",
             f"| GPU memory used (peak of the GPUs' memory) | {_pct(r['gpu_mem_eff'])} | "
             f"under {_pct(thresholds['waste_gpu_mem_eff'])} flags |",
             f"| CPU efficiency (CPU time ÷ CPUs × time) | {_pct(r['cpu_eff'])} | |",
             f"| memory efficiency (peak ÷ requested) | {_pct(r['mem_eff'])} | |",
             f"| GPU-hours of idle runs ({r['idle_runs']} runs) | {_num(r['idle_gpu_h'])} | "
             f"{thresholds['waste_idle_gpu_h']:g} or more flags |",
             f"| GPU-hours held but not busy | {_num(r['unbusy_gpu_h'])} | |",
             f"| grade (A best, F worst) | {r['grade'] or '–'} | |", "",
             "Your runs that wasted the most GPU-hours (see each with the command):", ""]
    lines += [f"- `{line.split('   #')[0]}`: {_num(w)} GPU-hours held and not busy"
              for line, w in zip(job_lines([r], cluster), r["worst_waste_gpu_h"] or [])]
    lines += ["", "What to change:", ""] + [f"- {_ADVICE[x]}" for x in r["reasons"]] + [""]
    return "\n".join(lines)


def digest_files(rows: list[dict], **kw) -> dict[str, str]:
    """{file name: message} per user, ``<user>.md``."""
    return {f"{_file_name(r['user'])}.md": digest_message(r, **kw) for r in rows}
