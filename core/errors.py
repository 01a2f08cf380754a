"""The one error type meant for the operator."""


class OpsError(Exception):
    """An error meant for the operator: printed as one line, no traceback."""
