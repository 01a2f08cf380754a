"""What each of the monthly report's charts (reports/charts.py) reads of the report: the keys of its input.

Kept apart from the charts (which import matplotlib) because a command that has not drawn yet reads it too:
the charts are drawn ahead, while the report's other marts are still being evaluated, as soon as these keys
are in (reports/charts_ahead.py), and a chart's input digest (charts.chart_key) is over these keys, so a chart
whose input is unchanged is not drawn again. A chart reads nothing of the report outside its keys here.
"""

INPUTS = {"capacity_timeline": ("utilization_daily", "scope", "project"), "size_shares": ("job_sizes",),
          "runtime_cdf": ("run_times",), "gpu_heatmap": ("gpu_heatmap",), "gantt": ("largest_jobs",),
          "failures": ("end_states", "xid_codes"), "waste": ("idle_gpu_users", "hung_jobs"),
          "energy": ("energy",),
          # (the model's curves: the cluster's failure rate and restart start-up, the campaigns' size floor)
          "goodput": ("goodput", "campaigns", "node_failures", "campaign_min_gpus"), "whatif": ("whatif",)}
