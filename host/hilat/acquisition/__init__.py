"""A capture: its settings and plan (``settings``; the raw edges' rate against the link, ``link_plan``),
the record stream and its consumers (``stream``), the capture's lifecycle (``capture``), what it writes
at the end (``results``: meta.json, the summaries) and the live view (``live``)."""
