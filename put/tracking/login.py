"""A tracking server's refusal of the login (MLflow's basic-auth app: 401 without a login or with a wrong password,
403 for an account without the permission) as one line naming the server and what to set (docs/mlflow.md,
"Logins"). Not an outage: nothing is spooled, since a replay would meet the same refusal."""

from __future__ import annotations

import os

from put.errors import ServiceError

# MLflow's error codes for the two answers (mlflow/protos/databricks.proto), read off the exception it raises
REFUSALS = {"UNAUTHENTICATED": "refused the login (401)", "PERMISSION_DENIED": "refused the account's access (403)"}
USERNAME, PASSWORD = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"  # what MLflow's client sends


def login_refused(err: BaseException) -> ServiceError | None:
    """The refusal as the package's error, or None for any other error."""
    refusal = REFUSALS.get(str(getattr(err, "error_code", "")))
    if refusal is None:
        return None
    server = os.environ.get("MLFLOW_TRACKING_URI", "the tracking server")
    user = os.environ.get(USERNAME)
    login = f"as {user}" if user else f"with no login ({USERNAME} unset)"
    return ServiceError(f"MLflow at {server} {refusal} {login}: set {USERNAME} and {PASSWORD} to an account of the "
                        f"server with access to the experiment (docs/mlflow.md, \"Logins\")")
