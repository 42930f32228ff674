"""`accelopt dashboard`: a local, read-only web app over the event log.

The server folds events with `replay.fold.RunView` (from the JetStream log for live runs,
from exported logs under the runs root for finished ones) and sends ready-made view models
as JSON (`models`), pushed to the page by server-sent events (`server`); the page
(`static/`) only renders them. See docs/dashboard.md.
"""
