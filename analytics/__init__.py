"""The analytics layer: periods, the marts as functions, the analysts' API, the monthly report and exports.

Reads only: nothing here writes to the warehouse (the grains the marts read are kept up to date by the loads
in ops_warehouse.etl).
"""
