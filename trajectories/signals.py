"""What this app announces, so that the apps built on it can follow without it importing them."""

from __future__ import annotations

from django.dispatch import Signal

# The stored failure-signature hits of some runs were replaced (services.run_signatures_store, e.g.
# `detect_signatures`); sent inside its transaction with `run_ids`. The annotation app marks the
# statistics of the studies holding those runs not current (their signature figures read the hits).
signatures_replaced = Signal()

# Stored runs were read again from their files and their agents, events, files, metrics and outcomes
# replaced in place (services.run_reread, `import_trajectories --replace`); sent inside its transaction
# with `run_ids`. The annotation app marks the statistics of the studies holding those runs not current.
runs_replaced = Signal()
