"""The run directory: ``layout`` (its files, the stores' item types, ``RunError``), ``stores`` (the
fixed-width stores read and appended, the write-behind thread), ``writer`` (``RunWriter``, the one
writer that owns every file of a run), ``reader`` (``Run``, ``load_run``, ``run_from_meta``: the one
reader, earlier formats and runs cut short included) and ``replay`` (raw.bin and stream.bin decoded
again, the events.csv of old runs). Each module imports only those listed before it."""
