"""A capture: its settings and plan (``link_plan``), the record stream's lifecycle (``capture``) and the
live view (``live``)."""
