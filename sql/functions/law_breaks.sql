-- The laws' comparisons (sql/checks/): whether a figure breaks "value ≤ bound" or "value = bound" by more than
-- the rounding of sums of floating-point GPU-seconds (1e-6 of the unit, or a billionth of the figure): a law
-- broken by 0.1 GPU-second is broken, one off in the 12th digit is not. An unknown figure (NULL) breaks
-- nothing: a law about it is not checked there.
CREATE OR REPLACE FUNCTION law_breaks_le {{on_cluster}} AS (value, bound) ->
    ifNull(value > bound + 1e-6 + 1e-9 * abs(bound), 0);
CREATE OR REPLACE FUNCTION law_breaks_eq {{on_cluster}} AS (value, bound) ->
    ifNull(abs(value - bound) > 1e-6 + 1e-9 * greatest(abs(value), abs(bound)), 0);
